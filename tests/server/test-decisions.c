/* test-decisions.c: decisions a user can trust, end to end against the real server: exact
 * fallback times (R13), unknown names as bad input, requests no node could ever run refused
 * at submit (R18) unless the user asks to wait for nodes, and the reason a request waits. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "srv-helpers.h"

static TestServer ts;

static void setup(void) {
    ts_start(&ts);
}

static void teardown(void) {
    ts_stop(&ts);
}

TestSuite(decisions, .init = setup, .fini = teardown, .timeout = 60);

static const char *str(json_t *j, const char *key) {
    const char *s = json_string_value(json_object_get(j, key));
    return s ? s : "";
}

static json_int_t num(json_t *j, const char *key) {
    return json_integer_value(json_object_get(j, key));
}

static json_t *submit(const char *token, const char *body, long want) {
    json_t *j = NULL;
    long st = ts_call(&ts, token, "POST", "/v1/requests", body, &j);
    cr_assert_eq(st, want, "submit %s: %ld %s", body, st, str(j, "message"));
    return j;
}

static size_t request_count(void) {
    json_t *all = ts_list_all(&ts, ts.admin, "/v1/requests", "requests");
    size_t n = json_array_size(all);
    json_decref(all);
    return n;
}

/* Poll a request until it leaves `pending` (generous deadline, never a fixed sleep). */
static json_t *wait_not_pending(const char *token, json_int_t id) {
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%lld", (long long)id);
    json_t *q = NULL;
    for (int i = 0; i < 300; i++) {
        json_decref(q);
        q = NULL;
        cr_assert_eq(ts_call(&ts, token, "GET", path, NULL, &q), 200);
        if (strcmp(str(q, "state"), "pending"))
            return q;
        usleep(50000);
    }
    cr_assert_fail("request %lld stayed pending", (long long)id);
    return NULL;
}

Test(decisions, r13_fallback_never_opens_before_submitted_plus_wait_to_the_ms) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *alice = ts_token(&ts, "alice", "owner", "n1");
    json_decref(submit(alice, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", 201));
    /* Several, so that some land far from a whole second: the old code rounded the
     * submission down to whole seconds and opened the fallback up to a second early. */
    for (int k = 0; k < 3; k++) {
        json_t *b = submit(alice,
                           "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\","
                           "\"fallback\":[\"cpu\"],\"wait_s\":1}",
                           201);
        cr_assert_str_eq(str(b, "state"), "pending");
        json_int_t created = num(b, "created_ms");
        cr_assert_eq(num(b, "fallback_at_ms"), created + 1000,
                     "fallback_at_ms is submitted + wait exactly");
        json_t *q = wait_not_pending(alice, num(b, "id"));
        cr_assert_str_eq(str(q, "state"), "placed");
        cr_assert_str_eq(str(json_object_get(q, "placement"), "class"), "cpu");
        cr_assert_geq(num(q, "placed_ms"), created + 1000,
                      "placed on the fallback %lld ms after submission, before the 1000 ms wait",
                      (long long)(num(q, "placed_ms") - created));
        json_decref(q);
        json_decref(b);
        usleep(237000); /* move the next submission within the second */
    }
    free(alice);
}

Test(decisions, r8_unknown_class_or_fallback_is_422_with_closest_names_and_nothing_stored) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *alice = ts_token(&ts, "alice", "owner", "n1");
    json_t *q = submit(alice, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80g\"}", 422);
    cr_assert_str_eq(str(q, "code"), "unknown_class");
    cr_assert_str_eq(str(q, "field"), "class");
    json_t *near = json_object_get(q, "closest");
    cr_assert_geq(json_array_size(near), 1);
    cr_assert_str_eq(json_string_value(json_array_get(near, 0)), "nvidia-h100-80gb");
    cr_assert(strstr(str(q, "message"), "nvidia-h100-80gb"), "%s", str(q, "message"));
    json_decref(q);
    /* A part of a name finds the classes that contain it. */
    q = submit(alice, "{\"kind\":\"container\",\"class\":\"h200\"}", 422);
    cr_assert(strstr(json_string_value(json_array_get(json_object_get(q, "closest"), 0)), "h200"),
              "%s", str(q, "message"));
    json_decref(q);
    q = submit(alice,
               "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\","
               "\"fallback\":[\"cpu\",\"nvidia-a100-80gbb\"],\"wait_s\":5}",
               422);
    cr_assert_str_eq(str(q, "field"), "fallback");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(q, "closest"), 0)),
                     "nvidia-a100-80gb");
    json_decref(q);
    /* A class named within the unknown name comes first (not a sibling one edit nearer). */
    q = submit(alice, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb-vgpu\"}", 422);
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(q, "closest"), 0)),
                     "nvidia-h100-80gb");
    json_decref(q);
    cr_assert_eq(request_count(), 0, "nothing stored");
    json_t *ev = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/events?wait=0", NULL, &ev), 200);
    json_t *events = json_object_get(ev, "events");
    for (size_t i = 0; i < json_array_size(events); i++)
        cr_assert(strncmp(str(json_array_get(events, i), "type"), "request.", 8),
                  "no request event for bad input");
    json_decref(ev);
    free(alice);
}

