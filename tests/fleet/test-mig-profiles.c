/* test-mig-profiles.c: R2c, MIG slices "as NVML reports": a real `einsora agent run` on the
 * H200 fixture machine whose (fake) NVML has no 4g.71gb profile, joined to the real control
 * plane. The profile is not offered there: not in capacity, never placed, refused at submit
 * with the reason (R18) instead of failing in the agent. And when NVML fails to say what the
 * GPU is (its MIG mode), nothing changes: the GPU is not offered as a free whole one. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fleet-helpers.h"
#include "helpers.h"

/* The h200-mig fixture's GPU, MIG on and empty, without the 4g.71gb profile. */
static const char nvml_no_4g[] = "init 0\n"
                                 "gpu 00000000:4E:00.0 0x233510DE\n"
                                 "name NVIDIA H200\n"
                                 "uuid GPU-a4f1c2d3-1111-4e5f-8a9b-0123456789ab\n"
                                 "memory 150754820096 0\n"
                                 "minor 0\n"
                                 "mig 1 1\n"
                                 "profile 0 19 1 7 17920 MIG 1g.18gb\n"
                                 "profile 5 20 1 7 17920 MIG 1g.18gb+me\n"
                                 "profile 7 15 1 4 35584 MIG 1g.35gb\n"
                                 "profile 1 14 2 3 35584 MIG 2g.35gb\n"
                                 "profile 2 9 3 2 72192 MIG 3g.71gb\n"
                                 "profile 4 0 7 1 143872 MIG 7g.141gb\n";

static TestServer ts;
static pid_t agent;
static char state_dir[160], nvml_path[200];

static void sleep_ms(int ms) {
    nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
}

static void setup(void) {
    ts_start(&ts);
    snprintf(state_dir, sizeof(state_dir), "%s/agent", ts.dir);
    cr_assert_eq(mkdir(state_dir, 0700), 0);
    char *nvml = nvml_path, sys[256], proc[256];
    snprintf(nvml_path, sizeof(nvml_path), "%s/nvml.txt", ts.dir);
    FILE *f = fopen(nvml, "w");
    cr_assert_not_null(f);
    fputs(nvml_no_4g, f);
    fclose(f);
    snprintf(sys, sizeof(sys), "%s/machines/h200-mig/sys", TEST_FIXTURES);
    snprintf(proc, sizeof(proc), "%s/machines/h200-mig/proc", TEST_FIXTURES);
    const char *args[] = {"--site",      "lab", "--site-kind", "lab",        "--sysfs-root", sys,
                          "--proc-root", proc,  "--simulate",  "--nvml-lib", FAKE_NVML_LIB,  NULL};
    char *token = ts_token(&ts, "n1", "node", "n1");
    agent = fleet_spawn_agent(ts.url, token, "n1", state_dir, args, nvml);
    free(token);
    long st = 404;
    for (int i = 0;
         i < 600 && (st = ts_call(&ts, ts.admin, "GET", "/v1/nodes/n1", NULL, NULL)) != 200; i++)
        sleep_ms(50);
    cr_assert_eq(st, 200, "the agent never registered its node (see %s/agent.log)", state_dir);
}

static void teardown(void) {
    if (agent > 0) {
        kill(agent, SIGTERM);
        waitpid(agent, NULL, 0);
    }
    ts_stop(&ts);
}

TestSuite(mig_profiles, .init = setup, .fini = teardown, .timeout = 120);

/* The class's capacity summed over sites: field of its container row. */
static json_int_t capacity(const char *cls, const char *field) {
    char path[128];
    snprintf(path, sizeof(path), "/v1/capacity?class=%s", cls);
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", path, NULL, &j), 200);
    json_int_t v = -1;
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(j, "classes"), i, row) {
        if (json_is_null(json_object_get(row, "site")))
            v = json_integer_value(json_object_get(row, field));
    }
    json_decref(j);
    return v;
}

static json_t *submit(const char *body) {
    json_t *q = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/requests", body, &q), 201);
    return q;
}

static const char *str(json_t *j, const char *key) {
    return json_string_value(json_object_get(j, key)) ?: "";
}

Test(mig_profiles, r2c_a_profile_nvml_does_not_report_is_not_offered) {
    /* The agent says what NVML offers, the profiles of slice classes only (no "+me"). */
    json_t *n = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/n1", NULL, &n), 200);
    json_t *profiles =
            json_object_get(json_array_get(json_object_get(n, "devices"), 0), "mig_profiles");
    char *text = json_dumps(profiles, JSON_COMPACT);
    cr_expect_str_eq(text ?: "(none)",
                     "[\"1g.18gb\",\"1g.35gb\",\"2g.35gb\",\"3g.71gb\",\"7g.141gb\"]");
    free(text);
    json_decref(n);

    cr_expect_eq(capacity("nvidia-h200-141gb-mig-4g.71gb", "total"), 0);
    cr_expect_eq(capacity("nvidia-h200-141gb-mig-4g.71gb", "free"), 0);
    cr_expect_eq(capacity("nvidia-h200-141gb-mig-3g.71gb", "total"), 2);

    /* No GPU of the fleet offers it: refused at submit with the reason (R18), not placed to
     * fail in the agent. */
    json_t *q = submit("{\"kind\":\"endpoint\",\"class\":\"nvidia-h200-141gb-mig-4g.71gb\","
                       "\"model\":\"m\"}");
    cr_expect_str_eq(str(q, "state"), "refused", "%s", str(q, "reason"));
    cr_expect_str_eq(str(q, "reason_code"), "no-node", "%s", str(q, "reason"));
    json_decref(q);

    /* A profile NVML offers is placed as before. */
    q = submit("{\"kind\":\"endpoint\",\"class\":\"nvidia-h200-141gb-mig-3g.71gb\","
               "\"model\":\"m\"}");
    cr_expect_str_eq(str(q, "state"), "placed", "%s", str(q, "reason"));
    json_decref(q);
}

