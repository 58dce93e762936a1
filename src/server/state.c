/* state.c: the server's in-memory records (requests, nodes, sites) and their glue to the
 * core: every decision of the core lands here, is marked for the current transaction, and
 * becomes an event. Called by the writer thread (and startup) with the state lock held. */
#include "server-internal.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "config/catalog-yaml.h"
#include "fleet.h"
#include "node-work.h"
#include "util/json-cleanup.h"
#include "wire/json-text.h"
#include "util/macro.h"
#include "util/strutil.h"

static const char *const req_states[_REQ_STATE_MAX] = {
        [REQ_PENDING] = "pending",   [REQ_PLACED] = "placed",       [REQ_ACTIVE] = "active",
        [REQ_RELEASED] = "released", [REQ_CANCELLED] = "cancelled", [REQ_REFUSED] = "refused",
        [REQ_ENDED] = "ended", /* the workload exited or could not start (R17) */
};

const char *req_state_to_string(ReqState st) {
    return st >= 0 && st < _REQ_STATE_MAX ? req_states[st] : NULL;
}

ReqState req_state_from_string(const char *str) {
    for (ReqState st = 0; st < _REQ_STATE_MAX; st++)
        if (str && STREQ(str, req_states[st]))
            return st;
    return _REQ_STATE_INVALID;
}

Req *state_req(Server *s, uint64_t id) {
    return id >= 1 && id <= s->n_reqs ? s->reqs[id - 1] : NULL;
}

static void req_free(Req *r) {
    if (!r)
        return;
    free(r->user);
    free(r->idem_key);
    free(r->spec_text);
    free(r->text);
    free(r->placement_text);
    free(r->placed_node);
    free(r);
}

static char *idem_map_key(const char *user, const char *key) {
    return strprintf("%s\n%s", user, key);
}

void state_req_free(Req *r) {
    req_free(r);
}

int state_req_add(Server *s, Req *r) {
    /* Ids only grow; the store's retention may have left gaps below (empty slots). */
    if (r->id <= s->n_reqs)
        return -EINVAL;
    if (r->id > s->cap_reqs) {
        size_t cap = MAX(s->cap_reqs ? s->cap_reqs * 2 : 1024, (size_t)r->id);
        Req **v = realloc(s->reqs, cap * sizeof(Req *));
        if (!v)
            return -ENOMEM;
        s->reqs = v;
        s->cap_reqs = cap;
    }
    _cleanup_free_ char *k = r->idem_key ? idem_map_key(r->user, r->idem_key) : NULL;
    if (r->idem_key && (!k || ptrmap_put(&s->idem, k, r) < 0))
        return -ENOMEM;
    if (history_req_added(s, r) < 0) {
        if (k)
            ptrmap_remove(&s->idem, k);
        return -ENOMEM;
    }
    while (s->n_reqs + 1 < r->id)
        s->reqs[s->n_reqs++] = NULL;
    s->reqs[s->n_reqs++] = r;
    return 0;
}

void state_mark_dirty(Server *s, Req *r) {
    r->updated_ms = s->now_ms;
    free(r->text); /* encoded before this change */
    r->text = NULL;
    if (r->dirty)
        return;
    if (s->n_dirty == s->cap_dirty) {
        size_t cap = s->cap_dirty ? s->cap_dirty * 2 : 256;
        Req **v = realloc(s->dirty, cap * sizeof(Req *));
        if (!v)
            abort(); /* cannot keep the promise of durability without memory */
        s->dirty = v;
        s->cap_dirty = cap;
    }
    r->dirty = true;
    s->dirty[s->n_dirty++] = r;
}

/* The persisted form of a request (also the API's, which adds the queue position). */
static json_t *req_doc_head(const Req *r) {
    json_t *j = json_pack("{s:I, s:s, s:s, s:o, s:b, s:I, s:I}", "id", (json_int_t)r->id, "user",
                          r->user, "state", req_state_to_string(r->state), "request",
                          json_loads(r->spec_text, 0, NULL), "trusted", r->trusted, "created_ms",
                          (json_int_t)r->created_ms, "updated_ms", (json_int_t)r->updated_ms);
    if (!j)
        return NULL;
    if (r->idem_key)
        json_object_set_new(j, "idempotency_key", json_string(r->idem_key));
    if (r->reason_code[0])
        json_object_set_new(j, "reason_code", json_string(r->reason_code));
    if (r->reason[0])
        json_object_set_new(j, "reason", json_string(r->reason));
    return j;
}

static json_t *req_doc(const Req *r) {
    json_t *j = req_doc_head(r);
    if (j && r->placement_text)
        json_object_set_new(j, "placement", json_loads(r->placement_text, 0, NULL));
    if (j && r->placed_ms)
        json_object_set_new(j, "placed_ms", json_integer(r->placed_ms));
    return j;
}

bool req_placed_on(const Req *r, const char *node, int dev) {
    if (!r->placed_node || STRNEQ(r->placed_node, node))
        return false;
    return dev < 0 || (dev < 32 && (r->placed_devices >> dev & 1));
}

/* Hold a placement: its text (taken) and the fields read without it. A stored one is read
 * loosely (restore checks a live one strictly, wire_placement_from_json()); a field it lacks
 * is left unknown. */
