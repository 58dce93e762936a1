/* test-api.c: the API end to end against the real server: lifecycle, who may do what, bad
 * input (each a 4xx that changes nothing), events, capacity, metrics, restart (R16). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "helpers.h"
#include "srv-helpers.h"
#include "util/macro.h"
#include "util/strutil.h"

static TestServer ts;

static void setup(void) {
    ts_start(&ts);
}

static void teardown(void) {
    ts_stop(&ts);
}

TestSuite(api, .init = setup, .fini = teardown, .timeout = 60);

static const char *str(json_t *j, const char *key) {
    const char *s = json_string_value(json_object_get(j, key));
    return s ? s : "";
}

static json_int_t num(json_t *j, const char *key) {
    return json_integer_value(json_object_get(j, key));
}

/* Number of requests the admin sees: "nothing changed" checks. */
static size_t request_count(void) {
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/requests", NULL, &j), 200);
    size_t n = json_array_size(json_object_get(j, "requests"));
    json_decref(j);
    return n;
}

static json_t *submit(const char *token, const char *body, long want) {
    json_t *j = NULL;
    long st = ts_call(&ts, token, "POST", "/v1/requests", body, &j);
    cr_assert_eq(st, want, "submit %s: %ld %s", body, st, str(j, "message"));
    return j;
}

Test(api, r16_lifecycle_pending_placed_active_released_with_events) {
    ts_add_h100_node(&ts, "n1", "alice", 2);
    char *alice = ts_token(&ts, "alice", "owner", "n1");
    char *agent = ts_token(&ts, "n1-agent", "node", "n1");
    json_t *q = submit(alice, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", 201);
    cr_assert_str_eq(str(q, "state"), "placed");
    json_t *pl = json_object_get(q, "placement");
    cr_assert_str_eq(str(pl, "node"), "n1");
    cr_assert_str_eq(str(pl, "method"), "container");
    json_int_t id = num(q, "id");
    json_decref(q);

    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%lld/activate", (long long)id);
    cr_assert_eq(ts_call(&ts, alice, "POST", path, NULL, NULL), 403, "only the agent confirms");
    cr_assert_eq(ts_call(&ts, agent, "POST", path, NULL, &q), 200);
    cr_assert_str_eq(str(q, "state"), "active");
    json_decref(q);
    snprintf(path, sizeof(path), "/v1/requests/%lld/release", (long long)id);
    cr_assert_eq(ts_call(&ts, alice, "POST", path, NULL, &q), 200);
    cr_assert_str_eq(str(q, "state"), "released");
    json_decref(q);
    cr_assert_eq(ts_call(&ts, alice, "POST", path, NULL, NULL), 409, "released twice");

    /* Every change is an event, with who did it. */
    json_t *ev = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/events?after=0", NULL, &ev), 200);
    const char *want[] = {"node.registered", "request.submitted", "request.placed",
                          "request.active", "request.released"};
    json_t *list = json_object_get(ev, "events");
    cr_assert_eq(json_array_size(list), 5);
    for (size_t i = 0; i < 5; i++)
        cr_assert_str_eq(str(json_array_get(list, i), "type"), want[i]);
    cr_assert_str_eq(str(json_array_get(list, 3), "actor"), "n1-agent");
    cr_assert_str_eq(str(json_array_get(list, 4), "actor"), "alice");
    json_decref(ev);
    free(alice);
    free(agent);
}

Test(api, waiting_request_shows_reason_and_queue_position_then_placed_on_release) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *alice = ts_token(&ts, "alice", "owner", "n1");
    json_t *a = submit(alice, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", 201);
    json_t *b = submit(alice, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", 201);
    cr_assert_str_eq(str(b, "state"), "pending");
    cr_assert_neq(str(b, "reason")[0], 0, "a waiting request says why");
    cr_assert_eq(num(b, "queue_position"), 1);
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%lld/release", (long long)num(a, "id"));
    cr_assert_eq(ts_call(&ts, alice, "POST", path, NULL, NULL), 200);
    json_t *q = NULL;
    snprintf(path, sizeof(path), "/v1/requests/%lld", (long long)num(b, "id"));
    cr_assert_eq(ts_call(&ts, alice, "GET", path, NULL, &q), 200);
    cr_assert_str_eq(str(q, "state"), "placed", "freed capacity goes to the waiting request");
    json_decref(q);
    json_decref(a);
    json_decref(b);
    free(alice);
}

Test(api, r16_idempotency_key_places_a_request_at_most_once) {
    ts_add_h100_node(&ts, "n1", "alice", 2);
    char *alice = ts_token(&ts, "alice", "owner", "n1");
    const char *body = "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}";
    json_t *a = NULL, *b = NULL;
    cr_assert_eq(ts_call_key(&ts, alice, "POST", "/v1/requests", body, "k1", &a), 201);
    cr_assert_eq(ts_call_key(&ts, alice, "POST", "/v1/requests", body, "k1", &b), 200);
    cr_assert_eq(num(a, "id"), num(b, "id"));
    cr_assert_eq(request_count(), 1);
    cr_assert_eq(ts_call_key(&ts, alice, "POST", "/v1/requests",
                             "{\"kind\":\"vm\",\"class\":\"nvidia-h100-80gb\"}", "k1", NULL),
                 422, "same key, different body: 422");
    cr_assert_eq(request_count(), 1);
    json_decref(a);
    json_decref(b);
    free(alice);
}

Test(api, cancel_pending_request_and_not_twice) {
    char *bob = ts_token(&ts, "bob", "user", NULL);
    /* No node yet: it waits only because it asks to wait for nodes (R18). */
    json_t *q = submit(bob,
                       "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\","
                       "\"wait_for_nodes\":true}",
                       201);
    cr_assert_str_eq(str(q, "state"), "pending");
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%lld/cancel", (long long)num(q, "id"));
    json_t *c = NULL;
    cr_assert_eq(ts_call(&ts, bob, "POST", path, NULL, &c), 200);
    cr_assert_str_eq(str(c, "state"), "cancelled");
    /* Not the stale "waits for nodes" sentence: who cancelled it. */
    cr_assert_str_eq(str(c, "reason"), "cancelled by bob");
    cr_assert_eq(ts_call(&ts, bob, "POST", path, NULL, NULL), 409);
    json_decref(q);
    json_decref(c);
    free(bob);
}

/* ---- bad input: each a 4xx with a message, nothing changed ---- */

static void expect_refused(const char *token, const char *method, const char *path,
                           const char *body, long status, const char *code) {
    size_t before = request_count();
    json_t *j = NULL;
    long st = ts_call(&ts, token, method, path, body, &j);
    cr_assert_eq(st, status, "%s %s: got %ld (%s)", method, path, st, str(j, "message"));
    cr_assert_str_eq(str(j, "code"), code);
    cr_assert_neq(str(j, "message")[0], 0, "an error says why");
    json_decref(j);
    cr_assert_eq(request_count(), before, "a refused call changes nothing");
}

/* R13, R17 and R2e: what a new request must say rightly. A VM's disk is one of the site's
 * images, never a host path, and it takes no command or env; a container's image is a
 * reference; a fallback names each class once, not the first choice, cpu
 * last; a time slice is one GPU of a container, never a VM's nor several; MLX takes no GGUF. */
Test(api, bad_input_r2e_r13_r14_r17_vm_images_fallbacks_shares_and_runtimes_are_refused) {
    static const char *const bodies[] = {
            "{\"kind\":\"vm\",\"class\":\"nvidia-h100-80gb\",\"share\":true}",
            "{\"kind\":\"endpoint\",\"class\":\"apple-silicon-64gb\",\"runtime\":\"mlx\","
            "\"model\":\"/models/llama-q4_k_m.GGUF\"}",
            "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\",\"count\":2,\"share\":true}",
            "{\"kind\":\"vm\",\"class\":\"nvidia-h100-80gb\",\"image\":\"/dev/sda\"}",
            "{\"kind\":\"vm\",\"class\":\"nvidia-h100-80gb\",\"image\":\"../x.qcow2\"}",
            /* R17: a VM boots its disk; a container image is a reference, never a flag. */
            "{\"kind\":\"vm\",\"class\":\"nvidia-h100-80gb\",\"command\":[\"x\"]}",
            "{\"kind\":\"vm\",\"class\":\"nvidia-h100-80gb\",\"env\":[\"A=1\"]}",
            "{\"kind\":\"container\",\"class\":\"cpu\",\"image\":\"--privileged\"}",
            "{\"kind\":\"container\",\"class\":\"cpu\",\"image\":\"../../etc\"}",
            "{\"kind\":\"container\",\"class\":\"cpu\",\"image\":\"a b\"}",
            "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\",\"fallback\":[\"cpu\","
            "\"nvidia-l40s\"],\"wait_s\":5}",
            "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\",\"fallback\":["
            "\"nvidia-h100-80gb\"],\"wait_s\":5}",
            "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\",\"fallback\":["
            "\"nvidia-l40s\",\"nvidia-l40s\"],\"wait_s\":5}",
    };
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++)
        expect_refused(ts.admin, "POST", "/v1/requests", bodies[i], 400, "bad_request");
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/requests",
                         "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\","
                         "\"fallback\":[\"cpu\",\"cpu\"],\"wait_s\":5}",
                         &j),
                 400);
    cr_expect(strstr(str(j, "message"), "names 'cpu' twice"), "a repeat, not an order: %s",
              str(j, "message"));
    json_decref(j);
    json_t *ok = submit(ts.admin,
                        "{\"kind\":\"vm\",\"class\":\"nvidia-h100-80gb\",\"image\":"
                        "\"ubuntu-24.04.qcow2\",\"wait_for_nodes\":true}",
                        201);
    json_decref(ok);
    ok = submit(ts.admin,
                "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\",\"image\":"
                "\"registry.example:5000/team/app:1.2@sha256:0a1b\",\"wait_for_nodes\":true}",
                201);
    json_decref(ok);
}

/* R2c: a capability the control plane does not act on would be kept and never honoured; one
 * listed twice is a typo. Both are refused, naming it. */
Test(api, bad_input_unknown_or_repeated_node_capabilities_are_refused) {
    static const char *const caps[] = {"[\"warp-drive\"]", "[\"kata\",\"kata\"]"};
    for (size_t i = 0; i < 2; i++) {
        char body[400];
        snprintf(body, sizeof(body),
                 "{\"name\":\"c%zu\",\"site\":\"lab1\",\"site_kind\":\"lab\",\"platform\":"
                 "\"linux\",\"owner\":\"ops\",\"cpus\":8,\"capabilities\":%s,\"devices\":[]}",
                 i, caps[i]);
        json_t *j = NULL;
        cr_expect_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes", body, &j), 400, "%s", caps[i]);
        cr_expect(strstr(str(j, "message"), i ? "listed twice" : "'warp-drive' is not one"), "%s",
                  str(j, "message"));
        json_decref(j);
    }
}

Test(api, bad_input_malformed_json_is_400) {
    expect_refused(ts.admin, "POST", "/v1/requests", "{\"kind\":", 400, "bad_request");
}

Test(api, bad_input_wrong_type_is_400) {
    expect_refused(ts.admin, "POST", "/v1/requests",
                   "{\"kind\":\"container\",\"class\":\"cpu\",\"count\":\"two\"}", 400,
                   "bad_request");
}

Test(api, bad_input_unknown_field_is_400) {
    expect_refused(ts.admin, "POST", "/v1/requests",
                   "{\"kind\":\"container\",\"class\":\"cpu\",\"colour\":1}", 400, "bad_request");
}

