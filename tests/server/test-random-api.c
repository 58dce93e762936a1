/* test-random-api.c: a randomized walk through the API of the real server: users with random
 * tokens and roles submit random requests (fallbacks, shares, owner-only and internal-only
 * classes, names the catalog does not know, counts no node holds, some asking to wait for
 * nodes), cancel and release them; owners cordon and uncordon; admins switch node modes with
 * a drain that evicts; an agent's node is lost and comes back. After every step the server's
 * invariant check passes (R15, R16, R2e) and every waiting request's reason is one a later
 * event could clear: no request waits for what no node could ever give it (R18) unless it
 * asked to, or may still fall back (R13).
 *
 * Seeded (EINSORA_RANDOM_SEED, default below) and bounded in steps, not in time. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "helpers.h"
#include "srv-helpers.h"

#define DEFAULT_SEED 0x11e5u
#define STEPS 160
#define N_USERS 5

static TestServer ts;
static uint64_t rng;

static void setup(void) {
    ts_start(&ts);
}

static void teardown(void) {
    ts_stop(&ts);
}

TestSuite(random_api, .init = setup, .fini = teardown, .timeout = 240);

static uint32_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

static uint32_t below(uint32_t n) {
    return next() % n;
}

static const char *str(json_t *j, const char *key) {
    const char *s = json_string_value(json_object_get(j, key));
    return s ? s : "";
}

static bool in(const char *s, const char *const *set) {
    for (; *set; set++)
        if (!strcmp(s, *set))
            return true;
    return false;
}

/* Waiting reasons that a later event (release, cancel, uncordon, mode switch, a passed reset
 * check, an agent's return, a node gaining room) clears on the fleet as it is. */
static const char *const clearable[] = {"no-capacity",    "mode-mismatch",  "queued",
                                        "no-kata",        "no-mig-in-kata", "reset-check",
                                        "macos-vm-limit", "cordoned",       NULL};
/* Reasons only a node that joins could clear (R18). */
static const char *const never[] = {"owner-only", "internal-only", "no-node", "too-large", NULL};
/* Refusals at submit. */
static const char *const refusals[] = {
        "owner-only", "internal-only",  "no-node",         "too-large",
        "no-kata",    "no-mig-in-kata", "linux-guest-gpu", "macos-guest-not-mac",
        "vm-mig",     "vm-amd",         "bad-count",       "bad-runtime",
        NULL};

typedef struct User {
    char name[16];
    char *token;
} User;

/* What the walk did, so that the test can say it covered what it claims. */
static struct {
    unsigned placed, pending, refused_never, unknown, ended, switched, waiting_checked;
} seen;

static User users[N_USERS + 2]; /* random users, then ops (owns the datacenter) and amy (a Mac) */
static char *admin_token, *agent_token;

static void add_node(const char *json) {
    json_t *ans = NULL;
    long st = ts_call(&ts, ts.admin, "POST", "/v1/nodes", json, &ans);
    cr_assert_eq(st, 201, "%s: %ld %s", json, st, str(ans, "message"));
    json_decref(ans);
}

#define DEV(pci, cls, mem) "{\"pci\":\"" pci "\",\"class\":\"" cls "\",\"memory_gb\":" #mem "}"
#define H100 "nvidia-h100-80gb"

