/* api-fleet.c: the API of the fleet: an agent's heartbeat (which answers with its work and
 * the workloads placed on its node), an agent's task results, and mode switches (R3, R4, R7). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "fleet.h"
#include "node-work.h"
#include "wire/fleet.h"
#include "util/json-cleanup.h"
#include "util/macro.h"
#include "util/strutil.h"

bool api_is_agent_of(const Principal *who, const char *node) {
    return who->role == ROLE_ADMIN || (who->role == ROLE_NODE && principal_has_node(who, node));
}

/* ---- heartbeat ---- */

typedef struct BeatArg {
    const char *node;
    const FleetHeartbeat *hb;
    const char *instance; /* the agent's WIRE_AGENT_HEADER, NULL when it sent none */
} BeatArg;

static void op_heartbeat(Server *s, Op *op) {
    BeatArg *a = op->arg;
    Node *n = ptrmap_get(&s->nodes, a->node);
    if (!n)
        OP_FAIL(op, 404, "not_found",
                "No node %s: the agent registers it first (PUT /v1/nodes/%s).", a->node, a->node);
    fleet_agent_seen(s, n, a->hb->interval_s);
    if (a->instance && op->who->role == ROLE_NODE) /* checked by the dispatch (api.c) */
        str_copy_cut(n->agent_instance, sizeof(n->agent_instance), a->instance);
    /* The agent's report wins (its journal and the kernel are the truth): an active workload
     * it no longer runs has ended. Placed ones it has not started yet are still to start. */
    if (a->hb->has_running) {
        /* As many as the node runs: no fixed cap. */
        size_t k = fleet_node_workloads(s, n->spec.name, -1, NULL, 0);
        _cleanup_free_ Req **w = k ? calloc(k, sizeof(Req *)) : NULL;
        if (k && !w)
            OP_FAIL(op, 500, "internal", "Out of memory.");
        size_t got = fleet_node_workloads(s, n->spec.name, -1, w, k); /* it counts past k */
        k = MIN(k, got);
        for (size_t i = 0; i < k; i++)
            if (w[i]->state == REQ_ACTIVE && !fleet_heartbeat_runs(a->hb, w[i]->id))
                /* Ended on its own, as far as anyone asked it (R17): not released, which
                 * is what its user does. */
                state_end_request(s, w[i], REQ_ENDED, "request.lost",
                                  "the node's agent reports it no longer runs");
    }
    op->status = 200;
    JsonText w = {0};
    api_node_work_write(s, n, &w, NULL);
    if (!(op->text = json_text_take_line(&w)))
        op_error(op, 500, "internal", "Out of memory.");
}

bool api_node_work_has(const Req *r, const char *node) {
    return (r->state == REQ_PLACED || r->state == REQ_ACTIVE) && req_placed_on(r, node, -1);
}

void api_node_work_write(Server *s, const Node *n, JsonText *w, const char *cursor) {
    json_text_open(w, '{');
    json_text_member_string(w, "node", n->spec.name);
    json_text_member_bool(w, "unreachable", n->unreachable);
    fleet_tasks_write(s, n, w);
    json_text_key(w, "workloads");
    json_text_open(w, '[');
    /* The node's index (readers must not compact it): ended or moved ones are skipped. */
    const ReqVec *v = node_work_of(n);
    for (size_t i = 0; i < v->n; i++) {
        const Req *r = v->v[i];
        if (!api_node_work_has(r, n->spec.name))
            continue;
        json_text_open(w, '{');
        json_text_member_int(w, "id", (int64_t)r->id);
        json_text_member_string(w, "user", r->user);
        json_text_member_string(w, "kind", workload_kind_to_string(r->kind));
        json_text_member_string(w, "state", req_state_to_string(r->state));
        /* The id and this make the workload one: a leftover of an earlier request with the
         * same id (a fleet started again on a fresh state) is told from it (R17). */
        json_text_member_int(w, "created_ms", r->created_ms);
        json_text_key(w, "placement");
        json_text_raw(w, r->placement_text);
        json_text_member_raw(w, "request", r->spec_text);
        json_text_close(w, '}');
    }
    json_text_close(w, ']');
    if (cursor)
        json_text_member_string(w, "cursor", cursor);
    json_text_close(w, '}');
}

