/* api-nodes.c: node registration (admin, the node's owner, or the node's own agent), the
 * agent's inventory push, listing, and cordon / uncordon. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "fleet.h"
#include "node-work.h"
#include "util/json-cleanup.h"
#include "util/macro.h"
#include "util/strutil.h"

int save_node(Server *s, const Node *n) {
    char *text = api_node_text(&n->spec);
    if (!text)
        return writer_check(s, -ENOMEM, NULL, "saving a node");
    Error err = {0};
    int r = store_node_put(s->store, n->spec.name, text, &err);
    free(text);
    return writer_check(s, r, &err, "saving a node");
}

typedef struct NodeArg {
    ApiNode spec;
    bool upsert;              /* PUT: replace an existing node (the agent's inventory push) */
    const char *if_match;     /* a stale write answers 412 */
    char etag[API_ETAG_SIZE]; /* the node's ETag after the write */
} NodeArg;

/* When the push differs from the node only by GPUs it newly reports quarantined and by the
 * MIG instances its GPUs have (each MIG start changes them): taken in place - quarantines
 * (core, record, event) and the slots foreign processes use - and say so. The node may run
 * workloads, which a replacement would have to wait for. */
static bool apply_in_place(Server *s, Node *old, const ApiNode *pushed, const char *pushed_text) {
    if (old->spec.n_devices != pushed->n_devices)
        return false;
    bool dc_binding_in_place = old->spec.site_kind == SITE_DATACENTER &&
                               old->spec.mode != NODE_MODE_NONE &&
                               !api_node_has_cap(&old->spec, "k8s");
    _cleanup_free_ ApiNode *with = malloc(sizeof(*with));
    if (!with)
        return false;
    *with = old->spec;
    for (size_t i = 0; i < with->n_devices; i++) {
        ApiDevice *d = &with->devices[i];
        const ApiDevice *p = &pushed->devices[i];
        if (STRNEQ(p->pci, d->pci))
            return false;
        if (p->quarantined && !d->quarantined) {
            d->quarantined = true;
            memcpy(d->quarantine_reason, p->quarantine_reason, sizeof(d->quarantine_reason));
        }
        if (p->mig_enabled == d->mig_enabled) {
            memcpy(d->mig, p->mig, sizeof(d->mig));
            d->n_mig = p->n_mig;
        }
        /* The core hands out a datacenter node's GPUs by its mode, not their bindings: a GPU
         * rebound by hand is recorded as it is (follow_off_mode() cordoned the node). */
        if (dc_binding_in_place && p->reset_verified == d->reset_verified)
            d->binding = p->binding;
    }
    _cleanup_free_ char *x = api_node_text(with);
    if (!x || !pushed_text || STRNEQ(x, pushed_text))
        return false;
    for (size_t i = 0; i < with->n_devices; i++) {
        ApiDevice *d = &with->devices[i];
        if (!d->quarantined || old->spec.devices[i].quarantined)
            continue;
        const char *why =
                d->quarantine_reason[0] ? d->quarantine_reason : "quarantined by the agent";
        if (sched_device_set_quarantine(s->sched, old->spec.name, (unsigned)i, why, core_now(s),
                                        NULL) < 0)
            return false;
        old->spec.devices[i].quarantined = true;
        memcpy(old->spec.devices[i].quarantine_reason, d->quarantine_reason,
               sizeof(d->quarantine_reason));
        fleet_gpu_event(s, old, (unsigned)i, "gpu.quarantined",
                        json_pack("{s:s, s:s}", "by", "agent", "reason", why));
    }
    bool mig_changed = false, binding_changed = false;
    for (size_t i = 0; i < with->n_devices; i++) {
        ApiDevice *d = &old->spec.devices[i];
        mig_changed = mig_changed || d->n_mig != with->devices[i].n_mig ||
                      memcmp(d->mig, with->devices[i].mig, d->n_mig * sizeof(d->mig[0])) != 0;
        memcpy(d->mig, with->devices[i].mig, sizeof(with->devices[i].mig));
        d->n_mig = with->devices[i].n_mig;
        binding_changed = binding_changed || d->binding != with->devices[i].binding;
        d->binding = with->devices[i].binding;
    }
    state_node_mig_reserved(s, &old->spec);
    (void)save_node(s, old);
    /* Every change is an event: a standby replays the node from it (docs/postgresql.md). */
    if (mig_changed || binding_changed)
        state_event(s, "node.updated", old->spec.name, NULL,
                    json_pack("{s:s, s:s}", "by", "agent", "what",
                              binding_changed ? "its GPUs' bindings" : "its GPUs' MIG instances"));
    return true;
}

