/* auth.c: bearer tokens: the token decides who the caller is, never the request body.
 *
 * Only the SHA-256 of a token is stored. Every call looks its hash up in the store, so a
 * token made, revoked or expired with `einsora token` while the server runs counts at once.
 * Only when the store cannot answer (PostgreSQL unreachable) is a token taken from what its
 * last lookup here said, for a while: a standby answers reads from its last view, and a
 * change reaches the writer, whose answer says it was not committed, instead of an "outcome
 * unknown" from a check that never looked. Nothing can be revoked while the store is down. */
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

bool principal_may_manage(const Principal *who, const char *name, const char *owner) {
    switch (who->role) {
    case ROLE_ADMIN:
        return true;
    case ROLE_OWNER:
        return principal_has_node(who, name) && (!owner || STREQ(owner, who->user));
    case ROLE_NODE:
        return principal_has_node(who, name);
    default:
        return false;
    }
}

/* How long a lookup's answer may stand in for the store's, and how many are kept (by the
 * hash's first bytes; a collision only forgets one). */
#define TOKEN_MEMO_MS (5 * 60 * 1000)
#define TOKEN_MEMO_SLOTS 256

struct TokenMemo {
    char hash[SHA256_DIGEST_SIZE * 2 + 1];
    Principal who;
    int64_t expires_ms, checked_ms;
};

static TokenMemo *memo_slot(Server *s, const char *hash) {
    if (!s->token_memo && !(s->token_memo = calloc(TOKEN_MEMO_SLOTS, sizeof(TokenMemo))))
        return NULL;
    unsigned h = (unsigned)strtoul(
            (char[9]){hash[0], hash[1], hash[2], hash[3], hash[4], hash[5], hash[6], hash[7], 0},
            NULL, 16);
    return &s->token_memo[h % TOKEN_MEMO_SLOTS];
}

void auth_memo_free(Server *s) {
    free(s->token_memo);
    s->token_memo = NULL;
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
    int64_t now = server_now_ms();
    pthread_mutex_lock(&s->reader_lock);
    int r = store_token_lookup(s->reader, hash, &t, &e);
    TokenMemo *m = memo_slot(s, hash);
    if (r >= 0) {
        Principal np = {.role = role_from_string(t.role)};
        str_copy_cut(np.user, sizeof(np.user), strempty(t.user));
        str_copy_cut(np.nodes, sizeof(np.nodes), strempty(t.nodes));
        if (np.role < 0)
            r = -EACCES;
        else if (t.expires_ms > 0 && now >= t.expires_ms)
            r = -ETIME;
        else {
            *ret = np;
            if (m && STREQ(m->hash, hash) && m->expires_ms == t.expires_ms)
                m->checked_ms = now; /* a token's row never changes but by its revocation */
            else if (m) {
                *m = (TokenMemo){.who = np, .expires_ms = t.expires_ms, .checked_ms = now};
                memcpy(m->hash, hash, sizeof(m->hash));
            }
        }
        store_token_done(&t);
    } else if (r != -ENOENT && r != -EACCES && r != -ENOMEM && m && STREQ(m->hash, hash) &&
               now - m->checked_ms < TOKEN_MEMO_MS &&
               !(m->expires_ms > 0 && now >= m->expires_ms)) {
        *ret = m->who; /* the store cannot answer: its last answer for this token stands */
        r = 0;
    }
    if (m && STREQ(m->hash, hash) && (r == -ENOENT || r == -EACCES || r == -ETIME))
        m->hash[0] = 0; /* revoked or expired: forgotten */
    pthread_mutex_unlock(&s->reader_lock);
    if (r == -ETIME)
        return error_set(err, -EACCES, "the token has expired");
    if (r == -ENOENT || r == -EACCES)
        return error_set(err, -EACCES, "the token is not valid");
    if (r < 0)
        return error_set(err, r, "the token could not be checked; try again");
    return 0;
}
