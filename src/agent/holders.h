/* holders.h: which processes hold a GPU's device files open.
 *
 * A narrow interface so that binding does not depend on discovery: BindOptions carries a
 * HoldersFn; the built-in one scans <proc>/<pid>/fd links with procfd_walk, the same walk
 * discovery uses to report NVML/DRM users. */
#pragma once

#include <stddef.h>

#include "agent/pci-sysfs.h"
#include "util/error.h"

typedef struct Holder {
    int pid;
    char comm[64];  /* <proc>/<pid>/comm, "?" when unreadable */
    char path[256]; /* the device file it holds */
} Holder;

/* Find processes holding any of paths (absolute device file paths). *ret may be NULL when none. */
typedef int (*HoldersFn)(const HostPaths *p, char *const *paths, size_t n_paths, Holder **ret,
                         size_t *ret_n, void *userdata, Error *err);

/* The built-in HoldersFn: readlink of every <proc>/<pid>/fd/<n>, matched by path, and for the
 * paths that are character devices also by device number (the same device opened under another
 * name). Processes that vanish or that we may not look into are skipped (an unprivileged agent
 * sees only its own). */
int holders_scan_proc(const HostPaths *p, char *const *paths, size_t n_paths, Holder **ret,
                      size_t *ret_n, void *userdata, Error *err);

/* Ends a device file path that stands for any number there (<dev>/nvidia + it: every GPU's). */
#define DEVICE_NUMBER_PATTERN "[0-9]*"

/* Device files that belong to one PCI function: <dev>/nvidia<minor> (minor from
 * <proc>/driver/nvidia/gpus/<bdf>/information; any <dev>/nvidiaN when unknown and the
 * function is on nvidia), <dev>/kfd for an amdgpu function (ROCm's one compute node),
 * <dev>/dri/<card*|renderD*> (from the function's drm/ folder), an audio function's
 * <dev>/snd/<pcmC*|controlC*|hwC*|midiC*> (the entries of its sound/cardN folders), a USB
 * controller's <dev>/bus/usb/<bus>/<any> (its usbN root hubs), <dev>/vfio/<group> when iommu_group
 * >= 0. A holder of any of them holds the GPU, whose rebind moves them all (R7). Free with
 * strv_free. */
int gpu_device_files(const HostPaths *p, const char *bdf, int iommu_group, char ***ret,
                     size_t *ret_n);

/* "nvidia-smi (pid 4242) holds /dev/nvidia0, ..." (at most a few named); NULL on OOM. */
char *holders_describe(const Holder *h, size_t n);