static void fleet(void) {
    add_node("{\"name\":\"c1\",\"site\":\"dc\",\"site_kind\":\"datacenter\",\"platform\":\"linux\","
             "\"owner\":"
             "\"ops\",\"mode\":\"container\",\"cpus\":16,\"devices\":[" DEV(
                     "0000:17:00.0", H100, 80) "," DEV("0000:18:00.0", H100, 80) "]}");
    add_node("{\"name\":\"v1\",\"site\":\"dc\",\"site_kind\":\"datacenter\",\"platform\":\"linux\","
             "\"owner\":"
             "\"ops\",\"mode\":\"vm-passthrough\",\"capabilities\":[\"kata\"],\"cpus\":16,"
             "\"devices\":[" DEV("0000:17:00.0", H100, 80) "," DEV("0000:18:00.0", H100, 80) "]}");
    add_node("{\"name\":\"m1\",\"site\":\"dc\",\"site_kind\":\"datacenter\",\"platform\":\"linux\","
             "\"owner\":"
             "\"ops\",\"mode\":\"container\",\"capabilities\":[\"kata\",\"mig_in_kata\"],\"cpus\":"
             "16,"
             "\"devices\":[{\"pci\":\"0000:17:00.0\",\"class\":\"" H100 "\",\"memory_gb\":80,"
             "\"mig_enabled\":true}]}");
    add_node("{\"name\":\"g1\",\"site\":\"dc\",\"site_kind\":\"datacenter\",\"platform\":\"linux\","
             "\"owner\":"
             "\"ops\",\"mode\":\"container\",\"cpus\":8,\"devices\":[" DEV(
                     "0000:17:00.0", "nvidia-rtx-4090", 24) "]}");
    add_node("{\"name\":\"a1\",\"site\":\"dc\",\"site_kind\":\"datacenter\",\"platform\":\"linux\","
             "\"owner\":"
             "\"ops\",\"mode\":\"container\",\"cpus\":8,\"devices\":[" DEV("0000:17:00.0", H100,
                                                                           80) "]}");
    add_node("{\"name\":\"mac1\",\"site\":\"home\",\"site_kind\":\"lab\",\"platform\":\"macos\","
             "\"owner\":"
             "\"amy\",\"cpus\":8,\"apple_unified_memory_gb\":64,\"apple_usable_memory_gb\":48}");
}

static void people(void) {
    static const char *const roles[] = {"user", "trusted"};
    for (int i = 0; i < N_USERS; i++) {
        snprintf(users[i].name, sizeof(users[i].name), "u%d", i);
        users[i].token = ts_token(&ts, users[i].name, roles[below(2)], NULL);
    }
    strcpy(users[N_USERS].name, "ops");
    users[N_USERS].token = ts_token(&ts, "ops", "owner", "c1,v1,m1,g1,a1");
    strcpy(users[N_USERS + 1].name, "amy");
    users[N_USERS + 1].token = ts_token(&ts, "amy", "owner", "mac1");
    admin_token = ts.admin;
    agent_token = ts_token(&ts, "a1", "node", "a1");
}

static User *user_named(const char *name) {
    for (int i = 0; i < N_USERS + 2; i++)
        if (!strcmp(users[i].name, name))
            return &users[i];
    return NULL;
}

static void heartbeat(void) {
    json_t *ans = NULL;
    long st =
            ts_call(&ts, agent_token, "POST", "/v1/nodes/a1/heartbeat", "{\"interval_s\":1}", &ans);
    cr_assert_eq(st, 200, "heartbeat: %ld %s", st, str(ans, "message"));
    json_decref(ans);
}

static bool node_unreachable(const char *node) {
    char path[64];
    snprintf(path, sizeof(path), "/v1/nodes/%s", node);
    json_t *n = NULL;
    cr_assert_eq(ts_call(&ts, admin_token, "GET", path, NULL, &n), 200);
    bool u = json_is_true(json_object_get(n, "unreachable"));
    json_decref(n);
    return u;
}

/* ---- steps ---- */

static const char *const classes[] = {
        H100,
        H100,
        "nvidia-h100-80gb-mig-1g.10gb",
        "nvidia-h100-80gb-mig-3g.40gb",
        "nvidia-rtx-4090",
        "apple-silicon-64gb",
        "cpu",
        "nvidia-h200-141gb",
        "nvidia-h100-80gb-vgpu",
        "nvida-h100",
};
static const char *const kinds[] = {"container", "notebook", "endpoint", "vm"};