void api_node_heartbeat(HttpCtx *c) {
    const char *node = c->match.params[0];
    if (!api_is_agent_of(&c->who, node))
        API_FAIL(c, 403, "forbidden",
                 "Only the agent of node %s (or an admin) sends its heartbeat.", node);
    FleetHeartbeat hb;
    Error err = {0};
    if (fleet_heartbeat_parse(c->body, c->body_len, &hb, &err) < 0)
        API_FAIL(c, 400, "bad_request", "%s", error_message(&err));
    BeatArg a = {.node = node, .hb = &hb, .instance = c->agent_instance};
    api_apply(c, op_heartbeat, &a);
    fleet_heartbeat_done(&hb);
}

/* ---- task results ---- */

typedef struct ResultArg {
    const char *node;
    uint64_t id;
    const FleetTaskResult *res;
} ResultArg;

static void op_task_result(Server *s, Op *op) {
    ResultArg *a = op->arg;
    Node *n = ptrmap_get(&s->nodes, a->node);
    Task *t = fleet_task_find(s, a->node, a->id);
    if (!n || !t)
        OP_FAIL(op, 404, "not_found", "No open task %" PRIu64 " for node %s.", a->id, a->node);
    const FleetTaskResult *res = a->res;
    if (res->progress) { /* the task goes on: only its switch's message changes */
        fleet_switch_task_progress(s, n, t->id, res->message);
        op->status = 200;
        op->body = json_pack("{s:s}", "status", "noted");
        return;
    }
    char obj[32];
    snprintf(obj, sizeof(obj), "%" PRIu64, t->id);
    const char *verdict = res->verdict[0] ? res->verdict : NULL;
    json_t *data = json_pack("{s:s, s:i, s:s, s:b, s:s}", "node", t->node, "device", (int)t->dev,
                             "gpu", t->gpu, "ok", res->ok, "message", res->message);
    if (t->kind == TASK_RESET_CHECK) {
        /* R9: a failed check quarantines the GPU with the reason; "degraded" is offered. */
        bool failed = verdict && STREQ(verdict, "fail");
        json_object_set_new(data, "verdict",
                            json_string(verdict   ? verdict
                                        : res->ok ? "pass"
                                                  : "error"));
        if (res->ok || failed) {
            Error err = {0};
            const char *why = res->message[0] ? res->message : "the reset-cycle check failed";
            if (sched_device_reset_result(s->sched, n->spec.name, t->dev, !failed,
                                          failed ? why : NULL, core_now(s), &err) >= 0 &&
                t->dev < n->spec.n_devices) {
                ApiDevice *d = &n->spec.devices[t->dev];
                d->reset_verified = !failed;
                if (failed) {
                    d->quarantined = true;
                    str_copy_cut_utf8(d->quarantine_reason, sizeof(d->quarantine_reason), why);
                }
                (void)save_node(s, n);
            }
        }
        json_object_set_new(data, "reason",
                            json_sprintf("%s %s: %s", t->gpu,
                                         json_string_value(json_object_get(data, "verdict")),
                                         res->message));
        state_event(s, "gpu.reset-checked", obj, NULL, data);
        fleet_task_finish(s, t);
        /* A switch may wait for this check before its GPU leaves vfio-pci (fleet-switch.c). */
        if (switch_active(n->sw))
            (void)fleet_switch_advance(s, n);
        op->status = 200;
        op->body = json_pack("{s:s}", "status", "recorded");
        return;
    } else {
        json_object_set_new(data, "reason",
                            json_sprintf("%s%s", res->ok ? "" : "failed: ", res->message));
        /* A whole Kubernetes node's task is its relabel (its success is node.relabeled). */
        state_event(s,
                    t->gpu[0] ? "gpu.rebound"
                    : res->ok ? "node.relabel-done"
                              : "node.relabel-failed",
                    obj, NULL, data);
        fleet_switch_task_done(s, n, t->id, res->ok, res->unchanged, res->message);
    }
    fleet_task_finish(s, t);
    op->status = 200;
    op->body = json_pack("{s:s}", "status", "recorded");
}

