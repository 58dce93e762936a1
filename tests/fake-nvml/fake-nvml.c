/* fake-nvml.c: a stand-in libnvidia-ml.so.1 for tests, driven by $EINSORA_FAKE_NVML.
 *
 * It exports the NVML functions the agent resolves, with NVML's calling conventions, error
 * codes and formats (8-digit upper-case bus ids, versioned structs checked by their version
 * word), answering from a fixture file (nvml-fixture.h). Built twice: the normal library, and
 * with FAKE_NVML_OLD an "old driver" variant that exports only the unversioned symbols
 * (nvmlInit, nvmlDeviceGetCount, ...), as drivers before the _v2 entry points did. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/nvml-types.h"
#include "nvml-fixture.h"

typedef einsora_nvml_return R;

#define ENVML_ERROR_ARGUMENT_VERSION_MISMATCH 25

static FakeNvml fake;
static int initialised;

#ifdef FAKE_NVML_OLD
#define SYM_INIT nvmlInit
#define SYM_COUNT nvmlDeviceGetCount
#define SYM_HANDLE nvmlDeviceGetHandleByIndex
#define SYM_PCI nvmlDeviceGetPciInfo
#else
#define SYM_INIT nvmlInit_v2
#define SYM_COUNT nvmlDeviceGetCount_v2
#define SYM_HANDLE nvmlDeviceGetHandleByIndex_v2
#define SYM_PCI nvmlDeviceGetPciInfo_v3
#endif

/* Exported entry points (declared here so every definition has a prototype). */
R SYM_INIT(void);
R nvmlShutdown(void);
const char *nvmlErrorString(R r);
R SYM_COUNT(unsigned int *count);
R SYM_HANDLE(unsigned int index, EnvmlDevice *dev);
R SYM_PCI(EnvmlDevice dev, EnvmlPciInfo *pci);
R nvmlDeviceGetName(EnvmlDevice dev, char *name, unsigned int length);
#ifndef FAKE_NVML_OLD
R nvmlDeviceGetUUID(EnvmlDevice dev, char *uuid, unsigned int length);
R nvmlDeviceGetMemoryInfo_v2(EnvmlDevice dev, EnvmlMemoryV2 *mem);
R nvmlDeviceGetMemoryInfo(EnvmlDevice dev, EnvmlMemory *mem);
R nvmlDeviceGetMinorNumber(EnvmlDevice dev, unsigned int *minor);
R nvmlDeviceGetMigMode(EnvmlDevice dev, unsigned int *current, unsigned int *pending);
R nvmlDeviceGetGpuInstanceProfileInfo(EnvmlDevice dev, unsigned int profile,
                                      EnvmlGpuInstanceProfileInfo *info);
R nvmlDeviceGetGpuInstanceProfileInfoV(EnvmlDevice dev, unsigned int profile,
                                       EnvmlGpuInstanceProfileInfoV2 *info);
R nvmlDeviceGetGpuInstances(EnvmlDevice dev, unsigned int profile_id, EnvmlGpuInstance *out,
                            unsigned int *count);
R nvmlGpuInstanceGetInfo(EnvmlGpuInstance gi, EnvmlGpuInstanceInfo *info);
R nvmlDeviceGetComputeRunningProcesses_v3(EnvmlDevice dev, unsigned int *count,
                                          EnvmlProcessInfo *infos);
R nvmlDeviceGetHandleByUUID(const char *uuid, EnvmlDevice *dev);
R nvmlDeviceCreateGpuInstanceWithPlacement(EnvmlDevice dev, unsigned int profile_id,
                                           const EnvmlGpuInstancePlacement *placement,
                                           EnvmlGpuInstance *gi);
R nvmlGpuInstanceDestroy(EnvmlGpuInstance gi);
R nvmlGpuInstanceGetComputeInstanceProfileInfo(EnvmlGpuInstance gi, unsigned int profile,
                                               unsigned int eng_profile,
                                               EnvmlComputeInstanceProfileInfo *info);
R nvmlGpuInstanceCreateComputeInstance(EnvmlGpuInstance gi, unsigned int profile_id,
                                       EnvmlComputeInstance *ci);
