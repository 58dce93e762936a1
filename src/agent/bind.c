/* bind.c: driver_override rebinding of a GPU's IOMMU group, with journal and recovery. */
#include "bind.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/group.h"
#include "agent/kernel-write.h"
#include "agent/records.h"
#include "util/macro.h"
#include "util/name-table.h"
#include "util/strutil.h"

#define VFIO "vfio-pci"

NAME_TABLE_TO_STRING(BindTarget, bind_target,
                     _BIND_TARGET_MAX, [BIND_TO_VFIO] = "vfio", [BIND_TO_HOST] = "host")

/* The kernel driver's own name is accepted for "vfio" too. */
int bind_target_from_string(const char *s, BindTarget *ret) {
    int t = STREQ(s, VFIO) ? BIND_TO_VFIO
                           : name_table_lookup(bind_target_names, _BIND_TARGET_MAX, s);
    if (t < 0)
        return -EINVAL;
    *ret = (BindTarget)t;
    return 0;
}

NAME_TABLE_TO_STRING(
        RecoverAction, recover_action,
        _RECOVER_ACTION_MAX, [RECOVER_NOTHING] = "nothing", [RECOVER_COMPLETED] = "completed",
        [RECOVER_ROLLED_BACK] = "rolled-back", [RECOVER_QUARANTINED] = "quarantined")

void bind_options_init(BindOptions *o) {
    *o = (BindOptions){.state_dir = AGENT_STATE_DIR_DEFAULT,
                       .timeout_ms = 10000,
                       .modprobe = "modprobe",
                       .holders = holders_scan_proc};
    (void)host_paths_init(&o->paths, NULL, NULL, NULL);
}

static long long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The kernel's current view of one function. */
static void read_state(const HostPaths *p, const char *bdf, char driver[64], char override[64]) {
    char *s = NULL;
    driver[0] = override[0] = '\0';
    if (pci_driver_name(p, bdf, &s) >= 0)
        snprintf(driver, 64, "%s", s);
    free(s);
    s = NULL;
    if (pci_read_attr(p, bdf, "driver_override", &s) >= 0 && !STREQ(s, "(null)"))
        snprintf(override, 64, "%s", s);
    free(s);
}

static bool at_target(const JournalOp *op, const JournalFn *fn, const char *driver) {
    if (op->to_vfio)
        return STREQ(driver, VFIO);
    return fn->to[0] ? STREQ(driver, fn->to) : STRNEQ(driver, VFIO);
}

/* Wait until the function's driver is `want` (NULL: until it has none), or the timeout. Real
 * kernels answer synchronously unless a driver probes asynchronously; waiting covers both. */
static bool wait_driver(const BindOptions *o, const JournalOp *op, const JournalFn *fn,
                        bool want_unbound) {
    long long deadline = now_us() + (long long)o->timeout_ms * 1000;
    for (;;) {
        char driver[64], override[64];
        read_state(&o->paths, fn->bdf, driver, override);
        if (want_unbound ? driver[0] == '\0' : at_target(op, fn, driver))
            return true;
        if (now_us() > deadline)
            return false;
        usleep(200);
    }
}

static void fill_functions(const HostPaths *p, const JournalOp *op, BindFunction *out,
                           size_t *n_out) {
    for (size_t i = 0; i < op->n_fns; i++) {
        BindFunction *f = &out[i];
        snprintf(f->bdf, sizeof(f->bdf), "%s", op->fns[i].bdf);
        snprintf(f->before, sizeof(f->before), "%s", op->fns[i].from);
        read_state(p, f->bdf, f->after, f->override);
    }
    *n_out = op->n_fns;
}

static int log_step(const BindOptions *o, JournalFn *fn, JournalStep step, Error *err) {
    if (fn->step >= step)
        return 0;
    int r = journal_step(o->state_dir, fn->bdf, step, err);
    if (r < 0)
        return r;
    fn->step = step;
    if (o->on_step)
        o->on_step(fn->bdf, step, o->step_userdata);
    return 0;
}