void api_node_task_result(HttpCtx *c) {
    const char *node = c->match.params[0];
    uint64_t id;
    if (!api_path_id(c, c->match.params[1], "task", &id))
        return;
    if (!api_is_agent_of(&c->who, node))
        API_FAIL(c, 403, "forbidden", "Only the agent of node %s (or an admin) reports its tasks.",
                 node);
    FleetTaskResult res;
    Error err = {0};
    if (fleet_task_result_parse(c->body, c->body_len, &res, &err) < 0)
        API_FAIL(c, 400, "bad_request", "%s", error_message(&err));
    ResultArg a = {.node = node, .id = id, .res = &res};
    api_apply(c, op_task_result, &a);
}

/* ---- mode switch ---- */

typedef struct ModeArg {
    const char *node, *mode, *gpu;
    DrainMode drain;
} ModeArg;

static int find_device(const Node *n, const char *gpu) {
    uint64_t idx;
    if (parse_decimal_uint64(gpu, SPEC_MAX_DEVICES - 1, &idx) >= 0)
        return idx < n->spec.n_devices ? (int)idx : -1;
    for (size_t i = 0; i < n->spec.n_devices; i++)
        if (STREQ(n->spec.devices[i].pci, gpu))
            return (int)i;
    return -1;
}

/* The node an admin, or its owner (named in the token and owning it), acts on; NULL with the
 * answer set otherwise (404, or 403 saying who may `what`). */
static Node *node_for_owner(Server *s, Op *op, const char *name, const char *what) {
    Node *n = ptrmap_get(&s->nodes, name);
    const Principal *who = op->who;
    if (!n)
        op_error(op, 404, "not_found", "No node %s.", name);
    else if (who->role == ROLE_NODE || !principal_may_manage(who, n->spec.name, n->spec.owner))
        op_error(op, 403, "forbidden", "Only an admin or the owner of node %s may %s.", name, what);
    else
        return n;
    return NULL;
}

