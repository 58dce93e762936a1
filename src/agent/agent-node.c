/* agent-node.c: the discovered machine as the node description the control plane takes
 * (docs/control-plane.md "Node description", encoded by wire/node.c): pure translation, no I/O. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent-run.h"
#include "core/mig.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "wire/node.h"

#define GIB (1024ull * 1024 * 1024)

/* The simulated binding of bdf from "<bdf> vfio|host" lines; NULL when none. The last line
 * for a GPU wins. */
static const char *sim_binding(const char *text, const char *bdf) {
    const char *v;
    size_t len;
    if (!text_key_value(text, bdf, &v, &len) || len != 4)
        return NULL;
    return !strncmp(v, "vfio", 4) ? "vfio" : !strncmp(v, "host", 4) ? "host" : NULL;
}

static bool on_vfio(const Accelerator *a) {
    return (a->driver && STREQ(a->driver, "vfio-pci")) ||
           (a->driver_override && STREQ(a->driver_override, "vfio-pci"));
}

/* MIG profiles as people read them: by compute slices, then memory ("1g.18gb", "1g.35gb",
 * "2g.35gb", ...), whatever order NVML's profile constants have. */
static int profile_cmp(const void *x, const void *y) {
    const char *a = x, *b = y;
    unsigned sa = (unsigned)strtoul(a, NULL, 10), sb = (unsigned)strtoul(b, NULL, 10);
    unsigned ma = mig_profile_memory_gb(a), mb = mig_profile_memory_gb(b);
    return sa != sb ? (sa < sb ? -1 : 1) : (ma > mb) - (ma < mb);
}

static void device_spec(const Accelerator *a, Binding binding, ApiDevice *d) {
    /* Memory in whole GB, rounded: NVML reports a little under the nominal size. */
    *d = (ApiDevice){.memory_gb = (unsigned)((a->memory_total_bytes + GIB / 2) / GIB),
                     .binding = binding};
    snprintf(d->pci, sizeof(d->pci), "%s", a->bdf);
    snprintf(d->cls, sizeof(d->cls), "%s", a->class_name ? a->class_name : "");
    if (a->vendor_id) /* what to add to the catalog when no class matches (R8) */
        snprintf(d->pci_id, sizeof(d->pci_id), "%04x:%04x", a->vendor_id, a->device_id);
    if (a->mig_current == 1 && binding == BINDING_HOST) {
        d->mig_enabled = true;
        for (size_t i = 0; i < a->n_mig && d->n_mig < SPEC_MAX_MIG; i++)
            if (a->mig[i].profile && a->mig[i].start < 8) {
                ApiMigInstance *m = &d->mig[d->n_mig++];
                snprintf(m->profile, sizeof(m->profile), "%s", a->mig[i].profile);
                m->start = a->mig[i].start;
                m->busy = a->mig[i].busy;
            }
        /* The profiles NVML offers on this GPU (R2c): only those are offered on it. Those the
         * control plane would not take (a "+me" variant, another card's) are no slice class. */
        for (size_t i = 0; i < a->n_mig_profiles && d->n_mig_profiles < SPEC_MAX_MIG_PROFILES;
             i++) {
            const char *p = a->mig_profiles[i];
            bool again = false;
            for (size_t k = 0; k < d->n_mig_profiles; k++)
                again = again || STREQ(d->mig_profiles[k], p);
            if (!again && api_mig_profile_fits(p, d->memory_gb))
                snprintf(d->mig_profiles[d->n_mig_profiles++], sizeof(d->mig_profiles[0]), "%s", p);
        }
        qsort(d->mig_profiles, d->n_mig_profiles, sizeof(d->mig_profiles[0]), profile_cmp);
        d->mig_profiles_given = a->n_mig_profiles > 0;
    }
}

json_t *agent_node_json(const AgentIdentity *id, const MachineInventory *inv,
                        const char *sim_bindings) {
    /* Heap, not stack: a node description holds room for every device it may have. */
    _cleanup_free_ ApiNode *n = calloc(1, sizeof(*n));
    if (!n)
        return NULL;
    n->site_kind = site_kind_from_string(id->site_kind ? id->site_kind : "lab");
    if ((int)n->site_kind < 0)
        return NULL; /* the CLI checks --site-kind */
    snprintf(n->name, sizeof(n->name), "%s", id->name);
    snprintf(n->site, sizeof(n->site), "%s", id->site ? id->site : "home");
    snprintf(n->owner, sizeof(n->owner), "%s", id->owner);
    n->platform = PLATFORM_LINUX;
    n->mode = NODE_MODE_NONE;
    n->cpus = (unsigned)inv->cpu.logical_cores;
    size_t n_gpus = 0, n_vfio = 0;
    for (size_t i = 0; i < inv->n_accelerators; i++) {
        const Accelerator *a = &inv->accelerators[i];
        if (a->vendor == VENDOR_APPLE) {
            /* R10: one unit per Mac; usable = the GPU wired limit minus the owner's headroom. */
            uint64_t usable = a->wired_limit_bytes > a->headroom_bytes
                                      ? a->wired_limit_bytes - a->headroom_bytes
                                      : 0;
            n->platform = PLATFORM_MACOS;
            n->apple_unified_memory_gb = (unsigned)((a->unified_memory_bytes + GIB / 2) / GIB);
            n->apple_usable_memory_gb = (unsigned)(usable / GIB);
            n->apple_usable_given = true; /* 0 too: the headroom leaves nothing to offer */
            continue;
        }
        if (!a->bdf[0] || n->n_devices >= SPEC_MAX_DEVICES)
            continue;
        const char *sim = sim_bindings ? sim_binding(sim_bindings, a->bdf) : NULL;
        Binding binding = sim ? binding_from_string(sim) : on_vfio(a) ? BINDING_VFIO : BINDING_HOST;
        if (a->vendor == VENDOR_NVIDIA) {
            n_gpus++;
            n_vfio += binding == BINDING_VFIO;
        }
        device_spec(a, binding, &n->devices[n->n_devices++]);
    }
    if (id->capabilities) {
        char buf[512];
        snprintf(buf, sizeof(buf), "%s", id->capabilities);
        char *save = NULL;
        for (char *t = strtok_r(buf, ",", &save); t && n->n_caps < SPEC_MAX_CAPS;
             t = strtok_r(NULL, ",", &save))
            snprintf(n->caps[n->n_caps++], sizeof(n->caps[0]), "%s", t);
    }
    /* R3: a datacenter node's mode is its label; an agent that is not told reports what its
     * GPUs show (all on vfio-pci: vm-passthrough). Lab and solo GPUs switch one by one (R7). */
    if (n->site_kind == SITE_DATACENTER && (id->mode || n_gpus))
        n->mode = id->mode                     ? node_mode_from_string(id->mode)
                  : n_vfio == n_gpus && n_gpus ? NODE_MODE_VM_PASSTHROUGH
                                               : NODE_MODE_CONTAINER;
    return api_node_to_json(n);
}