static int write_attr(const BindOptions *o, const char *bdf, const char *attr, const char *value,
                      Error *err) {
    char path[PATH_MAX];
    int r = pci_attr_path(&o->paths, bdf, attr, path, sizeof(path));
    if (r < 0)
        return error_set(err, r, "the sysfs path of %s is too long", bdf);
    return kernel_write(path, value, o->timeout_ms, err);
}

static int write_probe(const BindOptions *o, const char *bdf, Error *err) {
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof(path), "%s/bus/pci/drivers_probe", o->paths.sysfs) >=
        sizeof(path))
        return error_set(err, -ENAMETOOLONG, "the sysfs path %s is too long", o->paths.sysfs);
    return kernel_write(path, bdf, o->timeout_ms, err);
}

/* Bring one function from whatever state it is in to the operation's target, step by step;
 * idempotent, so recovery runs it again on a half-moved function. */
static int advance_fn(const BindOptions *o, JournalOp *op, JournalFn *fn, Error *err) {
    char driver[64], override[64];
    read_state(&o->paths, fn->bdf, driver, override);
    const char *want_override = op->to_vfio ? VFIO : "";
    int r;
    if (STRNEQ(override, want_override)) {
        r = write_attr(o, fn->bdf, "driver_override", op->to_vfio ? VFIO "\n" : "\n", err);
        if (r < 0)
            return r;
    }
    if ((r = log_step(o, fn, JOURNAL_STEP_OVERRIDE, err)) < 0)
        return r;
    if (driver[0] && !at_target(op, fn, driver)) {
        r = write_attr(o, fn->bdf, "driver/unbind", fn->bdf, err);
        if (r < 0)
            return r;
        if (!wait_driver(o, op, fn, true))
            return error_set(err, -EBUSY,
                             "%s stayed on %s after it was told to let go (waited %d ms)", fn->bdf,
                             driver, o->timeout_ms);
    }
    if ((r = log_step(o, fn, JOURNAL_STEP_UNBOUND, err)) < 0)
        return r;
    read_state(&o->paths, fn->bdf, driver, override);
    if (!at_target(op, fn, driver) || !driver[0]) {
        r = write_probe(o, fn->bdf, err);
        if (r < 0)
            return r;
    }
    if ((r = log_step(o, fn, JOURNAL_STEP_PROBED, err)) < 0)
        return r;
    if (!wait_driver(o, op, fn, false)) {
        read_state(&o->paths, fn->bdf, driver, override);
        return error_set(err, -ENODEV, "%s did not come up on %s (the kernel shows %s)", fn->bdf,
                         op->to_vfio ? VFIO
                         : fn->to[0] ? fn->to
                                     : "a host driver",
                         driver[0] ? driver : "no driver");
    }
    return log_step(o, fn, JOURNAL_STEP_VERIFIED, err);
}

/* Put every function back on the driver it had, with its old driver_override. */
static int roll_back(const BindOptions *o, const JournalOp *op, Error *err) {
    JournalOp back = *op;
    back.to_vfio = false;
    for (size_t i = 0; i < op->n_fns; i++) {
        JournalFn fn = op->fns[i];
        snprintf(fn.to, sizeof(fn.to), "%s", fn.from);
        char driver[64], override[64];
        read_state(&o->paths, fn.bdf, driver, override);
        int r = 0;
        if (STRNEQ(override, fn.override)) {
            char value[JOURNAL_NAME_MAX + 1];
            snprintf(value, sizeof(value), "%s\n", fn.override);
            r = write_attr(o, fn.bdf, "driver_override", value, err);
        }
        if (r >= 0 && STRNEQ(driver, fn.from)) {
            /* Off the driver before the probe, as advance_fn() waits: a probe of a function
             * still bound does nothing, and it would be left on no driver at all. */
            if (driver[0] && (r = write_attr(o, fn.bdf, "driver/unbind", fn.bdf, err)) >= 0 &&
                !wait_driver(o, &back, &fn, true))
                r = error_set(err, -EBUSY, "%s stayed on %s when it was put back", fn.bdf, driver);
            if (r >= 0 && fn.from[0]) {
                r = write_probe(o, fn.bdf, err);
                if (r >= 0 && !wait_driver(o, &back, &fn, false))
                    r = error_set(err, -ENODEV, "%s did not go back to %s", fn.bdf, fn.from);
            }
        }
        if (r < 0)
            return r;
    }
    return 0;
}

