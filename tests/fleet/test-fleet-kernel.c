/* test-fleet-kernel.c: an agent without simulation on a fake-kernel machine (a lab RTX 4090
 * with its audio function in one IOMMU group): the control plane's mode switch makes the agent
 * really rebind the group through driver_override (R7), and the reset-cycle check really
 * resets the card (R9), as the binding code does on a real machine. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <signal.h>
#include <time.h>

#include "agent/bind.h"
#include "agent/journal.h"
#include "fake-kernel.h"
#include "fleet-helpers.h"
#include "util/fileio.h"

#define GPU "0000:01:00.0"
#define AUDIO "0000:01:00.1"

typedef struct Machine {
    FakeKernel k;
    TestServer ts;
    char state[200];
    char *token;
    pid_t agent;
} Machine;

static void start_agent(Machine *m) {
    const char *extra[] = {"--site",       "lab",      "--site-kind", "lab",
                           "--sysfs-root", m->k.sysfs, "--proc-root", m->k.proc,
                           "--dev-root",   m->k.dev,   "--no-nvml",   NULL};
    m->agent = fleet_spawn_agent(m->ts.url, m->token, "lab-real", m->state, extra, NULL);
}

static void start(Machine *m) {
    static const char *const drivers[] = {"nvidia", "snd_hda_intel", "pcieport", "vfio-pci", NULL};
    FakeDevice devs[] = {
            {"0000:00:01.0", 0x8086, 0x1bb0, 0x060400, "pcieport", 100, NULL, false, -1},
            {GPU, 0x10de, 0x2684, 0x030000, "nvidia", 1, "0000:00:01.0", false, 0},
            {AUDIO, 0x10de, 0x22ba, 0x040300, "snd_hda_intel", 1, "0000:00:01.0", false, -1},
    };
    memset(m, 0, sizeof(*m));
    cr_assert_eq(fake_kernel_create(&m->k, devs, 3, drivers), 0);
    cr_assert_eq(fake_kernel_start(&m->k), 0);
    /* The machine's CPUs and memory, which discovery reports with every inventory (R11). */
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/cpuinfo", m->k.proc);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("processor\t: 0\nmodel name\t: Test CPU\n\nprocessor\t: 1\nmodel name\t: Test CPU\n", f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/meminfo", m->k.proc);
    cr_assert((f = fopen(path, "w")));
    fputs("MemTotal:       16384000 kB\n", f);
    fclose(f);
    ts_start(&m->ts);
    snprintf(m->state, sizeof(m->state), "%s/agent", m->ts.dir);
    cr_assert_eq(mkdir(m->state, 0700), 0);
    m->token = ts_token(&m->ts, "lab-real", "node", "lab-real");
    start_agent(m);
}

static void stop(Machine *m) {
    if (m->agent > 0) {
        kill(m->agent, SIGTERM);
        waitpid(m->agent, NULL, 0);
    }
    ts_stop(&m->ts);
    fake_kernel_destroy(&m->k);
    free(m->token);
}

static json_t *node(Machine *m) {
    json_t *j = NULL;
    return ts_call(&m->ts, m->ts.admin, "GET", "/v1/nodes/lab-real", NULL, &j) == 200
                   ? j
                   : (json_decref(j), NULL);
}

/* Poll the node until its switch reaches step (or its device 0 has field == value). */
static bool wait_for(Machine *m, const char *obj, const char *key, const char *value) {
    for (int i = 0; i < 200; i++) {
        json_t *n = node(m);
        json_t *o = !n                       ? NULL
                    : !strcmp(obj, "switch") ? json_object_get(n, "switch")
                                             : json_array_get(json_object_get(n, "devices"), 0);
        json_t *v = json_object_get(o, key);
        bool ok = (json_is_string(v) && !strcmp(json_string_value(v), value)) ||
                  (json_is_boolean(v) && !strcmp(json_is_true(v) ? "true" : "false", value));
        json_decref(n);
        if (ok)
            return true;
        nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
    }
    return false;
}

/* Poll the node until its agent's first heartbeat arrived (the node shows "agent"): a lab
 * switch needs an agent that has reported, and registering the GPUs comes before that. */
static bool agent_reported(Machine *m) {
    for (int i = 0; i < 200; i++) {
        json_t *n = node(m);
        bool ok = json_is_object(json_object_get(n, "agent"));
        json_decref(n);
        if (ok)
            return true;
        nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
    }
    return false;
}

