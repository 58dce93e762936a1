/* sched.h: the placement engine's public API: inventory, requests, decisions, queue, capacity.
 *
 * Overview
 * --------
 * A Sched holds the whole state the control plane decides with: sites, nodes and their
 * devices (the inventory), requests (waiting or placed) and their allocations. It is pure:
 * no I/O, no clock (every call that depends on time takes `now`, seconds on any monotonic
 * scale the caller chooses), no globals. The Catalog is borrowed and must outlive the Sched.
 *
 *   sched_new(catalog) -> sched_add_site() -> sched_add_node() ... -> sched_submit() /
 *   sched_release() / sched_tick(now) ... -> sched_capacity() / sched_check()
 *
 * Who asks (SPEC "Who asks"): the relation of a user to a node is OWNER (the node's owner;
 * on a datacenter site the operator named as owner of its nodes), TRUSTED (a tenant the
 * node's site marks trusted, sched_site_trust()) or STRANGER.
 *
 * Decisions: each request is PLACED (node, devices or a MIG slot range, delivery method,
 * container runtime, endpoint runtime), WAITING (reason code + sentence + queue position) or
 * REFUSED for good (reason code + sentence; refused requests are not kept).
 *
 * Time: `now` and a request's `submitted` are in seconds unless sched_set_time_scale() says
 * otherwise; a request's wait is always in seconds, and its fallback opens at exactly
 * submitted + wait (R13: the wait a user chose is a minimum, so a caller with a finer clock
 * passes its own units instead of rounding them to seconds).
 *
 * Policy in short (details in policy.c):
 *  - VMs get whole GPUs by VFIO passthrough (R2a): a GPU bound to vfio-pci (a datacenter node
 *    in `vm-passthrough` mode, or a lab GPU bound to vfio). MIG slices, AMD GPUs and vGPU
 *    are never given to VMs. macOS guests only on Macs (at most 2 per Mac, R10); Linux guests
 *    on a Mac get no GPU (a GPU class is refused, `cpu` is fine).
 *  - Containers, notebooks and endpoints (R2b) of the owner or a trusted tenant run under runc
 *    on a host-bound GPU (datacenter: a `container`-mode node); of a stranger under Kata on a
 *    vfio-bound GPU (datacenter: a `vm-passthrough` node with the `kata` capability).
 *  - MIG slices (R2c) on MIG-enabled GPUs of host-bound devices. On a node with `mig_in_kata`
 *    every slice runs under Kata, so slices of different users may share a GPU (the one
 *    exception of R15); without it slices go to the owner and trusted tenants only, under
 *    runc, and one GPU's slices all belong to one user.
 *  - Time-slicing (R2e, request `share`): only runc workloads of one user on one GPU, at most
 *    the node's `time_slice_replicas` of them. A stranger's request (Kata) ignores `share`.
 *  - internal_only classes (R9) go to trusted tenants and the owner on datacenter sites;
 *    owner_only classes (R10, Apple) to the node owner only. Consumer cards are offered for
 *    passthrough only after a passed reset check (sched_device_reset_result), and again after
 *    each VM on them stops.
 *  - Endpoint runtime (R14): NVIDIA and AMD -> vLLM; Mac GPU -> MLX (or llama.cpp when asked);
 *    CPU -> llama.cpp.
 *  - Nodes are never flipped to another mode by placement (R5): a request that only a node in
 *    the other mode could serve waits with SCHED_REASON_MODE_MISMATCH.
 *  - Fallback (R13): a request with alternatives waits for its first choice until
 *    submitted + wait_s; from then on it takes the first of [first choice, alternatives...]
 *    with room, never a GPU shared with a stranger (no time slice or Mac GPU another user
 *    uses, no MIG slice on a GPU where another user holds a slice).
 *
 * Packing: whole GPUs go to the node with the fewest free GPUs that still fits the gang
 * (best fit), so whole nodes stay free for multi-GPU gangs; MIG slices go to the GPU and
 * start slot that lose the least of the larger profiles' placeability (fragmentation-aware).
 *
 * Queue fairness rule: waiting requests form one FIFO ordered by submission (ties: arrival
 * order), kept also per first-choice class. Whenever capacity grows on a node (release,
 * uncordon, new node, mode or binding change, passed reset check), the FIFOs of the classes
 * that node serves (then cpu, memory needs and open fallbacks) are walked oldest first and
 * every request that fits there is placed, so freed capacity goes to the oldest request that
 * can use it. A walk skips requests that cannot fit the node and stops a FIFO after 64
 * waiters in a row that do not fit (they are looked at again at the node's next change):
 * that bound keeps a release O(1) in a long queue.
 *
 * Gang reservations: a waiting gang (2 GPUs or more) reserves one node of its class, the
 * one nearest to fitting it (most free GPUs; on a full fleet, any node that could hold it)
 * that no other gang has reserved, when it starts to wait, when a walk passes it, or when a
 * reservation is let go and it is the oldest gang without one. A class's gangs reserve at
 * most their share of its waiting GPUs, of its nodes (ceil(nodes x gang GPUs waiting / all
 * GPUs waiting), at least one): a reservation drains its node of shorter work, and a node
 * per gang when gangs outnumber the nodes would drain them all while the one-GPU requests
 * could keep them busy (idle GPUs, a longer makespan). A gang beyond the share waits for a
 * reservation to be let go; the oldest ones hold them. It keeps that node until it
 * is placed (there or on any node that fits first) or leaves the queue, and a node it lets go
 * of that no other gang takes is offered to the waiting requests at once (after the walk or
 * tick that placed the gang): those it held back do not wait for the node's next release
 * while younger requests take the room; an older gang may
 * take it meanwhile, and the node then stays with the gangs: the younger one runs there when
 * the older one ends, so gangs follow each other on it without draining a node for each
 * one. A request never takes a GPU of its class on a node that an OLDER waiting gang
 * reserved, so a gang waits only for its node's running work to end, never for younger
 * requests that keep arriving: without durations "backfill only what ends before the
 * reservation" becomes "a younger request passes a gang only where it fits outside the nodes
 * older gangs reserved". Requests older than a gang are never held back by it, and while
 * fewer gangs wait than there are nodes, the unreserved nodes take everyone. Finding the
 * node and the next gang are bounded scans (128 nodes, 256 waiters), O(1) per decision.
 * Fallbacks open when sched_tick() passes a request's deadline (R13); a walk or a tick then
 * tries the first choice first and the alternatives in order.
 *
 * Waiting reasons are found from the indexes in the common case (class full, other mode
 * only, no such class, not allowed); otherwise from a look at up to 128 nodes with the class,
 * so a reason never makes a decision O(fleet).
 *
 * Invariants (sched_check): R15 (no GPU shared by two users except MIG under Kata on a
 * mig_in_kata node), R2e (time slices one user), R16 (no device in two allocations the rules
 * forbid, no request placed twice), bookkeeping (device states, MIG layouts, free counts,
 * the queue and the id index agree with the allocations). sched_set_check_invariants(s, true)
 * runs it after every mutation and aborts on a violation (tests; debug runs).
 *
 * Lookups by request id or node name are hash-map lookups (O(1) expected). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/catalog.h"
#include "core/mig.h"
#include "util/error.h"

typedef struct Sched Sched;

/* Limits. */
#define SCHED_NODE_MAX_DEVICES 16 /* GPUs per node; also the largest gang */
#define SCHED_ID_MAX 128          /* bytes in a request id, node, site or user name */
#define SCHED_MAX_FALLBACKS 8
#define SCHED_MAX_LABELS 32
#define SCHED_DEFAULT_TIME_SLICE_REPLICAS 4
#define SCHED_MAX_MACOS_VMS 2 /* macOS licence: at most 2 macOS VMs per Mac (R10) */
#define SCHED_MESSAGE_MAX 512

