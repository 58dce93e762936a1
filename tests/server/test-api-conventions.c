/* test-api-conventions.c: the HTTP habits clients of the Kubernetes and Docker APIs expect
 * from a server: 201 with Location on create, 401 with WWW-Authenticate: Bearer, 415 for a body
 * that is not JSON, 400 for an unknown query parameter or one given twice, 422 for an
 * Idempotency-Key reused with another body, ETag / If-Match on nodes (a stale write answers 412),
 * and listening on IPv6. Real server; headers read with libcurl directly since the project's client
 * keeps only the body. */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "srv-helpers.h"
#include "store/store.h"
#include "util/fileio.h"

static TestServer ts;

static void setup(void) {
    ts_start(&ts);
}

static void teardown(void) {
    ts_stop(&ts);
}

TestSuite(api_conventions, .init = setup, .fini = teardown, .timeout = 60);

typedef struct Answer {
    long status;
    char headers[4096];
    size_t hlen;
} Answer;

static size_t on_header(char *p, size_t size, size_t n, void *ud) {
    Answer *a = ud;
    size_t len = size * n;
    if (a->hlen + len < sizeof(a->headers)) {
        memcpy(a->headers + a->hlen, p, len);
        a->hlen += len;
        a->headers[a->hlen] = 0;
    }
    return len;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
    return size * n;
}

/* One call; extra is a header line such as "If-Match: ..." (may be NULL). */
static Answer call(const char *token, const char *method, const char *path, const char *body,
                   const char *content_type, const char *extra) {
    Answer a = {0};
    CURL *h = curl_easy_init();
    cr_assert(h);
    char url[256], auth[256], ctype[128];
    snprintf(url, sizeof(url), "%s%s", ts.url, path);
    struct curl_slist *hs = NULL;
    if (token) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
        hs = curl_slist_append(hs, auth);
    }
    if (content_type) {
        snprintf(ctype, sizeof(ctype), "Content-Type: %s", content_type);
        hs = curl_slist_append(hs, ctype);
    }
    if (extra)
        hs = curl_slist_append(hs, extra);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hs);
    if (body)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &a);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    cr_assert_eq(curl_easy_perform(h), CURLE_OK);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a.status);
    curl_slist_free_all(hs);
    curl_easy_cleanup(h);
    return a;
}

/* The value of header name (case-insensitive), copied into out; false when absent. */
static bool header(const Answer *a, const char *name, char *out, size_t size) {
    size_t n = strlen(name);
    for (const char *p = a->headers; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : "") {
        if (strncasecmp(p, name, n) == 0 && p[n] == ':') {
            p += n + 1;
            p += strspn(p, " ");
            snprintf(out, size, "%.*s", (int)strcspn(p, "\r\n"), p);
            return true;
        }
    }
    return false;
}

static size_t request_count(void) {
    json_t *all = ts_list_all(&ts, ts.admin, "/v1/requests", "requests");
    size_t n = json_array_size(all);
    json_decref(all);
    return n;
}

/* Start `einsora serve` on a fresh state in dir with the extra arguments (NULL-terminated, at
 * most 8) and wait, with a generous deadline, for its port; *ret_pid gets the process. */
static char *spawn_serve(const char *dir, pid_t *ret_pid, const char *arg0, ...) {
    char state[96], port_file[96];
    snprintf(state, sizeof(state), "%s/state.db", dir);
    snprintf(port_file, sizeof(port_file), "%s/port", dir);
    const char *argv[20] = {EINSORA_BIN, "serve", "--state", state, "--port-file", port_file};
    size_t n = 6;
    va_list ap;
    va_start(ap, arg0);
    for (const char *a = arg0; a && n < 18; a = va_arg(ap, const char *))
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        execv(EINSORA_BIN, (char *const *)argv);
        _exit(127);
    }
    char *port = NULL;
    for (int i = 0; i < 600 && !port; i++)
        if (read_one_line(port_file, &port) < 0)
            nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    cr_assert(port, "the server never listened");
    *ret_pid = pid;
    return port;
}

