/* fleet.c: the control plane's side of its agents: heartbeats and unreachable nodes, work
 * queued for agents (GPU rebinds, reset-cycle checks, R9), and the fleet's records in the store.
 *
 * An agent that misses its heartbeats makes its node unreachable: the core places nothing
 * there, but every allocation on it is kept (a VM may well still run) until the agent comes
 * back and says what runs, or an admin releases it. Called on the writer thread with the
 * state lock held for writing. */
#include "fleet.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node-work.h"
#include "util/macro.h"
#include "util/json-cleanup.h"
#include "util/strutil.h"

#define FOREACH_NODE(s, n)                                                                         \
    for (size_t _i = 0; _i < (s)->nodes.cap; _i++)                                                 \
        for (Node *n = (s)->nodes.keys[_i] && (s)->nodes.keys[_i] != PTRMAP_TOMB                   \
                               ? (s)->nodes.values[_i]                                             \
                               : NULL;                                                             \
             n; n = NULL)

/* ---- records in the store ---- */

static int put_doc(Server *s, const char *key, json_t *taken) {
    _cleanup_json_ json_t *doc = taken;
    _cleanup_free_ char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    if (!text)
        return writer_check(s, -ENOMEM, NULL, "saving a fleet record");
    Error err = {0};
    int r = store_fleet_put(s->store, key, text, &err);
    return writer_check(s, r, &err, "saving a fleet record");
}

int fleet_save_agent(Server *s, const Node *n) {
    char key[16 + SPEC_NAME_MAX];
    snprintf(key, sizeof(key), "agent/%s", n->spec.name);
    return put_doc(s, key,
                   json_pack("{s:i, s:b}", "heartbeat_s", (int)n->heartbeat_s, "unreachable",
                             n->unreachable));
}

int fleet_save_switch(Server *s, const Node *n) {
    char key[16 + SPEC_NAME_MAX];
    snprintf(key, sizeof(key), "switch/%s", n->spec.name);
    if (!n->sw)
        return writer_check(s, store_fleet_delete(s->store, key, NULL), NULL,
                            "deleting a fleet record");
    return put_doc(s, key, wire_switch_to_json(n->sw));
}

void fleet_forget_node(Server *s, Node *n) {
    char key[16 + SPEC_NAME_MAX];
    snprintf(key, sizeof(key), "agent/%s", n->spec.name);
    (void)writer_check(s, store_fleet_delete(s->store, key, NULL), NULL, "deleting a fleet record");
    free(n->sw);
    n->sw = NULL;
    (void)fleet_save_switch(s, n); /* deletes its record */
    for (size_t i = 0; n->fleet_queued && i < s->n_fleet_queue; i++)
        if (s->fleet_queue[i] == n) {
            memmove(s->fleet_queue + i, s->fleet_queue + i + 1,
                    (s->n_fleet_queue - i - 1) * sizeof(*s->fleet_queue));
            s->n_fleet_queue--;
            break;
        }
    n->fleet_queued = false;
}

static void task_key(uint64_t id, char buf[40]) {
    snprintf(buf, 40, "task/%020" PRIu64, id);
}

/* ---- tasks ---- */

TaskVec fleet_tasks_of(const Server *s, const char *node) {
    const TaskVec *v = ptrmap_get(&s->tasks_by_node, node);
    return v ? *v : (TaskVec){0};
}

/* Task t joins its node's index (ids only grow, so appending keeps the order). */
static int index_task(Server *s, Task *t) {
    TaskVec *v = ptrmap_get(&s->tasks_by_node, t->node);
    if (!v) {
        if (!(v = calloc(1, sizeof(*v))))
            return -ENOMEM;
        int r = ptrmap_put(&s->tasks_by_node, t->node, v);
        if (r < 0) {
            free(v);
            return r;
        }
    }
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        Task **x = realloc(v->v, cap * sizeof(*x));
        if (!x) {
            if (!v->n)
                free(ptrmap_remove(&s->tasks_by_node, t->node));
            return -ENOMEM;
        }
        v->v = x;
        v->cap = cap;
    }
    v->v[v->n++] = t;
    return 0;
}

