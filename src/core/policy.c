/* policy.c: the rules of SPEC R2-R14 as predicates: who may use which device, how, and under
 * which runtime. Placement search (place.c) and the checks of restore and invariants share
 * them, so a placement is judged the same way however it came about. */
#include <errno.h>
#include <string.h>

#include "sched-internal.h"

static bool is_gpu_vendor(Vendor v) {
    return v == VENDOR_NVIDIA || v == VENDOR_AMD || v == VENDOR_INTEL;
}

/* runtime: whether an endpoint's runtime the request names must run on c. It names the first
 * choice's: an alternative runs the one its placement calls for (R14: runtimes follow
 * placement), so that a Mac endpoint asked with MLX may still fall back to CPU (R13). */
static SchedReason refusal(const Sched *s, const Req *r, int c, bool runtime) {
    if (r->count > SCHED_NODE_MAX_DEVICES && c != CHOICE_CPU)
        return SCHED_REASON_BAD_COUNT;
    if (c == CHOICE_CPU) {
        if (runtime && r->kind == WORKLOAD_ENDPOINT && r->runtime != ENDPOINT_RUNTIME_NONE &&
            r->runtime != ENDPOINT_RUNTIME_LLAMA_CPP)
            return SCHED_REASON_BAD_RUNTIME;
        return SCHED_REASON_NONE;
    }
    if (c == CHOICE_MEMORY)
        return SCHED_REASON_NONE;
    const GpuClass *g = &s->cat->classes[c];
    bool slice = g->mig_parent_index >= 0;
    if (r->kind == WORKLOAD_VM) {
        if (slice)
            return SCHED_REASON_VM_MIG;
        if (g->vendor == VENDOR_APPLE && r->guest == GUEST_LINUX)
            return SCHED_REASON_LINUX_GUEST_GPU;
        if (g->vendor != VENDOR_APPLE && r->guest == GUEST_MACOS)
            return SCHED_REASON_MACOS_GUEST_NOT_MAC;
        if (g->vendor != VENDOR_NVIDIA && g->vendor != VENDOR_APPLE)
            return SCHED_REASON_VM_AMD;
    }
    /* R1: a Mac's GPU is Metal, reached from native processes and macOS VMs; a container
     * there runs in a Linux VM, which gets no GPU (R10). */
    if (r->kind == WORKLOAD_CONTAINER && g->vendor == VENDOR_APPLE)
        return SCHED_REASON_LINUX_GUEST_GPU;
    if ((slice || g->vendor == VENDOR_APPLE) && r->count > 1)
        return SCHED_REASON_BAD_COUNT;
    if (runtime && r->kind == WORKLOAD_ENDPOINT) {
        bool ok = r->runtime == ENDPOINT_RUNTIME_NONE ||
                  (r->runtime == ENDPOINT_RUNTIME_VLLM && is_gpu_vendor(g->vendor)) ||
                  (r->runtime == ENDPOINT_RUNTIME_MLX && g->vendor == VENDOR_APPLE) ||
                  (r->runtime == ENDPOINT_RUNTIME_LLAMA_CPP && g->vendor == VENDOR_APPLE);
        if (!ok)
            return SCHED_REASON_BAD_RUNTIME;
    }
    return SCHED_REASON_NONE;
}

SchedReason policy_refusal(const Sched *s, const Req *r, int c) {
    return refusal(s, r, c, true);
}

SchedReason policy_refusal_alternative(const Sched *s, const Req *r, int c) {
    return refusal(s, r, c, false);
}

EndpointRuntime policy_endpoint_runtime(const Req *r, int vendor) {
    if (r->kind != WORKLOAD_ENDPOINT)
        return ENDPOINT_RUNTIME_NONE;
    if (vendor == VENDOR_CPU)
        return ENDPOINT_RUNTIME_LLAMA_CPP; /* R11, R14 */
    /* On a Mac MLX loads safetensors weights, llama.cpp (Metal) GGUF ones (the seed). */
    if (vendor == VENDOR_APPLE)
        return r->runtime == ENDPOINT_RUNTIME_LLAMA_CPP ||
                               (r->runtime != ENDPOINT_RUNTIME_MLX && r->gguf)
                       ? ENDPOINT_RUNTIME_LLAMA_CPP
                       : ENDPOINT_RUNTIME_MLX;
    return ENDPOINT_RUNTIME_VLLM; /* vLLM never runs on a Mac (R14) */
}

