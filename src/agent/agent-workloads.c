/* agent-workloads.c: the workloads placed on this node (R17): the records of what runs here
 * (every method), the drivers that run them (container engine, libvirt, processes), starting
 * and stopping them as the control plane's work says, and confirming the started ones. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent-internal.h"
#include "agent/confirm.h"
#include "agent/records.h"
#include "agent/workloads.h"
#include "client/client.h"
#include "util/fileio.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "wire/fleet.h"

/* ---- workloads: the records of what runs here (every method), and the drivers below ---- */

/* The ids this agent runs: state/running, one "<id>" per line. */
static bool runs(const char *running, const char *id) {
    size_t n = strlen(id);
    for (const char *l = running; l && *l;) {
        const char *e = strchrnul(l, '\n');
        if ((size_t)(e - l) == n && !strncmp(l, id, n))
            return true;
        l = *e ? e + 1 : e;
    }
    return false;
}

static bool listed(char *const *ids, size_t n, const char *id, size_t len) {
    for (size_t i = 0; i < n; i++)
        if (strlen(ids[i]) == len && !strncmp(ids[i], id, len))
            return true;
    return false;
}

/* Remove the ids in off and add those in on in a one-id-per-line state file ("running",
 * "containers"), in one rewrite.
 *
 * "running" (what this agent started or adopted and has not stopped) is never fsync'd: it only
 * means something while the machine stays up, and a crashed agent finds the rewrite in the page
 * cache. After a power loss, which ends every workload of the machine with it, an old or empty
 * list costs nothing: a workload it still names is looked for and found gone, one it lost is
 * started again if still placed here, and whether a GPU is in use is what the fsync'd records
 * say (R7), written before any confirmation. So it is rewritten in place, not renamed over
 * (write_lines_file_in_place()): a rename made ext4 write it out at once, a disk write at every
 * start and stop. The driver files ("containers", ...), from which a restarted agent adopts
 * what its engines still run, stay durable. */
static WriteSync sync_of(const char *name) {
    return STREQ(name, "running") ? WRITE_SYNC_NONE : WRITE_SYNC_ALL;
}

/* set_members() on the file's text as the caller read it (NULL: no file). */
static int set_members_of(Agent *a, const char *name, const char *text, char *const *off,
                          size_t n_off, char *const *on, size_t n_on, Error *err) {
    _cleanup_free_ char *p = agent_state_file(a, name);
    StrBuf b = {0};
    for (const char *l = text; l && *l;) {
        const char *e = strchrnul(l, '\n');
        if (e > l && !listed(off, n_off, l, (size_t)(e - l)) &&
            !listed(on, n_on, l, (size_t)(e - l)))
            strbuf_printf(&b, "%.*s\n", (int)(e - l), l);
        l = *e ? e + 1 : e;
    }
    for (size_t i = 0; i < n_on; i++)
        strbuf_printf(&b, "%s\n", on[i]);
    int r;
    if (!p || !strbuf_cstr(&b))
        r = error_set(err, -ENOMEM, "out of memory");
    else if (sync_of(name) == WRITE_SYNC_NONE)
        r = write_lines_in_place(p, b.data, err);
    else
        r = write_file_atomic_as(p, b.data, sync_of(name), err);
    if (STREQ(name, "running"))
        a->running_writes++; /* even a failed write may have changed it */
    strbuf_done(&b);
    return r;
}

static int set_members(Agent *a, const char *name, char *const *off, size_t n_off, char *const *on,
                       size_t n_on, Error *err) {
    _cleanup_free_ char *text = agent_read_state(a, name);
    return set_members_of(a, name, text, off, n_off, on, n_on, err);
}

/* Add or remove id in a one-id-per-line state file. */
static int set_member(Agent *a, const char *name, const char *id, bool on, Error *err) {
    char *v[] = {(char *)id};
    return on ? set_members(a, name, NULL, 0, v, 1, err) : set_members(a, name, v, 1, NULL, 0, err);
}

