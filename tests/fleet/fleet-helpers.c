/* fleet-helpers.c: a loopback fleet of real agent processes on fixture machines. */
#include "fleet-helpers.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "util/fileio.h"
#include "util/strutil.h"

typedef struct Machine {
    const char *name, *fixture, *site, *kind, *mode, *caps, *apple;
} Machine;

static const Machine machines[FLEET_AGENTS] = {
        [A_H100] = {"dc1-h100", "hgx-h100-8gpu", "dc1", "datacenter", "container", "kata", NULL},
        [A_H200] = {"dc1-h200", "h200-mig", "dc1", "datacenter", "container", "kata,mig_in_kata",
                    NULL},
        [A_4090] = {"lab-4090", "rtx4090-clean-group", "lab", "lab", NULL, NULL, NULL},
        [A_MI300X] = {"lab-mi300x", "amd-mi300x", "lab", "lab", NULL, NULL, NULL},
        [A_CPU] = {"lab-cpu", "no-accelerator", "lab", "lab", NULL, NULL, NULL},
        [A_MAC] = {"mac-m2", "no-accelerator", "home", "solo", NULL, NULL, "mac-m2-max-64gb.txt"},
};

static void sleep_ms(int ms) {
    nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
}

pid_t fleet_spawn_agent(const char *url, const char *token, const char *name, const char *state_dir,
                        const char *const *extra, const char *nvml_fixture) {
    char log[200];
    snprintf(log, sizeof(log), "%s/agent.log", state_dir);
    const char *args[48] = {
            EINSORA_BIN, "agent",       "run",     "--server",  url,
            "--name",    name,          "--owner", "root",      "--heartbeat",
            "1",         "--state-dir", state_dir, "--catalog", TEST_DATA "/catalog.yaml"};
    size_t k = 15;
    for (size_t i = 0; extra && extra[i] && k < 47; i++)
        args[k++] = extra[i];
    args[k] = NULL;
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0)
            dup2(fd, 2);
        /* An agent never outlives the test that started it, even one that failed half-way. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (nvml_fixture)
            setenv("EINSORA_FAKE_NVML", nvml_fixture, 1);
        setenv("EINSORA_TOKEN", token, 1); /* never on the command line (ps) */
        execv(EINSORA_BIN, (char *const *)args);
        _exit(127);
    }
    return pid;
}

pid_t fleet_spawn_h100_agent(const char *url, const char *token, const char *name,
                             const char *state_dir, const char *heartbeat) {
    char sys[256], proc[256], nvml[256];
    snprintf(sys, sizeof(sys), "%s/machines/hgx-h100-8gpu/sys", TEST_FIXTURES);
    snprintf(proc, sizeof(proc), "%s/machines/hgx-h100-8gpu/proc", TEST_FIXTURES);
    snprintf(nvml, sizeof(nvml), "%s/machines/hgx-h100-8gpu/nvml.txt", TEST_FIXTURES);
    const char *args[] = {
            "--site",     "dc1",          "--site-kind", "datacenter",  "--mode",
            "container",  "--sysfs-root", sys,           "--proc-root", proc,
            "--simulate", "--nvml-lib",   FAKE_NVML_LIB, "--heartbeat", heartbeat ? heartbeat : "1",
            NULL};
    return fleet_spawn_agent(url, token, name, state_dir, args, nvml);
}

json_int_t fleet_last_seen_ms(TestServer *ts, const char *node) {
    char path[96];
    snprintf(path, sizeof(path), "/v1/nodes/%s", node);
    json_t *j = NULL;
    long st = ts_call(ts, ts->admin, "GET", path, NULL, &j);
    cr_assert(st == 200 || st == 404, "GET %s: %ld", path, st); /* 404: not registered yet */
    json_int_t v = json_integer_value(json_object_get(json_object_get(j, "agent"), "last_seen_ms"));
    json_decref(j);
    return v;
}

