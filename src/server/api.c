/* api.c: dispatch (route, authenticate, handle) and the shared answer helpers. */
#include "api.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/replay.h"
#include "server/web.h"
#include "util/macro.h"
#include "util/strutil.h"

static const struct {
    ApiHandler fn;
    bool public; /* no token needed: probes and scrapes, which carry no user data */
} handlers[_R_MAX] = {
        [R_HEALTHZ] = {api_healthz, true},
        [R_READYZ] = {api_readyz, true},
        [R_METRICS] = {api_metrics, true},
        [R_CLASSES] = {api_classes, false},
        [R_NODES_LIST] = {api_nodes_list, false},
        [R_NODES_CREATE] = {api_nodes_create, false},
        [R_NODE_SHOW] = {api_node_show, false},
        [R_NODE_PUSH] = {api_node_push, false},
        [R_NODE_CORDON] = {api_node_cordon, false},
        [R_NODE_UNCORDON] = {api_node_uncordon, false},
        [R_NODE_UNQUARANTINE] = {api_node_unquarantine, false},
        [R_CAPACITY] = {api_capacity, false},
        [R_REQUESTS_LIST] = {api_requests_list, false},
        [R_REQUESTS_SUBMIT] = {api_requests_submit, false},
        [R_REQUEST_SHOW] = {api_request_show, false},
        [R_REQUEST_CANCEL] = {api_request_cancel, false},
        [R_REQUEST_RELEASE] = {api_request_release, false},
        [R_REQUEST_ACTIVATE] = {api_request_activate, false},
        [R_EVENTS] = {api_events, false},
        [R_INVARIANTS] = {api_invariants, false},
        [R_NODE_HEARTBEAT] = {api_node_heartbeat, false},
        [R_NODE_TASK_RESULT] = {api_node_task_result, false},
        [R_NODE_MODE] = {api_node_mode, false},
        [R_TENANT_TRUST_GRANT] = {api_tenant_trust_grant, false},
        [R_TENANT_TRUST_WITHDRAW] = {api_tenant_trust_withdraw, false},
        [R_TENANTS_TRUSTED] = {api_tenants_trusted, false},
        [R_REQUEST_END] = {api_request_end, false},
        [R_WHOAMI] = {api_whoami, false},
        [R_CAPACITY_HISTORY] = {api_capacity_history, false},
        [R_NODE_WORK] = {api_node_work, false},
        [R_NODE_ACTIVATE] = {api_node_activate, false},
        [R_NODE_REMOVE] = {api_node_remove, false},
};

json_t *api_error_json(const char *code, const char *message) {
    return json_pack("{s:s, s:s}", "code", code, "message", message);
}

static void set_error(int *status, json_t **body, int st, const char *code, const char *fmt,
                      va_list ap) __attribute__((format(printf, 5, 0)));
static void set_error(int *status, json_t **body, int st, const char *code, const char *fmt,
                      va_list ap) {
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    utf8_make_valid(msg);            /* quoted input, or a sequence the buffer's end cut in half */
    sentence_case(msg, sizeof(msg)); /* the outermost layer: lower fragments become a sentence */
    json_decref(*body);
    *status = st;
    *body = api_error_json(code, msg);
}

bool api_is_change(const HttpCtx *c) {
    return c->method && STRNEQ(c->method, "GET") && STRNEQ(c->method, "HEAD");
}

void api_error(HttpCtx *c, int status, const char *code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error(&c->status, &c->json, status, code, fmt, ap);
    va_end(ap);
}

void op_error(Op *op, int status, const char *code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    free(op->text); /* the error is the answer */
    op->text = NULL;
    op->reply_len = 0;
    set_error(&op->status, &op->body, status, code, fmt, ap);
    va_end(ap);
}