static int set_running(Agent *a, const char *id, bool on, Error *err) {
    return set_member(a, "running", id, on, err);
}

/* ---- workloads through drivers: containers (drivers/engine.h), VMs (drivers/vm.h), R17 ---- */

enum { SLOT_ENGINE, SLOT_VM, SLOT_PROCESS, _SLOT_MAX };
_Static_assert(_SLOT_MAX == AGENT_SLOTS, "one driver per slot");

/* Per driver: what it is called in the log, and the state file of the ids it runs for us. */
static const char *const slot_names[_SLOT_MAX] = {[SLOT_ENGINE] = "container engine",
                                                  [SLOT_VM] = "libvirt",
                                                  [SLOT_PROCESS] = "process driver"};
static const char *const slot_files[_SLOT_MAX] = {
        [SLOT_ENGINE] = "containers", [SLOT_VM] = "vms", [SLOT_PROCESS] = "processes"};

static bool is_member(Agent *a, const char *name, const char *id) {
    _cleanup_free_ char *text = agent_read_state(a, name);
    return runs(text, id);
}

bool agent_workload_known(Agent *a, const char *id) {
    for (int k = 0; k < _SLOT_MAX; k++)
        if (is_member(a, slot_files[k], id))
            return true;
    return false;
}

static bool slot_configured(const Agent *a, int k) {
    const AgentWorkloadConfig *wc = a->cfg->workloads;
    return wc && (k == SLOT_ENGINE ? wc->engine.socket != NULL
                  : k == SLOT_VM   ? wc->vm.uri != NULL
                                   : wc->mlx_server != NULL || wc->llama_server != NULL);
}

static void slot_failed(Agent *a, int k, const Error *err) {
    if (!a->lost_driver[k])
        agent_logf(a, "%s: %s (retrying every heartbeat)", slot_names[k], error_message(err));
    a->lost_driver[k] = true;
}

/* Connect when not connected; on the first connection, adopt what the engine runs for us
 * (the engine wins: an agent restarted never starts a workload twice). */
bool agent_ensure_slot(Agent *a, int k) {
    if (a->drivers[k])
        return true;
    if (!slot_configured(a, k))
        return false;
    const AgentWorkloadConfig *wc = a->cfg->workloads;
    char product[160] = "";
    Error err = {0};
    /* The process driver keeps its pid and log files in the state folder (drivers/process.h). */
    _cleanup_free_ char *proc_dir = k == SLOT_PROCESS ? agent_state_file(a, "processes.d") : NULL;
    int r = k == SLOT_ENGINE
                    ? engine_driver_new(&wc->engine, &a->drivers[k], product, sizeof(product), &err)
            : k == SLOT_VM
                    ? vm_driver_new(&wc->vm, &a->drivers[k], &err)
                    : process_driver_new(&(ProcessConfig){.dir = proc_dir}, &a->drivers[k], &err);
    if (r < 0) {
        slot_failed(a, k, &err);
        return false;
    }
    a->lost_driver[k] = false;
    agent_logf(a, "%s: %s%s%s", slot_names[k], product, product[0] ? " at " : "",
               k == SLOT_ENGINE ? wc->engine.socket
               : k == SLOT_VM   ? wc->vm.uri
                                : strempty(proc_dir));
    char **ids = NULL;
    size_t n = 0;
    if (a->drivers[k]->ops->list(a->drivers[k], &ids, &n, &err) < 0)
        agent_logf(a, "%s: %s", slot_names[k], error_message(&err));
    for (size_t i = 0; i < n; i++) {
        if (is_member(a, slot_files[k], ids[i])) {
            /* Started (its records written) by an agent killed before "running" named it:
             * it runs all the same, and only what "running" names is ever stopped -- a
             * request released meanwhile would keep its container, and the GPU it was given
             * would go to the next one (R17). */
            if (!is_member(a, "running", ids[i])) {
                agent_logf(a,
                           "adopted the workload of request %s (started before the agent "
                           "stopped)",
                           ids[i]);
                (void)set_running(a, ids[i], true, &err);
            }
            continue;
        }
        /* Created but never started: an agent stopped between the engine's create and start.
         * It ran nothing, so it is removed and started afresh from its placement, not adopted
         * as running (R17: a placement is a running workload). */
        WorkloadState st;
        Error e2 = {0};
        if (k == SLOT_ENGINE && a->drivers[k]->ops->status(a->drivers[k], ids[i], &st, &e2) >= 0 &&
            st.status == WORKLOAD_STARTING) {
            if (a->drivers[k]->ops->stop(a->drivers[k], ids[i], 0, &e2) >= 0) {
                agent_logf(a,
                           "removed the never-started workload of request %s; it starts "
                           "again from its placement",
                           ids[i]);
                continue;
            }
            agent_logf(a, "cannot remove the never-started workload of request %s: %s", ids[i],
                       error_message(&e2));
        }
        agent_logf(a,
                   "adopted the workload of request %s (the %s runs it; this agent has no record "
                   "of starting it, so it is kept only if the control plane places request %s "
                   "here)",
                   ids[i], slot_names[k], ids[i]);
        (void)set_member(a, slot_files[k], ids[i], true, &err);
        (void)set_running(a, ids[i], true, &err);
        (void)strv_push(&a->unvouched, &a->n_unvouched, ids[i]);
    }
    driver_ids_free(ids, n);
    return true;
}

