/* client.h: a small HTTP/JSON client of the control plane's API (libcurl), for the CLI,
 * tests and the benchmark. One Client per thread; it keeps its connection alive. */
#pragma once

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>

#include "util/error.h"

typedef struct Client Client;

/* Percent-encode s for use as one path segment or one query value: every byte but
 * A-Z a-z 0-9 - . _ ~ is escaped, so user input can never add a segment, a "..", a query or
 * a fragment. Returns a new string, NULL when out of memory. */
char *client_escape(const char *s);

/* server: "http://HOST:PORT" or "HOST:PORT", or several such separated by commas: the
 * replicas of one control plane. With several, a call that a replica could not take (refused
 * connection, a standby's 503, any failure of a read or of a change with an idempotency key)
 * is tried at the next one for up to 30 s; a standby's 307 is followed. token may be NULL
 * (and may not hold a control character such as CR or LF: -EINVAL, so no input can add a
 * header). */
int client_new(const char *server, const char *token, Client **ret, Error *err);
void client_free(Client *c);

/* One call. body (may be NULL) is sent as JSON; idem_key (may be NULL) as Idempotency-Key
 * (-EINVAL when it holds a control character). path is sent as it is: escape what comes
 * from users with client_escape().
 * On any HTTP answer returns 0 with the status and the parsed JSON body (NULL when it is
 * not JSON). A transport failure (refused, timeout) is -ECONNREFUSED / -ETIMEDOUT / -EIO
 * with a sentence. */
int client_call(Client *c, const char *method, const char *path, json_t *body, const char *idem_key,
                long *ret_status, json_t **ret_json, Error *err);
/* Same with a raw body (tests: malformed input) and the raw answer text. */
int client_call_raw(Client *c, const char *method, const char *path, const char *body,
                    size_t body_len, const char *idem_key, long *ret_status, char **ret_text,
                    Error *err);

/* Trust the CA certificates in path (PEM) for https servers, instead of the
 * system's (a control plane with its own or a self-signed certificate). */
int client_set_ca_file(Client *c, const char *path, Error *err);

/* One more header on every call (an agent's WIRE_AGENT_HEADER); -EINVAL when the name or the
 * value holds a control character or the name a ':'. */
int client_set_header(Client *c, const char *name, const char *value, Error *err);

/* A call in flight (a long poll) gives up within about a second once *flag is set, with
 * -EIO (a daemon's stop signal); NULL: never. */
void client_set_abort(Client *c, volatile sig_atomic_t *flag);
/* The first of c's servers that a token would reach in clear: plain http:// to an address that
 * is not this machine's loopback (NULL when none), for the caller to warn about. */
const char *client_clear_server(const Client *c);
/* Whether an answer says the control plane has no such route (one older than the caller):
 * 405, or 404 not_found "No such endpoint: ...", not a 404 about a missing object. */
bool client_route_unknown(long status, json_t *answer);
