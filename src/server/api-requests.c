/* api-requests.c: submit, list, show, cancel, release and activate placement requests.
 *
 * Visibility: a request is visible to its user, to admins, and (read-only, plus activate)
 * to the agent of the node it is placed on (its list: the live ones only). Anyone else gets 404 "no
 * request N that you can see", exactly as for an id that does not exist, so ids of other users'
 * requests reveal nothing. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "server/request-names.h"
#include "server/workload-end.h"
#include "util/json-cleanup.h"
#include "wire/json-text.h"
#include "util/macro.h"
#include "util/strutil.h"

static bool req_visible(const Principal *who, const Req *r) {
    if (who->role == ROLE_ADMIN || STREQ(who->user, r->user))
        return true;
    return who->role == ROLE_NODE && r->placed_node && principal_has_node(who, r->placed_node);
}

static bool parse_id(HttpCtx *c, uint64_t *ret) {
    return api_path_id(c, c->match.params[0], "request", ret);
}

/* ---- submit ---- */

typedef struct SubmitArg {
    ApiRequest spec;
    const char *idem_key;
    uint64_t id; /* out: the new request's id */
} SubmitArg;

/* The answer to a change of r: unless r is pending (whose answer adds its queue position),
 * the stored form, so the answer is the text the store write will use, encoded once for both
 * (state_req_text). */
static void op_answer_request(Server *s, Op *op, Req *r) {
    const char *text = r->state != REQ_PENDING ? state_req_text(r) : NULL;
    if (text && op_answer_text(op, text, strlen(text)) == 0)
        return;
    op->body = req_to_json(s, r);
}

/* The request.submitted event's data, for the store and the feed: the spec text r holds
 * (req_set_spec() encoded it already), spliced in. */
static char *submitted_data_text(const Req *r) {
    JsonText w = {0};
    json_text_reserve(&w, 16 + strlen(r->spec_text));
    json_text_open(&w, '{');
    json_text_member_raw(&w, "request", r->spec_text);
    json_text_close(&w, '}');
    return json_text_take(&w);
}

static void op_submit(Server *s, Op *op) {
    SubmitArg *a = op->arg;
    const Principal *who = op->who;
    if (a->idem_key) {
        _cleanup_free_ char *k = strprintf("%s\n%s", who->user, a->idem_key);
        Req *old = k ? ptrmap_get(&s->idem, k) : NULL;
        if (old) {
            /* Both texts come from the one encoder: equal texts, equal requests. */
            _cleanup_free_ char *again = api_request_text(&a->spec);
            bool same = again && STREQ(again, old->spec_text);
            if (!same) {
                /* 422, as the IETF Idempotency-Key draft and Stripe answer: the request
                 * is well formed but cannot be honoured with this key. */
                op_error(op, 422, "idempotency_key_reused",
                         "Idempotency-Key '%.64s' was already used for request %" PRIu64
                         " with a different body.",
                         a->idem_key, old->id);
                return;
            }
            op->status = 200; /* the same submission again: the original answer */
            op->body = req_to_json(s, old);
            return;
        }
    }
    /* A token of the trusted role is the site marking its user trusted (R9): its first submit
     * grants the trust an admin's `tenant trust` would (tenants.c). */
    if (who->role == ROLE_TRUSTED && tenants_set_trust(s, who->user, true, "token") < 0)
        OP_FAIL(op, 500, "internal", "%s", error_message(&s->batch_err));
    _cleanup_(state_req_freep) Req *made = calloc(1, sizeof(*made));
    if (!made || !(made->user = strdup(who->user)) ||
        (a->idem_key && !(made->idem_key = strdup(a->idem_key))))
        OP_FAIL(op, 500, "internal", "Out of memory.");
    made->id = s->n_reqs + 1;
    if (req_set_spec(made, &a->spec) < 0)
        OP_FAIL(op, 500, "internal", "Out of memory.");
    made->trusted = ptrmap_get(&s->trusted_users, who->user) != NULL; /* granted now (tenants.c) */
    made->created_ms = s->now_ms;
    made->state = REQ_PENDING;
    if (state_req_add(s, made) < 0)
        OP_FAIL(op, 500, "internal", "Out of memory.");
    Req *r = TAKE_PTR(made); /* the state's indexes own it now */
    char id[32];             /* req_core_spec()'s id_buf below */
    format_u64(id, r->id);
    state_event_text(s, "request.submitted", id, r->user, NULL, submitted_data_text(r));

    const char *fb[SPEC_MAX_FALLBACK];
    RequestSpec spec;
    Decision d = {0};
    Error err = {0};
    req_core_spec(r, &a->spec, id, fb, &spec);
    if (sched_submit(s->sched, &spec, core_now(s), &d, &err) < 0) {
        d = (Decision){.kind = DECISION_REFUSED, .reason = SCHED_REASON_BAD_REQUEST};
        snprintf(d.message, sizeof(d.message), "%.200s", error_message(&err));
    }
    state_apply_decision(s, r, &d);
    op->status = 201;
    a->id = r->id;
    op_answer_request(s, op, r);
}

