/* sync.c: the datacenter sync's loop: watch the cluster's nodes, keep the control plane's
 * nodes in step, heartbeat them, and do their mode switches' relabel tasks. */
#include "sync.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/client.h"
#include "k8s/kclient.h"
#include "k8s/switch.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "wire/fleet.h"
#include "wire/switch.h"
#include "wire/task.h"

#define MAX_JOBS 256

typedef struct Job {
    K8sSwitchJob job;
    char last[384];    /* the last progress reported */
    bool finished, ok; /* the result, kept until the control plane has it */
    bool unchanged;    /* failed before it changed the node (no cordon of its own on it) */
} Job;

typedef struct Sync {
    const K8sSyncConfig *cfg;
    K8sClient *kube;
    /* The switches' own client: a call that hangs gives up within half an interval, so that a
     * slow API server delays the nodes' heartbeats by one interval at most, never long enough
     * to make them unreachable (3 missed); the switch step is retried at the next turn. */
    K8sClient *kube_jobs;
    Client *cp;
    json_t *nodes;  /* name -> Node, from the list and the watch */
    char *rv;       /* NULL: list again */
    json_t *warned; /* name -> the last error logged for it */
    json_t *live; /* request id -> {node, phase, path} of our Pods and VMIs; NULL: unknown this turn
                   */
    json_t *seen; /* request ids the control plane placed on a node heartbeated this turn */
    json_t *beaten;  /* nodes heartbeated this turn */
    json_t *unsched; /* name -> spec.unschedulable as last seen: only a change is mirrored */
    json_t *held;    /* name -> true: cordoned in Einsora by this sync while its mode label
                        disagrees with the control plane's (relabeled by hand under workloads) */
    json_t *running; /* ids of the node being looked at whose object runs: to activate */
    json_t *stuck;   /* name -> true: cordoned by delete_released() (its STUCK_CORDON); NULL
                        before the first turn, which looks at every node for such a cordon */
    bool single_activations; /* the control plane has no POST /v1/nodes/{name}/activate */
    Job *jobs[MAX_JOBS];
    size_t n_jobs;
} Sync;

