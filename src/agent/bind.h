/* bind.h: move a GPU (its whole IOMMU group) between its host driver and vfio-pci (R7), for one
 * GPU or a whole machine (R3/R4 on one node), journaled so a killed agent completes or rolls back.
 *
 * The kernel's driver_override protocol, as libvirt and driverctl use it, never new_id (which
 * would capture every identical card): write the driver to driver_override, unbind from the
 * current driver, write the address to drivers_probe, check the driver link. Going back:
 * clear driver_override (write "\n") and probe again. Each write happens in a child process
 * with a timeout (kernel-write.h); a hung write quarantines the GPU. Every refusal changes
 * nothing and says why in one sentence. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "agent/holders.h"
#include "agent/journal.h"
#include "agent/pci-sysfs.h"
#include "util/error.h"

#define AGENT_STATE_DIR_DEFAULT "/var/lib/einsora/agent"

typedef enum BindTarget {
    BIND_TO_VFIO,
    BIND_TO_HOST,
    _BIND_TARGET_MAX,
} BindTarget;

const char *bind_target_to_string(BindTarget t); /* "vfio" / "host" */
int bind_target_from_string(const char *s, BindTarget *ret);

/* Called after each journal step is on disk (progress output; tests stop the agent here). */
typedef void (*BindStepFn)(const char *bdf, JournalStep step, void *userdata);

typedef struct BindOptions {
    HostPaths paths;
    const char *state_dir; /* journal, records, quarantine; default AGENT_STATE_DIR_DEFAULT */
    int timeout_ms;        /* per kernel write and per wait for the kernel's answer */
    bool dry_run;          /* check and plan only: no write to the kernel or the state folder */
    /* A simulated rebind on a fixture tree (agent run --simulate): the tree is a picture of a
     * machine, whose host drivers it need not show loaded. */
    bool simulated;
    const char *modprobe; /* program run as "<modprobe> vfio-pci" when vfio-pci is not loaded */
    HoldersFn holders;    /* who holds the GPU's device files; default holders_scan_proc */
    void *holders_userdata;
    BindStepFn on_step;
    void *step_userdata;
} BindOptions;

/* Defaults for the real machine: /sys, /proc, /dev, 10 s timeout, "modprobe". */
void bind_options_init(BindOptions *o);

typedef struct BindFunction {
    char bdf[16];
    char before[64];   /* driver before ("" for none) */
    char after[64];    /* driver the kernel shows afterwards */
    char override[64]; /* driver_override afterwards, "" for none */
} BindFunction;

typedef enum RecoverAction {
    RECOVER_NOTHING,     /* the journal held no unfinished operation */
    RECOVER_COMPLETED,   /* finished the move the killed agent had started */
    RECOVER_ROLLED_BACK, /* put the functions back where they were */
    RECOVER_QUARANTINED, /* neither worked: GPU quarantined */
    _RECOVER_ACTION_MAX,
} RecoverAction;

const char *recover_action_to_string(RecoverAction a);

typedef struct BindResult {
    char gpu[16];
    BindTarget to;
    bool dry_run;
    bool changed;    /* the kernel was written to */
    int iommu_group; /* -1 with the IOMMU off */
    BindFunction fns[8];
    size_t n_fns;
    char plan[4096];         /* the writes, one per line ("dry run" shows them) */
    RecoverAction recovered; /* what the automatic recovery at the start did */
    char recovered_gpu[16];
} BindResult;

/* Move the GPU at bdf and the functions of its IOMMU group to `to`. Runs gpu_recover() first.
 * Refusals: -EPERM (foreign device in the group, boot VGA, quarantined), -EOPNOTSUPP (IOMMU
 * off for vfio), -EBUSY (device files held, workload recorded), each with one sentence.
 * -ETIMEDOUT: a write hung and the GPU is quarantined. */
int gpu_bind(const BindOptions *o, const char *bdf, BindTarget to, BindResult *ret, Error *err);

typedef struct RecoverResult {
    RecoverAction action;
    char gpu[16];
    BindFunction fns[8]; /* as the kernel shows them after recovery */
    size_t n_fns;
} RecoverResult;

/* Read the journal; if an operation is unfinished, look at the kernel's driver links and
 * complete it (any function already left its old driver) or roll it back (none did). */
int gpu_recover(const BindOptions *o, RecoverResult *ret, Error *err);

#define NODE_MAX_GPUS 32

typedef struct SwitchResult {
    BindTarget to;
    size_t n_gpus;
    BindResult gpus[NODE_MAX_GPUS];
    size_t n_skipped; /* boot VGA GPUs stay with the host's console */
    char skipped[4][16];
} SwitchResult;

/* All GPUs of the machine to one mode. Refused as a whole, naming every reason (workloads,
 * holders, groups), while anything runs on any GPU. */
int node_switch(const BindOptions *o, BindTarget to, SwitchResult *ret, Error *err);