static void unindex_task(Server *s, const Task *t) {
    TaskVec *v = ptrmap_get(&s->tasks_by_node, t->node);
    for (size_t i = 0; v && i < v->n; i++)
        if (v->v[i] == t) {
            memmove(v->v + i, v->v + i + 1, (v->n - i - 1) * sizeof(*v->v));
            v->n--;
            break;
        }
    if (v && !v->n) {
        ptrmap_remove(&s->tasks_by_node, t->node);
        free(v->v);
        free(v);
    }
}

Task *fleet_task_add(Server *s, const char *node, TaskKind kind, unsigned dev, const char *gpu,
                     const char *target) {
    if (s->n_tasks == s->cap_tasks) {
        size_t cap = s->cap_tasks ? s->cap_tasks * 2 : 16;
        Task **v = realloc(s->tasks, cap * sizeof(Task *));
        if (!v)
            return NULL;
        s->tasks = v;
        s->cap_tasks = cap;
    }
    Task *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->id = ++s->last_task_id;
    t->kind = kind;
    t->dev = dev;
    t->created_ms = s->now_ms;
    snprintf(t->node, sizeof(t->node), "%s", node);
    snprintf(t->gpu, sizeof(t->gpu), "%s", strempty(gpu));
    snprintf(t->target, sizeof(t->target), "%s", strempty(target));
    if (index_task(s, t) < 0) {
        s->last_task_id--;
        free(t);
        return NULL;
    }
    s->tasks[s->n_tasks++] = t;
    char key[40];
    task_key(t->id, key);
    (void)put_doc(s, key, wire_task_to_json(t));
    (void)put_doc(s, "meta/last-task", json_pack("{s:I}", "id", (json_int_t)s->last_task_id));
    char obj[32];
    snprintf(obj, sizeof(obj), "%" PRIu64, t->id);
    json_t *data = wire_task_to_json(t);
    /* "bind 0000:3b:00.0 on lab-1 to vfio"; a whole Kubernetes node's is its relabel. */
    json_object_set_new(
            data, "reason",
            t->gpu[0] ? json_sprintf("%s %s on %s%s%s", task_kind_to_string(kind), t->gpu, node,
                                     t->target[0] ? " to " : "", t->target)
                      : json_sprintf("relabel Kubernetes node %s for %s", node,
                                     STREQ(t->target, "vfio") ? "vm-passthrough" : "container"));
    state_event(s, "task.queued", obj, NULL, data);
    return t;
}

Task *fleet_task_find(Server *s, const char *node, uint64_t id) {
    TaskVec v = fleet_tasks_of(s, node);
    for (size_t i = 0; i < v.n; i++)
        if (v.v[i]->id == id)
            return v.v[i];
    return NULL;
}

void fleet_task_finish(Server *s, Task *t) {
    char key[40];
    task_key(t->id, key);
    (void)writer_check(s, store_fleet_delete(s->store, key, NULL), NULL, "deleting a fleet record");
    unindex_task(s, t);
    /* The array is in id order (ids only grow; the store loads them by key, which pads the
     * id): find t by halving rather than by a walk of every open task. */
    size_t lo = 0, hi = s->n_tasks;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->tasks[mid]->id < t->id)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo < s->n_tasks && s->tasks[lo] == t ? lo : 0; i < s->n_tasks; i++)
        if (s->tasks[i] == t) { /* (the walk only if the order ever broke) */
            memmove(s->tasks + i, s->tasks + i + 1, (s->n_tasks - i - 1) * sizeof(Task *));
            s->n_tasks--;
            break;
        }
    free(t);
}

