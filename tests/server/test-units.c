/* test-units.c: the server area's pure parts: SHA-256 vectors, the router, the strict
 * request/node parsers, and the store's migrations and round trips. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/api.h"
#include "server/events.h"
#include "server/router.h"
#include "wire/node.h"
#include "store/store.h"
#include "util/sha256.h"

/* A digest from sha256_final() as sha256_hex() writes it. */
static void digest_hex(const uint8_t d[SHA256_DIGEST_SIZE], char hex[SHA256_DIGEST_SIZE * 2 + 1]) {
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
        sprintf(hex + 2 * i, "%02x", d[i]);
}

/* FIPS 180-2 appendix B vectors and the empty string. */
Test(sha256, tokens_are_hashed_with_standard_sha256_vectors) {
    char hex[65];
    sha256_hex("", 0, hex);
    cr_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha256_hex("abc", 3, hex);
    cr_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256_hex(two, strlen(two), hex);
    cr_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* One million 'a' fed in uneven pieces exercises block boundaries. */
    Sha256 s;
    sha256_init(&s);
    char a[1000];
    memset(a, 'a', sizeof(a));
    size_t left = 1000000, step = 1;
    while (left) {
        size_t n = step < left ? step : left;
        sha256_update(&s, a, n > sizeof(a) ? sizeof(a) : n);
        left -= n > sizeof(a) ? sizeof(a) : n;
        step = step * 3 % 997 + 1;
    }
    uint8_t d[32];
    sha256_final(&s, d);
    digest_hex(d, hex);
    cr_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* Lengths on either side of the padding's edges (55: the length fits the last block; 56..63:
 * it needs a block of its own; 64: none left open), each hashed at once and fed in two pieces
 * split at every point: the same digest. Expected values from another SHA-256 implementation. */
Test(sha256, padding_edges_give_standard_digests_however_the_data_is_fed) {
    static const struct {
        size_t n;
        const char *hex;
    } cases[] = {
            {55, "1deace58c745f3ecadde68a5923f494c3703fa73f0306483ccb898a5826e8d70"},
            {56, "06dbe23685750e4d3881ded95047abaf93fa8f9c5d3501dc57c717a72ff1398e"},
            {63, "47fb38b12335c9298d09280515c0666489a189d1554bb0ac1a0740806ce9d8b6"},
            {64, "dfa798724b1a8014994f363e5da7474ed26ce3757fb29e07aa47ad5a9352d37b"},
            {65, "dd2eab5a5507d7717c63ce953d9ac61752c21e664425ad1227054722a0d97f69"},
            {119, "c6e0f435df5d7d265baacca31e0602c00aa22fa6d3819aed664649294c743756"},
            {120, "17eb8960823a644bde3065620bb9d45931fe8993fd8eb692a17aff0fd725db6a"},
            {128, "3a9c1e22e20578eebe442238f431befd688bd56698eb7c77d95d3f97d8f58207"},
    };
    uint8_t data[128];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)((i * 7 + 3) % 251);
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        char hex[65];
        sha256_hex(data, cases[c].n, hex);
        cr_assert_str_eq(hex, cases[c].hex, "length %zu", cases[c].n);
        for (size_t split = 0; split <= cases[c].n; split++) {
            Sha256 s;
            uint8_t d[32];
            sha256_init(&s);
            sha256_update(&s, data, split);
            sha256_update(&s, data + split, cases[c].n - split);
            sha256_final(&s, d);
            digest_hex(d, hex);
            cr_assert_str_eq(hex, cases[c].hex, "length %zu split at %zu", cases[c].n, split);
        }
    }
}