static int quarantine(const BindOptions *o, const JournalOp *op, const char *why, Error *err) {
    Error qerr = {0};
    _cleanup_free_ char *reason =
            strprintf("moving to %s failed: %s", op->to_vfio ? VFIO : "the host driver", why);
    if (agent_quarantine_set(o->state_dir, op->gpu, reason ? reason : why, &qerr) < 0 ||
        journal_end(o->state_dir, op->id, JOURNAL_QUARANTINED, &qerr) < 0)
        return error_set(err, qerr.code, "%s", error_message(&qerr));
    return 0;
}

/* Run op forward; on a failure roll back, or quarantine when the kernel hung or rollback failed. */
static int execute(const BindOptions *o, JournalOp *op, Error *err) {
    Error ferr = {0};
    int r = 0;
    for (size_t i = 0; i < op->n_fns && r >= 0; i++)
        r = advance_fn(o, op, &op->fns[i], &ferr);
    if (r >= 0)
        return journal_end(o->state_dir, op->id, JOURNAL_DONE, err);
    if (r != -ETIMEDOUT) {
        Error berr = {0};
        if (roll_back(o, op, &berr) >= 0) {
            int q = journal_end(o->state_dir, op->id, JOURNAL_ROLLED_BACK, err);
            if (q < 0)
                return q;
            return error_set(err, r, "%s: the GPU was put back where it was", error_message(&ferr));
        }
        r = berr.code == -ETIMEDOUT ? -ETIMEDOUT : r;
    }
    (void)quarantine(o, op, error_message(&ferr), NULL);
    return error_set(err, r,
                     "%s: GPU %s is quarantined, not half-bound: check it, then run 'einsora agent "
                     "recover --clear-quarantine %s'",
                     error_message(&ferr), op->gpu, op->gpu);
}

int gpu_recover(const BindOptions *o, RecoverResult *ret, Error *err) {
    JournalOp op;
    RecoverResult res = {.action = RECOVER_NOTHING};
    int r = journal_load(o->state_dir, &op, err);
    if (r == -ENOENT || (r >= 0 && op.outcome != JOURNAL_OPEN)) {
        *ret = res;
        return 0;
    }
    if (r < 0)
        return r;
    snprintf(res.gpu, sizeof(res.gpu), "%s", op.gpu);
    /* Forward when any function already left its old driver or passed the unbind step: the
     * kernel has moved, finishing is as safe as undoing and is what was asked. */
    bool forward = false;
    for (size_t i = 0; i < op.n_fns; i++) {
        char driver[64], override[64];
        read_state(&o->paths, op.fns[i].bdf, driver, override);
        forward =
                forward || op.fns[i].step >= JOURNAL_STEP_UNBOUND || STRNEQ(driver, op.fns[i].from);
    }
    Error ferr = {0};
    if (forward) {
        r = 0;
        for (size_t i = 0; i < op.n_fns && r >= 0; i++)
            r = advance_fn(o, &op, &op.fns[i], &ferr);
        if (r >= 0)
            r = journal_end(o->state_dir, op.id, JOURNAL_DONE, &ferr);
        res.action = RECOVER_COMPLETED;
    } else {
        r = roll_back(o, &op, &ferr);
        if (r >= 0)
            r = journal_end(o->state_dir, op.id, JOURNAL_ROLLED_BACK, &ferr);
        res.action = RECOVER_ROLLED_BACK;
    }
    if (r < 0) {
        res.action = RECOVER_QUARANTINED;
        r = quarantine(o, &op, error_message(&ferr), err);
        if (r < 0)
            return r;
    }
    fill_functions(&o->paths, &op, res.fns, &res.n_fns);
    *ret = res;
    return 0;
}