static int req_hold_placement(Req *r, char *text, const char *node, Method method,
                              uint32_t devices) {
    char *n = NULL;
    if (!text || (node && !(n = strdup(node)))) {
        free(text);
        return -ENOMEM;
    }
    free(r->placement_text);
    free(r->placed_node);
    r->placement_text = text;
    r->placed_node = n;
    r->placed_method = method;
    r->placed_devices = devices;
    return 0;
}

static int req_hold_stored_placement(Req *r, json_t *p) {
    if (!p || json_is_null(p))
        return 0;
    if (!json_is_object(p))
        return -EINVAL; /* only a store edited by hand has such */
    uint32_t devices = 0;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(p, "devices"), i, v) {
        json_int_t dev = json_integer_value(v);
        if (dev >= 0 && dev < 32)
            devices |= 1u << dev;
    }
    const char *method = json_string_value(json_object_get(p, "method"));
    return req_hold_placement(r, json_dumps(p, JSON_COMPACT),
                              json_string_value(json_object_get(p, "node")),
                              method ? method_from_string(method) : _METHOD_INVALID, devices);
}

int state_req_placement_set_url(Req *r, const char *url) {
    _cleanup_json_ json_t *p = r->placement_text ? json_loads(r->placement_text, 0, NULL) : NULL;
    if (!p || json_object_set_new(p, "url", json_string(url)) < 0)
        return -ENOMEM;
    char *text = json_dumps(p, JSON_COMPACT);
    if (!text)
        return -ENOMEM;
    free(r->placement_text);
    r->placement_text = text;
    return 0;
}

/* req_doc's text, written without building the tree (the bytes json_dumps writes for it),
 * the placement spliced in from its shared text; NULL when a string has no JSON text or out
 * of memory, for req_doc_text to take the tree's way. */
static char *req_doc_text_direct(Req *r) {
    const char *placement = r->placement_text;
    JsonText w = {0};
    /* The members' names and numbers fit in 256 bytes; the strings are what varies. */
    json_text_reserve(&w, 256 + strlen(strempty(r->spec_text)) + strlen(strempty(placement)) +
                                  strlen(r->user) + strlen(r->reason) +
                                  strlen(strempty(r->idem_key)));
    json_text_open(&w, '{');
    json_text_member_int(&w, "id", (int64_t)r->id);
    json_text_member_string(&w, "user", r->user);
    json_text_member_string(&w, "state", req_state_to_string(r->state));
    json_text_member_raw(&w, "request", r->spec_text);
    json_text_member_bool(&w, "trusted", r->trusted);
    json_text_member_int(&w, "created_ms", r->created_ms);
    json_text_member_int(&w, "updated_ms", r->updated_ms);
    if (r->idem_key)
        json_text_member_string(&w, "idempotency_key", r->idem_key);
    if (r->reason_code[0])
        json_text_member_string(&w, "reason_code", r->reason_code);
    if (r->reason[0])
        json_text_member_string(&w, "reason", r->reason);
    if (placement)
        json_text_member_raw(&w, "placement", placement);
    if (r->placed_ms)
        json_text_member_int(&w, "placed_ms", r->placed_ms);
    json_text_close(&w, '}');
    return json_text_take(&w);
}

static char *req_doc_text(Req *r) {
    char *text = req_doc_text_direct(r);
    if (text)
        return text;
    /* What the tree's encoder makes of a string jansson would not hold: as it always did. */
    json_t *doc = req_doc(r);
    text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    return text;
}

json_t *req_to_json(Server *s, const Req *r) {
    json_t *j = req_doc(r);
    if (j && r->state == REQ_PENDING) {
        char id[32];
        Decision d;
        snprintf(id, sizeof(id), "%" PRIu64, r->id);
        if (sched_request_decision(s->sched, id, &d) >= 0 && d.kind == DECISION_WAITING) {
            json_object_set_new(j, "queue_position", json_integer((json_int_t)d.queue_position));
            /* The reason as of now (R18): the fleet may have changed since it was stored. */
            json_object_set_new(j, "reason_code", json_string(sched_reason_to_string(d.reason)));
            json_object_set_new(j, "reason", json_string(d.message));
            /* ... and the grant that reason is found under (R9). */
            json_object_set_new(j, "trusted",
                                json_boolean(ptrmap_get(&s->trusted_users, r->user) != NULL));
        }
        if (r->n_fallback)
            json_object_set_new(j, "fallback_at_ms",
                                json_integer(r->created_ms + (json_int_t)r->wait_s * 1000));
    }
    return j;
}

const char *state_req_text(Req *r) {
    if (!r->text)
        r->text = req_doc_text(r);
    return r->text;
}

int state_flush_dirty(Server *s, Error *err) {
    (void)state_flush_consequences(s); /* a failure is the batch's (writer_check) */
    int r = 0;
    for (size_t i = 0; i < s->n_dirty; i++) {
        Req *q = s->dirty[i];
        q->dirty = false;
        if (r < 0)
            continue;
        const char *text = state_req_text(q);
        if (!text) {
            r = error_set(err, -ENOMEM, "out of memory");
            continue;
        }
        StoreRequest row = {.id = q->id,
                            .user = q->user,
                            .idem_key = q->idem_key,
                            .state = req_state_to_string(q->state),
                            .json = text};
        r = store_request_put(s->store, &row, err);
        /* Committed rows are not read back as text: keep no second copy of every record. */
        free(q->text);
        q->text = NULL;
    }
    s->n_dirty = 0;
    return r;
}

