/* test-work-wake.c: a parked work poll (GET /v1/nodes/{name}/work) is woken only by events
 * that may change its node's work, not by every event of the fleet: events about another node
 * leave it parked, one about its own node wakes it (to look, find its work unchanged, and park
 * again). The server counts such idle wake-ups in /metrics. Against the real server. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/client.h"
#include "srv-helpers.h"

static TestServer ts;

static void setup(void) {
    ts_start(&ts);
}

static void teardown(void) {
    ts_stop(&ts);
}

TestSuite(work_wake, .init = setup, .fini = teardown, .timeout = 120);

typedef struct Poll {
    char path[128];
    long status;
    json_t *answer;
} Poll;

/* The work poll, on its own connection (a Client per thread). */
static void *poll_main(void *userdata) {
    Poll *p = userdata;
    Client *cl = NULL;
    Error err = {0};
    if (client_new(ts.url, ts.admin, &cl, &err) >= 0)
        (void)client_call(cl, "GET", p->path, NULL, NULL, &p->status, &p->answer, &err);
    client_free(cl);
    return NULL;
}

/* Poll `name` with a generous deadline until it reaches at least `want`. */
static double await_at_least(const char *name, double want) {
    double v = ts_metric(&ts, name);
    for (int i = 0; i < 1200 && v < want; i++) {
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
        v = ts_metric(&ts, name);
    }
    return v;
}

static void cordon(const char *node, bool on) {
    char path[64];
    snprintf(path, sizeof(path), "/v1/nodes/%s/%s", node, on ? "cordon" : "uncordon");
    long st = ts_call(&ts, ts.admin, "POST", path, NULL, NULL);
    cr_assert_eq(st, 200, "POST %s: %ld", path, st);
}

Test(work_wake, r17_a_work_poll_is_woken_only_by_events_of_its_node) {
    ts_add_h100_node(&ts, "n1", "root", 1);
    ts_add_h100_node(&ts, "n2", "root", 1);
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/n2/work", NULL, &j), 200);
    const char *cursor = json_string_value(json_object_get(j, "cursor"));
    cr_assert(cursor);
    Poll p = {0};
    snprintf(p.path, sizeof(p.path), "/v1/nodes/n2/work?after=%s&wait=60", cursor);
    json_decref(j);
    double idle0 = ts_metric(&ts, "einsora_work_poll_idle_wakeups_total");
    cr_assert_geq(idle0, 0, "the counter is in /metrics");

    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, poll_main, &p), 0);
    cr_assert_geq(await_at_least("einsora_parked_long_polls", 1), 1, "n2's poll never parked");
    /* Two events about n1 (answered once committed and published), then one about n2: the
     * first wake-up seen is n2's, and by then n1's events are long published. */
    cordon("n1", true);
    cordon("n1", false);
    cordon("n2", true);
    double idle = await_at_least("einsora_work_poll_idle_wakeups_total", idle0 + 1);
    cr_expect_eq(idle, idle0 + 1, "n2's poll was woken %g times; only n2's event concerns it",
                 idle - idle0);
    cr_expect_geq(await_at_least("einsora_parked_long_polls", 1), 1,
                  "cordoning leaves n2's work as it was: the poll parks again");
    /* A change of n2's work answers the poll at once: a request placed on it. */
    cordon("n2", false);
    cordon("n1", true);
    json_decref(ts_wait_state(
            &ts, ts_submit(&ts, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}"),
            "placed", NULL));
    pthread_join(t, NULL);
    cr_expect_eq(p.status, 200);
    cr_expect_eq(json_array_size(json_object_get(p.answer, "workloads")), 1, "the placement");
    json_decref(p.answer);
}