static void plan_add(BindResult *res, const char *fmt, ...) _printf_(2, 3);
static void plan_add(BindResult *res, const char *fmt, ...) {
    size_t len = strlen(res->plan);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->plan + len, sizeof(res->plan) - len, fmt, ap);
    va_end(ap);
    len = strlen(res->plan);
    if (len + 1 < sizeof(res->plan))
        strcat(res->plan, "\n");
}

/* Every reason the GPU may not move now, as sentences joined into err; 0 when it may. */
static int check_quarantine(const BindOptions *o, const char *bdf, Error *err) {
    _cleanup_free_ char *q = NULL;
    if (pci_bdf_is_valid(bdf) && agent_quarantine_get(o->state_dir, bdf, &q) >= 0)
        return error_set(err, -EPERM,
                         "GPU %s is quarantined (%s); check it, then run 'einsora agent recover "
                         "--clear-quarantine %s'",
                         bdf, q, bdf);
    return 0;
}

static int check_movable(const BindOptions *o, const GpuGroup *g, BindTarget to, Error *err) {
    int q = check_quarantine(o, g->gpu, err);
    if (q < 0)
        return q;
    if (to == BIND_TO_VFIO) {
        if (g->iommu_group < 0)
            return error_set(
                    err, -EOPNOTSUPP,
                    "GPU %s cannot go to a VM because the IOMMU is off on this machine: turn on "
                    "VT-d or AMD-Vi in the firmware and boot with intel_iommu=on or amd_iommu=on",
                    g->gpu);
        const GroupMember *f = gpu_group_foreign(g);
        if (f)
            return error_set(err, -EPERM,
                             "GPU %s shares its IOMMU group %d with %s (%s, driver %s), which is "
                             "not part of the GPU, so the group cannot be given to a VM without "
                             "taking that device from the host; move the GPU to another slot",
                             g->gpu, g->iommu_group, f->bdf, pci_class_describe(f->class_code),
                             f->driver[0] ? f->driver : "none");
        if (g->boot_vga)
            return error_set(err, -EPERM,
                             "GPU %s is the boot display device (it shows this machine's console), "
                             "so it stays with the host",
                             g->gpu);
    }
    const GroupMember *fns[8];
    size_t n = gpu_group_functions(g, fns, ARRAY_SIZE(fns));
    for (size_t i = 0; i < n; i++) {
        char **ids = NULL;
        size_t n_ids = 0;
        int r = agent_records_for_gpu(o->state_dir, fns[i]->bdf, &ids, &n_ids, err);
        if (r < 0)
            return r;
        if (n_ids > 0) {
            StrBuf b = {0};
            for (size_t k = 0; k < n_ids; k++)
                strbuf_printf(&b, "%s%s", k ? ", " : "", ids[k]);
            r = error_set(err, -EBUSY,
                          "GPU %s is running workload %s (as the agent's records show); stop it "
                          "before moving the GPU",
                          g->gpu, strempty(strbuf_cstr(&b)));
            strbuf_done(&b);
            strv_free(ids, n_ids);
            return r;
        }
    }
    char **paths = NULL;
    size_t n_paths = 0;
    for (size_t i = 0; i < n; i++) {
        char **more;
        size_t n_more;
        if (gpu_device_files(&o->paths, fns[i]->bdf, g->iommu_group, &more, &n_more) < 0)
            continue;
        char **np = realloc(paths, (n_paths + n_more + 1) * sizeof(char *));
        if (!np) {
            strv_free(more, n_more);
            strv_free(paths, n_paths);
            return error_set(err, -ENOMEM, "out of memory");
        }
        paths = np;
        memcpy(paths + n_paths, more, n_more * sizeof(char *));
        n_paths += n_more;
        free(more);
    }
    Holder *h = NULL;
    size_t n_h = 0;
    HoldersFn fn = o->holders ? o->holders : holders_scan_proc;
    int r = n_paths ? fn(&o->paths, paths, n_paths, &h, &n_h, o->holders_userdata, err) : 0;
    strv_free(paths, n_paths);
    if (r < 0) {
        free(h);
        return r;
    }
    if (n_h > 0) {
        _cleanup_free_ char *who = holders_describe(h, n_h);
        free(h);
        return error_set(err, -EBUSY,
                         "GPU %s is in use: %s; stop those processes before moving the GPU", g->gpu,
                         strempty(who));
    }
    free(h);
    return 0;
}