typedef struct DeferredEvent {
    const char *type; /* a literal */
    char *object, *user, *text;
} DeferredEvent;

/* Hold an event of a consequence back (state_on_placed); the text is owned from here on. */
static int defer_event(Server *s, const char *type, const char *object, const char *user,
                       char *owned_text) {
    if (s->n_deferred == s->cap_deferred) {
        size_t cap = s->cap_deferred ? s->cap_deferred * 2 : 16;
        DeferredEvent *v = realloc(s->deferred, cap * sizeof(*v));
        if (!v) {
            free(owned_text);
            return writer_check(s, -ENOMEM, NULL, "recording an event");
        }
        s->deferred = v;
        s->cap_deferred = cap;
    }
    DeferredEvent *e = &s->deferred[s->n_deferred];
    *e = (DeferredEvent){.type = type, .object = strdup(object), .text = owned_text};
    if (user)
        e->user = strdup(user);
    if (!e->object || (user && !e->user)) {
        free(e->object);
        free(e->user);
        free(owned_text);
        return writer_check(s, -ENOMEM, NULL, "recording an event");
    }
    s->n_deferred++;
    return 0;
}

int state_flush_consequences(Server *s) {
    const char *actor = s->actor;
    int r = 0;
    s->actor = "system";
    for (size_t i = 0; i < s->n_deferred; i++) {
        DeferredEvent *e = &s->deferred[i];
        int k = state_event_text(s, e->type, e->object, e->user, NULL, e->text);
        r = r < 0 ? r : k;
        free(e->object);
        free(e->user);
    }
    s->n_deferred = 0;
    s->actor = actor;
    return r;
}

int state_event_text(Server *s, const char *type, const char *object, const char *user,
                     json_t *data, char *owned_text) {
    if (s->deferring && !data)
        return owned_text ? defer_event(s, type, object, user, owned_text)
                          : writer_check(s, -ENOMEM, NULL, "recording an event");
    const char *actor = s->actor ? s->actor : "system";
    api_work_note_event(s, type, object, data);
    json_decref(data);
    if (!owned_text)
        return writer_check(s, -ENOMEM, NULL, "recording an event");
    /* The feed keeps the text; the store writes it before anything could drop it (a failed
     * transaction rolls the feed back after this returns). */
    const char *text = owned_text;
    uint64_t seq = events_append(&s->events, s->now_ms, actor, type, object, user, owned_text);
    if (!seq)
        return writer_check(s, -ENOMEM, NULL, "recording an event");
    StoreEvent e = {.seq = seq,
                    .time_ms = s->now_ms,
                    .actor = actor,
                    .type = type,
                    .object = object,
                    .json = text};
    Error err = {0};
    int r = store_event_append(s->store, &e, &err);
    return writer_check(s, r, &err, "recording an event");
}

int state_event(Server *s, const char *type, const char *object, const char *user, json_t *data) {
    if (!data)
        data = json_object();
    return state_event_text(s, type, object, user, data, json_dumps(data, JSON_COMPACT));
}

/* ---- placements as JSON ---- */

static void placement_addresses(const Sched *sched, const Placement *p,
                                const char *ret[SCHED_NODE_MAX_DEVICES]) {
    for (unsigned i = 0; i < p->n_devices; i++) {
        DeviceInfo di;
        ret[i] = sched && sched_device_info(sched, p->node, p->devices[i], &di) >= 0 ? di.address
                                                                                     : NULL;
    }
}

static_assert(SCHED_NODE_MAX_DEVICES <= 32, "Req.placed_devices holds a bit per device");

/* A new placement's text, from its one encoder, and the fields read without it. */
static void req_set_placement(Server *s, Req *r, const Placement *p) {
    const char *addrs[SCHED_NODE_MAX_DEVICES] = {0};
    JsonText w = {0};
    placement_addresses(s->sched, p, addrs);
    /* Its members' names and enums fit in 192 bytes; an address and its index in 20 each. */
    json_text_reserve(&w, 192 + strlen(p->node) + strlen(p->class_name) + 20 * p->n_devices);
    wire_placement_write(p, addrs, &w);
    uint32_t devices = 0;
    for (unsigned i = 0; i < p->n_devices; i++)
        devices |= 1u << p->devices[i];
    node_work_forget(s, r); /* from the node it was placed on before, if any */
    /* A node's agent must not miss its work, nor a record its placement, for want of memory
     * (node-work.c does the same). */
    if (req_hold_placement(r, json_text_take(&w), p->node, p->method, devices) < 0)
        abort();
    node_work_placed(s, r);
}

/* ---- requests and the core ---- */

int req_set_spec(Req *r, const ApiRequest *spec) {
    char *text = api_request_text(spec);
    if (!text)
        return -ENOMEM;
    free(r->spec_text);
    r->spec_text = text;
    r->kind = spec->kind;
    r->wait_s = spec->wait_s;
    r->n_fallback = spec->n_fallback;
    return 0;
}