/* R3 on a registered datacenter node: its agent reports GPUs on the other driver than the
 * node's mode (rebound by hand, outside a switch). The core hands out a datacenter node's
 * GPUs by its mode, so containers would get vfio-pci GPUs (or VMs host ones): the node is
 * cordoned, saying which GPU, until a report has them all back in the mode (then the cordon
 * goes by itself) or a switch to the mode it has rebinds them. False when the core refused. */
static bool follow_off_mode(Server *s, Node *old, ApiNode *push) {
    size_t first = 0, off = fleet_gpus_off_mode(s, push, &first);
    bool ours = old->spec.cordoned && strstr(old->spec.cordon_reason, NODE_OFF_MODE_CORDON_MARK);
    if (switch_active(old->sw) || (off ? old->spec.cordoned : !ours))
        return true;
    int r = sched_node_set_cordoned(s->sched, old->spec.name, off > 0, core_now(s), NULL);
    if (r < 0)
        return false;
    old->spec.cordoned = push->cordoned = off > 0;
    if (off) {
        bool vfio = old->spec.mode == NODE_MODE_VM_PASSTHROUGH;
        snprintf(old->spec.cordon_reason, sizeof(old->spec.cordon_reason),
                 "%zu of its GPUs (first %s) are on %s while the node is in %s mode; `einsora "
                 "node mode %s %s` rebinds them. " NODE_OFF_MODE_CORDON_MARK,
                 off, push->devices[first].pci, vfio ? "the host driver" : "vfio-pci",
                 node_mode_to_string(old->spec.mode), old->spec.name,
                 node_mode_to_string(old->spec.mode));
    } else
        old->spec.cordon_reason[0] = 0;
    memcpy(push->cordon_reason, old->spec.cordon_reason, sizeof(push->cordon_reason));
    (void)save_node(s, old);
    state_event(
            s, off ? "node.cordoned" : "node.uncordoned", old->spec.name, NULL,
            off ? json_pack("{s:s, s:s}", "by", "control plane", "reason", old->spec.cordon_reason)
                : json_pack("{s:s}", "by", "control plane"));
    return true;
}

/* R3: all GPUs of a datacenter node are in its mode. An agent's first report of one gives the
 * bindings its machine has; a GPU on the other driver than the mode says (a mode given that
 * the machine is not in, or bindings mixed, where the agent took container) would be handed
 * to the wrong kind of workload. Refused, naming it, rather than served wrong. (Later the
 * mode is the control plane's, and a switch rebinds through the agent.) */
static bool mode_disagrees(Server *s, Op *op, const ApiNode *spec) {
    size_t first = 0, off = fleet_gpus_off_mode(s, spec, &first);
    bool vfio = spec->mode == NODE_MODE_VM_PASSTHROUGH;
    if (off)
        op_error(op, 409, "conflict",
                 "Node %s is to be in %s mode, but %zu of its GPUs (first %s) are on %s: all GPUs "
                 "of a datacenter node are in its mode (R3). Bind them first (einsora agent bind "
                 "GPU --to %s), or give the mode they are in (--mode %s).",
                 spec->name, node_mode_to_string(spec->mode), off, spec->devices[first].pci,
                 vfio ? "the host driver" : "vfio-pci", vfio ? "vfio" : "host",
                 vfio ? "container" : "vm-passthrough");
    return off > 0;
}