static void stop_serve(pid_t pid, const char *dir) {
    kill(pid, SIGTERM);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    char cmd[96];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

#define SUBMIT "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}"

Test(api_conventions, api_create_answers_201_with_location_of_the_new_object) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    Answer a = call(ts.admin, "POST", "/v1/requests", SUBMIT, "application/json", NULL);
    cr_assert_eq(a.status, 201);
    char loc[128];
    cr_assert(header(&a, "Location", loc, sizeof(loc)), "%s", a.headers);
    cr_expect_str_eq(loc, "/v1/requests/1");
    Answer b = call(ts.admin, "GET", loc, NULL, NULL, NULL);
    cr_expect_eq(b.status, 200, "the Location names the request");
}

Test(api_conventions, api_401_says_bearer_in_www_authenticate) {
    Answer a = call(NULL, "GET", "/v1/requests", NULL, NULL, NULL);
    cr_assert_eq(a.status, 401);
    char v[128];
    cr_assert(header(&a, "WWW-Authenticate", v, sizeof(v)), "%s", a.headers);
    cr_expect(strncmp(v, "Bearer", 6) == 0, "%s", v);
    a = call("wrong", "GET", "/v1/requests", NULL, NULL, NULL);
    cr_expect_eq(a.status, 401);
    cr_expect(header(&a, "WWW-Authenticate", v, sizeof(v)));
}

Test(api_conventions, bad_input_api_body_that_is_not_json_is_415_and_changes_nothing) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    Answer a = call(ts.admin, "POST", "/v1/requests", SUBMIT, "text/plain", NULL);
    cr_expect_eq(a.status, 415);
    a = call(ts.admin, "POST", "/v1/requests", "kind=container",
             "application/x-www-form-urlencoded", NULL);
    cr_expect_eq(a.status, 415);
    cr_expect_eq(request_count(), 0, "nothing stored");
    a = call(ts.admin, "POST", "/v1/requests", SUBMIT, "application/json; charset=utf-8", NULL);
    cr_expect_eq(a.status, 201, "JSON with a charset is JSON");
}

/* A call that reads no body (cancel, cordon, trust, ...) refuses one it would ignore: the
 * client meant something ({"force":true}) or sent it truncated, and nothing changes. */
Test(api_conventions, bad_input_api_body_on_a_call_that_takes_none_is_400_and_changes_nothing) {
    static const char JSON[] = "application/json";
    ts_add_h100_node(&ts, "n1", "alice", 1);
    ts_add_h100_node(&ts, "n2", "alice", 1);
    char *alice = ts_token(&ts, "alice", "owner", "n1,n2");
    Answer a = call(alice, "POST", "/v1/requests", SUBMIT, "application/json", NULL);
    cr_assert_eq(a.status, 201);
    a = call(alice, "POST", "/v1/requests", SUBMIT, "application/json", NULL);
    cr_assert_eq(a.status, 201);
    a = call(alice, "POST", "/v1/requests", SUBMIT, "application/json", NULL);
    cr_assert_eq(a.status, 201); /* the third waits: two GPUs */
    static const char *const bad[] = {"{\"x\":", "{\"force\":true}", "[[[", "x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_expect_eq(call(alice, "POST", "/v1/requests/3/cancel", bad[i], JSON, NULL).status, 400,
                     "%s", bad[i]);
        cr_expect_eq(call(alice, "POST", "/v1/requests/1/release", bad[i], JSON, NULL).status, 400,
                     "%s", bad[i]);
        cr_expect_eq(call(ts.admin, "POST", "/v1/nodes/n1/cordon", bad[i], JSON, NULL).status, 400,
                     "%s", bad[i]);
        cr_expect_eq(call(ts.admin, "PUT", "/v1/tenants/bob/trust", bad[i], JSON, NULL).status, 400,
                     "%s", bad[i]);
    }
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, alice, "GET", "/v1/requests/3", NULL, &j), 200);
    cr_expect_str_eq(json_string_value(json_object_get(j, "state")), "pending", "not cancelled");
    json_decref(j);
    cr_assert_eq(ts_call(&ts, alice, "GET", "/v1/requests/1", NULL, &j), 200);
    cr_expect_str_eq(json_string_value(json_object_get(j, "state")), "placed", "not released");
    json_decref(j);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/n1", NULL, &j), 200);
    cr_expect(!json_is_true(json_object_get(j, "cordoned")), "not cordoned");
    json_decref(j);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/tenants/trusted", NULL, &j), 200);
    char *trusted = json_dumps(j, JSON_COMPACT);
    cr_expect(trusted && !strstr(trusted, "bob"), "not trusted: %s", trusted);
    free(trusted);
    json_decref(j);
    /* No body, or an empty object, is what such a call takes. */
    cr_expect_eq(call(alice, "POST", "/v1/requests/3/cancel", " { } ", JSON, NULL).status, 200);
    cr_expect_eq(call(ts.admin, "POST", "/v1/nodes/n1/cordon", NULL, NULL, NULL).status, 200);
    free(alice);
}