void req_core_spec(const Req *r, const ApiRequest *spec, char id_buf[32],
                   const char *fallback_ptrs[SPEC_MAX_FALLBACK], RequestSpec *ret) {
    static_assert(32 >= DECIMAL_U64_SIZE, "an id's digits fit id_buf");
    format_u64(id_buf, r->id);
    for (size_t i = 0; i < spec->n_fallback; i++)
        fallback_ptrs[i] = spec->fallback[i];
    *ret = (RequestSpec){
            .id = id_buf,
            .user = r->user,
            .kind = spec->kind,
            .guest = spec->guest_os,
            .class_name = spec->cls[0] ? spec->cls : NULL,
            .memory_gb = spec->memory_gb,
            .count = spec->count,
            .share = spec->share,
            .fallback = fallback_ptrs,
            .n_fallback = spec->n_fallback,
            .wait_s = spec->wait_s,
            .submitted = (uint64_t)r->created_ms, /* the core counts ms (R13) */
            .runtime = spec->runtime,
            .gguf = api_request_model_is_gguf(spec),
            .wait_for_nodes = spec->wait_for_nodes,
    };
}

int req_held_core_spec(const Req *r, ApiRequest *spec_buf, char id_buf[32],
                       const char *fallback_ptrs[SPEC_MAX_FALLBACK], RequestSpec *ret, Error *err) {
    int k = r->spec_text ? api_request_parse(r->spec_text, strlen(r->spec_text), spec_buf, err)
                         : error_set(err, -EINVAL, "request %" PRIu64 " holds no request", r->id);
    if (k < 0)
        return k;
    req_core_spec(r, spec_buf, id_buf, fallback_ptrs, ret);
    return 0;
}

void state_apply_decision(Server *s, Req *r, const Decision *d) {
    /* No reason yet: this is the request's first decision (a later one re-decides a waiting
     * request, whose reason is stored with it, also across a restart). */
    bool first = !r->reason_code[0], was_pending = r->state == REQ_PENDING;
    char id[DECIMAL_U64_SIZE];
    format_u64(id, r->id);
    /* The event's, also where a placement's "none" is cleared from the record below. */
    const char *reason_code = sched_reason_to_string(d->reason);
    str_copy_cut(r->reason_code, sizeof(r->reason_code), reason_code);
    str_copy_cut(r->reason, sizeof(r->reason), d->message);
    /* The grant this decision was made under (tenants.c): a trust withdrawn or granted while
     * the request waited decides its placement, and the record says which it was. */
    r->trusted = ptrmap_get(&s->trusted_users, r->user) != NULL;
    const char *type;
    switch (d->kind) {
    case DECISION_PLACED:
        r->state = REQ_PLACED;
        req_set_placement(s, r, &d->placement);
        r->placed_ms = s->now_ms;
        if (r->reason_code[0] && STREQ(r->reason_code, "none"))
            r->reason_code[0] = 0;
        histogram_observe(&s->metrics.queue_wait,
                          (uint64_t)MAX(0, r->placed_ms - r->created_ms) * 1000);
        type = "request.placed";
        break;
    case DECISION_WAITING:
        r->state = REQ_PENDING;
        type = "request.waiting";
        break;
    default:
        r->state = REQ_REFUSED;
        type = "request.refused";
        break;
    }
    /* Summed over outcome, each counter counts a request once: its first decision, and its
     * way out of the queue (a waiting request placed or refused later). */
    if (d->kind >= 0 && d->kind < 3 && first)
        atomic_fetch_add(&s->metrics.decisions[d->kind], 1);
    else if (d->kind >= 0 && d->kind < 3 && d->kind != DECISION_WAITING && was_pending)
        atomic_fetch_add(&s->metrics.queue_exits[d->kind], 1);
    state_mark_dirty(s, r);
    /* The event's data as text only (the feed keeps text); a placement's is the record's,
     * spliced in, not encoded again. */
    const char *placement = d->kind == DECISION_PLACED ? r->placement_text : NULL;
    JsonText w = {0};
    json_text_reserve(&w, 96 + strlen(r->reason) + strlen(strempty(placement)));
    json_text_open(&w, '{');
    json_text_member_string(&w, "reason_code", reason_code);
    json_text_member_string(&w, "reason", r->reason);
    if (d->kind == DECISION_WAITING)
        json_text_member_int(&w, "queue_position", (int64_t)d->queue_position);
    if (placement)
        json_text_member_raw(&w, "placement", placement);
    json_text_close(&w, '}');
    char *text = json_text_take(&w);
    if (!text) /* a reason that is not UTF-8, which JSON cannot carry: the event without it */
        text = strdup("{}");
    (void)state_event_text(s, type, id, r->user, NULL, text);
}

void state_on_placed(void *userdata, const char *request_id, const Decision *d) {
    Server *s = userdata;
    uint64_t id;
    if (parse_uint64(request_id, UINT64_MAX, &id) < 0)
        return;
    Req *r = state_req(s, id);
    if (!r)
        return;
    /* A placement the queue made in consequence of some change: its event follows the
     * change's own (state_flush_consequences). */
    bool was = s->deferring;
    s->deferring = true;
    state_apply_decision(s, r, d);
    s->deferring = was;
}

