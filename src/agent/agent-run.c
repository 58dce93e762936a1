/* agent-run.c: the node agent's loop (agent-run.h): push the inventory, heartbeat, hand the
 * queued tasks to agent-tasks.c and the workloads placed here to agent-workloads.c, report. */
#include "agent/agent-run.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent-internal.h"
#include "agent/bind.h"
#include "agent/confirm.h"
#include "agent/inventory-cache.h"
#include "agent/records.h"
#include "agent/work-watch.h"
#include "agent/workloads.h"
#include "client/client.h"
#include "config/catalog-yaml.h"
#include "util/cleanup.h"
#include "util/fileio.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "wire/api-address.h"
#include "wire/node.h"

void agent_logf(const Agent *a, const char *fmt, ...) {
    FILE *f = a->cfg->log;
    if (!f)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(f, "agent %s: ", a->cfg->id.name);
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    fflush(f);
    va_end(ap);
}

char *agent_state_file(const Agent *a, const char *name) {
    return strprintf("%s/%s", a->cfg->state_dir, name);
}

char *agent_read_state(const Agent *a, const char *name) {
    _cleanup_free_ char *p = agent_state_file(a, name);
    char *text = NULL;
    size_t len;
    if (!p || read_full_file(p, 1 << 20, &text, &len) < 0)
        return NULL;
    return text;
}

/* Replace (or add) the "<key> <value>" line of key in a state file. */
int agent_state_set_line(const Agent *a, const char *name, const char *key, const char *value,
                         Error *err) {
    _cleanup_free_ char *text = agent_read_state(a, name), *p = agent_state_file(a, name);
    StrBuf b = {0};
    for (const char *l = text; l && *l;) {
        const char *e = strchrnul(l, '\n');
        if (!text_line_has_key(l, e, key))
            strbuf_printf(&b, "%.*s\n", (int)(e - l), l);
        l = *e ? e + 1 : e;
    }
    if (value)
        strbuf_printf(&b, "%s %s\n", key, value);
    int r = p ? write_file_atomic(p, strbuf_cstr(&b), err) : -ENOMEM;
    strbuf_done(&b);
    return r;
}

/* ---- the control plane ---- */

/* Log how a call went: the control plane lost or back (once each), an error answer. */
void agent_note_call(Agent *a, const char *method, const char *path, int r, long status, json_t *j,
                     const Error *err) {
    if (r < 0) {
        if (!a->lost)
            agent_logf(a, "control plane unreachable (retrying every heartbeat): %s",
                       error_message(err));
        a->lost = true;
        return;
    }
    if (a->lost)
        agent_logf(a, "control plane answers again");
    a->lost = false;
    /* A revoked or expired token is refused at every call until someone gives the agent a
     * new one: said once, with how, not once a heartbeat. Its workloads go on meanwhile. */
    if (status == 401) {
        if (!a->denied)
            agent_logf(a,
                       "%s %s: 401 %s; the control plane refuses this agent's token (revoked or "
                       "expired?): make a new one (einsora token create --role node --nodes "
                       "%s), write it to the token file and restart the agent; it retries "
                       "meanwhile, and says so when it is let in",
                       method, path,
                       j ? strempty(json_string_value(json_object_get(j, "message"))) : "",
                       a->cfg->id.name);
        a->denied = true;
        return;
    }
    if (a->denied && status < 300)
        agent_logf(a, "the control plane accepts this agent's token again");
    a->denied = a->denied && status >= 300;
    if (status >= 300)
        agent_logf(a, "%s %s: %ld %s", method, path, status,
                   j ? strempty(json_string_value(json_object_get(j, "message"))) : "");
}

int agent_call(Agent *a, const char *method, const char *path, json_t *body, long *ret_status,
               json_t **ret_json) {
    Error err = {0};
    long status = 0;
    json_t *j = NULL;
    int r = client_call(a->cl, method, path, body, NULL, &status, &j, &err);
    agent_note_call(a, method, path, r, status, j, &err);
    if (r < 0)
        return r;
    *ret_status = status;
    if (ret_json)
        *ret_json = j;
    else
        json_decref(j);
    return 0;
}