Test(api, bad_input_user_in_body_is_refused_identity_comes_from_token) {
    expect_refused(ts.admin, "POST", "/v1/requests",
                   "{\"kind\":\"container\",\"class\":\"cpu\",\"user\":\"alice\"}", 400,
                   "bad_request");
}

Test(api, bad_input_oversized_body_is_413) {
    size_t n = 70 * 1024;
    char *body = malloc(n + 1);
    memset(body, ' ', n);
    body[n] = 0;
    body[0] = '{';
    body[n - 1] = '}';
    expect_refused(ts.admin, "POST", "/v1/requests", body, 413, "too_large");
    free(body);
}

Test(api, bad_input_unknown_route_is_404) {
    expect_refused(ts.admin, "GET", "/v1/nope", NULL, 404, "not_found");
}

/* A name with bytes no name has (non-ASCII, a space) on a route that exists is the name's
 * fault, said as it is of "Cafe": 400 "not a valid user name", never 404 "No such endpoint". */
Test(api, bad_input_a_path_name_of_other_characters_is_400_not_404) {
    static const char *const cases[][3] = {
            {"PUT", "/v1/tenants/caf%C3%A9/trust", "'caf\xc3\xa9' is not a valid user name."},
            {"DELETE", "/v1/tenants/a%20b/trust", "'a b' is not a valid user name."},
            {"PUT", "/v1/tenants/Cafe/trust",
             "'Cafe' is not a valid user name (1 to 63 of a-z, 0-9, . _ -, starting with a letter "
             "or digit)."},
            {"GET", "/v1/nodes/caf%C3%A9", "'caf\xc3\xa9' is not a valid node name."},
            {"GET", "/v1/requests/%C3%A9", "'\xc3\xa9' is not a valid request id."},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *j = NULL;
        long st = ts_call(&ts, ts.admin, cases[i][0], cases[i][1], NULL, &j);
        cr_expect_eq(st, 400, "%s %s: %ld %s", cases[i][0], cases[i][1], st, str(j, "message"));
        cr_expect_str_eq(str(j, "message"), cases[i][2], "%s", cases[i][1]);
        json_decref(j);
    }
    /* A method the path does not answer is still a 405. */
    cr_expect_eq(ts_call(&ts, ts.admin, "GET", "/v1/tenants/caf%C3%A9/trust", NULL, NULL), 405);
}

/* Item k of a batch activation's answer: its status, and its request's state or error code. */
static void expect_item(json_t *ans, size_t k, const char *id, long status, const char *what) {
    json_t *it = json_array_get(json_object_get(ans, "results"), k);
    cr_assert_not_null(it, "item %zu missing", k);
    cr_expect_str_eq(str(it, "id"), id, "item %zu", k);
    cr_expect_eq(num(it, "status"), status, "item %zu (%s)", k, id);
    json_t *sub = json_object_get(it, status < 300 ? "request" : "error");
    cr_expect_str_eq(str(sub, status < 300 ? "state" : "code"), what, "item %zu (%s)", k, id);
}

/* An agent that started several workloads confirms them in one call, each as its own
 * activation would (R16: each becomes active and durable; one not on this node, not placed,
 * or unknown is refused alone), and bad bodies and other nodes' agents change nothing. */
Test(api, r16_an_agent_confirms_several_workloads_in_one_call) {
    ts_add_h100_node(&ts, "n1", "alice", 2);
    ts_add_h100_node(&ts, "n2", "alice", 1);
    char *alice = ts_token(&ts, "alice", "owner", "n1,n2");
    char *agent = ts_token(&ts, "n1-agent", "node", "n1");
    char ids[4][24], *on[4];
    for (int i = 0; i < 4; i++) {
        json_t *q = submit(alice, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", 201);
        snprintf(ids[i], sizeof(ids[i]), "%lld", (long long)num(q, "id"));
        const char *node = str(json_object_get(q, "placement"), "node");
        on[i] = *node ? strdup(node) : NULL;
        json_decref(q);
    }
    /* Best fit: n2's one free GPU first, then n1's two; the fourth waits. */
    cr_assert(on[0] && on[1] && on[2] && !on[3]);
    cr_assert_str_eq(on[0], "n2");
    char body[512];
    snprintf(body, sizeof(body),
             "{\"requests\":[{\"id\":\"%s\"},{\"id\":\"%s\",\"url\":\"http://n1:8888/\"},"
             "{\"id\":\"%s\"},{\"id\":\"%s\"},{\"id\":\"999999\"}]}",
             ids[1], ids[2], ids[0], ids[3]);
    json_t *ans = NULL;
    cr_assert_eq(ts_call(&ts, agent, "POST", "/v1/nodes/n1/activate", body, &ans), 200);
    expect_item(ans, 0, ids[1], 200, "active");
    expect_item(ans, 1, ids[2], 200, "active");
    expect_item(ans, 2, ids[0], 404, "not_found"); /* n2's: not this agent's to see */
    expect_item(ans, 3, ids[3], 404, "not_found"); /* pending: on no node */
    expect_item(ans, 4, "999999", 404, "not_found");
    cr_expect_eq(json_array_size(json_object_get(ans, "results")), 5);
    json_decref(ans);
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%s", ids[2]);
    cr_assert_eq(ts_call(&ts, alice, "GET", path, NULL, &ans), 200);
    cr_expect_str_eq(str(json_object_get(ans, "placement"), "url"), "http://n1:8888/");
    json_decref(ans);
    /* An admin may confirm for the node, but only what runs there. */
    snprintf(body, sizeof(body), "{\"requests\":[{\"id\":\"%s\"},{\"id\":\"%s\"}]}", ids[0],
             ids[1]);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes/n1/activate", body, &ans), 200);
    expect_item(ans, 0, ids[0], 409, "conflict");
    expect_item(ans, 1, ids[1], 409, "conflict"); /* active already */
    json_decref(ans);
    snprintf(path, sizeof(path), "/v1/requests/%s", ids[0]);
    cr_assert_eq(ts_call(&ts, alice, "GET", path, NULL, &ans), 200);
    cr_expect_str_eq(str(ans, "state"), "placed", "the refused item changed nothing");
    json_decref(ans);

    /* Whole calls refused: nothing changes. */
    snprintf(body, sizeof(body), "{\"requests\":[{\"id\":\"%s\"}]}", ids[0]);
    cr_expect_eq(ts_call(&ts, agent, "POST", "/v1/nodes/n2/activate", body, NULL), 403);
    cr_expect_eq(ts_call(&ts, alice, "POST", "/v1/nodes/n2/activate", body, NULL), 403);
    cr_expect_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes/nope/activate", body, NULL), 404);
    static const char *const bad[] = {"{}",
                                      "[]",
                                      "{\"requests\":[]}",
                                      "{\"requests\":{}}",
                                      "{\"requests\":[1]}",
                                      "{\"requests\":[{}]}",
                                      "{\"requests\":[{\"id\":12}]}",
                                      "{\"requests\":[{\"id\":\"0\"}]}",
                                      "{\"requests\":[{\"id\":\"1x\"}]}",
                                      "{\"requests\":[{\"id\":\"1\",\"x\":1}]}",
                                      "{\"requests\":[{\"id\":\"1\",\"url\":\"ftp://a\"}]}",
                                      "{\"requests\":[{\"id\":\"1\"},{\"id\":\"1\"}]}",
                                      "{\"requests\":[],\"more\":1}"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        cr_expect_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes/n2/activate", bad[i], &ans), 400,
                     "%s", bad[i]);
        cr_expect(str(ans, "message") && *str(ans, "message"), "%s: says why", bad[i]);
        json_decref(ans);
    }
    StrBuf many = {0};
    strbuf_puts(&many, "{\"requests\":[");
    for (int i = 1; i <= 65; i++)
        strbuf_printf(&many, "%s{\"id\":\"%d\"}", i > 1 ? "," : "", i);
    strbuf_puts(&many, "]}");
    cr_expect_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes/n2/activate", strbuf_cstr(&many), NULL),
                 400, "65 items");
    strbuf_done(&many);
    snprintf(path, sizeof(path), "/v1/requests/%s", ids[0]);
    cr_assert_eq(ts_call(&ts, alice, "GET", path, NULL, &ans), 200);
    cr_expect_str_eq(str(ans, "state"), "placed");
    json_decref(ans);
    for (int i = 0; i < 4; i++)
        free(on[i]);
    free(alice);
    free(agent);
}

Test(api, bad_input_wrong_method_is_405) {
    expect_refused(ts.admin, "DELETE", "/v1/requests", NULL, 405, "method_not_allowed");
}

Test(api, bad_input_missing_token_is_401) {
    expect_refused(NULL, "POST", "/v1/requests", "{\"kind\":\"container\",\"class\":\"cpu\"}", 401,
                   "unauthorized");
}

Test(api, bad_input_bad_token_is_401) {
    expect_refused("ens_not-a-token", "GET", "/v1/requests", NULL, 401, "unauthorized");
}

Test(api, other_users_request_is_404_to_show_and_cancel) {
    char *bob = ts_token(&ts, "bob", "user", NULL), *eve = ts_token(&ts, "eve", "user", NULL);
    json_t *q = submit(bob, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", 201);
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%lld", (long long)num(q, "id"));
    expect_refused(eve, "GET", path, NULL, 404, "not_found");
    snprintf(path, sizeof(path), "/v1/requests/%lld/cancel", (long long)num(q, "id"));
    expect_refused(eve, "POST", path, NULL, 404, "not_found");
    json_t *list = NULL;
    cr_assert_eq(ts_call(&ts, eve, "GET", "/v1/requests", NULL, &list), 200);
    cr_assert_eq(json_array_size(json_object_get(list, "requests")), 0, "eve lists only her own");
    json_decref(list);
    json_decref(q);
    free(bob);
    free(eve);
}

Test(api, node_token_cannot_submit_and_reports_only_for_its_node) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *agent = ts_token(&ts, "n1-agent", "node", "n1");
    expect_refused(agent, "POST", "/v1/requests", "{\"kind\":\"container\",\"class\":\"cpu\"}", 403,
                   "forbidden");
    const char *n2 = "{\"name\":\"n2\",\"site\":\"dc1\",\"site_kind\":\"datacenter\",\"platform\":"
                     "\"linux\",\"owner\":\"alice\",\"mode\":\"container\"}";
    expect_refused(agent, "PUT", "/v1/nodes/n2", n2, 403, "forbidden");
    const char *n1 = "{\"name\":\"n1\",\"site\":\"dc1\",\"site_kind\":\"datacenter\",\"platform\":"
                     "\"linux\",\"owner\":\"alice\",\"mode\":\"container\",\"cpus\":8}";
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, agent, "PUT", "/v1/nodes/n1", n1, &j), 200, "%s", str(j, "message"));
    cr_assert_eq(num(j, "cpus"), 8, "the push replaced the idle node's inventory");
    json_decref(j);
    free(agent);
}

Test(api, user_cannot_cordon_owner_can) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *alice = ts_token(&ts, "alice", "owner", "n1"), *bob = ts_token(&ts, "bob", "user", NULL);
    expect_refused(bob, "POST", "/v1/nodes/n1/cordon", NULL, 403, "forbidden");
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, alice, "POST", "/v1/nodes/n1/cordon", NULL, &j), 200);
    cr_assert(json_is_true(json_object_get(j, "cordoned")));
    json_decref(j);
    json_t *q = submit(alice, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", 201);
    cr_assert_str_eq(str(q, "state"), "pending", "no placement on a cordoned node");
    json_decref(q);
    cr_assert_eq(ts_call(&ts, alice, "POST", "/v1/nodes/n1/uncordon", NULL, NULL), 200);
    cr_assert_eq(ts_call(&ts, alice, "GET", "/v1/requests/1", NULL, &q), 200);
    cr_assert_str_eq(str(q, "state"), "placed", "uncordon offers the node to the queue");
    json_decref(q);
    free(alice);
    free(bob);
}

