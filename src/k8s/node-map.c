/* node-map.c: Kubernetes nodes and pods as Einsora sees them. */
#include "node-map.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"

static json_t *path2(json_t *j, const char *a, const char *b) {
    return json_object_get(json_object_get(j, a), b);
}

long k8s_quantity_count(json_t *q) {
    if (json_is_integer(q))
        return json_integer_value(q) >= 0 ? (long)json_integer_value(q) : -1;
    const char *s = json_string_value(q);
    if (!s || !*s || strlen(s) > 9)
        return -1;
    for (const char *p = s; *p; p++)
        if (!isdigit((unsigned char)*p))
            return -1;
    return atol(s);
}

/* Whole cores of a CPU quantity: 64 or "64", or millicores "63500m" (rounded down); 0 for
 * anything else (a quantity this does not read offers no cpu rather than a guess). */
static unsigned cpu_cores(json_t *q) {
    if (json_is_integer(q))
        return json_integer_value(q) > 0 ? (unsigned)MIN(json_integer_value(q), 1 << 16) : 0;
    const char *s = json_string_value(q);
    size_t n = s ? strlen(s) : 0, digits = n && s[n - 1] == 'm' ? n - 1 : n;
    if (!digits || digits > 12)
        return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < digits; i++) {
        if (!isdigit((unsigned char)s[i]))
            return 0;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (digits < n)
        v /= 1000;
    return (unsigned)MIN(v, (uint64_t)1 << 16);
}

