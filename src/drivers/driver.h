/* driver.h: the workload driver interface of the node agent (R17): start exactly the placed
 * workload with exactly the devices it was given, stop it (a stop that hangs is killed after a
 * grace period), say its status (running / exited with its code / failed with the engine's
 * sentence / absent), show its logs, and list what the engine really runs for us, so that an
 * agent restart reconciles with the engine (the engine wins) and never starts a workload twice.
 *
 * A workload is named by its request id: every container or domain a driver creates carries
 * it (label einsora.request=<id>, name "einsora-<id>"), so the engine itself remembers what is
 * ours. Drivers: engine.h (containers over the Docker Engine or Podman libpod API), vm.h (VMs
 * through libvirt), and the Mac backends behind the same table. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "util/error.h"

#define DRIVER_LABEL "einsora.request"
#define DRIVER_LABEL_NODE "einsora.node"
#define DRIVER_LABEL_CREATED "einsora.created"
#define DRIVER_NAME_PREFIX "einsora-"
#define DRIVER_ID_MAX 32

/* One accelerator given to the workload (from the placement and the agent's inventory). */
typedef struct WorkloadGpu {
    const char *vendor;       /* "nvidia" | "amd" */
    const char *uuid;         /* NVIDIA GPU or MIG UUID ("GPU-…", "MIG-…"); AMD: may be NULL */
    const char *pci;          /* PCI address, e.g. 0000:3b:00.0 */
    const char *render_node;  /* AMD: the card's /dev/dri/renderD* node */
    const char *const *group; /* VMs: the other functions of its IOMMU group (audio, USB...) */
    size_t n_group;
    /* Containers: the GPU is on vfio-pci, for a Kata container (R2b), which is handed its
     * /dev/vfio/<iommu_group> to pass into its VM, never a host driver's device. */
    bool vfio;
    int iommu_group;
} WorkloadGpu;

typedef struct WorkloadSpec {
    const char *id;    /* the request id */
    const char *kind;  /* notebook | endpoint | container | vm */
    const char *image; /* container image, or a VM's disk image (the site default by the agent) */
    const char *const *command; /* NULL-terminated argv, or NULL for the image's own */
    const char *const *env;     /* NULL-terminated "KEY=VALUE" list, or NULL */
    const unsigned *ports;      /* container ports to publish on the host, n_ports of them */
    size_t n_ports;
    const char *oci_runtime; /* the engine's runtime name (mapped from runc/kata), NULL: default */
    const WorkloadGpu *gpus;
    size_t n_gpus;
    unsigned memory_mb, vcpus; /* VMs (0: driver default) */
    unsigned cpu_limit;        /* containers: the cores a cpu placement gave it (0: no limit) */
    const char *node;          /* the node it runs for (label einsora.node), NULL: not said */
    /* When its request was made (the control plane's created_ms, label einsora.created): with
     * the id it names this workload, not a leftover of an earlier request given the same id;
     * NULL: not said (not checked). */
    const char *created;
} WorkloadSpec;

typedef enum WorkloadStatus {
    WORKLOAD_ABSENT,   /* the engine has nothing with this id */
    WORKLOAD_STARTING, /* created, not running yet */
    WORKLOAD_RUNNING,
    WORKLOAD_EXITED, /* ended on its own or was stopped: exit_code is set */
    WORKLOAD_FAILED, /* could not run: message carries the engine's sentence */
    _WORKLOAD_STATUS_MAX,
} WorkloadStatus;

typedef struct WorkloadState {
    WorkloadStatus status;
    int exit_code;
    char message[256];
    unsigned host_port; /* where the first published port answers on the host (0: none) */
    char created[24];   /* the making it carries (einsora.created): an agent made it; "" none */
} WorkloadState;

const char *workload_status_to_string(WorkloadStatus s);

typedef struct Driver Driver;

typedef struct DriverOps {
    const char *name;
    /* Create and start; on failure nothing of it is left on the engine. */
    int (*start)(Driver *d, const WorkloadSpec *spec, Error *err);
    /* Ask it to stop, kill it after grace_s seconds, and remove it. Absent is not an error. */
    int (*stop)(Driver *d, const char *id, unsigned grace_s, Error *err);
    int (*status)(Driver *d, const char *id, WorkloadState *ret, Error *err);
    /* Write its output to out; with follow, until it ends. */
    int (*logs)(Driver *d, const char *id, bool follow, FILE *out, Error *err);
    /* The request ids of every workload of ours the engine has (running or not). */
    int (*list)(Driver *d, char ***ret_ids, size_t *ret_n, Error *err);
    void (*free)(Driver *d);
} DriverOps;

struct Driver {
    const DriverOps *ops;
};

static inline void driver_free(Driver *d) {
    if (d)
        d->ops->free(d);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(Driver *, driver_free);

void driver_ids_free(char **ids, size_t n);

/* Whether id is a request id a driver accepts (digits, at most DRIVER_ID_MAX - 1). */
bool driver_id_is_valid(const char *id);
