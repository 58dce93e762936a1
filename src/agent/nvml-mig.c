/* nvml-mig.c: the MIG instance a placement names, made on its GPU through NVML (R2c) so that
 * the slice's workload gets its own MIG device and never the whole GPU (R15, R17), and removed
 * once the workload is gone. The control plane lays out the slices; an idle instance in the way
 * is remade, one a process works in is never touched. */
#include "agent/nvml-mig.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent/nvml-table.h"
#include "util/macro.h"

#define MAX_INSTANCES 8

typedef struct Gpu {
    NvmlTable t;
    EnvmlDevice dev;
    const char *uuid;
    /* The GPU instances compute processes work in, asked of NVML once per call (n_busy -1:
     * not yet; -2: NVML could not tell, so every instance counts as busy). */
    unsigned busy[64];
    int n_busy;
} Gpu;

static int gpu_open(Gpu *g, const char *library, const char *uuid, Error *err) {
    int r = nvml_table_init(&g->t, library ? library : NVML_DEFAULT_LIBRARY, err);
    if (r < 0)
        return r;
    g->uuid = uuid;
    g->n_busy = -1;
    const char *missing =
            !g->t.get_handle_by_uuid         ? "nvmlDeviceGetHandleByUUID"
            : !g->t.create_gi_with_placement ? "nvmlDeviceCreateGpuInstanceWithPlacement"
            : !g->t.gi_destroy               ? "nvmlGpuInstanceDestroy"
            : !g->t.gi_get_ci_profile_info   ? "nvmlGpuInstanceGetComputeInstanceProfileInfo"
            : !g->t.gi_create_ci             ? "nvmlGpuInstanceCreateComputeInstance"
            : !g->t.gi_get_cis               ? "nvmlGpuInstanceGetComputeInstances"
            : !g->t.ci_destroy               ? "nvmlComputeInstanceDestroy"
            : !g->t.get_max_mig_devices      ? "nvmlDeviceGetMaxMigDeviceCount"
            : !g->t.get_mig_device_by_index  ? "nvmlDeviceGetMigDeviceHandleByIndex"
            : !g->t.get_gi_id                ? "nvmlDeviceGetGpuInstanceId"
            : !g->t.get_gpu_instances        ? "nvmlDeviceGetGpuInstances"
            : !g->t.gpu_instance_get_info    ? "nvmlGpuInstanceGetInfo"
                                             : NULL;
    if (missing) {
        nvml_table_close(&g->t);
        return error_set(err, -EPROTO, "the NVIDIA library cannot make MIG instances (it lacks %s)",
                         missing);
    }
    NvRet nr = g->t.get_handle_by_uuid(uuid, &g->dev);
    if (nr != ENVML_SUCCESS) {
        r = error_set(err, -ENODEV, "NVML does not know GPU %s: %s", uuid,
                      nvml_strerror(&g->t, nr));
        nvml_table_close(&g->t);
        return r;
    }
    return 0;
}

/* Every GPU instance of the GPU, with its info. */
static size_t gpu_instances(Gpu *g, EnvmlGpuInstance *gis, EnvmlGpuInstanceInfo *infos,
                            size_t max) {
    size_t n = 0;
    for (unsigned p = 0; p < ENVML_GPU_INSTANCE_PROFILE_COUNT && n < max; p++) {
        unsigned id, slices;
        char name[32];
        if (nvml_gi_profile(&g->t, g->dev, p, &id, &slices, name, sizeof(name)) != ENVML_SUCCESS)
            continue;
        EnvmlGpuInstance found[MAX_INSTANCES];
        unsigned count = ARRAY_SIZE(found);
        if (g->t.get_gpu_instances(g->dev, id, found, &count) != ENVML_SUCCESS)
            continue;
        for (unsigned i = 0; i < MIN(count, (unsigned)ARRAY_SIZE(found)) && n < max; i++)
            if (g->t.gpu_instance_get_info(found[i], &infos[n]) == ENVML_SUCCESS)
                gis[n++] = found[i];
    }
    return n;
}

/* Whether a compute process works in GPU instance gi_id. */
static bool instance_busy(Gpu *g, unsigned gi_id) {
    if (!g->t.get_compute_processes_v3)
        return false;
    if (g->n_busy == -1) {
        EnvmlProcessInfo infos[ARRAY_SIZE(g->busy)];
        unsigned count = ARRAY_SIZE(infos);
        if (g->t.get_compute_processes_v3(g->dev, &count, infos) != ENVML_SUCCESS)
            g->n_busy = -2;
        else {
            g->n_busy = (int)MIN(count, (unsigned)ARRAY_SIZE(infos));
            for (int i = 0; i < g->n_busy; i++)
                g->busy[i] = infos[i].gpu_instance_id;
        }
    }
    if (g->n_busy == -2)
        return true; /* cannot tell: leave it alone */
    for (int i = 0; i < g->n_busy; i++)
        if (g->busy[i] == gi_id)
            return true;
    return false;
}