Test(router, matches_params_and_tells_404_from_405) {
    RouteMatch m;
    cr_assert_eq(router_match(api_routes, api_n_routes, "POST", "/v1/requests/42/cancel", &m), 0);
    cr_assert_eq(m.route->id, R_REQUEST_CANCEL);
    cr_assert_str_eq(m.params[0], "42");
    cr_assert_eq(router_match(api_routes, api_n_routes, "GET", "/v1/nodes/dc1-n1", &m), 0);
    cr_assert_str_eq(m.params[0], "dc1-n1");
    cr_assert_eq(router_match(api_routes, api_n_routes, "DELETE", "/v1/requests", &m), -EOPNOTSUPP);
    cr_assert_str_eq(m.allowed, "GET, POST");
    cr_assert_eq(router_match(api_routes, api_n_routes, "GET", "/v1/requests/", &m), -ENOENT);
    cr_assert_eq(router_match(api_routes, api_n_routes, "GET", "/v1/requests/a/b/c", &m), -ENOENT);
    cr_assert_eq(router_match(api_routes, api_n_routes, "GET", "", &m), -ENOENT);
}

/* A path of a route's shape whose parameter is not a name ("café", "a b", "a%2fb" as the
 * raw bytes) is that route's (-EINVAL, the parameter as given), never a path of no route:
 * the API answers 400 saying the name is not valid, not 404 "No such endpoint". */
Test(router, bad_input_a_parameter_that_is_not_a_name_is_told_from_no_route) {
    RouteMatch m;
    cr_assert_eq(router_match(api_routes, api_n_routes, "PUT", "/v1/tenants/caf\xc3\xa9/trust", &m),
                 -EINVAL);
    cr_assert_eq(m.route->id, R_TENANT_TRUST_GRANT);
    cr_assert_eq(m.bad_param, 0);
    cr_assert_str_eq(m.params[0], "caf\xc3\xa9");
    cr_assert_eq(router_match(api_routes, api_n_routes, "GET", "/v1/nodes/a%2fb", &m), -EINVAL);
    cr_assert_eq(router_match(api_routes, api_n_routes, "POST", "/v1/nodes/n1/tasks/a b", &m),
                 -EINVAL);
    cr_assert_eq(m.bad_param, 1);
    char longer[300] = "/v1/nodes/";
    memset(longer + strlen(longer), 'a', 200);
    cr_assert_eq(router_match(api_routes, api_n_routes, "GET", longer, &m), -EINVAL);
    cr_assert_eq(strlen(m.params[0]), ROUTE_PARAM_MAX - 1, "cut to fit");
    /* The method still comes first: a path only other methods answer is a 405. */
    cr_assert_eq(router_match(api_routes, api_n_routes, "GET", "/v1/tenants/caf\xc3\xa9/trust", &m),
                 -EOPNOTSUPP);
    cr_assert_str_eq(m.allowed, "PUT, DELETE");
    cr_assert_eq(router_match(api_routes, api_n_routes, "PUT", "/v1/tenants//trust", &m), -ENOENT);
}

Test(spec, request_parser_is_strict) {
    ApiRequest r;
    Error err = {0};
    const char *ok = "{\"kind\":\"vm\",\"class\":\"nvidia-h100-80gb\",\"count\":2,\"fallback\":["
                     "\"cpu\"],\"wait_s\":60}";
    cr_assert_eq(api_request_parse(ok, strlen(ok), &r, &err), 0, "%s", err.message);
    cr_assert_eq(r.kind, WORKLOAD_VM);
    cr_assert_str_eq(guest_os_to_string(r.guest_os), "linux", "a VM's guest defaults to linux");
    cr_assert_eq(r.n_fallback, 1);
    const char *bad[] = {
            "[]",
            "{}",
            "{\"kind\":\"vm\"}",
            "{\"kind\":\"robot\",\"class\":\"cpu\"}",
            "{\"kind\":\"vm\",\"class\":\"cpu\",\"count\":0}",
            "{\"kind\":\"vm\",\"class\":\"cpu\",\"count\":1.5}",
            "{\"kind\":\"container\",\"class\":\"cpu\",\"guest_os\":\"linux\"}",
            "{\"kind\":\"container\",\"class\":\"cpu\",\"wait_s\":5}",
            "{\"kind\":\"container\",\"class\":\"Bad Name\"}",
            "{\"kind\":\"container\",\"class\":\"cpu\",\"kind\":\"vm\"}",
            "{\"kind\":\"container\",\"class\":\"cpu\",\"runtime\":\"vllm\"}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        Error e = {0};
        cr_assert_lt(api_request_parse(bad[i], strlen(bad[i]), &r, &e), 0, "accepted %s", bad[i]);
        cr_assert_neq(e.message[0], 0);
    }
}