/* Printable ASCII (an IETF Idempotency-Key is a structured-field string), no space at an end. */
static bool idem_key_is_valid(const char *k) {
    size_t n = strlen(k);
    for (size_t i = 0; i < n; i++)
        if (k[i] < 0x20 || k[i] > 0x7e)
            return false;
    return n && k[0] != ' ' && k[n - 1] != ' ';
}

void api_requests_submit(HttpCtx *c) {
    if (c->who.role == ROLE_NODE)
        API_FAIL(c, 403, "forbidden",
                 "Node tokens report for their node; they cannot "
                 "submit requests.");
    SubmitArg a = {.idem_key = c->idem_key};
    Error err = {0};
    if (api_request_parse(c->body, c->body_len, &a.spec, &err) < 0)
        API_FAIL(c, 400, "bad_request", "%s", error_message(&err));
    json_t *unknown = NULL;
    if (request_names_check(c->s->catalog, &a.spec, &unknown) < 0) {
        c->status = 422; /* a name the catalog does not know: bad input, nothing stored */
        c->json = unknown;
        return;
    }
    if (api_request_check_new(&a.spec, &err) < 0)
        API_FAIL(c, 400, "bad_request", "%s", error_message(&err));
    /* A MIG slice is a hardware partition of its own (R2c), never time-sliced (R2e): 'share'
     * there would be a wish silently dropped. */
    const GpuClass *slice =
            a.spec.share && a.spec.cls[0] ? catalog_find(c->s->catalog, a.spec.cls) : NULL;
    if (slice && slice->mig_parent_index >= 0)
        API_FAIL(c, 400, "bad_request",
                 "Field 'share' time-slices a whole GPU (R2e); %s is a MIG slice, a partition "
                 "of its own: leave 'share' out.",
                 a.spec.cls);
    if (a.idem_key && (strlen(a.idem_key) == 0 || strlen(a.idem_key) > 128))
        API_FAIL(c, 400, "bad_request", "Idempotency-Key must be 1 to 128 characters.");
    if (a.idem_key && !idem_key_is_valid(a.idem_key))
        API_FAIL(c, 400, "bad_request",
                 "Idempotency-Key must be printable ASCII, without a space at either end (a key "
                 "that differs from the client's by a byte the client cannot see would place "
                 "the request twice).");
    api_apply(c, op_submit, &a);
    if (c->text && c->status == 201) { /* answered as text: api_after_handler sees no body */
        static const char prefix[] = "/v1/requests/";
        static_assert(sizeof(prefix) - 1 + DECIMAL_U64_SIZE <= sizeof(c->location),
                      "a request's location fits");
        memcpy(c->location, prefix, sizeof(prefix) - 1);
        format_u64(c->location + sizeof(prefix) - 1, a.id);
    }
}

/* ---- read ---- */

