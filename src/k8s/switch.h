/* switch.h: the Kubernetes side of a datacenter node's mode switch (R3, R4): cordon
 * (spec.unschedulable), evict the node's GPU pods through the Eviction API (a PDB that
 * blocks is waited for and named), stop KubeVirt VMIs with host GPUs when the drain allows
 * it, relabel nvidia.com/gpu.workload.config, wait for the GPU Operator to converge, uncordon.
 *
 * Resumable without local state: where the switch stands is written on the Node itself
 * (annotations einsora.io/switch-to, einsora.io/was-unschedulable, einsora.io/relabeled-at),
 * so a sync that is killed and restarted picks it up from the cluster. Never relabels a node
 * that still runs GPU pods. Each call does what can be done now and never waits. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "k8s/kclient.h"

#define K8S_ANN_SWITCH_TO "einsora.io/switch-to"
#define K8S_ANN_WAS_UNSCHEDULABLE "einsora.io/was-unschedulable"
#define K8S_ANN_RELABELED_AT "einsora.io/relabeled-at"

typedef struct K8sSwitchJob {
    char node[254];
    uint64_t task_id; /* the control plane's task */
    char mode[24];    /* target: container | vm-passthrough */
    bool drain;       /* drain wait or evict (else a node with GPU pods is refused, R4) */
    bool evict_pods;  /* drain evict: GPU pods are evicted; drain wait: waited for (R4) */
    bool stop_vms; /* drain evict: VMIs with host GPUs are stopped (a passthrough VM cannot migrate)
                    */
    unsigned count;     /* GPUs the node must show in the new mode */
    unsigned timeout_s; /* for the GPU Operator, from the relabel */
    /* Set by each pass: the spec.unschedulable it wrote (0 or 1), -1 when it wrote none. The
     * sync must not take its own write for a cordon or uncordon made in Kubernetes. */
    int wrote_unschedulable;
} K8sSwitchJob;

typedef enum K8sSwitchState {
    K8S_SWITCH_RUNNING,
    K8S_SWITCH_DONE,
    K8S_SWITCH_FAILED
} K8sSwitchState;

/* The switch's first step on the Kubernetes side: spec.unschedulable true, annotated with the
 * target mode and what spec.unschedulable was. Idempotent only while the node carries no such
 * annotation (a second call would take the switch's own cordon for the node's). Done by the
 * first pass of k8s_switch_advance(), or by the sync as soon as the control plane cordons a
 * switching node that drains its Einsora workloads first (R4: cordon, then drain). ret (may be
 * NULL): the Node as patched. */
int k8s_switch_cordon(K8sClient *c, const char *name, json_t *node, const char *mode, json_t **ret,
                      Error *err);

/* One pass. node: the latest Node object (NULL: deleted from the cluster). now_s: wall
 * clock seconds. msg: where the switch stands, or why it failed. */
K8sSwitchState k8s_switch_advance(K8sClient *c, K8sSwitchJob *job, json_t *node, int64_t now_s,
                                  char *msg, size_t size);

/* After a switch that failed with the node cordoned (K8S_ANN_WAS_UNSCHEDULABLE still on it),
 * the operator's uncordon in Einsora lifts the switch's cordon too: spec.unschedulable back to
 * what it was before the switch, the switch's annotations removed. 1 when it did, 0 when the
 * node carries no such cordon, -errno with err set when the patch failed. */
int k8s_switch_lift_cordon(K8sClient *c, const char *name, json_t *node, Error *err);

/* What spec.unschedulable was before the switch whose cordon is on the node (its annotation
 * einsora.io/was-unschedulable); false when none is. */
bool k8s_switch_was_unschedulable(json_t *node);

/* Whether a switch's first step (its cordon, annotated einsora.io/switch-to) is on the node. */
bool k8s_switch_cordoned(json_t *node);
