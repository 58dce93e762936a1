/* srv-helpers.c: the integration tests' harness around the real server binary. */
#include "srv-helpers.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "util/fileio.h"

char *ts_token(TestServer *ts, const char *user, const char *role, const char *nodes) {
    char *out = NULL, *err = NULL;
    int rc = nodes ? run_einsora(&out, &err, "token", "create", "--state", ts->state, "--user",
                                 user, "--role", role, "--nodes", nodes, NULL)
                   : run_einsora(&out, &err, "token", "create", "--state", ts->state, "--user",
                                 user, "--role", role, NULL);
    cr_assert_eq(rc, 0, "token create failed: %s", err);
    free(err);
    out[strcspn(out, "\n")] = 0;
    return out;
}

static void spawn_on(TestServer *ts, const char *listen);

void ts_spawn(TestServer *ts) {
    spawn_on(ts, "127.0.0.1:0");
}

void ts_respawn_same_port(TestServer *ts) {
    const char *port = strrchr(ts->url, ':');
    cr_assert(port, "no port in %s", ts->url);
    char listen[32];
    snprintf(listen, sizeof(listen), "127.0.0.1:%s", port + 1);
    spawn_on(ts, listen);
}

static void spawn_on(TestServer *ts, const char *listen) {
    char port_file[160];
    snprintf(port_file, sizeof(port_file), "%s/port", ts->dir);
    unlink(port_file);
    char log[160];
    snprintf(log, sizeof(log), "%s/server.log", ts->dir);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        FILE *f = freopen(log, "a", stdout);
        (void)f;
        dup2(1, 2);
        const char *argv[24] = {
                EINSORA_BIN, "serve",       "--listen", listen,      "--state",
                ts->state,   "--port-file", port_file,  "--catalog", TEST_DATA "/catalog.yaml"};
        for (size_t i = 0; i < 8 && ts->extra[i]; i++)
            argv[10 + i] = ts->extra[i];
        execv(EINSORA_BIN, (char *const *)argv);
        _exit(127);
    }
    ts->pid = pid;
    /* Wait for the port file: written once the state is restored and the socket listens. */
    for (int i = 0; i < 600; i++) {
        char *line = NULL;
        if (read_one_line(port_file, &line) >= 0) {
            snprintf(ts->url, sizeof(ts->url), "http://127.0.0.1:%s", line);
            free(line);
            return;
        }
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            char *text = NULL;
            read_full_file(log, 1 << 20, &text, NULL);
            cr_assert_fail("the server exited during startup: %s", text ? text : "");
        }
        usleep(20000);
    }
    cr_assert_fail("the server did not start within 12 s");
}

void ts_start(TestServer *ts) {
    memset(ts, 0, sizeof(*ts));
    strcpy(ts->dir, "/tmp/einsora-srv-XXXXXX");
    cr_assert(mkdtemp(ts->dir));
    snprintf(ts->state, sizeof(ts->state), "%s/state.db", ts->dir);
    ts->admin = ts_token(ts, "root", "admin", NULL);
    ts_spawn(ts);
}

void ts_kill(TestServer *ts, bool hard) {
    if (ts->pid <= 0)
        return;
    kill(ts->pid, hard ? SIGKILL : SIGTERM);
    int status;
    waitpid(ts->pid, &status, 0);
    if (!hard)
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the server did not stop cleanly");
    ts->pid = 0;
}

void ts_stop(TestServer *ts) {
    ts_kill(ts, false);
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", ts->dir);
    cr_expect_eq(system(cmd), 0);
    free(ts->admin);
}

long ts_call_key(TestServer *ts, const char *token, const char *method, const char *path,
                 const char *body, const char *key, json_t **ret) {
    Client *c = NULL;
    Error err = {0};
    cr_assert_eq(client_new(ts->url, token, &c, &err), 0, "%s", err.message);
    long status = 0;
    char *text = NULL;
    int r = client_call_raw(c, method, path, body, body ? strlen(body) : 0, key, &status, &text,
                            &err);
    client_free(c);
    cr_assert_eq(r, 0, "%s %s: %s", method, path, err.message);
    json_t *j = json_loads(text, 0, NULL);
    free(text);
    if (ret)
        *ret = j;
    else
        json_decref(j);
    return status;
}

char *ts_metrics(TestServer *ts) {
    Client *c = NULL;
    Error e = {0};
    cr_assert_eq(client_new(ts->url, NULL, &c, &e), 0, "%s", e.message);
    long st = 0;
    char *text = NULL;
    cr_assert_eq(client_call_raw(c, "GET", "/metrics", NULL, 0, NULL, &st, &text, &e), 0, "%s",
                 e.message);
    client_free(c);
    cr_assert_eq(st, 200, "GET /metrics: %ld", st);
    return text;
}