Test(api_conventions, bad_input_api_unknown_query_parameter_is_400) {
    Answer a = call(ts.admin, "GET", "/v1/requests?stat=pending", NULL, NULL, NULL);
    cr_expect_eq(a.status, 400, "a typo must not list everything");
    a = call(ts.admin, "GET", "/v1/requests?state=pending&limit=5", NULL, NULL, NULL);
    cr_expect_eq(a.status, 200);
    a = call(ts.admin, "GET", "/v1/nodes?name=x", NULL, NULL, NULL);
    cr_expect_eq(a.status, 400);
    a = call(ts.admin, "GET", "/v1/events?after=0&wait=0", NULL, NULL, NULL);
    cr_expect_eq(a.status, 200);
    a = call(ts.admin, "GET", "/v1/classes?all=1", NULL, NULL, NULL);
    cr_expect_eq(a.status, 400);
    /* A parameter without '=' is no value, never read as not given (the defaults). */
    static const char *const valueless[] = {"/v1/requests?limit", "/v1/requests?state",
                                            "/v1/events?after", "/v1/events?wait&after=0"};
    for (size_t i = 0; i < sizeof(valueless) / sizeof(valueless[0]); i++) {
        json_t *j = NULL;
        cr_expect_eq(ts_call(&ts, ts.admin, "GET", valueless[i], NULL, &j), 400, "%s",
                     valueless[i]);
        const char *msg = json_string_value(json_object_get(j, "message"));
        cr_expect(msg && strstr(msg, "has no value"), "%s: %s", valueless[i], msg ? msg : "");
        json_decref(j);
    }
    /* The newest requests in one page take neither a cursor nor a limit. */
    a = call(ts.admin, "GET", "/v1/requests?last=5", NULL, NULL, NULL);
    cr_expect_eq(a.status, 200);
    a = call(ts.admin, "GET", "/v1/requests?last=5&limit=5", NULL, NULL, NULL);
    cr_expect_eq(a.status, 400);
    a = call(ts.admin, "GET", "/v1/requests?last=0", NULL, NULL, NULL);
    cr_expect_eq(a.status, 400);
}

/* A parameter given twice ("limit=1&limit=abc") is refused on every route that reads
 * parameters: taking the first one silently would answer a question the client did not ask. */
Test(api_conventions, bad_input_api_query_parameter_given_twice_is_400) {
    static const char *const paths[][2] = {
            {"/v1/capacity?class=cpu&class=nope", "class"},
            {"/v1/requests?limit=1&limit=abc", "limit"},
            {"/v1/requests?limit=1&state=placed&limit=1", "limit"},
            {"/v1/events?after=1&after=20", "after"},
            {"/v1/nodes?site=a&site=a", "site"},
    };
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        json_t *j = NULL;
        cr_expect_eq(ts_call(&ts, ts.admin, "GET", paths[i][0], NULL, &j), 400, "%s", paths[i][0]);
        char want[96];
        snprintf(want, sizeof(want), "Query parameter '%s' is given twice.", paths[i][1]);
        const char *msg = json_string_value(json_object_get(j, "message"));
        cr_expect_str_eq(msg ? msg : "", want, "%s", paths[i][0]);
        json_decref(j);
    }
    /* Each once is still fine, and an unknown one is still named as unknown. */
    cr_expect_eq(ts_call(&ts, ts.admin, "GET", "/v1/requests?state=pending&limit=5", NULL, NULL),
                 200);
    json_t *j = NULL;
    cr_expect_eq(ts_call(&ts, ts.admin, "GET", "/v1/requests?x=1&x=2", NULL, &j), 400);
    cr_expect(strstr(json_string_value(json_object_get(j, "message")), "Unknown query parameter"));
    json_decref(j);
}