bool fleet_task_open_for(Server *s, const char *node, TaskKind kind, unsigned dev) {
    TaskVec v = fleet_tasks_of(s, node);
    for (size_t i = 0; i < v.n; i++)
        if (v.v[i]->kind == kind && v.v[i]->dev == dev)
            return true;
    return false;
}

/* ---- workloads on a node ---- */

size_t fleet_node_workloads(Server *s, const char *node, int dev, Req **ret, size_t max) {
    size_t n = 0;
    const Node *nd = ptrmap_get(&s->nodes, node);
    if (!nd)
        return 0;
    const ReqVec *work = node_work_of(nd); /* the node's own requests, not every live one */
    for (size_t i = 0; i < work->n; i++) {
        Req *r = work->v[i];
        if ((r->state != REQ_PLACED && r->state != REQ_ACTIVE) || !req_placed_on(r, node, dev))
            continue;
        /* CPU work holds no GPU: a GPU's mode switch does not drain it (but the node's agent
         * runs it, so the whole node's work includes it: a heartbeat without it ends it). */
        if (dev >= 0 && r->placed_method == METHOD_CPU)
            continue;
        if (n < max)
            ret[n] = r;
        n++;
    }
    return n;
}

void fleet_add_workloads(Op *op, Req **reqs, size_t n) {
    json_t *ws = json_array();
    for (size_t i = 0; ws && i < n; i++)
        json_array_append_new(ws, json_pack("{s:I,s:s,s:s}", "id", (json_int_t)reqs[i]->id, "user",
                                            reqs[i]->user, "kind",
                                            workload_kind_to_string(reqs[i]->kind)));
    if (ws && op->body)
        json_object_set_new(op->body, "workloads", ws);
    else
        json_decref(ws);
}

void fleet_describe_workloads(Req **reqs, size_t n, bool with_users, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n && len + 1 < size; i++) {
        int k = snprintf(buf + len, size - len, "%s%" PRIu64 " (%s%s%s)", i ? ", " : "",
                         reqs[i]->id, with_users ? reqs[i]->user : "", with_users ? ", " : "",
                         workload_kind_to_string(reqs[i]->kind));
        if (k < 0)
            break;
        len += (size_t)k;
    }
}

void state_end_request(Server *s, Req *r, ReqState final, const char *event_type, const char *why) {
    char id[32];
    snprintf(id, sizeof(id), "%" PRIu64, r->id);
    Error err = {0};
    if (sched_release(s->sched, id, core_now(s), &err) < 0)
        return;
    r->state = final;
    snprintf(r->reason, sizeof(r->reason), "%s", why);
    state_mark_dirty(s, r);
    state_event(s, event_type, id, r->user,
                json_pack("{s:s, s:s}", "state", req_state_to_string(final), "reason", why));
    fleet_on_released(s, r);
}

void fleet_gpu_event(Server *s, const Node *n, unsigned dev, const char *type, json_t *data) {
    char obj[sizeof(n->spec.name) + 16];
    snprintf(obj, sizeof(obj), "%s/%u", n->spec.name, dev);
    if (data) {
        json_object_set_new(data, "node", json_string(n->spec.name));
        json_object_set_new(data, "device", json_integer(dev));
        if (dev < n->spec.n_devices)
            json_object_set_new(data, "gpu", json_string(n->spec.devices[dev].pci));
    }
    state_event(s, type, obj, NULL, data);
}

/* ---- hooks ---- */

void fleet_on_released(Server *s, const Req *r) {
    Node *n = r->placed_node ? ptrmap_get(&s->nodes, r->placed_node) : NULL;
    if (!n)
        return;
    /* A slice's slots the agent last reported busy are no longer ours: a foreign process
     * still in them keeps them from being offered until the agent says otherwise (R2c). */
    if (r->placed_method == METHOD_MIG)
        state_node_mig_reserved(s, &n->spec);
    fleet_mark(s, n);
}

