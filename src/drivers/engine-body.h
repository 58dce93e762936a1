/* engine-body.h: the pure half of the container driver: which dialect an engine speaks (from
 * GET /version), the container-create bodies of the Docker Engine API and of Podman's libpod
 * API for a workload and the devices resolved for it, and a container's state from its
 * inspect answer. No I/O, so every body is checked field by field in tests. */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "drivers/driver.h"
#include "util/error.h"

typedef enum EngineDialect {
    ENGINE_DOCKER, /* Docker Engine API (also Podman's Docker-compatible endpoints) */
    ENGINE_LIBPOD, /* Podman's own API, /v4.0.0/libpod/... */
    _ENGINE_DIALECT_MAX,
    _ENGINE_DIALECT_INVALID = -1,
} EngineDialect;

/* How NVIDIA GPUs are handed to a Docker-dialect engine. */
typedef enum EngineGpuMode {
    ENGINE_GPU_DEVICE_REQUESTS, /* HostConfig.DeviceRequests, Driver "nvidia" (the toolkit's hook)
                                 */
    ENGINE_GPU_CDI,             /* DeviceRequests, Driver "cdi": the engine resolves CDI names */
    ENGINE_GPU_DEVICES, /* explicit HostConfig.Devices from the CDI spec (engines without CDI) */
    _ENGINE_GPU_MODE_MAX,
    _ENGINE_GPU_MODE_INVALID = -1,
} EngineGpuMode;

const char *engine_dialect_to_string(EngineDialect d);
EngineDialect engine_dialect_from_string(const char *s);
const char *engine_gpu_mode_to_string(EngineGpuMode m);
EngineGpuMode engine_gpu_mode_from_string(const char *s);

/* Who answers GET /version: Podman names a "Podman Engine" component (its Docker-compatible
 * /version says so too); anything else with an ApiVersion is a Docker Engine. ret_product: a
 * short description for logs ("Podman 4.3.1", "Docker Engine 24.0.5"). */
int engine_dialect_from_version(json_t *version, EngineDialect *ret, char *ret_product, size_t size,
                                Error *err);

/* One device node given to the container explicitly. */
typedef struct EngineDevice {
    const char *host_path, *container_path;
} EngineDevice;

/* What the container gets besides the spec: resolved by the driver from the placement. */
typedef struct EngineGpus {
    const char *const *nvidia_ids; /* NVIDIA GPU/MIG UUIDs (DeviceRequests modes) */
    size_t n_nvidia_ids;
    const char *const *cdi_names; /* "nvidia.com/gpu=<UUID>" (libpod, Docker CDI mode) */
    size_t n_cdi_names;
    const EngineDevice *devices; /* explicit nodes (AMD, Docker without CDI) */
    size_t n_devices;
    const char *const *env; /* extra "KEY=VALUE" (ROCm visibility, CDI env) */
    size_t n_env;
} EngineGpus;

/* The label that names the first of the spec's ports (its host port is the workload's URL). */
#define ENGINE_LABEL_PORT "einsora.port"

/* The create body for the dialect. Docker: the name goes in the query (?name=), not the body. */
json_t *engine_create_body(EngineDialect dialect, const WorkloadSpec *spec, const EngineGpus *gpus);

/* The path that stops container `name`, giving it grace_s seconds after SIGTERM: libpod's
 * parameter is `timeout`, Docker's `t` (libpod ignores `t` and waits its own 10 s). */
char *engine_stop_path(EngineDialect dialect, const char *name, unsigned grace_s);

/* The state of a container from its inspect JSON (both dialects answer the Docker shape for
 * State). ret_runtime: the OCI runtime it was created with, when the answer says. */
int engine_state_from_inspect(json_t *inspect, WorkloadState *ret, const char **ret_runtime,
                              Error *err);

/* A Docker-style error answer's sentence ("message"), or a fallback naming the status. */
void engine_error_sentence(json_t *answer, long status, char *buf, size_t size);