Test(api_conventions, bad_input_api_idempotency_key_reused_with_another_body_is_422) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    cr_assert_eq(ts_call_key(&ts, ts.admin, "POST", "/v1/requests", SUBMIT, "k", NULL), 201);
    json_t *j = NULL;
    cr_expect_eq(ts_call_key(&ts, ts.admin, "POST", "/v1/requests",
                             "{\"kind\":\"vm\",\"class\":\"nvidia-h100-80gb\"}", "k", &j),
                 422);
    cr_expect_str_eq(json_string_value(json_object_get(j, "code")), "idempotency_key_reused");
    json_decref(j);
    cr_expect_eq(request_count(), 1);
    /* A key with a byte the client cannot see (a control byte, non-ASCII, a trailing space)
     * would make "the same" key a different one: refused, nothing stored. */
    static const char *const bad[] = {"Idempotency-Key: k\x01", "Idempotency-Key: k\xe9",
                                      "Idempotency-Key: k1 "};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_expect_eq(
                call(ts.admin, "POST", "/v1/requests", SUBMIT, "application/json", bad[i]).status,
                400, "%zu", i);
    cr_expect_eq(request_count(), 1);
}

static char *node_body(const char *cpus) {
    char *b = NULL;
    cr_assert(asprintf(&b,
                       "{\"name\":\"n1\",\"site\":\"dc1\",\"site_kind\":\"datacenter\","
                       "\"platform\":\"linux\",\"owner\":\"alice\",\"mode\":\"container\","
                       "\"cpus\":%s,\"devices\":[{\"pci\":\"0000:17:00.0\",\"class\":"
                       "\"nvidia-h100-80gb\",\"memory_gb\":80}]}",
                       cpus) > 0);
    return b;
}

Test(api_conventions, api_node_etag_and_if_match_refuse_a_stale_write_with_412) {
    char *v1 = node_body("64"), *v2 = node_body("96"), *v3 = node_body("128");
    Answer a = call(ts.admin, "POST", "/v1/nodes", v1, "application/json", NULL);
    cr_assert_eq(a.status, 201);
    char loc[128], etag[64], etag2[64], hdr[128];
    cr_expect(header(&a, "Location", loc, sizeof(loc)) && strcmp(loc, "/v1/nodes/n1") == 0);
    a = call(ts.admin, "GET", "/v1/nodes/n1", NULL, NULL, NULL);
    cr_assert(header(&a, "ETag", etag, sizeof(etag)), "%s", a.headers);
    cr_expect(etag[0] == '"', "a quoted strong validator: %s", etag);
    /* Two writers read the same version; the first write wins, the second is told. */
    snprintf(hdr, sizeof(hdr), "If-Match: %s", etag);
    a = call(ts.admin, "PUT", "/v1/nodes/n1", v2, "application/json", hdr);
    cr_expect_eq(a.status, 200);
    cr_assert(header(&a, "ETag", etag2, sizeof(etag2)));
    cr_expect_str_neq(etag, etag2, "a new version, a new ETag");
    a = call(ts.admin, "PUT", "/v1/nodes/n1", v3, "application/json", hdr);
    cr_expect_eq(a.status, 412, "the stale write is refused");
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/n1", NULL, &j), 200);
    cr_expect_eq(json_integer_value(json_object_get(j, "cpus")), 96, "the first write stands");
    json_decref(j);
    a = call(ts.admin, "GET", "/v1/nodes/n1", NULL, NULL, NULL);
    char now[64];
    cr_assert(header(&a, "ETag", now, sizeof(now)));
    cr_expect_str_eq(now, etag2, "GET tells the version the PUT answered");
    /* Without If-Match a write is unconditional, as before (the agent's push). */
    a = call(ts.admin, "PUT", "/v1/nodes/n1", v3, "application/json", NULL);
    cr_expect_eq(a.status, 200);
    free(v1), free(v2), free(v3);
}

Test(api_conventions, api_listens_on_ipv6_loopback) {
    char dir[] = "/tmp/einsora-v6-XXXXXX";
    cr_assert(mkdtemp(dir));
    pid_t pid;
    char *port = spawn_serve(dir, &pid, "--listen", "[::1]:0", NULL);
    char url[64];
    snprintf(url, sizeof(url), "http://[::1]:%s", port);
    free(port);
    Client *c = NULL;
    Error e = {0};
    cr_assert_eq(client_new(url, NULL, &c, &e), 0);
    long st = 0;
    json_t *j = NULL;
    cr_assert_eq(client_call(c, "GET", "/healthz", NULL, NULL, &st, &j, &e), 0, "%s", e.message);
    cr_expect_eq(st, 200);
    json_decref(j);
    client_free(c);
    stop_serve(pid, dir);
}