/* The node label that chooses a datacenter node's mode (R3). */
#define SCHED_MODE_LABEL "nvidia.com/gpu.workload.config"

/* ---- enums, each with to_string / from_string (from_string returns the _INVALID value) ---- */

typedef enum SiteKind {
    SITE_SOLO,
    SITE_LAB,
    SITE_DATACENTER,
    _SITE_KIND_MAX,
    _SITE_KIND_INVALID = -1,
} SiteKind;

typedef enum Platform {
    PLATFORM_LINUX,
    PLATFORM_MACOS,
    _PLATFORM_MAX,
    _PLATFORM_INVALID = -1,
} Platform;

/* A datacenter node's mode (R3): "container" / "vm-passthrough". "vm-vgpu" parses to
 * NODE_MODE_VM_VGPU so that it can be refused by name (R2d). NONE: solo/lab nodes (per-GPU
 * binding, R7) and datacenter nodes without GPUs. */
typedef enum NodeMode {
    NODE_MODE_NONE,
    NODE_MODE_CONTAINER,
    NODE_MODE_VM_PASSTHROUGH,
    NODE_MODE_VM_VGPU,
    _NODE_MODE_MAX,
    _NODE_MODE_INVALID = -1,
} NodeMode;

/* Which driver a GPU is bound to: "host" (vendor driver: containers, MIG, time slices) or
 * "vfio" (vfio-pci: passthrough VMs and Kata containers). */
