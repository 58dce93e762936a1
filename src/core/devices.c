/* devices.c: per-GPU state changes (cordon, quarantine, binding R7, MIG mode, reset checks
 * R9), a registered node's own (cordon, mode label R3, labels, capabilities, Apple memory),
 * and the read-only views of nodes and devices. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched-internal.h"

static int device_lookup(Sched *s, const char *node, unsigned dev, uint32_t *ni, Error *err) {
    int r = node_lookup(s, node, ni, err);
    if (r < 0)
        return r;
    if (dev >= s->nodes[*ni].n_devices)
        return error_set(err, -ENOENT, "node '%s' has no device %u", node, dev);
    return 0;
}

int sched_device_set_cordoned(Sched *s, const char *node, unsigned dev, bool cordoned, uint64_t now,
                              Error *err) {
    uint32_t ni;
    int r = device_lookup(s, node, dev, &ni, err);
    if (r < 0)
        return r;
    s->nodes[ni].devices[dev].cordoned = cordoned;
    node_changed_devices(s, ni, 1u << dev, now, !cordoned);
    return 0;
}

int sched_device_set_quarantine(Sched *s, const char *node, unsigned dev, const char *reason,
                                uint64_t now, Error *err) {
    uint32_t ni;
    int r = device_lookup(s, node, dev, &ni, err);
    if (r < 0)
        return r;
    Device *d = &s->nodes[ni].devices[dev];
    char *copy = NULL;
    if (reason && !(copy = strdup(isempty(reason) ? "quarantined" : reason)))
        return error_set(err, -ENOMEM, "out of memory");
    free(d->quarantine_reason);
    d->quarantine_reason = copy;
    d->quarantined = reason != NULL;
    node_changed_devices(s, ni, 1u << dev, now, !reason);
    return 0;
}

int sched_device_set_binding(Sched *s, const char *node, unsigned dev, Binding binding,
                             uint64_t now, Error *err) {
    uint32_t ni;
    int r = device_lookup(s, node, dev, &ni, err);
    if (r < 0)
        return r;
    Node *n = &s->nodes[ni];
    Device *d = &n->devices[dev];
    if ((int)binding < 0 || binding >= _BINDING_MAX)
        return error_set(err, -EINVAL, "a binding is host or vfio");
    if (s->sites[n->site].kind == SITE_DATACENTER)
        return error_set(err, -EINVAL,
                         "node '%s' is in a datacenter: its GPUs follow the node's mode (R3)",
                         n->name);
    if (n->platform != PLATFORM_LINUX)
        return error_set(err, -EINVAL, "node '%s': a Mac's GPU is not rebound", n->name);
    if (d->binding == binding)
        return 0;
    if (d->n_allocs)
        return error_set(err, -EBUSY,
                         "node '%s' device %u is in use by %s; it is never rebound under a "
                         "running workload (R7)",
                         n->name, dev, req_id(&s->reqs[dev_allocs_const(d)[0]]));
    d->binding = binding;
    /* A rebound GPU is checked again before it is offered for passthrough (R9), as the
     * server's record of it says: the state after a restart is the state before it. */
    d->reset_verified = false;
    device_sync_mig(d);
    node_changed(s, ni, now, true);
    return 0;
}

int sched_device_set_mig(Sched *s, const char *node, unsigned dev, bool enabled, uint64_t now,
                         Error *err) {
    uint32_t ni;
    int r = device_lookup(s, node, dev, &ni, err);
    if (r < 0)
        return r;
    Node *n = &s->nodes[ni];
    Device *d = &n->devices[dev];
    if (enabled && (d->cls < 0 || s->cat->classes[d->cls].n_mig_profiles == 0))
        return error_set(err, -EINVAL, "node '%s' device %u: its class has no MIG profiles",
                         n->name, dev);
    if (d->mig_reported == enabled)
        return 0;
    if (d->n_allocs)
        return error_set(err, -EBUSY, "node '%s' device %u is in use by %s", n->name, dev,
                         req_id(&s->reqs[dev_allocs_const(d)[0]]));
    d->mig_reported = enabled;
    device_sync_mig(d);
    node_changed(s, ni, now, true);
    return 0;
}