/* GPUs this agent quarantined (a rebind the kernel never finished; its records, R7/R9) go to
 * the control plane as quarantined with the reason, so that nothing is placed on them. */
static void mark_quarantined(Agent *a, json_t *node) {
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(node, "devices"), i, d) {
        const char *pci = json_string_value(json_object_get(d, "pci"));
        _cleanup_free_ char *why = NULL;
        if (!pci || agent_quarantine_get(a->cfg->state_dir, pci, &why) < 0)
            continue;
        char reason[sizeof(((ApiDevice *)0)->quarantine_reason)];
        str_copy_cut_utf8(reason, sizeof(reason),
                          why && why[0] ? why : "quarantined by the agent (einsora agent recover)");
        json_object_set_new(d, "quarantined", json_string(reason));
    }
}

/* The index of the device with PCI address pci in a node description; -1 if none. */
static ssize_t device_at(json_t *node, const char *pci) {
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(node, "devices"), i, d) {
        const char *p = json_string_value(json_object_get(d, "pci"));
        if (p && STREQ(p, pci))
            return (ssize_t)i;
    }
    return -1;
}

/* A GPU whose discovery could not read what the control plane places by (an NVML call that
 * failed, a sysfs id that reads garbage: Accelerator.fault) is not reported as read: a MIG GPU
 * whose MIG mode NVML did not give would be offered as a free whole GPU. Its last accepted
 * report stands; a GPU never reported goes as quarantined with the error (the record of a GPU
 * not to use, shown with its reason, R9), which an owner lifts once the error is gone. */
static void hold_faulty(Agent *a, json_t *node, const MachineInventory *inv) {
    json_t *last = NULL; /* the last accepted push, read once a GPU needs it */
    bool read = false;
    json_t *devices = json_object_get(node, "devices");
    _cleanup_free_ char *note = NULL;
    for (size_t i = 0; i < inv->n_accelerators; i++) {
        const Accelerator *acc = &inv->accelerators[i];
        ssize_t k = acc->fault && acc->bdf[0] ? device_at(node, acc->bdf) : -1;
        if (k < 0)
            continue;
        if (!read && a->pushed)
            last = json_loads(a->pushed, 0, NULL);
        read = true;
        ssize_t w = last ? device_at(last, acc->bdf) : -1;
        if (w >= 0)
            json_array_set(devices, (size_t)k,
                           json_array_get(json_object_get(last, "devices"), (size_t)w));
        else {
            char reason[sizeof(((ApiDevice *)0)->quarantine_reason)];
            str_copy_cut_utf8(reason, sizeof(reason), strempty(acc->error));
            json_object_set_new(json_array_get(devices, (size_t)k), "quarantined",
                                json_string(reason));
        }
        char *n = strprintf("%s%sGPU %s: %s (%s)", strempty(note), note ? "; " : "", acc->bdf,
                            strempty(acc->error),
                            w >= 0 ? "its last report is kept" : "reported quarantined");
        if (n) {
            free(note);
            note = n;
        }
    }
    json_decref(last);
    if (note && (!a->fault_note || STRNEQ(note, a->fault_note)))
        agent_logf(a, "discovery: %s", note);
    free(a->fault_note);
    a->fault_note = TAKE_PTR(note);
}

/* This agent's instance (WIRE_AGENT_HEADER): random, kept in its state folder, so that the
 * same agent restarted is the same instance and a second agent of the node (another folder)
 * is another one, which the control plane refuses while this one beats. */
static int agent_instance(Agent *a, char ret[static 33], Error *err) {
    _cleanup_free_ char *had = agent_read_state(a, "instance");
    if (had && strlen(strip_trailing(had)) == 32 && strspn(had, "0123456789abcdef") == 32) {
        memcpy(ret, had, 33);
        return 0;
    }
    unsigned char raw[16];
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
        return error_set(err, -errno, "cannot get random bytes for the agent's instance: %s",
                         strerror(errno));
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(ret + 2 * i, 3, "%02x", raw[i]);
    _cleanup_free_ char *path = agent_state_file(a, "instance"), *line = strprintf("%s\n", ret);
    int r = path && line ? write_string_file_atomic(path, line) : -ENOMEM;
    if (r < 0)
        return error_set(err, r, "cannot write %s: %s", path ? path : "the instance file",
                         strerror(-r));
    return 0;
}