R nvmlGpuInstanceGetComputeInstances(EnvmlGpuInstance gi, unsigned int profile_id,
                                     EnvmlComputeInstance *cis, unsigned int *count);
R nvmlComputeInstanceDestroy(EnvmlComputeInstance ci);
R nvmlDeviceGetMaxMigDeviceCount(EnvmlDevice dev, unsigned int *count);
R nvmlDeviceGetMigDeviceHandleByIndex(EnvmlDevice dev, unsigned int index, EnvmlDevice *mig);
R nvmlDeviceGetGpuInstanceId(EnvmlDevice dev, unsigned int *id);
#endif

#define GPU(dev) ((FakeGpu *)(void *)(dev))
#define FAIL(gpu, fn)                                                                              \
    do {                                                                                           \
        int code_ = fake_nvml_fail_code(&fake, (gpu), (fn));                                       \
        if (code_)                                                                                 \
            return code_;                                                                          \
    } while (0)
#define NEED_INIT()                                                                                \
    do {                                                                                           \
        if (!initialised)                                                                          \
            return ENVML_ERROR_UNINITIALIZED;                                                      \
    } while (0)

static int valid_gpu(EnvmlDevice dev) {
    for (size_t i = 0; i < fake.n_gpus; i++)
        if (GPU(dev) == &fake.gpus[i])
            return 1;
    return 0;
}

/* MIG instances made or removed outlive nvmlShutdown and the library's unloading, as on a
 * real GPU: with $EINSORA_FAKE_NVML_STATE set, each changed GPU's instances are written there
 * ("gpu BUSID" then "instance ID PROFILE_ID START SIZE CI" lines) and laid over the fixture's
 * at every init. */
static __attribute__((unused)) void save_made_instances(const FakeGpu *changed) {
    const char *path = getenv("EINSORA_FAKE_NVML_STATE");
    if (!path)
        return;
    static char old[1 << 14];
    size_t n = 0;
    FILE *f = fopen(path, "re");
    if (f) {
        n = fread(old, 1, sizeof(old) - 1, f);
        fclose(f);
    }
    old[n] = 0;
    if (!(f = fopen(path, "we")))
        return;
    /* The other GPUs' blocks as they were, then this GPU's. */
    char tag[64];
    snprintf(tag, sizeof(tag), "gpu %s\n", changed->bus_id);
    bool skip = false;
    for (char *l = old; *l;) {
        char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) + 1 : strlen(l);
        if (!strncmp(l, "gpu ", 4))
            skip = !strncmp(l, tag, strlen(tag));
        if (!skip)
            fwrite(l, 1, len, f);
        l += len;
    }
    fputs(tag, f);
    for (size_t k = 0; k < changed->n_instances; k++) {
        const FakeInstance *in = &changed->instances[k];
        fprintf(f, "instance %u %u %u %u %d\n", in->id, in->profile_id, in->start, in->size,
                in->ci);
    }
    fclose(f);
}

static void restore_made_instances(void) {
    const char *path = getenv("EINSORA_FAKE_NVML_STATE");
    FILE *f = path ? fopen(path, "re") : NULL;
    if (!f)
        return;
    char line[256];
    FakeGpu *g = NULL;
    while (fgets(line, sizeof(line), f)) {
        char bus[64];
        FakeInstance in = {0};
        if (sscanf(line, "gpu %63s", bus) == 1) {
            g = NULL;
            for (size_t i = 0; i < fake.n_gpus; i++)
                if (!strcmp(fake.gpus[i].bus_id, bus)) {
                    g = &fake.gpus[i];
                    g->n_instances = 0;
                }
        } else if (g && g->n_instances < FAKE_NVML_MAX_INSTANCES &&
                   sscanf(line, "instance %u %u %u %u %d", &in.id, &in.profile_id, &in.start,
                          &in.size, &in.ci) == 5)
            g->instances[g->n_instances++] = in;
    }
    fclose(f);
}

