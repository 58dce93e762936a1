/* workloads.h: the agent's side of R17: turn a placement the control plane pushed (the
 * heartbeat's "workloads" item) into a workload spec for a driver (drivers/driver.h): the
 * allocated GPUs' UUIDs and render nodes from the agent's own inventory, the image (the
 * request's, or the site's default for the kind), the OCI runtime name the site maps the
 * placement's runc/kata to. Also the agent config's small "key=value,..." maps. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "agent/discover.h"
#include "drivers/driver.h"
#include "drivers/engine.h"
#include "drivers/mac-plan.h"
#include "drivers/process.h"
#include "drivers/vm.h"
#include "util/error.h"

#define AGENT_STOP_GRACE_DEFAULT_S 10

typedef struct AgentWorkloadConfig {
    EngineConfig engine; /* engine.socket NULL: no container driver (placements are recorded) */
    VmConfig vm;         /* vm.uri NULL: no VM driver (passthrough placements are recorded) */
    const char
            *images; /* "notebook=IMG,endpoint=IMG,container=IMG,vm=/DISK": the site's defaults */
    /* The folder of the disk images a VM request may name (by file name): --vm-image-dir, else
     * the folder of the site's default VM disk; NULL: requests name no VM image. */
    const char *vm_image_dir;
    const char *runtimes;   /* "runc=runc,kata=kata-runtime": placement runtime -> engine's name */
    unsigned stop_grace_s;  /* 0: AGENT_STOP_GRACE_DEFAULT_S */
    const char *address;    /* host name users reach this node by, for notebook/endpoint URLs */
    const char *mlx_server; /* the MLX server binary (mlx_lm.server) for Mac endpoints, or NULL */
    const char *llama_server;      /* the llama.cpp server binary (llama-server), or NULL */
    bool cpu_endpoints_as_process; /* cpu endpoints run llama_server as a process, not a container
                                    */
} AgentWorkloadConfig;

/* The value of key in a "k=v,k=v" map into buf; false when absent. */
bool agent_map_get(const char *map, const char *key, char *buf, size_t size);
/* Whether a "k=v,..." map is well formed (keys and values non-empty, no duplicate keys) and
 * each key one of `keys` (NULL-terminated), so that a typo is said, not silently unused. */
int agent_map_check(const char *map, const char *what, const char *const *keys, Error *err);
/* The keys --images and --runtimes take. */
extern const char *const agent_image_keys[], *const agent_runtime_keys[];

/* Whether the placement is run by the container driver: methods container, mig, time-slice and
 * cpu (a passthrough VM or a Mac workload goes to its own driver). */
bool agent_work_is_container(json_t *work);

/* Whether the placement is a passthrough VM (the VM driver). */
bool agent_work_is_vm(json_t *work);

/* Whether the placement is an endpoint served by a native process (drivers/process.h): every
 * endpoint on a whole Mac GPU (R10, R14), and cpu endpoints where the site says so. */
bool agent_work_is_process(const AgentWorkloadConfig *cfg, json_t *work);

/* Storage behind a WorkloadSpec built by agent_work_spec(). */
typedef struct AgentSpecBuf {
    char id[DRIVER_ID_MAX];
    char image[256], runtime[64];
    WorkloadGpu gpus[16];
    const char *group[16][8]; /* VMs: the other functions of each GPU's IOMMU group */
    size_t n_gpus;
    const char *cmd[65];
    const char *env[70]; /* the request's 64, the end, and what a placement adds (model, GPUs) */
    char model_env[300];
    unsigned port;
    unsigned ports[16];                    /* the request's own "ports", when it has them */
    const char *argv[MAC_SERVER_ARGV_MAX]; /* a process endpoint's server command line */
    char port_text[16];
    char created[24]; /* the request's created_ms, "" when the item has none */
} AgentSpecBuf;

/* The port a kind's server listens on in its container: a notebook's (Jupyter, 8888), an
 * endpoint's by runtime (vLLM 8000, llama.cpp and MLX 8080); 0 for other kinds. */
unsigned agent_work_port(json_t *work);

/* The URL users reach a running notebook or endpoint at (an endpoint's OpenAI-compatible base
 * URL ends in /v1); "" when the kind serves nothing or no port is published. */
void agent_work_url(const AgentWorkloadConfig *cfg, json_t *work, unsigned host_port, char *buf,
                    size_t size);

/* Build the spec of one pushed workload. Every allocated address must be a GPU of this
 * machine's inventory (with a UUID for NVIDIA, a render node for AMD); otherwise a sentence
 * saying which. The spec points into work, inv and buf. */
int agent_work_spec(const AgentWorkloadConfig *cfg, json_t *work, const MachineInventory *inv,
                    AgentSpecBuf *buf, WorkloadSpec *ret, Error *err);

/* Build the spec of a process endpoint: the server's command line for the placement's runtime
 * (mac-plan.h) with this agent's binary for it, the request's model and env, its port (the
 * request's first, else the runtime's or, as processes share the host's ports, the first one
 * above it that none of `taken` -- the ports of this agent's other processes -- holds). The
 * process gets none of the agent's own EINSORA_ settings (process.c), and on a cpu placement
 * no GPU: the GPU runtimes' visibility variables are set empty, whatever the request's env. */
int agent_work_process_spec(const AgentWorkloadConfig *cfg, json_t *work, const unsigned *taken,
                            size_t n_taken, AgentSpecBuf *buf, WorkloadSpec *ret, Error *err);