static void logf_(const Sync *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(const Sync *s, const char *fmt, ...) {
    if (!s->cfg->log)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("k8s-sync: ", s->cfg->log);
    vfprintf(s->cfg->log, fmt, ap);
    fputc('\n', s->cfg->log);
    fflush(s->cfg->log);
    va_end(ap);
}

/* Log a problem of a node once (until it changes). */
static void warn_once(Sync *s, const char *node, const char *msg) {
    const char *old = json_string_value(json_object_get(s->warned, node));
    if (old && STREQ(old, msg))
        return;
    json_object_set_new(s->warned, node, json_string(msg));
    logf_(s, "%s", msg);
}

static int64_t now_s(void) {
    return (int64_t)time(NULL);
}

/* A call to the control plane; -1 on a transport failure (logged). */
static long cp_call(Sync *s, const char *method, const char *path, json_t *body, json_t **ret) {
    long status = 0;
    Error err = {0};
    json_t *j = NULL;
    if (client_call(s->cp, method, path, body, NULL, &status, &j, &err) < 0) {
        logf_(s, "control plane: %s", error_message(&err));
        return -1;
    }
    if (status >= 300 && status != 404)
        logf_(s, "%s %s: %ld %s", method, path, status,
              strempty(json_string_value(json_object_get(j, "message"))));
    if (ret)
        *ret = j;
    else
        json_decref(j);
    return status;
}

/* ---- the node informer ---- */

static int relist(Sync *s) {
    json_t *items;
    char *rv;
    Error err = {0};
    if (k8s_list(s->kube, "/api/v1/nodes", NULL, &items, &rv, &err) < 0) {
        logf_(s, "cannot list nodes: %s", error_message(&err));
        return -1;
    }
    json_object_clear(s->nodes);
    size_t i;
    json_t *n;
    json_array_foreach(items, i, n) {
        const char *name =
                json_string_value(json_object_get(json_object_get(n, "metadata"), "name"));
        if (name)
            json_object_set(s->nodes, name, n);
    }
    json_decref(items);
    free(s->rv);
    s->rv = rv;
    logf_(s, "listed %zu node(s) at resourceVersion %s", json_object_size(s->nodes), rv);
    return 0;
}

static int on_node_event(const K8sEvent *e, void *userdata) {
    Sync *s = userdata;
    if (e->type == K8S_ADDED || e->type == K8S_MODIFIED)
        json_object_set(s->nodes, e->name, e->object);
    else if (e->type == K8S_DELETED) {
        json_object_del(s->nodes, e->name);
        logf_(s, "node %s was deleted from the cluster", e->name);
    }
    return 0;
}

static void watch(Sync *s) {
    if (!s->rv && relist(s) < 0)
        return;
    Error err = {0};
    int r = k8s_watch(s->kube, "/api/v1/nodes", NULL, &s->rv, s->cfg->interval_s, on_node_event, s,
                      &err);
    if (r == -ESTALE)
        logf_(s, "the node watch ended with 410 Gone: listing again");
    else if (r < 0)
        logf_(s, "the node watch failed: %s", error_message(&err));
    if (r < 0) {
        free(s->rv);
        s->rv = NULL;
    }
}

/* ---- the cordon ---- */

/* Cordon (on) or uncordon the control plane's node; whether it answered 200. */
static bool cp_cordon_why(Sync *s, const char *name, bool on, const char *why) {
    char path[200];
    snprintf(path, sizeof(path), "/v1/nodes/%s/%s", name, on ? "cordon" : "uncordon");
    json_t *body = on && why ? json_pack("{s:s}", "reason", why) : NULL;
    long st = cp_call(s, "POST", path, body, NULL);
    json_decref(body);
    return st == 200;
}

static bool cp_cordon(Sync *s, const char *name, bool on) {
    return cp_cordon_why(s, name, on, NULL);
}

/* The reason of a cordon mirrored from Kubernetes: a Kubernetes uncordon lifts that one, and
 * never an Einsora cordon that says another reason (an operator's, a bad label's). */
#define MIRRORED_CORDON "Cordoned in Kubernetes (spec.unschedulable)."

/* Who owns the cordon: spec.unschedulable is Kubernetes'; a change of it made in Kubernetes
 * is mirrored into Einsora. An Einsora cordon (einsora node cordon) is Einsora's: it stops
 * Einsora's placements and is not written to the Kubernetes node, which may run other pods.
 * A mode switch cordons both sides for its duration and gives each its own value back at the
 * end (R4: a node cordoned before a switch stays so after it).
 *
 * So the sync mirrors a change of spec.unschedulable since the last turn, never its value at
 * every turn (that would undo an Einsora cordon), and never a change it wrote itself (a
 * switch's cordon or its restore, the lift of a failed switch's cordon). The first time a node
 * is seen (a sync started or restarted), a cordon counts as a change (one made while no sync
 * ran), an uncordon does not (that would undo an Einsora cordon).
 *
 * s->unsched holds, per node, the value last seen, or {"wrote": value, "turns": n} after a
 * write of the sync's own until its watch shows it (n turns at most). */
static void unsched_own_write(Sync *s, const char *name, bool value) {
    json_object_set_new(s->unsched, name, json_pack("{s:b, s:i}", "wrote", value, "turns", 3));
}

static bool unschedulable_changed(Sync *s, const char *name, const K8sNodeView *v) {
    json_t *was = json_object_get(s->unsched, name);
    if (json_is_object(was)) /* the sync's own write */
        return false;
    return was ? json_is_true(was) != v->unschedulable : v->unschedulable;
}

static void unsched_seen(Sync *s, const char *name, const K8sNodeView *v) {
    json_t *was = json_object_get(s->unsched, name);
    if (json_is_object(was) && json_is_true(json_object_get(was, "wrote")) != v->unschedulable) {
        json_int_t turns = json_integer_value(json_object_get(was, "turns"));
        if (turns > 0) { /* the watch has not shown the write yet */
            json_object_set_new(was, "turns", json_integer(turns - 1));
            return;
        }
    }
    json_object_set_new(s->unsched, name, json_boolean(v->unschedulable));
}

/* ---- switch jobs ---- */

/* The control plane node's mode switch (wire/switch.h), when it has one that reads. */
static bool cp_switch(json_t *cp_node, NodeSwitch *ret) {
    json_t *v = json_object_get(cp_node, "switch");
    return v && wire_switch_from_json(v, ret, NULL) >= 0;
}

static Job *job_for(Sync *s, const char *node) {
    for (size_t i = 0; i < s->n_jobs; i++)
        if (STREQ(s->jobs[i]->job.node, node))
            return s->jobs[i];
    return NULL;
}

static void job_start(Sync *s, const char *node, const Task *task, json_t *cp_node) {
    if (job_for(s, node) || s->n_jobs == MAX_JOBS)
        return;
    Job *j = calloc(1, sizeof(*j));
    if (!j)
        return;
    NodeSwitch sw;
    const char *drain = cp_switch(cp_node, &sw) ? drain_mode_to_string(sw.drain) : "";
    snprintf(j->job.node, sizeof(j->job.node), "%s", node);
    j->job.task_id = task->id;
    snprintf(j->job.mode, sizeof(j->job.mode), "%s",
             STREQ(task->target, "vfio") ? "vm-passthrough" : "container");
    j->job.drain = STREQ(drain, "wait") || STREQ(drain, "evict");
    j->job.evict_pods = STREQ(drain, "evict");
    j->job.stop_vms = STREQ(drain, "evict");
    j->job.count = (unsigned)json_array_size(json_object_get(cp_node, "devices"));
    j->job.timeout_s = s->cfg->switch_timeout_s;
    s->jobs[s->n_jobs++] = j;
    logf_(s, "switch of %s to %s (drain %s, task %" PRIu64 ")", node, j->job.mode, drain,
          j->job.task_id);
}

static void job_report(Sync *s, Job *j, bool final) {
    json_t *body = final ? json_pack("{s:b, s:s, s:b}", "ok", j->ok, "message", j->last,
                                     "unchanged", !j->ok && j->unchanged)
                         : json_pack("{s:b, s:b, s:s}", "ok", 1, "progress", 1, "message", j->last);
    char path[320];
    snprintf(path, sizeof(path), "/v1/nodes/%s/tasks/%" PRIu64, j->job.node, j->job.task_id);
    long st = cp_call(s, "POST", path, body, NULL);
    json_decref(body);
    if (final && st > 0 && (st < 300 || st == 404)) { /* recorded, or the task is gone already */
        for (size_t i = 0; i < s->n_jobs; i++)
            if (s->jobs[i] == j) {
                s->jobs[i] = s->jobs[--s->n_jobs];
                break;
            }
        free(j);
    }
}

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void jobs_advance(Sync *s) {
    /* At most half an interval for the switches each turn (the rest goes on at the next): the
     * heartbeats of every node come around again in time (Sync.kube_jobs). */
    int64_t until = mono_ms() + (int64_t)s->cfg->interval_s * 500;
    for (size_t i = s->n_jobs; i-- > 0;) {
        Job *j = s->jobs[i];
        if (!j->finished && mono_ms() < until) {
            char msg[384];
            K8sSwitchState st = k8s_switch_advance(s->kube_jobs, &j->job,
                                                   json_object_get(s->nodes, j->job.node), now_s(),
                                                   msg, sizeof(msg));
            if (j->job.wrote_unschedulable >= 0)
                unsched_own_write(s, j->job.node, j->job.wrote_unschedulable);
            bool changed = STRNEQ(msg, j->last);
            snprintf(j->last, sizeof(j->last), "%s", msg);
            if (st != K8S_SWITCH_RUNNING) {
                j->finished = true;
                j->ok = st == K8S_SWITCH_DONE;
                /* Refused before its cordon (GPU pods and no drain, RBAC on the first patch):
                 * the node as it was, which the control plane is told (it lifts its cordon). */
                json_t *kn = json_object_get(s->nodes, j->job.node);
                j->unchanged = kn && !k8s_switch_cordoned(kn);
                logf_(s, "switch of %s %s: %s", j->job.node, j->ok ? "done" : "failed", msg);
            } else if (changed) {
                logf_(s, "switch of %s: %s", j->job.node, msg);
                job_report(s, j, false);
            }
        }
        if (j->finished)
            job_report(s, j, true);
    }
}

/* ---- workloads ---- */

static int list_ours(Sync *s, const char *collection, bool vmi) {
    char path[300];
    snprintf(path, sizeof(path), "%s/namespaces/%s/%s", vmi ? "/apis/kubevirt.io/v1" : "/api/v1",
             s->cfg->work.namespace_, collection);
    json_t *items;
    char *rv;
    Error err = {0};
    int r = k8s_list(s->kube, path, "labelSelector=" K8S_LABEL_REQUEST, &items, &rv, &err);
    if (r == -ENOENT && vmi) /* KubeVirt is not installed */
        return 0;
    if (r < 0) {
        logf_(s, "cannot list workloads: %s", error_message(&err));
        return r;
    }
    free(rv);
    size_t i;
    json_t *o;
    json_array_foreach(items, i, o) {
        json_t *md = json_object_get(o, "metadata"), *spec = json_object_get(o, "spec"),
               *st = json_object_get(o, "status");
        const char *id = json_string_value(
                json_object_get(json_object_get(md, "labels"), K8S_LABEL_REQUEST));
        const char *node = json_string_value(json_object_get(vmi ? st : spec, "nodeName"));
        if (!node && vmi)
            node = json_string_value(json_object_get(json_object_get(spec, "nodeSelector"),
                                                     "kubernetes.io/hostname"));
        const char *name = json_string_value(json_object_get(md, "name"));
        if (!id || !node || !name)
            continue;
        json_object_set_new(s->live, id,
                            json_pack("{s:s, s:s, s:s++}", "node", node, "phase",
                                      strempty(json_string_value(json_object_get(st, "phase"))),
                                      "path", path, "/", name));
    }
    json_decref(items);
    return 0;
}

static void list_live(Sync *s) {
    json_decref(s->live);
    s->live = json_object();
    if (list_ours(s, "pods", false) < 0 || list_ours(s, "virtualmachineinstances", true) < 0) {
        json_decref(s->live);
        s->live = NULL;
    }
}

/* The ids of our objects on node: the heartbeat's "running". One that ended (Succeeded,
 * Failed) is in it too: its end is reported with how right after the heartbeat (workload(),
 * POST .../end), which a heartbeat without it would have beaten to a "lost" (R17). */
static json_t *running_on(Sync *s, const char *node) {
    json_t *ids = json_array(), *o;
    const char *id;
    json_object_foreach(s->live, id,
                        o) if (STREQ(json_string_value(json_object_get(o, "node")), node))
            json_array_append_new(ids, json_integer(strtoll(id, NULL, 10)));
    return ids;
}

/* The request's workload ended, or could never start: `ended` with how (R17). */
static void end_request(Sync *s, const char *id, bool failed, const char *message) {
    char path[96];
    json_t *body = fleet_workload_end_body(failed, 0, message);
    snprintf(path, sizeof(path), "/v1/requests/%s/end", id);
    if (body && cp_call(s, "POST", path, body, NULL) == 200)
        logf_(s, "request %s: %s, ended", id, failed ? "failed" : "finished");
    json_decref(body);
}

/* Whether the object that answered a create with 409 (its name taken) is this request's own:
 * one made by an earlier create whose answer was lost carries the request's label. An error
 * reading it counts as ours (the next turn's listing tells). */
static bool name_is_ours(Sync *s, const char *coll, json_t *manifest, const char *id) {
    char path[420];
    snprintf(path, sizeof(path), "%s/%s", coll,
             strempty(json_string_value(
                     json_object_get(json_object_get(manifest, "metadata"), "name"))));
    json_t *o = NULL;
    Error err = {0};
    if (k8s_call(s->kube, "GET", path, NULL, NULL, &o, &err) < 0)
        return true;
    const char *label = json_string_value(json_object_get(
            json_object_get(json_object_get(o, "metadata"), "labels"), K8S_LABEL_REQUEST));
    bool ours = label && STREQ(label, id);
    json_decref(o);
    return ours;
}

/* One workload of a heartbeat answer: create its object, activate it once Running, release
 * it once it succeeded. */
static void workload(Sync *s, json_t *w, const char *node_resource) {
    char id[32];
    json_int_t rid = json_integer_value(json_object_get(w, "id"));
    snprintf(id, sizeof(id), "%" JSON_INTEGER_FORMAT, rid);
    json_object_set_new(s->seen, id, json_true());
    const char *state = strempty(json_string_value(json_object_get(w, "state")));
    json_t *o = json_object_get(s->live, id);
    Error err = {0};
    if (!o) {
        if (STRNEQ(state, "placed"))
            return; /* active but gone: the heartbeat's running list reports it ended */
        json_t *m = k8s_workload_manifest(s->cfg->catalog, &s->cfg->work, w, node_resource);
        if (!m) {
            logf_(s, "request %s: nothing to run for its placement", id);
            return;
        }
        bool vmi = STREQ(json_string_value(json_object_get(m, "kind")), "VirtualMachineInstance");
        char coll[300];
        snprintf(coll, sizeof(coll), "%s/namespaces/%s/%s",
                 vmi ? "/apis/kubevirt.io/v1" : "/api/v1", s->cfg->work.namespace_,
                 vmi ? "virtualmachineinstances" : "pods");
        int r = k8s_call(s->kube, "POST", coll, NULL, m, NULL, &err);
        if (r == -EPERM || r == -EINVAL) {
            /* Refused for good (RBAC, an admission webhook, a quota, an invalid object): the
             * user sees Kubernetes' sentence on the request and its GPUs go back, as an
             * engine's refusal on an agent does. A 401 or an unreachable API is the sync's
             * own trouble: it retries at the next turn. */
            char why[600];
            snprintf(why, sizeof(why), "Kubernetes refused the %s: %s",
                     vmi ? "VirtualMachineInstance" : "Pod", error_message(&err));
            logf_(s, "request %s: %s", id, why);
            end_request(s, id, true, why);
        } else if (r == -EEXIST && !name_is_ours(s, coll, m, id)) {
            /* The name is taken by an object Einsora did not make for this request: nothing
             * runs for it, so the request ends saying so rather than wait forever (R17). */
            char why[600];
            snprintf(why, sizeof(why),
                     "Kubernetes already has a %s named %s in namespace %s that Einsora did not "
                     "make for this request; delete or rename it",
                     vmi ? "VirtualMachineInstance" : "Pod",
                     json_string_value(json_object_get(json_object_get(m, "metadata"), "name")),
                     s->cfg->work.namespace_);
            logf_(s, "request %s: %s", id, why);
            end_request(s, id, true, why);
        } else if (r < 0 && r != -EEXIST)
            logf_(s, "request %s: %s", id, error_message(&err));
        else
            logf_(s, "request %s: created %s %s on %s", id, vmi ? "VirtualMachineInstance" : "Pod",
                  json_string_value(json_object_get(json_object_get(m, "metadata"), "name")),
                  json_string_value(json_object_get(json_object_get(w, "placement"), "node")));
        json_decref(m);
        return;
    }
    const char *phase = json_string_value(json_object_get(o, "phase"));
    if (STREQ(state, "placed") && STREQ(phase, "Running")) {
        json_array_append_new(s->running, json_string(id)); /* activate_running() */
    } else if (STREQ(phase, "Succeeded") || STREQ(phase, "Failed")) {
        /* It ended on its own: the request becomes `ended` with how (R17), never a silent
         * release; its GPUs are free again. */
        bool failed = STREQ(phase, "Failed");
        end_request(s, id, failed, failed ? "the Pod or VirtualMachineInstance failed" : "");
    }
}

/* Activate one request, one call (a control plane without the batch route). */
static void activate_one(Sync *s, const char *id) {
    char path[96];
    snprintf(path, sizeof(path), "/v1/requests/%s/activate", id);
    if (cp_call(s, "POST", path, NULL, NULL) == 200)
        logf_(s, "request %s: running", id);
}

/* The node's requests whose Pod or VMI now runs (s->running), activated in one call per 64
 * (POST /v1/nodes/{name}/activate: one commit; each item answered as its own call would be).
 * A control plane that does not know the route gets one call each from then on. */
static void activate_running(Sync *s, const char *node) {
    size_t n = json_array_size(s->running);
    for (size_t from = 0; from < n && !s->single_activations && n > 1; from += 64) {
        json_t *items = json_array();
        for (size_t i = from; i < n && i < from + 64; i++)
            json_array_append_new(items, json_pack("{s:O}", "id", json_array_get(s->running, i)));
        char path[200];
        snprintf(path, sizeof(path), "/v1/nodes/%s/activate", node);
        json_t *body = json_pack("{s:o}", "requests", items), *ans = NULL;
        long st = body ? cp_call(s, "POST", path, body, &ans) : -1;
        json_decref(body);
        if (client_route_unknown(st, ans))
            s->single_activations = true; /* then one call each, below */
        size_t k;
        json_t *it;
        json_array_foreach(json_object_get(ans, "results"), k, it) {
            const char *id = strempty(json_string_value(json_object_get(it, "id")));
            json_int_t status = json_integer_value(json_object_get(it, "status"));
            if (status == 200)
                logf_(s, "request %s: running", id);
            else if (status != 404) /* gone meanwhile: as a single call, not logged */
                logf_(s, "POST /v1/requests/%s/activate: %" JSON_INTEGER_FORMAT " %s", id, status,
                      strempty(json_string_value(
                              json_object_get(json_object_get(it, "error"), "message"))));
        }
        json_decref(ans);
    }
    if (n == 1 || s->single_activations)
        for (size_t i = 0; i < n; i++)
            activate_one(s, json_string_value(json_array_get(s->running, i)));
    json_array_clear(s->running);
}

/* Ends the reason of the cordon a node gets while an object of a released request cannot be
 * deleted there: what is lifted once it is gone, and nothing else. */
#define STUCK_CORDON "Cordoned by the datacenter sync until it is deleted (R17)."

/* Cordon (or uncordon) node in Einsora for undeletable objects: why NULL lifts a cordon of
 * STUCK_CORDON's, and only such a one. */
static void stuck_cordon(Sync *s, const char *node, const char *why) {
    char path[160];
    snprintf(path, sizeof(path), "/v1/nodes/%s", node);
    json_t *cp = NULL;
    if (cp_call(s, "GET", path, NULL, &cp) != 200) {
        json_decref(cp);
        return;
    }
    bool cordoned = json_is_true(json_object_get(cp, "cordoned"));
    const char *had = strempty(json_string_value(json_object_get(cp, "cordon_reason")));
    if (why && !cordoned && cp_cordon_why(s, node, true, why))
        logf_(s, "node %s: cordoned in Einsora: %s", node, why);
    else if (!why && cordoned && strstr(had, STUCK_CORDON) && cp_cordon(s, node, false))
        logf_(s, "node %s: the released requests' objects are gone: uncordoned", node);
    json_decref(cp);
}

/* Delete our objects whose request is no longer placed on a node heartbeated this turn. The
 * control plane freed their GPUs at the release: one Kubernetes refuses to delete (RBAC, an
 * admission webhook) still runs on them, so its node is cordoned in Einsora, saying which
 * object, until it is gone - nothing new is placed on GPUs a Pod still holds (R17). */
static void delete_released(Sync *s) {
    const char *id;
    json_t *o, *stuck = json_object();
    json_object_foreach(s->live, id, o) {
        const char *node = json_string_value(json_object_get(o, "node"));
        if (json_object_get(s->seen, id) || !json_object_get(s->beaten, node))
            continue;
        Error err = {0};
        const char *path = json_string_value(json_object_get(o, "path"));
        int r = k8s_call(s->kube, "DELETE", path, NULL, NULL, NULL, &err);
        if (r < 0 && r != -ENOENT) {
            logf_(s, "request %s: %s", id, error_message(&err));
            if ((r == -EPERM || r == -EINVAL) && !json_object_get(stuck, node)) {
                char why[400];
                snprintf(why, sizeof(why),
                         "Kubernetes refuses to delete %s of released request %s (%.200s): its "
                         "GPUs may still be in use. " STUCK_CORDON,
                         path, id, error_message(&err));
                json_object_set_new(stuck, node, json_string(why));
            }
        } else
            logf_(s, "request %s: released, deleted %s", id, path);
    }
    const char *node;
    json_t *v;
    json_object_foreach(stuck, node, v) stuck_cordon(s, node, json_string_value(v));
    /* Lifted where nothing is stuck any more: the nodes cordoned before, or, at the first
     * turn (a restart), every node heartbeated. */
    json_object_foreach(s->stuck ? s->stuck : s->beaten, node, v) if (!json_object_get(stuck, node))
            stuck_cordon(s, node, NULL);
    json_decref(s->stuck);
    s->stuck = stuck;
}

/* ---- nodes ---- */

/* Whether the control plane's node already says what desc says (mode, capabilities, devices). */
static bool same_description(json_t *cp_node, json_t *desc) {
    const char *keys[] = {"mode",  "capabilities",    "site",
                          "owner", "device_resource", "time_slice_replicas",
                          "cpus"}; /* R11: allocatable cores change too */
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
        json_t *x = json_object_get(cp_node, keys[i]), *y = json_object_get(desc, keys[i]);
        if ((x || y) && !json_equal(x, y)) /* json_equal() of two NULLs is false */
            return false;
    }
    json_t *a = json_object_get(cp_node, "devices"), *b = json_object_get(desc, "devices");
    if (json_array_size(a) != json_array_size(b))
        return false;
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *x = json_array_get(a, i), *y = json_array_get(b, i);
        if (!json_equal(json_object_get(x, "class"), json_object_get(y, "class")) ||
            !json_equal(json_object_get(x, "binding"), json_object_get(y, "binding")))
            return false;
        json_t *mx = json_object_get(x, "mig"), *my = json_object_get(y, "mig");
        if ((mx || my) && !json_equal(mx, my))
            return false;
    }
    return true;
}

