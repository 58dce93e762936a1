/* devices.c: per-GPU state changes (cordon, quarantine, binding R7, MIG mode, reset checks
 * R9) and the read-only views of nodes and devices. */
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
    if (d->mig_enabled == enabled)
        return 0;
    if (d->n_allocs)
        return error_set(err, -EBUSY, "node '%s' device %u is in use by %s", n->name, dev,
                         req_id(&s->reqs[dev_allocs_const(d)[0]]));
    d->mig_enabled = enabled;
    node_changed(s, ni, now, true);
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
            .state = d->quarantined                                      ? DEVICE_QUARANTINED
                     : (d->cordoned || !node_schedulable(&s->nodes[ni])) ? DEVICE_CORDONED
                     : d->n_allocs                                       ? DEVICE_ALLOCATED
                                                                         : DEVICE_FREE,
            .quarantine_reason = d->quarantined ? d->quarantine_reason : NULL,
            .n_allocations = d->n_allocs,
            .user = user,
    };
    return 0;
}
