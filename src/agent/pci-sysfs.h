/* pci-sysfs.h: the agent's narrow window onto PCI sysfs, under a configurable root.
 *
 * Every path is built from HostPaths, so tests point the agent at a fixture tree (or a fake
 * kernel) instead of /sys. Real sysfs links bus/pci/devices/BDF -> ../../../devices/pci.../BDF;
 * fixture trees may use plain folders: both work, since we only ever open paths through
 * bus/pci/devices/BDF and read links (driver, iommu_group) relative to it. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/pci-address.h"

typedef struct HostPaths {
    char sysfs[PATH_MAX]; /* "/sys" on a real machine */
    char proc[PATH_MAX];  /* "/proc" */
    char dev[PATH_MAX];   /* "/dev": device files are matched by this prefix */
} HostPaths;

/* Fill paths; NULL arguments keep the real machine's defaults. -ENAMETOOLONG on overflow. */
int host_paths_init(HostPaths *p, const char *sysfs_root, const char *proc_root,
                    const char *dev_root);

/* pci_bdf_is_valid(): a PCI address in sysfs form, shared with the server (wire/). */

/* "<sysfs>/bus/pci/devices/<bdf>[/<attr>]" into buf. */
int pci_attr_path(const HostPaths *p, const char *bdf, const char *attr, char *buf, size_t size);

/* Read a one-line attribute (trailing newline stripped). -ENOENT when absent. */
int pci_read_attr(const HostPaths *p, const char *bdf, const char *attr, char **ret);

/* Read a hex attribute written "0x10de" (vendor, device, class). -EINVAL when malformed. */
int pci_read_hex_attr(const HostPaths *p, const char *bdf, const char *attr, uint32_t *ret);

/* Name of the bound driver (basename of the driver link); -ENOENT when no driver is bound. */
int pci_driver_name(const HostPaths *p, const char *bdf, char **ret);

/* IOMMU group number; -ENOENT when the device has none (IOMMU off). */
int pci_iommu_group(const HostPaths *p, const char *bdf, int *ret);

/* Sorted BDFs of an IOMMU group (<sysfs>/kernel/iommu_groups/N/devices). Free with strv_free. */
int pci_iommu_group_members(const HostPaths *p, int group, char ***ret, size_t *ret_n);

/* Sorted BDFs of every PCI device (<sysfs>/bus/pci/devices). Free with strv_free. */
int pci_list_devices(const HostPaths *p, char ***ret, size_t *ret_n);

void strv_free(char **v, size_t n);
/* Append a copy of s to the n strings of *v; -ENOMEM (nothing added) when out of memory. */
int strv_push(char ***v, size_t *n, const char *s);