static void op_node_put(Server *s, Op *op) {
    NodeArg *a = op->arg;
    Node *old = ptrmap_get(&s->nodes, a->spec.name);
    Error err = {0};
    if (old && !a->upsert) {
        op_error(op, 409, "conflict", "Node %s exists; an agent updates it with PUT /v1/nodes/%s.",
                 a->spec.name, a->spec.name);
        return;
    }
    if (!api_if_match_ok(a->if_match, old ? &old->spec : NULL)) {
        if (!old)
            op_error(op, 412, "precondition_failed",
                     "Node %s does not exist: If-Match names a version of nothing (leave it out "
                     "to register the node).",
                     a->spec.name);
        else
            op_error(op, 412, "precondition_failed",
                     "Node %s changed since the version given in If-Match: read it again.",
                     a->spec.name);
        return;
    }
    /* An agent classifies with its own copy of the catalog, which may name a class this
     * server's no longer has (a rolling change of the catalog): the device is shown as
     * unclassified (R8: never dropped) rather than the node's every push refused while it
     * heartbeats and takes work it would never be told of. A description by hand with an
     * unknown class stays an error to fix. */
    if (op->who->role == ROLE_NODE)
        state_node_unclassify_unknown(s, &a->spec);
    if (old && op->who->role == ROLE_NODE) {
        /* The site's kind decides internal-only classes (R9) and node modes (R3), as the owner
         * decides owner-only ones (R10): an agent's push keeps the registered site, whatever
         * its --site says (its first push, which registers the node, names it). */
        memcpy(a->spec.site, old->spec.site, sizeof(a->spec.site));
        a->spec.site_kind = old->spec.site_kind;
        fleet_merge_agent_push(old, &a->spec);
        if (!follow_off_mode(s, old, &a->spec))
            OP_FAIL(op, 500, "internal", "Node %s could not be cordoned.", old->spec.name);
    }
    /* A GPU whose memory nothing could read (on vfio-pci, no NVML) has its class's (R8): shown
     * as 24 GB, not 0, as placement by memory already counts it. */
    for (size_t i = 0; i < a->spec.n_devices; i++) {
        ApiDevice *d = &a->spec.devices[i];
        const GpuClass *c = d->memory_gb || !d->cls[0] ? NULL : catalog_find(s->catalog, d->cls);
        if (c)
            d->memory_gb = c->memory_gb;
    }
    /* Ownership decides owner-only classes (R10), so only an admin changes it: an agent's push
     * keeps the registered owner whatever its --owner default says, and an owner cannot hand a
     * node to itself. (An agent's first push registers the node with the owner it names.) */
    if (old && op->who->role == ROLE_NODE)
        snprintf(a->spec.owner, sizeof(a->spec.owner), "%s", old->spec.owner);
    else if (old && op->who->role != ROLE_ADMIN && STRNEQ(old->spec.owner, a->spec.owner))
        OP_FAIL(op, 403, "forbidden",
                "Node %s is owned by %s; only an admin changes a node's "
                "owner.",
                old->spec.name, old->spec.owner);
    else if (old && op->who->role != ROLE_ADMIN &&
             (STRNEQ(old->spec.site, a->spec.site) || old->spec.site_kind != a->spec.site_kind))
        OP_FAIL(op, 403, "forbidden",
                "Node %s is in %s site %s; only an admin moves a node to another site (a site's "
                "kind decides internal-only classes and node modes).",
                old->spec.name, site_kind_to_string(old->spec.site_kind), old->spec.site);
    /* Reset checks and quarantines are the control plane's (R9): a description by hand may add
     * a quarantine but not pass a check or lift one (that is `unquarantine`, which checks the
     * GPU again first); an agent's push was merged the same way above. */
    if (!old)
        for (size_t i = 0; i < a->spec.n_devices; i++)
            a->spec.devices[i].reset_verified = false;
    else if (op->who->role != ROLE_NODE)
        fleet_keep_checks(old, &a->spec);
    /* A description says whether the node is cordoned, not why: a cordon it keeps keeps its
     * reason (the description would otherwise differ from the node by that alone). */
    if (old && a->spec.cordoned && old->spec.cordoned && !a->spec.cordon_reason[0])
        memcpy(a->spec.cordon_reason, old->spec.cordon_reason, sizeof(a->spec.cordon_reason));
    if (!a->spec.cordoned)
        a->spec.cordon_reason[0] = 0;
    if (old) {
        /* One encoder, member order fixed: equal texts are equal nodes. */
        _cleanup_free_ char *x = api_node_text(&old->spec), *y = api_node_text(&a->spec);
        if (x && y && STREQ(x, y)) {
            fleet_on_node_put(s, old, op->who->role == ROLE_NODE);
            op_answer_node(s, op, 200, old);
            api_node_etag(&old->spec, a->etag);
            return;
        }
        /* An agent's push reports what the machine is, and a GPU it shows off the node's mode
         * is followed (a switch half done, fleet.c); a description by hand is checked as a
         * registration is. */
        if (op->who->role != ROLE_NODE && mode_disagrees(s, op, &a->spec))
            return;
        /* A GPU the agent quarantined itself (a rebind the kernel never finished, R7/R9), or
         * its MIG instances as they now are, cannot wait for the node to be idle. */
        if (apply_in_place(s, old, &a->spec, y)) {
            op_answer_node(s, op, 200, old);
            api_node_etag(&old->spec, a->etag);
            return;
        }
        /* A changed inventory replaces the node, which needs it idle: the core never pulls a
         * GPU from under a running workload. */
        int r = sched_remove_node(s->sched, old->spec.name, &err);
        if (r < 0) {
            /* Say what changed: a relabel made outside Einsora (a Kubernetes node's mode) is
             * the usual cause, and "removed" would name something nobody asked for. */
            char change[160] = "its devices, labels or capabilities";
            if (old->spec.mode != a->spec.mode)
                snprintf(change, sizeof(change), "mode %s to %s",
                         node_mode_to_string(old->spec.mode), node_mode_to_string(a->spec.mode));
            else if (STRNEQ(old->spec.owner, a->spec.owner))
                snprintf(change, sizeof(change), "owner %s to %s", old->spec.owner, a->spec.owner);
            else if (STRNEQ(old->spec.site, a->spec.site))
                snprintf(change, sizeof(change), "site %s to %s", old->spec.site, a->spec.site);
            op_error(op, 409, "conflict",
                     "Node %s changed (%s) while workloads run there; it is kept as it was until "
                     "they end: %s",
                     old->spec.name, change, error_message(&err));
            return;
        }
        r = state_node_add_core(s, &a->spec, &err);
        if (r < 0) {
            Error e2 = {0};
            if (state_node_add_core(s, &old->spec, &e2) < 0)
                abort(); /* the node was there a moment ago: cannot fail */
            op_error(op, r == -EEXIST ? 409 : 400, r == -EEXIST ? "conflict" : "bad_request", "%s",
                     error_message(&err));
            return;
        }
        old->spec = a->spec;
        state_node_mig_reserved(s, &old->spec);
        (void)save_node(s, old);
        fleet_on_node_put(s, old, op->who->role == ROLE_NODE);
        state_event(s, "node.updated", old->spec.name, NULL,
                    json_pack("{s:s}", "by", op->who->role == ROLE_NODE ? "agent" : "api"));
        op_answer_node(s, op, 200, old);
        api_node_etag(&old->spec, a->etag);
        return;
    }
    /* Whoever registers it: an admin's or owner's description is believed as an agent's is,
     * so a GPU it gives on the other driver would be handed to the wrong kind of workload. */
    if (mode_disagrees(s, op, &a->spec))
        return;
    Node *n = calloc(1, sizeof(*n));
    if (!n) {
        op_error(op, 500, "internal", "Out of memory.");
        return;
    }
    n->spec = a->spec;
    /* Known before the core gets it: a waiting request the core places on the new node at once
     * (R13, R18 wait_for_nodes) goes into the node's work list, which its agent reads (R17). */
    if (ptrmap_put(&s->nodes, n->spec.name, n) < 0)
        abort();
    int r = state_node_add_core(s, &n->spec, &err);
    if (r < 0) {
        (void)ptrmap_remove(&s->nodes, n->spec.name);
        free(n);
        op_error(op, r == -EEXIST ? 409 : 400, r == -EEXIST ? "conflict" : "bad_request", "%s",
                 error_message(&err));
        return;
    }
    state_node_mig_reserved(s, &n->spec);
    (void)save_node(s, n);
    fleet_on_node_put(s, n, op->who->role == ROLE_NODE);
    state_event(s, "node.registered", n->spec.name, NULL,
                json_pack("{s:s, s:s}", "site", n->spec.site, "owner", n->spec.owner));
    op_answer_node(s, op, 201, n);
    api_node_etag(&n->spec, a->etag);
}