typedef enum Binding {
    BINDING_HOST,
    BINDING_VFIO,
    _BINDING_MAX,
    _BINDING_INVALID = -1,
} Binding;

/* A device's state as shown to users: "free", "allocated", "cordoned", "quarantined".
 * Quarantined wins over allocated wins over cordoned, as capacity counts them (a cordoned GPU
 * may still run work: DeviceInfo.cordoned says it is cordoned too). */
typedef enum DeviceState {
    DEVICE_FREE,
    DEVICE_ALLOCATED,
    DEVICE_CORDONED,
    DEVICE_QUARANTINED,
    _DEVICE_STATE_MAX,
    _DEVICE_STATE_INVALID = -1,
} DeviceState;

typedef enum Relation {
    RELATION_OWNER,
    RELATION_TRUSTED,
    RELATION_STRANGER,
    _RELATION_MAX,
    _RELATION_INVALID = -1,
} Relation;

/* "vm", "container", "notebook", "endpoint". */
typedef enum WorkloadKind {
    WORKLOAD_VM,
    WORKLOAD_CONTAINER,
    WORKLOAD_NOTEBOOK,
    WORKLOAD_ENDPOINT,
    _WORKLOAD_KIND_MAX,
    _WORKLOAD_KIND_INVALID = -1,
} WorkloadKind;

/* A VM's guest: "linux", "macos". */
typedef enum GuestOs {
    GUEST_LINUX,
    GUEST_MACOS,
    _GUEST_OS_MAX,
    _GUEST_OS_INVALID = -1,
} GuestOs;

/* How the accelerator reaches the workload: "passthrough", "container", "mig",
 * "time-slice", "apple-whole", "cpu". */
typedef enum Method {
    METHOD_PASSTHROUGH,
    METHOD_CONTAINER,
    METHOD_MIG,
    METHOD_TIME_SLICE,
    METHOD_APPLE_WHOLE,
    METHOD_CPU,
    _METHOD_MAX,
    _METHOD_INVALID = -1,
} Method;

/* "none" (VMs, native Mac processes), "runc", "kata". */
typedef enum ContainerRuntime {
    CONTAINER_RUNTIME_NONE,
    CONTAINER_RUNTIME_RUNC,
    CONTAINER_RUNTIME_KATA,
    _CONTAINER_RUNTIME_MAX,
    _CONTAINER_RUNTIME_INVALID = -1,
} ContainerRuntime;

/* R14: "none" (not an endpoint; in a request: no preference), "vllm", "mlx", "llama.cpp". */
typedef enum EndpointRuntime {
    ENDPOINT_RUNTIME_NONE,
    ENDPOINT_RUNTIME_VLLM,
    ENDPOINT_RUNTIME_MLX,
    ENDPOINT_RUNTIME_LLAMA_CPP,
    _ENDPOINT_RUNTIME_MAX,
    _ENDPOINT_RUNTIME_INVALID = -1,
} EndpointRuntime;

/* "placed", "waiting", "refused". */
typedef enum DecisionKind {
    DECISION_PLACED,
    DECISION_WAITING,
    DECISION_REFUSED,
    _DECISION_KIND_MAX,
    _DECISION_KIND_INVALID = -1,
} DecisionKind;

/* Why a request waits or is refused (strings are the lower-case names with '-', e.g.
 * "no-capacity"). A placed decision has SCHED_REASON_NONE (or FALLBACK when it took an
 * alternative). */
