/* fleet-switch.c: switching a node's mode as a workflow (R3, R4, R7): cordon -> drain (wait
 * for the workloads to end, or evict them when asked) -> relabel (datacenter: the label the
 * GPU Operator acts on) or rebind through the agent (lab: per GPU, its whole IOMMU group) ->
 * verify each GPU came back in the new mode -> uncordon.
 *
 * Every step is written to the store in the transaction that takes it, so a server that
 * crashes resumes the switch at the step it had reached; an agent that crashes mid-rebind
 * completes or rolls back its journal on restart and gets the same bind task again. */
#include "fleet.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"
#include "util/strutil.h"

static bool is_datacenter(const Node *n) {
    return n->spec.site_kind == SITE_DATACENTER;
}

static const char *target_binding(const NodeSwitch *sw) {
    return STREQ(sw->mode, "vm-passthrough") ? "vfio" : "host";
}

/* Whether the switch moves device i: every device of a datacenter node (its mode is the
 * node's, R3); on a lab machine the NVIDIA GPU asked for, or all of them (R7). */
static bool affected(Server *s, const Node *n, const NodeSwitch *sw, unsigned i) {
    if (is_datacenter(n))
        return sw->gpu < 0 || (unsigned)sw->gpu == i;
    if (sw->gpu >= 0)
        return (unsigned)sw->gpu == i;
    DeviceInfo di;
    return sched_device_info(s->sched, n->spec.name, i, &di) >= 0 && di.class_index >= 0 &&
           s->catalog->classes[di.class_index].vendor == VENDOR_NVIDIA;
}

/* The workloads on the devices the switch moves, each once. */
/* R9: a consumer GPU a VM stopped on gets its reset-cycle check after each VM, and the check
 * runs on vfio-pci only: one that leaves for the host driver is checked first, so that a
 * board failing it is quarantined, not handed to containers. True while a check is under way
 * (one per GPU per switch: a check that could not run does not hold the switch forever). */
static bool reset_checks_pending(Server *s, Node *n, NodeSwitch *sw) {
    if (!STREQ(target_binding(sw), "host") || !n->heartbeat_s)
        return false;
    bool pending = false, unverified = false;
    for (unsigned i = 0; i < n->spec.n_devices && i < 64; i++) {
        DeviceInfo di;
        if (!affected(s, n, sw, i) || n->spec.devices[i].binding != BINDING_VFIO ||
            sched_device_info(s->sched, n->spec.name, i, &di) < 0 || di.class_index < 0 ||
            !s->catalog->classes[di.class_index].consumer || di.state == DEVICE_QUARANTINED)
            continue;
        /* A check asked before a restart or a failover is waited for as it was. */
        if (fleet_task_open_for(s, n->spec.name, TASK_RESET_CHECK, i)) {
            pending = true;
            continue;
        }
        if (di.reset_verified || (sw->reset_asked & (1ull << i)) ||
            !fleet_task_add(s, n->spec.name, TASK_RESET_CHECK, i, di.address, NULL))
            continue;
        sw->reset_asked |= 1ull << i;
        pending = true;
        /* Stored: a server that takes over must not read the pass from before the VM. */
        unverified = unverified || n->spec.devices[i].reset_verified;
        n->spec.devices[i].reset_verified = false;
    }
    if (unverified)
        (void)save_node(s, n);
    return pending;
}

static size_t collect(Server *s, const Node *n, const NodeSwitch *sw, Req **ret, size_t max) {
    size_t count = 0;
    for (unsigned i = 0; i < n->spec.n_devices; i++) {
        if (!affected(s, n, sw, i))
            continue;
        Req *w[64];
        size_t k =
                MIN(fleet_node_workloads(s, n->spec.name, (int)i, w, ARRAY_SIZE(w)), ARRAY_SIZE(w));
        for (size_t a = 0; a < k; a++) {
            bool seen = false;
            for (size_t b = 0; b < MIN(count, max); b++)
                seen = seen || ret[b] == w[a];
            if (!seen) {
                if (count < max)
                    ret[count] = w[a];
                count++;
            }
        }
    }
    return count;
}

