/* switch.c: cordon, evict, relabel, wait for the GPU Operator, uncordon, on a Kubernetes node. */
#include "switch.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k8s/node-map.h"
#include "util/macro.h"

static const char *annotation(json_t *node, const char *key) {
    return json_string_value(json_object_get(
            json_object_get(json_object_get(node, "metadata"), "annotations"), key));
}

/* The node's mode label as written; NULL when it has none. Not the GPU Operator's default
 * ("container"): a node without the label is an error to fix (R3), and the switch that fixes
 * it must write the label, not find it "done before". */
static const char *label_mode(json_t *node) {
    return json_string_value(json_object_get(
            json_object_get(json_object_get(node, "metadata"), "labels"), K8S_MODE_LABEL));
}

static int patch_node(K8sClient *c, const char *node, json_t *patch, Error *err) {
    char path[320];
    snprintf(path, sizeof(path), "/api/v1/nodes/%s", node);
    int r = k8s_merge_patch(c, path, patch, NULL, err);
    json_decref(patch);
    return r;
}

/* "ns/name" of an object into buf, appended with a separator. */
static void append_name(char *buf, size_t size, json_t *obj, const char *extra) {
    json_t *md = json_object_get(obj, "metadata");
    size_t len = strlen(buf);
    if (len + 4 >= size)
        return;
    snprintf(buf + len, size - len, "%s%s/%s%s", len ? ", " : "",
             strempty(json_string_value(json_object_get(md, "namespace"))),
             strempty(json_string_value(json_object_get(md, "name"))), strempty(extra));
}

/* The budget an eviction's 429 names ("The disruption budget X needs ..."), into buf. */
static void blocking_budget(json_t *status, char *buf, size_t size) {
    size_t i;
    json_t *cause;
    json_array_foreach(json_object_get(json_object_get(status, "details"), "causes"), i, cause) {
        const char *m = json_string_value(json_object_get(cause, "message"));
        const char *reason = json_string_value(json_object_get(cause, "reason"));
        if (m && reason && STREQ(reason, "DisruptionBudget")) {
            snprintf(buf, size, " (blocked: %.200s)", m);
            return;
        }
    }
    snprintf(buf, size, " (blocked by a PodDisruptionBudget: %.200s)",
             strempty(json_string_value(json_object_get(status, "message"))));
}

/* Evict the node's GPU pods. Returns how many remain (and names them in what), or an error. */
static int drain_pods(K8sClient *c, const char *node, bool evict, char *what, size_t size,
                      Error *err) {
    char query[320];
    snprintf(query, sizeof(query), "fieldSelector=spec.nodeName%%3D%s", node);
    json_t *pods;
    char *rv;
    int r = k8s_list(c, "/api/v1/pods", query, &pods, &rv, err);
    if (r < 0)
        return r;
    free(rv);
    int left = 0;
    size_t i;
    json_t *pod;
    json_array_foreach(pods, i, pod) {
        if (!k8s_pod_holds_gpu(pod))
            continue;
        json_t *md = json_object_get(pod, "metadata");
        const char *ns = json_string_value(json_object_get(md, "namespace")),
                   *name = json_string_value(json_object_get(md, "name"));
        if (!ns || !name)
            continue;
        left++;
        if (json_object_get(md, "deletionTimestamp") || !evict) {
            append_name(what, size, pod, evict ? " (terminating)" : "");
            continue;
        }
        char path[600];
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s/eviction", ns, name);
        json_t *ev = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "policy/v1", "kind",
                               "Eviction", "metadata", "name", name, "namespace", ns);
        long status = 0;
        json_t *answer = NULL;
        r = k8s_request(c, "POST", path, NULL, ev, &status, &answer, err);
        json_decref(ev);
        if (r >= 0 && status == 429) {
            char why[240];
            blocking_budget(answer, why, sizeof(why));
            append_name(what, size, pod, why);
        } else if (r >= 0 && (status == 200 || status == 201))
            append_name(what, size, pod, " (evicted)");
        else if (r >= 0 && status == 404)
            left--; /* gone meanwhile */
        else if (r >= 0)
            r = k8s_status_error(c, "POST", path, status, answer, err);
        json_decref(answer);
        if (r < 0) {
            json_decref(pods);
            return r;
        }
    }
    json_decref(pods);
    return left;
}

/* A VMI that holds host GPUs now: one that has finished (KubeVirt keeps the object, in phase
 * Succeeded or Failed) holds none, and waiting for it would wait forever. */
static bool vmi_has_host_gpu(json_t *vmi) {
    const char *phase = json_string_value(json_object_get(json_object_get(vmi, "status"), "phase"));
    if (phase && (STREQ(phase, "Succeeded") || STREQ(phase, "Failed")))
        return false;
    json_t *dev =
            json_object_get(json_object_get(json_object_get(vmi, "spec"), "domain"), "devices");
    return json_array_size(json_object_get(dev, "gpus")) ||
           json_array_size(json_object_get(dev, "hostDevices"));
}