json_int_t fleet_await_heartbeat(TestServer *ts, const char *node, int interval_s) {
    char path[96];
    snprintf(path, sizeof(path), "/v1/nodes/%s", node);
    json_int_t seen = 0;
    for (int i = 0; i < 1200 && !seen; i++) {
        json_t *j = NULL;
        long st = ts_call(ts, ts->admin, "GET", path, NULL, &j);
        cr_assert(st == 200 || st == 404, "GET %s: %ld", path, st); /* 404: not registered yet */
        json_t *rec = json_object_get(j, "agent");
        if (json_integer_value(json_object_get(rec, "heartbeat_s")) == interval_s)
            seen = json_integer_value(json_object_get(rec, "last_seen_ms"));
        json_decref(j);
        if (!seen)
            nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    cr_assert_neq(seen, 0, "no heartbeat every %d s of %s came in", interval_s, node);
    return seen;
}

void fleet_agent_start(Fleet *f, int i) {
    const Machine *m = &machines[i];
    FleetAgent *a = &f->agents[i];
    char sys[256], proc[256], nvml[256], apple[256];
    snprintf(sys, sizeof(sys), "%s/machines/%s/sys", TEST_FIXTURES, m->fixture);
    snprintf(proc, sizeof(proc), "%s/machines/%s/proc", TEST_FIXTURES, m->fixture);
    snprintf(nvml, sizeof(nvml), "%s/machines/%s/nvml.txt", TEST_FIXTURES, m->fixture);
    snprintf(apple, sizeof(apple), "%s/machines/%s", TEST_FIXTURES, m->apple ? m->apple : "");
    const char *args[24] = {"--site", m->site,       "--site-kind", m->kind,     "--sysfs-root",
                            sys,      "--proc-root", proc,          "--simulate"};
    size_t k = 9;
    bool has_nvml = access(nvml, R_OK) == 0;
    if (has_nvml)
        args[k++] = "--nvml-lib", args[k++] = FAKE_NVML_LIB;
    else
        args[k++] = "--no-nvml";
    if (m->mode)
        args[k++] = "--mode", args[k++] = m->mode;
    if (m->caps)
        args[k++] = "--capabilities", args[k++] = m->caps;
    if (m->apple)
        args[k++] = "--apple-fixture", args[k++] = apple;
    args[k] = NULL;
    a->pid = fleet_spawn_agent(f->ts.url, a->token, m->name, a->state_dir, args,
                               has_nvml ? nvml : NULL);
}

void fleet_agent_kill(Fleet *f, int i, bool hard) {
    FleetAgent *a = &f->agents[i];
    if (a->pid <= 0)
        return;
    kill(a->pid, hard ? SIGKILL : SIGTERM);
    int status;
    waitpid(a->pid, &status, 0);
    if (!hard)
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "agent %s did not stop cleanly",
                  a->name);
    a->pid = 0;
}

static bool all_registered(Fleet *f, const void *arg) {
    (void)arg;
    json_t *j = NULL;
    long st = fleet_call(f, "GET", "/v1/nodes", NULL, &j);
    size_t n = st == 200 ? json_array_size(json_object_get(j, "nodes")) : 0;
    json_decref(j);
    return n == FLEET_AGENTS;
}

void fleet_start(Fleet *f) {
    memset(f, 0, sizeof(*f));
    ts_start(&f->ts);
    const char *colon = strrchr(f->ts.url, ':');
    f->port = (unsigned)atoi(colon + 1);
    for (int i = 0; i < FLEET_AGENTS; i++) {
        FleetAgent *a = &f->agents[i];
        a->name = machines[i].name;
        snprintf(a->state_dir, sizeof(a->state_dir), "%s/agent-%s", f->ts.dir, a->name);
        cr_assert_eq(mkdir(a->state_dir, 0700), 0);
        a->token = ts_token(&f->ts, a->name, "node", a->name);
    }
    for (int i = 0; i < FLEET_AGENTS; i++)
        fleet_agent_start(f, i);
    cr_assert(fleet_wait(f, all_registered, NULL, 20000), "the six agents did not all register");
}

void fleet_stop(Fleet *f) {
    for (int i = 0; i < FLEET_AGENTS; i++) {
        fleet_agent_kill(f, i, false);
        free(f->agents[i].token);
    }
    ts_stop(&f->ts);
}

void fleet_server_restart(Fleet *f) {
    char port_file[160], listen[64], log[160];
    snprintf(port_file, sizeof(port_file), "%s/port", f->ts.dir);
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", f->port);
    snprintf(log, sizeof(log), "%s/server.log", f->ts.dir);
    for (int attempt = 0; attempt < 50; attempt++) {
        unlink(port_file);
        pid_t pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
            int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
            if (fd >= 0)
                dup2(fd, 1), dup2(fd, 2);
            execl(EINSORA_BIN, EINSORA_BIN, "serve", "--listen", listen, "--state", f->ts.state,
                  "--port-file", port_file, "--catalog", TEST_DATA "/catalog.yaml", NULL);
            _exit(127);
        }
        for (int i = 0; i < 600; i++) {
            if (access(port_file, R_OK) == 0) {
                f->ts.pid = pid;
                return;
            }
            int status;
            if (waitpid(pid, &status, WNOHANG) == pid)
                break; /* the port may still be held for a moment: try again */
            sleep_ms(20);
        }
        sleep_ms(100);
    }
    cr_assert_fail("the server did not restart on port %u", f->port);
}