typedef enum SchedReason {
    SCHED_REASON_NONE,
    SCHED_REASON_FALLBACK, /* placed on an alternative after the wait (R13) */
    /* waiting */
    SCHED_REASON_NO_CAPACITY,    /* every GPU of the class is in use */
    SCHED_REASON_MODE_MISMATCH,  /* free GPUs exist, but only in the other mode (R3, R5, R7) */
    SCHED_REASON_OWNER_ONLY,     /* only the owner's machines have this class (R10) */
    SCHED_REASON_INTERNAL_ONLY,  /* only trusted tenants may use this class here (R9) */
    SCHED_REASON_NO_KATA,        /* a stranger needs Kata, no node with room offers it (R2b) */
    SCHED_REASON_NO_MIG_IN_KATA, /* a stranger's MIG slice needs mig_in_kata (R2c) */
    SCHED_REASON_MACOS_VM_LIMIT, /* every Mac already runs 2 macOS VMs (R10) */
    SCHED_REASON_RESET_CHECK,    /* consumer GPUs wait for a passed reset check (R9) */
    SCHED_REASON_CORDONED,  /* the only GPUs that fit are cordoned, quarantined or unreachable */
    SCHED_REASON_QUEUED,    /* room exists but older requests come first (fairness) */
    SCHED_REASON_NO_NODE,   /* no node has the class at all (yet) */
    SCHED_REASON_TOO_LARGE, /* no node has that many GPUs, cores or Mac GPU memory (R18) */
    /* refused */
    SCHED_REASON_VGPU, /* R2d */
    SCHED_REASON_UNKNOWN_CLASS,
    SCHED_REASON_LINUX_GUEST_GPU,     /* R10: Linux guests (and containers) on a Mac get no GPU */
    SCHED_REASON_MACOS_GUEST_NOT_MAC, /* macOS guests run on Macs only */
    SCHED_REASON_VM_MIG,              /* a MIG slice in a VM would need vGPU (R2c, R2d) */
    SCHED_REASON_VM_AMD,              /* AMD GPUs go to containers only (R12) */
    SCHED_REASON_BAD_COUNT,   /* count 0, above a node's size, or >1 of an unsplittable unit */
    SCHED_REASON_BAD_RUNTIME, /* the endpoint runtime asked cannot run on the class (R14) */
    SCHED_REASON_BAD_REQUEST, /* missing id/user, bad kind, bad fallback list, ... */
    SCHED_REASON_DUPLICATE,   /* a request with this id already exists (R16) */
    _SCHED_REASON_MAX,
    _SCHED_REASON_INVALID = -1,
} SchedReason;

const char *site_kind_to_string(SiteKind v);
SiteKind site_kind_from_string(const char *s);
const char *platform_to_string(Platform v);
Platform platform_from_string(const char *s);
const char *node_mode_to_string(NodeMode v);
NodeMode node_mode_from_string(const char *s);
const char *binding_to_string(Binding v);
Binding binding_from_string(const char *s);
const char *device_state_to_string(DeviceState v);
DeviceState device_state_from_string(const char *s);
const char *relation_to_string(Relation v);
Relation relation_from_string(const char *s);
const char *workload_kind_to_string(WorkloadKind v);
WorkloadKind workload_kind_from_string(const char *s);
const char *guest_os_to_string(GuestOs v);
GuestOs guest_os_from_string(const char *s);
const char *method_to_string(Method v);
Method method_from_string(const char *s);
const char *container_runtime_to_string(ContainerRuntime v);
ContainerRuntime container_runtime_from_string(const char *s);
const char *endpoint_runtime_to_string(EndpointRuntime v);
EndpointRuntime endpoint_runtime_from_string(const char *s);
const char *decision_kind_to_string(DecisionKind v);
DecisionKind decision_kind_from_string(const char *s);
const char *sched_reason_to_string(SchedReason v);
SchedReason sched_reason_from_string(const char *s);
/* Whether a reason refuses for good (true) or only makes the request wait. */
bool sched_reason_is_refusal(SchedReason v);

/* ---- lifecycle ---- */

/* The catalog must be finalized and outlive the Sched. NULL on allocation failure. */
Sched *sched_new(const Catalog *catalog);
void sched_free(Sched *s);
const Catalog *sched_catalog(const Sched *s);

/* Run sched_check() after every mutation and abort() on a violation (its sentence goes to
 * stderr first: the one place the core writes, since it is about to crash). */
void sched_set_check_invariants(Sched *s, bool on);
bool sched_checks_invariants(const Sched *s);

/* A user who owns more than n nodes (default 16) has them searched, once they ask, through
 * pool lists kept by free GPUs rather than one by one; decisions are the same either way. The
 * unit tests set 0, so that every owner's lists are built and checked (the lists' upkeep costs
 * each placement and release on those nodes a little, hence not for a machine or two). */
void sched_set_own_lists_min(Sched *s, unsigned n);

/* Queue walks remember what they passed over (WalkMemo) and skip a walk that would pass the
 * same waiters again; off, every walk runs in full. Decisions are the same either way: the
 * tests compare the two, and a benchmark may measure what the memos save. On by default. */
