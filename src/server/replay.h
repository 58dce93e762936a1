/* replay.h: a standby's read-only replica of the committed state, and the reads it serves.
 *
 * A standby follows the leader's commits: it LISTENs on the channel the leader NOTIFYs at
 * each commit that appended events (the payload is the commit's last sequence), and also
 * polls the events table's last sequence every half lease, so a missed NOTIFY (a dropped
 * LISTEN session) is caught by the next poll. When the store holds events it has not
 * applied, it rebuilds its view: every record and event read in ONE read-only snapshot
 * transaction, loaded by the same state_load() a promotion runs but without its writes
 * (the waiting requests are queued in the view's private core only to show their queue
 * position and reason; nothing the view's core computes is ever written or published), and
 * swaps it in. Handlers then run on the view as they run on the leader's state, so a
 * standby's GET answers have the leader's bodies for the same committed state.
 *
 * Read-your-writes: before a read, a standby reads the store's last committed sequence and
 * waits (up to half a lease) until its view holds it; a standby that cannot catch up in
 * that time redirects the read to the leader. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/server-internal.h"
#include "util/strutil.h"

typedef struct HttpCtx HttpCtx;
typedef struct Replay Replay;

/* A standby starts following (a thread of its own); no-op for a server without a leader. */
int replay_start(Server *s, Error *err);
/* Stop following (promotion: the full load replaces the replay). The last view keeps
 * answering reads until the replica leads. */
void replay_stop(Server *s);
/* Once this replica leads: free the last view (its own state now answers). */
void replay_drop_view(Server *s);
/* Stop and free everything (views still in use are freed by their last reader). */
void replay_free(Server *s);
/* Whether c is a read this standby answers itself (a GET of the served routes). */
bool replay_serves(const HttpCtx *c);
/* Before a handler (api_dispatch): on a standby, for a served read, wait until the view
 * holds every commit made before this call and point c->s at it; false when c was answered
 * instead (a redirect to the leader). True with c->s unchanged otherwise. */
bool replay_enter(HttpCtx *c);
/* After the handler: give the view back and point c->s at home again. */
void replay_leave(HttpCtx *c, Server *home);
/* The newest sequence a long-poll on s may already have seen (http.c's race check). */
uint64_t replay_seen(Server *s);
/* einsora_replay_* for /metrics; applied sequence and lag for /readyz. */
void replay_metrics(Server *s, StrBuf *b);
void replay_readyz(Server *s, json_t *j);
