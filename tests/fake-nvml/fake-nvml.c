/* fake-nvml.c: a stand-in libnvidia-ml.so.1 for tests, driven by $EINSORA_FAKE_NVML.
 *
 * It exports the NVML functions the agent resolves, with NVML's calling conventions, error
 * codes and formats (8-digit upper-case bus ids, versioned structs checked by their version
 * word), answering from a fixture file (nvml-fixture.h). Built twice: the normal library, and
 * with FAKE_NVML_OLD an "old driver" variant that exports only the unversioned symbols
 * (nvmlInit, nvmlDeviceGetCount, ...), as drivers before the _v2 entry points did. */
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
R nvmlDeviceGetUUID(EnvmlDevice dev, char *uuid, unsigned int length) {
    NEED_INIT();
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
#endif