/* ---- sites, trust, nodes ---- */

int state_ensure_site(Server *s, const char *site, const char *kind, Error *err) {
    SiteKind k = site_kind_from_string(kind);
    void *have = ptrmap_get(&s->sites, site);
    if (have) {
        if ((intptr_t)have - 1 != k)
            return error_set(err, -EEXIST, "site %s is a %s site, not %s", site,
                             site_kind_to_string((SiteKind)((intptr_t)have - 1)), kind);
        return 0;
    }
    int r = sched_add_site(s->sched, site, k, err);
    if (r < 0)
        return r;
    if (ptrmap_put(&s->sites, site, (void *)(intptr_t)(k + 1)) < 0)
        return error_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < s->trusted_users.cap; i++)
        if (s->trusted_users.keys[i] && s->trusted_users.keys[i] != PTRMAP_TOMB)
            (void)sched_site_trust(s->sched, site, s->trusted_users.keys[i], true, NULL);
    return 0;
}

/* Trust is an admin's grant per tenant (tenants.c); the core knows trust per site, so a
 * trusted tenant is trusted on every site. */
void state_trust_user(Server *s, const char *user) {
    if (ptrmap_get(&s->trusted_users, user))
        return;
    if (ptrmap_put(&s->trusted_users, user, (void *)1) < 0)
        return;
    for (size_t i = 0; i < s->sites.cap; i++)
        if (s->sites.keys[i] && s->sites.keys[i] != PTRMAP_TOMB)
            (void)sched_site_trust(s->sched, s->sites.keys[i], user, true, NULL);
}

void state_node_mig_reserved(Server *s, const ApiNode *n) {
    for (size_t i = 0; i < n->n_devices; i++) {
        const ApiDevice *d = &n->devices[i];
        uint8_t busy = 0;
        for (size_t m = 0; d->mig_enabled && m < d->n_mig; m++)
            if (d->mig[m].busy)
                busy |= api_mig_instance_slots(d, m);
        (void)sched_device_set_mig_reserved(s->sched, n->name, (unsigned)i, busy, core_now(s),
                                            NULL);
    }
}

int state_node_add_core(Server *s, const ApiNode *n, Error *err) {
    int r = state_ensure_site(s, n->site, site_kind_to_string(n->site_kind), err);
    if (r < 0)
        return r;
    DeviceSpec devs[SPEC_MAX_DEVICES];
    const char *profiles[SPEC_MAX_DEVICES][SPEC_MAX_MIG_PROFILES];
    for (size_t i = 0; i < n->n_devices; i++) {
        const ApiDevice *d = &n->devices[i];
        for (size_t p = 0; p < d->n_mig_profiles; p++)
            profiles[i][p] = d->mig_profiles[p];
        devs[i] = (DeviceSpec){
                .class_name = d->cls[0] ? d->cls : NULL,
                .address = d->pci[0] ? d->pci : NULL,
                .memory_gb = d->memory_gb,
                .binding = d->binding,
                .mig_enabled = d->mig_enabled,
                .reset_verified = d->reset_verified,
                .mig_profiles_reported = d->mig_profiles_given,
                .mig_profiles = profiles[i],
                .n_mig_profiles = d->n_mig_profiles,
        };
    }
    SchedLabel label = {SCHED_MODE_LABEL, node_mode_to_string(n->mode)};
    NodeSpec ns = {
            .name = n->name,
            .site = n->site,
            .platform = n->platform,
            .owner = n->owner,
            .labels = n->mode != NODE_MODE_NONE ? &label : NULL,
            .n_labels = n->mode != NODE_MODE_NONE ? 1 : 0,
            .kata = api_node_has_cap(n, "kata"),
            .mig_in_kata = api_node_has_cap(n, "mig_in_kata") || api_node_has_cap(n, "mig-in-kata"),
            .cordoned = n->cordoned,
            .cpu_cores = n->cpus,
            .time_slice_replicas = n->time_slice_replicas,
            .apple_unified_memory_gb = n->apple_unified_memory_gb,
            .apple_usable_memory_gb = n->apple_usable_memory_gb,
            .apple_usable_known = n->apple_usable_given,
            .devices = devs,
            .n_devices = n->n_devices,
    };
    r = sched_add_node(s->sched, &ns, core_now(s), err);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n->n_devices; i++)
        if (n->devices[i].quarantined &&
            (r = sched_device_set_quarantine(s->sched, n->name, (unsigned)i,
                                             n->devices[i].quarantine_reason[0]
                                                     ? n->devices[i].quarantine_reason
                                                     : "quarantined by the agent",
                                             core_now(s), err)) < 0) {
            (void)sched_remove_node(s->sched, n->name, NULL);
            return r;
        }
    return 0;
}

typedef struct NodeView {
    Server *s;
    const Node *n;
    NodeInfo ni;
} NodeView;