json_t *ts_list_all(TestServer *ts, const char *token, const char *path, const char *key) {
    json_t *all = json_array();
    char after[64] = ""; /* "after=CURSOR&" once a page gave one */
    for (;;) {
        char url[256];
        json_t *page = NULL;
        snprintf(url, sizeof(url), "%s?%slimit=10000", path, after);
        cr_assert_eq(ts_call(ts, token, "GET", url, NULL, &page), 200, "GET %s", url);
        json_t *items = json_object_get(page, key);
        size_t n = json_array_size(items);
        json_array_extend(all, items);
        char next[64];
        bool more = ts_next_query(page, next, sizeof(next)) && n > 0 && strcmp(next, after) != 0;
        json_decref(page);
        if (!more)
            return all;
        snprintf(after, sizeof(after), "%s", next);
    }
}

bool ts_next_query(json_t *page, char *buf, size_t size) {
    json_t *next = json_object_get(page, "next");
    if (json_is_integer(next)) /* the event feed's sequence number */
        snprintf(buf, size, "after=%lld&", (long long)json_integer_value(next));
    else if (json_is_string(next)) /* a paged list's opaque cursor (base64url) */
        snprintf(buf, size, "after=%s&", json_string_value(next));
    else
        return false; /* a paged list's last page */
    return true;
}

long ts_submit(TestServer *ts, const char *body) {
    json_t *j = NULL;
    long status = ts_call(ts, ts->admin, "POST", "/v1/requests", body, &j);
    char *answer = j ? json_dumps(j, JSON_COMPACT) : NULL;
    cr_assert_eq(status, 201, "submit %s: %ld %s", body, status, answer ? answer : "");
    free(answer);
    long id = (long)json_integer_value(json_object_get(j, "id"));
    json_decref(j);
    return id;
}

json_t *ts_wait_state(TestServer *ts, long id, const char *state, const char *where) {
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld", id);
    json_t *j = NULL;
    for (int i = 0; i < 1200; i++) {
        json_decref(j);
        j = NULL;
        cr_assert_eq(ts_call(ts, ts->admin, "GET", path, NULL, &j), 200);
        const char *st = json_string_value(json_object_get(j, "state"));
        if (st && strcmp(st, state) == 0)
            return j;
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    cr_assert_fail("request %ld never became %s (it is %s: %s)%s%s", id, state,
                   json_string_value(json_object_get(j, "state")),
                   json_string_value(json_object_get(j, "reason")), where ? "; see " : "",
                   where ? where : "");
    return NULL;
}

long ts_call(TestServer *ts, const char *token, const char *method, const char *path,
             const char *body, json_t **ret) {
    return ts_call_key(ts, token, method, path, body, NULL, ret);
}

void ts_add_h100_node(TestServer *ts, const char *name, const char *owner, unsigned n) {
    json_t *devs = json_array();
    for (unsigned i = 0; i < n; i++) {
        char pci[32];
        snprintf(pci, sizeof(pci), "0000:%02x:00.0", 0x17 + i);
        json_array_append_new(devs, json_pack("{s:s, s:s, s:i}", "pci", pci, "class",
                                              "nvidia-h100-80gb", "memory_gb", 80));
    }
    json_t *node = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:o}", "name", name, "site",
                             "dc1", "site_kind", "datacenter", "platform", "linux", "owner", owner,
                             "mode", "container", "cpus", 64, "devices", devs);
    char *body = json_dumps(node, JSON_COMPACT);
    json_decref(node);
    json_t *ans = NULL;
    long st = ts_call(ts, ts->admin, "POST", "/v1/nodes", body, &ans);
    cr_assert_eq(st, 201, "registering %s: %ld %s", name, st,
                 json_string_value(json_object_get(ans, "message")));
    json_decref(ans);
    free(body);
}

void ts_add_unchecked_gpu_node(TestServer *ts, const char *name) {
    char body[512], path[64];
    snprintf(body, sizeof(body),
             "{\"name\":\"%s\",\"site\":\"lab1\",\"site_kind\":\"lab\",\"platform\":\"linux\","
             "\"owner\":\"ops\",\"cpus\":8,\"devices\":[{\"pci\":\"0000:01:00.0\",\"class\":"
             "\"nvidia-rtx-4090\",\"memory_gb\":24,\"binding\":\"vfio\"}]}",
             name);
    snprintf(path, sizeof(path), "/v1/nodes/%s", name);
    cr_assert_eq(ts_call(ts, ts->admin, "PUT", path, body, NULL), 201, "registering %s", name);
    snprintf(path, sizeof(path), "/v1/nodes/%s/heartbeat", name);
    cr_assert_eq(ts_call(ts, ts->admin, "POST", path, "{\"interval_s\":30}", NULL), 200);
}

double ts_metric(TestServer *ts, const char *sample) {
    char *m = ts_metrics(ts);
    double v = -1;
    size_t n = strlen(sample);
    for (const char *line = m; line && *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (strncmp(line, sample, n) == 0 && line[n] == ' ')
            v = strtod(line + n + 1, NULL);
    free(m);
    return v;
}
