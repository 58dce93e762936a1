/* discover.h: the machine inventory the node agent reports (SPEC R1, R8, R10, R11, R12).
 *
 * machine_discover() reads PCI sysfs, NVML (loaded at run time), the amdgpu sysfs files,
 * /proc (CPU, memory, device-file holders) and, on macOS or from a fixture, the Apple
 * Silicon GPU. The structs are plain data the fleet code reads directly; every string is
 * owned by the inventory and freed by machine_inventory_free(). Nothing found is ever dropped:
 * a device no catalog class matches has class NULL ("unclassified"), and a device whose sysfs
 * attributes cannot be parsed is still listed, with `error` saying what was wrong. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/procfd.h"
#include "config/pciids.h"
#include "core/catalog.h"
#include "util/error.h"

/* A neighbour in an accelerator's IOMMU group (its audio/USB functions, bridges...). */
typedef struct GroupPeer {
    char bdf[13];
    uint16_t vendor_id, device_id; /* 0 when unreadable */
    uint32_t class_code;
    const char *kind; /* pci_class_kind(): "audio", "usb", "bridge", ... (static) */
    char *driver;     /* NULL when unbound */
} GroupPeer;

typedef struct MigInstance {
    unsigned gpu_instance_id;
    unsigned profile_id;
    char *profile;        /* "1g.18gb" */
    unsigned start, size; /* placement on the 8 memory slots */
    char *slice_class;    /* catalog MIG slice class name, NULL when unclassified */
    bool busy;            /* a compute process runs in it (NVML) */
} MigInstance;

typedef struct DeviceHolder {
    int pid;
    char *comm;
    char *path; /* the device file it holds, e.g. "/dev/nvidia0" */
} DeviceHolder;

#define LINK_UNKNOWN 0

typedef struct Accelerator {
    Vendor vendor;
    char bdf[13]; /* "" for an Apple GPU (no PCI address) */
    uint16_t vendor_id, device_id, subsystem_vendor_id, subsystem_device_id;
    uint32_t class_code;

    char *model;      /* best name: NVML name, else AMD product name, else pci.ids, else raw id */
    char *pci_name;   /* pci.ids device name, NULL when unknown */
    char *nvml_name;  /* NULL without NVML data */
    char *uuid;       /* NVML UUID, NULL without NVML data */
    char *class_name; /* catalog class; NULL = unclassified */
    bool consumer;    /* from the catalog class */

    uint64_t memory_total_bytes, memory_used_bytes; /* 0 when unknown */
    const char *memory_source;                      /* "nvml", "amdgpu", "apple", NULL */
    uint64_t gtt_total_bytes, gtt_used_bytes;       /* AMD GTT (system memory the GPU maps) */

    int numa_node;                               /* -1: none reported */
    unsigned link_speed_mts, max_link_speed_mts; /* MT/s; LINK_UNKNOWN */
    unsigned link_width, max_link_width;

    char *driver;          /* bound driver; NULL when unbound */
    char *driver_override; /* NULL when "(null)" */
    int iommu_group;       /* -1: no group (IOMMU off) */
    GroupPeer *group;      /* the other members of the group */
    size_t n_group;
    int boot_vga;         /* -1: no boot_vga attribute; 0; 1 */
    char **reset_methods; /* NULL with has_reset_method false: attribute absent */
    size_t n_reset_methods;
    bool has_reset_method;

    int mig_current, mig_pending; /* -1: not MIG capable / unknown; 0 disabled; 1 enabled */
    MigInstance *mig;
    size_t n_mig;
    char **mig_profiles; /* the GPU instance profiles NVML offers (MIG on), NULL without NVML */
    size_t n_mig_profiles;

    int nvidia_minor;    /* -1 when unknown */
    char **device_files; /* "/dev/nvidia0", "/dev/dri/renderD128", "/dev/kfd", "/dev/vfio/12" */
    DevNode *device_nodes;
    size_t n_device_files;
    DeviceHolder *holders;
    size_t n_holders;
    unsigned *nvml_pids; /* compute processes NVML reports */
    size_t n_nvml_pids;

    /* Apple Silicon only (R10). */
    uint64_t unified_memory_bytes, wired_limit_bytes, headroom_bytes;

    char *error; /* what could not be read or parsed, one sentence per problem; NULL if none */
    /* Set when an error touches what the control plane places by (the ids that class it, its
     * memory, its driver, its MIG state): the report would offer a GPU as what it may not be,
     * so the agent keeps the GPU's last report, or quarantines one it never reported. */
    bool fault;
} Accelerator;

typedef struct CpuInventory {
    unsigned logical_cores;
    char *model; /* "model name" from cpuinfo; NULL when absent (e.g. some arm64 kernels) */
    uint64_t memory_bytes;
} CpuInventory;

typedef struct MachineInventory {
    Accelerator *accelerators; /* sorted by PCI address; an Apple GPU last */
    size_t n_accelerators;
    CpuInventory cpu;
    bool iommu_enabled; /* <sysfs>/kernel/iommu_groups has groups */
    bool nvml_loaded;   /* NVML answered */
    char *nvml_status;  /* why NVML data is absent, or "NVML answered for N GPUs" (+ notes) */
    char *apple_status; /* how the Apple GPU was found, or NULL on machines without one */
} MachineInventory;

typedef struct DiscoverOptions {
    const char *sysfs_root, *proc_root, *dev_root; /* NULL: /sys, /proc, /dev */
    const char *nvml_lib;      /* NULL: "libnvidia-ml.so.1" from the loader's search path */
    bool no_nvml;              /* do not load NVML at all */
    const Catalog *catalog;    /* NULL: nothing is classified */
    const PciIds *pci_ids;     /* NULL: no pci.ids names */
    const char *apple_fixture; /* describe a Mac from this file instead of the host (tests, demo) */
    double apple_headroom_gb;  /* GB kept for the owner (0: none), when apple_headroom_set */
    bool apple_headroom_set;   /* false: the default (see apple.h) */
    bool no_holders;           /* skip the /proc fd scan */
} DiscoverOptions;

int machine_discover(const DiscoverOptions *opts, MachineInventory **ret, Error *err);
void machine_inventory_free(MachineInventory *inv);
DEFINE_TRIVIAL_CLEANUP_FUNC(MachineInventory *, machine_inventory_free);

/* The class name shown for an accelerator: its catalog class or "unclassified". */
const char *accelerator_class_name(const Accelerator *a);

/* Count the CPUs and memory from <proc>/cpuinfo and <proc>/meminfo (pure parsers below). */
int cpu_parse_cpuinfo(const char *text, unsigned *ret_cores, char **ret_model);
int cpu_parse_meminfo(const char *text, uint64_t *ret_bytes);