R SYM_INIT(void) {
    const char *path = getenv("EINSORA_FAKE_NVML");
    if (!path)
        return ENVML_ERROR_DRIVER_NOT_LOADED;
    FILE *f = fopen(path, "re");
    if (!f)
        return ENVML_ERROR_DRIVER_NOT_LOADED;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    char msg[256];
    if (fake_nvml_parse(buf, n, &fake, msg, sizeof(msg)) < 0) {
        fprintf(stderr, "fake-nvml: %s: %s\n", path, msg);
        return ENVML_ERROR_UNKNOWN;
    }
    if (fake.init_code)
        return fake.init_code;
    restore_made_instances();
    initialised = 1;
    return ENVML_SUCCESS;
}

R nvmlShutdown(void) {
    NEED_INIT();
    initialised = 0;
    return ENVML_SUCCESS;
}

const char *nvmlErrorString(R r) {
    switch (r) {
    case 0:
        return "Success";
    case 1:
        return "Uninitialized";
    case 2:
        return "Invalid Argument";
    case 3:
        return "Not Supported";
    case 4:
        return "Insufficient Permissions";
    case 6:
        return "Not Found";
    case 7:
        return "Insufficient Size";
    case 9:
        return "Driver Not Loaded";
    case 15:
        return "GPU is lost";
    case 18:
        return "RM has detected an NVML/RM version mismatch.";
    case ENVML_ERROR_ARGUMENT_VERSION_MISMATCH:
        return "Argument version mismatch";
    default:
        return "Unknown Error";
    }
}

R SYM_COUNT(unsigned int *count) {
    NEED_INIT();
    FAIL(NULL, "nvmlDeviceGetCount_v2");
    if (!count)
        return ENVML_ERROR_INVALID_ARGUMENT;
    *count = (unsigned)fake.n_gpus;
    return ENVML_SUCCESS;
}

R SYM_HANDLE(unsigned int index, EnvmlDevice *dev) {
    NEED_INIT();
    if (!dev || index >= fake.n_gpus)
        return ENVML_ERROR_INVALID_ARGUMENT;
    FAIL(&fake.gpus[index], "nvmlDeviceGetHandleByIndex_v2");
    *dev = (EnvmlDevice)(void *)&fake.gpus[index];
    return ENVML_SUCCESS;
}

R SYM_PCI(EnvmlDevice dev, EnvmlPciInfo *pci) {
    NEED_INIT();
    if (!valid_gpu(dev) || !pci)
        return ENVML_ERROR_INVALID_ARGUMENT;
    FAIL(GPU(dev), "nvmlDeviceGetPciInfo_v3");
    FakeGpu *g = GPU(dev);
    memset(pci, 0, sizeof(*pci));
    snprintf(pci->bus_id, sizeof(pci->bus_id), "%s", g->bus_id);
    /* the legacy field holds the short form "0000:3B:00.0" */
    size_t len = strlen(g->bus_id);
    snprintf(pci->bus_id_legacy, sizeof(pci->bus_id_legacy), "%.15s",
             len > 12 ? g->bus_id + len - 12 : g->bus_id);
    unsigned dom = 0, bus = 0, devn = 0, fn = 0;
    if (sscanf(g->bus_id, "%x:%x:%x.%x", &dom, &bus, &devn, &fn) == 4)
        pci->domain = dom, pci->bus = bus, pci->device = devn;
    pci->pci_device_id = g->pci_id;
    return ENVML_SUCCESS;
}

R nvmlDeviceGetName(EnvmlDevice dev, char *name, unsigned int length) {
    NEED_INIT();
    if (!valid_gpu(dev) || !name)
        return ENVML_ERROR_INVALID_ARGUMENT;
    FAIL(GPU(dev), "nvmlDeviceGetName");
    if (strlen(GPU(dev)->name) + 1 > length)
        return ENVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(name, GPU(dev)->name);
    return ENVML_SUCCESS;
}

#ifndef FAKE_NVML_OLD
static FakeInstance *mig_device(EnvmlDevice dev);

R nvmlDeviceGetUUID(EnvmlDevice dev, char *uuid, unsigned int length) {
    NEED_INIT();
    const FakeInstance *mig = uuid ? mig_device(dev) : NULL;
    if (mig) {
        if (strlen(mig->uuid) + 1 > length)
            return ENVML_ERROR_INSUFFICIENT_SIZE;
        strcpy(uuid, mig->uuid);
        return ENVML_SUCCESS;
    }
    if (!valid_gpu(dev) || !uuid)
        return ENVML_ERROR_INVALID_ARGUMENT;
    FAIL(GPU(dev), "nvmlDeviceGetUUID");
    if (strlen(GPU(dev)->uuid) + 1 > length)
        return ENVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(uuid, GPU(dev)->uuid);
    return ENVML_SUCCESS;
}

