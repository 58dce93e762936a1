/* api-conventions.c: what clients of any HTTP API expect beyond the handlers: a
 * body whose Content-Type is not JSON is a 415, a body on a call that takes none and an
 * unknown query parameter or one given twice are a 400 (a typo must not silently list
 * everything), a create answers 201 with Location, and a node carries
 * an ETag that If-Match checks so a stale write answers 412 instead of the last writer winning. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "api.h"
#include "util/json-cleanup.h"
#include "util/macro.h"
#include "util/sha256.h"

/* The query parameters each route reads; every other one is refused. */
static const char *const *route_query_keys(RouteId id) {
    static const char *const none[] = {NULL};
    static const char *const requests[] = {"state", "node", "after", "limit", "last", NULL};
    static const char *const events[] = {"after", "wait", "limit", NULL};
    static const char *const nodes[] = {"site", NULL};
    static const char *const capacity[] = {"class", "site", NULL};
    static const char *const work[] = {"after", "wait", NULL};
    switch (id) {
    case R_REQUESTS_LIST:
        return requests;
    case R_EVENTS:
        return events;
    case R_NODES_LIST:
        return nodes;
    case R_CAPACITY:
        return capacity;
    case R_NODE_WORK:
        return work;
    default:
        return none;
    }
}

/* Whether the route reads a request body; every other one takes none. */
static bool route_takes_body(RouteId id) {
    switch (id) {
    case R_NODES_CREATE:
    case R_NODE_PUSH:
    case R_NODE_HEARTBEAT:
    case R_NODE_TASK_RESULT:
    case R_NODE_MODE:
    case R_NODE_UNQUARANTINE:
    case R_NODE_CORDON: /* {"reason": TEXT}, or none */
    case R_NODE_ACTIVATE:
    case R_REQUESTS_SUBMIT:
    case R_REQUEST_ACTIVATE:
    case R_REQUEST_END:
        return true;
    default:
        return false;
    }
}

/* Nothing, or an empty JSON object, with any white space around. */
static bool is_no_body(const char *b, size_t n) {
    size_t i = 0;
    while (i < n && strchr(" \t\r\n", b[i]) && b[i])
        i++;
    if (i < n && b[i] == '{') {
        for (i++; i < n && strchr(" \t\r\n", b[i]) && b[i]; i++)
            ;
        if (i == n || b[i] != '}')
            return false;
        for (i++; i < n && strchr(" \t\r\n", b[i]) && b[i]; i++)
            ;
    }
    return i == n;
}

/* "application/json", any case, optionally followed by parameters (charset). */
static bool is_json_type(const char *t) {
    static const char json[] = "application/json";
    size_t n = strlen(json);
    if (strncasecmp(t, json, n) != 0)
        return false;
    return t[n] == 0 || t[n] == ';' || t[n] == ' ';
}

bool api_check_conventions(HttpCtx *c, RouteId id) {
    /* A missing Content-Type is read as JSON (curl -d sends a form type, but scripts often
     * send none); a declared other type is a client that means something else. */
    if (c->body_len > 0 && c->content_type_in && !is_json_type(c->content_type_in)) {
        api_error(c, 415, "unsupported_media_type",
                  "The body must be JSON (Content-Type: application/json), not %.64s.",
                  c->content_type_in);
        return false;
    }
    /* A body on a call that reads none ("cancel" with {"force":true}, or a truncated one)
     * means something the server would not do: refused, rather than the call made as if it
     * had not been sent. */
    if (c->body_len > 0 && !route_takes_body(id) && !is_no_body(c->body, c->body_len)) {
        api_error(c, 400, "bad_request",
                  "This call takes no request body (send none, or {}); nothing was changed.");
        return false;
    }
    const char *bad = NULL;
    int r = c->query_check ? c->query_check(c->conn, route_query_keys(id), &bad) : 0;
    if (r == -EEXIST) {
        /* "limit=1&limit=abc": which one was meant is a guess, so neither is taken. */
        api_error(c, 400, "bad_request", "Query parameter '%.64s' is given twice.", bad);
        return false;
    }
    if (r == -ENODATA) {
        api_error(c, 400, "bad_request", "Query parameter '%.64s' has no value (write %.64s=...).",
                  bad, bad);
        return false;
    }
    if (r < 0) {
        const char *const *keys = route_query_keys(id);
        char allowed[128] = "";
        size_t len = 0;
        for (size_t i = 0; keys[i] && len < sizeof(allowed); i++)
            len += (size_t)snprintf(allowed + len, sizeof(allowed) - len, "%s%s", i ? ", " : "",
                                    keys[i]);
        api_error(c, 400, "bad_request",
                  "Unknown query parameter '%.64s' (this endpoint takes %s).", bad,
                  allowed[0] ? allowed : "none");
        return false;
    }
    return true;
}

void api_after_handler(HttpCtx *c, RouteId id) {
    if (c->status != 201 || !json_is_object(c->json))
        return;
    if (id == R_REQUESTS_SUBMIT && json_is_integer(json_object_get(c->json, "id")))
        snprintf(c->location, sizeof(c->location), "/v1/requests/%lld",
                 (long long)json_integer_value(json_object_get(c->json, "id")));
    else if (id == R_NODES_CREATE && json_is_string(json_object_get(c->json, "name")))
        snprintf(c->location, sizeof(c->location), "/v1/nodes/%.100s",
                 json_string_value(json_object_get(c->json, "name")));
}

void api_node_etag(const ApiNode *spec, char out[API_ETAG_SIZE]) {
    /* The node's compact text: one encoder with a fixed member order, so the same node
     * always hashes the same, without building and sorting a tree first. */
    _cleanup_free_ char *text = api_node_text(spec);
    char hex[SHA256_DIGEST_SIZE * 2 + 1];
    sha256_hex(text ? text : "", text ? strlen(text) : 0, hex);
    /* A strong validator: quoted, 32 hex digits are plenty to tell versions apart. */
    snprintf(out, API_ETAG_SIZE, "\"%.32s\"", hex);
}

bool api_if_match_ok(const char *if_match, const ApiNode *current) {
    if (!if_match)
        return true;
    if (STREQ(if_match, "*"))
        return current != NULL;
    if (!current)
        return false;
    char etag[API_ETAG_SIZE];
    api_node_etag(current, etag);
    /* A list of validators, comma-separated, any of which may match (RFC 9110 13.1.1). */
    size_t n = strlen(etag);
    for (const char *p = if_match; *p;) {
        p += strspn(p, " ,");
        if (strncmp(p, etag, n) == 0 && (p[n] == 0 || p[n] == ',' || p[n] == ' '))
            return true;
        p += strcspn(p, ",");
    }
    return false;
}
