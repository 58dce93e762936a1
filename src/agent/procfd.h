/* procfd.h: which processes hold an accelerator's device files (/proc/PID/fd links).
 *
 * The kernel writes an fd link's target as the path the process opened ("/dev/nvidia0",
 * "/dev/dri/renderD128", "/dev/kfd", "/dev/vfio/12"), with " (deleted)" appended when the
 * node was removed since. We match these by kind and number, so the dev root given to the
 * agent (default /dev) is the prefix we expect. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

typedef enum DevNodeKind {
    DEVNODE_NVIDIA,     /* <dev>/nvidiaN: one per NVIDIA GPU, N = the driver's minor number */
    DEVNODE_DRI_CARD,   /* <dev>/dri/cardN */
    DEVNODE_DRI_RENDER, /* <dev>/dri/renderDN */
    DEVNODE_KFD,        /* <dev>/kfd: ROCm's compute node, shared by every AMD GPU */
    DEVNODE_VFIO,       /* <dev>/vfio/N: N = IOMMU group, present while bound to vfio-pci */
    _DEVNODE_MAX,
} DevNodeKind;

typedef struct DevNode {
    DevNodeKind kind;
    unsigned num; /* 0 for kfd */
} DevNode;

/* Parse a device path (an fd link target) under dev_root or under /dev (as the process that
 * holds it names it). -ENOENT when it is not a per-accelerator node (e.g. /dev/nvidiactl,
 * /dev/null, a socket, a path outside both); -EINVAL never: any text is a valid "not ours". */
int devnode_parse(const char *dev_root, const char *path, DevNode *ret);

/* "<dev_root>/nvidia0" etc. -ENAMETOOLONG when it does not fit. */
int devnode_format(const char *dev_root, const DevNode *node, char *buf, size_t size);

/* One open file of one process, as procfd_walk hands it over. */
typedef struct ProcFdLink {
    int pid;
    const char *comm;   /* <proc>/<pid>/comm, "" when unreadable (the process may have gone) */
    const char *target; /* the fd link's target, e.g. "/dev/nvidia0" */
} ProcFdLink;

/* Whether a link target is wanted; called before the process's comm is read. fd_path is the
 * link itself (<proc>/<pid>/fd/<n>): stat() of it reaches the open file whatever its name. */
typedef bool (*ProcFdMatchFn)(const char *target, const char *fd_path, void *userdata);
/* Called for each wanted link; a negative return stops the walk and is returned by it. */
typedef int (*ProcFdVisitFn)(const ProcFdLink *link, void *userdata);

/* The one walk of <proc_root>/<pid>/fd/<n> links that discovery and binding share. comm is read
 * at most once per process, and only for processes with a wanted link. Processes that vanish
 * or that we may not inspect are skipped. -errno when proc_root cannot be listed. */
int procfd_walk(const char *proc_root, ProcFdMatchFn match, ProcFdVisitFn visit, void *userdata);

typedef struct FdHolder {
    int pid;
    char comm[32]; /* /proc/PID/comm, "" when unreadable (the process may have gone) */
    DevNode node;
} FdHolder;

/* Every (process, device node) pair under proc_root, sorted by pid then node, without
 * duplicates. Processes we may not inspect (EACCES) or that vanish mid-scan are skipped:
 * the scan sees what the agent's privileges allow. */
int procfd_scan(const char *proc_root, const char *dev_root, FdHolder **ret, size_t *ret_n);