static bool ready(json_t *node) {
    size_t i;
    json_t *c;
    json_array_foreach(path2(node, "status", "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && STREQ(t, "Ready"))
            return json_string_value(json_object_get(c, "status")) &&
                   STREQ(json_string_value(json_object_get(c, "status")), "True");
    }
    return false;
}

/* The device part of a KubeVirt resource name (nvidia.com/<DEVICE>) when it is one. */
static const char *vm_device(const char *resource) {
    if (strncmp(resource, "nvidia.com/", 11) != 0)
        return NULL;
    const char *d = resource + 11;
    if (STREQ(d, "gpu") || strncmp(d, "mig-", 4) == 0 || strncmp(d, "gpu.", 4) == 0 || !*d)
        return NULL;
    return d;
}

static int class_by_product(const Catalog *cat, const char *product) {
    if (!product)
        return -1;
    char sel[160];
    snprintf(sel, sizeof(sel), K8S_PRODUCT_LABEL "=%s", product);
    for (size_t i = 0; i < cat->n_classes; i++) {
        const GpuClass *c = &cat->classes[i];
        if (c->vendor == VENDOR_NVIDIA && !c->mig_parent && c->node_selector &&
            STREQ(c->node_selector, sel))
            return (int)i;
    }
    return -1;
}

static int class_by_vm_device(const Catalog *cat, const char *resource) {
    for (size_t i = 0; i < cat->n_classes; i++) {
        const GpuClass *c = &cat->classes[i];
        if (c->vendor == VENDOR_NVIDIA && !c->mig_parent && c->vm_device_name &&
            STREQ(c->vm_device_name, resource))
            return (int)i;
    }
    /* The device plugin names a device pci.ids does not know by its PCI device id. */
    const char *d = vm_device(resource);
    if (d && strlen(d) == 4 && isxdigit((unsigned char)d[0]) && isxdigit((unsigned char)d[1]) &&
        isxdigit((unsigned char)d[2]) && isxdigit((unsigned char)d[3])) {
        const GpuClass *c = catalog_match_pci(cat, 0x10de, (uint16_t)strtoul(d, NULL, 16));
        if (c)
            return (int)(c - cat->classes);
    }
    return -1;
}

/* Put the node's MIG slices on its MIG GPUs, largest shape first, each at the first GPU and
 * start slot it fits (exact for these aligned shapes). */
static void lay_out_mig(const Catalog *cat, K8sNodeView *v) {
    const GpuClass *c = &cat->classes[v->class_index];
    /* the label says how many GPUs the node has; without it, as many as the slices need */
    unsigned limit = !v->total_gpus ? (unsigned)ARRAY_SIZE(v->mig_gpu)
                     : v->total_gpus > v->count
                             ? MIN(v->total_gpus - v->count, (unsigned)ARRAY_SIZE(v->mig_gpu))
                             : 0;
    uint8_t used[ARRAY_SIZE(v->mig_gpu)] = {0};
    for (unsigned slots = MIG_SLOTS; slots > 0; slots--)
        for (size_t p = 0; p < c->n_mig_profiles && p < ARRAY_SIZE(v->mig); p++) {
            const GpuClass *slice = catalog_find_mig_slice(cat, v->class_index, c->mig_profiles[p]);
            if (!slice || mig_shape_info(slice->mig_shape)->mem_slots != slots)
                continue;
            for (unsigned k = 0; k < v->mig[p]; k++) {
                bool placed = false;
                for (unsigned g = 0; g < limit && !placed; g++) {
                    for (unsigned st = 0; st < MIG_SLOTS && !placed; st++)
                        if (v->mig_gpu[g].n < ARRAY_SIZE(v->mig_gpu[g].profile) &&
                            mig_can_place(used[g], slice->mig_shape, st)) {
                            used[g] |= mig_shape_mask(slice->mig_shape, st);
                            v->mig_gpu[g].profile[v->mig_gpu[g].n] = (unsigned)p;
                            v->mig_gpu[g].start[v->mig_gpu[g].n++] = st;
                            v->n_mig_gpus = MAX(v->n_mig_gpus, g + 1);
                            placed = true;
                        }
                }
                v->mig_unplaced = v->mig_unplaced || !placed;
            }
        }
}

int k8s_node_view(const Catalog *cat, json_t *node, K8sNodeView *ret, Error *err) {
    K8sNodeView v = {.class_index = -1};
    const char *name = json_string_value(path2(node, "metadata", "name"));
    if (!name || !*name || strlen(name) >= sizeof(v.name))
        return error_set(err, -EINVAL, "a Kubernetes node without a valid metadata.name");
    snprintf(v.name, sizeof(v.name), "%s", name);
    json_t *labels = path2(node, "metadata", "labels"),
           *alloc = path2(node, "status", "allocatable");
    const char *mode = json_string_value(json_object_get(labels, K8S_MODE_LABEL));
    const char *product = json_string_value(json_object_get(labels, K8S_PRODUCT_LABEL));
    const char *present = json_string_value(json_object_get(labels, "nvidia.com/gpu.present"));
    v.has_gpus = (present && STREQ(present, "true")) || product;
    /* R3: a missing label is an error shown to the operator, not a silent default (the GPU
     * Operator would take such a node for container): known once the node's GPUs are, below;
     * a node without GPUs has no mode to get wrong. */
    bool unlabeled = !mode;
    if (unlabeled)
        mode = "container";
    if (STREQ(mode, "container") || STREQ(mode, "vm-passthrough"))
        snprintf(v.mode, sizeof(v.mode), "%s", mode);
    else
        snprintf(v.mode_error, sizeof(v.mode_error),
                 "Node %.60s has %s=%.40s, which is not a mode Einsora serves (container or "
                 "vm-passthrough%s).",
                 name, K8S_MODE_LABEL, mode,
                 STREQ(mode, "vm-vgpu") ? "; vGPU is not supported, R2d" : "");
    const char *key;
    json_t *q;
    json_object_foreach(alloc, key, q) {
        long n = k8s_quantity_count(q);
        if (n <= 0 || strncmp(key, "nvidia.com/", 11) != 0)
            continue;
        v.has_gpus = true;
        if (strncmp(key, "nvidia.com/mig-", 15) == 0)
            continue; /* slices are counted from the card's class below */
        bool want =
                STREQ(v.mode, "container") ? STREQ(key, "nvidia.com/gpu") : vm_device(key) != NULL;
        if (want && !v.count) {
            snprintf(v.resource, sizeof(v.resource), "%.127s", key);
            v.count = (unsigned)MIN(n, 64);
        }
    }
    if (unlabeled && v.has_gpus) {
        snprintf(v.mode_error, sizeof(v.mode_error),
                 "Node %.60s has GPUs and no %s label: label it container or vm-passthrough "
                 "(R3); Einsora does not guess its mode.",
                 name, K8S_MODE_LABEL);
        v.mode[0] = 0;
    }
    if (v.mode[0] && STREQ(v.mode, "vm-passthrough") && v.resource[0]) {
        v.class_index = class_by_vm_device(cat, v.resource);
        if (v.class_index < 0)
            v.class_index = class_by_product(cat, product);
        /* Found by its PCI id or its product label: the node's own device name is then not the
         * catalog's, and the node's capacity is counted under the name it advertises (R6). */
        const char *vdn = v.class_index >= 0 ? cat->classes[v.class_index].vm_device_name : NULL;
        v.resource_differs = v.class_index >= 0 && (!vdn || STRNEQ(vdn, v.resource));
    } else
        v.class_index = class_by_product(cat, product);
    long total = k8s_quantity_count(json_object_get(labels, "nvidia.com/gpu.count"));
    v.total_gpus = total > 0 ? (unsigned)MIN(total, 64) : 0;
    if (v.class_index >= 0 && STREQ(v.mode, "container")) {
        const GpuClass *c = &cat->classes[v.class_index];
        for (size_t i = 0; i < c->n_mig_profiles && i < ARRAY_SIZE(v.mig); i++) {
            char res[64];
            snprintf(res, sizeof(res), "nvidia.com/mig-%s", c->mig_profiles[i]);
            long n = k8s_quantity_count(json_object_get(alloc, res));
            v.mig[i] = n > 0 ? (unsigned)MIN(n, 64) : 0;
        }
        lay_out_mig(cat, &v);
    }
    v.unschedulable = json_is_true(path2(node, "spec", "unschedulable"));
    v.ready = ready(node);
    v.cpus = cpu_cores(json_object_get(alloc, "cpu"));
    *ret = v;
    return 0;
}

json_t *k8s_node_spec_json(const Catalog *cat, const K8sNodeView *v, const K8sSite *site,
                           bool cordoned) {
    json_t *caps = json_array(), *devs = json_array();
    json_array_append_new(caps, json_string("k8s"));
    for (const char *c = site->caps; c && *c;) {
        size_t k = strcspn(c, ",");
        if (k)
            json_array_append_new(caps, json_stringn(c, k));
        c += k + (c[k] == ',');
    }
    const GpuClass *cls = v->class_index >= 0 ? &cat->classes[v->class_index] : NULL;
    bool vfio = STREQ(v->mode, "vm-passthrough");
    for (unsigned i = 0; i < v->count; i++)
        json_array_append_new(devs, json_pack("{s:s, s:i, s:s}", "class", cls ? cls->name : "",
                                              "memory_gb", cls ? (int)cls->memory_gb : 0, "binding",
                                              vfio ? "vfio" : "host"));
    for (unsigned g = 0; cls && g < v->n_mig_gpus; g++) {
        json_t *mig = json_array();
        for (unsigned k = 0; k < v->mig_gpu[g].n; k++)
            json_array_append_new(mig, json_pack("{s:s, s:i}", "profile",
                                                 cls->mig_profiles[v->mig_gpu[g].profile[k]],
                                                 "start", (int)v->mig_gpu[g].start[k]));
        json_array_append_new(devs, json_pack("{s:s, s:i, s:s, s:b, s:o}", "class", cls->name,
                                              "memory_gb", (int)cls->memory_gb, "binding", "host",
                                              "mig_enabled", 1, "mig", mig));
    }
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:b, s:o}", "name", v->name, "site",
                          site->site, "site_kind", "datacenter", "platform", "linux", "owner",
                          site->owner, "mode", v->mode, "capabilities", caps, "cordoned", cordoned,
                          "devices", devs);
    if (j && v->resource_differs)
        json_object_set_new(j, "device_resource", json_string(v->resource));
    /* R11: every machine offers cpu; a Pod of it asks for the cores placed (workloads.c). */
    if (j && v->cpus)
        json_object_set_new(j, "cpus", json_integer(v->cpus));
    /* R2e: a Pod asks for whole nvidia.com/gpu units, and the device plugin's time-slicing
     * replicas go to any Pod (another user's too): a Kubernetes GPU takes one workload. */
    if (j)
        json_object_set_new(j, "time_slice_replicas", json_integer(1));
    return j;
}