static bool switch_running(json_t *cp_node) {
    NodeSwitch sw;
    return cp_switch(cp_node, &sw) && switch_active(&sw);
}

/* R4: cordon, then drain. The control plane cordons a switching node at once and drains its
 * Einsora workloads before it gives the sync the relabel task; meanwhile the Kubernetes
 * scheduler must not put new GPU pods there, so the Kubernetes node is cordoned as soon as
 * the control plane's switch is at its cordon or drain step. The task then finds the switch's
 * cordon on the node and goes on from it. A switch without a drain is not cordoned here: its
 * task first refuses a node that runs GPU pods, before anything changed (no cordon left).
 * s->nodes then holds the Node as patched: the caller reads it again. */
static void cordon_for_switch(Sync *s, const char *name, json_t *node, json_t *cp) {
    NodeSwitch sw;
    if (!cp_switch(cp, &sw) || !switch_active(&sw) || sw.gpu >= 0 || sw.drain == DRAIN_NONE ||
        (sw.step != SW_CORDON && sw.step != SW_DRAIN) || k8s_switch_cordoned(node))
        return;
    Error err = {0};
    json_t *patched = NULL;
    if (k8s_switch_cordon(s->kube_jobs, name, node, sw.mode, &patched, &err) < 0) {
        char m[600];
        snprintf(m, sizeof(m), "Node %s: could not cordon it for its switch to %s: %s", name,
                 sw.mode, error_message(&err));
        warn_once(s, name, m);
        return;
    }
    /* The Node as patched, at once: a task given in this very turn must find the switch's
     * cordon on it, not cordon it again taking that cordon for the node's own. */
    if (json_is_object(patched))
        json_object_set(s->nodes, name, patched);
    json_decref(patched);
    unsched_own_write(s, name, true);
    logf_(s,
          "node %s: cordoned in Kubernetes (spec.unschedulable) for its switch to %s while "
          "the control plane drains its Einsora workloads",
          name, sw.mode);
}

