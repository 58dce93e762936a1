/* nvml.c: load NVML with dlopen, resolve its versioned symbols once, query every GPU. */
#include "nvml.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml-table.h"
#include "nvml-types.h"
#include "pci-parse.h"
#include "util/macro.h"
#include "util/strutil.h"

#define RESOLVE(t, field, name) ((t)->field = (__typeof__((t)->field))dlsym((t)->dl, name))

int nvml_table_open(NvmlTable *t, const char *library, Error *err) {
    *t = (NvmlTable){0};
    t->dl = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!t->dl) {
        const char *why = dlerror();
        return error_set(
                err, -ENOENT,
                "NVML data is absent: the NVIDIA management library %s could not be loaded "
                "(%s); is the NVIDIA driver installed?",
                library, why ? why : "unknown reason");
    }
    RESOLVE(t, init_v2, "nvmlInit_v2");
    RESOLVE(t, shutdown, "nvmlShutdown");
    RESOLVE(t, error_string, "nvmlErrorString");
    RESOLVE(t, get_count_v2, "nvmlDeviceGetCount_v2");
    RESOLVE(t, get_handle_by_index_v2, "nvmlDeviceGetHandleByIndex_v2");
    RESOLVE(t, get_pci_info_v3, "nvmlDeviceGetPciInfo_v3");
    RESOLVE(t, get_pci_info_v2, "nvmlDeviceGetPciInfo_v2");
    RESOLVE(t, get_name, "nvmlDeviceGetName");
    RESOLVE(t, get_uuid, "nvmlDeviceGetUUID");
    RESOLVE(t, get_memory_info_v2, "nvmlDeviceGetMemoryInfo_v2");
    RESOLVE(t, get_memory_info, "nvmlDeviceGetMemoryInfo");
    RESOLVE(t, get_mig_mode, "nvmlDeviceGetMigMode");
    RESOLVE(t, get_gi_profile_info, "nvmlDeviceGetGpuInstanceProfileInfo");
    RESOLVE(t, get_gi_profile_info_v, "nvmlDeviceGetGpuInstanceProfileInfoV");
    RESOLVE(t, get_gpu_instances, "nvmlDeviceGetGpuInstances");
    RESOLVE(t, gpu_instance_get_info, "nvmlGpuInstanceGetInfo");
    RESOLVE(t, get_compute_processes_v3, "nvmlDeviceGetComputeRunningProcesses_v3");
    RESOLVE(t, get_minor_number, "nvmlDeviceGetMinorNumber");
    RESOLVE(t, get_handle_by_uuid, "nvmlDeviceGetHandleByUUID");
    RESOLVE(t, create_gi_with_placement, "nvmlDeviceCreateGpuInstanceWithPlacement");
    RESOLVE(t, gi_destroy, "nvmlGpuInstanceDestroy");
    RESOLVE(t, gi_get_ci_profile_info, "nvmlGpuInstanceGetComputeInstanceProfileInfo");
    RESOLVE(t, gi_create_ci, "nvmlGpuInstanceCreateComputeInstance");
    RESOLVE(t, gi_get_cis, "nvmlGpuInstanceGetComputeInstances");
    RESOLVE(t, ci_destroy, "nvmlComputeInstanceDestroy");
    RESOLVE(t, get_max_mig_devices, "nvmlDeviceGetMaxMigDeviceCount");
    RESOLVE(t, get_mig_device_by_index, "nvmlDeviceGetMigDeviceHandleByIndex");
    RESOLVE(t, get_gi_id, "nvmlDeviceGetGpuInstanceId");

    const char *missing = !t->init_v2                  ? "nvmlInit_v2"
                          : !t->shutdown               ? "nvmlShutdown"
                          : !t->error_string           ? "nvmlErrorString"
                          : !t->get_count_v2           ? "nvmlDeviceGetCount_v2"
                          : !t->get_handle_by_index_v2 ? "nvmlDeviceGetHandleByIndex_v2"
                          : !t->get_pci_info_v3 && !t->get_pci_info_v2 ? "nvmlDeviceGetPciInfo_v2"
                                                                       : NULL;
    if (missing) {
        dlclose(t->dl);
        t->dl = NULL;
        return error_set(err, -EPROTO,
                         "NVML data is absent: %s is too old (it lacks %s); update the NVIDIA "
                         "driver",
                         library, missing);
    }
    return 0;
}