/* Poll a request until the agent confirmed it runs (state active). */
static bool request_active(Machine *m, int id) {
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%d", id);
    for (int i = 0; i < 200; i++) {
        json_t *q = NULL;
        bool ok = ts_call(&m->ts, m->ts.admin, "GET", path, NULL, &q) == 200 &&
                  !strcmp(json_string_value(json_object_get(q, "state")) ?: "", "active");
        json_decref(q);
        if (ok)
            return true;
        nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
    }
    return false;
}

static Machine m;

static void setup(void) {
    start(&m);
}

static void teardown(void) {
    stop(&m);
}

Test(fleet_kernel, r4_r7_r9_switch_rebinds_the_group_checks_reset_and_evicts_before_rebinding,
     .init = setup, .fini = teardown, .timeout = 90) {
    cr_assert(wait_for(&m, "device", "binding", "host"), "the agent did not register its GPU");
    cr_assert(agent_reported(&m), "the agent sent no heartbeat");
    cr_assert_eq(fake_kernel_control(&m.k, "reset " GPU " ok"), 0);
    long st = ts_call(&m.ts, m.ts.admin, "POST", "/v1/nodes/lab-real/mode",
                      "{\"mode\":\"vm-passthrough\",\"gpu\":\"" GPU "\"}", NULL);
    cr_assert_eq(st, 202);
    cr_assert(wait_for(&m, "switch", "step", "done"), "the switch did not finish");
    char drv[64];
    fake_kernel_driver(&m.k, GPU, drv, sizeof(drv));
    cr_expect_str_eq(drv, "vfio-pci");
    fake_kernel_driver(&m.k, AUDIO, drv, sizeof(drv));
    cr_expect_str_eq(drv, "vfio-pci", "the GPU's audio function moves with it (R7)");
    /* R9: the consumer card on vfio-pci is reset-checked by the agent before it is offered. */
    cr_assert(wait_for(&m, "device", "reset_verified", "true"), "no reset check passed");
    json_t *ans = NULL;
    cr_assert_eq(ts_call(&m.ts, m.ts.admin, "POST", "/v1/requests",
                         "{\"kind\":\"vm\",\"class\":\"nvidia-rtx-4090\"}", &ans),
                 201);
    cr_expect_str_eq(json_string_value(json_object_get(ans, "state")), "placed");
    json_decref(ans);
    /* R4: the agent really runs it (it holds the GPU) before the switch evicts it. */
    cr_assert(request_active(&m, 1), "the agent did not start the VM");
    /* Back to containers would pull the GPU from under the VM: refused, naming it (R4, R7). */
    cr_assert_eq(ts_call(&m.ts, m.ts.admin, "POST", "/v1/nodes/lab-real/mode",
                         "{\"mode\":\"container\",\"gpu\":\"0\"}", &ans),
                 409);
    cr_expect(strstr(json_string_value(json_object_get(ans, "message")), "1 (root, vm)"), "%s",
              json_string_value(json_object_get(ans, "message")));
    json_decref(ans);
    /* With --drain evict: the VM is stopped, the group goes back to its host drivers. */
    cr_assert_eq(ts_call(&m.ts, m.ts.admin, "POST", "/v1/nodes/lab-real/mode",
                         "{\"mode\":\"container\",\"gpu\":\"0\",\"drain\":\"evict\"}", NULL),
                 202);
    /* R4: the agent stops the evicted VM and sees its GPU free before it rebinds. */
    cr_assert(wait_for(&m, "switch", "step", "done"),
              "the switch did not finish after the eviction");
    fake_kernel_driver(&m.k, GPU, drv, sizeof(drv));
    cr_expect_str_eq(drv, "nvidia");
    fake_kernel_driver(&m.k, AUDIO, drv, sizeof(drv));
    cr_expect_str_eq(drv, "snd_hda_intel");
}

static void die_after_unbind(const char *bdf, JournalStep step, void *userdata) {
    (void)bdf, (void)userdata;
    if (step == JOURNAL_STEP_UNBOUND)
        raise(SIGKILL); /* the agent dies with the GPU off its driver and not yet on vfio-pci */
}

