/* leader.h: one leader among several `einsora serve` replicas sharing a PostgreSQL store.
 *
 * The replicas hold an election through PostgreSQL itself: a lease row (einsora_leader) that
 * a standby may take only once it has expired, bumping the epoch. The new leader fences its
 * store with that epoch (store_pg_set_fence), so a deposed leader that wakes up late cannot
 * commit, then loads the state, re-checks the invariants and only then serves. A standby
 * answers reads from its replay of the leader's commits (replay.h) and every other API call
 * with 307 and the leader's URL (clients follow it or fail over to the next URL they were
 * given); /healthz, /readyz and /metrics it answers itself. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "server/server-internal.h"
#include "util/strutil.h"

typedef struct HttpCtx HttpCtx;

#define LEADER_LEASE_MS_DEFAULT 3000

/* With a PostgreSQL store, before serving: this replica is a standby from now on. Not called
 * for SQLite (one server, always the leader). */
int leader_init(Server *s, Error *err);
/* Once listening on port: campaign in a thread of its own; the writer is started once this
 * replica leads. */
int leader_start(Server *s, uint16_t port, Error *err);
/* Stop campaigning (and renewing), and the writer if this replica led. */
void leader_stop(Server *s);
bool server_is_leader(Server *s);
/* For a standby: answer c (307 to the leader, or 503 while none is known) and return true;
 * false when the request should go on to the API (also a read the standby serves itself). */
bool leader_gate(HttpCtx *c);
/* Answer c with 307 to the leader (503 while none is known): a call a standby does not
 * answer itself. */
void leader_redirect(HttpCtx *c);
/* role, epoch and takeovers for /metrics. */
void leader_metrics(Server *s, StrBuf *b);
/* The "role" (and "epoch") members of /readyz. */
void leader_readyz(Server *s, json_t *j);
/* Whether this leader's last lease renewal found PostgreSQL away (changes cannot commit). */
bool leader_store_away(Server *s);
