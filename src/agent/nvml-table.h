/* nvml-table.h: the NVML entry points the agent resolves with dlopen, shared by the reader
 * (nvml.c) and the MIG instance maker (nvml-mig.c). Internal to the agent. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "agent/nvml-types.h"
#include "util/error.h"

typedef einsora_nvml_return NvRet;

/* The symbols we use, resolved once per probe. Required ones make a probe fail when absent;
 * the others degrade one field each. */
typedef struct NvmlTable {
    void *dl;
    NvRet (*init_v2)(void);
    NvRet (*shutdown)(void);
    const char *(*error_string)(NvRet);
    NvRet (*get_count_v2)(unsigned int *);
    NvRet (*get_handle_by_index_v2)(unsigned int, EnvmlDevice *);
    NvRet (*get_pci_info_v3)(EnvmlDevice, EnvmlPciInfo *);
    NvRet (*get_pci_info_v2)(EnvmlDevice, EnvmlPciInfo *);
    NvRet (*get_name)(EnvmlDevice, char *, unsigned int);
    NvRet (*get_uuid)(EnvmlDevice, char *, unsigned int);
    NvRet (*get_memory_info_v2)(EnvmlDevice, EnvmlMemoryV2 *);
    NvRet (*get_memory_info)(EnvmlDevice, EnvmlMemory *);
    NvRet (*get_mig_mode)(EnvmlDevice, unsigned int *, unsigned int *);
    NvRet (*get_gi_profile_info)(EnvmlDevice, unsigned int, EnvmlGpuInstanceProfileInfo *);
    NvRet (*get_gi_profile_info_v)(EnvmlDevice, unsigned int, EnvmlGpuInstanceProfileInfoV2 *);
    NvRet (*get_gpu_instances)(EnvmlDevice, unsigned int, EnvmlGpuInstance *, unsigned int *);
    NvRet (*gpu_instance_get_info)(EnvmlGpuInstance, EnvmlGpuInstanceInfo *);
    NvRet (*get_compute_processes_v3)(EnvmlDevice, unsigned int *, EnvmlProcessInfo *);
    NvRet (*get_minor_number)(EnvmlDevice, unsigned int *);
    /* Making and removing MIG instances (nvml-mig.c): optional, checked where used. */
    NvRet (*get_handle_by_uuid)(const char *, EnvmlDevice *);
    NvRet (*create_gi_with_placement)(EnvmlDevice, unsigned int, const EnvmlGpuInstancePlacement *,
                                      EnvmlGpuInstance *);
    NvRet (*gi_destroy)(EnvmlGpuInstance);
    NvRet (*gi_get_ci_profile_info)(EnvmlGpuInstance, unsigned int, unsigned int,
                                    EnvmlComputeInstanceProfileInfo *);
    NvRet (*gi_create_ci)(EnvmlGpuInstance, unsigned int, EnvmlComputeInstance *);
    NvRet (*gi_get_cis)(EnvmlGpuInstance, unsigned int, EnvmlComputeInstance *, unsigned int *);
    NvRet (*ci_destroy)(EnvmlComputeInstance);
    NvRet (*get_max_mig_devices)(EnvmlDevice, unsigned int *);
    NvRet (*get_mig_device_by_index)(EnvmlDevice, unsigned int, EnvmlDevice *);
    NvRet (*get_gi_id)(EnvmlDevice, unsigned int *);
} NvmlTable;

/* dlopen library and resolve the table; -ENOENT/-EPROTO with a sentence when it cannot. */
int nvml_table_open(NvmlTable *t, const char *library, Error *err);
/* nvmlInit_v2 on an open table; the sentence names NVML's error. */
int nvml_table_init(NvmlTable *t, const char *library, Error *err);
/* nvmlShutdown and dlclose. */
void nvml_table_close(NvmlTable *t);
const char *nvml_strerror(const NvmlTable *t, NvRet r);
/* GPU instance profile constant p of dev: its id, compute slices and name ("1g.18gb");
 * NVML's answer (a profile the card or library lacks: nvml_profile_absent). */
NvRet nvml_gi_profile(const NvmlTable *t, EnvmlDevice dev, unsigned p, unsigned *ret_id,
                      unsigned *ret_slices, char *name, size_t name_size);
bool nvml_profile_absent(NvRet r);