/* Run "<modprobe> vfio-pci" and wait for the driver to appear in sysfs. */
static int load_vfio(const BindOptions *o, Error *err) {
    _cleanup_free_ char *dir = strprintf("%s/bus/pci/drivers/" VFIO, o->paths.sysfs);
    if (!dir)
        return error_set(err, -ENOMEM, "out of memory");
    struct stat st;
    if (stat(dir, &st) >= 0)
        return 0;
    pid_t pid = fork();
    if (pid < 0)
        return error_set(err, -errno, "could not start %s: %s", o->modprobe, strerror(errno));
    if (pid == 0) {
        execlp(o->modprobe, o->modprobe, VFIO, (char *)NULL);
        _exit(127);
    }
    long long deadline = now_us() + (long long)o->timeout_ms * 1000;
    int status = 0;
    bool exited = false;
    while (!exited && now_us() < deadline) {
        exited = waitpid(pid, &status, WNOHANG) == pid;
        if (!exited)
            usleep(500);
    }
    if (!exited) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return error_set(err, -ETIMEDOUT, "loading the vfio-pci module did not finish within %d ms",
                         o->timeout_ms);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return error_set(err, -ENOENT,
                         "the vfio-pci module could not be loaded ('%s vfio-pci' failed); is it "
                         "installed for this kernel?",
                         o->modprobe);
    while (stat(dir, &st) < 0) {
        if (now_us() > deadline)
            return error_set(err, -ENOENT, "vfio-pci was loaded but does not show in %s", dir);
        usleep(200);
    }
    return 0;
}

/* The operation: every GPU function of the group, with where it goes. */
static int plan_op(const BindOptions *o, const GpuGroup *g, BindTarget to, JournalOp *op,
                   Error *err) {
    *op = (JournalOp){.to_vfio = to == BIND_TO_VFIO};
    snprintf(op->gpu, sizeof(op->gpu), "%s", g->gpu);
    const GroupMember *fns[JOURNAL_MAX_FNS];
    size_t n = gpu_group_functions(g, fns, ARRAY_SIZE(fns));
    for (size_t i = 0; i < n; i++) {
        JournalFn *fn = &op->fns[op->n_fns++];
        *fn = (JournalFn){0};
        snprintf(fn->bdf, sizeof(fn->bdf), "%s", fns[i]->bdf);
        snprintf(fn->from, sizeof(fn->from), "%s", fns[i]->driver);
        snprintf(fn->override, sizeof(fn->override), "%s", fns[i]->override);
        if (to == BIND_TO_VFIO) {
            snprintf(fn->to, sizeof(fn->to), VFIO);
            continue;
        }
        _cleanup_free_ char *remembered = NULL;
        if (agent_host_driver_get(o->state_dir, fn->bdf, &remembered) >= 0 &&
            STRNEQ(remembered, VFIO))
            snprintf(fn->to, sizeof(fn->to), "%s", remembered);
        else
            snprintf(fn->to, sizeof(fn->to), "%s",
                     pci_default_host_driver(fns[i]->vendor, fns[i]->class_code));
        /* A host driver that is not loaded cannot bind: then any driver but vfio-pci (or none) will
         * do for the GPU's other functions (its audio, its USB). The GPU itself would be left on
         * no driver, of use to neither containers nor VMs (R7: containers get a GPU its host
         * driver holds): refused before anything is written. */
        char dir[PATH_MAX];
        if (fn->to[0] && ((size_t)snprintf(dir, sizeof(dir), "%s/bus/pci/drivers/%s",
                                           o->paths.sysfs, fn->to) >= sizeof(dir) ||
                          access(dir, F_OK) < 0)) {
            if (STREQ(fn->bdf, g->gpu) && !o->simulated)
                return error_set(err, -ENOENT,
                                 "GPU %s would be left on no driver: its host driver %s is not "
                                 "loaded on this machine (load it, e.g. modprobe %s, then bind "
                                 "again); nothing was changed",
                                 g->gpu, fn->to, fn->to);
            fn->to[0] = '\0';
        }
    }
    if (op->n_fns == 0)
        return error_set(err, -ENODEV, "GPU %s has no functions in its IOMMU group", g->gpu);
    return 0;
}

