/* token-admin.h: the token verbs of a control plane's state file, for when no control plane
 * runs (`einsora token create|list|revoke --state`, `einsora up` before it starts one). The
 * CLI calls these instead of opening the store itself: it never sees store.h. */
#pragma once

#include <stdint.h>

#include "util/error.h"

typedef struct TokenAdminEntry {
    const char *hash_hex; /* the secret's SHA-256: a token's id is a prefix of it */
    const char *user, *role;
    const char *nodes;  /* comma-separated, or NULL */
    int64_t expires_ms; /* wall-clock ms; 0: never */
} TokenAdminEntry;

/* fn sees each token (its strings valid during the call only); a negative return stops. */
typedef int (*TokenAdminFn)(const TokenAdminEntry *t, void *userdata);
/* list and revoke need the state to exist (-ENXIO when its file does not): a mistyped path must
 * not make an empty state and answer from it. create makes the file, for a token made before
 * the server's first start. */
int token_admin_list(const char *state, TokenAdminFn fn, void *userdata, Error *err);

/* Stores a token by the hash of its secret. */
int token_admin_create(const char *state, const char *hash_hex, const char *user, const char *role,
                       const char *nodes, int64_t expires_ms, Error *err);

/* Deletes the one token whose hash starts with hash_prefix: -ENOENT when none does, -EEXIST
 * when several do, -EINVAL for a malformed prefix (store_token_revoke). */
int token_admin_revoke(const char *state, const char *hash_prefix, Error *err);

/* 1 when the state file has a token of this hash for this user and role, 0 when not. */
int token_admin_knows(const char *state, const char *hash_hex, const char *user, const char *role,
                      Error *err);