void api_request_show(HttpCtx *c) {
    uint64_t id;
    if (!parse_id(c, &id))
        return;
    Server *s = c->s;
    pthread_rwlock_rdlock(&s->lock);
    Req *r = state_req(s, id);
    if (r && req_visible(&c->who, r))
        c->json = req_to_json(s, r);
    pthread_rwlock_unlock(&s->lock);
    if (!c->json)
        api_error(c, 404, "not_found", "No request %" PRIu64 " that you can see.", id);
}

/* What a list's filters let through (state and node NULL: any; live_only: a live index). */
typedef struct ListFilter {
    const Principal *who;
    const char *state, *node;
    ReqState st;
    bool live_only;
} ListFilter;

static bool list_takes(const ListFilter *f, const Req *r) {
    return r && req_visible(f->who, r) && (!f->state || r->state == f->st) &&
           (!f->live_only || history_req_is_live(r)) && (!f->node || req_placed_on(r, f->node, -1));
}

void api_requests_list(HttpCtx *c) {
    uint64_t after, limit;
    const char *state = api_query(c, "state"), *node = api_query(c, "node");
    char scope[256];
    api_list_scope(scope, sizeof(scope), "requests", state, node);
    uint64_t newest;
    if (!api_query_cursor(c, scope, &after) || !api_query_uint(c, "limit", 1000, 10000, &limit) ||
        !api_query_uint(c, "last", 0, 1000, &newest))
        return;
    if (api_query(c, "last") && !newest)
        API_FAIL(c, 400, "bad_request", "Query parameter 'last' must be a number from 1 to 1000.");
    if (newest && (api_query(c, "after") || api_query(c, "limit")))
        API_FAIL(c, 400, "bad_request",
                 "'last' lists the newest requests in one page: it takes no 'after' or 'limit'.");
    ReqState st = state ? req_state_from_string(state) : _REQ_STATE_INVALID;
    if (state && st < 0)
        API_FAIL(c, 400, "bad_request",
                 "Unknown state '%.32s' (pending, placed, active, "
                 "released, cancelled, refused, ended).",
                 state);
    Server *s = c->s;
    json_t *list = json_array();
    uint64_t last = after;
    pthread_rwlock_rdlock(&s->lock);
    /* Scan an index, never all history: a user's own requests; an agent's or a filter on a
     * live state, the live requests; only an admin's unfiltered list walks every id. */
    bool live_only = c->who.role == ROLE_NODE ||
                     (c->who.role == ROLE_ADMIN && state &&
                      (st == REQ_PENDING || st == REQ_PLACED || st == REQ_ACTIVE));
    const ReqVec *idx = c->who.role == ROLE_ADMIN && !live_only ? NULL
                        : live_only                             ? &s->live
                                                                : history_user(s, c->who.user);
    uint64_t end = idx ? idx->n : s->n_reqs;
    const ListFilter f = {&c->who, state, node, st, live_only};
    if (newest) {
        /* The newest first, no cursor: what a page of the latest (the dashboard's ended
         * requests) needs without reading all history from its start. */
        for (uint64_t k = end; k > 0 && json_array_size(list) < newest; k--) {
            const Req *r = idx ? idx->v[k - 1] : s->reqs[k - 1];
            if (list_takes(&f, r))
                json_array_append_new(list, req_to_json(s, r));
        }
        pthread_rwlock_unlock(&s->lock);
        c->json = json_pack("{s:o}", "requests", list);
        return;
    }
    size_t from = idx ? history_first_after(idx, after) : 0;
    /* Counted from `after` upwards, never `after + 1`: a cursor of UINT64_MAX must not wrap. */
    uint64_t i;
    for (i = idx ? from : after; i < end && json_array_size(list) < limit; i++) {
        const Req *r = idx ? idx->v[i] : s->reqs[i];
        if (!r) { /* gone with the retention */
            last = i + 1;
            continue;
        }
        last = r->id;
        if (list_takes(&f, r))
            json_array_append_new(list, req_to_json(s, r));
    }
    pthread_rwlock_unlock(&s->lock);
    c->json = json_pack("{s:o}", "requests", list);
    api_set_next(c->json, scope, i < end, last);
}