/* Heartbeat the node: the objects of ours that run there (s->live); with work, what the
 * answer asks: its switch's task, its placements as Pods and VMIs. */
static void heartbeat(Sync *s, const char *name, const K8sNodeView *v, json_t *cp, bool work) {
    json_t *beat = json_pack("{s:i}", "interval_s", (int)s->cfg->interval_s), *ans = NULL;
    if (s->live)
        json_object_set_new(beat, "running", running_on(s, name));
    char bpath[200];
    snprintf(bpath, sizeof(bpath), "/v1/nodes/%s/heartbeat", name);
    if (cp_call(s, "POST", bpath, beat, &ans) == 200 && work) {
        size_t i;
        json_t *t;
        json_array_foreach(json_object_get(ans, "tasks"), i, t) {
            Task task;
            Error terr = {0};
            if (wire_task_from_json(t, &task, NULL, &terr) < 0)
                logf_(s, "task for %s refused: %s", name, error_message(&terr));
            else if (task.kind == TASK_BIND)
                job_start(s, name, &task, cp);
        }
        if (s->live) {
            json_object_set_new(s->beaten, name, json_true());
            json_array_foreach(json_object_get(ans, "workloads"), i, t) workload(s, t, v->resource);
            activate_running(s, name);
        }
    }
    json_decref(beat);
    json_decref(ans);
}

