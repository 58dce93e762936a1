/* test-standby.c: R16 on a standby: it replays the leader's commits from a real PostgreSQL
 * and answers reads itself, with the leader's bodies for the same committed state; its
 * event long-poll wakes on the leader's commit; its lag returns to 0; and it keeps serving
 * its last replayed state while the leader is killed. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pg-helper.h"
#include "replicas.h"

#define CONVERGE_MS 30000

static const char request_body[] = "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}";

/* A client that talks to replica i only: a 200 from a standby is its own answer (a redirect
 * would lead to the leader, which the single-URL client does not switch to). */
static Client *client_at(int i, const char *tok) {
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", rep[i].port);
    Client *c = NULL;
    cr_assert_eq(client_new(url, tok, &c, NULL), 0);
    return c;
}

/* A number from replica i's /metrics (-1 when it is not there). */
static double metric(int i, const char *name) {
    Client *c = client_at(i, NULL);
    long st = 0;
    char *text = NULL;
    double v = -1;
    if (client_call_raw(c, "GET", "/metrics", NULL, 0, NULL, &st, &text, NULL) >= 0 && st == 200) {
        size_t n = strlen(name);
        for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
            if (!strncmp(p, name, n) && p[n] == ' ')
                v = strtod(p + n + 1, NULL);
    }
    free(text);
    client_free(c);
    return v;
}

/* Wait until replica sb is a standby that knows the leader (it has seen an epoch). */
static void wait_standby(int sb) {
    uint64_t end = now_ms() + CONVERGE_MS;
    for (;;) {
        long long epoch = 0;
        char *role = role_of(sb, &epoch);
        bool ok = role && !strcmp(role, "standby") && epoch >= 1;
        free(role);
        if (ok)
            return;
        cr_assert(now_ms() < end, "replica %d never answered as a standby that knows its leader",
                  sb);
        usleep(20000);
    }
}

/* Poll (a generous deadline) until the standby's answer to GET path is the leader's; the
 * leader's body (the caller frees it). */
static json_t *converge(Client *leader, Client *standby, const char *path) {
    uint64_t end = now_ms() + CONVERGE_MS;
    for (;;) {
        json_t *want = NULL, *got = NULL;
        long lst = call(leader, "GET", path, NULL, NULL, &want);
        long sst = call(standby, "GET", path, NULL, NULL, &got);
        if (lst == 200 && sst == 200 && json_equal(want, got)) {
            json_decref(got);
            return want;
        }
        if (now_ms() >= end) {
            char *w = json_dumps(want, JSON_COMPACT), *g = json_dumps(got, JSON_COMPACT);
            cr_assert_fail("GET %s: the standby answered %ld %.600s, the leader %ld %.600s", path,
                           sst, g, lst, w);
        }
        json_decref(want);
        json_decref(got);
        usleep(20000);
    }
}

static json_int_t submit(Client *c, const char *key) {
    json_t *q = NULL;
    cr_assert_eq(call(c, "POST", "/v1/requests", request_body, key, &q), 201, "%s",
                 last_err.message);
    json_int_t id = json_integer_value(json_object_get(q, "id"));
    cr_assert(strcmp(json_string_value(json_object_get(q, "state")), "refused"), "refused: %s",
              json_string_value(json_object_get(q, "reason")));
    json_decref(q);
    return id;
}

/* A node with two H100s, registered at the leader. */
static void add_node(Client *c) {
    const char *node =
            "{\"name\":\"g1\",\"site\":\"dc1\",\"site_kind\":\"datacenter\","
            "\"platform\":\"linux\",\"owner\":\"tenant0\",\"mode\":\"container\",\"cpus\":64,"
            "\"devices\":[{\"pci\":\"0000:17:00.0\",\"class\":\"nvidia-h100-80gb\",\"memory_gb\":"
            "80},"
            "{\"pci\":\"0000:18:00.0\",\"class\":\"nvidia-h100-80gb\",\"memory_gb\":80}]}";
    cr_assert_eq(call(c, "POST", "/v1/nodes", node, NULL, NULL), 201, "%s", last_err.message);
}

/* Two replicas, a node and four requests (two placed, one released, two waiting). */
typedef struct Setup {
    int l, sb;
    char *admin, *tenant;
    Client *lc, *sc, *tc;
    json_int_t ids[4];
} Setup;

static void setup(Setup *st) {
    st->l = start_two();
    st->sb = 1 - st->l;
    st->admin = token("root", "admin");
    st->tenant = token("tenant0", "user"); /* the node's owner: no Kata needed */
    st->lc = client_at(st->l, st->admin);
    st->sc = client_at(st->sb, st->admin);
    st->tc = client_at(st->l, st->tenant);
    add_node(st->lc);
    for (int i = 0; i < 4; i++) {
        char key[16];
        snprintf(key, sizeof(key), "k%d", i);
        st->ids[i] = submit(st->tc, key);
    }
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%lld/release", (long long)st->ids[0]);
    json_t *ans = NULL;
    long status = call(st->tc, "POST", path, NULL, NULL, &ans);
    cr_assert_eq(status, 200, "release: %ld %s", status,
                 json_string_value(json_object_get(ans, "message")));
    json_decref(ans);
    wait_standby(st->sb);
}