void sched_set_walk_memos(Sched *s, bool on);

/* The unit of every `now` and `submitted`: 1 (seconds, the default) or e.g. 1000 (ms). Set
 * it before the first request. */
void sched_set_time_scale(Sched *s, uint64_t units_per_second);

/* Called for every request that the queue places later (release, tick, uncordon, new node,
 * ...), in placement order; not for a placement returned directly by sched_submit(). d is
 * valid during the call only; the callback must not call into the Sched. */
typedef struct Decision Decision;
typedef void (*SchedPlacedFn)(void *userdata, const char *request_id, const Decision *d);
void sched_set_on_placed(Sched *s, SchedPlacedFn fn, void *userdata);

/* ---- sites and trust ---- */

int sched_add_site(Sched *s, const char *name, SiteKind kind, Error *err);
/* Mark (or unmark) a user as a trusted tenant of a site. */
int sched_site_trust(Sched *s, const char *site, const char *user, bool trusted, Error *err);
/* Offer every node of a site to the waiting requests again, after a change of who may use
 * what there that no node's change reports (a trust grant): a request that waited for lack
 * of trust is placed now, not at the next release on its node. May place waiting requests
 * (on_placed). -ENOENT for an unknown site. */
int sched_site_offer(Sched *s, const char *site, uint64_t now, Error *err);
bool sched_site_is_trusted(const Sched *s, const char *site, const char *user);
/* Whether a site of that name was ever added (a site stays once added). */
bool sched_site_exists(const Sched *s, const char *site);
/* The relation of a user to a node; _RELATION_INVALID when the node does not exist. */
Relation sched_relation(const Sched *s, const char *node, const char *user);

/* ---- nodes and devices ---- */

typedef struct SchedLabel {
    const char *key, *value;
} SchedLabel;

typedef struct DeviceSpec {
    const char *class_name; /* a whole-card class of the catalog; NULL: unclassified (R8),
                             * shown in the inventory and capacity, never placed */
    const char *address;    /* e.g. PCI address 0000:17:00.0; optional */
    unsigned memory_gb;     /* 0: the class's memory */
    Binding binding;        /* solo/lab: per-GPU (R7); datacenter: ignored, follows the mode */
    bool mig_enabled;       /* MIG mode on: serves the class's MIG slices, not whole-GPU work */
    bool reset_verified;    /* consumer card: passed the agent's reset cycle check (R9) */
    /* The MIG profiles NVML offers on this GPU (R2c), as its agent reports them: a profile of
     * the class not among them is never offered on it (capacity, placement, R18). Names that
     * are not a profile of the class are ignored. Not reported (false): every profile of the
     * class, as the SPEC's table has them. */
    bool mig_profiles_reported;
    const char *const *mig_profiles;
    size_t n_mig_profiles;
} DeviceSpec;

typedef struct NodeSpec {
    const char *name;
    const char *site;
    Platform platform;
    const char *owner;        /* user name of the owner (datacenter: the operator) */
    const SchedLabel *labels; /* datacenter GPU nodes need SCHED_MODE_LABEL (R3) */
    size_t n_labels;
    bool kata;        /* can run Kata containers */
    bool mig_in_kata; /* MIG-backed vGPU for Kata on the host (R2c) */
    bool cordoned;
    unsigned cpu_cores;           /* cores offered for `cpu` work (R11) */
    unsigned time_slice_replicas; /* 0: SCHED_DEFAULT_TIME_SLICE_REPLICAS */
    /* Mac only (R10): unified memory picks the apple class; usable is the agent's report
     * (wired limit minus owner headroom). Every Mac has exactly one GPU, implicitly. */
    unsigned apple_unified_memory_gb;
    unsigned apple_usable_memory_gb;
    /* usable is the report even when 0 (the headroom leaves nothing: the GPU is quarantined,
     * saying so); false: 0 means not reported, and usable is macOS's default wired limit less
     * the default headroom (apple_default_usable_gb(), R10), never the whole unified memory */
    bool apple_usable_known;
    const DeviceSpec *devices;
    size_t n_devices;
} NodeSpec;

/* Add a node; every check passes or nothing changes. Errors: -EEXIST (name taken),
 * -ENOENT (site or class unknown), -EINVAL (R3 label missing/unknown, bad spec),
 * -EOPNOTSUPP (mode vm-vgpu, R2d). May place waiting requests (on_placed). */