int nvml_table_init(NvmlTable *t, const char *library, Error *err) {
    int r = nvml_table_open(t, library, err);
    if (r < 0)
        return r;
    NvRet nr = t->init_v2();
    if (nr != ENVML_SUCCESS) {
        r = error_set(err, -EIO, "nvmlInit_v2 failed: %s (NVML error %d)", nvml_strerror(t, nr),
                      nr);
        dlclose(t->dl);
        t->dl = NULL;
        return r;
    }
    return 0;
}

void nvml_table_close(NvmlTable *t) {
    if (!t->dl)
        return;
    t->shutdown();
    dlclose(t->dl);
    t->dl = NULL;
}

const char *nvml_strerror(const NvmlTable *t, NvRet r) {
    const char *s = t->error_string ? t->error_string(r) : NULL;
    return s ? s : "unknown NVML error";
}

/* Append "<what> failed: <NVML's string>." to a GPU's error text. */
static void gpu_note(NvmlGpu *g, const NvmlTable *t, const char *what, NvRet r) {
    char sentence[256];
    snprintf(sentence, sizeof(sentence), "%s failed: %s.", what, nvml_strerror(t, r));
    if (g->error && strstr(g->error, sentence))
        return; /* e.g. the same permission error for every MIG profile: say it once */
    char *s = strprintf("%s%s%s", strempty(g->error), g->error ? " " : "", sentence);
    if (s) {
        free(g->error);
        g->error = s;
    }
}

void nvml_profile_name(unsigned slice_count, uint64_t memory_mb, const char *lib_name, char *buf,
                       size_t size) {
    if (lib_name && lib_name[0]) {
        if (string_has_prefix(lib_name, "MIG "))
            lib_name += 4;
        snprintf(buf, size, "%s", lib_name);
        return;
    }
    snprintf(buf, size, "%ug.%llugb", slice_count, (unsigned long long)((memory_mb + 1023) / 1024));
}

bool nvml_profile_absent(NvRet r) {
    return r == ENVML_ERROR_NOT_SUPPORTED || r == ENVML_ERROR_INVALID_ARGUMENT ||
           r == ENVML_ERROR_NOT_FOUND;
}

NvRet nvml_gi_profile(const NvmlTable *t, EnvmlDevice dev, unsigned p, unsigned *ret_id,
                      unsigned *ret_slices, char *name, size_t name_size) {
    unsigned id = 0, slices = 0;
    uint64_t mem_mb = 0;
    char lib_name[ENVML_DEVICE_NAME_V2_BUFFER_SIZE] = "";
    NvRet r = ENVML_ERROR_NOT_SUPPORTED;
    if (t->get_gi_profile_info_v) {
        EnvmlGpuInstanceProfileInfoV2 info = {.version =
                                                      ENVML_GPU_INSTANCE_PROFILE_INFO_V2_VERSION};
        r = t->get_gi_profile_info_v(dev, p, &info);
        id = info.id, slices = info.slice_count, mem_mb = info.memory_size_mb;
        memcpy(lib_name, info.name, sizeof(lib_name) - 1);
    }
    /* Without the V call, or when it refuses our struct version, the unnamed call still gives
     * the fields; the name is then derived from them. */
    if (!t->get_gi_profile_info_v ||
        (r != ENVML_SUCCESS && !nvml_profile_absent(r) && t->get_gi_profile_info)) {
        lib_name[0] = '\0';
        EnvmlGpuInstanceProfileInfo info = {0};
        r = t->get_gi_profile_info(dev, p, &info);
        id = info.id, slices = info.slice_count, mem_mb = info.memory_size_mb;
    }
    if (r == ENVML_SUCCESS) {
        *ret_id = id, *ret_slices = slices;
        nvml_profile_name(slices, mem_mb, lib_name, name, name_size);
    }
    return r;
}

