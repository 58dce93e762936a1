/* api.h: the HTTP API's handlers and the context they work on (server-internal). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "server/router.h"
#include "server/server-internal.h"

/* The routes of the API; ids index api_handlers. Shared with the router's fuzz target. */
typedef enum RouteId {
    R_HEALTHZ,
    R_READYZ,
    R_METRICS,
    R_CLASSES,
    R_NODES_LIST,
    R_NODES_CREATE,
    R_NODE_SHOW,
    R_NODE_PUSH,
    R_NODE_CORDON,
    R_NODE_UNCORDON,
    R_NODE_UNQUARANTINE,
    R_CAPACITY,
    R_REQUESTS_LIST,
    R_REQUESTS_SUBMIT,
    R_REQUEST_SHOW,
    R_REQUEST_CANCEL,
    R_REQUEST_RELEASE,
    R_REQUEST_ACTIVATE,
    R_EVENTS,
    R_INVARIANTS,
    R_NODE_HEARTBEAT,
    R_NODE_TASK_RESULT,
    R_NODE_MODE,
    R_TENANT_TRUST_GRANT, /* trust is an admin's grant (tenants.c) */
    R_TENANT_TRUST_WITHDRAW,
    R_TENANTS_TRUSTED,
    R_REQUEST_END,
    R_WHOAMI,
    R_CAPACITY_HISTORY,
    R_NODE_WORK,
    R_NODE_ACTIVATE,
    R_NODE_REMOVE,
    _R_MAX,
} RouteId;

extern const Route api_routes[];
extern const size_t api_n_routes;

typedef struct HttpCtx HttpCtx;
/* Whether the call asks for a change (any method but GET and HEAD). */
bool api_is_change(const HttpCtx *c);

typedef struct HttpCtx {
    Server *s;
    bool close; /* the answer ends the connection (Connection: close) */
    const char *method, *path;
    const char *body;
    size_t body_len;
    const char *authorization, *idem_key;
    const char *agent_instance; /* an agent's WIRE_AGENT_HEADER, or NULL */
    const char *(*query)(void *conn, const char *key);
    void *conn;
    RouteMatch match;
    Principal who;
    /* the answer */
    int status;
    json_t *json;
    char *text; /* non-JSON body (metrics), malloc'ed */
    const char *content_type;
    bool asset;     /* an embedded dashboard file: cached, but revalidated (Cache-Control) */
    char *redirect; /* a standby's redirect to the leader (its Location header), malloc'ed */
    /* Long-polls (http.c): can_park when the caller can suspend the connection
     * instead of blocking a thread; a handler that finds nothing sets park (until
     * park_deadline_ms, CLOCK_MONOTONIC, seeing park_user's events or all for NULL) and
     * answers nothing; it runs again with resumed set once woken (park_deadline_ms then
     * holds the deadline it was parked with, so it may park again until then). */
    bool can_park, resumed, park;
    int64_t park_deadline_ms;
    const char *park_user;
    const char *park_node; /* set: a work poll, woken by that node's events only */
    /* api-conventions.c: the request's Content-Type and If-Match (may be NULL);
     * query_check returns 0 when every query key is in the NULL-terminated list and given
     * once; otherwise -ENOENT for the first key not in it, -EEXIST for the first given twice
     * (libmicrohttpd keeps both; a lookup would silently read the first), naming it in
     * *ret_key.
     * The answer's Location and ETag headers ("" for none). */
    const char *content_type_in, *if_match;
    int (*query_check)(void *conn, const char *const *allowed, const char **ret_key);
    char location[128];
    char etag[40];
} HttpCtx;

typedef void (*ApiHandler)(HttpCtx *c);

/* Route the request, authenticate when the route needs it, run the handler. */
void api_dispatch(HttpCtx *c);

