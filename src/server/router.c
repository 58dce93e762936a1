/* router.c: segment-by-segment matching of request paths against the route table. */
#include "router.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

static bool param_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == ':' || c == '-';
}

typedef enum Match { MATCH_NO, MATCH_YES, MATCH_BAD_PARAM } Match;

/* Match one pattern; fills params. The query string is not part of path (http.c strips it).
 * A segment where a parameter goes that is not a name (a byte outside [A-Za-z0-9._:-], or
 * too long) still has the route's shape: MATCH_BAD_PARAM, with m->bad_param its index and
 * the parameter cut to fit. */
static Match match_one(const char *pattern, const char *path, RouteMatch *m) {
    const char *p = pattern, *s = path;
    m->n_params = 0;
    m->bad_param = -1;
    while (*p && *s) {
        if (*p != '/' || *s != '/')
            return MATCH_NO;
        p++, s++;
        const char *pe = strchrnul(p, '/'), *se = strchrnul(s, '/');
        size_t plen = (size_t)(pe - p), slen = (size_t)(se - s);
        if (plen >= 2 && p[0] == '{' && pe[-1] == '}') {
            if (slen == 0 || m->n_params >= ROUTE_MAX_PARAMS)
                return MATCH_NO;
            bool ok = slen < ROUTE_PARAM_MAX;
            for (size_t i = 0; i < slen && ok; i++)
                ok = param_char(s[i]);
            if (!ok && m->bad_param < 0)
                m->bad_param = (int)m->n_params;
            size_t n = slen < ROUTE_PARAM_MAX ? slen : ROUTE_PARAM_MAX - 1;
            memcpy(m->params[m->n_params], s, n);
            m->params[m->n_params][n] = 0;
            m->n_params++;
        } else if (plen != slen || memcmp(p, s, plen) != 0)
            return MATCH_NO;
        p = pe, s = se;
    }
    if (*p != 0 || *s != 0)
        return MATCH_NO;
    return m->bad_param < 0 ? MATCH_YES : MATCH_BAD_PARAM;
}

int router_match(const Route *routes, size_t n_routes, const char *method, const char *path,
                 RouteMatch *ret) {
    memset(ret, 0, sizeof(*ret));
    ret->bad_param = -1;
    bool path_known = false;
    size_t alen = 0;
    RouteMatch m, bad = {.bad_param = -1};
    for (size_t i = 0; i < n_routes; i++) {
        Match k = match_one(routes[i].pattern, path, &m);
        if (k == MATCH_NO)
            continue;
        if (strcmp(routes[i].method, method) == 0) {
            if (k == MATCH_YES) {
                *ret = m;
                ret->route = &routes[i];
                return 0;
            }
            if (!bad.route) { /* the first route of this method and shape */
                bad = m;
                bad.route = &routes[i];
            }
            continue;
        }
        path_known = true;
        size_t l = strlen(routes[i].method);
        if (alen + l + 3 < sizeof(ret->allowed)) {
            if (alen)
                ret->allowed[alen++] = ',', ret->allowed[alen++] = ' ';
            memcpy(ret->allowed + alen, routes[i].method, l + 1);
            alen += l;
        }
    }
    if (bad.route) {
        memcpy(bad.allowed, ret->allowed, sizeof(bad.allowed));
        *ret = bad;
        return -EINVAL;
    }
    return path_known ? -EOPNOTSUPP : -ENOENT;
}