static bool op_is_done(const BindOptions *o, const JournalOp *op) {
    for (size_t i = 0; i < op->n_fns; i++) {
        char driver[64], override[64];
        read_state(&o->paths, op->fns[i].bdf, driver, override);
        if (!at_target(op, &op->fns[i], driver) || STRNEQ(override, op->to_vfio ? VFIO : ""))
            return false;
    }
    return true;
}

static int bind_one(const BindOptions *o, const char *bdf, BindTarget to, BindResult *ret,
                    Error *err) {
    BindResult res = {.to = to, .dry_run = o->dry_run};
    snprintf(res.gpu, sizeof(res.gpu), "%s", strempty(bdf));
    /* First: a quarantined GPU may no longer even read as a GPU. */
    int r = check_quarantine(o, bdf, err);
    if (r < 0)
        return r;
    GpuGroup g;
    if ((r = gpu_group_load(&o->paths, bdf, &g, err)) < 0)
        return r;
    res.iommu_group = g.iommu_group;
    if ((r = check_movable(o, &g, to, err)) < 0)
        return r;
    JournalOp op;
    if ((r = plan_op(o, &g, to, &op, err)) < 0)
        return r;
    if (!op_is_done(o, &op)) {
        _cleanup_free_ char *vfio_dir = strprintf("%s/bus/pci/drivers/" VFIO, o->paths.sysfs);
        if (to == BIND_TO_VFIO && (!vfio_dir || access(vfio_dir, F_OK) < 0))
            plan_add(&res, "%s %s", o->modprobe, VFIO);
        for (size_t i = 0; i < op.n_fns; i++) {
            const JournalFn *fn = &op.fns[i];
            plan_add(&res, "%s/driver_override <- %s", fn->bdf, op.to_vfio ? VFIO : "(clear)");
            if (fn->from[0] && !at_target(&op, fn, fn->from))
                plan_add(&res, "%s/driver/unbind <- %s   (from %s)", fn->bdf, fn->bdf, fn->from);
            plan_add(&res, "drivers_probe <- %s   (expect %s)", fn->bdf,
                     op.to_vfio  ? VFIO
                     : fn->to[0] ? fn->to
                                 : "a host driver");
        }
        if (!o->dry_run) {
            if (to == BIND_TO_VFIO && (r = load_vfio(o, err)) < 0)
                return r;
            /* Where each function goes back to, kept before the first write so it is never lost. */
            for (size_t i = 0; to == BIND_TO_VFIO && i < op.n_fns; i++)
                if (op.fns[i].from[0] && STRNEQ(op.fns[i].from, VFIO) &&
                    (r = agent_host_driver_remember(o->state_dir, op.fns[i].bdf, op.fns[i].from,
                                                    err)) < 0)
                    return r;
            if ((r = journal_begin(o->state_dir, &op, err)) < 0)
                return r;
            res.changed = true;
            r = execute(o, &op, err);
            if (r < 0)
                return r;
        }
    }
    fill_functions(&o->paths, &op, res.fns, &res.n_fns);
    *ret = res;
    return 0;
}