static void step_submit(void) {
    User *u = &users[below(N_USERS + 2)];
    const char *cls = classes[below(sizeof(classes) / sizeof(classes[0]))];
    const char *kind = kinds[below(4)];
    json_t *body = json_pack("{s:s, s:s}", "kind", kind, "class", cls);
    unsigned count = below(8) == 0 ? 5 : 1 + below(2);
    json_object_set_new(body, "count", json_integer(count));
    if (!strcmp(kind, "vm") && !strncmp(cls, "apple", 5))
        json_object_set_new(body, "guest_os", json_string("macos"));
    /* R2e: a time slice is one whole GPU of a container (a VM's, several, or a MIG slice are
     * refused, 400). */
    if (below(4) == 0 && count == 1 && strcmp(kind, "vm") != 0 && !strstr(cls, "-mig-"))
        json_object_set_new(body, "share", json_true());
    if (below(3) == 0 && strcmp(cls, "cpu") != 0) {
        /* A fallback is another class than the first choice (R13). */
        json_object_set_new(body, "fallback",
                            json_pack("[s]", below(2) || !strcmp(cls, H100) ? "cpu" : H100));
        json_object_set_new(body, "wait_s", json_integer(below(2)));
    }
    if (below(5) == 0)
        json_object_set_new(body, "wait_for_nodes", json_true());
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    json_t *ans = NULL;
    long st = ts_call(&ts, u->token, "POST", "/v1/requests", text, &ans);
    bool unknown = strstr(cls, "vgpu") || !strcmp(cls, "nvida-h100");
    if (unknown) {
        cr_assert_eq(st, 422, "%s: %ld %s", text, st, str(ans, "message"));
        cr_assert(json_array_size(json_object_get(ans, "closest")) > 0, "%s", str(ans, "message"));
        seen.unknown++;
    } else {
        cr_assert_eq(st, 201, "%s by %s: %ld %s", text, u->name, st, str(ans, "message"));
        const char *state = str(ans, "state");
        if (!strcmp(state, "refused"))
            cr_assert(in(str(ans, "reason_code"), refusals), "%s refused with %s: %s", text,
                      str(ans, "reason_code"), str(ans, "reason"));
        seen.refused_never += !strcmp(state, "refused") && in(str(ans, "reason_code"), never);
        seen.placed += !strcmp(state, "placed");
        seen.pending += !strcmp(state, "pending");
    }
    json_decref(ans);
    free(text);
}

/* A random request of the list in one of the states (NULL when there is none). */
static json_t *pick(json_t *all, const char *state) {
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(all); i++)
        n += !strcmp(str(json_array_get(all, i), "state"), state);
    if (!n)
        return NULL;
    size_t k = below((uint32_t)n);
    for (size_t i = 0; i < json_array_size(all); i++)
        if (!strcmp(str(json_array_get(all, i), "state"), state) && k-- == 0)
            return json_array_get(all, i);
    return NULL;
}

static void step_end(json_t *all, const char *state, const char *verb) {
    json_t *q = pick(all, state);
    if (!q)
        return;
    char path[96];
    snprintf(path, sizeof(path), "/v1/requests/%lld/%s",
             (long long)json_integer_value(json_object_get(q, "id")), verb);
    User *u = user_named(str(q, "user"));
    cr_assert_not_null(u);
    json_t *ans = NULL;
    long st = ts_call(&ts, u->token, "POST", path, NULL, &ans);
    /* A fallback or a release may have moved it on since the list: 409 is fine then. */
    cr_assert(st == 200 || st == 409, "%s: %ld %s", path, st, str(ans, "message"));
    seen.ended += st == 200;
    json_decref(ans);
}

static const char *const nodes[] = {"c1", "v1", "m1", "g1", "a1"};

static void step_cordon(void) {
    char path[64];
    snprintf(path, sizeof(path), "/v1/nodes/%s/%s", nodes[below(5)],
             below(2) ? "cordon" : "uncordon");
    json_t *ans = NULL;
    long st = ts_call(&ts, below(2) ? admin_token : user_named("ops")->token, "POST", path, NULL,
                      &ans);
    cr_assert_eq(st, 200, "%s: %ld %s", path, st, str(ans, "message"));
    json_decref(ans);
}

static void step_switch(void) {
    const char *node = below(2) ? "c1" : "v1";
    json_t *n = NULL;
    char path[64];
    snprintf(path, sizeof(path), "/v1/nodes/%s", node);
    cr_assert_eq(ts_call(&ts, admin_token, "GET", path, NULL, &n), 200);
    const char *to = !strcmp(str(n, "mode"), "container") ? "vm-passthrough" : "container";
    char body[96];
    snprintf(body, sizeof(body), "{\"mode\":\"%s\",\"drain\":\"evict\"}", to);
    json_decref(n);
    snprintf(path, sizeof(path), "/v1/nodes/%s/mode", node);
    json_t *ans = NULL;
    long st = ts_call(&ts, admin_token, "POST", path, body, &ans);
    cr_assert(st == 202 || st == 200 || st == 409, "%s %s: %ld %s", path, body, st,
              str(ans, "message"));
    seen.switched += st == 202 || st == 200; /* a datacenter switch may finish in its own call */
    json_decref(ans);
}