Test(api, r10_owner_only_class_enforced_from_token_not_body) {
    const char *mac = "{\"name\":\"mac1\",\"site\":\"home\",\"site_kind\":\"solo\",\"platform\":"
                      "\"macos\",\"owner\":\"alice\",\"cpus\":8,\"apple_unified_memory_gb\":64,"
                      "\"apple_usable_memory_gb\":48}";
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes", mac, NULL), 201);
    char *alice = ts_token(&ts, "alice", "user", NULL), *bob = ts_token(&ts, "bob", "user", NULL);
    const char *body = "{\"kind\":\"endpoint\",\"class\":\"apple-silicon-64gb\"}";
    json_t *b = submit(bob, body, 201);
    cr_assert_str_neq(str(b, "state"), "placed", "a stranger never gets an owner-only class");
    json_t *a = submit(alice, body, 201);
    cr_assert_str_eq(str(a, "state"), "placed", "%s", str(a, "reason"));
    cr_assert_str_eq(str(json_object_get(a, "placement"), "endpoint_runtime"), "mlx");
    json_decref(a);
    json_decref(b);
    free(alice);
    free(bob);
}

/* R2c: a node's MIG instance without its start is a 400 naming the field (openapi.yaml:
 * required [profile, start]), and no node is made. */
Test(api, r2c_bad_input_a_mig_instance_without_its_start_is_400) {
    const char *body = "{\"name\":\"mig1\",\"site\":\"dc1\",\"site_kind\":\"datacenter\","
                       "\"platform\":\"linux\",\"owner\":\"ops\",\"devices\":[{\"pci\":"
                       "\"0000:01:00.0\",\"class\":\"nvidia-a100-80gb\",\"memory_gb\":80,"
                       "\"mig\":[{\"profile\":\"1g.10gb\"}]}]}";
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes", body, &j), 400);
    cr_assert_str_eq(str(j, "message"), "Field 'start' is required.");
    json_decref(j);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/mig1", NULL, NULL), 404);
}

static void register_mac(const char *name, unsigned unified, unsigned usable) {
    char body[320];
    snprintf(body, sizeof(body),
             "{\"name\":\"%s\",\"site\":\"home\",\"site_kind\":\"solo\",\"platform\":"
             "\"macos\",\"owner\":\"alice\",\"cpus\":8,\"apple_unified_memory_gb\":%u,"
             "\"apple_usable_memory_gb\":%u}",
             name, unified, usable);
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes", body, &j), 201, "%s",
                 str(j, "message"));
    json_decref(j);
}

static json_t *apple_gpu_of(const char *name) {
    char path[64];
    snprintf(path, sizeof(path), "/v1/nodes/%s", name);
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", path, NULL, &j), 200);
    json_t *g = json_incref(json_object_get(j, "apple_gpu"));
    cr_assert(g, "a Mac's node shows its GPU");
    json_decref(j);
    return g;
}

/* R10, R8: a Mac's one GPU is shown with its class, state and use; a Mac whose headroom
 * leaves no GPU memory offers nothing (0 is a report, not "unknown", which once meant the
 * whole unified memory), and one no class matches is shown unclassified, never dropped. */
Test(api, r10_a_macs_gpu_is_shown_and_one_with_no_usable_memory_offers_nothing) {
    register_mac("mac-ok", 64, 48);
    register_mac("mac-none", 16, 0);
    register_mac("mac-8", 8, 4);
    json_t *g = apple_gpu_of("mac-ok");
    cr_expect_str_eq(str(g, "class"), "apple-silicon-64gb");
    cr_expect_str_eq(str(g, "state"), "free");
    cr_expect_eq(num(g, "usable_memory_gb"), 48);
    json_decref(g);
    g = apple_gpu_of("mac-none");
    cr_expect_str_eq(str(g, "state"), "quarantined");
    cr_expect(strstr(str(g, "quarantined"), "no GPU memory to offer"), "%s", str(g, "quarantined"));
    cr_expect_eq(num(g, "usable_memory_gb"), 0);
    json_decref(g);
    g = apple_gpu_of("mac-8");
    cr_expect(json_is_true(json_object_get(g, "unclassified")), "an 8 GB Mac matches no class");
    json_decref(g);
    /* Described without its usable memory: macOS's default wired limit less the default
     * headroom, never the whole unified memory (R10). */
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes",
                         "{\"name\":\"mac-unsaid\",\"site\":\"home\",\"site_kind\":\"solo\","
                         "\"platform\":\"macos\",\"owner\":\"alice\",\"cpus\":8,"
                         "\"apple_unified_memory_gb\":64}",
                         NULL),
                 201);
    g = apple_gpu_of("mac-unsaid");
    cr_expect_eq(num(g, "usable_memory_gb"), 40, "3/4 of 64 GB less 8 GB of headroom");
    json_decref(g);
    char *alice = ts_token(&ts, "alice", "user", NULL);
    json_t *a = submit(alice, "{\"kind\":\"endpoint\",\"class\":\"apple-silicon-16gb\"}", 201);
    cr_expect_str_neq(str(a, "state"), "placed", "a Mac with no usable memory takes nothing");
    json_decref(a);
    json_t *cap = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/capacity?class=apple-silicon-16gb", NULL, &cap),
                 200);
    json_t *row = json_array_get(json_object_get(cap, "classes"), 0);
    cr_expect_eq(num(row, "quarantined"), 1, "counted quarantined (R6)");
    cr_expect_eq(num(row, "free"), 0);
    json_decref(cap);
    free(alice);
}

Test(api, r13_fallback_deadline_fires_from_server_clock) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *alice = ts_token(&ts, "alice", "owner", "n1");
    json_t *a = submit(alice, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", 201);
    json_t *b = submit(alice,
                       "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\","
                       "\"fallback\":[\"cpu\"],\"wait_s\":1}",
                       201);
    cr_assert_str_eq(str(b, "state"), "pending");
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%lld", (long long)num(b, "id"));
    json_t *q = NULL;
    for (int i = 0; i < 40; i++) {
        json_decref(q);
        cr_assert_eq(ts_call(&ts, alice, "GET", path, NULL, &q), 200);
        if (!strcmp(str(q, "state"), "placed"))
            break;
        usleep(100000);
    }
    cr_assert_str_eq(str(q, "state"), "placed", "the fallback fired without any API call");
    cr_assert_str_eq(str(json_object_get(q, "placement"), "class"), "cpu");
    json_decref(q);
    json_decref(a);
    json_decref(b);
    free(alice);
}

typedef struct Delayed {
    char *token;
} Delayed;

static void *submit_later(void *p) {
    usleep(300000);
    json_decref(submit(((Delayed *)p)->token, "{\"kind\":\"container\",\"class\":\"cpu\"}", 201));
    return NULL;
}

Test(api, events_long_poll_wakes_on_change_and_filters_by_user) {
    char *bob = ts_token(&ts, "bob", "user", NULL), *eve = ts_token(&ts, "eve", "user", NULL);
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, bob, "GET", "/v1/events?after=0", NULL, &j), 200);
    json_int_t cursor = num(j, "next");
    json_decref(j);
    Delayed d = {bob};
    pthread_t t;
    pthread_create(&t, NULL, submit_later, &d);
    char path[96];
    snprintf(path, sizeof(path), "/v1/events?after=%lld&wait=20", (long long)cursor);
    cr_assert_eq(ts_call(&ts, bob, "GET", path, NULL, &j), 200);
    pthread_join(t, NULL);
    cr_assert_gt(json_array_size(json_object_get(j, "events")), 0, "the long-poll returned events");
    cr_assert_gt(num(j, "next"), cursor, "the cursor moved on");
    json_decref(j);
    cr_assert_eq(ts_call(&ts, eve, "GET", "/v1/events?after=0", NULL, &j), 200);
    cr_assert_eq(json_array_size(json_object_get(j, "events")), 0, "eve sees none of bob's events");
    json_decref(j);
    cr_assert_eq(ts_call(&ts, bob, "GET", "/v1/events?after=x", NULL, NULL), 400);
    /* A cursor this feed never gave is refused, naming the newest, not waited on. */
    cr_assert_eq(ts_call(&ts, bob, "GET", "/v1/events?after=0", NULL, &j), 200);
    json_int_t head = num(j, "next");
    json_decref(j);
    snprintf(path, sizeof(path), "/v1/events?after=%lld&wait=20", (long long)head + 1000);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", path, NULL, &j), 400);
    cr_expect(strstr(str(j, "message"), "past the newest event"), "%s", str(j, "message"));
    cr_expect_geq(num(j, "newest"), head);
    json_decref(j);
    free(bob);
    free(eve);
}

Test(api, r6_capacity_per_class_mode_site_and_node_resources) {
    ts_add_h100_node(&ts, "n1", "alice", 4);
    char *alice = ts_token(&ts, "alice", "owner", "n1");
    json_decref(submit(alice, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\",\"count\":3}",
                       201));
    json_t *j = NULL;
    cr_assert_eq(
            ts_call(&ts, alice, "GET", "/v1/capacity?class=nvidia-h100-80gb&site=dc1", NULL, &j),
            200);
    json_t *rows = json_object_get(j, "classes");
    cr_assert_eq(json_array_size(rows), 1);
    json_t *r = json_array_get(rows, 0);
    cr_assert_str_eq(str(r, "mode"), "container");
    cr_assert_eq(num(r, "total"), 4);
    cr_assert_eq(num(r, "allocated"), 3);
    cr_assert_eq(num(r, "free"), 1);
    cr_assert_str_eq(str(r, "resource"), "nvidia.com/gpu");
    json_t *n = json_array_get(json_object_get(j, "nodes"), 0);
    cr_assert_eq(num(json_object_get(n, "resources"), "nvidia.com/gpu"), 4);
    json_decref(j);
    free(alice);
}

Test(api, metrics_and_probes_answer) {
    json_decref(submit(ts.admin, "{\"kind\":\"container\",\"class\":\"cpu\"}", 201));
    cr_assert_eq(ts_call(&ts, NULL, "GET", "/healthz", NULL, NULL), 200);
    cr_assert_eq(ts_call(&ts, NULL, "GET", "/readyz", NULL, NULL), 200);
    Client *c = NULL;
    Error err = {0};
    cr_assert_eq(client_new(ts.url, NULL, &c, &err), 0);
    long st;
    char *text = NULL;
    cr_assert_eq(client_call_raw(c, "GET", "/metrics", NULL, 0, NULL, &st, &text, &err), 0);
    client_free(c);
    cr_assert_eq(st, 200);
    const char *families[] = {"einsora_capacity_units{", "einsora_queue_depth ",
                              "einsora_queue_wait_seconds_bucket", "einsora_decisions_total{",
                              "einsora_api_request_seconds_bucket{route=\"POST /v1/requests\""};
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
        cr_assert(strstr(text, families[i]), "metrics lack %s", families[i]);
    free(text);
}