static void teardown(Setup *st) {
    client_free(st->lc);
    client_free(st->sc);
    client_free(st->tc);
    free(st->admin);
    free(st->tenant);
}

Test(replicas, r16_standby_serves_reads_from_its_replay_with_the_leaders_bodies,
     .fini = remove_dir) {
    Setup st;
    setup(&st);
    double reads_before = metric(st.sb, "einsora_replay_reads_total");
    char show[4][64];
    const char *paths[] = {"/v1/requests",
                           show[0],
                           show[1],
                           show[2],
                           show[3],
                           "/v1/nodes",
                           "/v1/nodes/g1",
                           "/v1/capacity",
                           "/v1/events?after=0",
                           "/v1/classes",
                           "/v1/debug/invariants"};
    for (int i = 0; i < 4; i++)
        snprintf(show[i], sizeof(show[i]), "/v1/requests/%lld", (long long)st.ids[i]);
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
        json_decref(converge(st.lc, st.sc, paths[i]));
    /* A cursor past its newest event may be one the leader gave that it has not replayed
     * yet: "retry shortly" (503), never "read again from an older one" (400), which would
     * give a follower its events twice. */
    json_t *q = NULL;
    cr_assert_eq(call(st.sc, "GET", "/v1/events?after=999999", NULL, NULL, &q), 503);
    json_decref(q);
    q = NULL;
    /* The waiting one shows its place in the queue there too. */
    cr_assert_eq(call(st.sc, "GET", show[3], NULL, NULL, &q), 200);
    cr_assert_str_eq(json_string_value(json_object_get(q, "state")), "pending");
    cr_assert_eq(json_integer_value(json_object_get(q, "queue_position")), 1);
    json_decref(q);
    cr_assert_gt(metric(st.sb, "einsora_replay_reads_total"), reads_before,
                 "the standby's reads were not answered from its replay");
    /* A change sent to the standby still goes to the leader (307, followed). */
    Client *tsb = client_at(st.sb, st.tenant);
    json_int_t id = submit(tsb, "via-standby");
    client_free(tsb);
    cr_assert_gt(id, st.ids[3]);
    teardown(&st);
}

Test(replicas, r16_standby_lag_metric_returns_to_0_after_catching_up, .fini = remove_dir) {
    Setup st;
    setup(&st);
    double last = metric(st.l, "einsora_replay_applied_seq");
    cr_assert_gt(last, 0);
    uint64_t end = now_ms() + CONVERGE_MS;
    while (!(metric(st.sb, "einsora_replay_applied_seq") >= last &&
             metric(st.sb, "einsora_replay_lag_events") == 0 &&
             metric(st.sb, "einsora_replay_lag_seconds") == 0)) {
        cr_assert(now_ms() < end,
                  "the standby's lag did not return to 0 (applied %g of %g, lag %g)",
                  metric(st.sb, "einsora_replay_applied_seq"), last,
                  metric(st.sb, "einsora_replay_lag_events"));
        usleep(20000);
    }
    /* /readyz says what it has applied. */
    json_t *j = NULL;
    Client *c = client_at(st.sb, NULL);
    cr_assert_eq(call(c, "GET", "/readyz", NULL, NULL, &j), 503);
    cr_assert_str_eq(json_string_value(json_object_get(j, "role")), "standby");
    cr_assert_geq(json_integer_value(json_object_get(j, "applied")), (json_int_t)last);
    json_decref(j);
    client_free(c);
    teardown(&st);
}

typedef struct Poll {
    unsigned port;
    const char *token;
    json_int_t after;
    long status;
    json_t *answer;
} Poll;

static void *long_poll(void *p) {
    Poll *a = p;
    char url[64], path[96];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", a->port);
    snprintf(path, sizeof(path), "/v1/events?after=%lld&wait=60", (long long)a->after);
    Client *c = NULL;
    if (client_new(url, a->token, &c, NULL) >= 0)
        a->status = call(c, "GET", path, NULL, NULL, &a->answer);
    client_free(c);
    return NULL;
}

Test(replicas, r16_standby_events_long_poll_wakes_on_a_leaders_commit, .fini = remove_dir) {
    Setup st;
    setup(&st);
    json_t *feed = converge(st.lc, st.sc, "/v1/events?after=0");
    Poll p = {.port = rep[st.sb].port,
              .token = st.admin,
              .after = json_integer_value(json_object_get(feed, "next"))};
    json_decref(feed);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, long_poll, &p), 0);
    /* Once it is parked on the standby (nothing new yet), the leader commits. */
    uint64_t end = now_ms() + CONVERGE_MS;
    while (metric(st.sb, "einsora_parked_long_polls") < 1) {
        cr_assert(now_ms() < end, "the long-poll never parked on the standby");
        usleep(20000);
    }
    json_int_t id = submit(st.tc, "wake-up");
    pthread_join(t, NULL);
    cr_assert_eq(p.status, 200, "%s", last_err.message);
    json_t *first = json_array_get(json_object_get(p.answer, "events"), 0);
    cr_assert(first, "the long-poll ended without the leader's commit");
    cr_assert_gt(json_integer_value(json_object_get(first, "seq")), p.after);
    char want[32];
    snprintf(want, sizeof(want), "%lld", (long long)id);
    cr_assert_str_eq(json_string_value(json_object_get(first, "object")), want);
    cr_assert_str_eq(json_string_value(json_object_get(first, "type")), "request.submitted");
    json_decref(p.answer);
    teardown(&st);
}