int sched_add_node(Sched *s, const NodeSpec *spec, uint64_t now, Error *err);
/* Remove a node without allocations; -EBUSY naming the workloads otherwise. */
int sched_remove_node(Sched *s, const char *node, Error *err);

/* Cordon: no new placements on the node (running work stays). Uncordon may place waiters. */
int sched_node_set_cordoned(Sched *s, const char *node, bool cordoned, uint64_t now, Error *err);
/* Unreachable nodes take no new placements either (the agent stopped reporting). */
int sched_node_set_unreachable(Sched *s, const char *node, bool unreachable, uint64_t now,
                               Error *err);
/* Switch a datacenter node's mode (R3, R4): refused with -EBUSY naming the workloads while
 * any GPU of the node is allocated (drain first), -EOPNOTSUPP for vm-vgpu (R2d). */
int sched_node_set_mode(Sched *s, const char *node, NodeMode mode, uint64_t now, Error *err);
/* Set or replace a label (the mode label goes through sched_node_set_mode's checks). */
int sched_node_set_label(Sched *s, const char *node, const char *key, const char *value,
                         uint64_t now, Error *err);
int sched_node_set_capabilities(Sched *s, const char *node, bool kata, bool mig_in_kata,
                                uint64_t now, Error *err);
/* A Mac's usable GPU memory as the agent reports it (R10). -EBUSY when running work would
 * not fit any more. */
int sched_node_set_apple_memory(Sched *s, const char *node, unsigned usable_gb, uint64_t now,
                                Error *err);

int sched_device_set_cordoned(Sched *s, const char *node, unsigned dev, bool cordoned, uint64_t now,
                              Error *err);
/* Quarantine (reason required) or release from quarantine (reason NULL). A quarantined GPU
 * takes no new work; running work stays until released. */
int sched_device_set_quarantine(Sched *s, const char *node, unsigned dev, const char *reason,
                                uint64_t now, Error *err);
/* Lab/solo per-GPU mode (R7): -EBUSY while allocated; -EINVAL on datacenter nodes. */
int sched_device_set_binding(Sched *s, const char *node, unsigned dev, Binding binding,
                             uint64_t now, Error *err);
/* Turn MIG mode on/off: -EBUSY while allocated, -EINVAL for a card without MIG profiles. */
/* R2c/R16: the memory slots of MIG instances a process Einsora did not start works in (the
 * node's agent reports them): never offered. Slots a slice of ours holds stay its own. */
int sched_device_set_mig_reserved(Sched *s, const char *node, unsigned dev, uint8_t slots,
                                  uint64_t now, Error *err);
int sched_device_set_mig(Sched *s, const char *node, unsigned dev, bool enabled, uint64_t now,
                         Error *err);
/* The agent's reset cycle check of a consumer GPU (R9): passed makes it eligible for
 * passthrough; failed quarantines it with the reason. */
int sched_device_reset_result(Sched *s, const char *node, unsigned dev, bool passed,
                              const char *reason, uint64_t now, Error *err);

/* Read-only views (pointers stay valid until the next mutation of the Sched). */
typedef struct DeviceInfo {
    const char *class_name; /* NULL: unclassified */
    int class_index;        /* -1: unclassified */
    const char *address;
    unsigned memory_gb;
    Binding binding;
    bool mig_enabled, reset_verified, cordoned;
    uint8_t mig_layout; /* bit i: memory slot i used */
    DeviceState state;
    const char *quarantine_reason; /* NULL unless quarantined */
    unsigned n_allocations;
    const char *user; /* user of the allocations when they all have one; NULL otherwise */
} DeviceInfo;

typedef struct NodeInfo {
    const char *name, *site, *owner;
    SiteKind site_kind;
    Platform platform;
    NodeMode mode;
    bool kata, mig_in_kata, cordoned, unreachable;
    unsigned cpu_cores, cpu_used;
    unsigned apple_usable_memory_gb, apple_used_memory_gb, macos_vms;
    unsigned time_slice_replicas;
    size_t n_devices;
    size_t n_labels;
} NodeInfo;

size_t sched_node_count(const Sched *s);
/* Nodes in insertion order (i < sched_node_count()). */
int sched_node_info_at(const Sched *s, size_t i, NodeInfo *ret);
int sched_node_info(const Sched *s, const char *node, NodeInfo *ret);
int sched_node_label(const Sched *s, const char *node, size_t i, SchedLabel *ret);
int sched_device_info(const Sched *s, const char *node, unsigned dev, DeviceInfo *ret);

/* ---- requests and decisions ---- */