/* Stop (when allowed) the node's VMIs with host GPUs. Returns how many remain. */
static int drain_vmis(K8sClient *c, const char *node, bool stop, char *what, size_t size,
                      Error *err) {
    json_t *vmis;
    char *rv;
    int r = k8s_list(c, "/apis/kubevirt.io/v1/virtualmachineinstances", NULL, &vmis, &rv, err);
    if (r == -ENOENT) { /* KubeVirt is not installed: no VMIs */
        error_clear(err);
        return 0;
    }
    if (r < 0)
        return r;
    free(rv);
    int left = 0;
    size_t i;
    json_t *vmi;
    json_array_foreach(vmis, i, vmi) {
        const char *on =
                json_string_value(json_object_get(json_object_get(vmi, "status"), "nodeName"));
        if (!on || STRNEQ(on, node) || !vmi_has_host_gpu(vmi))
            continue;
        left++;
        if (!stop) {
            append_name(what, size, vmi, " (VM with host GPUs: waiting for it to stop)");
            continue;
        }
        json_t *md = json_object_get(vmi, "metadata");
        char path[600];
        snprintf(path, sizeof(path),
                 "/apis/kubevirt.io/v1/namespaces/%s/virtualmachineinstances/%s",
                 strempty(json_string_value(json_object_get(md, "namespace"))),
                 strempty(json_string_value(json_object_get(md, "name"))));
        r = k8s_call(c, "DELETE", path, NULL, NULL, NULL, err);
        if (r == -ENOENT) {
            error_clear(err);
            left--;
            continue;
        }
        if (r < 0) {
            json_decref(vmis);
            return r;
        }
        append_name(what, size, vmi, " (VM stopped: a passthrough VM cannot migrate)");
    }
    json_decref(vmis);
    return left;
}

int k8s_switch_cordon(K8sClient *c, const char *name, json_t *node, const char *mode, json_t **ret,
                      Error *err) {
    bool was = json_is_true(json_object_get(json_object_get(node, "spec"), "unschedulable"));
    json_t *p = json_pack("{s:{s:{s:s, s:s}}, s:{s:b}}", "metadata", "annotations",
                          K8S_ANN_SWITCH_TO, mode, K8S_ANN_WAS_UNSCHEDULABLE,
                          was ? "true" : "false", "spec", "unschedulable", 1);
    char path[320];
    snprintf(path, sizeof(path), "/api/v1/nodes/%s", name);
    int r = k8s_merge_patch(c, path, p, ret, err);
    json_decref(p);
    return r;
}