/* The agent of a1 stops reporting until the server marks the node unreachable, then reports
 * again. Polls with a generous deadline; never a fixed sleep. */
static void step_agent_loss_and_return(void) {
    time_t deadline = time(NULL) + 30;
    while (!node_unreachable("a1")) {
        cr_assert(time(NULL) < deadline, "node a1 was not marked unreachable");
        nanosleep(&(struct timespec){0, 200 * 1000 * 1000}, NULL);
    }
    heartbeat();
    cr_assert(!node_unreachable("a1"), "the agent's heartbeat brings the node back");
}

/* ---- the invariants after every step ---- */

static void check(int step) {
    json_t *inv = NULL;
    cr_assert_eq(ts_call(&ts, admin_token, "GET", "/v1/debug/invariants", NULL, &inv), 200);
    cr_assert(json_is_true(json_object_get(inv, "ok")), "step %d: %s", step, str(inv, "violation"));
    json_decref(inv);
    json_t *all = ts_list_all(&ts, admin_token, "/v1/requests", "requests");
    for (size_t i = 0; i < json_array_size(all); i++) {
        json_t *q = json_array_get(all, i);
        if (strcmp(str(q, "state"), "pending"))
            continue;
        json_t *spec = json_object_get(q, "request");
        const char *code = str(q, "reason_code");
        seen.waiting_checked++;
        bool asked = json_is_true(json_object_get(spec, "wait_for_nodes"));
        bool may_fall_back = json_array_size(json_object_get(spec, "fallback")) > 0;
        cr_assert(in(code, clearable) || (in(code, never) && (asked || may_fall_back)),
                  "step %d: request %lld (%s) waits with reason '%s' that nothing on this fleet "
                  "clears: %s",
                  step, (long long)json_integer_value(json_object_get(q, "id")),
                  json_dumps(spec, JSON_COMPACT), code, str(q, "reason"));
    }
    json_decref(all);
}

Test(random_api,
     r15_r18_random_users_requests_cordons_switches_and_agent_loss_keep_the_invariants) {
    const char *env = getenv("EINSORA_RANDOM_SEED");
    uint64_t seed = env && *env ? strtoull(env, NULL, 0) : DEFAULT_SEED;
    rng = seed ? seed : DEFAULT_SEED;
    cr_log_info("seed %#llx (EINSORA_RANDOM_SEED=%#llx repeats this run)", (unsigned long long)seed,
                (unsigned long long)seed);
    fleet();
    people();
    heartbeat();
    /* One loss of the agent, at a random step: it costs the server's grace period in time. */
    int loss_at = 20 + (int)below(STEPS - 40);
    size_t submitted = 0;
    for (int step = 0; step < STEPS; step++) {
        if (step != loss_at)
            heartbeat();
        uint32_t what = below(100);
        json_t *all = what >= 50 && what < 70
                              ? ts_list_all(&ts, admin_token, "/v1/requests", "requests")
                              : NULL;
        if (step == loss_at)
            step_agent_loss_and_return();
        else if (what < 50)
            step_submit(), submitted++;
        else if (what < 60)
            step_end(all, "pending", "cancel");
        else if (what < 70)
            step_end(all, "placed", "release");
        else if (what < 88)
            step_cordon();
        else
            step_switch();
        json_decref(all);
        check(step);
    }
    cr_log_info("submitted %zu: placed %u, pending %u, refused for good %u, unknown names %u; "
                "ended %u, "
                "switches %u, waiting reasons checked %u",
                submitted, seen.placed, seen.pending, seen.refused_never, seen.unknown, seen.ended,
                seen.switched, seen.waiting_checked);
    /* The walk did what it claims (a seed that does not is a poor default). */
    cr_assert_gt(submitted, STEPS / 4);
    cr_assert(seen.placed && seen.pending && seen.refused_never && seen.unknown && seen.ended &&
                      seen.switched && seen.waiting_checked > 0,
              "placed %u, pending %u, refused %u, unknown %u, ended %u, switched %u, checked %u",
              seen.placed, seen.pending, seen.refused_never, seen.unknown, seen.ended,
              seen.switched, seen.waiting_checked);
}