/* Ends the reason of the cordon the sync puts on a served node whose mode label is missing or
 * unknown: how the sync (and the control plane: wire/node.h) knows that cordon, also after a
 * restart. */
#define LABEL_CORDON " " NODE_LABEL_CORDON_MARK

static bool label_cordon(json_t *cp) {
    const char *why = json_string_value(json_object_get(cp, "cordon_reason"));
    return json_is_true(json_object_get(cp, "cordoned")) && why && strstr(why, LABEL_CORDON);
}

/* R3 on a GPU node the control plane never had, first seen with its mode label missing or not
 * a mode: it is registered so that the operator sees it where nodes are shown (its GPUs
 * counted, as cordoned), in the mode its GPU resources show (vm-passthrough when it advertises
 * a KubeVirt device, else container) and cordoned from the start with why, so nothing is placed
 * on it. A guess made to be seen, never to be used:
 * the label decides once it is set. */
static bool register_mislabeled(Sync *s, const char *name, json_t *node, const char *path,
                                const char *why) {
    K8sNodeView g = {0};
    json_t *copy = json_deep_copy(node);
    json_t *labels = json_object_get(json_object_get(copy, "metadata"), "labels");
    Error err = {0};
    bool ok = false;
    for (int i = 0; labels && i < 2 && !ok; i++) {
        json_object_set_new(labels, K8S_MODE_LABEL,
                            json_string(i ? "container" : "vm-passthrough"));
        ok = k8s_node_view(s->cfg->catalog, copy, &g, &err) >= 0 && !g.mode_error[0] &&
             (g.count > 0 || i == 1);
    }
    json_decref(copy);
    if (!ok)
        return false;
    json_t *desc = k8s_node_spec_json(s->cfg->catalog, &g, &s->cfg->site, true);
    if (desc)
        json_object_set_new(desc, "cordon_reason", json_string(why));
    long st = desc ? cp_call(s, "PUT", path, desc, NULL) : -1;
    json_decref(desc);
    if (st <= 0 || st >= 300)
        return false;
    logf_(s, "node %s: registered cordoned until it is labeled (%u x %s shown)", name, g.count,
          g.class_index >= 0 ? s->cfg->catalog->classes[g.class_index].name : "unclassified");
    return true;
}

