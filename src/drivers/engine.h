/* engine.h: the container driver (driver.h) over a Docker Engine or Podman service's unix
 * socket, with libcurl. The dialect comes from GET /version unless forced (a Podman service
 * answers both its libpod API and the Docker-compatible one on the same socket). NVIDIA GPUs:
 * libpod gets CDI names (nvidia.com/gpu=<UUID>); Docker gets DeviceRequests (Driver nvidia,
 * the allocated UUIDs) or CDI names where the engine has CDI enabled, or - on an engine that
 * has neither, like Podman's Docker-compatible API - the CDI spec's device nodes explicitly.
 * AMD (R12): /dev/kfd and the card's render node, with ROCR_VISIBLE_DEVICES. A workload that
 * asks for an OCI runtime the engine does not run (or silently ignores) fails, and nothing of
 * it is left on the engine. */
#pragma once

#include <stddef.h>

#include "drivers/driver.h"
#include "drivers/engine-body.h"

typedef struct EngineConfig {
    const char *socket;     /* the engine's unix socket */
    int dialect;            /* EngineDialect, or -1: from GET /version */
    int gpu_mode;           /* EngineGpuMode for the Docker dialect, or -1: auto */
    const char *cdi_dirs;   /* colon-separated; NULL: CDI_DIRS_DEFAULT */
    const char *dev_root;   /* where /dev/kfd is (default /dev) */
    unsigned api_timeout_s; /* one API call (default 60) */
    /* The node this agent runs for: its containers carry it (label einsora.node); another
     * node's on a shared engine are not listed as ours. NULL: every einsora container is. */
    const char *node;
} EngineConfig;

void engine_config_init(EngineConfig *c);

/* Connect (GET /version) and pick the dialect and GPU mode. ret_product: e.g. "Podman 4.3.1,
 * libpod API" for logs and `einsora up`. A socket nobody answers on is -ECONNREFUSED (or the
 * errno of the connect) with a sentence naming it. */
int engine_driver_new(const EngineConfig *cfg, Driver **ret, char *ret_product, size_t size,
                      Error *err);
