/* test-work.c: work reaches an agent at once (GET /v1/nodes/{name}/work, a long-poll with a
 * resumable cursor), not at its next heartbeat; the route's cursor, waits and refusals. The
 * real `einsora serve` and a real `einsora agent run` on a fixture machine with the fake NVML. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fleet-helpers.h"
#include "helpers.h"
#include "util/fileio.h"
#include "wire/api-address.h"

/* A heartbeat far longer than any test: whatever the agent does meanwhile came through the
 * work long-poll, whatever the machine's speed. */
#define LONG_HEARTBEAT "600"

/* Whether the agent's state folder records request id as running ("<id>" lines). */
static bool runs_here(const char *state_dir, long id) {
    char path[256], line[32];
    snprintf(path, sizeof(path), "%s/running", state_dir);
    snprintf(line, sizeof(line), "\n%ld\n", id);
    char *text = NULL;
    size_t len;
    bool yes = false;
    if (read_full_file(path, 1 << 20, &text, &len) >= 0) {
        char *all = NULL;
        cr_assert(asprintf(&all, "\n%s", text) > 0);
        yes = strstr(all, line) != NULL;
        free(all);
    }
    free(text);
    return yes;
}

static void sleep_ms(int ms) {
    nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
}

/* A server and the H100 machine's agent (node dc1-h100, its state in state_dir, ts.dir/agent),
 * once the agent registered and beat once; returns the agent's pid, *ret_token its token. */
static pid_t start_with_h100_agent(TestServer *ts, char state_dir[160], const char *heartbeat,
                                   char **ret_token) {
    ts_start(ts);
    snprintf(state_dir, 160, "%s/agent", ts->dir);
    cr_assert_eq(mkdir(state_dir, 0700), 0);
    *ret_token = ts_token(ts, "dc1-h100", "node", "dc1-h100");
    pid_t agent = fleet_spawn_h100_agent(ts->url, *ret_token, "dc1-h100", state_dir, heartbeat);
    json_int_t seen = 0;
    for (int i = 0; i < 600 && !(seen = fleet_last_seen_ms(ts, "dc1-h100")); i++)
        sleep_ms(100);
    cr_assert(seen > 0, "the agent never sent its first heartbeat (see %s/agent.log)", state_dir);
    return agent;
}

Test(work, r17_agent_learns_of_work_at_once_not_at_its_heartbeat, .timeout = 180) {
    TestServer ts;
    char state_dir[160], *token = NULL;
    pid_t agent = start_with_h100_agent(&ts, state_dir, LONG_HEARTBEAT, &token);
    /* Registered and one heartbeat in: from here on, the heartbeat count stays put. */
    json_int_t seen = fleet_last_seen_ms(&ts, "dc1-h100");

    long id = ts_submit(&ts, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}");
    json_decref(ts_wait_state(&ts, id, "active", "the agent's log"));
    cr_assert(runs_here(state_dir, id), "the agent does not record request %ld as running", id);
    cr_assert_eq(fleet_last_seen_ms(&ts, "dc1-h100"), seen,
                 "the placement became active only with a later heartbeat, not through the work "
                 "long-poll");

    /* A stop reaches it the same way: released, the agent stops it with no heartbeat between. */
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld/release", id);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, NULL, NULL), 200);
    bool stopped = false;
    for (int i = 0; i < 600 && !(stopped = !runs_here(state_dir, id)); i++)
        sleep_ms(100);
    cr_assert(stopped, "the agent never stopped request %ld", id);
    cr_assert_eq(fleet_last_seen_ms(&ts, "dc1-h100"), seen,
                 "the stop came with a heartbeat, not through the long-poll");

    /* The long-poll in flight ends with the agent: a clean stop, without waiting out the poll. */
    kill(agent, SIGTERM);
    int status;
    cr_assert_eq(waitpid(agent, &status, 0), agent);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    free(token);
    ts_stop(&ts);
}