bool fleet_gpu_off_mode(const Server *s, const ApiNode *spec, size_t i) {
    if (spec->site_kind != SITE_DATACENTER || spec->mode == NODE_MODE_NONE ||
        api_node_has_cap(spec, "k8s") || i >= spec->n_devices)
        return false;
    const ApiDevice *d = &spec->devices[i];
    const GpuClass *c = d->cls[0] ? catalog_find(s->catalog, d->cls) : NULL;
    Binding want = spec->mode == NODE_MODE_VM_PASSTHROUGH ? BINDING_VFIO : BINDING_HOST;
    return c && c->vendor == VENDOR_NVIDIA && d->binding != want;
}

size_t fleet_gpus_off_mode(const Server *s, const ApiNode *spec, size_t *ret_first) {
    size_t off = 0;
    for (size_t i = 0; i < spec->n_devices; i++)
        if (fleet_gpu_off_mode(s, spec, i) && !off++ && ret_first)
            *ret_first = i;
    return off;
}

void fleet_mark(Server *s, Node *n) {
    n->reset_scan = true;
    if (n->fleet_queued || s->fleet_scan_all)
        return;
    if (s->n_fleet_queue == s->cap_fleet_queue) {
        size_t cap = s->cap_fleet_queue ? s->cap_fleet_queue * 2 : 64;
        Node **q = reallocarray(s->fleet_queue, cap, sizeof(*q));
        if (!q) { /* nothing is lost: the next tick looks at every node, as it did once */
            s->fleet_scan_all = true;
            return;
        }
        s->fleet_queue = q;
        s->cap_fleet_queue = cap;
    }
    s->fleet_queue[s->n_fleet_queue++] = n;
    n->fleet_queued = true;
}

/* A GPU's passed reset check holds while it stays on the driver it was checked on; its
 * quarantine holds until the control plane lifts it (R9). */
static void keep_device_checks(const ApiDevice *o, ApiDevice *d) {
    d->reset_verified = o->reset_verified && o->binding == d->binding;
    if (o->quarantined && !d->quarantined) {
        d->quarantined = true;
        snprintf(d->quarantine_reason, sizeof(d->quarantine_reason), "%s", o->quarantine_reason);
    }
}

void fleet_merge_agent_push(const Node *old, ApiNode *push) {
    /* The mode label, the cordon and the reset checks are the control plane's; the agent
     * reports what the hardware shows (devices, bindings, its own quarantines). */
    /* Only while the node is a datacenter one: a lab or solo machine has no node mode (R7), and
     * a mode kept across a push that made it one could not be stored again (nor restored). */
    if (old->spec.mode != NODE_MODE_NONE && push->site_kind == SITE_DATACENTER)
        push->mode = old->spec.mode;
    push->cordoned = old->spec.cordoned;
    memcpy(push->cordon_reason, old->spec.cordon_reason, sizeof(push->cordon_reason));
    for (size_t i = 0; i < push->n_devices; i++) {
        ApiDevice *d = &push->devices[i];
        for (size_t k = 0; k < old->spec.n_devices; k++) {
            const ApiDevice *o = &old->spec.devices[k];
            if (STRNEQ(o->pci, d->pci))
                continue;
            /* A Kubernetes node's GPU binding follows its mode label (R3), which the control
             * plane sets and the GPU Operator acts on; an agent reports what its machine has
             * (after a failed switch, GPUs that moved), which fleet_gpus_off_mode() checks. */
            if (old->spec.site_kind == SITE_DATACENTER && api_node_has_cap(&old->spec, "k8s"))
                d->binding = o->binding;
            keep_device_checks(o, d);
            break;
        }
    }
}

void fleet_keep_checks(const Node *old, ApiNode *push) {
    for (size_t i = 0; i < push->n_devices; i++) {
        ApiDevice *d = &push->devices[i];
        d->reset_verified = false; /* a GPU the node did not have is checked as new */
        for (size_t k = 0; k < old->spec.n_devices; k++)
            if (STREQ(old->spec.devices[k].pci, d->pci)) {
                keep_device_checks(&old->spec.devices[k], d);
                break;
            }
    }
}

