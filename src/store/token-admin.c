/* token-admin.c: the token verbs on a state file (token-admin.h). */
#include "store/token-admin.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "store/store.h"
#include "util/macro.h"

typedef struct ListCtx {
    TokenAdminFn fn;
    void *userdata;
} ListCtx;

static int list_one(const char *hash_hex, const StoreToken *t, void *userdata) {
    ListCtx *c = userdata;
    TokenAdminEntry e = {.hash_hex = hash_hex,
                         .user = t->user,
                         .role = t->role,
                         .nodes = t->nodes,
                         .expires_ms = t->expires_ms};
    return c->fn(&e, c->userdata);
}

/* Opens an existing state: reading or revoking in a file that is not there (a typo in the
 * path) must not create an empty one and answer from it. */
static int open_existing(const char *state, Store **ret, Error *err) {
    struct stat sb;
    if (!store_location_is_postgresql(state) && stat(state, &sb) < 0)
        return error_set(err, -ENXIO,
                         "no state file %s (%s): is the path right? (einsora serve --state "
                         "FILE creates it on its first start)",
                         state, strerror(errno));
    return store_open(state, ret, err);
}

int token_admin_list(const char *state, TokenAdminFn fn, void *userdata, Error *err) {
    Store *st = NULL;
    int r = open_existing(state, &st, err);
    if (r < 0)
        return r;
    ListCtx c = {fn, userdata};
    r = store_token_foreach(st, list_one, &c, err);
    store_close(st);
    return r;
}

/* One write in its own transaction; create: the state file may be made by it (a token made
 * before the server's first start), else it must exist. */
static int write_one(const char *state, bool create,
                     int (*op)(Store *st, const void *arg, Error *err), const void *arg,
                     Error *err) {
    Store *st = NULL;
    int r = create ? store_open(state, &st, err) : open_existing(state, &st, err);
    if (r < 0)
        return r;
    if ((r = store_begin(st, err)) >= 0 && (r = op(st, arg, err)) >= 0)
        r = store_commit(st, err);
    if (r < 0)
        store_rollback(st);
    store_close(st);
    return r;
}

typedef struct CreateArg {
    const char *hash_hex, *user, *role, *nodes;
    int64_t expires_ms;
} CreateArg;

static int op_create(Store *st, const void *arg, Error *err) {
    const CreateArg *a = arg;
    return store_token_add_expiring(st, a->hash_hex, a->user, a->role, a->nodes, a->expires_ms,
                                    err);
}

int token_admin_create(const char *state, const char *hash_hex, const char *user, const char *role,
                       const char *nodes, int64_t expires_ms, Error *err) {
    CreateArg a = {hash_hex, user, role, nodes, expires_ms};
    return write_one(state, true, op_create, &a, err);
}

static int op_revoke(Store *st, const void *arg, Error *err) {
    return store_token_revoke(st, arg, err);
}

int token_admin_revoke(const char *state, const char *hash_prefix, Error *err) {
    return write_one(state, false, op_revoke, hash_prefix, err);
}

int token_admin_knows(const char *state, const char *hash_hex, const char *user, const char *role,
                      Error *err) {
    Store *st = NULL;
    int r = store_open(state, &st, err);
    if (r < 0)
        return r;
    StoreToken t = {0};
    bool known = store_token_lookup(st, hash_hex, &t, NULL) >= 0 && STREQ(t.user, user) &&
                 STREQ(t.role, role);
    store_token_done(&t);
    store_close(st);
    return known;
}