static void op_mode(Server *s, Op *op) {
    ModeArg *a = op->arg;
    Node *n = node_for_owner(s, op, a->node, "switch its mode");
    if (!n)
        return;
    if (n->spec.platform == PLATFORM_MACOS)
        OP_FAIL(op, 400, "bad_request", "Node %s is a Mac: its GPU has no modes (R10).", a->node);
    bool dc = n->spec.site_kind == SITE_DATACENTER;
    int gpu = -1;
    if (a->gpu) {
        if (dc)
            OP_FAIL(op, 400, "bad_request",
                    "Node %s is a datacenter node: all its GPUs share one mode "
                    "(R3); switch the whole node (leave out the GPU).",
                    a->node);
        if ((gpu = find_device(n, a->gpu)) < 0)
            OP_FAIL(op, 400, "bad_request",
                    "Node %s has no GPU %.64s (give its index or PCI address).", a->node, a->gpu);
    }
    if (switch_active(n->sw)) {
        NodeSwitch *sw = n->sw;
        bool same = sw->gpu == gpu && STREQ(sw->mode, a->mode);
        /* The same switch asked again (a retried call, a second `node mode --wait` to follow
         * it) is answered with the running one, as a repeated apply is: nothing new starts.
         * Asked with --drain evict while it waits for workloads to end, it stops them now
         * (R4: the way out of a drain that would take days). */
        if (same && a->drain == DRAIN_EVICT && sw->drain != DRAIN_EVICT && sw->step <= SW_DRAIN) {
            sw->drain = DRAIN_EVICT;
            (void)fleet_save_switch(s, n);
            (void)fleet_switch_advance(s, n);
        }
        /* Any other drain asked of the same switch changes nothing: past its drain step, or
         * already evicting, or (no drain) with nothing to drain. */
        if (same) {
            op_answer_node(s, op, 202, n);
            return;
        }
        char what[48] = "";
        if (sw->gpu >= 0 && (size_t)sw->gpu < n->spec.n_devices)
            snprintf(what, sizeof(what), " GPU %d (%s)", sw->gpu, n->spec.devices[sw->gpu].pci);
        OP_FAIL(op, 409, "conflict",
                "Node %s is already switching%s to %s (step: %s); a machine runs one switch at "
                "a time: wait for it (einsora node show %s)%s.",
                a->node, what, sw->mode, switch_step_to_string(sw->step), a->node,
                sw->step == SW_DRAIN && sw->drain != DRAIN_EVICT
                        ? ", or ask it again with --drain evict to stop its workloads now"
                        : "");
    }
    if (n->unreachable)
        OP_FAIL(op, 409, "conflict",
                "Node %s is unreachable: its agent must report before a switch.", a->node);
    if (!dc && !n->heartbeat_s)
        OP_FAIL(op, 409, "conflict",
                "Node %s has no agent reporting: a lab machine's GPUs are rebound "
                "by its agent (einsora agent run).",
                a->node);
    NodeSwitch probe = {.gpu = gpu};
    snprintf(probe.mode, sizeof(probe.mode), "%s", a->mode);
    /* Nothing to change? */
    Binding want = STREQ(a->mode, "vm-passthrough") ? BINDING_VFIO : BINDING_HOST;
    bool todo = false;
    size_t switchable = 0; /* a lab machine's GPUs that move between the modes */
    if (dc) /* or, with the mode it has, GPUs that a failed switch left elsewhere, or a
             * Kubernetes label that is not a mode (R3) */
        todo = n->spec.mode != node_mode_from_string(a->mode) ||
               fleet_gpus_off_mode(s, &n->spec, NULL) > 0 ||
               (n->spec.cordoned && strstr(n->spec.cordon_reason, NODE_LABEL_CORDON_MARK));
    else
        for (size_t i = 0; i < n->spec.n_devices; i++) {
            DeviceInfo di;
            if ((gpu >= 0 && (size_t)gpu != i) ||
                sched_device_info(s->sched, n->spec.name, (unsigned)i, &di) < 0)
                continue;
            /* One named that does not switch is said ("nothing to do" would read as done);
             * the others are left where they are. */
            bool classified = di.class_index >= 0;
            if (!classified || s->catalog->classes[di.class_index].vendor != VENDOR_NVIDIA) {
                if (gpu >= 0)
                    OP_FAIL(op, 400, "bad_request",
                            "GPU %d of node %s is %s: only %sNVIDIA GPUs switch between "
                            "containers and VMs (%s).",
                            gpu, a->node,
                            classified ? "not an NVIDIA GPU"
                                       : "unclassified (no catalog class matches it)",
                            classified ? "" : "classified ", classified ? "R1, R12" : "R8, R1");
                continue;
            }
            switchable++;
            todo = todo || n->spec.devices[i].binding != want;
        }
    /* A machine with no GPU that switches is in neither mode: "already" either would read as
     * done to a script, for both modes at once. */
    if (!dc && gpu < 0 && !switchable)
        OP_FAIL(op, 400, "bad_request",
                "Node %s has no NVIDIA GPU to switch: only classified NVIDIA GPUs move between "
                "containers and VMs (R1, R7, R12); its other GPUs serve containers only.",
                a->node);
    if (!todo) {
        op->status = 200;
        op->body = node_to_json(s, n);
        json_object_set_new(
                op->body, "message",
                gpu >= 0 ? json_sprintf("GPU %d (%s) of node %s is already in %s mode.", gpu,
                                        n->spec.devices[gpu].pci, a->node, a->mode)
                         : json_sprintf("Node %s is already in %s mode.", a->node, a->mode));
        return;
    }
    /* R4: a switch while workloads run, with no drain asked, is refused naming them. */
    Req *w[64];
    size_t k = 0;
    if (gpu >= 0)
        k = fleet_node_workloads(s, n->spec.name, gpu, w, ARRAY_SIZE(w));
    else
        for (size_t i = 0; i < n->spec.n_devices; i++) {
            Req *x[64];
            size_t m = MIN(fleet_node_workloads(s, n->spec.name, (int)i, x, ARRAY_SIZE(x)),
                           ARRAY_SIZE(x));
            for (size_t p = 0; p < m; p++) {
                bool seen = false;
                for (size_t q = 0; q < MIN(k, ARRAY_SIZE(w)); q++)
                    seen = seen || w[q] == x[p];
                if (!seen && k < ARRAY_SIZE(w))
                    w[k++] = x[p];
            }
        }
    if (k && a->drain == DRAIN_NONE) {
        char list[300];
        fleet_describe_workloads(w, MIN(k, ARRAY_SIZE(w)), true, list, sizeof(list));
        op_error(op, 409, "busy",
                 "Node %s runs %zu workload(s): %s. Drain first: --drain wait (let "
                 "them end) or --drain evict (stop them; passthrough VMs cannot "
                 "migrate).",
                 a->node, k, list);
        fleet_add_workloads(op, w, MIN(k, ARRAY_SIZE(w)));
        return;
    }
    NodeSwitch *sw = calloc(1, sizeof(*sw));
    if (!sw)
        OP_FAIL(op, 500, "internal", "Out of memory.");
    *sw = probe;
    sw->drain = a->drain;
    fleet_switch_start(s, n, sw);
    op_answer_node(s, op, switch_active(n->sw) ? 202 : 200, n);
}

