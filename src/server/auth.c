/* auth.c: bearer tokens: the token decides who the caller is, never the request body.
 *
 * Only the SHA-256 of a token is stored. Known hashes are cached in memory; an unknown one
 * is looked up in the store each time, so a token made with `einsora token create` while
 * the server runs works at once. */
#include "server-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"
#include "util/sha256.h"

static const char *const roles[_ROLE_MAX] = {
        [ROLE_ADMIN] = "admin", [ROLE_OWNER] = "owner", [ROLE_TRUSTED] = "trusted",
        [ROLE_USER] = "user",   [ROLE_NODE] = "node",
};

const char *role_to_string(Role r) {
    return r >= 0 && r < _ROLE_MAX ? roles[r] : NULL;
}

Role role_from_string(const char *s) {
    for (Role r = 0; r < _ROLE_MAX; r++)
        if (s && STREQ(s, roles[r]))
            return r;
    return _ROLE_INVALID;
}

bool principal_has_node(const Principal *p, const char *node) {
    size_t n = strlen(node);
    for (const char *c = p->nodes; *c;) {
        const char *e = strchrnul(c, ',');
        if ((size_t)(e - c) == n && memcmp(c, node, n) == 0)
            return true;
        c = *e ? e + 1 : e;
    }
    return false;
}

int auth_principal(Server *s, const char *authorization, Principal *ret, Error *err) {
    if (!authorization)
        return error_set(err, -EACCES, "This endpoint needs a token: send 'Authorization: Bearer TOKEN'.");
    if (strncasecmp(authorization, "Bearer ", 7) != 0)
        return error_set(err, -EACCES, "The Authorization header must be 'Bearer TOKEN'.");
    const char *token = authorization + 7;
    while (*token == ' ')
        token++;
    if (!*token || strlen(token) > 256)
        return error_set(err, -EACCES, "The bearer token is empty or too long.");
    char hash[SHA256_DIGEST_SIZE * 2 + 1];
    sha256_hex(token, strlen(token), hash);

    pthread_mutex_lock(&s->reader_lock);
    Principal *p = ptrmap_get(&s->token_cache, hash);
    int r = 0;
    if (p)
        *ret = *p;
    else {
        StoreToken t = {0};
        Error e = {0};
        r = store_token_lookup(s->reader, hash, &t, &e);
        if (r >= 0) {
            Principal np = {.role = role_from_string(t.role)};
            snprintf(np.user, sizeof(np.user), "%s", t.user);
            snprintf(np.nodes, sizeof(np.nodes), "%s", strempty(t.nodes));
            store_token_done(&t);
            if (np.role < 0)
                r = -EACCES;
            else {
                *ret = np;
                Principal *c = malloc(sizeof(*c));
                if (c) {
                    *c = np;
                    if (ptrmap_put(&s->token_cache, hash, c) < 0)
                        free(c);
                }
            }
        }
    }
    pthread_mutex_unlock(&s->reader_lock);
    if (r == -ENOENT || r == -EACCES)
        return error_set(err, -EACCES, "The token is not valid.");
    if (r < 0)
        return error_set(err, r, "The token could not be checked; try again.");
    return 0;
}