Test(api_conventions, api_events_cursor_older_than_retention_answers_410_with_the_oldest) {
    ts_kill(&ts, false);
    ts.extra[0] = "--retention", ts.extra[1] = "1s";
    ts_spawn(&ts);
    ts_add_h100_node(&ts, "n1", "alice", 1);
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/requests", SUBMIT, &j), 201);
    /* End it (a refusal already did): its events then leave after the retention. */
    const char *state = json_string_value(json_object_get(j, "state"));
    char path[64] = "";
    if (strcmp(state, "refused") != 0)
        snprintf(path, sizeof(path), "/v1/requests/%lld/%s",
                 (long long)json_integer_value(json_object_get(j, "id")),
                 strcmp(state, "pending") == 0 ? "cancel" : "release");
    json_decref(j);
    if (path[0])
        cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, NULL, NULL), 200);
    /* The ended request's events leave after the retention: poll, with a generous deadline. */
    long st = 0;
    for (int i = 0; i < 3000 && st != 410; i++) {
        j = NULL;
        st = ts_call(&ts, ts.admin, "GET", "/v1/events?after=1", NULL, &j);
        if (st == 410)
            break;
        json_decref(j);
        usleep(10000); /* a deadline, not a measure: 30 s */
    }
    cr_assert_eq(st, 410, "a cursor before what is kept is told, not skipped silently");
    cr_expect_str_eq(json_string_value(json_object_get(j, "code")), "gone");
    json_int_t oldest = json_integer_value(json_object_get(j, "oldest"));
    cr_expect_gt(oldest, 1);
    json_decref(j);
    snprintf(path, sizeof(path), "/v1/events?after=%lld", (long long)oldest);
    cr_expect_eq(ts_call(&ts, ts.admin, "GET", path, NULL, NULL), 200,
                 "relisting from the oldest works");
    cr_expect_eq(ts_call(&ts, ts.admin, "GET", "/v1/events?after=0", NULL, NULL), 200,
                 "after=0 means from the oldest kept");
}

Test(api_conventions, api_plain_http_off_loopback_is_refused_unless_told) {
    char dir[] = "/tmp/einsora-tls-XXXXXX", state[64];
    cr_assert(mkdtemp(dir));
    snprintf(state, sizeof(state), "%s/state.db", dir);
    char *out = NULL, *err = NULL;
    /* Refused before anything is bound. */
    cr_expect_eq(run_einsora(&out, &err, "serve", "--listen", "0.0.0.0:0", "--state", state, NULL),
                 1);
    cr_expect(strstr(err, "refusing to serve tokens over plain HTTP") &&
                      strstr(err, "--insecure-plain-http"),
              "%s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "serve", "--listen", "127.0.0.1:0", "--state", state,
                             "--tls-cert", TEST_FIXTURES "/tls/server.crt", NULL),
                 2, "a certificate without its key: a command line that is wrong");
    cr_expect(strstr(err, "both --tls-cert and --tls-key"), "%s", err);
    free(out), free(err);
    /* The key given as the certificate and the other way round: named, before any state. */
    cr_expect_eq(run_einsora(&out, &err, "serve", "--listen", "127.0.0.1:0", "--state", state,
                             "--tls-cert", TEST_FIXTURES "/tls/server.key", "--tls-key",
                             TEST_FIXTURES "/tls/server.crt", NULL),
                 1);
    cr_expect(strstr(err, "holds no PEM certificate"), "%s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "serve", "--listen", "127.0.0.1:0", "--state", state,
                             "--tls-cert", TEST_FIXTURES "/tls/server.crt", "--tls-key",
                             TEST_FIXTURES "/tls/server.crt", NULL),
                 1);
    cr_expect(strstr(err, "holds no PEM private key"), "%s", err);
    free(out), free(err);
    /* A pci.ids file named on the command line is not optional. */
    cr_expect_eq(run_einsora(&out, &err, "serve", "--listen", "127.0.0.1:0", "--state", state,
                             "--pci-ids", "/nonexistent-einsora-pci.ids", NULL),
                 1);
    cr_expect(strstr(err, "cannot read pci.ids database /nonexistent-einsora-pci.ids"), "%s", err);
    free(out), free(err);
    cr_expect_eq(access(state, F_OK), -1, "no state file made");
    char cmd[96];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

