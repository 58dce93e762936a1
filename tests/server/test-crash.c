/* test-crash.c: R16 under kill -9. Several clients submit, release and cancel while the
 * server is SIGKILLed at random moments (>= 20 times) and restarted; after each restart every
 * acknowledged request is there in the state it was acknowledged in (or the state of an
 * operation that was in flight at the kill, which may or may not have committed), placed
 * requests keep exactly their placement, and the core's invariant checker passes. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "srv-helpers.h"

#define CLIENTS 4
#define MAX_REQS 20000

typedef struct Known {
    char state[16];    /* last acknowledged state; "" = not acknowledged */
    char maybe[16];    /* state of an op in flight at a kill (may have committed) */
    json_t *placement; /* as acknowledged when placed */
} Known;

static TestServer ts;
static Known known[MAX_REQS + 1];
static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool stop_clients;
static atomic_uint submissions;

typedef struct ClientArg {
    char *token;
    unsigned seed;
    json_int_t own[MAX_REQS];
    size_t n_own;
} ClientArg;

static void record(json_t *q) {
    json_int_t id = json_integer_value(json_object_get(q, "id"));
    cr_assert(id > 0 && id <= MAX_REQS);
    pthread_mutex_lock(&known_lock);
    Known *k = &known[id];
    snprintf(k->state, sizeof(k->state), "%s", json_string_value(json_object_get(q, "state")));
    k->maybe[0] = 0;
    json_decref(k->placement);
    k->placement = json_incref(json_object_get(q, "placement"));
    pthread_mutex_unlock(&known_lock);
}

static void *client_main(void *p) {
    ClientArg *a = p;
    Client *c = NULL;
    Error err = {0};
    cr_assert_eq(client_new(ts.url, a->token, &c, &err), 0);
    while (!atomic_load(&stop_clients)) {
        unsigned r = rand_r(&a->seed) % 10;
        long st = 0;
        json_t *q = NULL;
        if (r < 7 || a->n_own == 0) {
            const char *body =
                    r % 2 ? "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}"
                          : "{\"kind\":\"notebook\",\"class\":\"nvidia-h100-80gb\",\"count\":2}";
            char key[64];
            snprintf(key, sizeof(key), "k-%u-%u", a->seed, atomic_fetch_add(&submissions, 1));
            json_t *b = json_loads(body, 0, NULL);
            int k = client_call(c, "POST", "/v1/requests", b, key, &st, &q, &err);
            json_decref(b);
            if (k < 0)
                break; /* killed: this submission's fate is unknown; its id was never told */
            cr_assert(st == 201, "submit answered %ld", st);
            record(q);
            a->own[a->n_own++] = json_integer_value(json_object_get(q, "id"));
        } else {
            json_int_t id = a->own[rand_r(&a->seed) % a->n_own];
            const char *verb = r == 9 ? "cancel" : "release";
            char path[64];
            snprintf(path, sizeof(path), "/v1/requests/%lld/%s", (long long)id, verb);
            pthread_mutex_lock(&known_lock);
            snprintf(known[id].maybe, sizeof(known[id].maybe), "%s",
                     r == 9 ? "cancelled" : "released");
            pthread_mutex_unlock(&known_lock);
            if (client_call(c, "POST", path, NULL, NULL, &st, &q, &err) < 0)
                break;
            if (st == 200)
                record(q);
            else {
                pthread_mutex_lock(&known_lock);
                known[id].maybe[0] = 0; /* refused (409): nothing changed */
                pthread_mutex_unlock(&known_lock);
            }
        }
        json_decref(q);
        if (a->n_own == MAX_REQS / CLIENTS)
            break;
    }
    client_free(c);
    return NULL;
}

static bool state_is(const char *got, const char *want) {
    return want[0] && !strcmp(got, want);
}

