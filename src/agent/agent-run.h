/* agent-run.h: `einsora agent run`, the node agent's daemon loop: it registers its node with
 * the control plane, pushes its inventory (again whenever it changes), heartbeats, does the
 * work the control plane queues for it (GPU rebinds, reset-cycle checks, R7, R9), starts and
 * stops the workloads placed on its node, and reports results.
 *
 * Workloads (R17): a placement runs through the driver of its method (workloads.h: containers
 * through the engine's socket, passthrough VMs through libvirt; other methods, or no driver
 * configured, are only recorded). Either way the agent records it in its state folder
 * (records.h, so the binding code refuses to rebind a GPU that runs one, R7) and confirms it to
 * the control plane (placed -> active); a driven workload that ends is reported (-> ended, its
 * GPUs freed) and stopping removes it. What the engines, the agent's records and the kernel
 * show wins over what the control plane believes: an agent that restarts reconciles
 * (gpu_recover() of its binding journal, adoption of what the engines run, then its records in
 * every heartbeat).
 *
 * Simulation (`simulate`): fixture machines are read-only trees, so for demos and tests the
 * agent can record rebinds and reset checks in its state folder instead of writing to the
 * kernel (state/sim-binding: "<bdf> vfio|host" lines; state/sim-reset: "<bdf> pass|fail
 * REASON" lines to script a check's verdict). */
#pragma once

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include "agent/discover.h"
#include "util/error.h"

#define AGENT_HEARTBEAT_DEFAULT_S 5

/* Who the node is, for the node description the control plane takes (docs/control-plane.md). */
typedef struct AgentIdentity {
    const char *name;         /* node name */
    const char *site;         /* default "home" */
    const char *site_kind;    /* solo | lab | datacenter; default "lab" */
    const char *owner;        /* the machine's owner (user name) */
    const char *mode;         /* datacenter: container | vm-passthrough; NULL: from the bindings */
    const char *capabilities; /* comma-separated, e.g. "kata,mig_in_kata"; may be NULL */
} AgentIdentity;

typedef struct AgentConfig {
    const char *server, *token;
    const char *ca_file; /* the private CA the control plane's certificate chains to; NULL: the
                          * system's (the CLI's EINSORA_CACERT) */
    AgentIdentity id;
    DiscoverOptions discover;    /* roots, NVML, Apple fixture; catalog loaded by agent_run */
    const char *dev_root;        /* for binding (default /dev) */
    const char *state_dir;       /* records, journal, quarantine */
    const char *catalog_path;    /* NULL: the shipped catalog */
    unsigned heartbeat_s;        /* 0: AGENT_HEARTBEAT_DEFAULT_S */
    bool simulate;               /* record rebinds and reset checks instead of writing the kernel */
    FILE *log;                   /* one line per thing done; NULL = quiet */
    volatile sig_atomic_t *stop; /* set (by a signal handler) to stop the loop */
    const struct AgentWorkloadConfig
            *workloads; /* drivers for the placed workloads (workloads.h); NULL: recorded only */
} AgentConfig;

/* Run until *cfg->stop is set. Returns 0 on a clean stop, or a negative errno with a sentence
 * when the agent cannot start at all (state folder, catalog, bad token). A control plane that
 * is down is waited for, never a reason to stop. */
int agent_run(const AgentConfig *cfg, Error *err);

/* The node description (POST/PUT /v1/nodes) for a discovered machine: NVIDIA and AMD GPUs
 * (and unclassified PCI accelerators, R8) as devices, the Mac's unified memory (R10), the
 * CPU (R11). sim_bindings: the simulated bindings' text (may be NULL). Pure. */
json_t *agent_node_json(const AgentIdentity *id, const MachineInventory *inv,
                        const char *sim_bindings);