/* The driver slot that runs this placement, or -1 when none is configured (recorded only). */
static int slot_of(const Agent *a, json_t *w) {
    int k = agent_work_is_process(a->cfg->workloads, w) ? SLOT_PROCESS
            : agent_work_is_container(w)                ? SLOT_ENGINE
            : agent_work_is_vm(w)                       ? SLOT_VM
                                                        : -1;
    return k >= 0 && slot_configured(a, k) ? k : -1;
}

/* Tell the control plane the workload ended: its allocation is freed, the request `ended`. */
static void report_end(Agent *a, const char *id, bool failed, int exit_code, const char *message) {
    json_t *body = fleet_workload_end_body(failed, exit_code & 0xff, message);
    _cleanup_free_ char *path = strprintf("/v1/requests/%s/end", id);
    long status = 0;
    if (path && body && agent_call(a, "POST", path, body, &status, NULL) >= 0 && status < 300)
        agent_logf(a, "workload %s ended: %s", id,
                   message[0] ? message
                   : failed   ? "failed"
                              : "exited");
    json_decref(body);
}

/* The ports this agent's processes listen on (they share the host's ports, unlike containers):
 * a new process endpoint takes another. */
static size_t process_ports(Agent *a, unsigned *ports, size_t max) {
    Driver *d = a->drivers[SLOT_PROCESS];
    char **ids = NULL;
    size_t n = 0, k = 0;
    Error err = {0};
    if (d->ops->list(d, &ids, &n, &err) < 0)
        return 0;
    for (size_t i = 0; i < n && k < max; i++) {
        WorkloadState st;
        if (d->ops->status(d, ids[i], &st, &err) >= 0 && st.host_port &&
            (st.status == WORKLOAD_RUNNING || st.status == WORKLOAD_STARTING))
            ports[k++] = st.host_port;
    }
    driver_ids_free(ids, n);
    return k;
}

/* Start the placed workload through its driver; 0 when it runs (or already ran: adopted), with
 * the URL of a notebook or endpoint in url ("" when none). */