/* ---- the route itself ---- */

typedef struct Poll {
    TestServer *ts;
    char path[160];
    long status;
    json_t *ans;
} Poll;

static void *poll_main(void *arg) {
    Poll *p = arg;
    p->status = ts_call(p->ts, p->ts->admin, "GET", p->path, NULL, &p->ans);
    return NULL;
}

static char *work(TestServer *ts, const char *after, unsigned wait, json_t **ret) {
    char path[160];
    if (after)
        snprintf(path, sizeof(path), "/v1/nodes/n1/work?after=%s&wait=%u", after, wait);
    else
        snprintf(path, sizeof(path), "/v1/nodes/n1/work");
    json_t *j = NULL;
    cr_assert_eq(ts_call(ts, ts->admin, "GET", path, NULL, &j), 200, "GET %s", path);
    const char *c = json_string_value(json_object_get(j, "cursor"));
    cr_assert(c && strlen(c) == 16, "GET %s: no cursor", path);
    char *cursor = strdup(c);
    if (ret)
        *ret = j;
    else
        json_decref(j);
    return cursor;
}

static bool has_work(json_t *ans, long id, const char *state) {
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(ans, "workloads"), i,
                       w) if (json_integer_value(json_object_get(w, "id")) == id &&
                              strcmp(json_string_value(json_object_get(w, "state")), state) ==
                                      0) return true;
    return false;
}

Test(work, r17_agent_learns_of_work_at_once_through_a_cursor_that_survives_reconnects,
     .timeout = 180) {
    TestServer ts;
    ts_start(&ts);
    ts_add_h100_node(&ts, "n1", "root", 8);
    json_t *ans = NULL;
    char *c1 = work(&ts, NULL, 0, &ans);
    cr_assert_eq(json_array_size(json_object_get(ans, "workloads")), 0);
    json_decref(ans);
    char *same = work(&ts, c1, 0, NULL);
    cr_assert_str_eq(same, c1, "nothing changed, yet the cursor did");
    free(same);

    /* Placed while no poll was open: the next poll with the old cursor has it at once (a wait of
     * 30 s that ended with the same cursor would fail the comparison below). */
    long id = ts_submit(&ts, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}");
    json_decref(ts_wait_state(&ts, id, "placed", NULL));
    char *c2 = work(&ts, c1, 30, &ans);
    cr_assert_str_neq(c2, c1, "a placement did not change the cursor");
    cr_assert(has_work(ans, id, "placed"), "the placement is not in the work");
    json_decref(ans);

    /* The agent's own confirmation (placed -> active) is no news to it: the cursor stays, so a
     * poll is not answered again for it (one round trip per placement saved). */
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld/activate", id);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, NULL, NULL), 200);
    char *confirmed = work(&ts, c2, 0, &ans);
    cr_expect_str_eq(confirmed, c2, "the agent's confirmation changed the cursor");
    cr_assert(has_work(ans, id, "active"), "the confirmed request is not active work");
    json_decref(ans);
    free(confirmed);

    /* A reconnect to a restarted control plane: the cursor still names the same work, and the
     * old one still sees what it missed. */
    ts_kill(&ts, true);
    ts_spawn(&ts);
    char *again = work(&ts, c2, 0, NULL);
    cr_assert_str_eq(again, c2, "the cursor did not survive the restart");
    free(again);
    char *missed = work(&ts, c1, 30, &ans);
    cr_assert_str_eq(missed, c2);
    cr_assert(has_work(ans, id, "active"));
    json_decref(ans);
    free(missed);

    /* A parked poll is answered by the change: release while it waits. */
    Poll p = {.ts = &ts};
    snprintf(p.path, sizeof(p.path), "/v1/nodes/n1/work?after=%s&wait=60", c2);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, poll_main, &p), 0);
    bool parked = false;
    for (int i = 0; i < 600 && !parked; i++) {
        char *text = NULL;
        /* /metrics is text: how many long-polls are parked */
        Client *cl = NULL;
        Error err = {0};
        cr_assert_eq(client_new(ts.url, NULL, &cl, &err), 0);
        long status = 0;
        cr_assert_eq(client_call_raw(cl, "GET", "/metrics", NULL, 0, NULL, &status, &text, &err),
                     0);
        parked = text && strstr(text, "einsora_parked_long_polls 1") != NULL;
        free(text);
        client_free(cl);
        if (!parked)
            sleep_ms(50);
    }
    cr_assert(parked, "the poll never parked");
    snprintf(path, sizeof(path), "/v1/requests/%ld/release", id);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, NULL, NULL), 200);
    pthread_join(th, NULL);
    cr_assert_eq(p.status, 200);
    const char *c3 = json_string_value(json_object_get(p.ans, "cursor"));
    cr_assert(c3 && strcmp(c3, c2) != 0, "the parked poll was not answered by the release");
    cr_assert_eq(json_array_size(json_object_get(p.ans, "workloads")), 0,
                 "the released request is still work");
    json_decref(p.ans);

    /* Refusals change nothing and say why. */
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/n1/work?after=xyz", NULL, NULL), 400);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/n1/work?after=00000000000000000&wait=1",
                         NULL, NULL),
                 400);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/n1/work?wait=61", NULL, NULL), 400);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/n1/work?since=1", NULL, NULL), 400);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/nope/work", NULL, NULL), 404);
    char *other = ts_token(&ts, "n2", "node", "n2");
    cr_assert_eq(ts_call(&ts, other, "GET", "/v1/nodes/n1/work", NULL, NULL), 403);
    free(other);
    free(c1);
    free(c2);
    ts_stop(&ts);
}