static void node_put(HttpCtx *c, bool upsert) {
    NodeArg *a = calloc(1, sizeof(*a));
    if (!a) {
        api_error(c, 500, "internal", "Out of memory.");
        return;
    }
    Error err = {0};
    a->upsert = upsert;
    a->if_match = c->if_match;
    if (api_node_parse(c->body, c->body_len, &a->spec, &err) < 0 ||
        api_node_check_sent(&a->spec, &err) < 0)
        api_error(c, 400, "bad_request", "%s", error_message(&err));
    else if (upsert && STRNEQ(a->spec.name, c->match.params[0]))
        api_error(c, 400, "bad_request", "The body describes node %s, the path names %.64s.",
                  a->spec.name, c->match.params[0]);
    else if (!principal_may_manage(&c->who, a->spec.name,
                                   c->who.role == ROLE_OWNER ? a->spec.owner : NULL))
        api_error(c, 403, "forbidden", "Token of %s (%s) may not register or update node %s.",
                  c->who.user, role_to_string(c->who.role), a->spec.name);
    else {
        api_apply(c, op_node_put, a);
        if (a->etag[0] && c->status < 300)
            snprintf(c->etag, sizeof(c->etag), "%s", a->etag);
        if (c->status == 201) /* answered as text: api_after_handler sees no body */
            snprintf(c->location, sizeof(c->location), "/v1/nodes/%.100s", a->spec.name);
    }
    free(a);
}