K8sSwitchState k8s_switch_advance(K8sClient *c, K8sSwitchJob *job, json_t *node, int64_t now_s,
                                  char *msg, size_t size) {
    Error err = {0};
    job->wrote_unschedulable = -1;
    if (!node) {
        snprintf(msg, size, "Node %s was deleted from the Kubernetes cluster during the switch.",
                 job->node);
        return K8S_SWITCH_FAILED;
    }
    const char *to = annotation(node, K8S_ANN_SWITCH_TO);
    char why[200] = "";
    if (!to) {
        const char *labeled = label_mode(node);
        if (labeled && STREQ(labeled, job->mode) &&
            k8s_node_converged(node, job->mode, NULL, job->count, why, sizeof(why))) {
            /* done before (a sync restarted after the last step): nothing to do again */
            snprintf(msg, size, "node %s is in %s mode", job->node, job->mode);
            return K8S_SWITCH_DONE;
        }
        if (!job->drain) { /* R4: a switch without a drain is refused while workloads run */
            char what[320] = "";
            int pods = drain_pods(c, job->node, false, what, sizeof(what), &err);
            if (pods < 0)
                goto fail;
            int vms = drain_vmis(c, job->node, false, what, sizeof(what), &err);
            if (vms < 0)
                goto fail;
            if (pods + vms > 0) {
                snprintf(msg, size,
                         "Node %s runs %d GPU pod(s) and %d VM(s) with host GPUs: %s; switch "
                         "with a drain (wait or evict).",
                         job->node, pods, vms, what);
                return K8S_SWITCH_FAILED;
            }
        }
        if (k8s_switch_cordon(c, job->node, node, job->mode, NULL, &err) < 0)
            goto fail;
        job->wrote_unschedulable = 1;
        snprintf(msg, size, "cordoned the Kubernetes node %s (spec.unschedulable)", job->node);
        return K8S_SWITCH_RUNNING;
    }
    const char *relabeled = annotation(node, K8S_ANN_RELABELED_AT);
    if (!relabeled) {
        char what[320] = "";
        int pods = drain_pods(c, job->node, job->evict_pods, what, sizeof(what), &err);
        if (pods < 0)
            goto fail;
        int vms = drain_vmis(c, job->node, job->stop_vms, what, sizeof(what), &err);
        if (vms < 0)
            goto fail;
        if (pods + vms > 0) {
            /* R4: --drain wait waits for them to end; only --drain evict evicts (and stops). */
            snprintf(msg, size, "%s %d GPU pod(s) and %d VM(s) before the relabel: %s",
                     job->evict_pods ? "draining" : "waiting for the end of", pods, vms, what);
            return K8S_SWITCH_RUNNING;
        }
        /* No GPU pod is left: only now may the label change (the GPU Operator evicts nothing). */
        char at[32];
        snprintf(at, sizeof(at), "%" PRId64, now_s);
        json_t *p = json_pack("{s:{s:{s:s}, s:{s:s}}}", "metadata", "labels", K8S_MODE_LABEL,
                              job->mode, "annotations", K8S_ANN_RELABELED_AT, at);
        if (patch_node(c, job->node, p, &err) < 0)
            goto fail;
        snprintf(msg, size, "relabeled %s=%s; waiting for the GPU Operator", K8S_MODE_LABEL,
                 job->mode);
        return K8S_SWITCH_RUNNING;
    }
    if (!k8s_node_converged(node, job->mode, NULL, job->count, why, sizeof(why))) {
        int64_t since = strtoll(relabeled, NULL, 10);
        if (now_s - since <= (int64_t)job->timeout_s) {
            snprintf(msg, size, "waiting for the GPU Operator: %s", why);
            return K8S_SWITCH_RUNNING;
        }
        /* Give up, cordoned: the GPUs may be half rebound. A new switch starts over. */
        json_t *p = json_pack("{s:{s:{s:n, s:n}}}", "metadata", "annotations", K8S_ANN_SWITCH_TO,
                              K8S_ANN_RELABELED_AT);
        (void)patch_node(c, job->node, p, &err);
        snprintf(msg, size,
                 "The GPU Operator did not bring node %s back in %s mode within %u s (%s); the "
                 "node stays cordoned: switch it again, or 'einsora node uncordon %s' to use it "
                 "as it is.",
                 job->node, job->mode, job->timeout_s, why, job->node);
        return K8S_SWITCH_FAILED;
    }
    const char *was = annotation(node, K8S_ANN_WAS_UNSCHEDULABLE);
    bool keep = was && STREQ(was, "true");
    json_t *p = json_pack("{s:{s:{s:n, s:n, s:n}}, s:{s:b}}", "metadata", "annotations",
                          K8S_ANN_SWITCH_TO, K8S_ANN_RELABELED_AT, K8S_ANN_WAS_UNSCHEDULABLE,
                          "spec", "unschedulable", keep);
    if (patch_node(c, job->node, p, &err) < 0)
        goto fail;
    job->wrote_unschedulable = keep;
    snprintf(msg, size, "the GPU Operator converged: %u GPU(s) in %s mode%s", job->count, job->mode,
             keep ? " (the node was cordoned before and stays so)" : "; uncordoned");
    return K8S_SWITCH_DONE;
fail:
    if (err.code == -ENOENT) {
        snprintf(msg, size, "Node %s was deleted from the Kubernetes cluster during the switch.",
                 job->node);
        return K8S_SWITCH_FAILED;
    }
    if (err.code == -EPERM || err.code == -EACCES || err.code == -EINVAL) {
        snprintf(msg, size, "%s", err.message);
        return K8S_SWITCH_FAILED;
    }
    /* a passing failure (timeout, 429 spent, 5xx): try again at the next pass */
    snprintf(msg, size, "retrying: %s", err.message);
    return K8S_SWITCH_RUNNING;
}

int k8s_switch_lift_cordon(K8sClient *c, const char *name, json_t *node, Error *err) {
    const char *was = annotation(node, K8S_ANN_WAS_UNSCHEDULABLE);
    if (!was)
        return 0;
    json_t *p = json_pack("{s:{s:{s:n, s:n, s:n}}, s:{s:b}}", "metadata", "annotations",
                          K8S_ANN_SWITCH_TO, K8S_ANN_RELABELED_AT, K8S_ANN_WAS_UNSCHEDULABLE,
                          "spec", "unschedulable", STREQ(was, "true"));
    int r = patch_node(c, name, p, err);
    return r < 0 ? r : 1;
}

bool k8s_switch_cordoned(json_t *node) {
    return annotation(node, K8S_ANN_SWITCH_TO) != NULL;
}

bool k8s_switch_was_unschedulable(json_t *node) {
    const char *was = annotation(node, K8S_ANN_WAS_UNSCHEDULABLE);
    return was && STREQ(was, "true");
}