/* The core's view of device i, after what was registered. */
static void node_device_extras(JsonText *w, size_t i, void *userdata) {
    NodeView *v = userdata;
    DeviceInfo di;
    if (i >= v->ni.n_devices ||
        sched_device_info(v->s->sched, v->n->spec.name, (unsigned)i, &di) < 0)
        return;
    json_text_member_string(w, "state", device_state_to_string(di.state));
    json_text_member_int(w, "allocations", di.n_allocations);
    /* A GPU a per-GPU switch drains is cordoned while its workload still runs: its state says
     * allocated (as capacity counts it), this says no new work goes there (R4, R7). */
    if (di.cordoned)
        json_text_member_bool(w, "cordoned", true);
    if (fleet_gpu_off_mode(v->s, &v->n->spec, i))
        json_text_member_bool(w, "off_mode", true);
    if (di.mig_enabled)
        json_text_member_int(w, "mig_layout", di.mig_layout);
    if (!di.class_name)
        json_text_member_bool(w, "unclassified", true);
}

static void node_extras(JsonText *w, void *userdata) {
    NodeView *v = userdata;
    json_text_member_bool(w, "unreachable", v->ni.unreachable);
    fleet_node_write(v->s, v->n, w);
    json_text_member_int(w, "cpu_used", v->ni.cpu_used);
    if (v->ni.platform == PLATFORM_MACOS)
        json_text_member_int(w, "macos_vms", v->ni.macos_vms);
    /* A Mac's one GPU is not among the reported devices (the agent reports its memory): its
     * class (or none, R8), state and use, as the core counts it (R10). */
    DeviceInfo di;
    if (v->ni.platform == PLATFORM_MACOS && v->ni.n_devices &&
        sched_device_info(v->s->sched, v->n->spec.name, 0, &di) >= 0) {
        json_text_key(w, "apple_gpu");
        json_text_open(w, '{');
        if (di.class_name)
            json_text_member_string(w, "class", di.class_name);
        else
            json_text_member_bool(w, "unclassified", true);
        json_text_member_string(w, "state", device_state_to_string(di.state));
        json_text_member_int(w, "allocations", di.n_allocations);
        json_text_member_int(w, "usable_memory_gb", v->ni.apple_usable_memory_gb);
        json_text_member_int(w, "used_memory_gb", v->ni.apple_used_memory_gb);
        if (di.quarantine_reason)
            json_text_member_string(w, "quarantined", di.quarantine_reason);
        json_text_close(w, '}');
    }
}

void node_write(Server *s, const Node *n, JsonText *w) {
    NodeView v = {.s = s, .n = n};
    if (sched_node_info(s->sched, n->spec.name, &v.ni) < 0) {
        api_node_write(&n->spec, w);
        return;
    }
    api_node_write_ext(
            &n->spec, w,
            &(ApiNodeExtras){.device = node_device_extras, .node = node_extras, .userdata = &v});
}

json_t *node_to_json(Server *s, const Node *n) {
    JsonText w = {.to_tree = true};
    node_write(s, n, &w);
    return json_text_take_tree(&w);
}

char *node_answer_text(Server *s, const Node *n) {
    JsonText w = {0};
    node_write(s, n, &w);
    return json_text_take_line(&w);
}

void op_answer_node(Server *s, Op *op, int status, const Node *n) {
    op->status = status;
    if (!(op->text = node_answer_text(s, n)))
        op->body = node_to_json(s, n);
}

/* ---- startup: rebuild memory and the core from the store ---- */

/* A stored device of a class the catalog no longer has (an operator removed or renamed it)
 * is shown as unclassified, as a device no class matches is (R8), rather than keeping the
 * whole control plane from starting; a request placed on it still refuses the start, naming
 * the request, since its placement could not be vouched for. */
void state_node_unclassify_unknown(const Server *s, ApiNode *spec) {
    for (size_t i = 0; i < spec->n_devices; i++) {
        ApiDevice *d = &spec->devices[i];
        const GpuClass *c = d->cls[0] ? catalog_find(s->catalog, d->cls) : NULL;
        if (!d->cls[0] || (c && gpu_class_is_card(c)))
            continue;
        d->cls[0] = '\0';
        d->mig_enabled = false;
        d->n_mig = 0;
        d->mig_profiles_given = false;
        d->n_mig_profiles = 0;
    }
}

/* The requests a restore cannot take back: the first one's sentence, and the ids of all. */
typedef struct RestoreRefusals {
    int first_r;
    size_t n;
    char ids[160];
} RestoreRefusals;

static void restore_refused(RestoreRefusals *rr, int r, uint64_t id, Error *err, const char *fmt,
                            ...) __attribute__((format(printf, 5, 6)));
static void restore_refused(RestoreRefusals *rr, int r, uint64_t id, Error *err, const char *fmt,
                            ...) {
    if (!rr->n++) {
        va_list ap;
        va_start(ap, fmt);
        char msg[sizeof(err->message)];
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        rr->first_r = r;
        error_set(err, r, "%s", msg);
    }
    size_t len = strlen(rr->ids);
    if (len + 24 < sizeof(rr->ids))
        snprintf(rr->ids + len, sizeof(rr->ids) - len, "%s%" PRIu64, len ? ", " : "", id);
}

/* The start's error: the first refusal, and how many more there are with their ids. */
static int restore_refusals_end(const RestoreRefusals *rr, Error *err) {
    if (rr->n < 2)
        return rr->first_r;
    char first[sizeof(err->message)];
    snprintf(first, sizeof(first), "%s", err->message);
    error_clear(err); /* the first failure's sentence, said again with the others */
    return error_set(err, rr->first_r, "%s; %zu requests in all cannot be restored (%s)", first,
                     rr->n, rr->ids);
}

