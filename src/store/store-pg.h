/* store-pg.h: what the PostgreSQL backend offers beyond store.h: connections for the
 * leader's lease and a standby's LISTEN, and the fence on the leader's writes. */
#pragma once

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "store.h"

/* Connect with Einsora's defaults (a 5 s connect timeout unless conninfo says otherwise);
 * a malformed conninfo or an unreachable server gets a sentence. Notices are not printed. */
int store_pg_connect(const char *conninfo, PGconn **ret, Error *err);

/* Whether s is a PostgreSQL store. */
bool store_is_pg(const Store *s);

/* From now on every transaction of s first checks that the leader's epoch is still epoch
 * (0: no check) and fails with -ESTALE otherwise, so a deposed leader never commits. A
 * transaction left open longer than max_tx_ms (a paused leader's) is ended by PostgreSQL,
 * so it cannot hold up a takeover (0: no limit).
 * No-op on SQLite, which has a single server. */
void store_pg_set_fence(Store *s, uint64_t epoch, unsigned max_tx_ms);

/* A standby's replay (server/replay.c): a read-only transaction at one snapshot, so that
 * the records and events read until store_rollback() are one committed state. */
int store_pg_begin_snapshot(Store *s, Error *err);
/* The newest committed event's sequence (0: none), outside or inside a transaction. */
int store_pg_last_seq(Store *s, uint64_t *ret, Error *err);