Test(spec, r3_datacenter_node_needs_a_mode_and_vgpu_is_refused) {
    ApiNode *n = malloc(sizeof(*n));
    Error err = {0};
    const char *no_mode = "{\"name\":\"n\",\"site\":\"s\",\"site_kind\":\"datacenter\","
                          "\"platform\":\"linux\",\"owner\":\"o\"}";
    cr_assert_lt(api_node_parse(no_mode, strlen(no_mode), n, &err), 0);
    cr_assert(strstr(err.message, "R3"), "%s", err.message);
    Error e2 = {0};
    const char *vgpu = "{\"name\":\"n\",\"site\":\"s\",\"site_kind\":\"datacenter\",\"platform\":"
                       "\"linux\",\"owner\":\"o\",\"mode\":\"vm-vgpu\"}";
    cr_assert_lt(api_node_parse(vgpu, strlen(vgpu), n, &e2), 0);
    cr_assert(strstr(e2.message, "R2d"), "%s", e2.message);
    Error e3 = {0};
    const char *ok = "{\"name\":\"n\",\"site\":\"s\",\"site_kind\":\"lab\",\"platform\":\"linux\","
                     "\"owner\":\"o\","
                     "\"devices\":[{\"pci\":\"0000:01:00.0\",\"class\":\"nvidia-a100-80gb\","
                     "\"binding\":\"vfio\","
                     "\"mig\":[{\"profile\":\"1g.10gb\",\"start\":0}]}]}";
    cr_assert_eq(api_node_parse(ok, strlen(ok), n, &e3), 0, "%s", e3.message);
    cr_assert_eq(n->n_devices, 1);
    cr_assert(n->devices[0].mig_enabled);
    free(n);
}

Test(spec, r6_device_resource_is_a_nvidia_resource_name) {
    ApiNode *n = malloc(sizeof(*n));
    Error err = {0};
    const char *ok =
            "{\"name\":\"n\",\"site\":\"s\",\"site_kind\":\"datacenter\",\"platform\":\"linux\","
            "\"owner\":\"o\",\"mode\":\"vm-passthrough\",\"device_resource\":\"nvidia.com/"
            "GH100_H100_SXM5_80GB\"}";
    cr_assert_eq(api_node_parse(ok, strlen(ok), n, &err), 0, "%s", err.message);
    cr_expect_str_eq(n->device_resource, "nvidia.com/GH100_H100_SXM5_80GB");
    json_t *j = api_node_to_json(n);
    cr_expect_str_eq(json_string_value(json_object_get(j, "device_resource")),
                     "nvidia.com/GH100_H100_SXM5_80GB");
    json_decref(j);
    const char *bad =
            "{\"name\":\"n\",\"site\":\"s\",\"site_kind\":\"datacenter\",\"platform\":\"linux\","
            "\"owner\":\"o\",\"mode\":\"vm-passthrough\",\"device_resource\":\"gpu x\"}";
    Error e2 = {0};
    cr_expect_lt(api_node_parse(bad, strlen(bad), n, &e2), 0);
    cr_expect(strstr(e2.message, "device_resource"), "%s", e2.message);
    free(n);
}

static int count_rows(const StoreRequest *r, void *userdata) {
    (*(int *)userdata)++;
    return 0;
}