/* R3: a served node whose mode label went missing or is not a mode (relabeled by hand to
 * vm-vgpu, the label removed) is an error shown to the operator where the node is shown, not
 * a lost agent: the node is cordoned in Einsora with the sentence as the cordon's reason (its
 * event node.cordoned says it too), and heartbeated while Ready, so that it never reads
 * "unreachable (missed heartbeats)" and its workloads are followed (their ends, the Pods of
 * released requests). Nothing of its inventory is changed; a mode switch asked meanwhile (the
 * way to relabel it from Einsora) is carried out. Once labeled, the sync lifts its cordon. A
 * node cordoned for another reason keeps it (the sentence is in the sync's log). A node the
 * control plane does not have is registered cordoned (register_mislabeled()). */
static void label_error(Sync *s, const char *name, json_t *node, const K8sNodeView *v) {
    char path[160];
    snprintf(path, sizeof(path), "/v1/nodes/%s", name);
    char why[400];
    snprintf(why, sizeof(why), "%s%s", v->mode_error, LABEL_CORDON);
    json_t *cp = NULL;
    long st = cp_call(s, "GET", path, NULL, &cp);
    if (st == 404) {
        json_decref(cp);
        cp = NULL;
        if (!register_mislabeled(s, name, node, path, why) ||
            cp_call(s, "GET", path, NULL, &cp) != 200) {
            json_decref(cp);
            return;
        }
    } else if (st != 200) {
        json_decref(cp);
        return;
    }
    if (switch_running(cp) || job_for(s, name)) { /* the switch holds the cordon */
        if (v->ready)
            heartbeat(s, name, v, cp, true);
        json_decref(cp);
        return;
    }
    bool cordoned = json_is_true(json_object_get(cp, "cordoned"));
    const char *had = strempty(json_string_value(json_object_get(cp, "cordon_reason")));
    if (!cordoned || (label_cordon(cp) && STRNEQ(had, why))) {
        json_t *body = json_pack("{s:s}", "reason", why);
        char cpath[200];
        snprintf(cpath, sizeof(cpath), "/v1/nodes/%s/cordon", name);
        if (cp_call(s, "POST", cpath, body, NULL) == 200)
            logf_(s, "node %s: cordoned in Einsora: %s", name, why);
        json_decref(body);
    }
    unsched_seen(s, name, v);
    if (v->ready)
        heartbeat(s, name, v, cp, true);
    json_decref(cp);
}

