/* feed-wait.h: a --wait woken by the event feed's long-poll (GET /v1/events?wait=...) rather
 * than a timed poll of the object it waits on, so a change shows at once and an idle wait
 * costs the server one parked connection instead of a GET a second. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "client/client.h"
#include "util/error.h"

typedef struct FeedWait {
    Client *cl;              /* borrowed */
    const char *type_prefix; /* the kind of event the waited object publishes: "request." */
    const char *object;      /* its "object" in those events: a request id, a node name */
    uint64_t cursor;         /* after the last event seen */
} FeedWait;

/* What one long-poll brought: from most to least telling. */
typedef enum FeedNews {
    FEED_MINE,  /* an event of the object waited on (or the cursor fell out of retention:
                 * something may have been missed) */
    FEED_KIN,   /* events of other objects of the same kind only (a queue moved) */
    FEED_OTHER, /* events of other kinds only */
    FEED_QUIET, /* the wait ended without an event the caller may see */
} FeedNews;

/* Take the feed's head as the cursor (every page). Call it before reading the object, so
 * that a change between the two still wakes the first wait. Returns 0 or a negative errno
 * with err set (an HTTP error: -EPROTO, its status in *ret_status when not NULL). */
int feed_wait_start(FeedWait *w, Client *cl, const char *type_prefix, const char *object,
                    long *ret_status, Error *err);

/* Wait up to wait_s seconds (0..60; 0 only looks) for events after the cursor and advance
 * it. Returns 0 with *ret what came, or a negative errno as feed_wait_start() does. */
int feed_wait_next(FeedWait *w, unsigned wait_s, FeedNews *ret, long *ret_status, Error *err);

/* The long-poll's length for a wait that must end by deadline_ms (cli_monotonic_ms(); 0: no
 * deadline), at most max_s: whole seconds, rounded up so the deadline is not polled early. */
unsigned feed_wait_seconds(int64_t now_ms, int64_t deadline_ms, unsigned max_s);

/* A call that failed because the server is away for a while, as it is across a restart
 * (refused connections, a connection cut off by its exit, -EIO once it answered before, or
 * the drain's 503; r: the call's result, status: its HTTP status or 0): while *away_ms stays
 * under max_ms, says so once ("einsora: <who>the server is away (...); <then>"), waits a
 * second, counts it in *away_ms and returns true, for the caller to try again. Otherwise
 * false: the failure is the caller's to report. The caller zeroes *away_ms on a success. */
bool feed_wait_out_away(int r, long status, const Error *err, int64_t *away_ms, int64_t max_ms,
                        const char *who, const char *then);

/* Say why a feed_wait_*() call failed (r, the status it gave, err); returns the exit code. */
int feed_wait_fail(int r, long status, const Error *err);