Test(api, r16_restart_restores_acknowledged_state_and_invariants_hold) {
    ts_add_h100_node(&ts, "n1", "alice", 2);
    char *alice = ts_token(&ts, "alice", "owner", "n1");
    json_t *a = submit(alice, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\",\"count\":2}",
                       201);
    json_t *b = submit(alice, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", 201);
    ts_kill(&ts, true);
    ts_spawn(&ts);
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, alice, "GET", "/v1/requests/1", NULL, &j), 200);
    cr_assert_str_eq(str(j, "state"), "placed");
    cr_assert(json_equal(json_object_get(j, "placement"), json_object_get(a, "placement")));
    json_decref(j);
    cr_assert_eq(ts_call(&ts, alice, "GET", "/v1/requests/2", NULL, &j), 200);
    cr_assert_str_eq(str(j, "state"), "pending");
    cr_assert_eq(num(j, "queue_position"), 1);
    json_decref(j);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/debug/invariants", NULL, &j), 200);
    cr_assert(json_is_true(json_object_get(j, "ok")), "%s", str(j, "violation"));
    /* R15: a debug build's server (this suite's) also checks after every change. */
    cr_expect_eq(json_is_true(json_object_get(j, "after_every_change")), EINSORA_DEBUG_CHECKS == 1);
    json_decref(j);
    /* The restored queue still works: releasing places the waiting request. */
    cr_assert_eq(ts_call(&ts, alice, "POST", "/v1/requests/1/release", NULL, NULL), 200);
    cr_assert_eq(ts_call(&ts, alice, "GET", "/v1/requests/2", NULL, &j), 200);
    cr_assert_str_eq(str(j, "state"), "placed");
    json_decref(j);
    json_decref(a);
    json_decref(b);
    free(alice);
}

/* An agent that confirms a notebook or an endpoint says where it answers ("url"), which the
 * stored placement keeps: a restart must restore that request like any other, url and all. */
Test(api, r16_a_workload_confirmed_with_its_url_survives_a_restart) {
    ts_add_h100_node(&ts, "n1", "alice", 2);
    char *alice = ts_token(&ts, "alice", "owner", "n1");
    char *agent = ts_token(&ts, "n1-agent", "node", "n1");
    json_t *a = submit(alice, "{\"kind\":\"notebook\",\"class\":\"nvidia-h100-80gb\"}", 201);
    json_t *b = submit(alice, "{\"kind\":\"endpoint\",\"class\":\"nvidia-h100-80gb\"}", 201);
    cr_assert_eq(ts_call(&ts, agent, "POST", "/v1/requests/1/activate",
                         "{\"url\":\"http://n1:8888/\"}", NULL),
                 200);
    cr_assert_eq(ts_call(&ts, agent, "POST", "/v1/nodes/n1/activate",
                         "{\"requests\":[{\"id\":\"2\",\"url\":\"http://n1:8000/v1\"}]}", NULL),
                 200);
    ts_kill(&ts, true);
    ts_spawn(&ts);
    static const char *const want[] = {"http://n1:8888/", "http://n1:8000/v1"};
    for (int i = 0; i < 2; i++) {
        char path[32];
        json_t *j = NULL;
        snprintf(path, sizeof(path), "/v1/requests/%d", i + 1);
        cr_assert_eq(ts_call(&ts, alice, "GET", path, NULL, &j), 200);
        cr_expect_str_eq(str(j, "state"), "active");
        cr_expect_str_eq(str(json_object_get(j, "placement"), "url"), want[i]);
        json_decref(j);
        /* The CLI shows it where a person reads, not only under -o json. */
        char *out = NULL, id[8];
        snprintf(id, sizeof(id), "%d", i + 1);
        cr_assert_eq(run_einsora(&out, NULL, "request", "show", id, "--server", ts.url, "--token",
                                 alice, NULL),
                     0);
        cr_expect(strstr(out, want[i]) && strstr(out, "active on n1"), "%s", out);
        free(out);
    }
    /* It still ends like any other: its GPU is free for the next request. */
    cr_assert_eq(ts_call(&ts, alice, "POST", "/v1/requests/1/release", NULL, NULL), 200);
    /* Its placement sentence no longer holds; who ended it does, across a restart too. */
    ts_kill(&ts, true);
    ts_spawn(&ts);
    json_t *r = NULL;
    cr_assert_eq(ts_call(&ts, alice, "GET", "/v1/requests/1", NULL, &r), 200);
    cr_expect_str_eq(str(r, "state"), "released");
    cr_expect_str_eq(str(r, "reason"), "released by alice");
    cr_expect(!json_object_get(r, "reason_code"), "no waiting reason left");
    json_decref(r);
    json_t *c = submit(alice, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", 201);
    cr_expect_str_eq(str(c, "state"), "placed");
    json_decref(a);
    json_decref(b);
    json_decref(c);
    free(alice);
    free(agent);
}

/* Where a request runs is kept beside its placement's text and rebuilt from the stored record
 * on a restart: every reader that asks "on which node, which devices" must answer the same
 * after a hard restart as before it. The list's node filter, the node agent's view of the
 * request, the node's work list, and a mode switch, which must drain the GPU work placed there
 * and nothing on another node. */
static void check_where_it_runs(const char *on, const char *other, json_t *placement) {
    char path[96];
    json_t *j = NULL;
    snprintf(path, sizeof(path), "/v1/requests?node=%s", on);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", path, NULL, &j), 200);
    cr_expect_eq(json_array_size(json_object_get(j, "requests")), 1, "listed on its node");
    json_decref(j);
    snprintf(path, sizeof(path), "/v1/requests?node=%s", other);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", path, NULL, &j), 200);
    cr_expect_eq(json_array_size(json_object_get(j, "requests")), 0, "not on the other node");
    json_decref(j);
    char *agent = ts_token(&ts, "agent", "node", on), *stranger = ts_token(&ts, "x", "node", other);
    cr_expect_eq(ts_call(&ts, agent, "GET", "/v1/requests/1", NULL, NULL), 200);
    cr_expect_eq(ts_call(&ts, stranger, "GET", "/v1/requests/1", NULL, NULL), 404);
    snprintf(path, sizeof(path), "/v1/nodes/%s/work", on);
    cr_assert_eq(ts_call(&ts, agent, "GET", path, NULL, &j), 200);
    json_t *work = json_object_get(j, "workloads");
    cr_assert_eq(json_array_size(work), 1, "the node's work lists it");
    cr_expect(json_equal(json_object_get(json_array_get(work, 0), "placement"), placement),
              "with its placement as answered");
    json_decref(j);
    free(agent);
    free(stranger);
}

static const char *node_switch_step(const char *node) {
    static char step[32];
    char path[64];
    json_t *n = NULL;
    snprintf(path, sizeof(path), "/v1/nodes/%s", node);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", path, NULL, &n), 200);
    snprintf(step, sizeof(step), "%s", strempty(str(json_object_get(n, "switch"), "step")));
    json_decref(n);
    return step;
}

/* R4: a switch holds its own cordon from its first step to its last. An uncordon while it
 * drains would let new work land on the node it waits to empty: refused, naming the step. A
 * cordon asked meanwhile is the operator's own, and outlives the switch. */
Test(api, r4_uncordon_during_a_switch_is_refused_and_a_cordon_outlives_it) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *alice = ts_token(&ts, "alice", "owner", "n1");
    json_t *a = submit(alice, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", 201);
    long st = ts_call(&ts, alice, "POST", "/v1/nodes/n1/mode",
                      "{\"mode\":\"vm-passthrough\",\"drain\":\"wait\"}", NULL);
    cr_assert(st == 200 || st == 202, "%ld", st);
    cr_assert_str_eq(node_switch_step("n1"), "drain");
    json_t *e = NULL;
    cr_assert_eq(ts_call(&ts, alice, "POST", "/v1/nodes/n1/uncordon", NULL, &e), 409);
    cr_expect(strstr(str(e, "message"), "switching to vm-passthrough (step: drain)"), "%s",
              str(e, "message"));
    json_decref(e);
    json_t *b = submit(alice, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", 201);
    cr_expect_str_neq(str(b, "state"), "placed", "nothing new lands on a node being drained");
    /* The operator cordons it too, then the drain ends: the switch finishes, the node stays
     * cordoned by the operator's word. */
    cr_assert_eq(ts_call(&ts, alice, "POST", "/v1/nodes/n1/cordon", NULL, NULL), 200);
    cr_assert_eq(ts_call(&ts, alice, "POST", "/v1/requests/1/release", NULL, NULL), 200);
    cr_assert_str_eq(node_switch_step("n1"), "done");
    json_t *n = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/n1", NULL, &n), 200);
    cr_expect(json_is_true(json_object_get(n, "cordoned")), "the operator's cordon stays");
    json_decref(n);
    json_decref(a);
    json_decref(b);
    free(alice);
}

Test(api, r16_r4_where_a_request_runs_reads_the_same_after_a_restart) {
    ts_add_h100_node(&ts, "n1", "alice", 2);
    ts_add_h100_node(&ts, "n2", "alice", 2);
    char *alice = ts_token(&ts, "alice", "owner", "n1,n2");
    json_t *a = submit(alice, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", 201);
    json_t *placement = json_object_get(a, "placement");
    const char *on = str(placement, "node");
    cr_assert(STREQ(on, "n1") || STREQ(on, "n2"), "placed on %s", on);
    const char *other = STREQ(on, "n1") ? "n2" : "n1";
    check_where_it_runs(on, other, placement);
    ts_kill(&ts, true);
    ts_spawn(&ts);
    check_where_it_runs(on, other, placement);
    /* A switch of the other node has nothing to drain; one of its node waits for it. */
    char path[64];
    json_t *node = NULL;
    const char *wait = "{\"mode\":\"vm-passthrough\",\"drain\":\"wait\"}";
    snprintf(path, sizeof(path), "/v1/nodes/%s/mode", other);
    long st = ts_call(&ts, ts.admin, "POST", path, wait, NULL);
    cr_assert(st == 200 || st == 202, "%ld", st);
    snprintf(path, sizeof(path), "/v1/nodes/%s/mode", on);
    st = ts_call(&ts, ts.admin, "POST", path, wait, NULL);
    cr_assert(st == 200 || st == 202, "%ld", st);
    snprintf(path, sizeof(path), "/v1/nodes/%s", on);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", path, NULL, &node), 200);
    json_t *sw = json_object_get(node, "switch");
    cr_expect_str_eq(str(sw, "step"), "drain");
    /* Every user reads a node: its switch names the workloads, not their users. */
    cr_expect(strstr(str(sw, "message"), "1 (container)") && !strstr(str(sw, "message"), "alice"),
              "%s", str(sw, "message"));
    json_decref(node);
    snprintf(path, sizeof(path), "/v1/nodes/%s", other);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", path, NULL, &node), 200);
    cr_expect_str_neq(str(json_object_get(node, "switch"), "step"), "drain", "nothing to drain");
    cr_expect_str_neq(str(json_object_get(node, "switch"), "step"), "", "a switch under way");
    json_decref(node);
    json_decref(a);
    free(alice);
}

/* ---- the CLI over the API ---- */

Test(api, cli_request_create_wait_and_exit_codes) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *alice = ts_token(&ts, "alice", "owner", "n1");
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "request", "create", "--server", ts.url, "--token", alice,
                         "--kind", "container", "--class", "nvidia-h100-80gb", "--wait", NULL);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert(strstr(out, "placed on n1"), "%s", out);
    free(out), free(err);
    rc = run_einsora(&out, &err, "requests", "--server", ts.url, "--token", alice, NULL);
    cr_assert_eq(rc, 0);
    cr_assert(strstr(out, "ID") && strstr(out, "placed"), "%s", out);
    free(out), free(err);
    rc = run_einsora(&out, &err, "request", "show", "99", "--server", ts.url, "--token", alice,
                     NULL);
    cr_assert_eq(rc, 5, "404 exits 5");
    free(out), free(err);
    rc = run_einsora(&out, &err, "requests", "--server", ts.url, "--token", "ens_bad", NULL);
    cr_assert_eq(rc, 4, "401 exits 4");
    free(out), free(err);
    rc = run_einsora(&out, &err, "requests", "--server", "http://127.0.0.1:1", "--token", alice,
                     NULL);
    cr_assert_eq(rc, 3, "unreachable exits 3");
    free(out), free(err);
    rc = run_einsora(&out, &err, "request", "frobnicate", "--server", ts.url, NULL);
    cr_assert_eq(rc, 2, "usage exits 2");
    free(out), free(err);
    rc = run_einsora(&out, &err, "capacity", "--server", ts.url, "--token", alice, "--json", NULL);
    cr_assert_eq(rc, 0);
    json_t *j = json_loads(out, 0, NULL);
    cr_assert(json_is_array(json_object_get(j, "classes")), "--json prints the API's JSON");
    json_decref(j);
    free(out), free(err);
    free(alice);
}

Test(api, r2d_unknown_or_vgpu_request_is_bad_input_and_nothing_is_stored) {
    json_t *q = submit(ts.admin, "{\"kind\":\"container\",\"class\":\"no-such-class\"}", 422);
    cr_assert_str_eq(str(q, "code"), "unknown_class");
    json_decref(q);
    /* R9, R18: a slice of a consumer card is no class, and the answer says why. */
    q = submit(ts.admin, "{\"kind\":\"container\",\"class\":\"nvidia-rtx-4090-mig-1g.10gb\"}", 422);
    cr_expect(strstr(str(q, "message"), "consumer cards have no MIG, R9"), "%s", str(q, "message"));
    json_decref(q);
    q = submit(ts.admin, "{\"kind\":\"vm\",\"class\":\"nvidia-h100-vgpu\"}", 422);
    cr_assert_str_eq(str(q, "code"), "vgpu_not_supported");
    cr_assert(strstr(str(q, "message"), "passthrough"), "R2d names the alternatives: %s",
              str(q, "message"));
    json_decref(q);
    cr_assert_eq(request_count(), 0);
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "request", "create", "--server", ts.url, "--token", ts.admin,
                         "--kind", "container", "--class", "no-such-class", NULL);
    cr_assert_eq(rc, 2, "the server finds the arguments wrong: usage, 2: %s", out);
    cr_assert(strstr(err, "not a class of the catalog"), "%s", err);
    free(out);
    free(err);
}