static void set_step(Server *s, Node *n, SwitchStep step, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static void set_step(Server *s, Node *n, SwitchStep step, const char *fmt, ...) {
    NodeSwitch *sw = n->sw;
    char msg[2 * sizeof(sw->message)]; /* the arguments may be sw->message itself */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    str_copy_cut_utf8(sw->message, sizeof(sw->message), msg);
    sw->step = step;
    sw->updated_ms = s->now_ms;
    (void)fleet_save_switch(s, n);
    /* A node a failed switch leaves cordoned says why with its cordon (an uncordon, or the
     * switch giving the cordon back, ends it). */
    if (step == SW_FAILED && sw->gpu < 0 && n->spec.cordoned && !sw->was_cordoned) {
        char why[sizeof(n->spec.cordon_reason) + sizeof(sw->message)]; /* cut below */
        snprintf(why, sizeof(why), "the switch to %s failed: %s", sw->mode, sw->message);
        str_copy_cut_utf8(n->spec.cordon_reason, sizeof(n->spec.cordon_reason), why);
        (void)save_node(s, n);
    }
    if (step >= SW_DONE) { /* consumer GPUs now on vfio-pci need their reset check (R9) */
        fleet_mark(s, n);
    }
    state_event(s,
                step == SW_DONE     ? "node.switched"
                : step == SW_FAILED ? "node.switch-failed"
                                    : "node.switch",
                n->spec.name, NULL,
                json_pack("{s:s, s:s, s:i, s:s, s:s++}", "step", switch_step_to_string(step),
                          "mode", sw->mode, "gpu", sw->gpu, "message", sw->message, "reason",
                          switch_step_to_string(step), ": ", sw->message));
}

static int set_cordon(Server *s, Node *n, const NodeSwitch *sw, bool on, Error *err) {
    uint64_t now = core_now(s);
    if (sw->gpu >= 0)
        return sched_device_set_cordoned(s->sched, n->spec.name, (unsigned)sw->gpu, on, now, err);
    int r = sched_node_set_cordoned(s->sched, n->spec.name, on, now, err);
    if (r >= 0 && n->spec.cordoned != on) {
        n->spec.cordoned = on;
        if (!on)
            n->spec.cordon_reason[0] = 0;
        (void)save_node(s, n);
        state_event(s, on ? "node.cordoned" : "node.uncordoned", n->spec.name, NULL,
                    json_pack("{s:s}", "by", "mode switch"));
    }
    return r;
}

/* A Kubernetes node, run by the datacenter sync (`einsora k8s sync`): its relabel is a task. */
static bool is_k8s(const Node *n) {
    return is_datacenter(n) && api_node_has_cap(&n->spec, "k8s");
}

/* A datacenter node no agent and no sync runs: its label is all there is to change (whatever
 * acts on it is outside Einsora). One an agent runs has its GPUs rebound by the agent, as a
 * lab machine's are, then its label recorded: a label alone would leave every GPU where it was
 * and hand VMs GPUs still on their host driver (R3, R4). */
static bool is_label_only(const Node *n) {
    return is_datacenter(n) && !is_k8s(n) && !n->heartbeat_s;
}

/* Whether the agent rebinds device i: one the switch moves that is an NVIDIA GPU (a datacenter
 * node's other devices keep their driver; R1, R12). */
static bool rebinds(Server *s, const Node *n, const NodeSwitch *sw, unsigned i) {
    DeviceInfo di;
    return affected(s, n, sw, i) && sched_device_info(s->sched, n->spec.name, i, &di) >= 0 &&
           di.class_index >= 0 && s->catalog->classes[di.class_index].vendor == VENDOR_NVIDIA;
}

/* Record the datacenter node's new mode label (R3): the core, the node, the event. */
static int record_relabel(Server *s, Node *n, const NodeSwitch *sw, Error *err) {
    int r = sched_node_set_mode(s->sched, n->spec.name, node_mode_from_string(sw->mode),
                                core_now(s), err);
    if (r < 0)
        return r;
    n->spec.mode = node_mode_from_string(sw->mode);
    for (size_t i = 0; i < n->spec.n_devices; i++)
        n->spec.devices[i].binding = binding_from_string(target_binding(sw));
    (void)save_node(s, n);
    state_event(s, "node.relabeled", n->spec.name, NULL,
                json_pack("{s:s, s:s, s:s+}", "label", SCHED_MODE_LABEL, "value", sw->mode,
                          "reason", SCHED_MODE_LABEL "=", sw->mode));
    return 0;
}

/* One step; true when the switch moved on and the next step may run at once. */
static bool step_once(Server *s, Node *n) {
    NodeSwitch *sw = n->sw;
    Error err = {0};
    switch (sw->step) {
    case SW_CORDON: {
        if (sw->gpu >= 0) {
            DeviceInfo di;
            sw->was_cordoned =
                    sched_device_info(s->sched, n->spec.name, (unsigned)sw->gpu, &di) >= 0 &&
                    di.cordoned;
        } else
            sw->was_cordoned = n->spec.cordoned && !sw->cordon_inherited;
        if (set_cordon(s, n, sw, true, &err) < 0) {
            set_step(s, n, SW_FAILED, "Cannot cordon: %s", error_message(&err));
            return false;
        }
        set_step(s, n, SW_DRAIN, "cordoned: nothing new is placed on the GPUs that switch");
        return true;
    }
    case SW_DRAIN: {
        Req *w[64];
        size_t k = collect(s, n, sw, w, ARRAY_SIZE(w));
        if (k && sw->drain == DRAIN_EVICT) {
            for (size_t i = 0; i < MIN(k, ARRAY_SIZE(w)); i++) {
                char why[160];
                snprintf(why, sizeof(why), "evicted to switch node %s to %s%s", n->spec.name,
                         sw->mode,
                         w[i]->kind == WORKLOAD_VM ? " (a passthrough VM cannot migrate)" : "");
                state_end_request(s, w[i], REQ_RELEASED, "request.evicted", why);
            }
            k = collect(s, n, sw, w, ARRAY_SIZE(w));
        }
        if (k) {
            char list[256], msg[sizeof(sw->message)];
            /* Stored on the node, which every user may read: no user named (the 409 that
             * refuses a switch, to its owner or an admin, names them). */
            fleet_describe_workloads(w, MIN(k, ARRAY_SIZE(w)), false, list, sizeof(list));
            snprintf(msg, sizeof(msg), "waiting for %zu workload(s) to end: %s", k, list);
            if (STRNEQ(msg, sw->message))
                set_step(s, n, SW_DRAIN, "%s", msg);
            return false;
        }
        set_step(s, n, SW_REBIND, "%s",
                 is_k8s(n) ? "drained Einsora's workloads; the datacenter sync drains the "
                             "node's other GPU pods next"
                           : "drained: no workload left on the GPUs that switch");
        return true;
    }
    case SW_REBIND:
        if (sw->n_tasks) {
            /* Asked: the step stays "rebind" while the agent or the sync is at it, so that
             * what is shown is what is under way (R4). */
            bool all_ok = true;
            for (size_t i = 0; i < sw->n_tasks; i++) {
                if (!sw->task_done[i])
                    return false;
                all_ok = all_ok && sw->task_ok[i];
            }
            if (all_ok) /* else the failure's sentence stays, for the verify step to give */
                set_step(s, n, SW_VERIFY, "the %s reported back",
                         is_k8s(n) ? "datacenter sync" : "agent");
            else
                sw->step = SW_VERIFY;
            return true;
        }
        if (is_k8s(n)) {
            /* The datacenter sync relabels the Kubernetes node, evicts its GPU pods and waits
             * for the GPU Operator (docs/kubernetes.md): one task for the whole node. */
            Task *t = fleet_task_add(s, n->spec.name, TASK_BIND, 0, "", target_binding(sw));
            if (!t) {
                set_step(s, n, SW_FAILED, "Out of memory.");
                return false;
            }
            sw->task_done[0] = sw->task_ok[0] = false;
            sw->tasks[0] = t->id;
            sw->n_tasks = 1;
            set_step(s, n, SW_REBIND,
                     "asked the datacenter sync to drain the Kubernetes node and relabel it %s=%s",
                     SCHED_MODE_LABEL, sw->mode);
            return false;
        }
        if (is_label_only(n)) {
            if (record_relabel(s, n, sw, &err) < 0) {
                set_step(s, n, SW_FAILED, "Relabel refused: %s", error_message(&err));
                return false;
            }
            set_step(s, n, SW_VERIFY, "relabeled %s=%s", SCHED_MODE_LABEL, sw->mode);
            return true;
        }
        if (reset_checks_pending(s, n, sw)) {
            static const char checking[] = "checking the reset cycle of the consumer GPU(s) a VM "
                                           "stopped on before they leave vfio-pci (R9)";
            if (STRNEQ(sw->message, checking))
                set_step(s, n, SW_REBIND, "%s", checking);
            return false;
        }
        sw->n_tasks = 0;
        for (unsigned i = 0; i < n->spec.n_devices && sw->n_tasks < SPEC_MAX_DEVICES; i++) {
            if (!rebinds(s, n, sw, i) ||
                n->spec.devices[i].binding == binding_from_string(target_binding(sw)))
                continue;
            Task *t = fleet_task_add(s, n->spec.name, TASK_BIND, i, n->spec.devices[i].pci,
                                     target_binding(sw));
            if (!t) {
                set_step(s, n, SW_FAILED, "Out of memory.");
                return false;
            }
            sw->task_done[sw->n_tasks] = sw->task_ok[sw->n_tasks] = false;
            sw->tasks[sw->n_tasks++] = t->id;
        }
        if (!sw->n_tasks) {
            set_step(s, n, SW_VERIFY, "every GPU that switches is on %s already",
                     STREQ(target_binding(sw), "vfio") ? "vfio-pci" : "the host driver");
            return true;
        }
        set_step(s, n, SW_REBIND, "asked the agent to bind %zu GPU(s) to %s", sw->n_tasks,
                 STREQ(target_binding(sw), "vfio") ? "vfio-pci" : "the host driver");
        return false;
    case SW_VERIFY: {
        if (is_k8s(n)) {
            if (!sw->task_done[0])
                return false; /* the sync is still at it */
            if (!sw->task_ok[0]) {
                /* The node stays cordoned: the GPU Operator may still be rebinding its GPUs. */
                set_step(s, n, SW_FAILED, "%s", sw->message);
                return false;
            }
            if (record_relabel(s, n, sw, &err) < 0) {
                set_step(s, n, SW_FAILED, "Relabel refused: %s", error_message(&err));
                return false;
            }
            set_step(s, n, SW_UNCORDON,
                     "the GPU Operator brought every GPU of the node back in %s mode", sw->mode);
            return true;
        }
        if (is_label_only(n)) {
            NodeInfo ni;
            if (sched_node_info(s->sched, n->spec.name, &ni) < 0 ||
                ni.mode != node_mode_from_string(sw->mode)) {
                set_step(s, n, SW_FAILED, "The node did not come back in %s mode.", sw->mode);
                return false;
            }
            set_step(s, n, SW_UNCORDON, "every GPU of the node is in %s mode", sw->mode);
            return true;
        }
        for (size_t i = 0; i < sw->n_tasks; i++)
            if (!sw->task_done[i])
                return false; /* the agent has not reported yet */
        for (size_t i = 0; i < sw->n_tasks; i++)
            if (!sw->task_ok[i]) {
                set_step(s, n, SW_FAILED, "%s", sw->message);
                /* A lab GPU that did not move serves as it did; a datacenter node whose GPUs
                 * may now be half in each mode stays cordoned for its operator (R3). */
                if (!is_datacenter(n))
                    (void)set_cordon(s, n, sw, sw->was_cordoned, &err);
                return false;
            }
        /* A datacenter node an agent runs: its label follows what the agent did, and its GPUs
         * the label (R3: the core keeps no binding per GPU there). */
        if (is_datacenter(n)) {
            if (record_relabel(s, n, sw, &err) < 0) {
                set_step(s, n, SW_FAILED, "Relabel refused: %s", error_message(&err));
                return false;
            }
            set_step(s, n, SW_UNCORDON, "the agent verified every GPU on %s; relabeled %s=%s",
                     STREQ(target_binding(sw), "vfio") ? "vfio-pci" : "its host driver",
                     SCHED_MODE_LABEL, sw->mode);
            return true;
        }
        Binding b = binding_from_string(target_binding(sw));
        for (unsigned i = 0; i < n->spec.n_devices; i++) {
            if (!rebinds(s, n, sw, i))
                continue;
            if (sched_device_set_binding(s->sched, n->spec.name, i, b, core_now(s), &err) < 0) {
                set_step(s, n, SW_FAILED, "GPU %u: %s", i, error_message(&err));
                return false;
            }
            n->spec.devices[i].binding = b;
            n->spec.devices[i].reset_verified = false;
        }
        (void)save_node(s, n);
        set_step(s, n, SW_UNCORDON, "the agent verified every GPU on %s",
                 STREQ(target_binding(sw), "vfio") ? "vfio-pci" : "its host driver");
        return true;
    }
    case SW_UNCORDON:
        if (!sw->was_cordoned && set_cordon(s, n, sw, false, &err) < 0) {
            set_step(s, n, SW_FAILED, "Cannot uncordon: %s", error_message(&err));
            return false;
        }
        set_step(s, n, SW_DONE, "switched to %s", sw->mode);
        return false;
    default:
        return false;
    }
}

bool fleet_switch_advance(Server *s, Node *n) {
    bool changed = false;
    while (switch_active(n->sw) && step_once(s, n))
        changed = true;
    return changed;
}

void fleet_switch_start(Server *s, Node *n, NodeSwitch *sw) {
    /* After a whole-node switch that failed and left the node cordoned, the cordon is that
     * switch's (an operator who cordoned since made it theirs: op_cordon), and so is the
     * reason it gives: the way back takes both over. */
    const NodeSwitch *was = n->sw;
    sw->cordon_inherited = sw->gpu < 0 && was && was->step == SW_FAILED && was->gpu < 0 &&
                           !was->was_cordoned && n->spec.cordoned;
    if (sw->cordon_inherited && n->spec.cordon_reason[0]) {
        n->spec.cordon_reason[0] = 0;
        (void)save_node(s, n);
    }
    free(n->sw);
    n->sw = sw;
    sw->step = SW_CORDON;
    sw->started_ms = sw->updated_ms = s->now_ms;
    set_step(s, n, SW_CORDON, "switch to %s asked (drain: %s)", sw->mode,
             drain_mode_to_string(sw->drain));
    (void)fleet_switch_advance(s, n);
}

void fleet_switch_task_done(Server *s, Node *n, uint64_t task_id, bool ok, bool unchanged,
                            const char *message) {
    NodeSwitch *sw = n->sw;
    if (!switch_active(sw))
        return;
    /* Refused before the Kubernetes side changed anything (GPU pods and no drain): the node
     * serves as it did, so the switch's own cordon goes too (R4: refused, not half begun). */
    bool restore = !ok && unchanged && is_k8s(n);
    for (size_t i = 0; i < sw->n_tasks; i++)
        if (sw->tasks[i] == task_id) {
            sw->task_done[i] = true;
            sw->task_ok[i] = ok;
            char text[2 * sizeof(sw->message)];
            snprintf(text, sizeof(text), "%s%s",
                     is_k8s(n) ? "" : "The agent could not rebind a GPU: ", message);
            if (!ok)
                str_copy_cut_utf8(sw->message, sizeof(sw->message), text);
            (void)fleet_save_switch(s, n);
        }
    (void)fleet_switch_advance(s, n);
    Error err = {0};
    if (restore && n->sw && n->sw->step == SW_FAILED && !n->sw->was_cordoned)
        (void)set_cordon(s, n, n->sw, false, &err);
}

void fleet_switch_task_progress(Server *s, Node *n, uint64_t task_id, const char *message) {
    NodeSwitch *sw = n->sw;
    if (!switch_active(sw) || sw->n_tasks != 1 || sw->tasks[0] != task_id ||
        STREQ(sw->message, message))
        return;
    set_step(s, n, sw->step, "%s", message);
}

void fleet_switch_reapply(Server *s, Node *n) {
    NodeSwitch *sw = n->sw;
    if (switch_active(sw) && sw->gpu >= 0 && sw->step > SW_CORDON)
        (void)sched_device_set_cordoned(s->sched, n->spec.name, (unsigned)sw->gpu, true,
                                        core_now(s), NULL);
}