static json_t *work_of(TestServer *ts, const char *node) {
    char path[96];
    snprintf(path, sizeof(path), "/v1/nodes/%s/work", node);
    json_t *j = NULL;
    cr_assert_eq(ts_call(ts, ts->admin, "GET", path, NULL, &j), 200, "GET %s", path);
    return j;
}

static void post(TestServer *ts, long id, const char *verb) {
    char path[96];
    snprintf(path, sizeof(path), "/v1/requests/%ld/%s", id, verb);
    cr_assert_eq(ts_call(ts, ts->admin, "POST", path, NULL, NULL), 200, "POST %s", path);
}

/* Each node's work is kept by node: requests placed, moved on, ended and forgotten on another
 * node leave a node's answer and cursor as they were, and the node's own changes show. */
Test(work, r17_a_nodes_work_is_unchanged_while_other_nodes_work_churns, .timeout = 180) {
    TestServer ts;
    ts_start(&ts);
    ts_add_h100_node(&ts, "n1", "root", 8);
    long mine[2];
    for (int i = 0; i < 2; i++) {
        mine[i] = ts_submit(&ts, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}");
        json_decref(ts_wait_state(&ts, mine[i], "placed", NULL));
    }
    post(&ts, mine[0], "activate");
    json_t *before = work_of(&ts, "n1");
    cr_assert_eq(json_array_size(json_object_get(before, "workloads")), 2);

    /* Everything new goes to n2 from here on. */
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes/n1/cordon", NULL, NULL), 200);
    ts_add_h100_node(&ts, "n2", "root", 8);
    for (int round = 0; round < 3; round++) {
        long other[8];
        for (int i = 0; i < 8; i++) {
            other[i] = ts_submit(&ts, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}");
            json_decref(ts_wait_state(&ts, other[i], "placed", NULL));
            if (i % 2)
                post(&ts, other[i], "activate");
        }
        json_t *theirs = work_of(&ts, "n2");
        cr_assert_eq(json_array_size(json_object_get(theirs, "workloads")), 8,
                     "n2's work misses its placements");
        json_decref(theirs);
        for (int i = 0; i < 8; i++)
            post(&ts, other[i], "release");
        json_t *now = work_of(&ts, "n1");
        cr_assert(json_equal(now, before), "n1's work changed with n2's churn (round %d)", round);
        json_decref(now);
    }
    json_t *theirs = work_of(&ts, "n2");
    cr_assert_eq(json_array_size(json_object_get(theirs, "workloads")), 0);
    json_decref(theirs);

    /* Restarted, the server rebuilds each node's work from the store: the same answer. */
    ts_kill(&ts, true);
    ts_spawn(&ts);
    json_t *now = work_of(&ts, "n1");
    cr_assert(json_equal(now, before), "n1's work changed with a restart");
    json_decref(now);

    /* Its own change shows: one released, the other is its only work. */
    post(&ts, mine[0], "release");
    now = work_of(&ts, "n1");
    json_t *w = json_object_get(now, "workloads");
    cr_assert_eq(json_array_size(w), 1);
    cr_assert_eq(json_integer_value(json_object_get(json_array_get(w, 0), "id")), mine[1]);
    cr_assert_str_neq(json_string_value(json_object_get(now, "cursor")),
                      json_string_value(json_object_get(before, "cursor")));
    json_decref(now);
    json_decref(before);
    ts_stop(&ts);
}