static int prepare(const BindOptions *o, RecoverResult *rec, Error *err) {
    if (o->timeout_ms <= 0 || !o->state_dir || !o->modprobe)
        return error_set(err, -EINVAL, "the binding options are incomplete");
    if (o->dry_run) {
        *rec = (RecoverResult){.action = RECOVER_NOTHING};
        return 0;
    }
    int r = agent_state_dir_ensure(o->state_dir, err);
    if (r < 0)
        return r;
    (void)kernel_write_reap();
    return gpu_recover(o, rec, err);
}

int gpu_bind(const BindOptions *o, const char *bdf, BindTarget to, BindResult *ret, Error *err) {
    RecoverResult rec;
    int r = prepare(o, &rec, err);
    if (r < 0)
        return r;
    BindResult res;
    r = bind_one(o, bdf, to, &res, err);
    if (r < 0)
        return r;
    res.recovered = rec.action;
    snprintf(res.recovered_gpu, sizeof(res.recovered_gpu), "%s", rec.gpu);
    *ret = res;
    return 0;
}

int node_switch(const BindOptions *o, BindTarget to, SwitchResult *ret, Error *err) {
    RecoverResult rec;
    int r = prepare(o, &rec, err);
    if (r < 0)
        return r;
    char **devs;
    size_t n_devs;
    r = pci_list_devices(&o->paths, &devs, &n_devs);
    if (r < 0)
        return error_set(err, r, "could not list the PCI devices in %s: %s", o->paths.sysfs,
                         strerror(-r));
    SwitchResult res = {.to = to};
    const char *gpus[NODE_MAX_GPUS];
    size_t n_gpus = 0;
    StrBuf why = {0};
    int refuse = 0;
    for (size_t i = 0; i < n_devs && r >= 0; i++) {
        uint32_t vendor, cls;
        if (pci_read_hex_attr(&o->paths, devs[i], "vendor", &vendor) < 0 ||
            pci_read_hex_attr(&o->paths, devs[i], "class", &cls) < 0 || !pci_is_gpu(vendor, cls))
            continue;
        GpuGroup g;
        Error gerr = {0};
        if ((r = gpu_group_load(&o->paths, devs[i], &g, &gerr)) < 0)
            break;
        if (g.boot_vga && to == BIND_TO_VFIO) {
            if (res.n_skipped < ARRAY_SIZE(res.skipped))
                snprintf(res.skipped[res.n_skipped++], 16, "%s", devs[i]);
            continue;
        }
        if (n_gpus == NODE_MAX_GPUS) {
            r = error_set(&gerr, -E2BIG, "this machine has more than %d GPUs", NODE_MAX_GPUS);
            break;
        }
        gpus[n_gpus++] = devs[i];
        int c = check_movable(o, &g, to, &gerr);
        if (c < 0) {
            strbuf_printf(&why, "%s%s", why.len ? "; " : "", error_message(&gerr));
            refuse = refuse ? refuse : c;
        }
        if (c == -ENOMEM)
            r = c;
    }
    if (r < 0 || refuse < 0) {
        if (r < 0)
            r = error_set(err, r, "could not read this machine's GPUs");
        else
            r = error_set(err, refuse,
                          "switching this machine to %s is refused, nothing was changed: %s",
                          bind_target_to_string(to), strempty(strbuf_cstr(&why)));
        strbuf_done(&why);
        strv_free(devs, n_devs);
        return r;
    }
    strbuf_done(&why);
    Error berr = {0};
    for (size_t i = 0; i < n_gpus && r >= 0; i++) {
        r = bind_one(o, gpus[i], to, &res.gpus[i], &berr);
        if (r >= 0)
            res.n_gpus++;
        else
            r = error_set(err, r,
                          "the switch to %s stopped at GPU %s after %zu of %zu GPUs had moved: %s",
                          bind_target_to_string(to), gpus[i], res.n_gpus, n_gpus,
                          error_message(&berr));
    }
    strv_free(devs, n_devs);
    if (r < 0)
        return r;
    *ret = res;
    return 0;
}