Test(api, r4_inventory_push_never_replaces_a_node_with_running_work) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *alice = ts_token(&ts, "alice", "owner", "n1"), *agent = ts_token(&ts, "a", "node", "n1");
    json_decref(submit(alice, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", 201));
    const char *n1 = "{\"name\":\"n1\",\"site\":\"dc1\",\"site_kind\":\"datacenter\",\"platform\":"
                     "\"linux\",\"owner\":\"alice\",\"mode\":\"vm-passthrough\"}";
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, agent, "PUT", "/v1/nodes/n1", n1, &j), 409, "%s", str(j, "message"));
    json_decref(j);
    cr_assert_eq(ts_call(&ts, alice, "GET", "/v1/requests/1", NULL, &j), 200);
    cr_assert_str_eq(str(j, "state"), "placed", "the running workload keeps its GPU");
    json_decref(j);
    free(alice);
    free(agent);
}

/* ---- many callers at once: each gets its own change's answer, and every change is kept ---- */

#define CONCURRENT_CALLERS 8
#define CONCURRENT_EACH 20

typedef struct Caller {
    const char *token;
    unsigned index;
    json_int_t ids[CONCURRENT_EACH];
    unsigned n_ok;
    char failure[256]; /* the first wrong answer (asserted on the test's own thread) */
} Caller;

static void *caller_main(void *p) {
    Caller *k = p;
    Client *c = NULL;
    if (client_new(ts.url, k->token, &c, NULL) < 0) {
        snprintf(k->failure, sizeof(k->failure), "caller %u: no client", k->index);
        return NULL;
    }
    for (unsigned i = 0; i < CONCURRENT_EACH && !k->failure[0]; i++) {
        char image[64], body[160];
        snprintf(image, sizeof(image), "registry.example/caller-%u:%u", k->index, i);
        snprintf(body, sizeof(body), "{\"kind\":\"container\",\"class\":\"cpu\",\"image\":\"%s\"}",
                 image);
        long st = 0;
        char *text = NULL;
        Error err = {0};
        int r = client_call_raw(c, "POST", "/v1/requests", body, strlen(body), NULL, &st, &text,
                                &err);
        json_t *j = r == 0 ? json_loads(text, 0, NULL) : NULL;
        const char *got = str(json_object_get(j, "request"), "image");
        if (r < 0 || st != 201 || !STREQ(got, image))
            snprintf(k->failure, sizeof(k->failure), "caller %u, submit %u: %d %ld, image '%s'",
                     k->index, i, r, st, got);
        else
            k->ids[k->n_ok++] = num(j, "id");
        json_decref(j);
        free(text);
    }
    client_free(c);
    return NULL;
}

Test(api, r16_concurrent_changes_each_get_their_own_committed_answer) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *bob = ts_token(&ts, "bob", "user", NULL);
    Caller callers[CONCURRENT_CALLERS];
    pthread_t t[CONCURRENT_CALLERS];
    for (unsigned i = 0; i < CONCURRENT_CALLERS; i++) {
        callers[i] = (Caller){.token = bob, .index = i};
        pthread_create(&t[i], NULL, caller_main, &callers[i]);
    }
    for (unsigned i = 0; i < CONCURRENT_CALLERS; i++)
        pthread_join(t[i], NULL);
    json_int_t all[CONCURRENT_CALLERS * CONCURRENT_EACH];
    size_t n = 0;
    for (unsigned i = 0; i < CONCURRENT_CALLERS; i++) {
        cr_assert_eq(callers[i].failure[0], 0, "%s", callers[i].failure);
        for (unsigned k = 0; k < callers[i].n_ok; k++)
            all[n++] = callers[i].ids[k];
    }
    cr_assert_eq(n, CONCURRENT_CALLERS * CONCURRENT_EACH);
    for (size_t a = 0; a < n; a++)
        for (size_t b = a + 1; b < n; b++)
            cr_assert_neq(all[a], all[b], "two callers were answered with request %lld",
                          (long long)all[a]);
    cr_assert_eq(request_count(), n, "every answered change is kept");
    /* What is stored is what each caller was answered with. */
    for (unsigned i = 0; i < CONCURRENT_CALLERS; i++) {
        char path[64], image[64];
        json_t *j = NULL;
        snprintf(path, sizeof(path), "/v1/requests/%lld", (long long)callers[i].ids[7]);
        snprintf(image, sizeof(image), "registry.example/caller-%u:7", i);
        cr_assert_eq(ts_call(&ts, bob, "GET", path, NULL, &j), 200);
        cr_assert_str_eq(str(json_object_get(j, "request"), "image"), image);
        json_decref(j);
    }
    free(bob);
}

/* Seq of the first event of `type` on `object` in an event list; 0 when absent. Its actor
 * into *actor when given. */
static json_int_t event_seq(json_t *events, const char *type, const char *object,
                            const char **actor) {
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e) {
        if (strcmp(str(e, "type"), type) == 0 && strcmp(str(e, "object"), object) == 0) {
            if (actor)
                *actor = str(e, "actor");
            return num(e, "seq");
        }
    }
    return 0;
}

/* R16: the feed says a change before the placements it made room for (a release, an
 * uncordon), so that a reader rebuilding the state from it never sees a GPU in two
 * allocations or a placement on a cordoned node; and the placement is the system's, not
 * credited to the user whose release made room (she is a stranger to the one placed). */
Test(api, r16_the_feed_shows_a_cause_before_the_placement_it_made_room_for) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *bob = ts_token(&ts, "bob", "user", NULL), *eve = ts_token(&ts, "eve", "user", NULL);
    cr_assert_eq(ts_call(&ts, ts.admin, "PUT", "/v1/tenants/bob/trust", NULL, NULL), 200);
    cr_assert_eq(ts_call(&ts, ts.admin, "PUT", "/v1/tenants/eve/trust", NULL, NULL), 200);
    const char *body = "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}";
    json_t *a = submit(bob, body, 201), *b = submit(eve, body, 201);
    cr_assert_str_eq(str(b, "state"), "pending");
    char path[64], ida[24], idb[24];
    snprintf(ida, sizeof(ida), "%lld", (long long)num(a, "id"));
    snprintf(idb, sizeof(idb), "%lld", (long long)num(b, "id"));
    snprintf(path, sizeof(path), "/v1/requests/%s/release", ida);
    cr_assert_eq(ts_call(&ts, bob, "POST", path, NULL, NULL), 200);
    /* Cordoned, a third request waits; the uncordon places it. */
    snprintf(path, sizeof(path), "/v1/requests/%s/release", idb);
    cr_assert_eq(ts_call(&ts, eve, "POST", path, NULL, NULL), 200);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes/n1/cordon", NULL, NULL), 200);
    json_t *c = submit(bob, body, 201);
    cr_assert_str_eq(str(c, "state"), "pending");
    char idc[24];
    snprintf(idc, sizeof(idc), "%lld", (long long)num(c, "id"));
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes/n1/uncordon", NULL, NULL), 200);

    json_t *all = NULL, *mine = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/events?after=0&limit=10000", NULL, &all), 200);
    json_t *ev = json_object_get(all, "events");
    json_int_t released = event_seq(ev, "request.released", ida, NULL),
               placed = event_seq(ev, "request.placed", idb, NULL),
               uncordoned = event_seq(ev, "node.uncordoned", "n1", NULL),
               placed_c = event_seq(ev, "request.placed", idc, NULL);
    cr_assert(released && placed && uncordoned && placed_c);
    cr_expect_lt(released, placed, "the release comes before the placement it made room for");
    cr_expect_lt(uncordoned, placed_c, "the uncordon comes before the placement it allowed");
    cr_assert_eq(ts_call(&ts, eve, "GET", "/v1/events?after=0", NULL, &mine), 200);
    const char *actor = NULL;
    cr_assert(event_seq(json_object_get(mine, "events"), "request.placed", idb, &actor));
    cr_expect_str_eq(actor, "system", "eve's feed does not name the user whose release made room");
    json_decref(all);
    json_decref(mine);
    json_decref(a);
    json_decref(b);
    json_decref(c);
    free(bob);
    free(eve);
}

/* R8, R6: capacity of a class no node has is its zero row; a name that is no class is a
 * typo said as such, with the nearest names (not an empty answer). */
Test(api, r6_capacity_of_an_unknown_class_is_refused_with_the_nearest_names) {
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/capacity?class=nvidia-h100-80g", NULL, &j),
                 422);
    cr_expect_str_eq(str(j, "code"), "unknown_class");
    cr_expect(strstr(str(j, "message"), "Closest: nvidia-h100-80gb"), "%s", str(j, "message"));
    json_decref(j);
    /* A name that is no name at all (bytes JSON cannot carry back) is bad input. */
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/capacity?class=nv%FF%FE", NULL, &j), 400);
    json_decref(j);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/capacity?class=apple-silicon-16gb", NULL, &j),
                 200);
    json_t *row = json_array_get(json_object_get(j, "classes"), 0);
    cr_expect_str_eq(str(row, "class"), "apple-silicon-16gb");
    cr_expect_eq(num(row, "total"), 0);
    json_decref(j);
}

/* R9: a quarantine an agent reports is news that cannot wait for its node to be idle: taken
 * in place while a workload runs on another GPU (any other change to a busy node waits). */
