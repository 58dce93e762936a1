/* conn-deadline.h: a deadline for each request's headers, however slowly they trickle.
 *
 * libmicrohttpd's idle timeout restarts on every byte, so a client that sends one header
 * byte a second would hold its connection (and a slot of its address's limit) forever. Every
 * connection is registered here when it opens; from then until its request's headers are
 * complete (and again between two requests of a kept-alive connection) it has deadline_ms,
 * after which a watcher thread shuts its socket down, which libmicrohttpd then sees as a
 * client gone and cleans up in its own thread. */
#pragma once

#include <microhttpd.h>
#include <stdint.h>

#include "util/error.h"

typedef struct ConnDeadline ConnDeadline;

int conn_deadline_new(int64_t deadline_ms, ConnDeadline **ret, Error *err);
/* Stop the watcher (after MHD_stop_daemon: no connection is left). NULL is fine. */
void conn_deadline_free(ConnDeadline *w);
/* MHD_OPTION_NOTIFY_CONNECTION's callback; its cls is the ConnDeadline. */
void conn_deadline_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code);
/* The request's headers are complete: its connection has no header deadline now. */
void conn_deadline_headers_done(struct MHD_Connection *conn);
/* The request was answered: a kept-alive connection's next headers get a new deadline. */
void conn_deadline_request_done(struct MHD_Connection *conn);
/* Connections shut down so far for a missed deadline (for /metrics and tests). */
uint64_t conn_deadline_expired(const ConnDeadline *w);