/* ---- an older control plane: no work route (404), the work comes with each heartbeat ---- */

typedef struct OldServer {
    pthread_mutex_t lock;
    int heartbeats, work_asks,
            activated_at; /* activated_at: heartbeats before the activation, -1 none */
    bool active;
} OldServer;

static enum MHD_Result old_answer(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls) {
    (void)version, (void)upload;
    OldServer *o = cls;
    if (fleet_double_request_pending(con_cls, cls, upload_size))
        return MHD_YES;
    unsigned status = 200;
    char body[1024] = "{}";
    pthread_mutex_lock(&o->lock);
    if (!strcmp(method, "POST") && strstr(url, "/heartbeat")) {
        o->heartbeats++;
        snprintf(body, sizeof(body),
                 "{\"node\":\"old-1\",\"unreachable\":false,\"tasks\":[],\"workloads\":[{\"id\":7,"
                 "\"user\":\"u\","
                 "\"kind\":\"container\",\"state\":\"%s\",\"placement\":{\"node\":\"old-1\","
                 "\"class\":"
                 "\"nvidia-h100-80gb\",\"method\":\"container\",\"devices\":[2],\"addresses\":["
                 "\"0000:3a:00.0\"]},"
                 "\"request\":{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}}]}",
                 o->active ? "active" : "placed");
    } else if (!strcmp(method, "GET") && strstr(url, "/work")) {
        o->work_asks++;
        status = 404;
        snprintf(body, sizeof(body),
                 "{\"code\":\"not_found\",\"message\":\"No such endpoint: %.200s.\"}", url);
    } else if (!strcmp(method, "POST") && !strcmp(url, "/v1/requests/7/activate")) {
        if (!o->active)
            o->activated_at = o->heartbeats;
        o->active = true;
    }
    pthread_mutex_unlock(&o->lock);
    struct MHD_Response *r =
            MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", "application/json");
    MHD_add_response_header(r, WIRE_API_HEADER, WIRE_API_VERSION); /* a control plane's answer */
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static bool old_activated(OldServer *o, int *ret_heartbeats, int *ret_asks) {
    pthread_mutex_lock(&o->lock);
    bool yes = o->active;
    *ret_heartbeats = o->activated_at;
    *ret_asks = o->work_asks;
    pthread_mutex_unlock(&o->lock);
    return yes;
}

Test(work, r17_agent_falls_back_to_heartbeat_work_against_an_older_control_plane, .timeout = 120) {
    OldServer o = {.activated_at = -1};
    pthread_mutex_init(&o.lock, NULL);
    struct MHD_Daemon *d = MHD_start_daemon(
            MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, old_answer, &o,
            MHD_OPTION_SOCK_ADDR,
            &(struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)},
            MHD_OPTION_END);
    cr_assert(d);
    char url[64], dir[] = "/tmp/einsora-old-XXXXXX";
    snprintf(url, sizeof(url), "http://127.0.0.1:%u",
             MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port);
    cr_assert(mkdtemp(dir));
    pid_t agent = fleet_spawn_h100_agent(url, "old-token", "old-1", dir, NULL);
    int after = -1, asks = 0;
    bool done = false;
    for (int i = 0; i < 600 && !(done = old_activated(&o, &after, &asks)); i++)
        sleep_ms(100);
    kill(agent, SIGTERM);
    int status;
    cr_assert_eq(waitpid(agent, &status, 0), agent);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    MHD_stop_daemon(d);
    cr_assert(done, "the agent never started the workload the heartbeat carried (see %s/agent.log)",
              dir);
    cr_assert_geq(after, 1, "activated before any heartbeat said it was placed");
    cr_assert_eq(asks, 1, "the agent asked the missing work route %d times: it should remember",
                 asks);
    cr_assert_eq(remove_temp_tree(dir), 0);
    pthread_mutex_destroy(&o.lock);
}