static int load_node(const char *name, const char *text, void *userdata) {
    Server *s = userdata;
    Node *n = calloc(1, sizeof(*n));
    Error err = {0};
    if (!n)
        return -ENOMEM;
    int r = api_node_parse(text, strlen(text), &n->spec, &err);
    if (r >= 0)
        state_node_unclassify_unknown(s, &n->spec);
    /* Known before the core gets it, as a registration does (api-nodes.c). */
    if (r >= 0)
        r = ptrmap_put(&s->nodes, n->spec.name, n);
    if (r >= 0 && (r = state_node_add_core(s, &n->spec, &err)) < 0)
        (void)ptrmap_remove(&s->nodes, n->spec.name);
    if (r < 0) {
        free(n);
        return error_set(&s->fatal_err, r, "stored node %s cannot be restored: %s", name,
                         error_message(&err));
    }
    return 0;
}

static int load_request(const StoreRequest *row, void *userdata) {
    Server *s = userdata;
    json_error_t je;
    _cleanup_json_ json_t *j = json_loads(row->json, 0, &je);
    Req *r = calloc(1, sizeof(*r));
    Error err = {0};
    int ret = -EINVAL;
    const char *state = NULL, *code = NULL, *reason = NULL;
    json_t *spec = NULL;
    ApiRequest a;
    json_int_t created = 0, updated = 0, placed = 0;
    int trusted = 0;
    if (!j || !r)
        goto fail;
    if (json_unpack(j, "{s:s, s:o, s:b, s:I, s:I, s?s, s?s, s?I}", "state", &state, "request",
                    &spec, "trusted", &trusted, "created_ms", &created, "updated_ms", &updated,
                    "reason_code", &code, "reason", &reason, "placed_ms", &placed) < 0)
        goto fail;
    r->id = row->id;
    r->user = strdup(row->user);
    r->idem_key = row->idem_key ? strdup(row->idem_key) : NULL;
    r->state = req_state_from_string(state);
    r->trusted = trusted;
    r->created_ms = created;
    r->updated_ms = updated;
    r->placed_ms = placed;
    str_copy_cut(r->reason_code, sizeof(r->reason_code), strempty(code));
    str_copy_cut(r->reason, sizeof(r->reason), strempty(reason));
    if (!r->user || r->state < 0 || api_request_from_json(spec, &a, &err) < 0)
        goto fail;
    if (req_set_spec(r, &a) < 0) {
        ret = -ENOMEM;
        goto fail;
    }
    if ((ret = req_hold_stored_placement(r, json_object_get(j, "placement"))) < 0)
        goto fail;
    if ((ret = state_req_add(s, r)) < 0)
        goto fail;
    return 0;
fail:
    req_free(r);
    return error_set(&s->fatal_err, ret < 0 ? ret : -EINVAL,
                     "stored request %" PRIu64 " cannot be read back%s%s", row->id,
                     err.message[0] ? ": " : "", err.message);
}

static int load_event(const StoreEvent *e, void *userdata) {
    Server *s = userdata;
    /* Parsed once here, to check it and find its user; the feed keeps the stored text (a
     * store's text that is not a JSON object is kept as {}). */
    _cleanup_json_ json_t *data = json_loads(e->json, 0, NULL);
    const char *user = data ? json_string_value(json_object_get(data, "user")) : NULL;
    /* Request events carry the owner in the object's record; look it up. */
    const Req *r = NULL;
    uint64_t id;
    if (!user && string_has_prefix(e->type, "request.") &&
        parse_uint64(e->object, UINT64_MAX, &id) >= 0)
        r = state_req(s, id);
    if (s->events.n == 0 && e->seq > 1)
        events_set_base(&s->events, e->seq - 1); /* the store's retention dropped older ones */
    uint64_t seq = events_append(&s->events, e->time_ms, e->actor, e->type, e->object,
                                 r ? r->user : user, strdup(json_is_object(data) ? e->json : "{}"));
    if (seq != e->seq)
        return error_set(&s->fatal_err, -EINVAL, "the stored event feed has a gap at %" PRIu64 "",
                         e->seq);
    return 0;
}