R nvmlDeviceGetMemoryInfo_v2(EnvmlDevice dev, EnvmlMemoryV2 *mem) {
    NEED_INIT();
    if (!valid_gpu(dev) || !mem)
        return ENVML_ERROR_INVALID_ARGUMENT;
    if (mem->version != ENVML_MEMORY_V2_VERSION)
        return ENVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    FAIL(GPU(dev), "nvmlDeviceGetMemoryInfo_v2");
    FakeGpu *g = GPU(dev);
    mem->total = g->mem_total;
    mem->used = g->mem_used;
    mem->reserved = 0;
    mem->free = g->mem_total - g->mem_used;
    return ENVML_SUCCESS;
}

R nvmlDeviceGetMemoryInfo(EnvmlDevice dev, EnvmlMemory *mem) {
    NEED_INIT();
    if (!valid_gpu(dev) || !mem)
        return ENVML_ERROR_INVALID_ARGUMENT;
    FAIL(GPU(dev), "nvmlDeviceGetMemoryInfo");
    mem->total = GPU(dev)->mem_total;
    mem->used = GPU(dev)->mem_used;
    mem->free = mem->total - mem->used;
    return ENVML_SUCCESS;
}

R nvmlDeviceGetMinorNumber(EnvmlDevice dev, unsigned int *minor) {
    NEED_INIT();
    if (!valid_gpu(dev) || !minor)
        return ENVML_ERROR_INVALID_ARGUMENT;
    FAIL(GPU(dev), "nvmlDeviceGetMinorNumber");
    if (GPU(dev)->minor < 0)
        return ENVML_ERROR_NOT_SUPPORTED;
    *minor = (unsigned)GPU(dev)->minor;
    return ENVML_SUCCESS;
}

R nvmlDeviceGetMigMode(EnvmlDevice dev, unsigned int *current, unsigned int *pending) {
    NEED_INIT();
    if (!valid_gpu(dev) || !current || !pending)
        return ENVML_ERROR_INVALID_ARGUMENT;
    FAIL(GPU(dev), "nvmlDeviceGetMigMode");
    if (GPU(dev)->mig_current < 0)
        return ENVML_ERROR_NOT_SUPPORTED;
    *current = (unsigned)GPU(dev)->mig_current;
    *pending = (unsigned)GPU(dev)->mig_pending;
    return ENVML_SUCCESS;
}

static const FakeProfile *find_profile(const FakeGpu *g, unsigned index) {
    for (size_t i = 0; i < g->n_profiles; i++)
        if (g->profiles[i].index == index)
            return &g->profiles[i];
    return NULL;
}

R nvmlDeviceGetGpuInstanceProfileInfo(EnvmlDevice dev, unsigned int profile,
                                      EnvmlGpuInstanceProfileInfo *info) {
    NEED_INIT();
    if (!valid_gpu(dev) || !info)
        return ENVML_ERROR_INVALID_ARGUMENT;
    FAIL(GPU(dev), "nvmlDeviceGetGpuInstanceProfileInfo");
    const FakeProfile *p = GPU(dev)->mig_current < 0 ? NULL : find_profile(GPU(dev), profile);
    if (!p)
        return ENVML_ERROR_NOT_SUPPORTED;
    *info = (EnvmlGpuInstanceProfileInfo){.id = p->id,
                                          .slice_count = p->slices,
                                          .instance_count = p->count,
                                          .memory_size_mb = p->memory_mb};
    return ENVML_SUCCESS;
}

