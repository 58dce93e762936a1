/* longpoll.h: long-polls of the event feed parked without a thread each.
 *
 * A GET /v1/events?wait=N that finds nothing new suspends its libmicrohttpd connection and
 * parks it here. It is resumed (and then answers) when an event it may see is published,
 * when its deadline passes, or at once when its client hangs up, so a follower that went
 * away costs nothing. Publishing an event wakes only the waiters that may see it: the
 * admins' and those of the event's user; a node's work polls (parked apart) wake only for
 * the events that may change that node's work. One thread watches the parked sockets (epoll) and
 * the deadlines. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "util/error.h"

struct MHD_Connection;
typedef struct LongPoll LongPoll;

int longpoll_new(LongPoll **ret, Error *err);
/* Resume every parked connection and stop the thread (before MHD_stop_daemon). */
void longpoll_free(LongPoll *lp);
/* Park conn, which the caller has just suspended, until deadline_ms (CLOCK_MONOTONIC).
 * user: whose events it may see (NULL: an admin, all). Returns 0, or a negative errno after
 * resuming conn itself. */
int longpoll_park(LongPoll *lp, struct MHD_Connection *conn, const char *user, int64_t deadline_ms);
/* Park a work poll of `node` (GET /v1/nodes/{name}/work): only events that may change that
 * node's work resume it (longpoll_note_node()), not every event. */
int longpoll_park_node(LongPoll *lp, struct MHD_Connection *conn, const char *node,
                       int64_t deadline_ms);
/* An event appended now (visible at its publish) may change node's work (NULL: any node's):
 * the next longpoll_notify() resumes that node's work polls too. A noted event that is rolled
 * back wakes them with the next publish instead: a spurious wake-up, which looks again. */
void longpoll_note_node(LongPoll *lp, const char *node);
/* Resume conn if it is parked (a no-op otherwise). */
void longpoll_wake(LongPoll *lp, struct MHD_Connection *conn);
/* An event of `user` (NULL: admins only) was published: resume those who may see it, and the
 * work polls of the nodes noted since the last call. */
void longpoll_notify(LongPoll *lp, const char *user);
/* Resume every parked connection (a draining shutdown: each answers what it has). */
void longpoll_wake_all(LongPoll *lp);
/* Connections parked now (metrics, tests). */
size_t longpoll_count(LongPoll *lp);
