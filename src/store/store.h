/* store.h: the control plane's durable state behind one narrow interface.
 *
 * The server keeps its working state in memory and writes every change through this
 * interface inside a transaction; only a committed transaction is ever acknowledged (R16).
 * Rows are small: indexed columns plus one JSON document each, so both backends (embedded
 * SQLite, the default; PostgreSQL, for several replicas) implement the same handful of calls
 * (store-backend.h). All calls on one Store come from one thread at a time (the server's
 * writer thread, or startup). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "util/error.h"
#include "util/macro.h"

typedef struct Store Store;

/* Open the store at location and apply the numbered schema migrations it has not seen yet.
 * A location that is a PostgreSQL URI ("postgresql://...", "postgres://...") or a libpq
 * conninfo ("host=... dbname=...") opens PostgreSQL; anything else is an SQLite state file,
 * created when missing and switched to WAL. A PostgreSQL database is claimed by one Einsora
 * site: site is recorded on first open and a database that belongs to another site is
 * refused, as is one of a newer schema version. NULL (the token verbs, store_open()): any
 * site -- the database's own, and none claimed on a fresh one, so that a token made before
 * the first `serve --site NAME` does not claim the database for another site. */
int store_open(const char *location, Store **ret, Error *err);
int store_open_site(const char *location, const char *site, Store **ret, Error *err);
/* Whether location names a PostgreSQL database rather than an SQLite file. */
bool store_location_is_postgresql(const char *location);
void store_close(Store *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(Store *, store_close);
/* "sqlite" or "postgresql". */
const char *store_backend(const Store *s);
/* The schema version the file is at after store_open(). */
int store_schema_version(Store *s);

/* Begin a write transaction (SQLite: BEGIN IMMEDIATE, taking the write lock now so a
 * transaction never fails half-way on a lock). One transaction at a time; commit returns
 * only once the transaction is durable (SQLite synchronous=FULL, PostgreSQL
 * synchronous_commit). PostgreSQL: a lost connection is reopened (with backoff) by the next
 * begin; until then begin fails with -ENOTCONN and a sentence, and nothing has changed. */
int store_begin(Store *s, Error *err);
int store_commit(Store *s, Error *err);
void store_rollback(Store *s);

/* Tokens are stored by the hex SHA-256 of the secret; the secret itself never is. role is
 * "admin", "owner", "trusted", "user" or "node"; nodes is a comma-separated list (owner:
 * the nodes owned; node: the one node the agent speaks for), or NULL. */
typedef struct StoreToken {
    char *user;
    char *role;
    char *nodes;
    int64_t expires_ms; /* wall-clock ms after which the token is refused; 0: never */
} StoreToken;
void store_token_done(StoreToken *t);
int store_token_add(Store *s, const char *hash_hex, const char *user, const char *role,
                    const char *nodes, Error *err);
/* -ENOENT when no token has this hash. */
int store_token_lookup(Store *s, const char *hash_hex, StoreToken *ret, Error *err);

/* Nodes: the node's JSON description (the shape of POST /v1/nodes), keyed by name. */
int store_node_put(Store *s, const char *name, const char *json, Error *err);
int store_node_delete(Store *s, const char *name, Error *err);
typedef int (*StoreNodeFn)(const char *name, const char *json, void *userdata);
int store_node_foreach(Store *s, StoreNodeFn fn, void *userdata, Error *err);

/* Requests: the server's request record as JSON, with the columns lookups need. Rows come
 * back in id order, which is submission order. */
typedef struct StoreRequest {
    uint64_t id;
    const char *user;
    const char *idem_key; /* NULL when the client sent none */
    const char *state;
    const char *json;
} StoreRequest;
int store_request_put(Store *s, const StoreRequest *r, Error *err);
typedef int (*StoreRequestFn)(const StoreRequest *r, void *userdata);
int store_request_foreach(Store *s, StoreRequestFn fn, void *userdata, Error *err);

/* Events: the change feed, by sequence number (strictly increasing, gap-free). */
typedef struct StoreEvent {
    uint64_t seq;
    int64_t time_ms;
    const char *actor;
    const char *type;
    const char *object;
    const char *json; /* the event's data */
} StoreEvent;
int store_event_append(Store *s, const StoreEvent *e, Error *err);
typedef int (*StoreEventFn)(const StoreEvent *e, void *userdata);
int store_event_foreach(Store *s, uint64_t after, StoreEventFn fn, void *userdata, Error *err);

/* Fleet records (migration 2): agents' heartbeat settings, mode switches in progress and the
 * work queued for agents, each a JSON document under a key such as "switch/NODE" or "task/7".
 * Rows come back in key order. */
int store_fleet_put(Store *s, const char *key, const char *json, Error *err);
int store_fleet_delete(Store *s, const char *key, Error *err);
int store_fleet_foreach(Store *s, StoreNodeFn fn, void *userdata, Error *err);

/* ---- Tokens that expire, listed and revoked while the server runs.
 * The server reads a token from the store on every call, so a revocation or an expiry takes
 * effect at once. Schema: tokens gained a nullable expires_ms column (migration 3). ---- */
/* Like store_token_add(); expires_ms 0: never. */
int store_token_add_expiring(Store *s, const char *hash_hex, const char *user, const char *role,
                             const char *nodes, int64_t expires_ms, Error *err);
/* Every token, by user; the StoreToken's strings are valid during the call only. */
typedef int (*StoreTokenFn)(const char *hash_hex, const StoreToken *t, void *userdata);
int store_token_foreach(Store *s, StoreTokenFn fn, void *userdata, Error *err);
/* Delete the one token whose hash starts with hash_prefix (8 to 64 hex digits): -ENOENT when
 * none does, -EEXIST when several do, -EINVAL for a malformed prefix. */
int store_token_revoke(Store *s, const char *hash_prefix, Error *err);
/* Retention: delete ended requests (their idempotency keys with them) whose record was last
 * updated before before_ms, and the events before before_ms (a prefix of the feed), keeping
 * the newest request and event so ids and seqs never restart. Inside a transaction. */
int store_prune(Store *s, int64_t before_ms, Error *err);
/* The request's idempotency key left the server's memory with the request (retention): the
 * row keeps the request but no longer holds the key, so the client may use it again. */
int store_request_forget_key(Store *s, uint64_t id, Error *err);