/* The compute instance profile that spans all of a GPU instance of `slices` compute slices. */
static unsigned ci_profile_for(unsigned slices) {
    static const unsigned by_slices[] = {
            [1] = 0, [2] = 1, [3] = 2, [4] = 3, [6] = 6, [7] = 4, [8] = 5};
    return slices < ARRAY_SIZE(by_slices) ? by_slices[slices] : 0;
}

/* Destroy a GPU instance and its compute instances. */
static int instance_remove(Gpu *g, EnvmlGpuInstance gi, const EnvmlGpuInstanceInfo *info,
                           Error *err) {
    for (unsigned p = 0; p < 8; p++) {
        EnvmlComputeInstanceProfileInfo ci = {0};
        if (g->t.gi_get_ci_profile_info(gi, p, 0, &ci) != ENVML_SUCCESS)
            continue;
        EnvmlComputeInstance cis[MAX_INSTANCES];
        unsigned n = ARRAY_SIZE(cis);
        if (g->t.gi_get_cis(gi, ci.id, cis, &n) != ENVML_SUCCESS)
            continue;
        for (unsigned i = 0; i < MIN(n, (unsigned)ARRAY_SIZE(cis)); i++) {
            NvRet nr = g->t.ci_destroy(cis[i]);
            if (nr != ENVML_SUCCESS)
                return error_set(err, -EBUSY,
                                 "NVML could not remove a compute instance of MIG instance %u on "
                                 "GPU %s: %s",
                                 info->id, g->uuid, nvml_strerror(&g->t, nr));
        }
    }
    NvRet nr = g->t.gi_destroy(gi);
    if (nr != ENVML_SUCCESS)
        return error_set(err, -EBUSY,
                         "NVML could not remove MIG instance %u (slot %u) on GPU %s: %s", info->id,
                         info->placement.start, g->uuid, nvml_strerror(&g->t, nr));
    return 0;
}

/* The MIG device (its UUID) of GPU instance gi_id. */
static int mig_device_uuid(Gpu *g, unsigned gi_id, char *buf, size_t size, Error *err) {
    unsigned max = 0;
    if (g->t.get_max_mig_devices(g->dev, &max) != ENVML_SUCCESS)
        max = 8;
    for (unsigned i = 0; i < max; i++) {
        EnvmlDevice mig;
        unsigned id;
        if (g->t.get_mig_device_by_index(g->dev, i, &mig) != ENVML_SUCCESS ||
            g->t.get_gi_id(mig, &id) != ENVML_SUCCESS || id != gi_id)
            continue;
        NvRet nr =
                g->t.get_uuid ? g->t.get_uuid(mig, buf, (unsigned)size) : ENVML_ERROR_NOT_SUPPORTED;
        if (nr != ENVML_SUCCESS)
            return error_set(err, -EIO,
                             "NVML does not give the UUID of MIG instance %u on GPU %s: %s", gi_id,
                             g->uuid, nvml_strerror(&g->t, nr));
        buf[size - 1] = 0;
        return 0;
    }
    return error_set(err, -ENODEV, "NVML lists no MIG device for instance %u on GPU %s", gi_id,
                     g->uuid);
}

