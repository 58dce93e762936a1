/* catalog.h: the GPU classes a site offers (R8) and how devices are matched to them.
 *
 * A Catalog owns its classes. Class indices are stable for the catalog's lifetime, so the
 * rest of the core refers to classes by index. A class that no device matches has zero
 * capacity; a device that no class matches is "unclassified" (callers show it, never drop
 * it). MIG slice classes are classes too: mig_parent names the card class they are cut from.
 * Pure: no I/O; the YAML loader lives in config/. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/mig.h"
#include "util/error.h"

typedef enum Vendor {
    VENDOR_NVIDIA,
    VENDOR_AMD,
    VENDOR_INTEL,
    VENDOR_APPLE,
    VENDOR_CPU,
    _VENDOR_MAX,
    _VENDOR_INVALID = -1,
} Vendor;

const char *vendor_to_string(Vendor v);
Vendor vendor_from_string(const char *s);
/* The PCI vendor id of a GPU vendor (0 for apple and cpu). */
uint16_t vendor_pci_id(Vendor v);

#define CLASS_MAX_PCI_IDS 8
#define CLASS_MAX_NVML_NAMES 8

typedef struct PciId {
    uint16_t vendor, device;
} PciId;

/* Where a class's vm_device_name came from (R6, KubeVirt device plugin naming). */
typedef enum VmNameSource {
    VM_NAME_NONE,    /* not applicable: not NVIDIA, or a MIG slice (never passthrough) */
    VM_NAME_PCI_IDS, /* derived from the pci.ids device name */
    VM_NAME_RAW_ID,  /* pci.ids has no name for the device: derived from the raw id */
    VM_NAME_CATALOG, /* written explicitly in the catalog */
} VmNameSource;

typedef struct GpuClass {
    char *name;
    Vendor vendor;
    /* Match rules: any one that hits classifies the device. */
    PciId pci[CLASS_MAX_PCI_IDS];
    size_t n_pci;
    char *nvml_names[CLASS_MAX_NVML_NAMES];
    size_t n_nvml_names;
    unsigned apple_memory_gb; /* Apple tier: unified memory this class stands for */
    unsigned memory_gb;       /* per unit: a card, a MIG slice, or a Mac's tier */
    char *container_resource; /* e.g. nvidia.com/gpu, nvidia.com/mig-1g.10gb */
    char *node_selector;      /* e.g. nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 */
    char *vm_device_name;     /* e.g. nvidia.com/GH100_H100_SXM5_80GB */
    VmNameSource vm_device_name_source;
    /* Set when the catalog states vm_device_name and the loader's pci.ids derives another
     * name for the device (R6): the device plugin on a node advertises the name from its own
     * pci.ids, so a mismatch is worth a warning. NULL otherwise. */
    char *vm_device_name_derived;
    char *mig_profiles[_MIG_SHAPE_MAX]; /* profiles this card can be cut into */
    size_t n_mig_profiles;
    bool internal_only; /* trusted tenants only (R9, datacenter) */
    bool owner_only;    /* the machine's owner only (R10) */
    bool consumer;      /* consumer card: reset-cycle check before passthrough (R9) */
    /* Set on MIG slice classes only. */
    char *mig_parent;  /* card class name */
    char *mig_profile; /* e.g. "1g.10gb" */
    MigShape mig_shape;
    int mig_parent_index; /* index of mig_parent in the catalog, -1 when not a slice */
    bool derived;         /* generated from a card's mig_profiles, not written in the file */
} GpuClass;

typedef struct Catalog {
    GpuClass *classes;
    size_t n_classes, cap_classes;
} Catalog;

Catalog *catalog_new(void);
void catalog_free(Catalog *c);

/* Append a class, taking ownership of its strings (the struct is copied and *cls zeroed).
 * Refuses a duplicate name with -EEXIST. */
int catalog_add(Catalog *c, GpuClass *cls, Error *err);

/* Check the rules every class must meet (R2d vGPU refused, R8 fields, MIG table, R10), fill
 * derived fields (slice shapes, parent indices) and create the MIG slice classes of every
 * MIG-capable card that the catalog does not list itself. Returns the index of the first bad
 * class in *ret_bad_index (or -1) so that a loader can point at its position. */
int catalog_finalize(Catalog *c, size_t *ret_bad_index, Error *err);

/* What every vGPU refusal says (R2d): the alternatives we do offer. */
#define CATALOG_VGPU_REFUSAL                                                                       \
    "vGPU is not supported (R2d); use VFIO passthrough to a VM, a whole GPU to a container, or a " \
    "MIG slice instead"

/* Check one class on its own (as catalog_finalize does for each). */
int gpu_class_validate(const GpuClass *cls, Error *err);

void gpu_class_done(GpuClass *cls);

int catalog_find_index(const Catalog *c, const char *name);
const GpuClass *catalog_find(const Catalog *c, const char *name);
/* Whether a device (a PCI card) may be of this class: not a MIG slice, an Apple unified-memory
 * tier or cpu, which are no devices of a node's list. */
bool gpu_class_is_card(const GpuClass *c);

/* Classification of a device found by the agent; NULL means unclassified. A whole-card
 * class (not a MIG slice) is returned. */
const GpuClass *catalog_match_pci(const Catalog *c, uint16_t vendor, uint16_t device);
const GpuClass *catalog_match_nvml(const Catalog *c, const char *nvml_name);
/* The Apple tier for a Mac with this much unified memory: the largest tier not above it. */
const GpuClass *catalog_match_apple(const Catalog *c, unsigned unified_memory_gb);

/* R10: a Mac's usable GPU memory is its GPU wired limit less a headroom kept for its owner.
 * macOS's default wired limit (iogpu.wired_limit_mb 0): Apple documents no figure; the value
 * Metal reports as recommendedMaxWorkingSetSize on Apple Silicon has been observed by users of
 * the inference servers that run there as about 2/3 of RAM up to 36 GB and 3/4 above. The
 * default headroom: 8 GB, but at most a quarter of unified memory (a 16 GB Mac keeps 4 GB for
 * its owner rather than leaving almost nothing for the GPU). The agent measures what it can;
 * a Mac described without its usable memory is taken to have these defaults. */
#define APPLE_DEFAULT_HEADROOM_GB 8
uint64_t apple_default_wired_limit(uint64_t memsize_bytes);
uint64_t apple_default_headroom(uint64_t memsize_bytes);
unsigned apple_default_usable_gb(unsigned unified_gb);
/* The MIG slice class cut from card class `card_index` with this profile, or NULL. */
const GpuClass *catalog_find_mig_slice(const Catalog *c, int card_index, const char *profile);

/* Derive a KubeVirt-style resource name from a pci.ids device name: upper-case; '/' and '.'
 * become '_'; white space becomes '_'; other characters outside [A-Za-z0-9_] are dropped;
 * prefix "nvidia.com/". With pci_name NULL the raw device id is used (e.g. nvidia.com/2335).
 * Returns a new string or NULL on allocation failure. */
char *vm_device_name_derive(const char *pci_name, uint16_t device_id);

/* Check that a value looks like a Kubernetes extended resource name ("domain/name"). */
bool resource_name_is_valid(const char *s);
/* Check that a node selector is "key=value" with label-valid characters. */
bool node_selector_is_valid(const char *s);