char *fleet_agent_file(Fleet *f, int i, const char *name) {
    char *p = strprintf("%s/%s", f->agents[i].state_dir, name);
    cr_assert(p);
    return p;
}

long fleet_call(Fleet *f, const char *method, const char *path, const char *body, json_t **ret) {
    return ts_call(&f->ts, f->ts.admin, method, path, body, ret);
}

bool fleet_wait(Fleet *f, FleetPred pred, const void *arg, int timeout_ms) {
    for (int t = 0; t < timeout_ms; t += 100) {
        if (pred(f, arg))
            return true;
        sleep_ms(100);
    }
    return pred(f, arg);
}

long fleet_submit(Fleet *f, const char *token, const char *body) {
    json_t *j = NULL;
    long st = ts_call(&f->ts, token ? token : f->ts.admin, "POST", "/v1/requests", body, &j);
    cr_assert_eq(st, 201, "submit %s: %ld %s", body, st,
                 json_string_value(json_object_get(j, "message")));
    long id = (long)json_integer_value(json_object_get(j, "id"));
    json_decref(j);
    return id;
}

const char *fleet_request_state(Fleet *f, long id, char *buf, size_t size) {
    char path[64];
    json_t *j = NULL;
    snprintf(path, sizeof(path), "/v1/requests/%ld", id);
    buf[0] = 0;
    if (fleet_call(f, "GET", path, NULL, &j) == 200)
        snprintf(buf, size, "%s", json_string_value(json_object_get(j, "state")));
    json_decref(j);
    return buf;
}

bool fleet_request_is(Fleet *f, long id, const char *state) {
    char buf[32];
    return !strcmp(fleet_request_state(f, id, buf, sizeof(buf)), state);
}

bool fleet_node_field_is(Fleet *f, const char *node, bool in_switch, const char *key,
                         const char *value) {
    char path[128];
    json_t *j = NULL;
    snprintf(path, sizeof(path), "/v1/nodes/%s", node);
    bool ok = false;
    if (fleet_call(f, "GET", path, NULL, &j) == 200) {
        json_t *o = in_switch ? json_object_get(j, "switch") : j;
        json_t *v = json_object_get(o, key);
        ok = json_is_string(v)
                     ? !strcmp(json_string_value(v), value)
                     : json_is_boolean(v) && !strcmp(json_is_true(v) ? "true" : "false", value);
    }
    json_decref(j);
    return ok;
}

bool fleet_has_event(Fleet *f, const char *type, const char *object) {
    bool found = false;
    json_int_t after = 0;
    /* Every page, following the cursor: a test never reads only the first one. */
    for (bool more = true; more && !found;) {
        char path[96];
        json_t *j = NULL;
        snprintf(path, sizeof(path), "/v1/events?after=%lld&limit=10000", (long long)after);
        more = false;
        if (fleet_call(f, "GET", path, NULL, &j) == 200) {
            size_t i;
            json_t *e, *events = json_object_get(j, "events");
            json_array_foreach(events, i, e) found =
                    found ||
                    (!strcmp(json_string_value(json_object_get(e, "type")), type) &&
                     (!object || !strcmp(json_string_value(json_object_get(e, "object")), object)));
            json_int_t next = json_integer_value(json_object_get(j, "next"));
            more = json_array_size(events) > 0 && next > after;
            after = next;
        }
        json_decref(j);
    }
    return found;
}

void fleet_assert_invariants(Fleet *f) {
    json_t *j = NULL;
    cr_assert_eq(fleet_call(f, "GET", "/v1/debug/invariants", NULL, &j), 200);
    cr_assert(json_is_true(json_object_get(j, "ok")), "invariants: %s",
              json_string_value(json_object_get(j, "violation")));
    json_decref(j);
}

bool fleet_double_request_pending(void **con_cls, void *cls, size_t *upload_size) {
    if (!*con_cls) { /* headers first; the body (ignored) follows */
        *con_cls = cls;
        return true;
    }
    if (*upload_size) {
        *upload_size = 0;
        return true;
    }
    return false;
}