static int make(Gpu *g, const char *profile, unsigned start, unsigned size, bool ours,
                char *ret_uuid, size_t uuid_size, bool *ret_made, Error *err) {
    unsigned profile_id = 0, slices = 0;
    bool known = false;
    for (unsigned p = 0; p < ENVML_GPU_INSTANCE_PROFILE_COUNT && !known; p++) {
        char name[32];
        known = nvml_gi_profile(&g->t, g->dev, p, &profile_id, &slices, name, sizeof(name)) ==
                        ENVML_SUCCESS &&
                STREQ(name, profile);
    }
    if (!known)
        return error_set(err, -EINVAL, "GPU %s has no MIG profile %s (NVML)", g->uuid, profile);
    /* The instance at the placement's slots: that one if it is ours to take, else the idle
     * ones in the way go (the control plane lays the slices out); a busy one is never taken. */
    EnvmlGpuInstance gis[MAX_INSTANCES];
    EnvmlGpuInstanceInfo infos[MAX_INSTANCES];
    size_t n = gpu_instances(g, gis, infos, ARRAY_SIZE(gis));
    EnvmlGpuInstance gi = NULL;
    unsigned gi_id = 0;
    unsigned want = ((1u << size) - 1u) << start;
    for (size_t i = 0; i < n; i++) {
        const EnvmlGpuInstancePlacement *pl = &infos[i].placement;
        unsigned have = ((1u << MIN(pl->size, 8u)) - 1u) << MIN(pl->start, 7u);
        if (!(have & want))
            continue;
        if (infos[i].profile_id == profile_id && pl->start == start && pl->size == size) {
            /* Taken as it is, unless a process works in it that is not this workload's own
             * (a start again after an agent restart): never shared with it (R15). */
            if (!ours && instance_busy(g, infos[i].id))
                return error_set(err, -EBUSY,
                                 "MIG slots %u-%u of GPU %s are in a MIG instance a process "
                                 "works in",
                                 start, start + size - 1, g->uuid);
            gi = gis[i], gi_id = infos[i].id;
            continue;
        }
        if (instance_busy(g, infos[i].id))
            return error_set(err, -EBUSY,
                             "MIG slots %u-%u of GPU %s are in a MIG instance a process works in",
                             start, start + size - 1, g->uuid);
        int r = instance_remove(g, gis[i], &infos[i], err);
        if (r < 0)
            return r;
    }
    bool made = !gi;
    if (made) {
        EnvmlGpuInstancePlacement pl = {start, size};
        NvRet nr = g->t.create_gi_with_placement(g->dev, profile_id, &pl, &gi);
        if (nr != ENVML_SUCCESS)
            return error_set(err, -EIO,
                             "NVML could not make a %s MIG instance at slot %u of GPU %s: %s",
                             profile, start, g->uuid, nvml_strerror(&g->t, nr));
        EnvmlGpuInstanceInfo info = {0};
        if ((nr = g->t.gpu_instance_get_info(gi, &info)) != ENVML_SUCCESS)
            return error_set(err, -EIO,
                             "NVML does not describe the MIG instance it made on GPU %s: %s",
                             g->uuid, nvml_strerror(&g->t, nr));
        gi_id = info.id;
    }
    int r = 0;
    EnvmlComputeInstanceProfileInfo ci = {0};
    NvRet nr = g->t.gi_get_ci_profile_info(gi, ci_profile_for(slices), 0, &ci);
    if (nr != ENVML_SUCCESS)
        r = error_set(err, -EIO, "NVML gives no compute profile for MIG instance %u on GPU %s: %s",
                      gi_id, g->uuid, nvml_strerror(&g->t, nr));
    EnvmlComputeInstance cis[MAX_INSTANCES];
    unsigned n_ci = ARRAY_SIZE(cis);
    if (r >= 0 && g->t.gi_get_cis(gi, ci.id, cis, &n_ci) != ENVML_SUCCESS)
        n_ci = 0;
    EnvmlComputeInstance made_ci;
    if (r >= 0 && !n_ci && (nr = g->t.gi_create_ci(gi, ci.id, &made_ci)) != ENVML_SUCCESS)
        r = error_set(err, -EIO,
                      "NVML could not make the compute instance of MIG instance %u on GPU %s: %s",
                      gi_id, g->uuid, nvml_strerror(&g->t, nr));
    if (r >= 0)
        r = mig_device_uuid(g, gi_id, ret_uuid, uuid_size, err);
    if (r < 0 && made) { /* not left behind, unrecorded: the GPU as it was */
        EnvmlGpuInstanceInfo info = {.id = gi_id, .placement = {start, size}};
        Error ignore = {0};
        (void)instance_remove(g, gi, &info, &ignore);
    }
    if (r >= 0)
        *ret_made = made;
    return r;
}

int nvml_mig_make(const char *library, const char *gpu_uuid, const char *profile, unsigned start,
                  unsigned size, bool ours, char *ret_uuid, size_t uuid_size, bool *ret_made,
                  Error *err) {
    if (start > 7 || !size || size > 8 - start)
        return error_set(err, -EINVAL, "MIG slots %u+%u are not on a GPU", start, size);
    Gpu g;
    int r = gpu_open(&g, library, gpu_uuid, err);
    if (r < 0)
        return r;
    char uuid[96];
    bool made = false;
    r = make(&g, profile, start, size, ours, uuid, sizeof(uuid), &made, err);
    nvml_table_close(&g.t);
    if (r < 0)
        return r;
    snprintf(ret_uuid, uuid_size, "%s", uuid);
    if (ret_made)
        *ret_made = made;
    return 0;
}

int nvml_mig_remove(const char *library, const char *gpu_uuid, unsigned start, Error *err) {
    Gpu g;
    int r = gpu_open(&g, library, gpu_uuid, err);
    if (r < 0)
        return r;
    EnvmlGpuInstance gis[MAX_INSTANCES];
    EnvmlGpuInstanceInfo infos[MAX_INSTANCES];
    size_t n = gpu_instances(&g, gis, infos, ARRAY_SIZE(gis));
    for (size_t i = 0; i < n && r >= 0; i++)
        if (infos[i].placement.start == start)
            r = instance_busy(&g, infos[i].id)
                        ? error_set(err, -EBUSY, "MIG instance %u of GPU %s still has a process",
                                    infos[i].id, gpu_uuid)
                        : instance_remove(&g, gis[i], &infos[i], err);
    nvml_table_close(&g.t);
    return r;
}