/* R17: an agent whose new description the control plane keeps back while workloads run (409:
 * here its capabilities changed across a restart) is still the node's agent: it heartbeats,
 * so the node stays reachable, and it takes and starts new work meanwhile. */
Test(work, r17_an_agent_whose_push_waits_for_an_idle_node_goes_on_working, .timeout = 180) {
    TestServer ts;
    char state_dir[160], *token = NULL;
    pid_t agent = start_with_h100_agent(&ts, state_dir, NULL, &token);
    long id = ts_submit(&ts, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}");
    json_decref(ts_wait_state(&ts, id, "active", "the agent's log"));
    kill(agent, SIGTERM);
    waitpid(agent, NULL, 0);
    json_int_t before = fleet_last_seen_ms(&ts, "dc1-h100");
    char sys[256], proc[256], nvml[256];
    snprintf(sys, sizeof(sys), "%s/machines/hgx-h100-8gpu/sys", TEST_FIXTURES);
    snprintf(proc, sizeof(proc), "%s/machines/hgx-h100-8gpu/proc", TEST_FIXTURES);
    snprintf(nvml, sizeof(nvml), "%s/machines/hgx-h100-8gpu/nvml.txt", TEST_FIXTURES);
    const char *args[] = {"--site",     "dc1",          "--site-kind", "datacenter",     "--mode",
                          "container",  "--sysfs-root", sys,           "--proc-root",    proc,
                          "--simulate", "--nvml-lib",   FAKE_NVML_LIB, "--capabilities", "kata",
                          NULL};
    agent = fleet_spawn_agent(ts.url, token, "dc1-h100", state_dir, args, nvml);
    bool beat = false;
    for (int i = 0; i < 600 && !beat; i++) { /* a deadline, not a measure: 60 s */
        beat = fleet_last_seen_ms(&ts, "dc1-h100") > before;
        if (!beat)
            sleep_ms(100);
    }
    cr_assert(beat, "the restarted agent never heartbeat while its push waited (see %s/agent.log)",
              state_dir);
    long next = ts_submit(&ts, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}");
    json_decref(ts_wait_state(&ts, next, "active", "the agent's log"));
    char *log = NULL;
    char path[200];
    snprintf(path, sizeof(path), "%s/agent.log", state_dir);
    cr_assert_geq(read_full_file(path, 1 << 20, &log, NULL), 0);
    cr_expect(strstr(log, "409"), "the push was kept back while the first container ran: %s", log);
    free(log);
    kill(agent, SIGTERM);
    waitpid(agent, NULL, 0);
    free(token);
    ts_stop(&ts);
}
