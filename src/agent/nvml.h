/* nvml.h: what the agent asks NVML, loaded at run time with dlopen (no NVIDIA header).
 *
 * The library is opened once per probe, its versioned symbols resolved once into a table
 * (nvml.c), every GPU queried, and the library closed again: the agent keeps plain data, never
 * NVML handles. A missing library, a failing nvmlInit, or an old library without the _v2
 * symbols is not an error of discovery: nvml_probe() fails with a sentence saying why NVML
 * data is absent, and the caller reports what sysfs knows. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define NVML_DEFAULT_LIBRARY "libnvidia-ml.so.1"
#define NVML_MAX_GI_PROFILES 17 /* NVML's GPU instance profile constants (nvml-types.h) */

typedef struct NvmlMigInstance {
    unsigned gpu_instance_id, profile_id;
    char profile[32]; /* "1g.18gb" */
    unsigned start, size;
    bool busy; /* a compute process runs in it */
} NvmlMigInstance;

typedef struct NvmlGpu {
    char bdf[13]; /* sysfs form, "0000:3b:00.0" */
    uint16_t vendor_id, device_id;
    char name[96];
    char uuid[96];
    bool has_memory;
    uint64_t memory_total, memory_used;
    int minor;                    /* -1 when NVML does not say */
    int mig_current, mig_pending; /* -1 when not supported */
    NvmlMigInstance *mig;
    size_t n_mig;
    /* The GPU instance profiles NVML offers on it (MIG on only), by name, each once, in
     * NVML's order: "1g.18gb", "1g.18gb+me", ... (R2c) */
    char profiles[NVML_MAX_GI_PROFILES][32];
    size_t n_profiles;
    unsigned *pids;
    size_t n_pids;
    char *error; /* sentences for queries that failed on this GPU; NULL if none */
} NvmlGpu;

typedef struct NvmlReport {
    NvmlGpu *gpus;
    size_t n_gpus;
    char *status; /* "NVML answered for 8 GPUs" */
} NvmlReport;

/* Probe NVML from library (NULL: NVML_DEFAULT_LIBRARY). On failure, err says why NVML data is
 * absent (library not found; too old; nvmlInit failed with NVML's own error string). */
int nvml_probe(const char *library, NvmlReport **ret, Error *err);
void nvml_report_free(NvmlReport *r);

/* Profile name "<slices>g.<GB>gb" from NVML's profile fields when the library has no name
 * for it (older libraries without nvmlDeviceGetGpuInstanceProfileInfoV): memory rounded up
 * to whole GB the way nvidia-smi names profiles. Strips a leading "MIG " from named ones. */
void nvml_profile_name(unsigned slice_count, uint64_t memory_mb, const char *lib_name, char *buf,
                       size_t size);
