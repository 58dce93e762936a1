/* test-web.c: the dashboard's server side against the real `einsora serve`: the embedded
 * page and its security headers, who-am-I, and the capacity ring that follows allocations. */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "helpers.h"
#include "util/macro.h"
#include "srv-helpers.h"

static TestServer ts;
static void setup(void) {
    ts_start(&ts);
}
static void teardown(void) {
    ts_stop(&ts);
}
TestSuite(web, .init = setup, .fini = teardown, .timeout = 120);

typedef struct Got {
    char *headers, *body;
    size_t hlen, blen;
} Got;

static size_t add(char **buf, size_t *len, const char *p, size_t n) {
    char *b = realloc(*buf, *len + n + 1);
    cr_assert(b);
    memcpy(b + *len, p, n);
    *len += n;
    b[*len] = 0;
    *buf = b;
    return n;
}
static size_t on_header(char *p, size_t sz, size_t n, void *u) {
    Got *g = u;
    return add(&g->headers, &g->hlen, p, sz * n);
}
static size_t on_body(char *p, size_t sz, size_t n, void *u) {
    Got *g = u;
    return add(&g->body, &g->blen, p, sz * n);
}

/* A request without a token with `method` (GET, HEAD, POST...). */
static long call_method(const char *method, const char *path, Got *g) {
    char url[256];
    snprintf(url, sizeof(url), "%s%s", ts.url, path);
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    else if (strcmp(method, "GET") != 0)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, g);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, g);
    cr_assert_eq(curl_easy_perform(c), CURLE_OK);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    return status;
}

/* A plain GET without a token: what a browser's first load sends. */
static long get(const char *path, Got *g) {
    return call_method("GET", path, g);
}

static void got_done(Got *g) {
    free(g->headers);
    free(g->body);
}

Test(web, web_page_is_served_at_root_with_a_strict_csp) {
    Got g = {0};
    cr_assert_eq(get("/", &g), 200);
    cr_assert(strstr(g.body, "<script type=\"module\" src=\"/app.js\">"), "%s", g.body);
    cr_assert(strcasestr(g.headers, "content-type: text/html; charset=utf-8"));
    cr_assert(strcasestr(g.headers,
                         "content-security-policy: default-src 'none'; script-src 'self';"));
    cr_assert(strcasestr(g.headers, "frame-ancestors 'none'"));
    cr_assert(!strstr(g.headers, "unsafe-inline"));
    cr_assert(strcasestr(g.headers, "x-content-type-options: nosniff"));
    cr_assert(strcasestr(g.headers, "referrer-policy: no-referrer"));
    cr_assert(strcasestr(g.headers, "x-frame-options: DENY"));
    got_done(&g);

    Got js = {0};
    cr_assert_eq(get("/app.js", &js), 200);
    cr_assert(strcasestr(js.headers, "content-type: text/javascript"));
    cr_assert(strstr(js.body, "import"));
    got_done(&js);

    /* HEAD answers as GET without the body; another method is 405 naming the two. */
    Got head = {0};
    cr_assert_eq(call_method("HEAD", "/app.js", &head), 200);
    cr_assert(strcasestr(head.headers, "content-type: text/javascript"));
    got_done(&head);
    Got post = {0};
    cr_assert_eq(call_method("POST", "/app.js", &post), 405);
    cr_assert(strcasestr(post.headers, "allow: GET, HEAD"), "%s", post.headers);
    got_done(&post);

    /* Not a file of the page and not the API: the API's own 404, with the headers too. */
    Got none = {0};
    cr_assert_eq(get("/nope.js", &none), 404);
    cr_assert(strcasestr(none.headers, "x-content-type-options: nosniff"));
    got_done(&none);
}