Test(fleet_kernel, r4_r7_agent_killed_mid_rebind_recovers_from_its_journal_and_finishes_the_switch,
     .init = setup, .fini = teardown, .timeout = 90) {
    cr_assert(wait_for(&m, "device", "binding", "host"), "the agent did not register its GPU");
    cr_assert(agent_reported(&m), "the agent sent no heartbeat");
    kill(m.agent, SIGKILL);
    waitpid(m.agent, NULL, 0);
    m.agent = 0;
    json_t *ans = NULL;
    long st = ts_call(&m.ts, m.ts.admin, "POST", "/v1/nodes/lab-real/mode",
                      "{\"mode\":\"vm-passthrough\",\"gpu\":\"0\"}", &ans);
    _cleanup_free_ char *ans_text = ans ? json_dumps(ans, JSON_COMPACT) : NULL;
    json_decref(ans);
    cr_assert_eq(st, 202, "mode switch answered %ld: %s", st, ans_text ?: "(no body)");
    /* The agent's rebind, killed half-way: journaled, the GPU unbound, nothing on vfio-pci. */
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        BindOptions o;
        bind_options_init(&o);
        if (host_paths_init(&o.paths, m.k.sysfs, m.k.proc, m.k.dev) < 0)
            _exit(2);
        o.state_dir = m.state;
        o.timeout_ms = 2000;
        o.on_step = die_after_unbind;
        BindResult res;
        Error err = {0};
        (void)gpu_bind(&o, GPU, BIND_TO_VFIO, &res, &err);
        _exit(0);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFSIGNALED(status), "the half-done rebind was not interrupted");
    JournalOp op;
    Error err = {0};
    cr_assert_eq(journal_load(m.state, &op, &err), 0, "%s", err.message);
    cr_assert_eq(op.outcome, JOURNAL_OPEN);
    /* The agent restarts: its journal wins, the rebind completes, the switch finishes. */
    start_agent(&m);
    cr_assert(wait_for(&m, "switch", "step", "done"),
              "the switch did not finish after the restart");
    char drv[64];
    fake_kernel_driver(&m.k, GPU, drv, sizeof(drv));
    cr_expect_str_eq(drv, "vfio-pci");
    fake_kernel_driver(&m.k, AUDIO, drv, sizeof(drv));
    cr_expect_str_eq(drv, "vfio-pci");
    cr_assert_eq(journal_load(m.state, &op, &err), 0, "%s", err.message);
    cr_expect_eq(op.outcome, JOURNAL_DONE);
    char log[256], *text = NULL;
    snprintf(log, sizeof(log), "%s/agent.log", m.state);
    cr_assert_geq(read_full_file(log, 1 << 20, &text, NULL), 0);
    cr_expect(strstr(text, "recovered " GPU ": completed"), "%s", text);
    free(text);
}

/* Poll the agent's log until it holds text. */
static bool agent_logged(Machine *mc, const char *text) {
    char log[256];
    snprintf(log, sizeof(log), "%s/agent.log", mc->state);
    for (int i = 0; i < 600; i++) {
        char *t = NULL;
        bool ok = read_full_file(log, 1 << 20, &t, NULL) >= 0 && strstr(t, text);
        free(t);
        if (ok)
            return true;
        nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
    }
    return false;
}

/* R9: a reset check that ends while the control plane is away (a restart) still reaches it:
 * the result is kept and sent again when the task comes back, not lost with the GPU waiting
 * for its check for ever. Here the reset hangs (the check fails after its timeout). */
Test(fleet_kernel, r9_a_task_result_the_control_plane_missed_is_sent_again, .init = setup,
     .fini = teardown, .timeout = 120) {
    cr_assert(wait_for(&m, "device", "binding", "host"), "the agent did not register its GPU");
    cr_assert(agent_reported(&m), "the agent sent no heartbeat");
    cr_assert_eq(fake_kernel_control(&m.k, "hang bus/pci/devices/" GPU "/reset"), 0);
    cr_assert_eq(ts_call(&m.ts, m.ts.admin, "POST", "/v1/nodes/lab-real/mode",
                         "{\"mode\":\"vm-passthrough\",\"gpu\":\"" GPU "\"}", NULL),
                 202);
    cr_assert(agent_logged(&m, "reset-check " GPU ": started"), "the check never started");
    ts_kill(&m.ts, true);
    cr_assert(agent_logged(&m, "reset-check " GPU ": fail"), "the check never ended");
    ts_respawn_same_port(&m.ts);
    bool quarantined = false;
    for (int i = 0; i < 600 && !quarantined; i++) {
        json_t *n = node(&m);
        quarantined = json_is_string(
                json_object_get(json_array_get(json_object_get(n, "devices"), 0), "quarantined"));
        json_decref(n);
        if (!quarantined)
            nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
    }
    if (!quarantined) {
        char log[256], *t = NULL;
        snprintf(log, sizeof(log), "%s/agent.log", m.state);
        (void)read_full_file(log, 1 << 20, &t, NULL);
        cr_log_error("agent log:\n%s", t ? t : "");
        free(t);
    }
    cr_expect(quarantined, "the failed check's result never reached the control plane");
}