static int start_driven(Agent *a, int k, json_t *w, const char *id, char *url, size_t url_size) {
    if (!agent_ensure_slot(a, k)) {
        a->confirm_due = true; /* the work again at the next turn: started once it answers */
        return -EAGAIN;
    }
    const AgentConfig *cfg = a->cfg;
    DiscoverOptions o = cfg->discover;
    o.catalog = a->catalog;
    const MachineInventory *inv = NULL;
    Error err = {0};
    AgentSpecBuf buf;
    WorkloadSpec spec;
    int r = inventory_cache_get(&a->inventory, &o, &inv, &err); /* not NVML and sysfs again */
    unsigned taken[64];
    size_t n_taken = k == SLOT_PROCESS ? process_ports(a, taken, ARRAY_SIZE(taken)) : 0;
    char mig_uuid[96] = ""; /* a slice's own MIG device, never the whole GPU (R15, R17) */
    if (r >= 0 && k == SLOT_ENGINE)
        r = agent_mig_prepare(a, w, id, inv, mig_uuid, sizeof(mig_uuid), &err);
    if (r >= 0)
        r = k == SLOT_PROCESS
                    ? agent_work_process_spec(cfg->workloads, w, taken, n_taken, &buf, &spec, &err)
                    : agent_work_spec(cfg->workloads, w, inv, &buf, &spec, &err);
    if (r >= 0 && mig_uuid[0] && buf.n_gpus == 1)
        buf.gpus[0].uuid = mig_uuid;
    if (r >= 0)
        r = a->drivers[k]->ops->start(a->drivers[k], &spec, &err);
    if (r == -EEXIST)
        r = 0; /* the engine has it already: never started twice */
    if (r == -ECONNREFUSED || (r < 0 && strstr(err.message, "does not answer"))) {
        slot_failed(a, k, &err);
        a->confirm_due = true;
        return r;
    }
    if (r < 0) {
        agent_logf(a, "cannot start %s: %s", id, error_message(&err));
        report_end(a, id, true, 0, error_message(&err));
        return r;
    }
    if (set_member(a, slot_files[k], id, true, &err) < 0)
        agent_logf(a, "cannot record workload %s: %s", id, error_message(&err));
    a->watch.workloads_run = true; /* watched for its exit from now on (check_driven) */
    WorkloadState st = {0};
    if (a->drivers[k]->ops->status(a->drivers[k], id, &st, &err) >= 0)
        agent_work_url(cfg->workloads, w, st.host_port, url, url_size);
    return 0;
}

/* Stop (a hanging stop is killed after the grace period) and remove a driven workload; 0
 * when gone or not driven. */
/* Whether id is one of the unvouched adoptions (agent-internal.h); vouched: it leaves them. */
static bool unvouched(Agent *a, const char *id, bool vouched) {
    for (size_t i = 0; i < a->n_unvouched; i++) {
        if (STRNEQ(a->unvouched[i], id))
            continue;
        if (vouched) {
            free(a->unvouched[i]);
            a->unvouched[i] = a->unvouched[--a->n_unvouched];
        }
        return true;
    }
    return false;
}

/* 0: stopped (or nothing of ours ran it); 1: left alone, a workload this agent has no record
 * of starting whose request is not placed here (made by hand with our labels, or another
 * fleet's): it is only forgotten; < 0: the driver did not answer. */
static int stop_driven(Agent *a, const char *id) {
    for (int k = 0; k < _SLOT_MAX; k++) {
        if (!a->slot_may_list[k] || !is_member(a, slot_files[k], id))
            continue;
        if (!agent_ensure_slot(a, k))
            return -EAGAIN;
        if (unvouched(a, id, true)) {
            /* Made by an agent of this node (its making is labelled), whose request the control
             * plane no longer places here: it ended (released, say) while this agent had lost
             * its records. Left running, it would hold the GPUs the next placement is given
             * (R17). One with no making was made by hand: not ours to stop. */
            WorkloadState st = {0};
            Error serr = {0};
            if (a->drivers[k]->ops->status(a->drivers[k], id, &st, &serr) < 0 || !st.created[0]) {
                Error err = {0};
                agent_logf(a,
                           "left alone the %s's workload labelled request %s: this agent has no "
                           "record of starting it and the control plane places no such request "
                           "here (made by hand?)",
                           slot_names[k], id);
                (void)set_member(a, slot_files[k], id, false, &err);
                return 1;
            }
            agent_logf(a,
                       "stopping the %s's workload of request %s: an agent of this node made it, "
                       "and the control plane no longer places that request here",
                       slot_names[k], id);
        }
        Error err = {0};
        unsigned grace = a->cfg->workloads->stop_grace_s ? a->cfg->workloads->stop_grace_s
                                                         : AGENT_STOP_GRACE_DEFAULT_S;
        int r = a->drivers[k]->ops->stop(a->drivers[k], id, grace, &err);
        if (r < 0) {
            slot_failed(a, k, &err);
            return r;
        }
        return set_member(a, slot_files[k], id, false, &err);
    }
    return 0;
}