void api_nodes_create(HttpCtx *c) {
    node_put(c, false);
}

void api_node_push(HttpCtx *c) {
    node_put(c, true);
}

void api_nodes_list(HttpCtx *c) {
    Server *s = c->s;
    const char *site = api_query(c, "site");
    JsonText w = {0};
    json_text_open(&w, '{');
    json_text_key(&w, "nodes");
    json_text_open(&w, '[');
    pthread_rwlock_rdlock(&s->lock);
    size_t n = sched_node_count(s->sched);
    for (size_t i = 0; i < n; i++) {
        NodeInfo ni;
        if (sched_node_info_at(s->sched, i, &ni) < 0)
            continue;
        if ((site && STRNEQ(site, ni.site)) ||
            (c->who.role == ROLE_NODE && !principal_has_node(&c->who, ni.name)))
            continue;
        const Node *node = ptrmap_get(&s->nodes, ni.name);
        if (node)
            node_write(s, node, &w);
    }
    pthread_rwlock_unlock(&s->lock);
    json_text_close(&w, ']');
    json_text_close(&w, '}');
    if (!(c->text = json_text_take_line(&w)))
        api_error(c, 500, "internal", "Out of memory (or a node's text is not UTF-8).");
}

void api_node_show(HttpCtx *c) {
    Server *s = c->s;
    const char *name = c->match.params[0];
    pthread_rwlock_rdlock(&s->lock);
    const Node *n = ptrmap_get(&s->nodes, name);
    bool found = n && (c->who.role != ROLE_NODE || principal_has_node(&c->who, name));
    if (found) {
        c->text = node_answer_text(s, n);
        api_node_etag(&n->spec, c->etag);
    }
    pthread_rwlock_unlock(&s->lock);
    if (!found)
        api_error(c, 404, "not_found", "No node %s.", name);
    else if (!c->text)
        api_error(c, 500, "internal", "Out of memory (or the node's text is not UTF-8).");
}