/* Discover and push the inventory when it differs from what the control plane has. */
static void push_inventory(Agent *a) {
    const AgentConfig *cfg = a->cfg;
    DiscoverOptions o = cfg->discover;
    o.catalog = a->catalog;
    MachineInventory *inv = NULL;
    Error err = {0};
    if (machine_discover(&o, &inv, &err) < 0) {
        agent_logf(a, "discovery failed: %s", error_message(&err));
        return;
    }
    inventory_cache_set(&a->inventory, inv); /* workload starts use it from now on */
    _cleanup_free_ char *sim = cfg->simulate ? agent_read_state(a, "sim-binding") : NULL;
    json_t *node = agent_node_json(&cfg->id, inv, sim);
    if (node)
        hold_faulty(a, node, inv);
    mark_quarantined(a, node);
    char *text = node ? json_dumps(node, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (!text || (a->pushed && STREQ(a->pushed, text))) {
        json_decref(node);
        free(text);
        a->push_due = false;
        return;
    }
    _cleanup_free_ char *path = strprintf("/v1/nodes/%s", cfg->id.name);
    long status = 0;
    json_t *ans = NULL;
    Error cerr = {0};
    int r = path ? client_call(a->cl, "PUT", path, node, NULL, &status, &ans, &cerr) : -ENOMEM;
    /* 409: the node runs something and its inventory changed; tried again at the next turn,
     * its refusal logged once while it stays the same (not at every heartbeat). */
    const char *msg = ans ? json_string_value(json_object_get(ans, "message")) : NULL;
    bool same = r >= 0 && status >= 300 && msg && a->push_refusal && STREQ(msg, a->push_refusal);
    if (!same)
        agent_note_call(a, "PUT", path ? path : "", r, status, ans, &cerr);
    if (r >= 0 && status >= 300 && msg && !same) {
        free(a->push_refusal);
        a->push_refusal = strdup(msg);
    }
    if (r >= 0 && status == 409)
        a->kept_as_was = true;
    if (r >= 0 && status < 300) {
        /* A Mac's GPU is its apple_* members, not a device: said as such, not "0 devices". */
        if (json_object_get(node, "apple_unified_memory_gb"))
            agent_logf(
                    a, "inventory pushed (the Mac's GPU, %lld GB usable)",
                    (long long)json_integer_value(json_object_get(node, "apple_usable_memory_gb")));
        else
            agent_logf(a, "inventory pushed (%zu devices)",
                       json_array_size(json_object_get(node, "devices")));
        free(a->pushed);
        a->pushed = TAKE_PTR(text);
        a->push_due = false;
        free(a->push_refusal);
        a->push_refusal = NULL;
        a->kept_as_was = false; /* taken: the node is as described now */
    }
    json_decref(ans);
    json_decref(node);
    free(text);
}

int64_t agent_mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the loop ---- */

/* Do the node's work as the control plane answers it (the work route or a heartbeat). */
static void do_work(Agent *a, json_t *ans) {
    /* Workloads first: a drain with evict ends them and asks for the rebind in the same
     * answer, and a GPU is never rebound from under a workload that still runs (R4, R7):
     * stop what no longer runs here, then rebind (do_bind confirms the holders are gone). */
    a->stopped = false;
    agent_take_confirms(a);
    agent_check_driven(a); /* workloads that ended on their own free their GPUs first */
    agent_reconcile_workloads(a, json_object_get(ans, "workloads"));
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(ans, "tasks"), i, t) agent_do_task(a, t);
    if (a->push_due)
        push_inventory(a);
}