/* Ask each driver about every workload of ours; one that ended frees its allocation. */
void agent_check_driven(Agent *a) {
    bool runs = false; /* a driver runs (or may run: did not answer) one of ours */
    for (int k = 0; k < _SLOT_MAX; k++) {
        if (!agent_ensure_slot(a, k))
            continue;
        _cleanup_free_ char *list = agent_read_state(a, slot_files[k]);
        for (const char *l = list; l && *l;) {
            const char *e = strchrnul(l, '\n');
            char id[DRIVER_ID_MAX];
            snprintf(id, sizeof(id), "%.*s", (int)MIN((size_t)(e - l), sizeof(id) - 1), l);
            l = *e ? e + 1 : e;
            WorkloadState st;
            Error err = {0};
            if (!driver_id_is_valid(id))
                continue;
            if (a->drivers[k]->ops->status(a->drivers[k], id, &st, &err) < 0) {
                slot_failed(a, k, &err);
                runs = true;
                break;
            }
            if (st.status == WORKLOAD_RUNNING || st.status == WORKLOAD_STARTING) {
                runs = true;
                continue;
            }
            if (st.status == WORKLOAD_ABSENT)
                report_end(a, id, true, 0, "it is gone from the engine (removed from outside)");
            else /* the exit code is reported on its own; any more the engine says goes with it */
                report_end(a, id, st.status == WORKLOAD_FAILED, st.exit_code,
                           string_has_prefix(st.message, "exited with code") ? "" : st.message);
            if (stop_driven(a, id) >= 0) {
                (void)agent_records_remove(a->cfg->state_dir, id, &err);
                (void)set_running(a, id, false, &err);
            }
        }
    }
    a->watch.workloads_run = runs;
    agent_mig_reap(a);
}

/* A workload one answer places here that is to be confirmed: started now (through its driver,
 * or only recorded), or found running already (the control plane missed its confirmation, or
 * the engine's workload was adopted). */
#define STARTED_ID_MAX 32

typedef struct Started {
    json_t *w;
    char id[STARTED_ID_MAX];
    int slot;
    bool again;       /* it ran already: confirm only */
    bool record_only; /* active already: its GPUs on record, nothing to confirm */
    char url[200];
} Started;

/* What the log says once st's confirmation is answered (NULL when out of memory). */
static char *started_note(const Started *st) {
    if (st->again)
        return strprintf("confirmed %s: it runs", st->id);
    json_t *p = json_object_get(st->w, "placement");
    _cleanup_free_ char *gpus = json_dumps(json_object_get(p, "addresses"), JSON_COMPACT);
    return strprintf("started %s %s (%s, %s, GPUs %s)%s%s%s",
                     json_string_value(json_object_get(st->w, "kind")), st->id,
                     strempty(json_string_value(json_object_get(p, "method"))),
                     strempty(json_string_value(json_object_get(p, "class"))), strempty(gpus),
                     st->slot == SLOT_ENGINE    ? " in a container"
                     : st->slot == SLOT_VM      ? " as a VM"
                     : st->slot == SLOT_PROCESS ? " as a process"
                                                : " [recorded; no driver for it]",
                     st->url[0] ? " at " : "", st->url);
}

/* Work item w's request id, in decimal. */
static void work_item_id(json_t *w, char id[STARTED_ID_MAX]) {
    snprintf(id, STARTED_ID_MAX, "%" JSON_INTEGER_FORMAT,
             json_integer_value(json_object_get(w, "id")));
}

/* When the control plane placed work item w here (0 when it does not say). */
static int64_t placed_ms_of(json_t *w) {
    return json_integer_value(json_object_get(w, "placed_ms"));
}