typedef struct CordonArg {
    const char *name;
    bool cordon;
    const char *reason; /* cordon: why (may be NULL), shown with the cordon and in its event */
} CordonArg;

static void op_cordon(Server *s, Op *op) {
    CordonArg *a = op->arg;
    Node *n = ptrmap_get(&s->nodes, a->name);
    if (!n) {
        op_error(op, 404, "not_found", "No node %s.", a->name);
        return;
    }
    if (!principal_may_manage(op->who, n->spec.name, n->spec.owner) || op->who->role == ROLE_NODE) {
        op_error(op, 403, "forbidden", "Only an admin or the owner of node %s may %s it.",
                 n->spec.name, a->cordon ? "cordon" : "uncordon");
        return;
    }
    /* A whole-node switch holds its own cordon from its first step to its last (R4): lifting
     * it would let work land on a node being drained. A cordon asked meanwhile outlives the
     * switch. */
    if (switch_active(n->sw) && n->sw->gpu < 0) {
        if (!a->cordon)
            OP_FAIL(op, 409, "conflict",
                    "Node %s is switching to %s (step: %s): the switch keeps it cordoned "
                    "until it ends (or fails).",
                    n->spec.name, n->sw->mode, switch_step_to_string(n->sw->step));
        if (!n->sw->was_cordoned) {
            n->sw->was_cordoned = true;
            (void)fleet_save_switch(s, n);
        }
    }
    /* A cordon asked after a whole-node switch failed and left its own is the operator's now:
     * the next switch gives it back as it found it (fleet_switch_start). */
    if (a->cordon && n->sw && n->sw->step == SW_FAILED && n->sw->gpu < 0 && !n->sw->was_cordoned) {
        n->sw->was_cordoned = true;
        (void)fleet_save_switch(s, n);
    }
    /* R3: a datacenter node whose GPUs are not all in its mode (a switch failed half-way)
     * stays cordoned until a switch brings them back: containers would get vfio-pci GPUs. */
    size_t first = 0,
           off = a->cordon || switch_active(n->sw) ? 0 : fleet_gpus_off_mode(s, &n->spec, &first);
    if (off)
        OP_FAIL(op, 409, "conflict",
                "Node %s is in %s mode, but %zu of its GPUs (first %s) are not (R3): bring them "
                "back with `einsora node mode %s %s` first.",
                n->spec.name, node_mode_to_string(n->spec.mode), off, n->spec.devices[first].pci,
                n->spec.name, node_mode_to_string(n->spec.mode));
    Error err = {0};
    int r = sched_node_set_cordoned(s->sched, n->spec.name, a->cordon, core_now(s), &err);
    if (r < 0) {
        op_error(op, 409, "conflict", "%s", error_message(&err));
        return;
    }
    /* A reason given replaces the one shown; an uncordon ends it. */
    const char *reason = a->cordon ? (a->reason ? a->reason : n->spec.cordon_reason) : "";
    if (n->spec.cordoned != a->cordon || STRNEQ(reason, n->spec.cordon_reason)) {
        n->spec.cordoned = a->cordon;
        if (reason != n->spec.cordon_reason)
            str_copy_cut_utf8(n->spec.cordon_reason, sizeof(n->spec.cordon_reason), reason);
        (void)save_node(s, n);
        state_event(s, a->cordon ? "node.cordoned" : "node.uncordoned", n->spec.name, NULL,
                    a->reason ? json_pack("{s:s, s:s}", "reason", n->spec.cordon_reason, "by",
                                          op->who->user)
                              : NULL);
    }
    op_answer_node(s, op, 200, n);
}