Test(api, r9_an_agent_quarantine_is_taken_while_the_node_runs_workloads) {
    ts_add_h100_node(&ts, "n1", "alice", 2);
    char *alice = ts_token(&ts, "alice", "owner", "n1"), *agent = ts_token(&ts, "a", "node", "n1");
    json_t *q = submit(alice, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", 201);
    json_t *n = NULL;
    cr_assert_eq(ts_call(&ts, agent, "GET", "/v1/nodes/n1", NULL, &n), 200);
    /* The node as the agent sees it, with the GPU the workload does not use quarantined. */
    json_t *devs = json_object_get(n, "devices");
    json_t *used_j = json_array_get(json_object_get(json_object_get(q, "placement"), "devices"), 0);
    cr_assert(json_is_integer(used_j), "a placement names its devices by index");
    int used = (int)json_integer_value(used_j);
    json_t *body = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:[]}", "name", "n1", "site",
                             "dc1", "site_kind", "datacenter", "platform", "linux", "owner",
                             "alice", "mode", "container", "cpus", 64, "devices");
    for (size_t i = 0; i < json_array_size(devs); i++) {
        json_t *d =
                json_pack("{s:O, s:s, s:i}", "pci", json_object_get(json_array_get(devs, i), "pci"),
                          "class", "nvidia-h100-80gb", "memory_gb", 80);
        if ((int)i != used)
            json_object_set_new(d, "quarantined", json_string("rebind left half done"));
        json_array_append_new(json_object_get(body, "devices"), d);
    }
    char *text = json_dumps(body, JSON_COMPACT);
    json_t *ans = NULL;
    long st = ts_call(&ts, agent, "PUT", "/v1/nodes/n1", text, &ans);
    cr_assert_eq(st, 200, "%ld %s", st, str(ans, "message"));
    json_decref(ans);
    json_t *after = NULL;
    cr_assert_eq(ts_call(&ts, alice, "GET", "/v1/nodes/n1", NULL, &after), 200);
    cr_expect_str_eq(str(json_array_get(json_object_get(after, "devices"), used == 0 ? 1 : 0),
                         "quarantined"),
                     "rebind left half done");
    json_t *q2 = submit(alice, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", 201);
    cr_expect_str_eq(str(q2, "state"), "pending", "nothing placed on the quarantined GPU");
    free(text);
    json_decref(body);
    json_decref(after);
    json_decref(n);
    json_decref(q);
    json_decref(q2);
    free(alice);
    free(agent);
}

static json_t *h200_node(bool slot0_busy) {
    char text[800];
    snprintf(text, sizeof(text),
             "{\"name\":\"m1\",\"site\":\"lab1\",\"site_kind\":\"lab\",\"platform\":\"linux\","
             "\"owner\":\"alice\",\"cpus\":64,\"devices\":[{\"pci\":\"0000:4e:00.0\",\"class\":"
             "\"nvidia-h200-141gb\",\"memory_gb\":140,\"mig_enabled\":true,\"mig\":["
             "{\"profile\":\"3g.71gb\",\"start\":0%s},{\"profile\":\"2g.35gb\",\"start\":4},"
             "{\"profile\":\"1g.18gb\",\"start\":6}]}]}",
             slot0_busy ? ",\"busy\":true" : "");
    json_t *j = json_loads(text, 0, NULL);
    cr_assert(j, "%s", text);
    return j;
}

static void put_h200(const char *agent, const char *mig) {
    char text[800];
    snprintf(text, sizeof(text),
             "{\"name\":\"m1\",\"site\":\"lab1\",\"site_kind\":\"lab\",\"platform\":\"linux\","
             "\"owner\":\"alice\",\"cpus\":64,\"devices\":[{\"pci\":\"0000:4e:00.0\",\"class\":"
             "\"nvidia-h200-141gb\",\"memory_gb\":140,\"mig_enabled\":true,\"mig\":[%s]}]}",
             mig);
    json_t *ans = NULL;
    long st = ts_call(&ts, agent, "PUT", "/v1/nodes/m1", text, &ans);
    cr_assert_eq(st, 200, "%ld %s", st, str(ans, "message"));
    json_decref(ans);
}

/* m1: an H200 whose 3g instance at slot 0 a foreign process works in. */
static void register_h200_slot0_busy(void) {
    json_t *node = h200_node(true);
    char *text = json_dumps(node, JSON_COMPACT);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes", text, NULL), 201);
    free(text);
    json_decref(node);
}

static long mig_start_of(json_t *q) {
    return (long)json_integer_value(json_object_get(json_object_get(q, "placement"), "mig_start"));
}

/* R2c, R16: the slots of a MIG instance a process Einsora did not start works in (the agent
 * reports it busy) are never offered, across a restart too; idle instances are the control
 * plane's to lay out. When the process ends (the agent's next report, taken in place while
 * slices run), the slots are offered again. */
Test(api, r2c_slots_of_a_busy_foreign_mig_instance_are_never_offered) {
    char *alice = ts_token(&ts, "alice", "owner", "m1"), *agent = ts_token(&ts, "a", "node", "m1");
    register_h200_slot0_busy();
    ts_kill(&ts, true);
    ts_spawn(&ts);
    const char *one = "{\"kind\":\"container\",\"class\":\"nvidia-h200-141gb-mig-1g.18gb\"}";
    json_t *q[4];
    for (int i = 0; i < 3; i++) {
        q[i] = submit(alice, one, 201);
        cr_assert_str_eq(str(q[i], "state"), "placed");
        cr_expect_geq(mig_start_of(q[i]), 4, "slot %ld is the busy instance's", mig_start_of(q[i]));
    }
    q[3] = submit(alice, one, 201);
    cr_expect_str_eq(str(q[3], "state"), "pending", "slots 0-3 are a foreign process's");
    /* The process ended: the agent says so while three slices run, and the fourth is placed. */
    put_h200(agent, "{\"profile\":\"3g.71gb\",\"start\":0},{\"profile\":\"2g.35gb\",\"start\":4},"
                    "{\"profile\":\"1g.18gb\",\"start\":6}");
    json_t *r = NULL;
    cr_assert_eq(ts_call(&ts, alice, "GET", "/v1/requests/4", NULL, &r), 200);
    cr_expect_str_eq(str(r, "state"), "placed");
    cr_expect_lt(mig_start_of(r), 4);
    json_decref(r);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/debug/invariants", NULL, &r), 200);
    cr_expect(json_is_true(json_object_get(r, "ok")), "%s", str(r, "violation"));
    json_decref(r);
    for (int i = 0; i < 4; i++)
        json_decref(q[i]);
    free(alice);
    free(agent);
}

/* R2c: when our slice on a MIG instance is released while the agent last saw a process in
 * it, the slots are not offered until the agent says the instance is idle: the process may be
 * a stranger's that outlived the slice. */
Test(api, r2c_a_released_slices_busy_instance_is_not_offered_until_idle) {
    char *alice = ts_token(&ts, "alice", "owner", "m1"), *agent = ts_token(&ts, "a", "node", "m1");
    register_h200_slot0_busy();
    json_t *q = submit(alice,
                       "{\"kind\":\"container\",\"class\":\"nvidia-h200-141gb-mig-2g.35gb\"}", 201);
    cr_assert_eq(mig_start_of(q), 4, "slots 0-3 are a foreign process's");
    const char *busy4 =
            "{\"profile\":\"3g.71gb\",\"start\":0,\"busy\":true},{\"profile\":"
            "\"2g.35gb\",\"start\":4,\"busy\":true},{\"profile\":\"1g.18gb\",\"start\":6}";
    put_h200(agent, busy4);
    /* Taken in place, and an event all the same: a standby replays the node from it. */
    json_t *events = ts_list_all(&ts, ts.admin, "/v1/events", "events");
    json_t *last = json_array_get(events, json_array_size(events) - 1);
    cr_expect_str_eq(str(last, "type"), "node.updated");
    json_decref(events);
    cr_assert_eq(ts_call(&ts, alice, "POST", "/v1/requests/1/release", NULL, NULL), 200);
    const char *one = "{\"kind\":\"container\",\"class\":\"nvidia-h200-141gb-mig-1g.18gb\"}";
    json_t *a = submit(alice, one, 201), *b = submit(alice, one, 201);
    cr_expect_eq(mig_start_of(a), 6);
    cr_expect_str_eq(str(b, "state"), "pending", "slots 4-5 still have a process");
    put_h200(agent, "{\"profile\":\"3g.71gb\",\"start\":0,\"busy\":true},{\"profile\":"
                    "\"1g.18gb\",\"start\":6}");
    json_t *r = NULL;
    cr_assert_eq(ts_call(&ts, alice, "GET", "/v1/requests/3", NULL, &r), 200);
    cr_expect_str_eq(str(r, "state"), "placed", "idle now: offered");
    json_decref(r);
    json_decref(q), json_decref(a), json_decref(b);
    free(alice);
    free(agent);
}

/* R18: a slice that waits only because its MIG GPU is quarantined (or its node cordoned)
 * says so, not "every unit is taken" with nothing allocated: lifting the quarantine or the
 * cordon is what would let it run. */
Test(api, r18_a_slice_waiting_for_a_quarantined_or_cordoned_mig_gpu_says_so) {
    const char *node =
            "{\"name\":\"q1\",\"site\":\"lab1\",\"site_kind\":\"lab\",\"platform\":\"linux\","
            "\"owner\":\"carol\",\"cpus\":8,\"devices\":[{\"pci\":\"0000:17:00.0\",\"class\":"
            "\"nvidia-a100-40gb\",\"memory_gb\":40,\"mig_enabled\":true,\"quarantined\":\"failed "
            "its reset check\"}]}";
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes", node, NULL), 201);
    char *carol = ts_token(&ts, "carol", "owner", "q1");
    json_t *q = submit(carol, "{\"kind\":\"container\",\"class\":\"nvidia-a100-40gb-mig-1g.5gb\"}",
                       201);
    cr_expect_str_eq(str(q, "state"), "pending");
    cr_expect_str_eq(str(q, "reason_code"), "cordoned", "%s", str(q, "reason"));
    json_decref(q);
    free(carol);
}

/* R6, R9: a consumer GPU on vfio-pci waiting for its reset check is not on offer: the node's
 * view says so as capacity counts it (cordoned), never "free". */
/* Lab node NAME of carol's with one GPU, DEVICE (a JSON object): that GPU as the node shows it. */
static json_t *lab_gpu_as_shown(const char *name, const char *device) {
    char *node = strprintf("{\"name\":\"%s\",\"site\":\"lab1\",\"site_kind\":\"lab\","
                           "\"platform\":\"linux\",\"owner\":\"carol\",\"cpus\":8,"
                           "\"devices\":[%s]}",
                           name, device),
         path[64];
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes", node, NULL), 201);
    free(node);
    snprintf(path, sizeof(path), "/v1/nodes/%s", name);
    json_t *n = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", path, NULL, &n), 200);
    json_t *d = json_incref(json_array_get(json_object_get(n, "devices"), 0));
    json_decref(n);
    return d;
}

Test(api, r9_a_consumer_gpu_waiting_for_its_reset_check_is_not_shown_free) {
    json_t *d = lab_gpu_as_shown("r1", "{\"pci\":\"0000:01:00.0\",\"class\":\"nvidia-rtx-4090\","
                                       "\"memory_gb\":24,\"binding\":\"vfio\"}");
    cr_expect_str_eq(str(d, "state"), "cordoned");
    json_decref(d);
}

/* R18 for a request by memory alone: the true reason of the classes that hold it. A VM
 * whose only such class is an AMD GPU is refused as VMs get none (not "no node holds it"); a
 * VM whose H100 is free in the other mode waits for the switch, not for "every unit". */