int sched_device_set_mig_reserved(Sched *s, const char *node, unsigned dev, uint8_t slots,
                                  uint64_t now, Error *err) {
    uint32_t ni;
    int r = device_lookup(s, node, dev, &ni, err);
    if (r < 0)
        return r;
    Device *d = &s->nodes[ni].devices[dev];
    uint8_t ours = (uint8_t)(d->mig_layout & ~d->mig_reserved);
    uint8_t reserved = (uint8_t)(slots & ~ours);
    if (reserved == d->mig_reserved)
        return 0;
    bool freed = (d->mig_reserved & ~reserved) != 0;
    d->mig_reserved = reserved;
    d->mig_layout = (uint8_t)(ours | reserved);
    node_changed_devices(s, ni, 1u << dev, now, freed);
    return 0;
}

int sched_device_reset_result(Sched *s, const char *node, unsigned dev, bool passed,
                              const char *reason, uint64_t now, Error *err) {
    uint32_t ni;
    int r = device_lookup(s, node, dev, &ni, err);
    if (r < 0)
        return r;
    Device *d = &s->nodes[ni].devices[dev];
    if (!passed) {
        d->reset_verified = false;
        return sched_device_set_quarantine(
                s, node, dev, isempty(reason) ? "failed the reset cycle check (R9)" : reason, now,
                err);
    }
    d->reset_verified = true;
    node_changed_devices(s, ni, 1u << dev, now, true);
    return 0;
}

/* ---- read-only views ---- */

size_t sched_node_count(const Sched *s) {
    return s->n_order;
}

static void fill_node_info(const Sched *s, const Node *n, NodeInfo *ret) {
    *ret = (NodeInfo){
            .name = n->name,
            .site = s->sites[n->site].name,
            .owner = s->users[n->owner].name,
            .site_kind = s->sites[n->site].kind,
            .platform = n->platform,
            .mode = n->mode,
            .kata = n->kata,
            .mig_in_kata = n->mig_in_kata,
            .cordoned = n->cordoned,
            .unreachable = n->unreachable,
            .cpu_cores = n->cpu_cores,
            .cpu_used = n->cpu_used,
            .apple_usable_memory_gb = n->apple_usable_gb,
            .apple_used_memory_gb = n->apple_used_gb,
            .macos_vms = n->macos_vms,
            .time_slice_replicas = n->ts_replicas,
            .n_devices = n->n_devices,
            .n_labels = n->n_labels,
    };
}

int sched_node_info_at(const Sched *s, size_t i, NodeInfo *ret) {
    if (i >= s->n_order)
        return -ENOENT;
    fill_node_info(s, &s->nodes[s->order[i]], ret);
    return 0;
}

int sched_node_info(const Sched *s, const char *node, NodeInfo *ret) {
    uint32_t ni;
    if (node_lookup(s, node, &ni, NULL) < 0)
        return -ENOENT;
    fill_node_info(s, &s->nodes[ni], ret);
    return 0;
}

int sched_node_label(const Sched *s, const char *node, size_t i, SchedLabel *ret) {
    uint32_t ni;
    if (node_lookup(s, node, &ni, NULL) < 0 || i >= s->nodes[ni].n_labels)
        return -ENOENT;
    *ret = (SchedLabel){s->nodes[ni].label_keys[i], s->nodes[ni].label_values[i]};
    return 0;
}

