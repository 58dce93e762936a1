/* nvml-fixture.h: the fixture file that drives the fake NVML library (tests only).
 *
 * A line format, one statement per line, '#' comments:
 *   init CODE                      nvmlInit_v2 returns CODE (0 = success; 9 = driver not loaded)
 *   fail FUNCTION CODE             FUNCTION returns CODE; before any gpu line: for every GPU
 *   gpu BUSID PCIID                a GPU: NVML's bus id ("00000000:3B:00.0") and the combined
 *                                  device/vendor id ("0x233010DE")
 *   name TEXT | uuid TEXT          the GPU's name and UUID
 *   memory TOTAL USED              bytes
 *   minor N                        the /dev/nvidiaN minor number
 *   mig CURRENT PENDING            0 or 1 each; a GPU without a mig line is not MIG capable
 *   profile INDEX ID SLICES COUNT MEMORY_MB NAME...
 *                                  a GPU instance profile: INDEX is NVML's profile constant
 *                                  (0 = 1 slice, 7 = 1 slice rev1, ...), ID its profile id
 *   instance GI_ID PROFILE_ID START SIZE
 *   process PID USED_BYTES GI_ID CI_ID
 * Statements after a gpu line belong to that GPU. Malformed lines are errors (line number).
 * MIG instances the agent makes or removes are kept in $EINSORA_FAKE_NVML_STATE when set (the
 * fixture file is never written): a GPU's state outlives the library, as a real one does. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define FAKE_NVML_MAX_GPUS 16
#define FAKE_NVML_MAX_PROFILES 17
#define FAKE_NVML_MAX_INSTANCES 8
#define FAKE_NVML_MAX_PROCESSES 16
#define FAKE_NVML_MAX_FAILS 8

typedef struct FakeFail {
    char function[64];
    int code;
} FakeFail;

typedef struct FakeProfile {
    unsigned index, id, slices, count;
    unsigned long long memory_mb;
    char name[96];
} FakeProfile;

typedef struct FakeInstance {
    unsigned id, profile_id, start, size;
    void *gpu;     /* back pointer for nvmlGpuInstanceGetInfo's device field */
    int ci;        /* compute instances made on it (0 or 1); fixture instances have one */
    char uuid[64]; /* its MIG device's UUID; the MIG device handle points here */
} FakeInstance;

typedef struct FakeProcess {
    unsigned pid, gi, ci;
    unsigned long long used;
} FakeProcess;

typedef struct FakeGpu {
    char bus_id[32];
    unsigned pci_id;
    char name[96], uuid[96];
    unsigned long long mem_total, mem_used;
    int minor;       /* -1: nvmlDeviceGetMinorNumber is not supported */
    int mig_current; /* -1: not MIG capable */
    int mig_pending;
    FakeProfile profiles[FAKE_NVML_MAX_PROFILES];
    size_t n_profiles;
    FakeInstance instances[FAKE_NVML_MAX_INSTANCES];
    size_t n_instances;
    FakeProcess processes[FAKE_NVML_MAX_PROCESSES];
    size_t n_processes;
    FakeFail fails[FAKE_NVML_MAX_FAILS];
    size_t n_fails;
} FakeGpu;

typedef struct FakeNvml {
    int init_code;
    FakeFail fails[FAKE_NVML_MAX_FAILS];
    size_t n_fails;
    FakeGpu gpus[FAKE_NVML_MAX_GPUS];
    size_t n_gpus;
} FakeNvml;

/* Parse text into *ret (caller's storage, overwritten). On error returns -EINVAL and puts
 * "line N: reason" into msg. */
int fake_nvml_parse(const char *text, size_t len, FakeNvml *ret, char *msg, size_t msg_size);

/* The code a function should return for gpu (NULL: global), 0 when it should not fail. */
int fake_nvml_fail_code(const FakeNvml *f, const FakeGpu *gpu, const char *function);