static void sleep_until(const AgentConfig *cfg, int64_t until_ms) {
    for (int64_t left; !(cfg->stop && *cfg->stop) && (left = until_ms - agent_mono_ms()) > 0;)
        nanosleep(&(struct timespec){0, (long)MIN(100, left) * 1000 * 1000}, NULL);
}

/* The control plane has the node: it took this agent's description, or keeps the node as it
 * was while its workloads run (Agent.kept_as_was). */
static bool registered(const Agent *a) {
    return a->pushed || a->kept_as_was;
}

static void turn(Agent *a) {
    agent_take_confirms(a); /* one that got no answer sets confirm_due, used below */
    if (a->push_due || !a->pushed || a->turns % 10 == 0)
        push_inventory(a);
    a->turns++;
    if (!registered(a))
        return; /* not registered yet: nothing to heartbeat for */
    for (int k = 0; k < AGENT_SLOTS; k++)
        (void)agent_ensure_slot(a, k); /* adopt what the engines run before saying what runs here */
    json_t *body = json_pack("{s:i, s:o}", "interval_s", (int)a->cfg->heartbeat_s, "running",
                             agent_running_json(a));
    _cleanup_free_ char *path = strprintf("/v1/nodes/%s/heartbeat", a->cfg->id.name);
    long status = 0;
    json_t *ans = NULL;
    int r = path ? agent_call(a, "POST", path, body, &status, &ans) : -ENOMEM;
    json_decref(body);
    if (r < 0 || status >= 300) {
        if (status == 404) { /* the control plane lost the node (new state file): register again */
            free(a->pushed);
            a->pushed = NULL;
            a->kept_as_was = false;
        }
        json_decref(ans);
        return;
    }
    /* The heartbeat is for liveness; the work comes through the long-poll (watch_work), or
     * with this answer from a control plane that has no work route. */
    if (a->watch.unsupported)
        do_work(a, ans);
    else
        agent_check_driven(a); /* workloads that ended on their own free their GPUs */
    json_decref(ans);
    if (a->confirm_due && !a->watch.unsupported) {
        /* A confirmation got no answer: the next poll, without a cursor, brings the work at
         * once, and what runs here but is still placed there is confirmed again. */
        a->confirm_due = false;
        a->watch.cursor[0] = 0;
    }
}

/* Until until_ms: long-poll the node's work and do it as soon as it changes. A wait may end
 * up to a second after until_ms (the route counts whole seconds). */
static void watch_work(Agent *a, int64_t until_ms) {
    const AgentConfig *cfg = a->cfg;
    for (int64_t now; !(cfg->stop && *cfg->stop) && (now = agent_mono_ms()) < until_ms;) {
        if (a->watch.unsupported || !registered(a) || a->lost) {
            sleep_until(cfg, until_ms);
            return;
        }
        json_t *work = NULL;
        Error err = {0};
        int r = work_watch_poll(&a->watch, a->cl, cfg->id.name,
                                (unsigned)((until_ms - now + 999) / 1000), &work, &err);
        agent_take_confirms(a);
        if (r > 0) {
            do_work(a, work);
            json_decref(work);
        } else if (r == 0 && a->watch.workloads_run) {
            agent_check_driven(a); /* the short wait ended: a workload that exited frees its GPUs */
        } else if (r < 0 && !(cfg->stop && *cfg->stop)) {
            if (!a->watch_failing || r == -EOPNOTSUPP)
                agent_logf(a, "%s", error_message(&err));
            a->watch_failing = r != -EOPNOTSUPP;
            if (r != -EOPNOTSUPP) /* not a busy loop while the control plane is away */
                sleep_until(cfg, MIN(until_ms, agent_mono_ms() + 1000));
            continue;
        }
        a->watch_failing = false;
    }
}