_Static_assert(NVML_MAX_GI_PROFILES == ENVML_GPU_INSTANCE_PROFILE_COUNT,
               "room for every profile constant");

/* Note a profile NVML offers on g, once. */
static void note_profile(NvmlGpu *g, const char *name) {
    for (size_t i = 0; i < g->n_profiles; i++)
        if (STREQ(g->profiles[i], name))
            return;
    if (g->n_profiles < ARRAY_SIZE(g->profiles))
        snprintf(g->profiles[g->n_profiles++], sizeof(g->profiles[0]), "%s", name);
}

static int query_mig(const NvmlTable *t, EnvmlDevice dev, NvmlGpu *g) {
    if (!t->get_gpu_instances || !t->gpu_instance_get_info ||
        (!t->get_gi_profile_info && !t->get_gi_profile_info_v))
        return 0;
    for (unsigned p = 0; p < ENVML_GPU_INSTANCE_PROFILE_COUNT; p++) {
        unsigned id = 0, slices = 0;
        char name[32];
        NvRet r = nvml_gi_profile(t, dev, p, &id, &slices, name, sizeof(name));
        if (nvml_profile_absent(r))
            continue; /* this card (or this library) has no such profile */
        if (r != ENVML_SUCCESS) {
            gpu_note(g, t, "nvmlDeviceGetGpuInstanceProfileInfo", r);
            continue;
        }
        note_profile(g, name);
        EnvmlGpuInstance gis[8];
        unsigned count = ARRAY_SIZE(gis);
        r = t->get_gpu_instances(dev, id, gis, &count);
        if (r != ENVML_SUCCESS) {
            gpu_note(g, t, "nvmlDeviceGetGpuInstances", r);
            continue;
        }
        if (count > ARRAY_SIZE(gis))
            count = ARRAY_SIZE(gis);
        for (unsigned i = 0; i < count; i++) {
            EnvmlGpuInstanceInfo gi = {0};
            r = t->gpu_instance_get_info(gis[i], &gi);
            if (r != ENVML_SUCCESS) {
                gpu_note(g, t, "nvmlGpuInstanceGetInfo", r);
                continue;
            }
            NvmlMigInstance *nv = realloc(g->mig, (g->n_mig + 1) * sizeof(*nv));
            if (!nv)
                return -ENOMEM;
            g->mig = nv;
            NvmlMigInstance *m = &g->mig[g->n_mig++];
            *m = (NvmlMigInstance){.gpu_instance_id = gi.id,
                                   .profile_id = gi.profile_id,
                                   .start = gi.placement.start,
                                   .size = gi.placement.size};
            snprintf(m->profile, sizeof(m->profile), "%s", name);
        }
    }
    return 0;
}

static int mig_cmp(const void *x, const void *y) {
    const NvmlMigInstance *a = x, *b = y;
    return a->start != b->start ? (a->start < b->start ? -1 : 1)
                                : (a->gpu_instance_id > b->gpu_instance_id) -
                                          (a->gpu_instance_id < b->gpu_instance_id);
}

