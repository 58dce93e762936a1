/* sync.h: `einsora k8s sync`, the datacenter's link between a Kubernetes cluster and the
 * control plane: a process beside `einsora serve` that talks to it over its HTTP API with an
 * admin token, as the agent of every GPU node of the cluster (R3-R6):
 *
 * - lists and watches the cluster's Nodes (resourceVersion, bookmarks, relist on 410 Gone);
 * - keeps one Einsora node per Kubernetes node with NVIDIA GPUs (node-map.h): registers it,
 *   pushes its description when its mode, class or GPU count changes, mirrors
 *   spec.unschedulable as the node's cordon, heartbeats it while it is Ready (a node that is
 *   not Ready, or deleted, stops heartbeating and the control plane marks it unreachable);
 * - does the relabel task of a mode switch (switch.h), reporting its progress to the switch;
 * - runs each placement on its node as a Pod or VMI (workloads.h): created when placed,
 *   activated when Running, reported in the heartbeat while it runs (so one that ends or
 *   disappears frees its allocation), deleted when released.
 *
 * Stateless: the control plane holds the switch and its task, the cluster holds where the
 * relabel stands, so a sync that is killed and restarted carries on. */
#pragma once

#include <signal.h>
#include <stdio.h>

#include "core/catalog.h"
#include "k8s/kubeconfig.h"
#include "k8s/node-map.h"
#include "k8s/workloads.h"
#include "util/error.h"

typedef struct K8sSyncConfig {
    const char *server, *token; /* the control plane; an admin token */
    const char *ca_file;        /* its private CA (EINSORA_CACERT), NULL: the system's */
    const KubeConfig *kube;
    const Catalog *catalog;
    K8sSite site;
    K8sWorkloadSite work;      /* placements: namespace, images, Kata's RuntimeClass */
    unsigned interval_s;       /* heartbeat and watch period; 0: 5 */
    unsigned switch_timeout_s; /* for the GPU Operator after a relabel; 0: 600 */
    FILE *log;                 /* one line per thing done; NULL: quiet */
    volatile sig_atomic_t *stop;
} K8sSyncConfig;

/* Run until *cfg->stop. Fails only when it cannot start (bad configuration). */
int k8s_sync_run(const K8sSyncConfig *cfg, Error *err);