Test(api, r18_a_request_by_memory_is_told_the_true_reason_of_its_classes) {
    const char *amd =
            "{\"name\":\"a1\",\"site\":\"lab1\",\"site_kind\":\"lab\",\"platform\":\"linux\","
            "\"owner\":\"carol\",\"cpus\":8,\"devices\":[{\"pci\":\"0000:c1:00.0\",\"class\":"
            "\"amd-mi300x\",\"memory_gb\":192}]}";
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes", amd, NULL), 201);
    char *carol = ts_token(&ts, "carol", "owner", "a1");
    json_t *q = submit(carol, "{\"kind\":\"vm\",\"memory_gb\":150}", 201);
    cr_expect_str_eq(str(q, "state"), "refused");
    cr_expect_str_eq(str(q, "reason_code"), "vm-amd", "%s", str(q, "reason"));
    json_decref(q);
    ts_add_h100_node(&ts, "d1", "carol", 1);
    char *carol2 = ts_token(&ts, "carol", "owner", "d1");
    q = submit(carol2, "{\"kind\":\"vm\",\"memory_gb\":60}", 201);
    cr_expect_str_eq(str(q, "state"), "pending");
    cr_expect_str_eq(str(q, "reason_code"), "mode-mismatch", "%s", str(q, "reason"));
    json_decref(q);
    free(carol), free(carol2);
}

/* R8, R1: an unclassified GPU named in a switch is refused saying so, never "already in that
 * mode" (which the dashboard read as done). */
Test(api, r8_a_switch_of_an_unclassified_gpu_is_refused_not_done) {
    const char *node =
            "{\"name\":\"u1\",\"site\":\"lab1\",\"site_kind\":\"lab\",\"platform\":\"linux\","
            "\"owner\":\"carol\",\"cpus\":8,\"devices\":[{\"pci\":\"0000:03:00.0\",\"class\":\"\","
            "\"pci_id\":\"1002:164e\"}]}";
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes", node, NULL), 201);
    char *agent = ts_token(&ts, "u1-agent", "node", "u1");
    cr_assert_eq(ts_call(&ts, agent, "POST", "/v1/nodes/u1/heartbeat", "{\"interval_s\":5}", NULL),
                 200);
    json_t *j = NULL;
    cr_expect_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes/u1/mode",
                         "{\"mode\":\"vm-passthrough\",\"gpu\":\"0\"}", &j),
                 400);
    cr_expect(strstr(str(j, "message"), "unclassified"), "%s", str(j, "message"));
    json_decref(j);
    free(agent);
}

/* R12, R7: a lab machine whose GPUs are all AMD is in neither mode: a whole-node switch to
 * either is refused, not answered "already in that mode" for both. */
Test(api, r12_a_whole_node_switch_of_a_machine_with_no_nvidia_gpu_is_refused) {
    const char *node =
            "{\"name\":\"amd1\",\"site\":\"lab1\",\"site_kind\":\"lab\",\"platform\":\"linux\","
            "\"owner\":\"carol\",\"cpus\":8,\"devices\":[{\"pci\":\"0000:03:00.0\",\"class\":"
            "\"amd-mi300x\"}]}";
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes", node, NULL), 201);
    char *agent = ts_token(&ts, "amd1-agent", "node", "amd1");
    cr_assert_eq(
            ts_call(&ts, agent, "POST", "/v1/nodes/amd1/heartbeat", "{\"interval_s\":5}", NULL),
            200);
    static const char *const modes[] = {"{\"mode\":\"vm-passthrough\"}",
                                        "{\"mode\":\"container\"}"};
    for (size_t i = 0; i < 2; i++) {
        json_t *j = NULL;
        cr_expect_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes/amd1/mode", modes[i], &j), 400, "%s",
                     modes[i]);
        cr_expect(strstr(str(j, "message"), "no NVIDIA GPU to switch"), "%s", str(j, "message"));
        json_decref(j);
    }
    free(agent);
}

/* R8: a GPU whose memory nothing could read (on vfio-pci, without NVML) is shown with its
 * class's memory, not 0. */
Test(api, r8_a_gpu_of_unknown_memory_shows_its_classs) {
    json_t *d = lab_gpu_as_shown("g1", "{\"pci\":\"0000:01:00.0\",\"class\":\"nvidia-rtx-4090\","
                                       "\"binding\":\"vfio\"}");
    cr_expect_eq(num(d, "memory_gb"), 24);
    json_decref(d);
}

/* A datacenter node NAME in MODE as its agent reports it: one H100 on b0, and one on b1 unless
 * b1 is NULL. */
static char *dc_agent_node(const char *name, const char *mode, const char *b0, const char *b1) {
    return strprintf("{\"name\":\"%s\",\"site\":\"dc9\",\"site_kind\":\"datacenter\","
                     "\"platform\":\"linux\",\"owner\":\"ops\",\"mode\":\"%s\",\"cpus\":8,"
                     "\"devices\":[{\"pci\":\"0000:18:00.0\",\"class\":\"nvidia-h100-80gb\","
                     "\"binding\":\"%s\"}%s%s%s]}",
                     name, mode, b0,
                     b1 ? ",{\"pci\":\"0000:db:00.0\",\"class\":"
                          "\"nvidia-h100-80gb\",\"binding\":\""
                        : "",
                     b1 ? b1 : "", b1 ? "\"}" : "");
}

/* The agent's push of that node, answered `status`. */
static void dc_agent_push(const char *agent, const char *name, const char *mode, const char *b0,
                          const char *b1, long status, json_t **ret) {
    char *body = dc_agent_node(name, mode, b0, b1), path[64];
    snprintf(path, sizeof(path), "/v1/nodes/%s", name);
    cr_assert_eq(ts_call(&ts, agent, "PUT", path, body, ret), status);
    free(body);
}

/* The agent's result of a switch's i-th task (the node's answer lists them). */
static void dc_agent_task_result(const char *agent, const char *name, json_t *node, size_t i,
                                 bool ok) {
    json_int_t task = json_integer_value(
            json_object_get(json_array_get(json_object_get(node, "tasks"), i), "id"));
    char path[64];
    snprintf(path, sizeof(path), "/v1/nodes/%s/tasks/%lld", name, (long long)task);
    cr_assert_eq(ts_call(&ts, agent, "POST", path,
                         ok ? "{\"ok\":true,\"message\":\"done\"}"
                            : "{\"ok\":false,\"message\":\"busy group\"}",
                         NULL),
                 200);
}

/* R3: all GPUs of a datacenter node are in its mode. An agent's first report of a machine
 * whose GPUs are not in the mode it gives is refused naming them, never served as that mode. */
Test(api, r3_an_agent_reporting_gpus_outside_its_datacenter_nodes_mode_is_refused) {
    char *agent = ts_token(&ts, "dcx-agent", "node", "dcx");
    json_t *j = NULL;
    dc_agent_push(agent, "dcx", "container", "host", "vfio", 409, &j);
    cr_expect(strstr(str(j, "message"), "1 of its GPUs (first 0000:db:00.0) are on vfio-pci"), "%s",
              str(j, "message"));
    json_decref(j);
    cr_expect_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/dcx", NULL, NULL), 404, "not served");
    dc_agent_push(agent, "dcx", "vm-passthrough", "vfio", NULL, 201, NULL);
    free(agent);
}

/* R3 on a served datacenter node: its agent reports a GPU rebound by hand to the other driver.
 * The core hands out a datacenter node's GPUs by its mode, so the node is cordoned at once,
 * saying which GPU, and stays so (uncordon refused) until the agent reports it back in the
 * mode; then the cordon goes by itself. */
Test(api, r3_a_gpu_rebound_by_hand_on_a_served_datacenter_node_cordons_it_until_it_is_back) {
    char *agent = ts_token(&ts, "dcw-agent", "node", "dcw");
    dc_agent_push(agent, "dcw", "container", "host", "host", 201, NULL);
    json_t *j = NULL;
    dc_agent_push(agent, "dcw", "container", "host", "vfio", 200, &j);
    cr_expect(json_is_true(json_object_get(j, "cordoned")), "cordoned at once");
    cr_expect(strstr(str(j, "cordon_reason"), "(first 0000:db:00.0) are on vfio-pci") &&
                      strstr(str(j, "cordon_reason"), "einsora node mode dcw container"),
              "%s", str(j, "cordon_reason"));
    cr_expect_str_eq(str(json_array_get(json_object_get(j, "devices"), 1), "binding"), "vfio");
    json_decref(j);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes/dcw/uncordon", NULL, NULL), 409);
    dc_agent_push(agent, "dcw", "container", "host", "host", 200, &j);
    cr_expect(json_is_false(json_object_get(j, "cordoned")), "back in its mode: %s",
              str(j, "cordon_reason"));
    json_decref(j);
    /* An operator's own cordon is the operator's: a GPU out of the mode leaves it as it is. */
    cr_assert_eq(
            ts_call(&ts, ts.admin, "POST", "/v1/nodes/dcw/cordon", "{\"reason\":\"maint\"}", NULL),
            200);
    dc_agent_push(agent, "dcw", "container", "vfio", "host", 200, NULL);
    dc_agent_push(agent, "dcw", "container", "host", "host", 200, &j);
    cr_expect(json_is_true(json_object_get(j, "cordoned")), "still the operator's cordon");
    cr_expect_str_eq(str(j, "cordon_reason"), "maint");
    json_decref(j);
    free(agent);
}

/* R3 after a switch that failed half-way on a datacenter node an agent runs: the node shows
 * the bindings its agent reports, stays cordoned while GPUs are out of its mode, and a switch
 * to the mode it has brings them back (it is not "already in that mode"). */
Test(api, r3_gpus_a_failed_switch_left_out_of_the_nodes_mode_are_shown_and_brought_back) {
    char *agent = ts_token(&ts, "dcy-agent", "node", "dcy");
    dc_agent_push(agent, "dcy", "container", "host", "host", 201, NULL);
    cr_assert_eq(ts_call(&ts, agent, "POST", "/v1/nodes/dcy/heartbeat", "{\"interval_s\":5}", NULL),
                 200);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes/dcy/cordon", NULL, NULL), 200);
    /* One GPU moved to vfio-pci and the other did not (its switch failed there). */
    json_t *j = NULL;
    dc_agent_push(agent, "dcy", "container", "vfio", "host", 200, &j);
    cr_expect_str_eq(str(json_array_get(json_object_get(j, "devices"), 0), "binding"), "vfio",
                     "the binding the agent reports");
    json_decref(j);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes/dcy/uncordon", NULL, &j), 409);
    cr_expect(strstr(str(j, "message"), "einsora node mode dcy container"), "%s",
              str(j, "message"));
    json_decref(j);
    cr_assert_eq(
            ts_call(&ts, ts.admin, "POST", "/v1/nodes/dcy/mode", "{\"mode\":\"container\"}", &j),
            202, "%s", str(j, "message"));
    cr_expect_str_eq(str(json_object_get(j, "switch"), "step"), "rebind", "%s",
                     str(json_object_get(j, "switch"), "message"));
    /* The agent cannot: the switch fails; the node stays cordoned, as it was before. */
    dc_agent_task_result(agent, "dcy", j, 0, false);
    json_decref(j);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/dcy", NULL, &j), 200);
    cr_expect(json_is_true(json_object_get(j, "cordoned")), "cordoned before, and after");
    cr_expect_str_eq(str(json_object_get(j, "switch"), "step"), "failed");
    json_decref(j);
    cr_expect_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes/dcy/uncordon", NULL, NULL), 409);
    free(agent);
}

/* R4: a datacenter node a failed switch leaves cordoned (its GPUs may be half in each mode)
 * says why with its cordon; the switch back to its mode gives that cordon back. */