R nvmlDeviceGetGpuInstanceProfileInfoV(EnvmlDevice dev, unsigned int profile,
                                       EnvmlGpuInstanceProfileInfoV2 *info) {
    NEED_INIT();
    if (!valid_gpu(dev) || !info)
        return ENVML_ERROR_INVALID_ARGUMENT;
    if (info->version != ENVML_GPU_INSTANCE_PROFILE_INFO_V2_VERSION)
        return ENVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    FAIL(GPU(dev), "nvmlDeviceGetGpuInstanceProfileInfoV");
    const FakeProfile *p = GPU(dev)->mig_current < 0 ? NULL : find_profile(GPU(dev), profile);
    if (!p)
        return ENVML_ERROR_NOT_SUPPORTED;
    unsigned version = info->version;
    *info = (EnvmlGpuInstanceProfileInfoV2){.version = version,
                                            .id = p->id,
                                            .slice_count = p->slices,
                                            .instance_count = p->count,
                                            .memory_size_mb = p->memory_mb};
    snprintf(info->name, sizeof(info->name), "%s", p->name);
    return ENVML_SUCCESS;
}

R nvmlDeviceGetGpuInstances(EnvmlDevice dev, unsigned int profile_id, EnvmlGpuInstance *out,
                            unsigned int *count) {
    NEED_INIT();
    if (!valid_gpu(dev) || !out || !count)
        return ENVML_ERROR_INVALID_ARGUMENT;
    FAIL(GPU(dev), "nvmlDeviceGetGpuInstances");
    FakeGpu *g = GPU(dev);
    if (g->mig_current != 1)
        return ENVML_ERROR_NOT_SUPPORTED;
    unsigned n = 0;
    for (size_t i = 0; i < g->n_instances; i++)
        if (g->instances[i].profile_id == profile_id) {
            g->instances[i].gpu = g;
            out[n++] = (EnvmlGpuInstance)(void *)&g->instances[i];
        }
    *count = n;
    return ENVML_SUCCESS;
}

R nvmlGpuInstanceGetInfo(EnvmlGpuInstance gi, EnvmlGpuInstanceInfo *info) {
    NEED_INIT();
    if (!gi || !info)
        return ENVML_ERROR_INVALID_ARGUMENT;
    const FakeInstance *in = (const FakeInstance *)(void *)gi;
    FAIL((FakeGpu *)in->gpu, "nvmlGpuInstanceGetInfo");
    *info = (EnvmlGpuInstanceInfo){.device = (EnvmlDevice)in->gpu,
                                   .id = in->id,
                                   .profile_id = in->profile_id,
                                   .placement = {in->start, in->size}};
    return ENVML_SUCCESS;
}