static void verify(unsigned round) {
    json_t *reqs = ts_list_all(&ts, ts.admin, "/v1/requests", "requests");
    size_t checked = 0;
    for (json_int_t id = 1; id <= MAX_REQS; id++) {
        Known *k = &known[id];
        if (!k->state[0])
            continue;
        json_t *q = NULL;
        size_t i;
        json_t *v;
        json_array_foreach(reqs, i, v) if (json_integer_value(json_object_get(v, "id")) == id) q =
                v;
        cr_assert(q, "round %u: acknowledged request %lld is lost", round, (long long)id);
        const char *got = json_string_value(json_object_get(q, "state"));
        bool ok = state_is(got, k->state) || state_is(got, k->maybe) ||
                  /* the queue may place a waiting request when capacity frees */
                  (!strcmp(k->state, "pending") && !strcmp(got, "placed"));
        cr_assert(ok, "round %u: request %lld acknowledged %s (maybe %s) but is %s", round,
                  (long long)id, k->state, k->maybe, got);
        if (!strcmp(got, "placed") && !strcmp(k->state, "placed"))
            cr_assert(json_equal(json_object_get(q, "placement"), k->placement),
                      "round %u: request %lld moved", round, (long long)id);
        /* Adopt what the server says, for the next round's check. */
        snprintf(k->state, sizeof(k->state), "%s", got);
        k->maybe[0] = 0;
        json_decref(k->placement);
        k->placement = json_incref(json_object_get(q, "placement"));
        checked++;
    }
    json_decref(reqs);
    json_t *inv = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/debug/invariants", NULL, &inv), 200);
    cr_assert(json_is_true(json_object_get(inv, "ok")), "round %u: %s", round,
              json_string_value(json_object_get(inv, "violation")));
    json_decref(inv);
    (void)checked;
}

Test(crash, r16_acknowledged_requests_survive_sigkill_at_random_moments, .timeout = 240) {
    const char *env = getenv("EINSORA_CRASH_SEED");
    /* A fixed default seed: a failure replays as it is; EINSORA_CRASH_SEED explores others. */
    unsigned seed = env ? (unsigned)strtoul(env, NULL, 10) : 20261130u;
    const char *rounds_env = getenv("EINSORA_CRASH_ROUNDS");
    unsigned rounds = rounds_env ? (unsigned)strtoul(rounds_env, NULL, 10) : 24;
    cr_log_info("crash test seed %u (EINSORA_CRASH_SEED to replay), %u rounds", seed, rounds);
    ts_start(&ts);
    for (int n = 0; n < 12; n++) {
        char name[16];
        snprintf(name, sizeof(name), "n%d", n);
        ts_add_h100_node(&ts, name, "ops", 8);
    }
    ClientArg *args = calloc(CLIENTS, sizeof(ClientArg));
    for (int i = 0; i < CLIENTS; i++) {
        char user[16];
        snprintf(user, sizeof(user), "tenant%d", i);
        args[i].token = ts_token(&ts, user, "user", NULL);
        /* Trusted tenants run containers under runc, so requests are placed, not left waiting
         * for Kata: trust is an admin's grant. */
        char path[64];
        snprintf(path, sizeof(path), "/v1/tenants/%s/trust", user);
        cr_assert_eq(ts_call(&ts, ts.admin, "PUT", path, NULL, NULL), 200);
    }
    unsigned total = 0;
    for (unsigned round = 0; round < rounds; round++) {
        atomic_store(&stop_clients, false);
        pthread_t t[CLIENTS];
        for (int i = 0; i < CLIENTS; i++) {
            args[i].seed = seed * 31 + round * 7 + (unsigned)i;
            pthread_create(&t[i], NULL, client_main, &args[i]);
        }
        /* Kill at a random moment within the load. */
        usleep(20000 + (useconds_t)(rand_r(&seed) % 250) * 1000);
        ts_kill(&ts, true);
        atomic_store(&stop_clients, true);
        for (int i = 0; i < CLIENTS; i++)
            pthread_join(t[i], NULL);
        ts_spawn(&ts);
        verify(round);
        total++;
    }
    cr_assert_geq(total, 20);
    cr_log_info("%u kills, %u submissions", total, atomic_load(&submissions));
    for (int i = 0; i < CLIENTS; i++)
        free(args[i].token);
    free(args);
    for (size_t i = 0; i <= MAX_REQS; i++)
        json_decref(known[i].placement);
    ts_stop(&ts);
}