/* ---- transitions ---- */

typedef enum Transition { T_CANCEL, T_RELEASE, T_ACTIVATE } Transition;

typedef struct TransArg {
    uint64_t id;
    Transition t;
    const char *url; /* activate: where the notebook or endpoint answers (R17), or NULL */
} TransArg;

static void op_transition(Server *s, Op *op) {
    TransArg *a = op->arg;
    Req *r = state_req(s, a->id);
    if (!r || !req_visible(op->who, r)) {
        op_error(op, 404, "not_found", "No request %" PRIu64 " that you can see.", a->id);
        return;
    }
    char id[DECIMAL_U64_SIZE];
    format_u64(id, r->id);
    ReqState to;
    const char *type;
    switch (a->t) {
    case T_CANCEL:
        if (op->who->role == ROLE_NODE)
            OP_FAIL(op, 403, "forbidden", "A node's agent cannot cancel requests.");
        if (r->state != REQ_PENDING && r->state != REQ_PLACED)
            OP_FAIL(op, 409, "conflict",
                    "Request %s is %s; only pending or placed "
                    "requests can be cancelled%s.",
                    id, req_state_to_string(r->state),
                    r->state == REQ_ACTIVE ? " (release it instead)" : "");
        to = REQ_CANCELLED, type = "request.cancelled";
        break;
    case T_RELEASE:
        /* An agent reports (activate, and a workload's end through its heartbeat); ending a
         * tenant's allocation is the tenant's or an admin's decision. */
        if (op->who->role == ROLE_NODE)
            OP_FAIL(op, 403, "forbidden",
                    "A node's agent cannot release requests; it reports "
                    "a workload's end in its heartbeat.");
        if (r->state != REQ_PLACED && r->state != REQ_ACTIVE)
            OP_FAIL(op, 409, "conflict",
                    "Request %s is %s; only placed or active "
                    "requests can be released%s.",
                    id, req_state_to_string(r->state),
                    r->state == REQ_PENDING ? " (cancel it instead)" : "");
        to = REQ_RELEASED, type = "request.released";
        break;
    default:
        if (op->who->role != ROLE_ADMIN && op->who->role != ROLE_NODE)
            OP_FAIL(op, 403, "forbidden",
                    "Only the agent of the node (or an admin) "
                    "confirms that a workload runs.");
        if (r->state != REQ_PLACED)
            OP_FAIL(op, 409, "conflict",
                    "Request %s is %s; only placed requests become "
                    "active.",
                    id, req_state_to_string(r->state));
        to = REQ_ACTIVE, type = "request.active";
        break;
    }
    /* Kept with the placement (stored and shown with it); first, as it may fail. */
    if (a->url && r->placement_text && state_req_placement_set_url(r, a->url) < 0)
        OP_FAIL(op, 500, "internal", "Out of memory.");
    if (to != REQ_ACTIVE) {
        Error err = {0};
        int k = sched_release(s->sched, id, core_now(s), &err);
        if (k < 0)
            OP_FAIL(op, 500, "internal",
                    "The placement engine could not let go of "
                    "request %s: %s",
                    id, error_message(&err));
    }
    ReqState from = r->state;
    r->state = to;
    if (to != REQ_ACTIVE) {
        /* The waiting or placement sentence no longer holds: say who ended it instead. */
        snprintf(r->reason, sizeof(r->reason), "%s by %s", req_state_to_string(to), op->who->user);
        r->reason_code[0] = 0;
    }
    state_mark_dirty(s, r);
    json_t *data = json_pack("{s:s}", "state", req_state_to_string(to));
    if (data && to != REQ_ACTIVE)
        json_object_set_new(data, "reason", json_string(r->reason));
    state_event(s, type, id, r->user, data);
    if (to != REQ_ACTIVE && from != REQ_PENDING)
        fleet_on_released(s, r);
    op->status = 200;
    op_answer_request(s, op, r);
}

static void transition(HttpCtx *c, Transition t) {
    TransArg a = {.t = t};
    if (!parse_id(c, &a.id))
        return;
    api_apply(c, op_transition, &a);
}

