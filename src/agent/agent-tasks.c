/* agent-tasks.c: the node agent's queued tasks: move a GPU between the host driver and
 * vfio-pci, run a consumer card's reset cycle check, and report each result (R4, R9). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "agent/agent-internal.h"
#include "agent/reset-check.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "wire/task.h"

/* How long a rebind waits for the holders of a GPU whose workload was just stopped. */
#define BIND_HOLDERS_WAIT_MS 10000

/* A fixture's processes are a picture of a machine, not processes of this one: a simulated
 * rebind does not wait for them (the real path does, R7). */
static int no_holders(const HostPaths *p, char *const *paths, size_t n_paths, Holder **ret,
                      size_t *ret_n, void *userdata, Error *err) {
    *ret = NULL;
    *ret_n = 0;
    return 0;
}

static int do_bind(Agent *a, const char *gpu, const char *target, char *msg, size_t size) {
    if (a->cfg->simulate) {
        /* The rest of R7 as the real path checks it, on the fixture's tree: the GPU's IOMMU
         * group holds nothing but its own functions, no workload of this agent's holds it. */
        BindOptions o = a->bind;
        o.dry_run = true;
        o.simulated = true;
        o.holders = no_holders;
        BindTarget to;
        BindResult res;
        Error err = {0};
        if (bind_target_from_string(target, &to) < 0)
            return snprintf(msg, size, "unknown target %s", target), -EINVAL;
        int r = gpu_bind(&o, gpu, to, &res, &err);
        if (r < 0) {
            snprintf(msg, size, "%s", error_message(&err));
            return r;
        }
        r = agent_state_set_line(a, "sim-binding", gpu, target, &err);
        if (r < 0)
            snprintf(msg, size, "%s", error_message(&err));
        else
            snprintf(msg, size, "simulated: %s now on %s", gpu,
                     STREQ(target, "vfio") ? "vfio-pci" : "the host driver");
        return r;
    }
    BindTarget to;
    BindResult res;
    Error err = {0};
    if (bind_target_from_string(target, &to) < 0)
        return snprintf(msg, size, "unknown target %s", target), -EINVAL;
    int r = gpu_bind(&a->bind, gpu, to, &res, &err);
    /* A workload stopped this turn may hold the GPU a little longer (a VM's vfio fd, a
     * container's device files): confirm its holders are gone before giving up (R4, R7). */
    for (int64_t deadline = agent_mono_ms() + BIND_HOLDERS_WAIT_MS;
         r == -EBUSY && a->stopped && agent_mono_ms() < deadline;) {
        nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
        err = (Error){0};
        r = gpu_bind(&a->bind, gpu, to, &res, &err);
    }
    if (r < 0)
        snprintf(msg, size, "%s", error_message(&err));
    else
        snprintf(msg, size, "%s and %zu function(s) of its IOMMU group on %s%s", gpu,
                 res.n_fns ? res.n_fns - 1 : 0,
                 STREQ(target, "vfio") ? "vfio-pci" : "the host driver",
                 res.changed ? "" : " (already)");
    return r;
}

static int do_reset_check(Agent *a, const char *gpu, const char **ret_verdict, char *msg,
                          size_t size) {
    if (a->cfg->simulate) {
        /* A scripted verdict (state/sim-reset "<bdf> pass|fail REASON"), else a pass. */
        _cleanup_free_ char *text = agent_read_state(a, "sim-reset");
        *ret_verdict = "pass";
        snprintf(msg, size, "simulated: 3 reset cycles passed");
        size_t n = strlen(gpu);
        for (const char *l = text; l && *l;) {
            const char *e = strchrnul(l, '\n');
            if ((size_t)(e - l) > n + 4 && !strncmp(l, gpu, n) && !strncmp(l + n, " fail", 5)) {
                const char *why = l + n + 5;
                why += *why == ' ';
                *ret_verdict = "fail";
                snprintf(msg, size, "%.*s", (int)(e - why), why);
            }
            l = *e ? e + 1 : e;
        }
        return 0;
    }
    ResetCheckOptions o;
    reset_check_options_init(&o);
    o.bind = a->bind;
    ResetCheckResult res;
    Error err = {0};
    int r = gpu_reset_check(&o, gpu, &res, &err);
    if (r < 0) {
        snprintf(msg, size, "%s", error_message(&err));
        return r;
    }
    *ret_verdict = reset_verdict_to_string(res.verdict);
    snprintf(msg, size, "%u reset cycle(s) via %s%s%s", res.cycles_run, res.reset_method,
             res.n_reasons ? ": " : "", res.n_reasons ? res.reasons[0] : "");
    return 0;
}