/* Tell the control plane that these workloads run (placed -> active): queued for the pool,
 * which sends them side by side while the agent goes back to its work (confirm.h). */
static void confirm_started(Agent *a, Started *st, size_t n) {
    Confirm *list = NULL, **tail = &list; /* queued together: sent in one call */
    for (size_t i = 0; i < n; i++) {
        json_t *body = st[i].url[0] ? json_pack("{s:s}", "url", st[i].url) : NULL;
        Confirm *c = confirm_new(st[i].id, placed_ms_of(st[i].w), body, started_note(&st[i]));
        if (!c) {
            a->confirm_due = true; /* looked at again at the next turn */
            continue;
        }
        *tail = c;
        tail = &c->next;
    }
    if (list && confirm_submit(&a->confirms, list) < 0)
        a->confirm_due = true;
}

/* Log the answered confirmations; one that got no answer (or a 5xx) is looked at again at the
 * next turn (confirm_due): the work then shows it still placed, and it is confirmed again. */
void agent_confirms_answered(Agent *a, Confirm *done) {
    for (Confirm *c = done, *next; c; c = next) {
        next = c->next;
        if (c->r < 0 && a->cfg->stop && *a->cfg->stop) { /* cut short: the agent stops */
            confirm_free(c);
            continue;
        }
        agent_note_call(a, "POST", c->path, c->r, c->status, c->answer, &c->err);
        if (c->r >= 0 && c->status < 300) {
            if (c->note)
                agent_logf(a, "%s", c->note);
        } else if (c->r < 0 || c->status >= 500)
            a->confirm_due = true;
        confirm_free(c);
    }
}

void agent_take_confirms(Agent *a) {
    agent_confirms_answered(a, confirm_take_done(&a->confirms));
}

/* Start (or find running) the placed workload w; false when it is not to be confirmed (its
 * start failed: reported as ended, or retried at the next turn). */
static bool start_placed(Agent *a, json_t *w, const char *running, Started *st) {
    *st = (Started){.w = w, .slot = slot_of(a, w)};
    work_item_id(w, st->id);
    if (runs(running, st->id))
        return st->again = true;
    return st->slot < 0 || start_driven(a, st->slot, w, st->id, st->url, sizeof(st->url)) >= 0;
}

/* The ids whose GPU records go in this turn: the stopped ones (gone), and those of the records
 * (ids, n) that name a workload "running" does not and that is not being started. "running" is
 * not synced (set_members), so after a power loss it may have forgotten a workload whose
 * records were: the power loss ended it, and its GPUs would otherwise stay marked in use for
 * good. While the machine stays up, "running" names every workload with records (the two are
 * written together, the records first). -ENOMEM when out of memory (then gone's alone go). */
static int stale_records(const char *running, char *const *ids, size_t n, char *const *born,
                         size_t n_born, char *const *gone, size_t n_gone, char ***ret,
                         size_t *ret_n) {
    char **drop = NULL;
    size_t n_drop = 0;
    int r = 0;
    for (size_t k = 0; r >= 0 && k < n_gone; k++)
        r = strv_push(&drop, &n_drop, gone[k]);
    for (size_t k = 0; r >= 0 && k < n; k++)
        if (!runs(running, ids[k]) && !listed(born, n_born, ids[k], strlen(ids[k])) &&
            !listed(drop, n_drop, ids[k], strlen(ids[k])))
            r = strv_push(&drop, &n_drop, ids[k]);
    if (r < 0) {
        strv_free(drop, n_drop);
        return r;
    }
    *ret = drop;
    *ret_n = n_drop;
    return 0;
}

