/* store.c: store.h's calls, dispatched to the backend the location names. */
#include "store-backend.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

bool store_location_is_postgresql(const char *location) {
    if (!location)
        return false;
    if (strncmp(location, "postgresql://", 13) == 0 || strncmp(location, "postgres://", 11) == 0)
        return true;
    /* A conninfo starts "keyword=" (host=, dbname=, service=...); a state file whose name
     * looks like that can still be given as ./name. */
    size_t n = strspn(location, "abcdefghijklmnopqrstuvwxyz_");
    return n > 0 && location[n] == '=';
}

/* "scheme://...": a URL, which an SQLite path never is by accident. */
static bool looks_like_url(const char *location) {
    size_t n =
            strspn(location, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-");
    return n > 0 && strncmp(location + n, "://", 3) == 0;
}

int store_open_site(const char *location, const char *site, Store **ret, Error *err) {
    if (!location || !location[0])
        return error_set(err, -EINVAL,
                         "the state location is empty: give an SQLite file, or "
                         "PostgreSQL as postgresql://... or a conninfo");
    if (store_location_is_postgresql(location))
        return store_pg_open(location, site, ret, err);
    /* Taken as a file name, a mistyped scheme would be "cannot create state file mysql://...",
     * which does not say what is wrong. */
    if (looks_like_url(location))
        return error_set(err, -EINVAL,
                         "'%.*s' is a URL of no store this server knows: give an SQLite file, or "
                         "PostgreSQL as postgresql://... (or postgres://...) or a conninfo",
                         (int)strcspn(location, ":") + 3, location);
    return store_sqlite_open(location, ret, err);
}

int store_open(const char *location, Store **ret, Error *err) {
    return store_open_site(location, NULL, ret, err);
}

void store_close(Store *s) {
    if (s)
        s->ops->close(s);
}

const char *store_backend(const Store *s) {
    return s->ops->name;
}

int store_schema_version(Store *s) {
    return s->version;
}

int store_begin(Store *s, Error *err) {
    return s->ops->begin(s, err);
}

int store_commit(Store *s, Error *err) {
    return s->ops->commit(s, err);
}

void store_rollback(Store *s) {
    s->ops->rollback(s);
}

void store_token_done(StoreToken *t) {
    if (!t)
        return;
    free(t->user);
    free(t->role);
    free(t->nodes);
    *t = (StoreToken){0};
}

int store_token_add(Store *s, const char *hash_hex, const char *user, const char *role,
                    const char *nodes, Error *err) {
    return s->ops->token_add(s, hash_hex, user, role, nodes, err);
}

int store_token_lookup(Store *s, const char *hash_hex, StoreToken *ret, Error *err) {
    return s->ops->token_lookup(s, hash_hex, ret, err);
}

int store_node_put(Store *s, const char *name, const char *json, Error *err) {
    return s->ops->node_put(s, name, json, err);
}

int store_node_delete(Store *s, const char *name, Error *err) {
    return s->ops->node_delete(s, name, err);
}

int store_node_foreach(Store *s, StoreNodeFn fn, void *userdata, Error *err) {
    return s->ops->node_foreach(s, fn, userdata, err);
}

int store_request_put(Store *s, const StoreRequest *r, Error *err) {
    return s->ops->request_put(s, r, err);
}

int store_request_foreach(Store *s, StoreRequestFn fn, void *userdata, Error *err) {
    return s->ops->request_foreach(s, fn, userdata, err);
}

int store_event_append(Store *s, const StoreEvent *e, Error *err) {
    return s->ops->event_append(s, e, err);
}

int store_event_foreach(Store *s, uint64_t after, StoreEventFn fn, void *userdata, Error *err) {
    return s->ops->event_foreach(s, after, fn, userdata, err);
}

int store_fleet_put(Store *s, const char *key, const char *json, Error *err) {
    return s->ops->fleet_put(s, key, json, err);
}

int store_fleet_delete(Store *s, const char *key, Error *err) {
    return s->ops->fleet_delete(s, key, err);
}

int store_fleet_foreach(Store *s, StoreNodeFn fn, void *userdata, Error *err) {
    return s->ops->fleet_foreach(s, fn, userdata, err);
}

int store_token_add_expiring(Store *s, const char *hash_hex, const char *user, const char *role,
                             const char *nodes, int64_t expires_ms, Error *err) {
    return s->ops->token_add_expiring(s, hash_hex, user, role, nodes, expires_ms, err);
}

int store_token_foreach(Store *s, StoreTokenFn fn, void *userdata, Error *err) {
    return s->ops->token_foreach(s, fn, userdata, err);
}

int store_token_revoke(Store *s, const char *hash_prefix, Error *err) {
    size_t n = strlen(hash_prefix);
    if (n < 8 || n > 64 || strspn(hash_prefix, "0123456789abcdef") != n)
        return error_set(err, -EINVAL,
                         "a token id is 8 to 64 lowercase hex digits (see 'einsora "
                         "token list')");
    return s->ops->token_revoke(s, hash_prefix, err);
}

int store_prune(Store *s, int64_t before_ms, Error *err) {
    return s->ops->prune(s, before_ms, err);
}

int store_request_forget_key(Store *s, uint64_t id, Error *err) {
    return s->ops->request_forget_key(s, id, err);
}