/* Set an error answer: {"code": code, "message": ...}. */
void api_error(HttpCtx *c, int status, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* Answer with an error and leave the (void) handler or op. */
#define API_FAIL(c, ...)                                                                           \
    do {                                                                                           \
        api_error(c, __VA_ARGS__);                                                                 \
        return;                                                                                    \
    } while (0)
#define OP_FAIL(op, ...)                                                                           \
    do {                                                                                           \
        op_error(op, __VA_ARGS__);                                                                 \
        return;                                                                                    \
    } while (0)
/* Map a negative errno from a library call to an answer with its sentence. */
void api_error_from(HttpCtx *c, int r, const Error *err);
/* Op bodies use the same shape. */
json_t *api_error_json(const char *code, const char *message);
void op_error(Op *op, int status, const char *code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* Answer op with the JSON text text[0..n) and a newline: in the caller's reply buffer when it
 * fits, else in op->text. Returns -ENOMEM when neither holds it (nothing is set). */
int op_answer_text(Op *op, const char *text, size_t n);
/* Hand fn(arg) to the writer thread as the caller, wait until it is applied and committed,
 * and answer with the op's status and body. */
void api_apply(HttpCtx *c, OpFn fn, void *arg);

const char *api_query(HttpCtx *c, const char *key);
/* Parse an unsigned decimal query parameter; false (and a 400 answer) when malformed. A
 * cursor's max is INT64_MAX: the answer's "next" is a JSON integer, which is signed. */
bool api_query_uint(HttpCtx *c, const char *key, uint64_t def, uint64_t max, uint64_t *ret);
/* The id a path names (what: "request", "task"); false after answering 400 for text that is no
 * id's spelling, 404 for one that names nothing. */
bool api_path_id(HttpCtx *c, const char *text, const char *what, uint64_t *ret);

/* Handlers, by file. */
void api_healthz(HttpCtx *c);
void api_readyz(HttpCtx *c);
void api_metrics(HttpCtx *c);
void api_classes(HttpCtx *c);
void api_capacity(HttpCtx *c);
void api_events(HttpCtx *c);
void api_invariants(HttpCtx *c);
void api_nodes_list(HttpCtx *c);
void api_nodes_create(HttpCtx *c);
void api_node_show(HttpCtx *c);
void api_node_push(HttpCtx *c);
void api_node_cordon(HttpCtx *c);
void api_node_uncordon(HttpCtx *c);
void api_node_remove(HttpCtx *c);
void api_node_unquarantine(HttpCtx *c);
void api_requests_list(HttpCtx *c);
void api_requests_submit(HttpCtx *c);
void api_request_show(HttpCtx *c);
void api_request_cancel(HttpCtx *c);
void api_request_release(HttpCtx *c);
void api_request_activate(HttpCtx *c);
/* POST /v1/nodes/{name}/activate: several of the node's workloads confirmed at once. */
void api_node_activate(HttpCtx *c);
void api_request_end(HttpCtx *c);
void api_node_heartbeat(HttpCtx *c);
void api_node_task_result(HttpCtx *c);
void api_node_work(HttpCtx *c); /* api-work.c */
/* api-fleet.c, shared with api-work.c: the node's own agent, or an admin; whether request r
 * is work of node's agent (placed or active there); the node's work, as the heartbeat and the
 * work long-poll answer it (under the state lock). */
bool api_is_agent_of(const Principal *who, const char *node);
bool api_node_work_has(const Req *r, const char *node);
/* A node's work answer (its open tasks and live workloads, and cursor unless NULL), one
 * encoder: text for the work poll and the heartbeat. */
void api_node_work_write(Server *s, const Node *n, JsonText *w, const char *cursor);
void api_node_mode(HttpCtx *c);
void api_tenant_trust_grant(HttpCtx *c);
void api_tenant_trust_withdraw(HttpCtx *c);
void api_tenants_trusted(HttpCtx *c);
/* web.c: the dashboard's reads */
void api_whoami(HttpCtx *c);
void api_capacity_history(HttpCtx *c);

/* api-conventions.c: 415 for a body that is not JSON, 400 for an unknown query
 * parameter; false when c now holds that error. */
bool api_check_conventions(HttpCtx *c, RouteId id);
/* After the handler: Location of what a 201 created. */
void api_after_handler(HttpCtx *c, RouteId id);
/* A node's ETag: a digest of its description (what PUT replaces), quoted. */
#define API_ETAG_SIZE 40
void api_node_etag(const ApiNode *spec, char out[API_ETAG_SIZE]);
/* If-Match (NULL: no condition) against the current node (NULL: none). */
bool api_if_match_ok(const char *if_match, const ApiNode *current);
/* metrics-nodes.c: a Prometheus label value, escaped; per-node gauges. */
void metrics_label_value(StrBuf *b, const char *v);
void metrics_write_nodes(StrBuf *b, Server *s);
/* metrics-capacity.c: capacity per class (whole units, MIG slices, CPU cores) and each node's
 * mode-switch step, none counting anything twice when summed over a label. */
void metrics_write_capacity(StrBuf *b, Server *s);
void metrics_write_switches(StrBuf *b, Server *s);

/* Paged lists' opaque cursors (api-cursor.c). The scope names the list and its filters, so a
 * cursor is only good for the list it came from. */
void api_list_scope(char *buf, size_t size, const char *list, const char *state, const char *node);
/* The `after` query parameter as a cursor of scope (0 when absent); false after a 400. */
bool api_query_cursor(HttpCtx *c, const char *scope, uint64_t *ret);
/* Set doc's `next` to a cursor at `after` when more may follow; none on the last page. */
void api_set_next(json_t *doc, const char *scope, bool more, uint64_t after);