static void add_mac(const char *name, const char *owner) {
    char body[512];
    snprintf(body, sizeof(body),
             "{\"name\":\"%s\",\"site\":\"home\",\"site_kind\":\"lab\",\"platform\":\"macos\","
             "\"owner\":\"%s\",\"cpus\":8,\"apple_unified_memory_gb\":64,\"apple_usable_memory_"
             "gb\":48}",
             name, owner);
    json_t *ans = NULL;
    long st = ts_call(&ts, ts.admin, "POST", "/v1/nodes", body, &ans);
    cr_assert_eq(st, 201, "%ld %s", st, str(ans, "message"));
    json_decref(ans);
}

Test(decisions, r18_impossible_requests_are_refused_at_submit_with_the_true_reason) {
    add_mac("mac1", "alice");
    ts_add_h100_node(&ts, "n1", "alice", 2);
    char *bob = ts_token(&ts, "bob", "user", NULL);
    /* R10: a stranger asking for the owner's Mac GPU. */
    json_t *q = submit(bob, "{\"kind\":\"endpoint\",\"class\":\"apple-silicon-64gb\"}", 201);
    cr_assert_str_eq(str(q, "state"), "refused", "%s", str(q, "reason"));
    cr_assert_str_eq(str(q, "reason_code"), "owner-only");
    cr_assert(strstr(str(q, "reason"), "wait_for_nodes"), "says how to wait anyway: %s",
              str(q, "reason"));
    json_decref(q);
    /* The CLI says it once, with the reason, and exits 1. */
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "request", "create", "--server", ts.url, "--token", bob,
                         "--kind", "endpoint", "--class", "apple-silicon-64gb", NULL);
    cr_assert_eq(rc, 1, "%s %s", out, err);
    cr_assert(strstr(out, "refused (apple-silicon-64gb), no node could ever run it"), "%s", out);
    cr_assert_null(strstr(out, "refused: refused"), "%s", out);
    free(out);
    free(err);
    /* A gang larger than any node holds. */
    char *alice = ts_token(&ts, "alice", "owner", "n1");
    q = submit(alice, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\",\"count\":3}", 201);
    cr_assert_str_eq(str(q, "state"), "refused", "%s", str(q, "reason"));
    cr_assert_str_eq(str(q, "reason_code"), "too-large");
    json_decref(q);
    /* A class no node has in any mode. */
    q = submit(alice, "{\"kind\":\"container\",\"class\":\"nvidia-b200-180gb\"}", 201);
    cr_assert_str_eq(str(q, "state"), "refused", "%s", str(q, "reason"));
    cr_assert_str_eq(str(q, "reason_code"), "no-node");
    json_decref(q);
    free(alice);
    free(bob);
}

Test(decisions, r18_wait_for_nodes_keeps_it_waiting_with_the_reason_until_a_node_joins) {
    add_mac("mac1", "alice");
    ts_add_h100_node(&ts, "n1", "alice", 2);
    char *bob = ts_token(&ts, "bob", "user", NULL);
    json_t *q = submit(
            bob, "{\"kind\":\"endpoint\",\"class\":\"apple-silicon-64gb\",\"wait_for_nodes\":true}",
            201);
    cr_assert_str_eq(str(q, "state"), "pending", "%s", str(q, "reason"));
    cr_assert_str_eq(str(q, "reason_code"), "owner-only", "the true reason, not 'taken'");
    cr_assert_eq(json_object_get(json_object_get(q, "request"), "wait_for_nodes"), json_true());
    /* The CLI asks the same way and shows the reason. */
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "request", "create", "--server", ts.url, "--token", bob,
                         "--kind", "vm", "--class", "nvidia-h100-80gb", "--count", "4",
                         "--wait-for-nodes", NULL);
    cr_assert_eq(rc, 0, "%s %s", out, err);
    /* R18: the sizes, asked and the largest node's, not only "too large". */
    cr_assert(strstr(out, "pending") && strstr(out, "has 4 GPUs of the class") &&
                      strstr(out, "the most one node has is 2"),
              "%s", out);
    free(out);
    free(err);
    add_mac("mac2", "bob");
    json_t *p = wait_not_pending(bob, num(q, "id"));
    cr_assert_str_eq(str(p, "state"), "placed", "%s", str(p, "reason"));
    cr_assert_str_eq(str(json_object_get(p, "placement"), "node"), "mac2");
    json_decref(p);
    json_decref(q);
    free(bob);
}
