/* auth.c: bearer tokens: the token decides who the caller is, never the request body.
 *
 * Only the SHA-256 of a token is stored. Every call looks its hash up in the store, so a
 * token made, revoked or expired with `einsora token` while the server runs counts at once. */
#include "server-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"
#include "util/name-table.h"
#include "util/sha256.h"

NAME_TABLE(Role, role, _ROLE_MAX, [ROLE_ADMIN] = "admin", [ROLE_OWNER] = "owner",
           [ROLE_TRUSTED] = "trusted", [ROLE_USER] = "user", [ROLE_NODE] = "node")

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
        return error_set(err, -EACCES,
                         "this endpoint needs a token: send 'Authorization: Bearer TOKEN'");
    if (strncasecmp(authorization, "Bearer ", 7) != 0)
        return error_set(err, -EACCES, "the Authorization header must be 'Bearer TOKEN'");
    const char *token = authorization + 7;
    while (*token == ' ')
        token++;
    if (!*token || strlen(token) > 256)
        return error_set(err, -EACCES, "the bearer token is empty or too long");
    char hash[SHA256_DIGEST_SIZE * 2 + 1];
    sha256_hex(token, strlen(token), hash);

    /* Read from the store on every call, never cached: a token revoked or expired with
     * `einsora token` (another process, on the same file) is refused from the next call on.
     * A point lookup on the primary key costs microseconds. */
    StoreToken t = {0};
    Error e = {0};
    pthread_mutex_lock(&s->reader_lock);
    int r = store_token_lookup(s->reader, hash, &t, &e);
    pthread_mutex_unlock(&s->reader_lock);
    if (r >= 0) {
        Principal np = {.role = role_from_string(t.role)};
        str_copy_cut(np.user, sizeof(np.user), strempty(t.user));
        str_copy_cut(np.nodes, sizeof(np.nodes), strempty(t.nodes));
        if (np.role < 0)
            r = -EACCES;
        else if (t.expires_ms > 0 && server_now_ms() >= t.expires_ms)
            r = -ETIME;
        else
            *ret = np;
        store_token_done(&t);
    }
    if (r == -ETIME)
        return error_set(err, -EACCES, "the token has expired");
    if (r == -ENOENT || r == -EACCES)
        return error_set(err, -EACCES, "the token is not valid");
    if (r < 0)
        return error_set(err, r, "the token could not be checked; try again");
    return 0;
}