Test(api_conventions, api_serves_https_with_the_given_certificate) {
    char dir[] = "/tmp/einsora-tls-XXXXXX";
    cr_assert(mkdtemp(dir));
    pid_t pid;
    char *port = spawn_serve(dir, &pid, "--listen", "127.0.0.1:0", "--tls-cert",
                             TEST_FIXTURES "/tls/server.crt", "--tls-key",
                             TEST_FIXTURES "/tls/server.key", NULL);
    char url[64];
    snprintf(url, sizeof(url), "https://127.0.0.1:%s", port);
    free(port);
    char *out = NULL, *err = NULL;
    /* The project's client, told to trust the test certificate. */
    Client *c = NULL;
    Error e = {0};
    cr_assert_eq(client_new(url, NULL, &c, &e), 0);
    cr_assert_eq(client_set_ca_file(c, TEST_FIXTURES "/tls/server.crt", &e), 0);
    long st = 0;
    json_t *j = NULL;
    cr_assert_eq(client_call(c, "GET", "/healthz", NULL, NULL, &st, &j, &e), 0, "%s", e.message);
    cr_expect_eq(st, 200);
    json_decref(j);
    client_free(c);
    /* Without trusting that certificate the client refuses the server. */
    cr_assert_eq(client_new(url, NULL, &c, &e), 0);
    cr_expect_lt(client_call(c, "GET", "/healthz", NULL, NULL, &st, &j, &e), 0);
    /* ... saying why, and how to trust it: not only "certificate was not OK". */
    cr_expect(strstr(e.message, "certificate") && strstr(e.message, "EINSORA_CACERT"), "%s",
              e.message);
    client_free(c);
    /* Plain http to it says it may be an https server. */
    char plain[64];
    snprintf(plain, sizeof(plain), "http://%s", url + strlen("https://"));
    cr_assert_eq(client_new(plain, NULL, &c, &e), 0);
    cr_expect_lt(client_call(c, "GET", "/healthz", NULL, NULL, &st, &j, &e), 0);
    cr_expect(strstr(e.message, "https://"), "%s", e.message);
    client_free(c);
    /* The CLI trusts it through $EINSORA_CACERT: a 401 (no token) proves the TLS talk. */
    setenv("EINSORA_CACERT", TEST_FIXTURES "/tls/server.crt", 1);
    cr_expect_eq(run_einsora(&out, &err, "nodes", "--server", url, "--token", "x", NULL), 4, "%s",
                 err);
    unsetenv("EINSORA_CACERT");
    free(out), free(err);
    /* An agent reaches it the same way: it registers its node over TLS with the CA given in
     * $EINSORA_CACERT (docs/install.md), as the CLI does. */
    char db[96], tok[96], sys[96], cmd[1024];
    snprintf(db, sizeof(db), "%s/state.db", dir);
    snprintf(tok, sizeof(tok), "%s/token", dir);
    snprintf(sys, sizeof(sys), "%s/sys/bus/pci/devices", dir);
    snprintf(cmd, sizeof(cmd),
             "mkdir -p %s && %s token create --state %s --user tls-agent --role "
             "node --nodes tlsbox > %s && chmod 600 %s",
             sys, EINSORA_BIN, db, tok, tok);
    cr_assert_eq(system(cmd), 0);
    snprintf(sys, sizeof(sys), "%s/sys", dir);
    pid_t agent = fork();
    cr_assert(agent >= 0);
    if (agent == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1), dup2(null, 2);
        setenv("EINSORA_CACERT", TEST_FIXTURES "/tls/server.crt", 1);
        char state[96];
        snprintf(state, sizeof(state), "%s/agent", dir);
        execl(EINSORA_BIN, EINSORA_BIN, "agent", "run", "--server", url, "--token-file", tok,
              "--name", "tlsbox", "--owner", "root", "--heartbeat", "1", "--state-dir", state,
              "--sysfs-root", sys, "--dev-root", sys, "--no-nvml", "--catalog",
              TEST_DATA "/catalog.yaml", "--simulate", NULL);
        _exit(127);
    }
    char *admin = NULL;
    snprintf(cmd, sizeof(cmd), "%s token create --state %s --user root --role admin", EINSORA_BIN,
             db);
    FILE *pf = popen(cmd, "r");
    cr_assert(pf);
    char line[256] = "";
    cr_assert(fgets(line, sizeof(line), pf));
    pclose(pf);
    line[strcspn(line, "\n")] = 0;
    admin = line;
    cr_assert_eq(client_new(url, admin, &c, &e), 0);
    cr_assert_eq(client_set_ca_file(c, TEST_FIXTURES "/tls/server.crt", &e), 0);
    st = 0;
    for (int i = 0; i < 600 && st != 200; i++) { /* a deadline, not a measure */
        j = NULL;
        (void)client_call(c, "GET", "/v1/nodes/tlsbox", NULL, NULL, &st, &j, &e);
        json_decref(j);
        if (st != 200)
            nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    cr_expect_eq(st, 200, "the agent registered its node over TLS");
    client_free(c);
    kill(agent, SIGTERM);
    waitpid(agent, NULL, 0);
    stop_serve(pid, dir);
}