Test(web, web_whoami_answers_the_tokens_user_and_role_only) {
    Got g = {0};
    cr_assert_eq(get("/v1/whoami", &g), 401);
    got_done(&g);
    _cleanup_free_ char *tok = ts_token(&ts, "alice", "owner", "n1,n2");
    json_t *me = NULL;
    cr_assert_eq(ts_call(&ts, tok, "GET", "/v1/whoami", NULL, &me), 200);
    cr_assert_str_eq(json_string_value(json_object_get(me, "user")), "alice");
    cr_assert_str_eq(json_string_value(json_object_get(me, "role")), "owner");
    json_t *nodes = json_object_get(me, "nodes");
    cr_assert_eq(json_array_size(nodes), 2);
    cr_assert_str_eq(json_string_value(json_array_get(nodes, 1)), "n2");
    json_decref(me);
    /* A named node someone else owns is not alice's to act on: not listed. */
    ts_add_h100_node(&ts, "n2", "bob", 1);
    cr_assert_eq(ts_call(&ts, tok, "GET", "/v1/whoami", NULL, &me), 200);
    nodes = json_object_get(me, "nodes");
    cr_assert_eq(json_array_size(nodes), 1);
    cr_assert_str_eq(json_string_value(json_array_get(nodes, 0)), "n1");
    json_decref(me);
}

/* The newest point of a class in the ring: allocated, free. */
static bool newest_point(const char *cls, json_int_t *alloc, json_int_t *free_) {
    json_t *h = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/capacity/history", NULL, &h), 200);
    bool found = false;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(h, "classes"), i, c) {
        json_t *pts = json_object_get(c, "points");
        if (strcmp(json_string_value(json_object_get(c, "class")), cls) || !json_array_size(pts))
            continue;
        json_t *p = json_array_get(pts, json_array_size(pts) - 1);
        *alloc = json_integer_value(json_array_get(p, 1));
        *free_ = json_integer_value(json_array_get(p, 2));
        found = true;
    }
    json_decref(h);
    return found;
}

Test(web, r6_capacity_history_follows_allocations) {
    ts_add_h100_node(&ts, "n1", "root", 4);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/requests",
                         "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\",\"count\":3}",
                         NULL),
                 201);
    /* The newest sample follows the state within CAP_HISTORY_REFRESH_MS: poll, generous deadline.
     */
    json_int_t a = -1, f = -1;
    time_t end = time(NULL) + 60;
    while (!(newest_point("nvidia-h100-80gb", &a, &f) && a == 3 && f == 1) && time(NULL) < end)
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    cr_assert_eq(a, 3);
    cr_assert_eq(f, 1);
}

/* R6: every class with units is charted, however many classes the catalog has before it (the
 * slots go to classes with units, not to the catalog's first ones): an A100-40GB's MIG slice
 * classes come late in the shipped catalog. */
Test(web, r6_capacity_history_charts_every_class_with_units) {
    cr_assert_eq(ts_call(&ts, ts.admin, "PUT", "/v1/nodes/a1",
                         "{\"name\":\"a1\",\"site\":\"lab\",\"site_kind\":\"lab\",\"platform\":"
                         "\"linux\",\"owner\":\"root\",\"cpus\":8,\"devices\":[{\"pci\":"
                         "\"0000:01:00.0\",\"class\":\"nvidia-a100-40gb\",\"memory_gb\":40,"
                         "\"binding\":\"host\",\"mig_enabled\":true}]}",
                         NULL),
                 201);
    json_t *cap = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/capacity", NULL, &cap), 200);
    size_t i, with_units = 0;
    json_t *row;
    time_t end = time(NULL) + 60;
    json_array_foreach(json_object_get(cap, "classes"), i, row) {
        const char *cls = json_string_value(json_object_get(row, "class"));
        if (!json_is_null(json_object_get(row, "site")) ||
            json_integer_value(json_object_get(row, "total")) == 0)
            continue;
        with_units++;
        json_int_t a = -1, f = -1;
        while (!newest_point(cls, &a, &f) && time(NULL) < end)
            nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
        cr_expect(newest_point(cls, &a, &f), "class %s has units but no series", cls);
    }
    cr_expect_gt(with_units, 1u, "the MIG slice classes have units");
    json_decref(cap);
}