/* Send a task's result; one the control plane did not take is kept to be sent again when the
 * task comes back (the work is listed again once a call failed: confirm_due). */
static void send_result(Agent *a, uint64_t id, json_t *body) {
    char key[DECIMAL_U64_SIZE];
    format_u64(key, id);
    _cleanup_free_ char *path = strprintf("/v1/nodes/%s/tasks/%" PRIu64, a->cfg->id.name, id);
    long status = 0;
    bool taken = path && agent_call(a, "POST", path, body, &status, NULL) >= 0 &&
                 (status < 300 || (status >= 400 && status < 500)); /* 4xx: it is gone there */
    if (taken) {
        if (a->unsent_results)
            json_object_del(a->unsent_results, key);
        return;
    }
    if (!a->unsent_results)
        a->unsent_results = json_object();
    if (a->unsent_results)
        json_object_set(a->unsent_results, key, body);
    agent_logf(a, "task %s: the control plane did not take its result; sent again later", key);
    a->confirm_due = true;
}

void agent_do_task(Agent *a, json_t *j) {
    Task t;
    uint64_t id = 0;
    Error derr = {0};
    char msg[512] = "";
    const char *verdict = NULL;
    int r = wire_task_from_json(j, &t, &id, &derr);
    if (r < 0 && !id) {
        agent_logf(a, "task without an id refused: %s", error_message(&derr));
        return; /* nothing to answer to */
    }
    char key[DECIMAL_U64_SIZE];
    format_u64(key, id);
    json_t *unsent = a->unsent_results ? json_object_get(a->unsent_results, key) : NULL;
    if (unsent) { /* done already: its result again, not the task twice */
        send_result(a, id, json_incref(unsent));
        json_decref(unsent);
        return;
    }
    const char *kind = r < 0 ? "?" : task_kind_to_string(t.kind), *gpu = r < 0 ? "?" : t.gpu;
    if (r >= 0) /* a check may take a while (a hung reset waits for its timeout): say so */
        agent_logf(a, "task %" PRIu64 " %s %s: started", id, kind, gpu);
    if (r < 0) /* the server sent what this agent cannot read: the task failed, saying why */
        snprintf(msg, sizeof(msg), "%s", error_message(&derr));
    else if (t.kind == TASK_BIND)
        r = do_bind(a, gpu, t.target, msg, sizeof(msg));
    else
        r = do_reset_check(a, gpu, &verdict, msg, sizeof(msg));
    /* "task 7 bind GPU: done", "... reset-check GPU: pass", "... failed: WHY"; then the
     * details on their own line. */
    agent_logf(a, "task %" PRIu64 " %s %s: %s", id, kind, gpu,
               r < 0     ? "failed"
               : verdict ? verdict
                         : "done");
    if (msg[0])
        agent_logf(a, "  %s", msg);
    json_t *body = json_pack("{s:b, s:s}", "ok", r >= 0, "message", msg);
    if (verdict)
        json_object_set_new(body, "verdict", json_string(verdict));
    if (body)
        send_result(a, id, body);
    json_decref(body);
    a->push_due = true; /* a rebind changes what the kernel shows */
    inventory_cache_drop(&a->inventory);
}