int agent_run(const AgentConfig *cfg_in, Error *err) {
    AgentConfig cfg = *cfg_in;
    if (!cfg.heartbeat_s)
        cfg.heartbeat_s = AGENT_HEARTBEAT_DEFAULT_S;
    if (!cfg.state_dir)
        cfg.state_dir = AGENT_STATE_DIR_DEFAULT;
    Agent a = {.cfg = &cfg};
    /* The state folder is this agent's for as long as it runs: an `agent recover` or `bind`
     * beside it would roll back or redo a move the agent has in flight. */
    _cleanup_close_ int lock_fd = -1;
    int r = agent_state_lock(cfg.state_dir, &lock_fd, err);
    if (r < 0)
        return r;
    if ((r = catalog_load_file(cfg.catalog_path ? cfg.catalog_path : catalog_default_path(), NULL,
                               &a.catalog, err)) < 0)
        return r;
    bind_options_init(&a.bind);
    a.bind.state_dir = cfg.state_dir;
    if ((r = host_paths_init(&a.bind.paths, cfg.discover.sysfs_root, cfg.discover.proc_root,
                             cfg.dev_root)) < 0) {
        catalog_free(a.catalog);
        return error_set(err, r, "a root folder's path is too long");
    }
    if ((r = client_new(cfg.server, cfg.token, &a.cl, err)) < 0 ||
        (cfg.ca_file && (r = client_set_ca_file(a.cl, cfg.ca_file, err)) < 0)) {
        client_free(a.cl);
        catalog_free(a.catalog);
        return r;
    }
    if (client_clear_server(a.cl))
        agent_logf(&a,
                   "warning: this node's token goes in clear to %s (plain http to another "
                   "machine); give the control plane's https:// URL",
                   client_clear_server(a.cl));
    /* Reconcile first: a rebind the previous agent left half-done is completed or rolled back
     * from the journal and what the kernel shows, before anything is reported. */
    if (!cfg.simulate) {
        RecoverResult rec;
        Error e = {0};
        if (gpu_recover(&a.bind, &rec, &e) >= 0 && rec.action != RECOVER_NOTHING)
            agent_logf(&a, "recovered %s: %s", rec.gpu, recover_action_to_string(rec.action));
        else if (e.message[0])
            agent_logf(&a, "journal: %s", error_message(&e));
    }
    char instance[33];
    if ((r = agent_instance(&a, instance, err)) < 0 ||
        (r = client_set_header(a.cl, WIRE_AGENT_HEADER, instance, err)) < 0) {
        client_free(a.cl);
        catalog_free(a.catalog);
        return r;
    }
    agent_logf(&a, "reporting to %s every %us (instance %.8s)", cfg.server, cfg.heartbeat_s,
               instance);
    /* R3: a datacenter node's mode is never a silent default: without --mode the agent reports
     * what its GPUs' bindings show, and says so. */
    if (cfg.id.site_kind && STREQ(cfg.id.site_kind, "datacenter") && !cfg.id.mode)
        agent_logf(&a, "no --mode: this datacenter node reports the mode its GPUs' bindings show "
                       "(vm-passthrough when every GPU is on vfio-pci, else container); give "
                       "--mode to state it (R3)");
    if (cfg.stop)
        client_set_abort(a.cl, cfg.stop); /* a long-poll in flight ends with the agent */
    confirm_pool_init(&a.confirms, cfg.server, cfg.token, cfg.id.name, cfg.stop);
    a.confirms.ca_file = cfg.ca_file;
    a.confirms.instance = instance;
    agent_slots_init(&a);
    while (!(cfg.stop && *cfg.stop)) {
        int64_t next = agent_mono_ms() + (int64_t)cfg.heartbeat_s * 1000;
        turn(&a);
        watch_work(&a, next);
    }
    for (int k = 0; k < AGENT_SLOTS; k++)
        driver_free(a.drivers[k]);
    strv_free(a.unvouched, a.n_unvouched);
    free(a.push_refusal);
    free(a.fault_note);
    free(a.pushed);
    json_decref(a.unsent_results);
    inventory_cache_drop(&a.inventory);
    agent_confirms_answered(&a, confirm_pool_done(&a.confirms));
    agent_logf(&a, "stopped");
    client_free(a.cl);
    catalog_free(a.catalog);
    return 0;
}
