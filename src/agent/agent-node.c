/* agent-node.c: the discovered machine as the node description the control plane takes
 * (docs/control-plane.md "Node description"): pure translation, no I/O. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent-run.h"
#include "util/macro.h"

#define GIB (1024ull * 1024 * 1024)

/* The simulated binding of bdf from "<bdf> vfio|host" lines; NULL when none. The last line
 * for a GPU wins. */
static const char *sim_binding(const char *text, const char *bdf) {
    const char *found = NULL;
    size_t n = strlen(bdf);
    for (const char *l = text; l && *l;) {
        const char *e = strchrnul(l, '\n');
        if ((size_t)(e - l) > n + 1 && !strncmp(l, bdf, n) && l[n] == ' ') {
            const char *v = l + n + 1;
            if (!strncmp(v, "vfio", 4) && v + 4 == e)
                found = "vfio";
            else if (!strncmp(v, "host", 4) && v + 4 == e)
                found = "host";
        }
        l = *e ? e + 1 : e;
    }
    return found;
}

static bool on_vfio(const Accelerator *a) {
    return (a->driver && STREQ(a->driver, "vfio-pci")) ||
           (a->driver_override && STREQ(a->driver_override, "vfio-pci"));
}

static json_t *device_json(const Accelerator *a, const char *binding) {
    /* Memory in whole GB, rounded: NVML reports a little under the nominal size. */
    json_int_t mem = (json_int_t)((a->memory_total_bytes + GIB / 2) / GIB);
    json_t *d = json_pack("{s:s, s:s, s:I, s:s}", "pci", a->bdf, "class", a->class_name ? a->class_name : "",
                          "memory_gb", mem, "binding", binding);
    if (a->vendor_id) { /* what to add to the catalog when no class matches (R8) */
        char id[10];
        snprintf(id, sizeof(id), "%04x:%04x", a->vendor_id, a->device_id);
        json_object_set_new(d, "pci_id", json_string(id));
    }
    if (a->mig_current == 1 && STREQ(binding, "host")) {
        json_t *mig = json_array();
        for (size_t i = 0; i < a->n_mig; i++)
            if (a->mig[i].profile && a->mig[i].start < 8)
                json_array_append_new(mig, json_pack("{s:s, s:i}", "profile", a->mig[i].profile,
                                                     "start", (int)a->mig[i].start));
        json_object_set_new(d, "mig_enabled", json_true());
        json_object_set_new(d, "mig", mig);
    }
    return d;
}

json_t *agent_node_json(const AgentIdentity *id, const MachineInventory *inv, const char *sim_bindings) {
    const char *kind = id->site_kind ? id->site_kind : "lab";
    bool dc = STREQ(kind, "datacenter");
    json_t *devs = json_array(), *caps = json_array();
    json_t *node = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "name", id->name, "site",
                             id->site ? id->site : "home", "site_kind", kind, "platform", "linux",
                             "owner", id->owner, "cpus", (json_int_t)inv->cpu.logical_cores);
    if (!node || !devs || !caps) {
        json_decref(node), json_decref(devs), json_decref(caps);
        return NULL;
    }
    size_t n_gpus = 0, n_vfio = 0;
    for (size_t i = 0; i < inv->n_accelerators; i++) {
        const Accelerator *a = &inv->accelerators[i];
        if (a->vendor == VENDOR_APPLE) {
            /* R10: one unit per Mac; usable = the GPU wired limit minus the owner's headroom. */
            uint64_t usable = a->wired_limit_bytes > a->headroom_bytes ? a->wired_limit_bytes - a->headroom_bytes : 0;
            json_object_set_new(node, "platform", json_string("macos"));
            json_object_set_new(node, "apple_unified_memory_gb",
                                json_integer((json_int_t)((a->unified_memory_bytes + GIB / 2) / GIB)));
            json_object_set_new(node, "apple_usable_memory_gb", json_integer((json_int_t)(usable / GIB)));
            continue;
        }
        if (!a->bdf[0] || json_array_size(devs) >= 64)
            continue;
        const char *binding = sim_bindings ? sim_binding(sim_bindings, a->bdf) : NULL;
        if (!binding)
            binding = on_vfio(a) ? "vfio" : "host";
        if (a->vendor == VENDOR_NVIDIA) {
            n_gpus++;
            n_vfio += STREQ(binding, "vfio");
        }
        json_array_append_new(devs, device_json(a, binding));
    }
    json_object_set_new(node, "devices", devs);
    if (id->capabilities) {
        char buf[512];
        snprintf(buf, sizeof(buf), "%s", id->capabilities);
        char *save = NULL;
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
            json_array_append_new(caps, json_string(t));
    }
    json_object_set_new(node, "capabilities", caps);
    /* R3: a datacenter node's mode is its label; an agent that is not told reports what its
     * GPUs show (all on vfio-pci: vm-passthrough). Lab and solo GPUs switch one by one (R7). */
    if (dc && (id->mode || n_gpus))
        json_object_set_new(node, "mode",
                            json_string(id->mode ? id->mode : n_vfio == n_gpus && n_gpus ? "vm-passthrough" : "container"));
    return node;
}