static int query_processes(const NvmlTable *t, EnvmlDevice dev, NvmlGpu *g) {
    if (!t->get_compute_processes_v3)
        return 0;
    /* The count can grow between the two calls: retry a few times with room to spare. */
    for (int attempt = 0; attempt < 4; attempt++) {
        unsigned count = 0;
        NvRet r = t->get_compute_processes_v3(dev, &count, NULL);
        if (r == ENVML_SUCCESS)
            return 0; /* none */
        if (r != ENVML_ERROR_INSUFFICIENT_SIZE) {
            gpu_note(g, t, "nvmlDeviceGetComputeRunningProcesses_v3", r);
            return 0;
        }
        unsigned cap = count + 8;
        _cleanup_free_ EnvmlProcessInfo *infos = calloc(cap, sizeof(*infos));
        if (!infos)
            return -ENOMEM;
        count = cap;
        r = t->get_compute_processes_v3(dev, &count, infos);
        if (r == ENVML_ERROR_INSUFFICIENT_SIZE)
            continue;
        if (r != ENVML_SUCCESS) {
            gpu_note(g, t, "nvmlDeviceGetComputeRunningProcesses_v3", r);
            return 0;
        }
        if (count > cap)
            count = cap;
        g->pids = calloc(count ? count : 1, sizeof(unsigned));
        if (!g->pids)
            return -ENOMEM;
        for (unsigned i = 0; i < count; i++) {
            g->pids[i] = infos[i].pid;
            for (size_t m = 0; m < g->n_mig; m++)
                if (g->mig[m].gpu_instance_id == infos[i].gpu_instance_id)
                    g->mig[m].busy = true;
        }
        g->n_pids = count;
        return 0;
    }
    return 0;
}

static int query_gpu(const NvmlTable *t, EnvmlDevice dev, NvmlGpu *g) {
    EnvmlPciInfo pci = {0};
    NvRet r = t->get_pci_info_v3 ? t->get_pci_info_v3(dev, &pci) : t->get_pci_info_v2(dev, &pci);
    if (r != ENVML_SUCCESS) {
        gpu_note(g, t, "nvmlDeviceGetPciInfo", r);
        return 0;
    }
    pci.bus_id[sizeof(pci.bus_id) - 1] = '\0';
    if (pci_bdf_from_nvml(pci.bus_id, g->bdf) < 0) {
        char *s = strprintf("NVML reported a malformed PCI bus id '%.32s'.", pci.bus_id);
        free(g->error);
        g->error = s;
        g->bdf[0] = '\0';
        return 0;
    }
    g->vendor_id = (uint16_t)(pci.pci_device_id & 0xffff);
    g->device_id = (uint16_t)(pci.pci_device_id >> 16);

    if (t->get_name) {
        r = t->get_name(dev, g->name, sizeof(g->name));
        if (r != ENVML_SUCCESS) {
            g->name[0] = '\0';
            gpu_note(g, t, "nvmlDeviceGetName", r);
        }
        g->name[sizeof(g->name) - 1] = '\0';
        /* The driver's text goes to a terminal and into JSON: no control byte (an escape
         * sequence would run in the operator's terminal), valid UTF-8 (else JSON drops it). */
        string_mask_control(utf8_make_valid(g->name));
    }
    if (t->get_uuid) {
        r = t->get_uuid(dev, g->uuid, sizeof(g->uuid));
        if (r != ENVML_SUCCESS) {
            g->uuid[0] = '\0';
            gpu_note(g, t, "nvmlDeviceGetUUID", r);
        }
        g->uuid[sizeof(g->uuid) - 1] = '\0';
    }
    if (t->get_memory_info_v2) {
        EnvmlMemoryV2 m = {.version = ENVML_MEMORY_V2_VERSION};
        r = t->get_memory_info_v2(dev, &m);
        if (r == ENVML_SUCCESS)
            g->has_memory = true, g->memory_total = m.total, g->memory_used = m.used;
    } else
        r = ENVML_ERROR_NOT_SUPPORTED;
    if (!g->has_memory && t->get_memory_info) {
        EnvmlMemory m = {0};
        r = t->get_memory_info(dev, &m);
        if (r == ENVML_SUCCESS)
            g->has_memory = true, g->memory_total = m.total, g->memory_used = m.used;
    }
    if (!g->has_memory)
        gpu_note(g, t, "nvmlDeviceGetMemoryInfo", r);

    if (t->get_minor_number) {
        unsigned minor;
        r = t->get_minor_number(dev, &minor);
        if (r == ENVML_SUCCESS && minor < 4096)
            g->minor = (int)minor;
        else if (r != ENVML_SUCCESS && r != ENVML_ERROR_NOT_SUPPORTED)
            gpu_note(g, t, "nvmlDeviceGetMinorNumber", r);
    }
    if (t->get_mig_mode) {
        unsigned cur, pend;
        r = t->get_mig_mode(dev, &cur, &pend);
        if (r == ENVML_SUCCESS) {
            g->mig_current = cur == ENVML_MIG_ENABLE;
            g->mig_pending = pend == ENVML_MIG_ENABLE;
        } else if (r != ENVML_ERROR_NOT_SUPPORTED)
            gpu_note(g, t, "nvmlDeviceGetMigMode", r);
    }
    int k = 0;
    if (g->mig_current == 1)
        k = query_mig(t, dev, g);
    if (g->n_mig > 1) /* by placement: slot order is how people read a MIG layout */
        qsort(g->mig, g->n_mig, sizeof(*g->mig), mig_cmp);
    if (k >= 0)
        k = query_processes(t, dev, g);
    return k;
}