/* The stored data of the first event of type `type` (compact text, caller frees). */
static int find_event(const StoreEvent *e, void *userdata) {
    char **found = userdata;
    if (!*found && strcmp(e->type, "request.placed") == 0)
        *found = strdup(e->json);
    return 0;
}

/* A request decided at once is answered with the text the store write used (encoded once for
 * both): the 201 answer is the document a read gives, and the same after a hard restart that
 * rebuilds the state from the store alone. The request.placed event's row holds, byte for
 * byte, the compact form of the data the feed serves (its placement is spliced in as text). */
Test(api_conventions, api_submit_answer_is_the_committed_record) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *alice = ts_token(&ts, "alice", "owner", "n1"); /* the owner's container is placed */
    json_t *answer = NULL, *read = NULL, *reread = NULL, *feed = NULL;
    cr_assert_eq(ts_call(&ts, alice, "POST", "/v1/requests", SUBMIT, &answer), 201);
    cr_assert_str_eq(json_string_value(json_object_get(answer, "state")), "placed");
    cr_assert(json_object_get(answer, "placement"));
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/requests/1", NULL, &read), 200);
    cr_expect(json_equal(answer, read), "the answer is the stored record");
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/events?after=0", NULL, &feed), 200);
    json_t *placed_data = NULL, *ev;
    size_t i;
    json_array_foreach(
            json_object_get(feed, "events"), i,
            ev) if (strcmp(json_string_value(json_object_get(ev, "type")), "request.placed") == 0)
            placed_data = json_object_get(ev, "data");
    cr_assert(json_object_get(placed_data, "placement"), "the feed's event has the placement");
    cr_expect(json_equal(json_object_get(placed_data, "placement"),
                         json_object_get(answer, "placement")));
    ts_kill(&ts, true);

    Store *st = NULL;
    Error err = {0};
    char *stored = NULL;
    cr_assert_eq(store_open(ts.state, &st, &err), 0, "%s", err.message);
    cr_assert_eq(store_event_foreach(st, 0, find_event, &stored, &err), 0, "%s", err.message);
    store_close(st);
    char *want = json_dumps(placed_data, JSON_COMPACT);
    cr_assert(stored && want);
    cr_expect_str_eq(stored, want, "the event row is the feed's data, compact");
    free(stored);
    free(want);

    ts_spawn(&ts);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/requests/1", NULL, &reread), 200);
    cr_expect(json_equal(answer, reread), "the committed row holds what was answered");
    json_decref(answer);
    json_decref(read);
    json_decref(reread);
    json_decref(feed);
    free(alice);
}

/* An activation and a release are answered with the text their store write used, like a
 * submission: the answer is what a read gives and what a hard restart rebuilds. The
 * placement's text is kept while the request is live; the activation's url changes the
 * placement, so the stored record and the answer must show it, not the text from before. */