int state_load(Server *s, Error *err) {
    s->now_ms = server_now_ms();
    s->actor = "system";
    atomic_store(&s->fleet_due_ms, INT64_MAX);
    int r = store_node_foreach(s->store, load_node, s, err);
    if (r >= 0)
        r = fleet_load(s, err);
    if (r >= 0)
        r = tenants_load(s, err);
    if (r >= 0)
        r = store_request_foreach(s->store, load_request, s, err);
    if (r >= 0)
        r = store_event_foreach(s->store, 0, load_event, s, err);
    if (r < 0)
        return s->fatal_err.code ? error_set(err, r, "%s", s->fatal_err.message) : r;
    events_publish(&s->events);

    /* Placed allocations first, exactly as acknowledged; then the waiting queue in order. A
     * request that cannot be restored stops the start; the others are still looked at, so
     * that the refusal names every one to deal with, not one per restart. */
    RestoreRefusals refused = {0};
    for (size_t i = 0; i < s->n_reqs; i++) {
        Req *q = s->reqs[i];
        if (!q || (q->state != REQ_PLACED && q->state != REQ_ACTIVE))
            continue;
        char id[32], node[SCHED_ID_MAX];
        const char *fb[SPEC_MAX_FALLBACK];
        RequestSpec spec;
        Placement p;
        ApiRequest a;
        Error e = {0};
        if ((r = req_held_core_spec(q, &a, id, fb, &spec, &e)) < 0) {
            restore_refused(&refused, r, q->id, err, "request %" PRIu64 " cannot be restored: %s",
                            q->id, error_message(&e));
            continue;
        }
        _cleanup_json_ json_t *stored =
                q->placement_text ? json_loads(q->placement_text, 0, NULL) : NULL;
        if ((r = wire_placement_from_json(s->catalog, stored, &p, node, &e)) < 0 ||
            (r = sched_restore_placed(s->sched, &spec, &p, &e)) < 0) {
            restore_refused(&refused, r, q->id, err,
                            "request %s cannot be restored under the catalog %s: %s", id,
                            s->cfg.catalog_path ? s->cfg.catalog_path : catalog_default_path(),
                            error_message(&e));
            continue;
        }
        node_work_placed(s, q);
    }
    r = 0; /* the refusals so far are in `refused`, said once the waiting ones were looked at */
    if (refused.n && s->replay_view)
        return restore_refusals_end(&refused, err);
    /* Now that our own slices are in: the rest of a busy MIG instance is a stranger's. */
    for (size_t i = 0; i < s->nodes.cap; i++)
        if (s->nodes.keys[i] && s->nodes.keys[i] != PTRMAP_TOMB)
            state_node_mig_reserved(s, &((Node *)s->nodes.values[i])->spec);
    if (s->replay_view) /* a standby's view writes nothing: replay.c queues the waiting ones */
        return 0;
    if ((r = store_begin(s->store, err)) < 0)
        return r;
    for (size_t i = 0; i < s->n_reqs; i++) {
        Req *q = s->reqs[i];
        if (!q || q->state != REQ_PENDING)
            continue;
        char id[32];
        const char *fb[SPEC_MAX_FALLBACK];
        RequestSpec spec;
        Decision d;
        ApiRequest a;
        if ((r = req_held_core_spec(q, &a, id, fb, &spec, err)) < 0)
            break;
        /* Acknowledged as waiting, it goes on waiting (R16): what no node could ever run
         * now (a trust withdrawn since, R9) is refused at a submit (R18), not at a restart. */
        spec.wait_for_nodes = true;
        if ((r = sched_submit(s->sched, &spec, core_now(s), &d, err)) < 0)
            break;
        /* What is left to refuse it is the catalog's change (a class removed or changed under
         * it): refusing it here would lose for good a request the API acknowledged, with no
         * one asking (R16). The start stops as it does for a placed request's class. */
        if (d.kind == DECISION_REFUSED) {
            restore_refused(&refused, -EINVAL, q->id, err,
                            "request %s cannot be restored: it waits, and the catalog %s refuses "
                            "it now (%s); start with the catalog it was accepted under, cancel "
                            "it, then change the catalog",
                            id, s->cfg.catalog_path ? s->cfg.catalog_path : catalog_default_path(),
                            d.message);
            continue;
        }
        /* Only a change of state is news; the waiting reason may be re-worded silently. */
        if (d.kind != DECISION_WAITING)
            state_apply_decision(s, q, &d);
    }
    if (r >= 0 && refused.n)
        r = restore_refusals_end(&refused, err);
    if (r >= 0)
        r = state_flush_dirty(s, err);
    if (r >= 0 && s->batch_failed < 0)
        r = error_set(err, s->batch_failed, "%s", error_message(&s->batch_err));
    if (r >= 0)
        r = store_commit(s->store, err);
    if (r < 0) {
        store_rollback(s->store);
        return r;
    }
    events_publish(&s->events);
    /* Refuse to serve a state that breaks the rules (R15, R16). */
    Error e = {0};
    if ((r = sched_check(s->sched, &e)) < 0)
        return error_set(err, r, "the restored state fails the invariant check: %s",
                         error_message(&e));
    fleet_grace_from_now(s);
    return 0;
}

void state_free(Server *s) {
    fleet_free(s);
    history_free(s);
    for (size_t i = 0; i < s->n_reqs; i++)
        req_free(s->reqs[i]);
    free(s->reqs);
    free(s->dirty);
    for (size_t i = 0; i < s->n_deferred; i++) {
        free(s->deferred[i].object);
        free(s->deferred[i].user);
        free(s->deferred[i].text);
    }
    free(s->deferred);
    for (size_t i = 0; i < s->nodes.cap; i++)
        if (s->nodes.keys[i] && s->nodes.keys[i] != PTRMAP_TOMB) {
            node_work_free(s->nodes.values[i]);
            free(s->nodes.values[i]);
        }
    ptrmap_done(&s->nodes);
    ptrmap_done(&s->idem);
    ptrmap_done(&s->sites);
    ptrmap_done(&s->trusted_users);
}