static void sync_node(Sync *s, const char *name, json_t *node) {
    K8sNodeView v;
    Error err = {0};
    int r;
    if (k8s_node_view(s->cfg->catalog, node, &v, &err) < 0) {
        warn_once(s, name, error_message(&err));
        return;
    }
    if (!v.has_gpus)
        return;
    if (strlen(name) >= 64) {
        warn_once(s, name, "A Kubernetes node name longer than 63 characters is not served.");
        return;
    }
    if (v.mode_error[0]) { /* R3: shown, not guessed */
        warn_once(s, name, v.mode_error);
        label_error(s, name, node, &v);
        return;
    }
    if (v.class_index < 0 && v.count) {
        char m[256];
        snprintf(m, sizeof(m),
                 "Node %s: no catalog class matches its GPUs (%s=%s, %s): shown unclassified (R8).",
                 name, K8S_PRODUCT_LABEL,
                 strempty(json_string_value(json_object_get(
                         json_object_get(json_object_get(node, "metadata"), "labels"),
                         K8S_PRODUCT_LABEL))),
                 v.resource);
        warn_once(s, name, m);
    } else if (v.resource_differs) {
        char m[300];
        snprintf(m, sizeof(m),
                 "Node %s advertises %s, not the catalog's vm_device_name %s for class %s.", name,
                 v.resource, strempty(s->cfg->catalog->classes[v.class_index].vm_device_name),
                 s->cfg->catalog->classes[v.class_index].name);
        warn_once(s, name, m);
    }
    if (v.mig_unplaced) {
        char m[200];
        snprintf(m, sizeof(m),
                 "Node %s: its nvidia.com/mig-* counts do not fit its %u GPU(s): the slices that "
                 "do not "
                 "fit are not offered.",
                 name, v.total_gpus);
        warn_once(s, name, m);
    }
    char path[160];
    snprintf(path, sizeof(path), "/v1/nodes/%s", name);
    json_t *cp = NULL;
    long st = cp_call(s, "GET", path, NULL, &cp);
    if (st < 0)
        return;
    bool busy = job_for(s, name) || (st == 200 && switch_running(cp));
    if (st == 200 && !job_for(s, name)) {
        cordon_for_switch(s, name, node, cp);
        node = json_object_get(s->nodes, name);
    }
    if (st == 200 && !busy && label_cordon(cp) && cp_cordon(s, name, false)) {
        /* labeled again (R3): the cordon of label_error() goes */
        logf_(s, "node %s: labeled %s=%s: uncordoned", name, K8S_MODE_LABEL, v.mode);
        json_object_set_new(cp, "cordoned", json_false());
        json_object_del(cp, "cordon_reason");
        json_object_del(s->unsched, name); /* a Kubernetes cordon meanwhile is mirrored now */
    }
    if (st == 404 || (st == 200 && !busy)) {
        bool cordoned = st == 200 ? json_is_true(json_object_get(cp, "cordoned")) : v.unschedulable;
        json_t *desc = k8s_node_spec_json(s->cfg->catalog, &v, &s->cfg->site, cordoned);
        const char *cp_mode = st == 200 ? json_string_value(json_object_get(cp, "mode")) : NULL;
        /* Mid-relabel the GPU Operator shows no GPUs for a while: not a new inventory. But a
         * label in another mode than the control plane's (a switch that failed waiting for the
         * operator, a relabel by hand) is the node's mode now, with the GPUs it advertises,
         * even none: never the old mode's GPUs (R3). */
        bool settling = st == 200 && v.count == 0 && cp_mode && STREQ(cp_mode, v.mode);
        if (st == 404 || (!settling && !same_description(cp, desc))) {
            long p = cp_call(s, "PUT", path, desc, NULL);
            char mig[64] = ""; /* mixed strategy: the MIG GPUs are not in v.count */
            if (v.n_mig_gpus)
                snprintf(mig, sizeof(mig), "; %u MIG GPU(s) in nvidia.com/mig-* slices",
                         v.n_mig_gpus);
            if (p > 0 && p < 300)
                logf_(s, "node %s: %s mode, %u x %s (%s)%s", name, v.mode, v.count,
                      v.class_index >= 0 ? s->cfg->catalog->classes[v.class_index].name
                                         : "unclassified",
                      v.resource[0]  ? v.resource
                      : v.n_mig_gpus ? "no whole GPU"
                                     : "no GPU resource yet",
                      mig);
            if (p > 0 && p < 300 && json_object_get(s->held, name)) {
                /* its workloads ended and it took the label's mode: open again */
                if (cp_cordon(s, name, false))
                    logf_(s, "node %s: uncordoned, now in %s mode as labeled", name, v.mode);
                json_object_del(s->held, name);
            } else if (p == 409 && !cordoned && cp_mode && STRNEQ(cp_mode, v.mode)) {
                /* R3: relabeled by hand while Einsora workloads run there. The control plane
                 * keeps the node as it was until they end; meanwhile nothing new may be placed
                 * by the old mode on GPUs the GPU Operator has moved to the new one. */
                if (cp_cordon(s, name, true)) {
                    json_object_set_new(s->held, name, json_true());
                    char m[400];
                    snprintf(m, sizeof(m),
                             "Node %s was relabeled %s=%s while Einsora workloads run there in %s "
                             "mode: cordoned in Einsora (no new placements) until they end; then "
                             "it takes the label's mode and is uncordoned. Relabel it %s to undo.",
                             name, K8S_MODE_LABEL, v.mode, cp_mode, cp_mode);
                    warn_once(s, name, m);
                }
            }
        } else if (!cordoned && v.unschedulable &&
                   (r = k8s_switch_lift_cordon(s->kube_jobs, name, node, &err)) != 0) {
            /* an uncordon in Einsora after a failed switch lifts the switch's cordon too */
            if (r > 0) {
                unsched_own_write(s, name, k8s_switch_was_unschedulable(node));
                logf_(s, "node %s: the cordon of its failed switch lifted (einsora node uncordon)",
                      name);
            } else {
                char m[600];
                snprintf(m, sizeof(m),
                         "Node %s: could not lift the cordon of its failed switch: %s", name,
                         error_message(&err));
                warn_once(s, name, m);
            }
        } else if (cordoned != v.unschedulable && unschedulable_changed(s, name, &v)) {
            const char *why = strempty(json_string_value(json_object_get(cp, "cordon_reason")));
            if (!v.unschedulable && STRNEQ(why, MIRRORED_CORDON))
                logf_(s, "node %s: an uncordon in Kubernetes leaves its Einsora cordon (%s)", name,
                      why[0] ? why : "made in Einsora");
            else if (cp_cordon_why(s, name, v.unschedulable, MIRRORED_CORDON))
                logf_(s, "node %s %s (spec.unschedulable)", name,
                      v.unschedulable ? "cordoned" : "uncordoned");
        }
        json_decref(desc);
    }
    unsched_seen(s, name, &v);
    if (v.ready) {
        heartbeat(s, name, &v, cp, true);
    } else
        warn_once(s, name,
                  "node is not Ready: not heartbeated, so the control plane marks it unreachable");
    if (v.ready && json_object_get(s->warned, name)) {
        const char *w = json_string_value(json_object_get(s->warned, name));
        if (w && strstr(w, "not Ready"))
            json_object_del(s->warned, name);
    }
    json_decref(cp);
}