Test(api, r4_a_node_a_failed_switch_leaves_cordoned_says_why_and_the_way_back_ends_it) {
    char *agent = ts_token(&ts, "dcz-agent", "node", "dcz");
    dc_agent_push(agent, "dcz", "container", "host", "host", 201, NULL);
    cr_assert_eq(ts_call(&ts, agent, "POST", "/v1/nodes/dcz/heartbeat", "{\"interval_s\":5}", NULL),
                 200);
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes/dcz/mode",
                         "{\"mode\":\"vm-passthrough\"}", &j),
                 202);
    dc_agent_task_result(agent, "dcz", j, 0, true);
    dc_agent_task_result(agent, "dcz", j, 1, false);
    json_decref(j);
    dc_agent_push(agent, "dcz", "container", "vfio", "host", 200, NULL);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/dcz", NULL, &j), 200);
    cr_expect(json_is_true(json_object_get(j, "cordoned")));
    cr_expect(strstr(str(j, "cordon_reason"), "the switch to vm-passthrough failed"), "%s",
              str(j, "cordon_reason"));
    json_decref(j);
    /* The way back: the cordon was the failed switch's, and goes with its reason at the end. */
    cr_assert_eq(
            ts_call(&ts, ts.admin, "POST", "/v1/nodes/dcz/mode", "{\"mode\":\"container\"}", &j),
            202);
    dc_agent_task_result(agent, "dcz", j, 0, true);
    json_decref(j);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/dcz", NULL, &j), 200);
    cr_expect_str_eq(str(json_object_get(j, "switch"), "step"), "done");
    cr_expect(json_is_false(json_object_get(j, "cordoned")),
              "the failed switch's cordon is given back");
    cr_expect_null(json_object_get(j, "cordon_reason"));
    json_decref(j);
    free(agent);
}

/* R6, R8: capacity asked of one site counts the unclassified devices of that site only; a
 * site no node was ever at is refused (422), not counted as empty. */
Test(api, r8_capacity_of_one_site_counts_that_sites_unclassified_devices) {
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes",
                         "{\"name\":\"uc1\",\"site\":\"uc-site\",\"site_kind\":\"lab\","
                         "\"platform\":\"linux\",\"owner\":\"ops\",\"cpus\":4,\"devices\":["
                         "{\"pci\":\"0000:01:00.0\",\"binding\":\"host\"},"
                         "{\"pci\":\"0000:02:00.0\",\"binding\":\"host\"}]}",
                         NULL),
                 201);
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/capacity?site=uc-site", NULL, &j), 200);
    cr_expect_eq(num(j, "unclassified"), 2);
    json_decref(j);
    /* A site no node was ever at is a typo, said as a class's is (not an empty table). */
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/capacity?site=no-such-site", NULL, &j), 422);
    cr_expect_str_eq(str(j, "code"), "unknown_site");
    json_decref(j);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/capacity", NULL, &j), 200);
    cr_expect_geq(num(j, "unclassified"), 2);
    json_decref(j);
}

/* R9: a consumer GPU's reset check and its quarantine are the control plane's. A description
 * sent by hand (an admin's or owner's POST or PUT) that says the check passed, or leaves the
 * quarantine out, neither passes the check nor lifts the quarantine: a VM would otherwise get
 * a board whose reset failed, or was never tried. */
Test(api, r9_a_description_by_hand_neither_passes_a_reset_check_nor_lifts_a_quarantine) {
    static const char dev[] = "\"pci\":\"0000:01:00.0\",\"class\":\"nvidia-rtx-4090\","
                              "\"memory_gb\":24,\"binding\":\"vfio\"";
    char body[512];
    snprintf(body, sizeof(body),
             "{\"name\":\"h4090\",\"site\":\"lab1\",\"site_kind\":\"lab\",\"platform\":\"linux\","
             "\"owner\":\"ops\",\"cpus\":8,\"devices\":[{%s,\"reset_verified\":true}]}",
             dev);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes", body, NULL), 201);
    json_t *n = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/h4090", NULL, &n), 200);
    json_t *d = json_array_get(json_object_get(n, "devices"), 0);
    cr_expect(!json_is_true(json_object_get(d, "reset_verified")), "a check nobody ran");
    json_decref(n);
    long vm = ts_submit(&ts, "{\"kind\":\"vm\",\"class\":\"nvidia-rtx-4090\"}");
    json_t *r = ts_wait_state(&ts, vm, "pending", NULL);
    cr_expect_str_eq(str(r, "reason_code"), "reset-check");
    json_decref(r);
    /* Quarantined by hand: kept. Then a PUT that leaves it out and says the check passed. */
    snprintf(body, sizeof(body),
             "{\"name\":\"h4090\",\"site\":\"lab1\",\"site_kind\":\"lab\",\"platform\":\"linux\","
             "\"owner\":\"ops\",\"cpus\":8,\"devices\":[{%s,\"quarantined\":\"by hand\"}]}",
             dev);
    cr_assert_eq(ts_call(&ts, ts.admin, "PUT", "/v1/nodes/h4090", body, NULL), 200);
    snprintf(body, sizeof(body),
             "{\"name\":\"h4090\",\"site\":\"lab1\",\"site_kind\":\"lab\",\"platform\":\"linux\","
             "\"owner\":\"ops\",\"cpus\":8,\"devices\":[{%s,\"reset_verified\":true}]}",
             dev);
    cr_assert_eq(ts_call(&ts, ts.admin, "PUT", "/v1/nodes/h4090", body, NULL), 200);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/h4090", NULL, &n), 200);
    d = json_array_get(json_object_get(n, "devices"), 0);
    cr_expect_str_eq(str(d, "quarantined"), "by hand", "only unquarantine lifts it");
    cr_expect(!json_is_true(json_object_get(d, "reset_verified")));
    json_decref(n);
    r = ts_wait_state(&ts, vm, "pending", NULL);
    json_decref(r);
}

/* R3: a datacenter node registered by hand (an admin's or owner's POST) with a GPU on the other
 * driver than its mode is refused, as an agent's first report is: a container would otherwise
 * be handed a vfio-pci GPU. */
Test(api, r3_a_datacenter_node_by_hand_with_a_gpu_off_its_mode_is_refused) {
    static const char body[] =
            "{\"name\":\"dmix\",\"site\":\"dc1\",\"site_kind\":\"datacenter\",\"platform\":"
            "\"linux\",\"owner\":\"ops\",\"mode\":\"container\",\"cpus\":8,\"devices\":["
            "{\"pci\":\"0000:01:00.0\",\"class\":\"nvidia-h100-80gb\",\"binding\":\"host\"},"
            "{\"pci\":\"0000:02:00.0\",\"class\":\"nvidia-h100-80gb\",\"binding\":\"vfio\"}]}";
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes", body, &j), 409);
    cr_expect(strstr(str(j, "message"), "(R3)"), "%s", str(j, "message"));
    json_decref(j);
    cr_expect_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/dmix", NULL, NULL), 404, "not kept");
    /* A binding left out is the mode's, as the core takes it: not a GPU off the mode. */
    static const char plain[] =
            "{\"name\":\"dvm\",\"site\":\"dc1\",\"site_kind\":\"datacenter\",\"platform\":"
            "\"linux\",\"owner\":\"ops\",\"mode\":\"vm-passthrough\",\"cpus\":8,\"devices\":["
            "{\"pci\":\"0000:01:00.0\",\"class\":\"nvidia-h100-80gb\"}]}";
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes", plain, NULL), 201);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/dvm", NULL, &j), 200);
    cr_expect_str_eq(str(json_array_get(json_object_get(j, "devices"), 0), "binding"), "vfio");
    json_decref(j);
}

/* R8: an agent classifying with an older catalog names a class this server's catalog no
 * longer has (a rolling catalog change): its device is taken as unclassified, shown and never
 * placed, rather than every push refused while the node heartbeats and is handed work. A
 * description by hand with an unknown class is still refused. */
Test(api, r8_an_agents_unknown_class_is_shown_unclassified_not_refused) {
    char *agent = ts_token(&ts, "a", "node", "n7");
    const char *body = "{\"name\":\"n7\",\"site\":\"lab1\",\"site_kind\":\"lab\",\"platform\":"
                       "\"linux\",\"owner\":\"ops\",\"cpus\":8,\"devices\":[{\"pci\":"
                       "\"0000:01:00.0\",\"class\":\"renamed-away\",\"memory_gb\":24}]}";
    json_t *ans = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "PUT", "/v1/nodes/n7", body, &ans), 400);
    cr_expect(strstr(str(ans, "message"), "renamed-away"), "%s", str(ans, "message"));
    json_decref(ans);
    long st = ts_call(&ts, agent, "PUT", "/v1/nodes/n7", body, &ans);
    cr_assert(st == 200 || st == 201, "%ld %s", st, str(ans, "message"));
    json_t *d = json_array_get(json_object_get(ans, "devices"), 0);
    cr_expect(json_is_true(json_object_get(d, "unclassified")), "the device is shown unclassified");
    json_decref(ans);
    free(agent);
}

/* R6, R16: a machine taken out of the fleet goes from it, capacity included, but never with a
 * workload on it: refused while it runs one (naming it), by its agent, and for a stranger. */
Test(api, r6_r16_a_node_is_removed_only_once_idle_and_its_capacity_goes) {
    ts_add_h100_node(&ts, "n5", "alice", 1);
    char *alice = ts_token(&ts, "alice", "owner", "n5"), *bob = ts_token(&ts, "bob", "user", NULL),
         *agent = ts_token(&ts, "a5", "node", "n5");
    json_t *q = submit(alice, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", 201);
    long id = (long)json_integer_value(json_object_get(q, "id"));
    json_decref(q);
    json_t *ans = NULL;
    cr_assert_eq(ts_call(&ts, alice, "DELETE", "/v1/nodes/n5", NULL, &ans), 409);
    cr_expect_eq(json_integer_value(json_object_get(
                         json_array_get(json_object_get(ans, "workloads"), 0), "id")),
                 id, "%s", str(ans, "message"));
    json_decref(ans);
    cr_expect_eq(ts_call(&ts, agent, "DELETE", "/v1/nodes/n5", NULL, NULL), 403);
    cr_expect_eq(ts_call(&ts, bob, "DELETE", "/v1/nodes/n5", NULL, NULL), 403);
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld/release", id);
    cr_assert_eq(ts_call(&ts, alice, "POST", path, NULL, NULL), 200);
    cr_assert_eq(ts_call(&ts, alice, "DELETE", "/v1/nodes/n5", NULL, &ans), 200);
    cr_expect(json_is_true(json_object_get(ans, "removed")));
    json_decref(ans);
    cr_expect_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/n5", NULL, NULL), 404);
    cr_expect_eq(ts_call(&ts, ts.admin, "DELETE", "/v1/nodes/n5", NULL, NULL), 404);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/capacity?class=nvidia-h100-80gb", NULL, &ans),
                 200);
    char *text = json_dumps(ans, JSON_COMPACT);
    cr_expect_null(strstr(text, "\"total\":1"), "its GPU left the capacity: %s", text);
    free(text);
    json_decref(ans);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/events?limit=10000", NULL, &ans), 200);
    text = json_dumps(ans, JSON_COMPACT);
    cr_expect(strstr(text, "node.removed"), "%s", text);
    free(text);
    json_decref(ans);
    /* Gone for good: a restart does not bring it back. */
    ts_kill(&ts, true);
    ts_respawn_same_port(&ts);
    cr_expect_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/n5", NULL, NULL), 404);
    free(alice), free(bob), free(agent);
}