static void nvml_gpu_done(NvmlGpu *g) {
    free(g->mig);
    free(g->pids);
    free(g->error);
}

void nvml_report_free(NvmlReport *r) {
    if (!r)
        return;
    for (size_t i = 0; i < r->n_gpus; i++)
        nvml_gpu_done(&r->gpus[i]);
    free(r->gpus);
    free(r->status);
    free(r);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(NvmlReport *, nvml_report_free);

int nvml_probe(const char *library, NvmlReport **ret, Error *err) {
    if (!library)
        library = NVML_DEFAULT_LIBRARY;
    NvmlTable t;
    int r = nvml_table_open(&t, library, err);
    if (r < 0)
        return r;
    NvRet nr = t.init_v2();
    if (nr != ENVML_SUCCESS) {
        r = error_set(err, -EIO, "NVML data is absent: nvmlInit_v2 failed: %s (NVML error %d)",
                      nvml_strerror(&t, nr), nr);
        dlclose(t.dl);
        return r;
    }
    _cleanup_(nvml_report_freep) NvmlReport *rep = calloc(1, sizeof(*rep));
    unsigned count = 0;
    if (!rep)
        r = -ENOMEM; // NOLINT(bugprone-branch-clone): both allocations fail with the same answer
    else if ((nr = t.get_count_v2(&count)) != ENVML_SUCCESS)
        r = error_set(err, -EIO, "NVML data is absent: nvmlDeviceGetCount_v2 failed: %s",
                      nvml_strerror(&t, nr));
    else if (count > 1024)
        r = error_set(err, -EIO,
                      "NVML data is absent: NVML reported %u GPUs, which cannot be right", count);
    else if (count && !(rep->gpus = calloc(count, sizeof(NvmlGpu))))
        r = -ENOMEM;
    for (unsigned i = 0; r >= 0 && i < count; i++) {
        NvmlGpu *g = &rep->gpus[rep->n_gpus++];
        *g = (NvmlGpu){.minor = -1, .mig_current = -1, .mig_pending = -1};
        EnvmlDevice dev = NULL;
        nr = t.get_handle_by_index_v2(i, &dev);
        if (nr != ENVML_SUCCESS) {
            /* A GPU NVML cannot open (e.g. lost): sysfs still reports it; keep its error. */
            gpu_note(g, &t, "nvmlDeviceGetHandleByIndex_v2", nr);
            continue;
        }
        r = query_gpu(&t, dev, g);
    }
    if (r >= 0 &&
        !(rep->status = strprintf("NVML answered for %u GPU%s", count, count == 1 ? "" : "s")))
        r = -ENOMEM;
    t.shutdown();
    dlclose(t.dl);
    if (r == -ENOMEM)
        return error_set(err, r, "out of memory while reading NVML");
    if (r < 0)
        return r;
    *ret = TAKE_PTR(rep);
    return 0;
}