ContainerRuntime policy_container_runtime(const Sched *s, const Req *r, const Node *n, Method m) {
    if (r->kind == WORKLOAD_VM || n->platform == PLATFORM_MACOS)
        return CONTAINER_RUNTIME_NONE;
    if (m == METHOD_MIG && n->kata && n->mig_in_kata)
        return CONTAINER_RUNTIME_KATA; /* every slice of such a node is isolated (R2c, R15) */
    return relation_of(s, n, r->user) == RELATION_STRANGER ? CONTAINER_RUNTIME_KATA
                                                           : CONTAINER_RUNTIME_RUNC;
}

/* Who may use a class on this node (R9 internal_only in datacenters, R10 owner_only). */
static int check_class_access(const Sched *s, const Req *r, const Node *n, const GpuClass *g,
                              Error *err) {
    Relation rel = relation_of(s, n, r->user);
    if (g->owner_only && rel != RELATION_OWNER)
        return error_set(err, -EINVAL, "class '%s' is for the owner of node '%s' only (R10)",
                         g->name, n->name);
    if (g->internal_only && rel == RELATION_STRANGER && s->sites[n->site].kind == SITE_DATACENTER)
        return error_set(err, -EINVAL,
                         "class '%s' is for trusted tenants only in a datacenter (R9)", g->name);
    return 0;
}

/* The static half of a placement's validity: node, class, method, devices' kind and binding,
 * relation and runtimes. Conflicts with other allocations are checked by the caller. */