void api_request_cancel(HttpCtx *c) {
    transition(c, T_CANCEL);
}

void api_request_release(HttpCtx *c) {
    transition(c, T_RELEASE);
}

void api_request_activate(HttpCtx *c) {
    char url[WORKLOAD_URL_MAX];
    Error err = {0};
    if (workload_activate_parse(c->body, c->body_len, url, &err) < 0)
        API_FAIL(c, 400, "bad_request", "%s", error_message(&err));
    TransArg a = {.t = T_ACTIVATE, .url = url[0] ? url : NULL};
    if (!parse_id(c, &a.id))
        return;
    api_apply(c, op_transition, &a);
}

/* ---- a node's workloads confirmed at once ---- */

typedef struct BatchArg {
    const char *node;
    const WorkloadActivations *acts;
} BatchArg;

/* Item i's answer: {"id": "12", "status": 200, "request": {...}}, or with "error" {code,
 * message} in place of "request". */
static void batch_item_write(StrBuf *b, uint64_t id, const Op *item) {
    strbuf_printf(b, "{\"id\":\"%" PRIu64 "\",\"status\":%d,\"%s\":", id, item->status,
                  item->status < 300 ? "request" : "error");
    if (item->text) /* the record's text, with the newline an answer ends in */
        strbuf_append(b, item->text, strcspn(item->text, "\n"));
    else {
        _cleanup_free_ char *j = item->body ? json_dumps(item->body, JSON_COMPACT) : NULL;
        strbuf_puts(b, j ? j : "null");
    }
    strbuf_puts(b, "}");
}

/* Each activation as POST /v1/requests/{id}/activate would do it, and only for a request
 * placed on this node; one commit for all, one answer per item (in order). */
static void op_activate_batch(Server *s, Op *op) {
    BatchArg *a = op->arg;
    if (!ptrmap_get(&s->nodes, a->node))
        OP_FAIL(op, 404, "not_found", "No node %s.", a->node);
    StrBuf b = {0};
    strbuf_puts(&b, "{\"results\":[");
    for (size_t i = 0; i < a->acts->n; i++) {
        const WorkloadActivation *w = &a->acts->items[i];
        TransArg ta = {.id = w->id, .t = T_ACTIVATE, .url = w->url[0] ? w->url : NULL};
        Op item = {.who = op->who, .arg = &ta};
        Req *r = state_req(s, w->id);
        const char *on = r ? r->placed_node : NULL;
        if (r && req_visible(op->who, r) && on && STRNEQ(on, a->node))
            op_error(&item, 409, "conflict", "Request %" PRIu64 " is placed on node %s, not %s.",
                     w->id, on, a->node);
        else
            op_transition(s, &item);
        if (i)
            strbuf_puts(&b, ",");
        batch_item_write(&b, w->id, &item);
        free(item.text);
        json_decref(item.body);
    }
    strbuf_puts(&b, "]}\n");
    if (!strbuf_cstr(&b)) { /* what was activated stays so: the agent's next look sees it */
        strbuf_done(&b);
        OP_FAIL(op, 500, "internal", "Out of memory while answering; the activations were made.");
    }
    op->status = 200;
    op->text = b.data;
}

void api_node_activate(HttpCtx *c) {
    const char *node = c->match.params[0];
    if (!api_is_agent_of(&c->who, node))
        API_FAIL(c, 403, "forbidden",
                 "Only the agent of node %.64s (or an admin) confirms that its workloads run.",
                 node);
    _cleanup_free_ WorkloadActivations *acts = malloc(sizeof(*acts));
    if (!acts)
        API_FAIL(c, 500, "internal", "Out of memory.");
    Error err = {0};
    if (workload_activate_batch_parse(c->body, c->body_len, acts, &err) < 0)
        API_FAIL(c, 400, "bad_request", "%s", error_message(&err));
    BatchArg a = {.node = node, .acts = acts};
    api_apply(c, op_activate_batch, &a);
}