Test(store, migrations_are_numbered_and_state_survives_reopen) {
    char path[] = "/tmp/einsora-store-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    Store *s = NULL;
    Error err = {0};
    cr_assert_eq(store_open(path, &s, &err), 0, "%s", err.message);
    cr_assert_gt(store_schema_version(s), 0);
    cr_assert_eq(store_begin(s, &err), 0);
    StoreRequest r = {.id = 1, .user = "u", .state = "pending", .json = "{}"};
    cr_assert_eq(store_request_put(s, &r, &err), 0);
    cr_assert_eq(store_token_add(s, "abc", "u", "user", NULL, &err), 0);
    cr_assert_eq(store_commit(s, &err), 0);
    /* An uncommitted transaction is gone after reopening (R16: only commits count). */
    cr_assert_eq(store_begin(s, &err), 0);
    r.id = 2;
    cr_assert_eq(store_request_put(s, &r, &err), 0);
    store_close(s);
    cr_assert_eq(store_open(path, &s, &err), 0, "%s", err.message);
    int n = 0;
    cr_assert_eq(store_request_foreach(s, count_rows, &n, &err), 0);
    cr_assert_eq(n, 1);
    StoreToken t = {0};
    cr_assert_eq(store_token_lookup(s, "abc", &t, &err), 0);
    cr_assert_str_eq(t.role, "user");
    store_token_done(&t);
    cr_assert_eq(store_token_lookup(s, "nope", &t, NULL), -ENOENT);
    store_close(s);
    unlink(path);
    char wal[64];
    snprintf(wal, sizeof(wal), "%s-wal", path);
    unlink(wal);
    snprintf(wal, sizeof(wal), "%s-shm", path);
    unlink(wal);
}

/* The feed keeps each event's data as text and answers a read with it spliced in: the answer
 * is JSON whose events carry the data as appended, a user sees only their own, and an event
 * whose texts JSON cannot carry (a store edited by hand) is left out of a read, not the read. */
Test(events, a_read_answers_the_kept_texts_and_leaves_out_an_event_json_cannot_carry) {
    EventLog l;
    cr_assert_eq(events_init(&l), 0);
    cr_assert(events_append(&l, 1000, "alice", "request.waiting", "1", "alice",
                            strdup("{\"reason_code\":\"queued\",\"queue_position\":2}")));
    cr_assert(events_append(&l, 1001, "system", "node.joined", "n\xff1", NULL, NULL));
    cr_assert(events_append(&l, 1002, "bob", "request.placed", "2", "bob",
                            strdup("{\"placement\":{\"node\":\"n1\"}}")));
    events_publish(&l);
    size_t n = 0;
    char *text = events_read(&l, 0, 100, 0, NULL, &n);
    cr_assert(text);
    cr_expect_eq(n, 2, "the event whose object is not UTF-8 is left out");
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    cr_assert(j, "not JSON (%s): %s", je.text, text);
    json_t *evs = json_object_get(j, "events");
    cr_assert_eq(json_array_size(evs), 2);
    cr_expect_eq(json_integer_value(json_object_get(j, "next")), 3);
    json_t *first = json_array_get(evs, 0);
    cr_expect_eq(
            json_integer_value(json_object_get(json_object_get(first, "data"), "queue_position")),
            2);
    cr_expect_str_eq(json_string_value(json_object_get(first, "user")), "alice");
    json_t *second = json_array_get(evs, 1);
    cr_expect_str_eq(
            json_string_value(json_object_get(
                    json_object_get(json_object_get(second, "data"), "placement"), "node")),
            "n1");
    json_decref(j);
    free(text);
    text = events_read(&l, 0, 100, 0, "bob", &n);
    cr_assert(text);
    cr_expect_eq(n, 1);
    cr_expect(strstr(text, "\"request.placed\"") && !strstr(text, "alice"), "%s", text);
    free(text);
    events_done(&l);
}