void agent_reconcile_workloads(Agent *a, json_t *work) {
    _cleanup_free_ char *running = agent_read_state(a, "running");
    unsigned running_writes = a->running_writes;
    size_t i, n_work = json_array_size(work);
    json_t *w;
    Error err = {0};
    char **gone = NULL, **born = NULL, **torn = NULL;
    size_t n_gone = 0, n_born = 0, n_st = 0, n_gpus = 0, n_torn = 0;
    /* Stop what the control plane no longer places here (released, cancelled, evicted) before
     * starting anything: the GPUs are free again before a new workload is confirmed on them. */
    for (const char *l = running; l && *l;) {
        const char *e = strchrnul(l, '\n');
        char id[32];
        bool whole = (size_t)(e - l) < sizeof(id);
        snprintf(id, sizeof(id), "%.*s", (int)MIN((size_t)(e - l), sizeof(id) - 1), l);
        l = *e ? e + 1 : e;
        uint64_t v;
        if (id[0] && !(whole && parse_decimal_uint64(id, UINT64_MAX, &v) >= 0 && v)) {
            /* Not a request id (a torn line after a power loss, an edit): nothing to stop, and
             * said as what it is rather than "stopped"; the rewrite below drops it. */
            char shown[sizeof(id)];
            snprintf(shown, sizeof(shown), "%s", id);
            agent_logf(a, "state/running: dropped a line that is not a request id ('%s')",
                       string_mask_control(utf8_make_valid(shown)));
            if (strv_push(&torn, &n_torn, id) < 0)
                break;
            continue;
        }
        bool placed = false;
        json_array_foreach(work, i, w) placed =
                placed || json_integer_value(json_object_get(w, "id")) == strtoll(id, NULL, 10);
        if (placed)
            (void)unvouched(a, id, true); /* placed here: ours, whatever started it */
        /* Not stopped (the engine did not answer): the GPU stays recorded, retried next turn. */
        int stopped = id[0] && !placed ? stop_driven(a, id) : -1;
        if (id[0] && !placed && stopped < 0)
            a->confirm_due = true;
        if (stopped == 1 && strv_push(&torn, &n_torn, id) < 0) /* forgotten, not stopped */
            break;
        if (stopped == 0 && strv_push(&gone, &n_gone, id) < 0)
            break; /* out of memory: the rest next time */
    }
    /* What was stopped is said so; torn lines only leave the list, with what was stopped. */
    size_t n_stopped = n_gone;
    for (size_t k = 0; k < n_torn; k++)
        if (strv_push(&gone, &n_gone, torn[k]) < 0)
            break;
    strv_free(torn, n_torn);
    _cleanup_free_ Started *st = n_work ? calloc(n_work, sizeof(*st)) : NULL;
    _cleanup_free_ const char **gpus = NULL, **gpu_ids = NULL;
    json_array_foreach(work, i, w) {
        const char *state = json_string_value(json_object_get(w, "state"));
        if (!st || !state)
            continue;
        if (STREQ(state, "active")) {
            /* Confirmed already: nothing to start or confirm, but one that runs here has its
             * GPUs on record too when its lines are missing (adopted from an engine, or kept
             * in "running" across a power loss that lost its records). */
            st[n_st] = (Started){.w = w, .record_only = true};
            work_item_id(w, st[n_st].id);
            if (!runs(running, st[n_st].id))
                continue;
        } else if (!STREQ(state, "placed") || !start_placed(a, w, running, &st[n_st]))
            continue;
        Started *s = &st[n_st++];
        if (!s->again && !s->record_only && strv_push(&born, &n_born, s->id) < 0)
            continue;
        /* Its GPUs are recorded before it is confirmed: from then on the binding code refuses
         * to rebind them (R7). One that ran already is recorded too when its lines are missing
         * (a power loss kept the new "running" but not the new records). */
        size_t k;
        json_t *addr;
        json_array_foreach(json_object_get(json_object_get(w, "placement"), "addresses"), k, addr) {
            const char *bdf = json_string_value(addr);
            if (!bdf || !pci_bdf_is_valid(bdf))
                continue;
            const char **g = realloc(gpus, (n_gpus + 1) * sizeof(*gpus)),
                       **gi = g ? realloc(gpu_ids, (n_gpus + 1) * sizeof(*gpu_ids)) : NULL;
            if (g)
                gpus = g;
            if (gi)
                gpu_ids = gi;
            if (!g || !gi)
                break;
            gpus[n_gpus] = bdf;
            gpu_ids[n_gpus++] = s->id;
        }
    }
    /* What this answer stopped and started, written once (one write of the records, not one
     * per workload), before any of it is confirmed: an addition must survive a power loss
     * before its confirmation (R7). The records are written over their older copy in place
     * and fdatasync'd (records.h): a start or a stop costs one synchronous write. "running" is
     * not synced (set_members). */
    char **drop = NULL, **bdfs = NULL, **ids = NULL;
    size_t n_drop = 0, n = 0;
    int added = agent_records_list(a->cfg->state_dir, &bdfs, &ids, &n, &err);
    if (added >= 0) { /* read once, for both */
        bool stale =
                stale_records(running, ids, n, born, n_born, gone, n_gone, &drop, &n_drop) >= 0;
        added = agent_records_update_from(a->cfg->state_dir, bdfs, ids, n,
                                          (const char *const *)(stale ? drop : gone),
                                          stale ? n_drop : n_gone, gpus, gpu_ids, n_gpus, &err);
    }
    strv_free(drop, n_drop);
    strv_free(bdfs, n);
    strv_free(ids, n);
    bool gpus_recorded = added >= 0;
    bool recorded = gpus_recorded;
    if (recorded && (n_gone || n_born)) {
        /* "running" as read above, unless a start or stop rewrote it since (an adoption). */
        bool current = running_writes == a->running_writes;
        _cleanup_free_ char *reread = current ? NULL : agent_read_state(a, "running");
        recorded = set_members_of(a, "running", current ? running : reread, gone, n_gone, born,
                                  n_born, &err) >= 0;
    }
    if (!recorded) {
        agent_logf(a, "cannot record workloads: %s", error_message(&err));
        a->confirm_due = true; /* the work again at the next turn: started (or adopted) then */
    }
    for (size_t k = 0; recorded && k < n_stopped; k++)
        agent_logf(a, "stopped %s", gone[k]);
    a->stopped = n_stopped > 0;
    /* Unrecorded, only the ones that ran already are confirmed, and only with their GPUs on
     * record; not one whose confirmation is still on its way, nor one just answered (this
     * answer was made before its commit: confirm.h). */
    size_t n_confirm = 0;
    for (size_t k = 0; k < n_st; k++)
        if (!st[k].record_only && (recorded || (gpus_recorded && st[k].again)) &&
            !(st[k].again && (confirm_pending(&a->confirms, st[k].id) ||
                              confirm_answered(&a->confirms, st[k].id, placed_ms_of(st[k].w)))))
            st[n_confirm++] = st[k];
    confirm_started(a, st, n_confirm);
    if (n_stopped)
        agent_mig_reap(a);
    strv_free(gone, n_gone);
    strv_free(born, n_born);
}

json_t *agent_running_json(Agent *a) {
    _cleanup_free_ char *running = agent_read_state(a, "running");
    json_t *list = json_array();
    for (const char *l = running; l && *l;) {
        const char *e = strchrnul(l, '\n');
        char id[32];
        uint64_t v;
        snprintf(id, sizeof(id), "%.*s", (int)MIN((size_t)(e - l), sizeof(id) - 1), l);
        /* Request ids only: after a power loss the unsynced list may hold a torn line, for
         * which the control plane would refuse the whole heartbeat (the agent's next turn with
         * work drops the line). */
        if ((size_t)(e - l) < sizeof(id) && parse_decimal_uint64(id, UINT64_MAX, &v) >= 0 && v)
            json_array_append_new(list, json_string(id));
        l = *e ? e + 1 : e;
    }
    return list;
}

void agent_slots_init(Agent *a) {
    for (int k = 0; k < _SLOT_MAX; k++) {
        _cleanup_free_ char *p = agent_state_file(a, slot_files[k]);
        /* Only a configured driver's starts add to its file (start_driven, ensure_slot). */
        a->slot_may_list[k] = slot_configured(a, k) || !p || access(p, F_OK) == 0;
    }
}