static bool asks_gpu(json_t *containers) {
    size_t i;
    json_t *c;
    json_array_foreach(containers, i, c) {
        const char *sections[] = {"limits", "requests"};
        for (size_t s = 0; s < 2; s++) {
            const char *key;
            json_t *q;
            json_object_foreach(path2(c, "resources", sections[s]), key,
                                q) if (strncmp(key, "nvidia.com/", 11) == 0 &&
                                       k8s_quantity_count(q) != 0) return true;
        }
    }
    return false;
}

bool k8s_pod_holds_gpu(json_t *pod) {
    const char *phase = json_string_value(path2(pod, "status", "phase"));
    if (phase && (STREQ(phase, "Succeeded") || STREQ(phase, "Failed")))
        return false;
    json_t *spec = json_object_get(pod, "spec");
    return asks_gpu(json_object_get(spec, "containers")) ||
           asks_gpu(json_object_get(spec, "initContainers"));
}

bool k8s_node_converged(json_t *node, const char *mode, const char *vm_resource, unsigned count,
                        char *why, size_t size) {
    json_t *alloc = path2(node, "status", "allocatable");
    bool container = STREQ(mode, "container");
    const char *want = container ? "nvidia.com/gpu" : vm_resource;
    const char *key;
    json_t *q;
    json_object_foreach(alloc, key, q) {
        if (k8s_quantity_count(q) <= 0 || strncmp(key, "nvidia.com/", 11) != 0)
            continue;
        bool old = container ? vm_device(key) != NULL
                             : (STREQ(key, "nvidia.com/gpu") ||
                                strncmp(key, "nvidia.com/mig-", 15) == 0);
        if (old) {
            snprintf(why, size, "the old GPU resource %.100s is still in allocatable", key);
            return false;
        }
    }
    long have = -1;
    if (want)
        have = k8s_quantity_count(json_object_get(alloc, want));
    else /* the node's device name is not known yet: any KubeVirt device resource */
        json_object_foreach(alloc, key,
                            q) if (vm_device(key) && (have = k8s_quantity_count(q)) > 0) {
            want = key;
            break;
        }
    if (have < (long)count && want)
        snprintf(why, size, "allocatable has %ld of %u %.100s", MAX(have, 0L), count, want);
    else if (have < (long)count)
        snprintf(why, size, "allocatable has no KubeVirt GPU device resource yet (%u wanted)",
                 count);
    if (have < (long)count)
        return false;
    if (!ready(node)) {
        snprintf(why, size, "the node is not Ready");
        return false;
    }
    return true;
}