typedef struct RequestSpec {
    const char *id;
    const char *user;
    WorkloadKind kind;
    GuestOs guest;               /* VMs only */
    const char *class_name;      /* a class, "cpu", or NULL with memory_gb > 0 */
    unsigned memory_gb;          /* with no class: the smallest class with at least this memory;
                                  * on a Mac: the memory the workload needs from the usable pool */
    unsigned count;              /* GPUs of one node (a gang); cores for cpu; 0 means 1 */
    bool share;                  /* may time-slice a GPU with the same user's workloads (R2e) */
    const char *const *fallback; /* ordered alternatives (class names or "cpu"), R13 */
    size_t n_fallback;
    uint64_t wait_s;         /* seconds to wait for the first choice before falling back */
    uint64_t submitted;      /* submission time (time scale units); the queue orders by it */
    EndpointRuntime runtime; /* endpoints: wanted runtime, NONE = whatever fits (R14) */
    bool wait_for_nodes;     /* R18: wait even when no node of the fleet could ever run it */
    bool gguf;               /* endpoints: the model is GGUF weights (on a Mac: llama.cpp) */
} RequestSpec;

typedef struct Placement {
    const char *node;       /* node name */
    const char *class_name; /* the class actually used (the first choice or a fallback) */
    int class_index;
    Method method;
    ContainerRuntime container_runtime;
    EndpointRuntime endpoint_runtime;
    unsigned n_devices;                       /* GPUs (0 for cpu) */
    unsigned devices[SCHED_NODE_MAX_DEVICES]; /* device indices on the node */
    unsigned mig_start, mig_slots;            /* MIG only: memory slot range [start, start+slots) */
    unsigned cpu_cores;                       /* cpu only */
    unsigned memory_gb;                       /* Mac only: memory taken from the usable pool */
    int fallback_index; /* -1: first choice; else index into the request's fallbacks */
} Placement;

struct Decision {
    DecisionKind kind;
    SchedReason reason;
    char message[SCHED_MESSAGE_MAX]; /* one plain sentence */
    size_t queue_position;           /* waiting: 1 = head of the queue */
    bool fallback_open;              /* waiting: its alternatives may be taken now (R13) */
    Placement placement;             /* placed only */
};

/* Decide a new request. Returns 0 with *ret filled (placed, waiting or refused) or a negative
 * errno for a call that cannot be judged at all (-ENOMEM). R18: a request that no node of the
 * fleet could ever run (by size, by who may use the class, by Kata / mig_in_kata; feasible.c
 * says what "ever" assumes), with none of its alternatives either, is refused with that
 * reason (owner-only, internal-only, no-kata, no-mig-in-kata, too-large, no-node) unless
 * spec->wait_for_nodes, in which case it waits showing that reason. A refused request is not kept;
 * a duplicate id is refused with SCHED_REASON_DUPLICATE and changes nothing (R16). ret may be NULL
 * when the caller needs no answer. */
int sched_submit(Sched *s, const RequestSpec *spec, uint64_t now, Decision *ret, Error *err);

/* Crash recovery: re-apply a placement the store acknowledged, exactly (node, devices, MIG
 * slots, method and runtimes as recorded). It is checked against every rule (R2, R10, R15,
 * capacity) and refused with -EINVAL / -EBUSY and a sentence when it does not hold, so a
 * corrupt database cannot break R15 -- except those that depend on who the user is to the
 * node (trust, ownership), which may have changed since and count from the next placement
 * on: those are judged as of the placement. Apply all placed requests first, then sched_submit()
 * the waiting ones in their original order with their original `submitted` times. */
int sched_restore_placed(Sched *s, const RequestSpec *spec, const Placement *p, Error *err);

/* Release a placed request or cancel a waiting one (it is forgotten either way). Freed
 * capacity is offered to the queue at once (on_placed). -ENOENT for an unknown id. */
int sched_release(Sched *s, const char *id, uint64_t now, Error *err);

/* A hint from a caller that knows its next operations (a stream, a batch, a replay): announce
 * the request id of each operation (a submit or a release), in order, SCHED_ANNOUNCE_AHEAD
 * operations before applying it. The core starts loading, in stages, what those operations
 * will read (the id index, the request, its node and devices), so that their cache misses
 * overlap instead of following one another. Decides nothing and changes nothing a decision
 * reads: the decisions are the same with or without it, and an id announced out of turn, or
 * not there at all, costs only the loads. */
