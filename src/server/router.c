/* router.c: segment-by-segment matching of request paths against the route table. */
#include "router.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

static bool param_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == ':' || c == '-';
}

/* Match one pattern; fills params. The query string is not part of path (http.c strips it). */
static bool match_one(const char *pattern, const char *path, RouteMatch *m) {
    const char *p = pattern, *s = path;
    m->n_params = 0;
    while (*p && *s) {
        if (*p != '/' || *s != '/')
            return false;
        p++, s++;
        const char *pe = strchrnul(p, '/'), *se = strchrnul(s, '/');
        size_t plen = (size_t)(pe - p), slen = (size_t)(se - s);
        if (plen >= 2 && p[0] == '{' && pe[-1] == '}') {
            if (slen == 0 || slen >= ROUTE_PARAM_MAX || m->n_params >= ROUTE_MAX_PARAMS)
                return false;
            for (size_t i = 0; i < slen; i++)
                if (!param_char(s[i]))
                    return false;
            memcpy(m->params[m->n_params], s, slen);
            m->params[m->n_params][slen] = 0;
            m->n_params++;
        } else if (plen != slen || memcmp(p, s, plen) != 0)
            return false;
        p = pe, s = se;
    }
    return *p == 0 && *s == 0;
}

int router_match(const Route *routes, size_t n_routes, const char *method, const char *path,
                 RouteMatch *ret) {
    memset(ret, 0, sizeof(*ret));
    bool path_known = false;
    size_t alen = 0;
    RouteMatch m;
    for (size_t i = 0; i < n_routes; i++) {
        if (!match_one(routes[i].pattern, path, &m))
            continue;
        if (strcmp(routes[i].method, method) == 0) {
            *ret = m;
            ret->route = &routes[i];
            return 0;
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
    return path_known ? -EOPNOTSUPP : -ENOENT;
}