int sched_device_info(const Sched *s, const char *node, unsigned dev, DeviceInfo *ret) {
    uint32_t ni;
    if (node_lookup(s, node, &ni, NULL) < 0 || dev >= s->nodes[ni].n_devices)
        return -ENOENT;
    const Device *d = &s->nodes[ni].devices[dev];
    const char *user = NULL;
    for (unsigned i = 0; i < d->n_allocs; i++) {
        const char *u = s->users[s->reqs[dev_allocs_const(d)[i]].user].name;
        if (i == 0)
            user = u;
        else if (user && !STREQ(user, u))
            user = NULL;
    }
    *ret = (DeviceInfo){
            .class_name = d->cls >= 0 ? s->cat->classes[d->cls].name : NULL,
            .class_index = d->cls,
            .address = d->address,
            .memory_gb = d->memory_gb,
            .binding = d->binding,
            .mig_enabled = d->mig_enabled,
            .reset_verified = d->reset_verified,
            .cordoned = d->cordoned,
            .mig_layout = d->mig_layout,
            /* Allocated before cordoned: an allocation on a cordoned or unreachable node is
             * kept (R16) and counted as allocated, as capacity counts it. */
            .state = d->quarantined ? DEVICE_QUARANTINED
                     : d->n_allocs  ? DEVICE_ALLOCATED
                     /* Not on offer, as capacity counts it: a consumer GPU on vfio-pci waiting
                      * for its reset check (R9) is held like a cordoned one. */
                     : (d->cordoned || !node_schedulable(&s->nodes[ni]) ||
                        (d->binding == BINDING_VFIO && d->cls >= 0 &&
                         s->cat->classes[d->cls].consumer && !d->reset_verified))
                             ? DEVICE_CORDONED
                             : DEVICE_FREE,
            .quarantine_reason = d->quarantined ? d->quarantine_reason : NULL,
            .n_allocations = d->n_allocs,
            .user = user,
    };
    return 0;
}

/* ---- a registered node's state ---- */

int sched_node_set_cordoned(Sched *s, const char *node, bool cordoned, uint64_t now, Error *err) {
    uint32_t ni;
    int r = node_lookup(s, node, &ni, err);
    if (r < 0)
        return r;
    s->nodes[ni].cordoned = cordoned;
    node_changed(s, ni, now, !cordoned);
    return 0;
}

int sched_node_set_unreachable(Sched *s, const char *node, bool unreachable, uint64_t now,
                               Error *err) {
    uint32_t ni;
    int r = node_lookup(s, node, &ni, err);
    if (r < 0)
        return r;
    s->nodes[ni].unreachable = unreachable;
    node_changed(s, ni, now, !unreachable);
    return 0;
}

static bool node_gpus_busy(const Node *n) {
    for (unsigned i = 0; i < n->n_devices; i++)
        if (n->devices[i].n_allocs)
            return true;
    return false;
}

static int set_label_raw(Node *n, const char *key, const char *value) {
    for (size_t i = 0; i < n->n_labels; i++)
        if (STREQ(n->label_keys[i], key)) {
            char *v = strdup(value);
            if (!v)
                return -ENOMEM;
            free(n->label_values[i]);
            n->label_values[i] = v;
            return 0;
        }
    if (n->n_labels >= SCHED_MAX_LABELS)
        return -E2BIG;
    if (!n->label_keys) {
        n->label_keys = calloc(SCHED_MAX_LABELS, sizeof(char *));
        n->label_values = calloc(SCHED_MAX_LABELS, sizeof(char *));
        if (!n->label_keys || !n->label_values)
            return -ENOMEM;
    }
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        return -ENOMEM;
    }
    n->label_keys[n->n_labels] = k;
    n->label_values[n->n_labels++] = v;
    return 0;
}

