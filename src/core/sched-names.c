/* sched-names.c: the string names of every placement enum, for serialisation and messages. */
#include "sched.h"
#include "util/name-table.h"

/* One to/from pair per enum (util/name-table.h); the tables are indexed by the enum value. */
NAME_TABLE(
        SiteKind, site_kind,
        _SITE_KIND_MAX, [SITE_SOLO] = "solo", [SITE_LAB] = "lab", [SITE_DATACENTER] = "datacenter")
NAME_TABLE(Platform, platform,
           _PLATFORM_MAX, [PLATFORM_LINUX] = "linux", [PLATFORM_MACOS] = "macos")
NAME_TABLE(NodeMode, node_mode,
           _NODE_MODE_MAX, [NODE_MODE_NONE] = "none", [NODE_MODE_CONTAINER] = "container",
           [NODE_MODE_VM_PASSTHROUGH] = "vm-passthrough", [NODE_MODE_VM_VGPU] = "vm-vgpu")
NAME_TABLE(Binding, binding, _BINDING_MAX, [BINDING_HOST] = "host", [BINDING_VFIO] = "vfio")
NAME_TABLE(DeviceState, device_state,
           _DEVICE_STATE_MAX, [DEVICE_FREE] = "free", [DEVICE_ALLOCATED] = "allocated",
           [DEVICE_CORDONED] = "cordoned", [DEVICE_QUARANTINED] = "quarantined")
NAME_TABLE(Relation, relation, _RELATION_MAX, [RELATION_OWNER] = "owner",
           [RELATION_TRUSTED] = "trusted", [RELATION_STRANGER] = "stranger")
NAME_TABLE(WorkloadKind, workload_kind,
           _WORKLOAD_KIND_MAX, [WORKLOAD_VM] = "vm", [WORKLOAD_CONTAINER] = "container",
           [WORKLOAD_NOTEBOOK] = "notebook", [WORKLOAD_ENDPOINT] = "endpoint")
NAME_TABLE(GuestOs, guest_os, _GUEST_OS_MAX, [GUEST_LINUX] = "linux", [GUEST_MACOS] = "macos")
NAME_TABLE(Method, method,
           _METHOD_MAX, [METHOD_PASSTHROUGH] = "passthrough", [METHOD_CONTAINER] = "container",
           [METHOD_MIG] = "mig", [METHOD_TIME_SLICE] = "time-slice",
           [METHOD_APPLE_WHOLE] = "apple-whole", [METHOD_CPU] = "cpu")
NAME_TABLE(ContainerRuntime, container_runtime,
           _CONTAINER_RUNTIME_MAX, [CONTAINER_RUNTIME_NONE] = "none",
           [CONTAINER_RUNTIME_RUNC] = "runc", [CONTAINER_RUNTIME_KATA] = "kata")
NAME_TABLE(
        EndpointRuntime, endpoint_runtime,
        _ENDPOINT_RUNTIME_MAX, [ENDPOINT_RUNTIME_NONE] = "none", [ENDPOINT_RUNTIME_VLLM] = "vllm",
        [ENDPOINT_RUNTIME_MLX] = "mlx", [ENDPOINT_RUNTIME_LLAMA_CPP] = "llama.cpp")
NAME_TABLE(DecisionKind, decision_kind, _DECISION_KIND_MAX, [DECISION_PLACED] = "placed",
           [DECISION_WAITING] = "waiting", [DECISION_REFUSED] = "refused")
NAME_TABLE(CapacityMode, capacity_mode, _CAPACITY_MODE_MAX, [CAPACITY_VM] = "vm",
           [CAPACITY_CONTAINER] = "container", [CAPACITY_APPLE] = "apple", [CAPACITY_CPU] = "cpu")
NAME_TABLE(
        SchedReason, sched_reason,
        _SCHED_REASON_MAX, [SCHED_REASON_NONE] = "none", [SCHED_REASON_FALLBACK] = "fallback",
        [SCHED_REASON_NO_CAPACITY] = "no-capacity", [SCHED_REASON_MODE_MISMATCH] = "mode-mismatch",
        [SCHED_REASON_OWNER_ONLY] = "owner-only", [SCHED_REASON_INTERNAL_ONLY] = "internal-only",
        [SCHED_REASON_NO_KATA] = "no-kata", [SCHED_REASON_NO_MIG_IN_KATA] = "no-mig-in-kata",
        [SCHED_REASON_MACOS_VM_LIMIT] = "macos-vm-limit",
        [SCHED_REASON_RESET_CHECK] = "reset-check", [SCHED_REASON_CORDONED] = "cordoned",
        [SCHED_REASON_QUEUED] = "queued", [SCHED_REASON_NO_NODE] = "no-node",
        [SCHED_REASON_TOO_LARGE] = "too-large", [SCHED_REASON_VGPU] = "vgpu",
        [SCHED_REASON_UNKNOWN_CLASS] = "unknown-class",
        [SCHED_REASON_LINUX_GUEST_GPU] = "linux-guest-gpu",
        [SCHED_REASON_MACOS_GUEST_NOT_MAC] = "macos-guest-not-mac",
        [SCHED_REASON_VM_MIG] = "vm-mig", [SCHED_REASON_VM_AMD] = "vm-amd",
        [SCHED_REASON_BAD_COUNT] = "bad-count", [SCHED_REASON_BAD_RUNTIME] = "bad-runtime",
        [SCHED_REASON_BAD_REQUEST] = "bad-request", [SCHED_REASON_DUPLICATE] = "duplicate")

bool sched_reason_is_refusal(SchedReason v) {
    return v >= SCHED_REASON_VGPU && v < _SCHED_REASON_MAX;
}