Test(replicas, r16_standby_keeps_serving_its_last_replayed_state_while_the_leader_is_killed,
     .fini = remove_dir) {
    Setup st;
    setup(&st);
    json_t *list = converge(st.lc, st.sc, "/v1/requests");
    char show[64];
    snprintf(show, sizeof(show), "/v1/requests/%lld", (long long)st.ids[1]);
    json_t *one = converge(st.lc, st.sc, show);
    long long epoch = 0;
    char *role = role_of(st.sb, &epoch);
    cr_assert(role && !strcmp(role, "standby"));
    free(role);
    double reads = metric(st.sb, "einsora_replay_reads_total");
    kill(rep[st.l].pid, SIGKILL);
    waitpid(rep[st.l].pid, NULL, 0);
    rep[st.l].pid = 0;
    /* At once (the lease has not run out): the standby answers from its replay. */
    json_t *got = NULL;
    cr_assert_eq(call(st.sc, "GET", show, NULL, NULL, &got), 200, "%s", last_err.message);
    cr_assert(json_equal(got, one), "the standby's answer changed when the leader died");
    json_decref(got);
    cr_assert_eq(call(st.sc, "GET", "/v1/requests", NULL, NULL, &got), 200, "%s", last_err.message);
    cr_assert(json_equal(got, list), "the standby's list changed when the leader died");
    json_decref(got);
    cr_assert_gt(metric(st.sb, "einsora_replay_reads_total"), reads);
    /* It takes over and goes on answering the same. */
    cr_assert_eq(wait_leader(epoch, CONVERGE_MS), st.sb);
    cr_assert_eq(call(st.sc, "GET", show, NULL, NULL, &got), 200, "%s", last_err.message);
    cr_assert(json_equal(got, one), "the new leader's answer differs from the replayed one");
    json_decref(got);
    json_decref(list);
    json_decref(one);
    teardown(&st);
}

Test(replicas, r16_standby_catches_up_without_its_notify_by_polling_the_events_table,
     .fini = remove_dir) {
    Setup st;
    setup(&st);
    json_decref(converge(st.lc, st.sc, "/v1/requests"));
    /* Its LISTEN session ends: the leader's NOTIFY of the next commit reaches nobody. */
    cr_assert_eq(pg_test_exec(conninfo,
                              "DO $$ BEGIN IF (SELECT count(pg_terminate_backend(pid)) "
                              "FROM pg_stat_activity WHERE query = 'LISTEN einsora_events') "
                              "< 1 THEN RAISE EXCEPTION 'no LISTEN session'; END IF; END $$"),
                 0, "the standby's LISTEN session was not found");
    submit(st.tc, "unheard");
    double last = metric(st.l, "einsora_replay_applied_seq");
    /* Metrics do not wake the replay (a read would): the poll of the table does. */
    uint64_t end = now_ms() + CONVERGE_MS;
    while (metric(st.sb, "einsora_replay_applied_seq") < last) {
        cr_assert(now_ms() < end, "the standby never applied sequence %g without its NOTIFY", last);
        usleep(20000);
    }
    teardown(&st);
}

static void restart_postgresql_and_remove_dir(void) {
    (void)replicas_pg_ctl("start"); /* the next test needs it, whatever this one did */
    remove_dir();
}

/* docs/postgresql.md: "When PostgreSQL cannot be reached, the standby answers from its last
 * view" -- for a caller whose token it checked before, without a lookup the store cannot
 * answer. */
Test(replicas, r16_with_postgresql_down_a_standby_answers_reads_from_its_last_view,
     .fini = restart_postgresql_and_remove_dir) {
    Setup st;
    setup(&st);
    char show[64];
    snprintf(show, sizeof(show), "/v1/requests/%lld", (long long)st.ids[1]);
    json_t *one = converge(st.lc, st.sc, show);
    cr_assert_eq(replicas_pg_ctl("stop"), 0);
    json_t *got = NULL;
    long status = call(st.sc, "GET", show, NULL, NULL, &got);
    cr_assert_eq(status, 200, "%ld %s %s", status,
                 json_string_value(json_object_get(got, "message")), last_err.message);
    cr_assert(json_equal(got, one), "the standby's last view");
    json_decref(got);
    cr_assert_eq(replicas_pg_ctl("start"), 0);
    json_decref(one);
    teardown(&st);
}
