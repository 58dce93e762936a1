/* group.h: which PCI functions move with a GPU, and whether its IOMMU group may move at all.
 *
 * vfio hands a VM a whole IOMMU group, so every member must leave its host driver together.
 * The GPU's own functions (same PCI slot: display, HD audio, USB, UCSI) move with it; PCI
 * bridges stay (vfio-pci accepts a group whose bridges stay on pcieport); anything else (a NIC,
 * an NVMe disk, the board's USB controller) would be taken from the host, so we refuse. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/pci-sysfs.h"
#include "util/error.h"

typedef enum GroupMemberKind {
    GROUP_MEMBER_GPU_FUNCTION,
    GROUP_MEMBER_BRIDGE,
    GROUP_MEMBER_FOREIGN,
} GroupMemberKind;

typedef struct GroupMember {
    char bdf[16];
    uint32_t vendor, device, class_code;
    GroupMemberKind kind;
    char driver[64];   /* "" when unbound */
    char override[64]; /* driver_override, "" for none ("(null)" in sysfs) */
} GroupMember;

typedef struct GpuGroup {
    char gpu[16];
    int iommu_group; /* -1 when the IOMMU is off */
    bool boot_vga;
    GroupMember members[16];
    size_t n_members;
} GpuGroup;

/* A display controller from NVIDIA or AMD. */
bool pci_is_gpu(uint32_t vendor, uint32_t class_code);

/* "an Ethernet controller", "an NVMe controller", ... (with its article) for a class code
 * (0xCCSSPP). */
const char *pci_class_describe(uint32_t class_code);

/* Load the functions that move with the GPU at bdf. With the IOMMU off (no iommu_group link)
 * members are the GPU's own slot functions and iommu_group is -1. Errors: -ENODEV when bdf is
 * not a PCI device, -EINVAL when it is not a GPU. */
int gpu_group_load(const HostPaths *p, const char *bdf, GpuGroup *ret, Error *err);

/* The first foreign member, or NULL. */
const GroupMember *gpu_group_foreign(const GpuGroup *g);

/* The GPU functions of the group (the ones that move), in order; returns how many. */
size_t gpu_group_functions(const GpuGroup *g, const GroupMember **ret, size_t max);

/* The driver a function goes back to on the host when nothing was remembered: nvidia for an
 * NVIDIA display, amdgpu for AMD, snd_hda_intel for HD audio, xhci_hcd for USB 3, ucsi_ccg for
 * NVIDIA's USB-C controller; "" when none is known. */
const char *pci_default_host_driver(uint32_t vendor, uint32_t class_code);