int policy_check_placement(const Sched *s, const Req *r, bool now_rules, Error *err) {
    if (r->node >= s->n_nodes || !s->nodes[r->node].alive)
        return error_set(err, -EINVAL, "request '%s': its node does not exist", req_id(r));
    const Node *n = &s->nodes[r->node];
    /* Trust and capabilities may change under running work; the relation-dependent rules
     * are judged as of the placement (now_rules: restore), the rest always. */
    ContainerRuntime crt = now_rules ? policy_container_runtime(s, r, n, r->method) : r->crt;
    if (r->crt != crt)
        return error_set(err, -EINVAL,
                         "request '%s' on '%s': runtime %s where the rules ask %s (R2b)", req_id(r),
                         n->name, container_runtime_to_string(r->crt),
                         container_runtime_to_string(crt));
    if (crt == CONTAINER_RUNTIME_KATA && !n->kata)
        return error_set(err, -EINVAL, "request '%s': node '%s' cannot run Kata (R2b)", req_id(r),
                         n->name);
    if (r->kind == WORKLOAD_VM && r->guest == GUEST_MACOS && n->platform != PLATFORM_MACOS)
        return error_set(err, -EINVAL, "request '%s': a macOS guest on a non-Mac node", req_id(r));
    if (r->kind == WORKLOAD_VM && r->guest == GUEST_MACOS && n->owner != r->user)
        return error_set(err, -EINVAL,
                         "request '%s': a macOS guest on Mac '%s', which its user does not own: "
                         "its paravirtualized Metal is the Mac's GPU (R10, R15)",
                         req_id(r), n->name);
    if (r->method == METHOD_CPU) {
        if (r->n_dev || r->cores == 0)
            return error_set(err, -EINVAL, "request '%s': a cpu placement takes cores and no GPU",
                             req_id(r));
        if (r->ert != policy_endpoint_runtime(r, VENDOR_CPU))
            return error_set(err, -EINVAL, "request '%s': an endpoint on CPU runs llama.cpp (R14)",
                             req_id(r));
        if (now_rules && n->platform == PLATFORM_MACOS && r->kind != WORKLOAD_VM &&
            relation_of(s, n, r->user) == RELATION_STRANGER)
            return error_set(err, -EINVAL, "request '%s': a stranger's native work on Mac '%s'",
                             req_id(r), n->name);
        return 0;
    }
    if (r->pcls < 0 || (size_t)r->pcls >= s->cat->n_classes)
        return error_set(err, -EINVAL, "request '%s': unknown class", req_id(r));
    const GpuClass *g = &s->cat->classes[r->pcls];
    int ret = now_rules ? check_class_access(s, r, n, g, err) : 0;
    if (ret < 0)
        return ret;
    if ((r->fb_index >= 0 ? policy_refusal_alternative(s, r, r->pcls)
                          : policy_refusal(s, r, r->pcls)) != SCHED_REASON_NONE)
        return error_set(err, -EINVAL, "request '%s': class '%s' cannot serve a %s", req_id(r),
                         g->name, workload_kind_to_string(r->kind));
    if (r->ert != policy_endpoint_runtime(r, g->vendor))
        return error_set(err, -EINVAL, "request '%s': endpoint runtime %s on %s breaks R14",
                         req_id(r), endpoint_runtime_to_string(r->ert), g->name);
    if (r->n_dev == 0)
        return error_set(err, -EINVAL, "request '%s': a GPU placement without a device", req_id(r));
    for (unsigned i = 0; i < r->n_dev; i++) {
        if (r->devs[i] >= n->n_devices)
            return error_set(err, -EINVAL, "request '%s': node '%s' has no device %u", req_id(r),
                             n->name, r->devs[i]);
        for (unsigned j = 0; j < i; j++)
            if (r->devs[i] == r->devs[j])
                return error_set(err, -EINVAL, "request '%s': device %u listed twice", req_id(r),
                                 r->devs[i]);
    }
    const Device *d0 = &n->devices[r->devs[0]];
    switch (r->method) {
    case METHOD_APPLE_WHOLE:
        if (g->vendor != VENDOR_APPLE || n->platform != PLATFORM_MACOS || r->n_dev != 1 ||
            d0->cls != r->pcls)
            return error_set(err, -EINVAL,
                             "request '%s': apple-whole needs the Mac's GPU of class %s", req_id(r),
                             g->name);
        return 0;
    case METHOD_MIG: {
        if (g->mig_parent_index < 0 || r->n_dev != 1 || d0->cls != g->mig_parent_index ||
            !d0->mig_enabled || d0->binding != BINDING_HOST)
            return error_set(err, -EINVAL, "request '%s': a MIG slice of %s needs a MIG-enabled %s",
                             req_id(r), g->name, strempty(g->mig_parent));
        const MigShapeInfo *si = mig_shape_info(g->mig_shape);
        if (!si || r->mig_slots != si->mem_slots || !(si->start_mask & (1u << r->mig_start)))
            return error_set(err, -EINVAL,
                             "request '%s': MIG slots %u+%u are not a valid %s placement",
                             req_id(r), r->mig_start, r->mig_slots, g->mig_profile);
        if (now_rules && crt != CONTAINER_RUNTIME_KATA &&
            relation_of(s, n, r->user) == RELATION_STRANGER)
            return error_set(
                    err, -EINVAL,
                    "request '%s': a stranger's MIG slice needs Kata with mig_in_kata (R2c)",
                    req_id(r));
        return 0;
    }
    case METHOD_PASSTHROUGH:
    case METHOD_CONTAINER:
    case METHOD_TIME_SLICE: {
        if (g->mig_parent_index >= 0 || g->vendor == VENDOR_APPLE || n->platform != PLATFORM_LINUX)
            return error_set(err, -EINVAL, "request '%s': %s cannot be given whole", req_id(r),
                             g->name);
        Binding want = (r->method == METHOD_PASSTHROUGH || crt == CONTAINER_RUNTIME_KATA)
                               ? BINDING_VFIO
                               : BINDING_HOST;
        if ((r->method == METHOD_PASSTHROUGH) != (r->kind == WORKLOAD_VM))
            return error_set(err, -EINVAL,
                             "request '%s': passthrough is for VMs, containers take the GPU",
                             req_id(r));
        if (r->method == METHOD_TIME_SLICE && (crt != CONTAINER_RUNTIME_RUNC || r->n_dev != 1))
            return error_set(err, -EINVAL,
                             "request '%s': time slices are for one runc workload per GPU (R2e)",
                             req_id(r));
        for (unsigned i = 0; i < r->n_dev; i++) {
            const Device *d = &n->devices[r->devs[i]];
            if (d->cls != r->pcls || d->mig_enabled)
                return error_set(err, -EINVAL, "request '%s': device %u of '%s' is not a whole %s",
                                 req_id(r), r->devs[i], n->name, g->name);
            if (d->binding != want)
                return error_set(
                        err, -EINVAL,
                        "request '%s': device %u of '%s' is bound to %s, the placement needs %s "
                        "(R2, R3, R7)",
                        req_id(r), r->devs[i], n->name, binding_to_string(d->binding),
                        binding_to_string(want));
        }
        return 0;
    }
    default:
        return error_set(err, -EINVAL, "request '%s': unknown method", req_id(r));
    }
}
