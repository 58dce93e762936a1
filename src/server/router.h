/* router.h: map (method, path) to a route of the API, with path parameters.
 *
 * Pure and allocation-free so that it can be fuzzed on its own. Patterns are literal
 * segments and "{param}" segments; a parameter is one non-empty segment of at most
 * ROUTE_PARAM_MAX-1 bytes of [A-Za-z0-9._:-]. A path of a route's shape whose parameter is
 * not (a non-ASCII name, a space) is told apart from a path of no route: the endpoint exists,
 * the name is wrong. */
#pragma once

#include <stddef.h>

#define ROUTE_MAX_PARAMS 2
#define ROUTE_PARAM_MAX 128

typedef struct Route {
    const char *method;
    const char *pattern;
    int id; /* the caller's handler index */
} Route;

typedef struct RouteMatch {
    const Route *route;
    char params[ROUTE_MAX_PARAMS][ROUTE_PARAM_MAX];
    size_t n_params;
    int bad_param;    /* -EINVAL: the index of the parameter that is not a name; else -1 */
    char allowed[64]; /* for 405: the methods the path does answer, comma-separated */
} RouteMatch;

/* 0 and *ret filled on a match; -ENOENT when no pattern matches the path (404);
 * -EOPNOTSUPP when the path matches but not with this method (405, ret->allowed says which
 * methods do); -EINVAL when a route of this method has the path's shape but a parameter is
 * not a name (400: ret->route is that route, ret->params[ret->bad_param] the parameter as
 * given, cut to ROUTE_PARAM_MAX-1 bytes). ret is written in every case. */
int router_match(const Route *routes, size_t n_routes, const char *method, const char *path,
                 RouteMatch *ret);
