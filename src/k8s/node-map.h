/* node-map.h: what a Kubernetes node means to Einsora (R3, R6, R8): its mode from the GPU
 * Operator's label, its GPU class from nvidia.com/gpu.product or the PCI id in a KubeVirt
 * resource name, its GPU count from status.allocatable, cordon and readiness; and the
 * Einsora node description made from it. Under the GPU Operator's mixed MIG strategy, whole
 * GPUs are nvidia.com/gpu and each slice profile nvidia.com/mig-<profile>: the slices are laid
 * out on the node's other GPUs (nvidia.com/gpu.count minus the whole ones), largest first,
 * at their allowed start slots; the kubelet, not Einsora, picks the real instance. Also which pods
 * hold GPUs, and when the GPU Operator has converged after a relabel. Pure (no I/O). */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "core/catalog.h"
#include "util/error.h"

#define K8S_MODE_LABEL "nvidia.com/gpu.workload.config"
#define K8S_PRODUCT_LABEL "nvidia.com/gpu.product"

typedef struct K8sNodeView {
    char name[254];
    bool has_gpus;        /* an NVIDIA GPU node (labels or allocatable say so) */
    char mode[24];        /* container | vm-passthrough */
    char mode_error[256]; /* set when the label is not a mode (R3): shown, the node is not served */
    int class_index;      /* -1: unclassified (R8) */
    char resource[128];   /* the GPU resource the node advertises (nvidia.com/gpu,
                             nvidia.com/<DEVICE>) */
    unsigned count;       /* GPUs of that resource in status.allocatable */
    bool resource_differs; /* passthrough: the node's device name is not the class's vm_device_name
                            */
    unsigned mig[8]; /* nvidia.com/mig-<profile> counts (mixed strategy), by slot of mig_profiles */
    unsigned total_gpus; /* label nvidia.com/gpu.count (0: not labelled) */
    /* MIG GPUs (mixed strategy) laid out from the counts: instances per GPU, start slots */
    unsigned n_mig_gpus;
    struct {
        unsigned n;
        unsigned profile[7]; /* index into the class's mig_profiles */
        unsigned start[7];
    } mig_gpu[16];
    bool mig_unplaced; /* the counts did not fit the GPUs the node has */
    bool unschedulable;
    bool ready;
    unsigned cpus; /* whole cores of status.allocatable.cpu, offered to cpu work (R11) */
} K8sNodeView;

int k8s_node_view(const Catalog *cat, json_t *node, K8sNodeView *ret, Error *err);

/* Who and where the nodes are, for their descriptions. */
typedef struct K8sSite {
    const char *site;  /* site name */
    const char *owner; /* the operator's user name */
    const char *caps;  /* extra capabilities, comma-separated (kata, mig_in_kata); may be NULL */
} K8sSite;

/* The Einsora node description (PUT /v1/nodes/N) of a GPU node: one device per GPU of its
 * resource, bound as its mode says, capability "k8s". */
json_t *k8s_node_spec_json(const Catalog *cat, const K8sNodeView *v, const K8sSite *site,
                           bool cordoned);

/* Whether a pod asks for an NVIDIA GPU resource (any container, limits or requests) and has
 * not finished. */
bool k8s_pod_holds_gpu(json_t *pod);

/* The GPU Operator converged to mode: the other mode's resource is gone, the mode's resource
 * is there with count GPUs, the node is Ready. Otherwise false and what is missing in why. */
bool k8s_node_converged(json_t *node, const char *mode, const char *vm_resource, unsigned count,
                        char *why, size_t size);

/* A quantity of whole devices ("8"); -1 when it is not one. */
long k8s_quantity_count(json_t *q);