static void set_unreachable(Server *s, Node *n, bool on) {
    if (n->unreachable == on)
        return;
    /* fails only for a node the core does not know, and every Node of s->nodes is there */
    int r = sched_node_set_unreachable(s->sched, n->spec.name, on, core_now(s), NULL);
    assert(r >= 0);
    if (r < 0)
        return;
    n->unreachable = on;
    (void)fleet_save_agent(s, n);
    int64_t seen = atomic_load(&n->last_seen_ms);
    state_event(s, on ? "node.unreachable" : "node.reachable", n->spec.name, NULL,
                json_pack("{s:I, s:i, s:s}", "last_seen_ms", (json_int_t)seen, "heartbeat_s",
                          (int)n->heartbeat_s, "reason",
                          on ? "the agent missed 3 heartbeats: nothing new is placed, allocations "
                               "are kept"
                             : "the agent reports again"));
    /* An operator's journal says it too, not only the events feed. */
    if (s->cfg.log)
        fprintf(s->cfg.log,
                on ? "einsora serve: node %s is unreachable: its agent missed 3 heartbeats of "
                     "%us (nothing new is placed there; its allocations are kept)\n"
                   : "einsora serve: node %s is reachable again (heartbeat %us)\n",
                n->spec.name, n->heartbeat_s);
}

void fleet_agent_seen(Server *s, Node *n, unsigned heartbeat_s) {
    atomic_store(&n->last_seen_ms, s->now_ms);
    if (heartbeat_s && n->heartbeat_s != heartbeat_s) {
        if (!n->heartbeat_s) {
            s->n_agents++;
            fleet_mark(s, n); /* now there is an agent to ask for reset checks (R9) */
        }
        n->heartbeat_s = heartbeat_s;
        (void)fleet_save_agent(s, n);
        atomic_store(&s->fleet_due_ms, s->now_ms + 1000);
    }
    set_unreachable(s, n, false);
}

void fleet_on_node_put(Server *s, Node *n, bool by_agent) {
    fleet_mark(s, n);
    if (by_agent)
        fleet_agent_seen(s, n, 0); /* the agent speaks: the node is reachable again */
    else if (n->unreachable)
        (void)sched_node_set_unreachable(s->sched, n->spec.name, true, core_now(s), NULL);
    fleet_switch_reapply(s, n);
}

/* ---- the tick ---- */

/* R9: a consumer GPU on vfio-pci without a passed reset-cycle check is not offered for
 * passthrough; ask the node's agent for the check (first time, and after each VM). */
static void reset_scan(Server *s, Node *n) {
    n->reset_scan = false;
    NodeInfo ni;
    int r = sched_node_info(s->sched, n->spec.name, &ni);
    assert(r >= 0); /* every Node of s->nodes is in the core */
    if (r < 0)
        return;
    for (unsigned i = 0; i < ni.n_devices && i < n->spec.n_devices; i++) {
        DeviceInfo di;
        if (sched_device_info(s->sched, n->spec.name, i, &di) < 0 || di.class_index < 0)
            continue;
        if (!s->catalog->classes[di.class_index].consumer || di.binding != BINDING_VFIO ||
            di.reset_verified || di.state == DEVICE_QUARANTINED || di.n_allocations)
            continue;
        /* A GPU in the middle of a mode switch is checked once the switch is over. */
        if (switch_active(n->sw) && (n->sw->gpu < 0 || (unsigned)n->sw->gpu == i))
            continue;
        if (n->spec.devices[i].reset_verified) {
            /* The core asks again after a VM stopped: a restart must not bring back the old pass.
             */
            n->spec.devices[i].reset_verified = false;
            (void)save_node(s, n);
        }
        if (n->heartbeat_s && !fleet_task_open_for(s, n->spec.name, TASK_RESET_CHECK, i))
            (void)fleet_task_add(s, n->spec.name, TASK_RESET_CHECK, i, di.address, NULL);
    }
}