static void cordon(HttpCtx *c, bool on) {
    CordonArg a = {.name = c->match.params[0], .cordon = on};
    /* A cordon may say why (a body {"reason": TEXT}, shown with it); none is needed. An
     * uncordon takes none (the conventions refuse one). */
    json_error_t je;
    _cleanup_json_ json_t *j =
            c->body_len ? json_loadb(c->body, c->body_len, JSON_REJECT_DUPLICATES, &je) : NULL;
    json_t *reason = json_object_get(j, "reason");
    if (c->body_len && (!json_is_object(j) || (json_object_size(j) && !reason) ||
                        json_object_size(j) > 1 || (reason && !json_is_string(reason))))
        API_FAIL(c, 400, "bad_request",
                 "The body of a cordon is empty or says why and nothing else: "
                 "{\"reason\": TEXT}.");
    if (reason && json_string_length(reason))
        a.reason = json_string_value(reason);
    /* Shown on terminals and pages as one line: no control byte, and whole (not cut). */
    if (a.reason && (string_has_control(a.reason) ||
                     json_string_length(reason) >= sizeof(((ApiNode *)0)->cordon_reason)))
        API_FAIL(c, 400, "bad_request",
                 "A cordon's reason is one line of at most %zu bytes, without control "
                 "characters.",
                 sizeof(((ApiNode *)0)->cordon_reason) - 1);
    api_apply(c, op_cordon, &a);
}

void api_node_cordon(HttpCtx *c) {
    cordon(c, true);
}

void api_node_uncordon(HttpCtx *c) {
    cordon(c, false);
}

/* ---- removing a node (a machine taken out of the fleet) ---- */

static void op_node_remove(Server *s, Op *op) {
    const char *name = op->arg;
    Node *n = ptrmap_get(&s->nodes, name);
    if (!n)
        OP_FAIL(op, 404, "not_found", "No node %s.", name);
    if (!principal_may_manage(op->who, n->spec.name, n->spec.owner) || op->who->role == ROLE_NODE)
        OP_FAIL(op, 403, "forbidden", "Only an admin or the owner of node %s may remove it.",
                n->spec.name);
    if (switch_active(n->sw))
        OP_FAIL(op, 409, "conflict",
                "Node %s is switching to %s (step: %s): remove it once the switch ended.",
                n->spec.name, n->sw->mode, switch_step_to_string(n->sw->step));
    if (fleet_tasks_of(s, n->spec.name).n)
        OP_FAIL(op, 409, "conflict",
                "Node %s has tasks its agent has not reported on (a rebind or reset check): "
                "remove it once they are done.",
                n->spec.name);
    /* Nothing acknowledged is dropped (R16): a node that runs workloads is drained first,
     * which the refusal names, as a switch's does. */
    Req *w[64];
    size_t k = fleet_node_workloads(s, n->spec.name, -1, w, ARRAY_SIZE(w));
    if (k) {
        char list[300];
        fleet_describe_workloads(w, MIN(k, ARRAY_SIZE(w)), true, list, sizeof(list));
        op_error(op, 409, "busy",
                 "Node %s runs %zu workload(s): %s. Cordon it, let them end (or release "
                 "them), then remove it.",
                 n->spec.name, k, list);
        fleet_add_workloads(op, w, MIN(k, ARRAY_SIZE(w)));
        return;
    }
    Error err = {0};
    if (sched_remove_node(s->sched, n->spec.name, &err) < 0)
        OP_FAIL(op, 409, "busy", "%s", error_message(&err));
    (void)writer_check(s, store_node_delete(s->store, n->spec.name, &err), &err, "deleting a node");
    fleet_forget_node(s, n);
    state_event(s, "node.removed", n->spec.name, NULL,
                json_pack("{s:s, s:s}", "site", n->spec.site, "by", op->who->user));
    op->status = 200;
    op->body = json_pack("{s:s, s:b}", "name", n->spec.name, "removed", 1);
    (void)ptrmap_remove(&s->nodes, n->spec.name);
    node_work_free(n);
    free(n);
}

void api_node_remove(HttpCtx *c) {
    api_apply(c, op_node_remove, (void *)c->match.params[0]);
}