int sched_node_set_mode(Sched *s, const char *node, NodeMode mode, uint64_t now, Error *err) {
    uint32_t ni;
    int r = node_lookup(s, node, &ni, err);
    if (r < 0)
        return r;
    Node *n = &s->nodes[ni];
    if (mode == NODE_MODE_VM_VGPU)
        return error_set(err, -EOPNOTSUPP, "node '%s': mode vm-vgpu: %s", n->name,
                         CATALOG_VGPU_REFUSAL);
    if (mode != NODE_MODE_CONTAINER && mode != NODE_MODE_VM_PASSTHROUGH)
        return error_set(err, -EINVAL,
                         "node '%s': the mode must be container or vm-passthrough (R3)", n->name);
    if (s->sites[n->site].kind != SITE_DATACENTER)
        return error_set(err, -EINVAL,
                         "node '%s' is not in a datacenter: its GPUs switch one by one (R7)",
                         n->name);
    if (mode == n->mode)
        return 0;
    if (node_gpus_busy(n))
        return node_busy_error(s, ni, true, "cannot switch mode", err);
    r = set_label_raw(n, SCHED_MODE_LABEL, node_mode_to_string(mode));
    if (r < 0)
        return error_set(err, r, "node '%s': cannot store the mode label", n->name);
    n->mode = mode;
    for (unsigned i = 0; i < n->n_devices; i++) {
        n->devices[i].binding = mode == NODE_MODE_VM_PASSTHROUGH ? BINDING_VFIO : BINDING_HOST;
        device_sync_mig(&n->devices[i]);
    }
    node_changed(s, ni, now, true);
    return 0;
}

int sched_node_set_label(Sched *s, const char *node, const char *key, const char *value,
                         uint64_t now, Error *err) {
    uint32_t ni;
    int r = node_lookup(s, node, &ni, err);
    if (r < 0)
        return r;
    if (isempty(key) || !value)
        return error_set(err, -EINVAL, "a label needs a key and a value");
    if (STREQ(key, SCHED_MODE_LABEL) && s->sites[s->nodes[ni].site].kind == SITE_DATACENTER) {
        NodeMode m = node_mode_from_string(value);
        if (m == _NODE_MODE_INVALID || m == NODE_MODE_NONE)
            return error_set(err, -EINVAL,
                             "node '%s': label %s has unknown value '%s'; use container or "
                             "vm-passthrough (R3)",
                             node, key, value);
        return sched_node_set_mode(s, node, m, now, err);
    }
    r = set_label_raw(&s->nodes[ni], key, value);
    if (r < 0)
        return error_set(err, r, "node '%s': cannot store label '%s'", node, key);
    return 0;
}

int sched_node_set_capabilities(Sched *s, const char *node, bool kata, bool mig_in_kata,
                                uint64_t now, Error *err) {
    uint32_t ni;
    int r = node_lookup(s, node, &ni, err);
    if (r < 0)
        return r;
    Node *n = &s->nodes[ni];
    /* Taking a capability away under running work would leave placements the rules no longer
     * allow (R2b, R2c, R15). */
    if ((!kata && n->kata) || (!mig_in_kata && n->mig_in_kata))
        for (size_t i = 0; i < s->n_reqs; i++) {
            const Req *q = &s->reqs[i];
            if (q->used && q->placed && q->node == ni && q->crt == CONTAINER_RUNTIME_KATA)
                return error_set(err, -EBUSY,
                                 "node '%s': Kata workloads still run there (%s); drain them first",
                                 n->name, req_id(q));
        }
    n->kata = kata || mig_in_kata;
    n->mig_in_kata = mig_in_kata;
    s->fleet_gen++;
    node_changed(s, ni, now, true);
    return 0;
}

int sched_node_set_apple_memory(Sched *s, const char *node, unsigned usable_gb, uint64_t now,
                                Error *err) {
    uint32_t ni;
    int r = node_lookup(s, node, &ni, err);
    if (r < 0)
        return r;
    Node *n = &s->nodes[ni];
    if (n->platform != PLATFORM_MACOS)
        return error_set(err, -EINVAL, "node '%s' is not a Mac", n->name);
    if (usable_gb < n->apple_used_gb)
        return error_set(err, -EBUSY, "node '%s': running work already uses %u GB of GPU memory",
                         n->name, n->apple_used_gb);
    n->apple_usable_gb = usable_gb;
    if (n->n_devices)
        n->devices[0].memory_gb = usable_gb;
    node_changed(s, ni, now, true);
    return 0;
}