static void tick_node(Server *s, Node *n) {
    if (switch_active(n->sw))
        (void)fleet_switch_advance(s, n);
    if (n->reset_scan)
        reset_scan(s, n);
}

void fleet_tick(Server *s) {
    int64_t now = s->now_ms;
    /* Missed heartbeats are looked for once a second (not at every batch: ops are frequent). */
    int64_t due = atomic_load(&s->fleet_due_ms);
    if (s->n_agents && due <= now) {
        FOREACH_NODE(s, n) {
            int64_t grace = (int64_t)n->heartbeat_s * 3000 + 500;
            if (n->heartbeat_s && !n->unreachable && now - atomic_load(&n->last_seen_ms) > grace)
                set_unreachable(s, n, true);
        }
    }
    if (!s->n_agents)
        atomic_store(&s->fleet_due_ms, INT64_MAX);
    else if (due <= now || due == INT64_MAX)
        atomic_store(&s->fleet_due_ms, now + 1000);
    if (s->fleet_scan_all) { /* the queue could not grow: every node, as once */
        s->fleet_scan_all = false;
        for (size_t i = 0; i < s->n_fleet_queue; i++)
            s->fleet_queue[i]->fleet_queued = false;
        s->n_fleet_queue = 0;
        FOREACH_NODE(s, n)
        tick_node(s, n);
        return;
    }
    /* A node marked again meanwhile (a switch's last step asks for reset checks) is appended
     * and waits for the next tick, as it did when every tick walked the whole fleet. */
    size_t n_queued = s->n_fleet_queue;
    if (!n_queued)
        return;
    for (size_t i = 0; i < n_queued; i++) {
        Node *n = s->fleet_queue[i];
        n->fleet_queued = false;
        tick_node(s, n);
    }
    memmove(s->fleet_queue, s->fleet_queue + n_queued,
            (s->n_fleet_queue - n_queued) * sizeof(*s->fleet_queue));
    s->n_fleet_queue -= n_queued;
}

/* ---- node JSON ---- */

void fleet_node_write(Server *s, const Node *n, JsonText *w) {
    if (n->heartbeat_s) {
        json_text_key(w, "agent");
        json_text_open(w, '{');
        json_text_member_int(w, "heartbeat_s", (int)n->heartbeat_s);
        json_text_member_int(w, "last_seen_ms", atomic_load(&n->last_seen_ms));
        json_text_close(w, '}');
    }
    if (n->sw) {
        json_text_key(w, "switch");
        json_text_value(w, wire_switch_to_json(n->sw));
    }
    fleet_tasks_write(s, n, w);
}

void fleet_tasks_write(Server *s, const Node *n, JsonText *w) {
    json_text_key(w, "tasks");
    json_text_open(w, '[');
    TaskVec v = fleet_tasks_of(s, n->spec.name);
    for (size_t i = 0; i < v.n; i++)
        json_text_value(w, wire_task_to_json(v.v[i]));
    json_text_close(w, ']');
}

/* ---- startup ---- */

void fleet_grace_from_now(Server *s) {
    int64_t now = server_now_ms();
    FOREACH_NODE(s, n) {
        if (n->heartbeat_s && !n->unreachable)
            atomic_store(&n->last_seen_ms, now);
    }
}