int op_answer_text(Op *op, const char *text, size_t n) {
    char *to = n + 2 <= op->reply_size ? op->reply : malloc(n + 2);
    if (!to)
        return -ENOMEM;
    memcpy(to, text, n);
    to[n] = '\n', to[n + 1] = 0;
    if (to == op->reply)
        op->reply_len = n + 1;
    else
        op->text = to;
    return 0;
}

/* An answer of a few KiB (a request's record) fits; a longer one comes as op.text. */
#define OP_REPLY_SIZE 4096

void api_apply(HttpCtx *c, OpFn fn, void *arg) {
    char reply[OP_REPLY_SIZE];
    Op op = {.fn = fn, .who = &c->who, .arg = arg, .reply = reply, .reply_size = sizeof(reply)};
    writer_submit(c->s, &op);
    c->status = op.status;
    c->json = op.body;
    c->text = op.text; /* when set, sent instead of json */
    if (!c->text && op.reply_len && !(c->text = strndup(reply, op.reply_len))) {
        json_decref(c->json);
        c->json = NULL;
        api_error(c, 500, "internal",
                  "Out of memory answering a change that was committed; "
                  "read it back with GET.");
    }
}

void api_error_from(HttpCtx *c, int r, const Error *err) {
    int status = r == -ENOENT                  ? 404
                 : r == -EEXIST || r == -EBUSY ? 409
                 : r == -EACCES                ? 403
                 : r == -ENOMEM || r == -EIO   ? 500
                                               : 400;
    const char *code = status == 404   ? "not_found"
                       : status == 409 ? "conflict"
                       : status == 403 ? "forbidden"
                       : status == 500 ? "internal"
                                       : "bad_request";
    api_error(c, status, code, "%s", error_message(err));
}

const char *api_query(HttpCtx *c, const char *key) {
    return c->query ? c->query(c->conn, key) : NULL;
}

bool api_query_uint(HttpCtx *c, const char *key, uint64_t def, uint64_t max, uint64_t *ret) {
    const char *v = api_query(c, key);
    if (!v) {
        *ret = def;
        return true;
    }
    if (parse_decimal_uint64(v, max, ret) < 0) {
        api_error(c, 400, "bad_request", "Query parameter '%s' must be a number from 0 to %llu.",
                  key, (unsigned long long)max);
        return false;
    }
    return true;
}

bool api_path_id(HttpCtx *c, const char *text, const char *what, uint64_t *ret) {
    /* One spelling per id (as the document says): "0x1", "01" or "abc" is no id at all, a 400;
     * an id of the right spelling that names nothing (0, or beyond any id) is a 404. */
    if (!string_is_digits(text) || (text[0] == '0' && text[1])) {
        api_error(c, 400, "bad_request",
                  "'%.64s' is not a %s id: ids are decimal digits without a leading zero.", text,
                  what);
        return false;
    }
    if (parse_decimal_uint64(text, UINT64_MAX, ret) < 0 || *ret == 0) {
        api_error(c, 404, "not_found", "No %s %.64s.", what, text);
        return false;
    }
    return true;
}

/* What the route's parameter i names, from the collection before it in its pattern
 * ("/v1/tenants/{name}/trust": a user name). */
static const char *param_noun(const Route *route, int i) {
    static const struct {
        const char *collection, *noun;
    } nouns[] = {
            {"/tenants/", "user name"},
            {"/nodes/", "node name"},
            {"/requests/", "request id"},
            {"/tasks/", "task id"},
    };
    const char *p = route->pattern; /* to its i-th '{' */
    for (int k = 0; p && (p = strchr(p, '{')) && k < i; k++)
        p++;
    for (size_t k = 0; p && k < ARRAY_SIZE(nouns); k++) {
        size_t n = strlen(nouns[k].collection);
        if ((size_t)(p - route->pattern) >= n && strncmp(p - n, nouns[k].collection, n) == 0)
            return nouns[k].noun;
    }
    return "name";
}

