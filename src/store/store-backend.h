/* store-backend.h: what each store backend implements; store.c dispatches store.h to it.
 *
 * Adding a call to store.h means: a field here, the same function in store-sqlite.c and
 * store-pg.c (in the same place in each ops table), and a one-line dispatcher in store.c. */
#pragma once

#include "store.h"

typedef struct StoreOps {
    const char *name; /* "sqlite", "postgresql" */
    void (*close)(Store *s);
    int (*begin)(Store *s, Error *err);
    int (*commit)(Store *s, Error *err);
    void (*rollback)(Store *s);
    int (*token_add)(Store *s, const char *hash_hex, const char *user, const char *role,
                     const char *nodes, Error *err);
    int (*token_lookup)(Store *s, const char *hash_hex, StoreToken *ret, Error *err);
    int (*node_put)(Store *s, const char *name, const char *json, Error *err);
    int (*node_delete)(Store *s, const char *name, Error *err);
    int (*node_foreach)(Store *s, StoreNodeFn fn, void *userdata, Error *err);
    int (*request_put)(Store *s, const StoreRequest *r, Error *err);
    int (*request_foreach)(Store *s, StoreRequestFn fn, void *userdata, Error *err);
    int (*event_append)(Store *s, const StoreEvent *e, Error *err);
    int (*event_foreach)(Store *s, uint64_t after, StoreEventFn fn, void *userdata, Error *err);
    int (*fleet_put)(Store *s, const char *key, const char *json, Error *err);
    int (*fleet_delete)(Store *s, const char *key, Error *err);
    int (*fleet_foreach)(Store *s, StoreNodeFn fn, void *userdata, Error *err);
    /* Expiring tokens, listed and revoked; retention. */
    int (*token_add_expiring)(Store *s, const char *hash_hex, const char *user, const char *role,
                              const char *nodes, int64_t expires_ms, Error *err);
    int (*token_foreach)(Store *s, StoreTokenFn fn, void *userdata, Error *err);
    int (*token_revoke)(Store *s, const char *hash_prefix, Error *err);
    int (*prune)(Store *s, int64_t before_ms, Error *err);
    int (*request_forget_key)(Store *s, uint64_t id, Error *err);
} StoreOps;

/* The schema version both backends' numbered migrations bring a store to. */
#define STORE_SCHEMA_VERSION 3

/* Every backend's handle starts with this. */
struct Store {
    const StoreOps *ops;
    int version; /* the schema version after open */
};

int store_sqlite_open(const char *path, Store **ret, Error *err);
int store_pg_open(const char *conninfo, const char *site, Store **ret, Error *err);
