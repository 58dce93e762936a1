/* workloads.h: a placement on a Kubernetes node as the object that runs it (R17): a Pod for
 * containers, notebooks and endpoints (the node pinned, resources.limits of the node's GPU
 * resource or the MIG slice's, runtimeClassName for Kata), a KubeVirt
 * VirtualMachineInstance for VMs (spec.domain.devices.gpus with the node's deviceName).
 * The kubelet's device plugin picks which GPUs of the node: the allocation is node + count.
 * Pure. */
#pragma once

#include <jansson.h>

#include "core/catalog.h"

#define K8S_LABEL_REQUEST "einsora.io/request"

typedef struct K8sWorkloadSite {
    const char *namespace_;         /* where workloads run */
    const char *pod_image;          /* the container image of pods */
    const char *vm_image;           /* the containerDisk image of VMIs */
    const char *kata_runtime_class; /* the RuntimeClass of Kata with GPUs */
} K8sWorkloadSite;

/* w: one of a heartbeat answer's workloads ({id, user, kind, placement}); node_resource: the
 * GPU resource the node advertises. NULL when w is not a workload this can run. */
json_t *k8s_workload_manifest(const Catalog *cat, const K8sWorkloadSite *site, json_t *w,
                              const char *node_resource);

/* "einsora-<id>" */
void k8s_workload_name(json_int_t id, char *buf, size_t size);