Test(api_conventions, r16_transition_answers_are_the_committed_record) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *alice = ts_token(&ts, "alice", "owner", "n1");
    char *agent = ts_token(&ts, "n1-agent", "node", "n1");
    json_t *placed = NULL, *active = NULL, *released = NULL, *read = NULL;
    cr_assert_eq(ts_call(&ts, alice, "POST", "/v1/requests", SUBMIT, &placed), 201);
    cr_assert_str_eq(json_string_value(json_object_get(placed, "state")), "placed");
    cr_assert_eq(ts_call(&ts, agent, "POST", "/v1/requests/1/activate",
                         "{\"url\":\"http://n1:8888/\"}", &active),
                 200);
    cr_assert_str_eq(json_string_value(json_object_get(active, "state")), "active");
    cr_expect_str_eq(
            json_string_value(json_object_get(json_object_get(active, "placement"), "url")),
            "http://n1:8888/", "the answer shows the activation's url");
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/requests/1", NULL, &read), 200);
    cr_expect(json_equal(active, read), "the activation's answer is the stored record");
    json_decref(read);
    cr_assert_eq(ts_call(&ts, alice, "POST", "/v1/requests/1/release", NULL, &released), 200);
    cr_assert_str_eq(json_string_value(json_object_get(released, "state")), "released");
    cr_expect(json_equal(json_object_get(released, "placement"),
                         json_object_get(active, "placement")),
              "the released record keeps the placement as it was");
    ts_kill(&ts, true);
    ts_spawn(&ts);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/requests/1", NULL, &read), 200);
    cr_expect(json_equal(released, read), "the committed row holds what was answered");
    json_decref(read);
    json_decref(placed);
    json_decref(active);
    json_decref(released);
    free(alice);
    free(agent);
}

/* A node's answers are text written by the node's encoder (GET, the list, a change), and one
 * change's answer ("already in that mode", which adds a message) still dumps the tree the
 * same encoder builds. Member for member the same, for a node with an agent and an open task,
 * one with a mode switch under way, and a plain one. */
Test(api_conventions, r16_a_node_reads_the_same_alone_in_the_list_and_in_a_changes_answer) {
    ts_add_h100_node(&ts, "plain", "ops", 2);
    ts_add_h100_node(&ts, "switching", "ops", 2);
    ts_add_unchecked_gpu_node(&ts, "checked");
    long st = ts_call(&ts, ts.admin, "POST", "/v1/nodes/switching/mode",
                      "{\"mode\":\"vm-passthrough\"}", NULL);
    cr_assert(st == 200 || st == 202, "the mode switch was refused: %ld", st);
    const char *names[] = {"plain", "switching", "checked"};
    /* the mode each is in already: a switch to it changes nothing (the switching one has none) */
    const char *same_mode[] = {"container", NULL, "vm-passthrough"};
    for (size_t i = 0; i < 3; i++) {
        char path[64];
        json_t *changed = NULL, *alone = NULL, *list = NULL, *tree = NULL;
        snprintf(path, sizeof(path), "/v1/nodes/%s/cordon", names[i]);
        cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, NULL, &changed), 200);
        snprintf(path, sizeof(path), "/v1/nodes/%s", names[i]);
        cr_assert_eq(ts_call(&ts, ts.admin, "GET", path, NULL, &alone), 200);
        cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes", NULL, &list), 200);
        json_t *listed = NULL, *x;
        size_t k;
        json_array_foreach(json_object_get(list, "nodes"), k, x) {
            if (STREQ(json_string_value(json_object_get(x, "name")), names[i]))
                listed = x;
        }
        cr_assert_not_null(listed, "%s is not listed", names[i]);
        char *a = json_dumps(changed, JSON_COMPACT), *b = json_dumps(alone, JSON_COMPACT),
             *c = json_dumps(listed, JSON_COMPACT);
        cr_expect_str_eq(b, a, "%s: GET and the cordon's answer differ", names[i]);
        cr_expect_str_eq(c, a, "%s: the list and the cordon's answer differ", names[i]);
        cr_expect(json_object_get(alone, "cpu_used") && json_object_get(alone, "tasks"),
                  "%s: the server's members are missing: %s", names[i], b);
        if (i == 1)
            cr_expect(json_object_get(alone, "switch"), "no switch under way: %s", b);
        if (i == 2)
            cr_expect(json_object_get(alone, "agent") &&
                              json_array_size(json_object_get(alone, "tasks")) == 1,
                      "no agent or no open check: %s", b);
        if (same_mode[i]) {
            char body[64];
            snprintf(path, sizeof(path), "/v1/nodes/%s/mode", names[i]);
            snprintf(body, sizeof(body), "{\"mode\":\"%s\"}", same_mode[i]);
            cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, body, &tree), 200);
            cr_expect_not_null(json_object_get(tree, "message"), "not the 'already' answer");
            json_object_del(tree, "message");
            char *t = json_dumps(tree, JSON_COMPACT);
            cr_expect_str_eq(t, b, "%s: the tree's answer and GET differ", names[i]);
            free(t);
            json_decref(tree);
        }
        free(a);
        free(b);
        free(c);
        json_decref(changed);
        json_decref(alone);
        json_decref(list);
    }
}
