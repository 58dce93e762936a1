/* nvml-types.h: the few NVML types and prototypes the agent uses, declared from NVIDIA's
 * public NVML API reference (no NVIDIA header is vendored). Shared by the loader (nvml.c)
 * and the fake library the tests build (tests/fake-nvml/), so both agree on every layout.
 *
 * Layouts checked against the NVML API reference: nvmlPciInfo_t (the v2/v3 layout with the
 * 16-byte legacy bus id first and the 32-byte bus id last), nvmlMemory_t, nvmlMemory_v2_t
 * (version word first), nvmlGpuInstanceProfileInfo_t and its _v2 (version first, 96-byte name
 * last), nvmlGpuInstancePlacement_t, nvmlGpuInstanceInfo_t, nvmlProcessInfo_t (pid, used
 * memory, GPU and compute instance ids). */
#pragma once

#include <stdint.h>

typedef int einsora_nvml_return; /* nvmlReturn_t: an enum, int-sized */

enum {
    ENVML_SUCCESS = 0,
    ENVML_ERROR_UNINITIALIZED = 1,
    ENVML_ERROR_INVALID_ARGUMENT = 2,
    ENVML_ERROR_NOT_SUPPORTED = 3,
    ENVML_ERROR_NO_PERMISSION = 4,
    ENVML_ERROR_NOT_FOUND = 6,
    ENVML_ERROR_INSUFFICIENT_SIZE = 7,
    ENVML_ERROR_DRIVER_NOT_LOADED = 9,
    ENVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    ENVML_ERROR_GPU_IS_LOST = 15,
    ENVML_ERROR_IN_USE = 19,
    ENVML_ERROR_INSUFFICIENT_RESOURCES = 23,
    ENVML_ERROR_UNKNOWN = 999,
};

#define ENVML_MIG_DISABLE 0
#define ENVML_MIG_ENABLE 1
/* GPU instance profile constants 0 (1 slice) ... 9 (1 slice rev2), 10-16 (the _GFX, _NO_ME and
 * _ALL_ME variants of recent drivers): NVML_GPU_INSTANCE_PROFILE_COUNT is 17 there. Older
 * libraries answer Invalid Argument for the constants they do not know, which we skip. */
#define ENVML_GPU_INSTANCE_PROFILE_COUNT 17
#define ENVML_DEVICE_NAME_V2_BUFFER_SIZE 96

typedef struct einsora_nvml_device *EnvmlDevice;                    /* nvmlDevice_t */
typedef struct einsora_nvml_gpu_instance *EnvmlGpuInstance;         /* nvmlGpuInstance_t */
typedef struct einsora_nvml_compute_instance *EnvmlComputeInstance; /* nvmlComputeInstance_t */

typedef struct EnvmlPciInfo {
    char bus_id_legacy[16];
    unsigned int domain, bus, device;
    unsigned int pci_device_id; /* device id << 16 | vendor id */
    unsigned int pci_subsystem_id;
    char bus_id[32]; /* "00000000:3B:00.0" */
} EnvmlPciInfo;

typedef struct EnvmlMemory {
    unsigned long long total, free, used;
} EnvmlMemory;

typedef struct EnvmlMemoryV2 {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} EnvmlMemoryV2;
/* NVML_STRUCT_VERSION(Memory, 2): the struct size with the version in the top byte. */
#define ENVML_MEMORY_V2_VERSION ((unsigned int)(sizeof(EnvmlMemoryV2) | (2u << 24)))

typedef struct EnvmlGpuInstanceProfileInfo {
    unsigned int id, is_p2p_supported, slice_count, instance_count, multiprocessor_count;
    unsigned int copy_engine_count, decoder_count, encoder_count, jpeg_count, ofa_count;
    unsigned long long memory_size_mb;
} EnvmlGpuInstanceProfileInfo;

typedef struct EnvmlGpuInstanceProfileInfoV2 {
    unsigned int version;
    unsigned int id, is_p2p_supported, slice_count, instance_count, multiprocessor_count;
    unsigned int copy_engine_count, decoder_count, encoder_count, jpeg_count, ofa_count;
    unsigned long long memory_size_mb;
    char name[ENVML_DEVICE_NAME_V2_BUFFER_SIZE];
} EnvmlGpuInstanceProfileInfoV2;
#define ENVML_GPU_INSTANCE_PROFILE_INFO_V2_VERSION                                                 \
    ((unsigned int)(sizeof(EnvmlGpuInstanceProfileInfoV2) | (2u << 24)))

typedef struct EnvmlGpuInstancePlacement {
    unsigned int start, size;
} EnvmlGpuInstancePlacement;

typedef struct EnvmlGpuInstanceInfo {
    EnvmlDevice device;
    unsigned int id, profile_id;
    EnvmlGpuInstancePlacement placement;
} EnvmlGpuInstanceInfo;

typedef struct EnvmlProcessInfo {
    unsigned int pid;
    unsigned long long used_gpu_memory;
    unsigned int gpu_instance_id, compute_instance_id;
} EnvmlProcessInfo;

/* nvmlComputeInstanceProfileInfo_t (v1). The compute instance profile constants are 0 (1 slice),
 * 1 (2), 2 (3), 3 (4), 4 (7), 5 (8), 6 (6); engine profile 0 is "shared". */
typedef struct EnvmlComputeInstanceProfileInfo {
    unsigned int id, slice_count, instance_count, multiprocessor_count;
    unsigned int shared_copy_engine_count, shared_decoder_count, shared_encoder_count;
    unsigned int shared_jpeg_count, shared_ofa_count;
} EnvmlComputeInstanceProfileInfo;