R nvmlDeviceGetComputeRunningProcesses_v3(EnvmlDevice dev, unsigned int *count,
                                          EnvmlProcessInfo *infos) {
    NEED_INIT();
    if (!valid_gpu(dev) || !count)
        return ENVML_ERROR_INVALID_ARGUMENT;
    FAIL(GPU(dev), "nvmlDeviceGetComputeRunningProcesses_v3");
    FakeGpu *g = GPU(dev);
    if (*count < g->n_processes || (!infos && g->n_processes)) {
        *count = (unsigned)g->n_processes;
        return ENVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (size_t i = 0; i < g->n_processes; i++)
        infos[i] = (EnvmlProcessInfo){g->processes[i].pid, g->processes[i].used, g->processes[i].gi,
                                      g->processes[i].ci};
    *count = (unsigned)g->n_processes;
    return ENVML_SUCCESS;
}

/* ---- making MIG instances ---- */

#define ENVML_ERROR_IN_USE_ 19
#define ENVML_ERROR_INSUFFICIENT_RESOURCES_ 23

R nvmlDeviceGetHandleByUUID(const char *uuid, EnvmlDevice *dev) {
    NEED_INIT();
    if (!uuid || !dev)
        return ENVML_ERROR_INVALID_ARGUMENT;
    for (size_t i = 0; i < fake.n_gpus; i++)
        if (!strcmp(fake.gpus[i].uuid, uuid)) {
            *dev = (EnvmlDevice)(void *)&fake.gpus[i];
            return ENVML_SUCCESS;
        }
    return ENVML_ERROR_NOT_FOUND;
}

static FakeInstance *instance_of(EnvmlGpuInstance gi, FakeGpu **ret_gpu) {
    for (size_t i = 0; i < fake.n_gpus; i++)
        for (size_t k = 0; k < fake.gpus[i].n_instances; k++)
            if ((void *)gi == (void *)&fake.gpus[i].instances[k]) {
                *ret_gpu = &fake.gpus[i];
                return &fake.gpus[i].instances[k];
            }
    return NULL;
}

static const FakeProfile *profile_by_id(const FakeGpu *g, unsigned id) {
    for (size_t i = 0; i < g->n_profiles; i++)
        if (g->profiles[i].id == id)
            return &g->profiles[i];
    return NULL;
}

R nvmlDeviceCreateGpuInstanceWithPlacement(EnvmlDevice dev, unsigned int profile_id,
                                           const EnvmlGpuInstancePlacement *placement,
                                           EnvmlGpuInstance *gi) {
    NEED_INIT();
    if (!valid_gpu(dev) || !placement || !gi)
        return ENVML_ERROR_INVALID_ARGUMENT;
    FAIL(GPU(dev), "nvmlDeviceCreateGpuInstanceWithPlacement");
    FakeGpu *g = GPU(dev);
    if (g->mig_current != 1)
        return ENVML_ERROR_NOT_SUPPORTED;
    if (!profile_by_id(g, profile_id) || placement->start > 7 || !placement->size ||
        placement->size > 8 - placement->start)
        return ENVML_ERROR_INVALID_ARGUMENT;
    unsigned want = ((1u << placement->size) - 1u) << placement->start, next_id = 1;
    for (size_t k = 0; k < g->n_instances; k++) {
        const FakeInstance *in = &g->instances[k];
        if ((((1u << in->size) - 1u) << in->start) & want)
            return ENVML_ERROR_INSUFFICIENT_RESOURCES_;
        if (in->id >= next_id)
            next_id = in->id + 1;
    }
    if (g->n_instances == FAKE_NVML_MAX_INSTANCES)
        return ENVML_ERROR_INSUFFICIENT_RESOURCES_;
    FakeInstance *in = &g->instances[g->n_instances++];
    *in = (FakeInstance){next_id, profile_id, placement->start, placement->size, g, 0, ""};
    *gi = (EnvmlGpuInstance)(void *)in;
    save_made_instances(g);
    return ENVML_SUCCESS;
}

R nvmlGpuInstanceDestroy(EnvmlGpuInstance gi) {
    NEED_INIT();
    FakeGpu *g = NULL;
    FakeInstance *in = instance_of(gi, &g);
    if (!in)
        return ENVML_ERROR_INVALID_ARGUMENT;
    FAIL(g, "nvmlGpuInstanceDestroy");
    for (size_t i = 0; i < g->n_processes; i++)
        if (g->processes[i].gi == in->id)
            return ENVML_ERROR_IN_USE_;
    if (in->ci)
        return ENVML_ERROR_IN_USE_; /* its compute instances go first */
    size_t k = (size_t)(in - g->instances);
    memmove(&g->instances[k], &g->instances[k + 1],
            (g->n_instances - k - 1) * sizeof(g->instances[0]));
    g->n_instances--;
    save_made_instances(g);
    return ENVML_SUCCESS;
}

R nvmlGpuInstanceGetComputeInstanceProfileInfo(EnvmlGpuInstance gi, unsigned int profile,
                                               unsigned int eng_profile,
                                               EnvmlComputeInstanceProfileInfo *info) {
    NEED_INIT();
    FakeGpu *g = NULL;
    FakeInstance *in = instance_of(gi, &g);
    if (!in || !info || eng_profile != 0)
        return ENVML_ERROR_INVALID_ARGUMENT;
    const FakeProfile *p = profile_by_id(g, in->profile_id);
    static const unsigned slices_of[] = {1, 2, 3, 4, 7, 8, 6};
    if (profile >= sizeof(slices_of) / sizeof(slices_of[0]) || !p || slices_of[profile] > p->slices)
        return ENVML_ERROR_NOT_SUPPORTED;
    *info = (EnvmlComputeInstanceProfileInfo){.id = profile,
                                              .slice_count = slices_of[profile],
                                              .instance_count = p->slices / slices_of[profile]};
    return ENVML_SUCCESS;
}

R nvmlGpuInstanceCreateComputeInstance(EnvmlGpuInstance gi, unsigned int profile_id,
                                       EnvmlComputeInstance *ci) {
    NEED_INIT();
    FakeGpu *g = NULL;
    FakeInstance *in = instance_of(gi, &g);
    if (!in || !ci || profile_id > 6)
        return ENVML_ERROR_INVALID_ARGUMENT;
    FAIL(g, "nvmlGpuInstanceCreateComputeInstance");
    if (in->ci)
        return ENVML_ERROR_INSUFFICIENT_RESOURCES_;
    in->ci = 1;
    *ci = (EnvmlComputeInstance)(void *)&in->ci;
    save_made_instances(g);
    return ENVML_SUCCESS;
}

R nvmlGpuInstanceGetComputeInstances(EnvmlGpuInstance gi, unsigned int profile_id,
                                     EnvmlComputeInstance *cis, unsigned int *count) {
    NEED_INIT();
    FakeGpu *g = NULL;
    FakeInstance *in = instance_of(gi, &g);
    if (!in || !cis || !count)
        return ENVML_ERROR_INVALID_ARGUMENT;
    (void)profile_id; /* the fake's one compute instance spans its GPU instance */
    *count = 0;
    if (in->ci)
        cis[(*count)++] = (EnvmlComputeInstance)(void *)&in->ci;
    return ENVML_SUCCESS;
}

R nvmlComputeInstanceDestroy(EnvmlComputeInstance ci) {
    NEED_INIT();
    for (size_t i = 0; i < fake.n_gpus; i++)
        for (size_t k = 0; k < fake.gpus[i].n_instances; k++)
            if ((void *)ci == (void *)&fake.gpus[i].instances[k].ci) {
                FakeInstance *in = &fake.gpus[i].instances[k];
                for (size_t p = 0; p < fake.gpus[i].n_processes; p++)
                    if (fake.gpus[i].processes[p].gi == in->id)
                        return ENVML_ERROR_IN_USE_;
                in->ci = 0;
                save_made_instances(&fake.gpus[i]);
                return ENVML_SUCCESS;
            }
    return ENVML_ERROR_INVALID_ARGUMENT;
}

R nvmlDeviceGetMaxMigDeviceCount(EnvmlDevice dev, unsigned int *count) {
    NEED_INIT();
    if (!valid_gpu(dev) || !count)
        return ENVML_ERROR_INVALID_ARGUMENT;
    *count = GPU(dev)->mig_current == 1 ? 7 : 0;
    return ENVML_SUCCESS;
}

/* A MIG device handle points at its instance's uuid field. */
static FakeInstance *mig_device(EnvmlDevice dev) {
    for (size_t i = 0; i < fake.n_gpus; i++)
        for (size_t k = 0; k < fake.gpus[i].n_instances; k++)
            if ((void *)dev == (void *)fake.gpus[i].instances[k].uuid)
                return &fake.gpus[i].instances[k];
    return NULL;
}

R nvmlDeviceGetMigDeviceHandleByIndex(EnvmlDevice dev, unsigned int index, EnvmlDevice *mig) {
    NEED_INIT();
    if (!valid_gpu(dev) || !mig)
        return ENVML_ERROR_INVALID_ARGUMENT;
    FakeGpu *g = GPU(dev);
    unsigned seen = 0;
    for (size_t k = 0; k < g->n_instances; k++) {
        FakeInstance *in = &g->instances[k];
        if (!in->ci || seen++ != index)
            continue;
        /* "MIG-" and the GPU's UUID tail with the instance id: stable for one GPU instance */
        snprintf(in->uuid, sizeof(in->uuid), "MIG-%.40s-gi%u",
                 strncmp(g->uuid, "GPU-", 4) ? g->uuid : g->uuid + 4, in->id);
        *mig = (EnvmlDevice)(void *)in->uuid;
        return ENVML_SUCCESS;
    }
    return ENVML_ERROR_NOT_FOUND;
}

R nvmlDeviceGetGpuInstanceId(EnvmlDevice dev, unsigned int *id) {
    NEED_INIT();
    FakeInstance *in = mig_device(dev);
    if (!in || !id)
        return ENVML_ERROR_INVALID_ARGUMENT;
    *id = in->id;
    return ENVML_SUCCESS;
}
#endif