/* A node's agent calls with its instance (WIRE_AGENT_HEADER): another instance's calls for a
 * node whose agent beats are refused (409), so that a second agent of the same node cannot end
 * the first one's workloads as "no longer run" or start them again. Once the node's agent has
 * missed its heartbeats (unreachable), another instance takes over at its first heartbeat. */
static bool agent_instance_ok(HttpCtx *c) {
    const char *mine = c->agent_instance;
    if (c->who.role != ROLE_NODE || isempty(mine))
        return true;
    if (strlen(mine) > WIRE_AGENT_INSTANCE_MAX || string_has_control(mine)) {
        api_error(c, 400, "bad_request", "The %s header is an id of at most %d characters.",
                  WIRE_AGENT_HEADER, WIRE_AGENT_INSTANCE_MAX);
        return false;
    }
    Server *s = c->s;
    char other[WIRE_AGENT_INSTANCE_MAX + 1] = "";
    int64_t ago = 0;
    pthread_rwlock_rdlock(&s->lock);
    const Node *n = ptrmap_get(&s->nodes, c->who.nodes); /* a node token names one node */
    if (n && n->agent_instance[0] && STRNEQ(n->agent_instance, mine) && !n->unreachable &&
        n->heartbeat_s) {
        memcpy(other, n->agent_instance, sizeof(other));
        ago = server_now_ms() - atomic_load(&n->last_seen_ms);
    }
    pthread_rwlock_unlock(&s->lock);
    if (!other[0])
        return true;
    api_error(c, 409, "conflict",
              "Node %s is served by another agent (instance %.8s..., last heartbeat %lld ms "
              "ago): two agents must not run one node. Stop one, or give each its own --name; "
              "this one is refused until that agent has been silent long enough to be "
              "unreachable.",
              c->who.nodes, other, (long long)ago);
    return false;
}

void api_dispatch(HttpCtx *c) {
    if (web_serve(c)) /* the dashboard's files */
        return;
    int r = router_match(api_routes, api_n_routes, c->method, c->path, &c->match);
    if (r == -ENOENT) {
        api_error(c, 404, "not_found", "No such endpoint: %.200s.", c->path);
        return;
    }
    if (r == -EINVAL) {
        /* The endpoint exists; what names its object cannot be a name ("café"): said so, as
         * the handler says of a name of the right characters that is still not valid. */
        api_error(c, 400, "bad_request", "'%.64s' is not a valid %s.",
                  c->match.params[c->match.bad_param],
                  param_noun(c->match.route, c->match.bad_param));
        return;
    }
    if (r == -EOPNOTSUPP) {
        api_error(c, 405, "method_not_allowed", "%.200s answers %s, not %.16s.", c->path,
                  c->match.allowed, c->method);
        return;
    }
    const RouteId id = (RouteId)c->match.route->id;
    if (!handlers[id].public) {
        Error err = {0};
        if (auth_principal(c->s, c->authorization, &c->who, &err) < 0) {
            /* A store that cannot check the token (PostgreSQL away) saw no change of this
             * call: a change is certainly not committed, and may be sent again at once. */
            api_error(c, err.code == -EACCES ? 401 : 503,
                      err.code == -EACCES ? "unauthorized"
                      : api_is_change(c)  ? "not_committed"
                                          : "unavailable",
                      "%s", error_message(&err));
            return;
        }
    }
    if (atomic_load(&c->s->fatal)) {
        /* A change refused here never reached the store: say so (docs/postgresql.md), so that
         * a client may send it again at once, key or no key. */
        api_error(c, 503, api_is_change(c) ? "not_committed" : "unavailable",
                  "The server hit a storage error and is stopping%s.",
                  api_is_change(c) ? "; this change was not committed" : "");
        return;
    }
    if (!api_check_conventions(c, id) || !agent_instance_ok(c))
        return;
    c->status = 200;
    Server *home = c->s;
    if (!replay_enter(c)) /* a standby answers reads from its replay (replay.c) */
        return;
    handlers[id].fn(c);
    api_after_handler(c, id);
    replay_leave(c, home);
}