static void turn(Sync *s) {
    watch(s);
    if (!s->rv)
        return;
    list_live(s);
    json_object_clear(s->seen);
    json_object_clear(s->beaten);
    const char *name;
    json_t *node;
    json_object_foreach(s->nodes, name, node) sync_node(s, name, node);
    if (s->live)
        delete_released(s);
    jobs_advance(s);
}

int k8s_sync_run(const K8sSyncConfig *cfg_in, Error *err) {
    K8sSyncConfig cfg = *cfg_in;
    if (!cfg.interval_s)
        cfg.interval_s = 5;
    if (!cfg.switch_timeout_s)
        cfg.switch_timeout_s = 600;
    Sync s = {.cfg = &cfg,
              .nodes = json_object(),
              .warned = json_object(),
              .seen = json_object(),
              .beaten = json_object(),
              .unsched = json_object(),
              .held = json_object(),
              .running = json_array()};
    int r;
    if (!s.nodes || !s.warned || !s.seen || !s.beaten || !s.running || !s.unsched || !s.held)
        r = error_set(err, -ENOMEM, "out of memory");
    else if ((r = k8s_client_new(cfg.kube, NULL, &s.kube, err)) >= 0 &&
             (r = k8s_client_new(cfg.kube,
                                 &(K8sOptions){.timeout_ms = MAX(500u, cfg.interval_s * 500u),
                                               .retries_429 = 1},
                                 &s.kube_jobs, err)) >= 0)
        r = client_new(cfg.server, cfg.token, &s.cp, err);
    if (r >= 0 && cfg.ca_file)
        r = client_set_ca_file(s.cp, cfg.ca_file, err);
    if (r >= 0) {
        /* A token the control plane refuses would only log a 401 per node every interval:
         * say it once and stop (a control plane that is not up yet is waited for). */
        json_t *who = NULL;
        long st = cp_call(&s, "GET", "/v1/whoami", NULL, &who);
        if (st == 401 || st == 403)
            r = error_set(err, -EACCES,
                          "the control plane at %s refuses this token (HTTP %ld: %s); make one "
                          "with `einsora token create --role admin`",
                          cfg.server, st,
                          strempty(json_string_value(json_object_get(who, "message"))));
        const char *role = json_string_value(json_object_get(who, "role"));
        if (st == 200 && role && STRNEQ(role, "admin"))
            r = error_set(err, -EACCES,
                          "the sync acts for every GPU node of the cluster and needs an admin "
                          "token; this one is %s's (%s)",
                          strempty(json_string_value(json_object_get(who, "user"))), role);
        json_decref(who);
    }
    if (r >= 0) {
        logf_(&s, "cluster %s, control plane %s, every %us", cfg.kube->server, cfg.server,
              cfg.interval_s);
        while (!(cfg.stop && *cfg.stop)) {
            int64_t start = now_s();
            turn(&s);
            /* a watch that failed at once must not spin */
            if (now_s() - start < 1 && !(cfg.stop && *cfg.stop))
                nanosleep(&(struct timespec){1, 0}, NULL);
        }
        logf_(&s, "stopped");
    }
    for (size_t i = 0; i < s.n_jobs; i++)
        free(s.jobs[i]);
    json_decref(s.nodes);
    json_decref(s.warned);
    json_decref(s.live);
    json_decref(s.seen);
    json_decref(s.beaten);
    json_decref(s.unsched);
    json_decref(s.held);
    json_decref(s.stuck);
    json_decref(s.running);
    free(s.rv);
    k8s_client_free(s.kube);
    k8s_client_free(s.kube_jobs);
    client_free(s.cp);
    return r < 0 ? r : 0;
}
