/* srv-helpers.h: start the real `einsora serve` on a free loopback port with a temporary
 * state file, make tokens, and call it over HTTP (the integration tests' harness). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "client/client.h"

typedef struct TestServer {
    char dir[64];    /* temporary directory with the state file */
    char state[128]; /* state file */
    char url[64];    /* http://127.0.0.1:PORT */
    pid_t pid;
    char *admin;          /* an admin token */
    const char *extra[8]; /* more `einsora serve` arguments, NULL-terminated */
} TestServer;

/* Make the temp dir and an admin token, then start the server. */
void ts_start(TestServer *ts);
/* (Re)start the server process on the existing state. */
void ts_spawn(TestServer *ts);
/* The same, on the port it had: as a restarted service comes back where its agents look. */
void ts_respawn_same_port(TestServer *ts);
/* SIGKILL (hard) or SIGTERM (clean) and wait. */
void ts_kill(TestServer *ts, bool hard);
/* Stop and remove the temporary files. */
void ts_stop(TestServer *ts);

/* `einsora token create` on the server's state; returns the secret (caller frees). */
char *ts_token(TestServer *ts, const char *user, const char *role, const char *nodes);

/* One call with the token; returns the status; *ret (may be NULL) gets the JSON answer. */
long ts_call(TestServer *ts, const char *token, const char *method, const char *path,
             const char *body, json_t **ret);
/* Same with an Idempotency-Key. */
long ts_call_key(TestServer *ts, const char *token, const char *method, const char *path,
                 const char *body, const char *key, json_t **ret);

/* GET every page of a list (`path` without query, e.g. "/v1/requests"), following the
 * `next` cursor until a page comes back empty; returns the concatenated array under `key`
 * (caller decrefs). A test never reads only the first page: a fast machine makes more. */
json_t *ts_list_all(TestServer *ts, const char *token, const char *path, const char *key);
/* "after=CURSOR&" for the page after `page` into buf: its `next`, an opaque string (paged
 * lists) or a number (the event feed); false when there is none (a paged list's last page). */
bool ts_next_query(json_t *page, char *buf, size_t size);

/* GET /metrics (no token); asserts 200 and returns the text (caller frees). */
char *ts_metrics(TestServer *ts);

/* POST /v1/requests as the admin; asserts 201 and returns the new request's id. */
long ts_submit(TestServer *ts, const char *body);
/* Poll the request until it is in `state` (a 60 s deadline, never a measure); returns its JSON
 * (caller decrefs). `where` (may be NULL) names what to look at when it never gets there. */
json_t *ts_wait_state(TestServer *ts, long id, const char *state, const char *where);

/* Register a datacenter node in container mode with n H100s, owned by `owner`. */
void ts_add_h100_node(TestServer *ts, const char *name, const char *owner, unsigned n);
/* Register a lab node with one consumer GPU on vfio that no reset check has passed yet, and
 * beat for its agent (admin): the fleet asks that agent for the check (R9). */
void ts_add_unchecked_gpu_node(TestServer *ts, const char *name);

/* The value of one sample of /metrics, named with its labels exactly as written
 * ("einsora_nodes", "x_count{route=\"GET /v1/...\"}"), in a fresh scrape; -1 when absent. */
double ts_metric(TestServer *ts, const char *sample);