static int load_record(const char *key, const char *text, void *userdata) {
    Server *s = userdata;
    _cleanup_json_ json_t *j = json_loads(text, 0, NULL);
    if (!j)
        return error_set(&s->fatal_err, -EINVAL, "stored fleet record %s is not JSON", key);
    int r = 0;
    Node *n = NULL;
    if (string_has_prefix(key, "agent/") && (n = ptrmap_get(&s->nodes, key + 6))) {
        n->heartbeat_s = (unsigned)json_integer_value(json_object_get(j, "heartbeat_s"));
        if (n->heartbeat_s)
            s->n_agents++;
        /* Seen as of the load, for a standby's view; a state that serves starts each agent's
         * grace once it is ready (fleet_grace_from_now()). */
        atomic_store(&n->last_seen_ms, s->now_ms);
        if (json_is_true(json_object_get(j, "unreachable")) &&
            sched_node_set_unreachable(s->sched, n->spec.name, true, core_now(s), NULL) >= 0)
            n->unreachable = true;
    } else if (string_has_prefix(key, "switch/") && (n = ptrmap_get(&s->nodes, key + 7))) {
        _cleanup_free_ NodeSwitch *sw = calloc(1, sizeof(*sw));
        Error serr = {0};
        if (!sw || wire_switch_from_json(j, sw, &serr) < 0) {
            r = error_set(&s->fatal_err, -EINVAL, "stored mode switch of node %s is malformed: %s",
                          key + 7, sw ? error_message(&serr) : "out of memory");
        } else {
            n->sw = TAKE_PTR(sw);
            if (switch_active(n->sw))
                fleet_mark(s, n);
            fleet_switch_reapply(s, n);
        }
    } else if (string_has_prefix(key, "task/")) {
        _cleanup_free_ Task *t = calloc(1, sizeof(*t));
        Error terr = {0};
        if (!t || wire_task_from_json(j, t, NULL, &terr) < 0) {
            r = error_set(&s->fatal_err, -EINVAL, "stored task %s is malformed: %s", key,
                          t ? error_message(&terr) : "out of memory");
        } else {
            /* Re-add without events or writes: rebuild memory only. */
            if (s->n_tasks == s->cap_tasks) {
                size_t cap = s->cap_tasks ? s->cap_tasks * 2 : 16;
                Task **v = realloc(s->tasks, cap * sizeof(Task *));
                if (v)
                    s->tasks = v, s->cap_tasks = cap;
            }
            s->last_task_id = MAX(s->last_task_id, t->id);
            if (s->n_tasks < s->cap_tasks && index_task(s, t) >= 0)
                s->tasks[s->n_tasks++] = TAKE_PTR(t);
            else
                r = error_set(&s->fatal_err, -ENOMEM, "out of memory");
        }
    } else if (STREQ(key, "meta/last-task")) {
        s->last_task_id =
                MAX(s->last_task_id, (uint64_t)json_integer_value(json_object_get(j, "id")));
    }
    return r;
}

int fleet_load(Server *s, Error *err) {
    int r = store_fleet_foreach(s->store, load_record, s, err);
    if (r < 0)
        return s->fatal_err.code ? error_set(err, r, "%s", s->fatal_err.message) : r;
    FOREACH_NODE(s, n)
    if (n->heartbeat_s || switch_active(n->sw))
        fleet_mark(s, n);
    atomic_store(&s->fleet_due_ms, s->n_agents ? s->now_ms + 1000 : INT64_MAX);
    return 0;
}

void fleet_free(Server *s) {
    for (size_t i = 0; i < s->n_tasks; i++)
        free(s->tasks[i]);
    free(s->tasks);
    for (size_t i = 0; i < s->tasks_by_node.cap; i++)
        if (s->tasks_by_node.keys[i] && s->tasks_by_node.keys[i] != PTRMAP_TOMB) {
            TaskVec *v = s->tasks_by_node.values[i];
            free(v->v);
            free(v);
        }
    ptrmap_done(&s->tasks_by_node);
    free(s->fleet_queue);
    s->fleet_queue = NULL;
    s->n_fleet_queue = s->cap_fleet_queue = 0;
    FOREACH_NODE(s, n) {
        free(n->sw);
        n->sw = NULL;
    }
}