/* R8 across a restart: a stored node's GPUs of a class the new catalog lacks (an operator
 * removed it) come back as unclassified devices, shown and never placed, and the class's
 * capacity is gone; the control plane starts rather than refuse the whole state. */
Test(crash, r8_a_class_removed_from_the_catalog_leaves_its_devices_unclassified_after_restart) {
    TestServer t = {0};
    ts_start(&t);
    ts_add_h100_node(&t, "n1", "ops", 2);
    ts_kill(&t, false);
    char catalog[128];
    snprintf(catalog, sizeof(catalog), "%s/small-catalog.yaml", t.dir);
    FILE *f = fopen(catalog, "w");
    cr_assert(f);
    fputs("classes:\n"
          "  - {name: nvidia-a100-80gb, vendor: nvidia, match: {pci: '10de:20b5'}, memory_gb: 80,"
          " container_resource: nvidia.com/gpu, node_selector: m=a100}\n",
          f);
    fclose(f);
    t.extra[0] = "--catalog";
    t.extra[1] = catalog;
    ts_spawn(&t);
    json_t *n = NULL;
    cr_assert_eq(ts_call(&t, t.admin, "GET", "/v1/nodes/n1", NULL, &n), 200);
    json_t *devs = json_object_get(n, "devices");
    cr_assert_eq(json_array_size(devs), 2, "the GPUs are shown, not dropped");
    for (size_t i = 0; i < 2; i++) {
        const char *cls = json_string_value(json_object_get(json_array_get(devs, i), "class"));
        cr_assert(!cls || !*cls, "device %zu is unclassified, not '%s'", i, cls);
    }
    json_decref(n);
    json_t *q = NULL;
    cr_assert_eq(ts_call(&t, t.admin, "POST", "/v1/requests",
                         "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", &q),
                 422, "the class is gone from the catalog");
    json_decref(q);
    ts_stop(&t);
}

/* R16 across a catalog change: a waiting request the API acknowledged is not refused by a
 * restart under a catalog without its class (which would lose it for good, with no one asking):
 * the start stops, naming it and the catalog, as for a placed request's class; under the
 * catalog it was accepted under it waits on. */
Test(crash, r16_a_waiting_request_whose_class_left_the_catalog_stops_the_start_not_lost) {
    TestServer t = {0};
    ts_start(&t);
    long id = ts_submit(&t, "{\"kind\":\"container\",\"class\":\"nvidia-a100-80gb\","
                            "\"wait_for_nodes\":true}");
    json_decref(ts_wait_state(&t, id, "pending", NULL));
    long id2 = ts_submit(&t, "{\"kind\":\"notebook\",\"class\":\"nvidia-a100-80gb\","
                             "\"wait_for_nodes\":true}");
    json_decref(ts_wait_state(&t, id2, "pending", NULL));
    ts_kill(&t, false);
    char catalog[128];
    snprintf(catalog, sizeof(catalog), "%s/no-a100.yaml", t.dir);
    FILE *f = fopen(catalog, "w");
    cr_assert(f);
    fputs("classes:\n"
          "  - {name: nvidia-h100-80gb, vendor: nvidia, match: {pci: '10de:2330'}, memory_gb: 80,"
          " container_resource: nvidia.com/gpu, node_selector: m=h100}\n",
          f);
    fclose(f);
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "serve", "--listen", "127.0.0.1:0", "--state", t.state,
                         "--catalog", catalog, NULL);
    cr_expect_eq(rc, 1, "%s", err);
    char want[64];
    snprintf(want, sizeof(want), "request %ld cannot be restored", id);
    cr_expect(err && strstr(err, want) && strstr(err, catalog), "%s", err);
    /* Every request to deal with is named at once, not one per restart. */
    snprintf(want, sizeof(want), "2 requests in all cannot be restored (%ld, %ld)", id, id2);
    cr_expect(err && strstr(err, want), "%s", err);
    free(out), free(err);
    ts_spawn(&t); /* the catalog it was accepted under */
    json_decref(ts_wait_state(&t, id, "pending", NULL));
    ts_stop(&t);
}