/* Whether the text file at path holds needle (an agent's log). */
static bool file_has(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

static json_t *device0(const char *node) {
    char path[64];
    snprintf(path, sizeof(path), "/v1/nodes/%s", node);
    json_t *n = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", path, NULL, &n), 200);
    json_t *d = json_incref(json_array_get(json_object_get(n, "devices"), 0));
    json_decref(n);
    return d;
}

/* An NVML call that fails at a later discovery (MIG mode) would report the MIG GPU as MIG off,
 * a free whole GPU: its last report stands instead, and the agent logs the error. */
Test(mig_profiles, r2c_a_mig_gpu_whose_mig_mode_nvml_fails_to_give_keeps_its_last_report) {
    FILE *f = fopen(nvml_path, "a");
    cr_assert_not_null(f);
    fputs("fail nvmlDeviceGetMigMode 999\n", f);
    fclose(f);
    char log[256];
    snprintf(log, sizeof(log), "%s/agent.log", state_dir);
    for (int i = 0; i < 1200 && !file_has(log, "its last report is kept"); i++)
        sleep_ms(50);
    cr_assert(file_has(log, "nvmlDeviceGetMigMode failed"), "no discovery error logged (%s)", log);
    /* The heartbeat after the logged discovery: whatever that turn pushed has landed. */
    json_int_t seen = fleet_last_seen_ms(&ts, "n1");
    for (int i = 0; i < 400 && fleet_last_seen_ms(&ts, "n1") == seen; i++)
        sleep_ms(50);
    json_t *d = device0("n1");
    cr_expect(json_is_true(json_object_get(d, "mig_enabled")), "MIG reported off");
    cr_expect(!json_is_string(json_object_get(d, "quarantined")));
    json_decref(d);
    cr_expect_eq(capacity("nvidia-h200-141gb", "free"), 0);
    json_t *q = submit("{\"kind\":\"container\",\"class\":\"nvidia-h200-141gb\"}");
    cr_expect_str_neq(str(q, "state"), "placed", "a whole GPU placed on a MIG GPU");
    json_decref(q);
}

/* A GPU whose first discovery already fails that way has no last report: it reaches the
 * control plane quarantined, with NVML's error as the reason, and is never placed. */
Test(mig_profiles, r2c_a_gpu_first_seen_with_an_nvml_error_is_quarantined_with_it) {
    char dir[200], nvml[240], sys[256], proc[256];
    snprintf(dir, sizeof(dir), "%s/agent2", ts.dir);
    cr_assert_eq(mkdir(dir, 0700), 0);
    snprintf(nvml, sizeof(nvml), "%s/nvml.txt", dir);
    FILE *f = fopen(nvml, "w");
    cr_assert_not_null(f);
    fputs(nvml_no_4g, f);
    fputs("fail nvmlDeviceGetMigMode 999\n", f);
    fclose(f);
    snprintf(sys, sizeof(sys), "%s/machines/h200-mig/sys", TEST_FIXTURES);
    snprintf(proc, sizeof(proc), "%s/machines/h200-mig/proc", TEST_FIXTURES);
    const char *args[] = {"--site",      "lab", "--site-kind", "lab",        "--sysfs-root", sys,
                          "--proc-root", proc,  "--simulate",  "--nvml-lib", FAKE_NVML_LIB,  NULL};
    char *token = ts_token(&ts, "n2", "node", "n2");
    pid_t pid = fleet_spawn_agent(ts.url, token, "n2", dir, args, nvml);
    free(token);
    long st = 404;
    for (int i = 0;
         i < 600 && (st = ts_call(&ts, ts.admin, "GET", "/v1/nodes/n2", NULL, NULL)) != 200; i++)
        sleep_ms(50);
    cr_assert_eq(st, 200, "the agent never registered its node (see %s/agent.log)", dir);
    json_t *d = device0("n2");
    const char *why = json_string_value(json_object_get(d, "quarantined"));
    cr_expect(why && strstr(why, "nvmlDeviceGetMigMode"), "%s", why ?: "(not quarantined)");
    json_decref(d);
    json_t *q = submit("{\"kind\":\"container\",\"class\":\"nvidia-h200-141gb\"}");
    cr_expect_str_neq(str(q, "state"), "placed", "placed on a GPU NVML could not describe");
    json_decref(q);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}