void api_node_mode(HttpCtx *c) {
    FleetModeRequest m;
    Error err = {0};
    if (fleet_mode_parse(c->body, c->body_len, &m, &err) < 0)
        API_FAIL(c, 400, "bad_request", "%s", error_message(&err));
    ModeArg a = {.node = c->match.params[0],
                 .mode = m.mode,
                 .gpu = m.gpu[0] ? m.gpu : NULL,
                 .drain = drain_mode_from_string(m.drain)};
    api_apply(c, op_mode, &a);
}

typedef struct UnquarantineArg {
    const char *node, *gpu;
} UnquarantineArg;

/* R9: a quarantine is the control plane's record of a failed reset check (or the agent's of a
 * rebind it could not finish); an admin or the node's owner lifts it once the board is seen
 * to, and a consumer GPU on vfio-pci is checked again before any VM gets it. */
static void op_unquarantine(Server *s, Op *op) {
    UnquarantineArg *a = op->arg;
    Node *n = node_for_owner(s, op, a->node, "lift a GPU's quarantine");
    if (!n)
        return;
    int dev = find_device(n, a->gpu);
    if (dev < 0)
        OP_FAIL(op, 400, "bad_request", "Node %s has no GPU %.64s (give its index or PCI address).",
                a->node, a->gpu);
    ApiDevice *d = &n->spec.devices[dev];
    if (!d->quarantined)
        OP_FAIL(op, 409, "conflict", "GPU %s of node %s is not quarantined.", d->pci, a->node);
    Error err = {0};
    if (sched_device_set_quarantine(s->sched, n->spec.name, (unsigned)dev, NULL, core_now(s),
                                    &err) < 0)
        OP_FAIL(op, 500, "internal", "%s", error_message(&err));
    json_t *data = json_pack("{s:s}", "was", d->quarantine_reason);
    d->quarantined = false;
    d->quarantine_reason[0] = 0;
    d->reset_verified = false; /* checked again before passthrough (R9) */
    (void)save_node(s, n);
    fleet_gpu_event(s, n, (unsigned)dev, "gpu.unquarantined", data);
    fleet_mark(s, n);
    op_answer_node(s, op, 200, n);
}

void api_node_unquarantine(HttpCtx *c) {
    json_error_t je;
    _cleanup_json_ json_t *j =
            c->body_len ? json_loadb(c->body, c->body_len, JSON_REJECT_DUPLICATES, &je) : NULL;
    json_t *gpu = json_object_get(j, "gpu");
    /* The index as a number too ({"gpu": 0}), as the message offers it. */
    char index[24];
    if (json_is_integer(gpu) && json_integer_value(gpu) >= 0)
        snprintf(index, sizeof(index), "%" JSON_INTEGER_FORMAT, json_integer_value(gpu));
    if (!json_is_object(j) || json_object_size(j) != 1 ||
        !((json_is_string(gpu) && json_string_length(gpu)) ||
          (json_is_integer(gpu) && json_integer_value(gpu) >= 0)))
        API_FAIL(c, 400, "bad_request",
                 "The body names the GPU and nothing else: {\"gpu\": INDEX or \"PCI address\"}.");
    UnquarantineArg a = {.node = c->match.params[0],
                         .gpu = json_is_integer(gpu) ? index : json_string_value(gpu)};
    api_apply(c, op_unquarantine, &a);
}