#define SCHED_ANNOUNCE_AHEAD 8
void sched_announce(Sched *s, const char *id);

/* Re-evaluate the queue at time now: open the fallbacks of requests whose wait ran out
 * (R13) and try every request with open fallbacks. Returns the number of requests placed
 * (each also reported through on_placed). Cheap when no deadline has passed. */
int sched_tick(Sched *s, uint64_t now);

/* The current decision for a request (placed or waiting, with its queue position; O(log n)).
 * The position is the arrival rank among waiting requests, which is the FIFO position except
 * for requests re-submitted by a restore with older submission times. */
int sched_request_decision(const Sched *s, const char *id, Decision *ret);
/* Where a placed request runs: the decision's placement without its sentence or queue
 * position, for a caller (an agent) that needs only the node and devices. -ENOENT for an
 * unknown id, -EAGAIN while the request waits. */
int sched_request_placement(const Sched *s, const char *id, Placement *ret);
/* The request as submitted (strings owned by the Sched; fallback included). */
int sched_request_spec(const Sched *s, const char *id, RequestSpec *ret);
size_t sched_request_count(const Sched *s);
size_t sched_waiting_count(const Sched *s);
/* Waiting request ids in queue order (i < sched_waiting_count()); O(i). */
const char *sched_waiting_at(const Sched *s, size_t i);
/* The earliest fallback deadline still ahead among waiting requests (UINT64_MAX: none), so
 * the server knows when to call sched_tick(). */
uint64_t sched_next_deadline(const Sched *s);

/* ---- capacity (R6) ---- */

/* How a unit of a class is offered: "vm" (passthrough, vfio-bound; counted by
 * vm_device_name), "container" (host-bound whole GPUs and MIG slices; counted by
 * container_resource + node_selector), "apple" (a Mac's GPU), "cpu" (cores). */
typedef enum CapacityMode {
    CAPACITY_VM,
    CAPACITY_CONTAINER,
    CAPACITY_APPLE,
    CAPACITY_CPU,
    _CAPACITY_MODE_MAX,
    _CAPACITY_MODE_INVALID = -1,
} CapacityMode;

const char *capacity_mode_to_string(CapacityMode v);
CapacityMode capacity_mode_from_string(const char *s);

typedef struct CapacityRow {
    int class_index;
    const char *class_name;
    const char *site; /* NULL in rows summed over every site */
    CapacityMode mode;
    const char *resource;      /* vm_device_name or container_resource (NULL for apple/cpu) */
    const char *node_selector; /* container rows */
    /* Units: GPUs, MIG instances of the slice's profile, Macs, or cores. For whole GPUs
     * total = allocated + free + cordoned + quarantined. For MIG slices, total is what the
     * MIG-enabled GPUs would hold of this profile alone, free is what still fits now next to
     * the other profiles' slices, so total may exceed the sum. */
    uint64_t total, allocated, free, cordoned, quarantined;
} CapacityRow;

/* Every (class, site, mode) that has units, then the per-class sums over sites (site NULL).
 * Classes without units appear once with zeros (R8: zero capacity, not missing). Caller
 * frees *ret with free(). */
int sched_capacity(const Sched *s, CapacityRow **ret, size_t *ret_n, Error *err);
/* One class summed with filters: site NULL = every site, mode _CAPACITY_MODE_INVALID = every
 * mode. */
int sched_capacity_class(const Sched *s, const char *class_name, const char *site,
                         CapacityMode mode, CapacityRow *ret, Error *err);
/* Devices no class matches (R8): shown, never dropped. */
size_t sched_unclassified_count(const Sched *s);

typedef struct ResourceCount {
    const char *name; /* e.g. nvidia.com/gpu, nvidia.com/mig-1g.10gb, nvidia.com/GH100_... */
    uint64_t count;
} ResourceCount;

/* What a datacenter node advertises to Kubernetes in its mode (R3, R6): container mode ->
 * container_resource per whole GPU and per MIG profile instance that fits its GPUs' current
 * layouts plus already allocated ones; vm-passthrough -> vm_device_name per GPU. Caller frees
 * *ret with free() (names point into the catalog). */
int sched_node_resources(const Sched *s, const char *node, ResourceCount **ret, size_t *ret_n,
                         Error *err);

/* ---- invariants ---- */

/* Check R15, R16, R2e, R10 and the bookkeeping. 0, or -EUCLEAN with the first violation as a
 * sentence. O(state); meant for tests, debug runs and after restore. */
int sched_check(const Sched *s, Error *err);
