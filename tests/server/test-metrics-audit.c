/* test-metrics-audit.c: /metrics counts nothing twice. For each family, the sum over all its
 * labels is compared with what the test made happen: each request's first decision once,
 * a waiting request's later placement once, every answered call once under its exact status
 * code (and in its route's latency histogram), each GPU once (no "total" state beside its
 * parts), CPU cores apart from GPUs, and a mode switch at exactly one step. Against the real
 * server. */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv-helpers.h"

static TestServer ts;

static void setup(void) {
    ts_start(&ts);
    ts_add_h100_node(&ts, "n1", "root", 2);
}

static void teardown(void) {
    ts_stop(&ts);
}

TestSuite(metrics_audit, .init = setup, .fini = teardown, .timeout = 120);

/* The sum of the samples of family `name` (exactly: not name_bucket) whose labels contain
 * every one of the NULL-terminated `want` ("state=\"free\"", ...). */
static double sum_of(const char *text, const char *name, const char *const *want) {
    double total = 0;
    size_t n = strlen(name);
    for (const char *line = text; line && *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, name, n) != 0 || (line[n] != '{' && line[n] != ' '))
            continue;
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char sample[1024];
        snprintf(sample, sizeof(sample), "%.*s", (int)len, line);
        bool match = true;
        for (size_t i = 0; want && want[i]; i++)
            match = match && strstr(sample, want[i]);
        if (match)
            total += strtod(strrchr(sample, ' ') + 1, NULL);
    }
    return total;
}

#define SUM(text, name, ...) sum_of(text, name, (const char *const[]){__VA_ARGS__, NULL})

static const char h100[] = "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}";

Test(metrics_audit, metrics_counters_summed_over_their_labels_count_each_thing_once) {
    long a = ts_submit(&ts, h100), b = ts_submit(&ts, h100), c = ts_submit(&ts, h100);
    json_decref(ts_wait_state(&ts, a, "placed", NULL));
    json_decref(ts_wait_state(&ts, b, "placed", NULL));
    json_decref(ts_wait_state(&ts, c, "pending", NULL));
    /* No node of the fleet has a B200: refused at once (R18). */
    json_decref(ts_wait_state(&ts,
                              ts_submit(&ts, "{\"kind\":\"container\",\"class\":"
                                             "\"nvidia-b200-180gb\"}"),
                              "refused", NULL));
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld/release", a);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, NULL, NULL), 200);
    json_decref(ts_wait_state(&ts, c, "placed", "the waiting request takes the freed GPU"));

    char *m = ts_metrics(&ts);
    cr_expect_eq(sum_of(m, "einsora_decisions_total", NULL), 4,
                 "four requests, each counted once by its first decision:\n%s", m);
    cr_expect_eq(SUM(m, "einsora_decisions_total", "outcome=\"placed\""), 2);
    cr_expect_eq(SUM(m, "einsora_decisions_total", "outcome=\"waiting\""), 1);
    cr_expect_eq(SUM(m, "einsora_decisions_total", "outcome=\"refused\""), 1);
    cr_expect_eq(sum_of(m, "einsora_queue_exits_total", NULL), 1,
                 "the waiting request left the queue once");
    /* Every call the test made was routed: each answer is counted once by status code and
     * once in its route's histogram (the scrape counts itself only after answering). */
    double answers = sum_of(m, "einsora_http_responses_total", NULL);
    cr_expect_gt(answers, 6);
    cr_expect_eq(answers, sum_of(m, "einsora_api_request_seconds_count", NULL),
                 "responses by code and by route agree");
    cr_expect_eq(sum_of(m, "einsora_capacity_units", NULL), 2, "n1's two GPUs, each once");
    cr_expect_eq(SUM(m, "einsora_capacity_units", "state=\"allocated\""), 2);
    cr_expect_eq(SUM(m, "einsora_capacity_units", "class=\"nvidia-h100-80gb\""), 2,
                 "the states of a class partition its units");
    cr_expect_eq(sum_of(m, "einsora_cpu_cores", NULL), 64, "cores are counted apart from GPUs");
    free(m);
}

Test(metrics_audit, r4_metrics_a_switch_is_at_exactly_one_step) {
    json_decref(ts_wait_state(&ts, ts_submit(&ts, h100), "placed", NULL));
    char *m = ts_metrics(&ts);
    cr_expect_eq(sum_of(m, "einsora_switch_step", NULL), 0, "no switch yet");
    free(m);
    /* A workload runs and --drain wait lets it end: the switch stays at its drain step. */
    long st = ts_call(&ts, ts.admin, "POST", "/v1/nodes/n1/mode",
                      "{\"mode\":\"vm-passthrough\",\"drain\":\"wait\"}", NULL);
    cr_assert(st == 200 || st == 202, "%ld", st);
    m = ts_metrics(&ts);
    cr_expect_eq(SUM(m, "einsora_switch_step", "node=\"n1\"", "switch=\"vm-passthrough\"",
                     "step=\"drain\""),
                 1, "%s", m);
    cr_expect_eq(SUM(m, "einsora_switch_step", "node=\"n1\""), 1, "one step at a time");
    cr_expect(
            strstr(m,
                   "einsora_switch_step{node=\"n1\",switch=\"vm-passthrough\",step=\"done\"} 0\n"),
            "every step is listed, the others at 0");
    free(m);
}

static size_t discard(char *p, size_t size, size_t n, void *ud) {
    (void)p, (void)ud;
    return size * n;
}

/* POST a body with a declared Content-Type (the helpers always send JSON); returns the status. */
static long post_typed(const char *path, const char *body, const char *content_type) {
    CURL *h = curl_easy_init();
    cr_assert(h);
    char url[256], auth[512], type[128];
    snprintf(url, sizeof(url), "%s%s", ts.url, path);
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", ts.admin);
    snprintf(type, sizeof(type), "Content-Type: %s", content_type);
    struct curl_slist *hdrs = curl_slist_append(curl_slist_append(NULL, auth), type);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    long status = 0;
    cr_assert_eq(curl_easy_perform(h), CURLE_OK);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return status;
}

Test(metrics_audit, metrics_http_responses_are_counted_by_exact_status_code) {
    char *m = ts_metrics(&ts);
    double created0 = SUM(m, "einsora_http_responses_total", "code=\"201\"");
    double missing0 = SUM(m, "einsora_http_responses_total", "code=\"404\"");
    double media0 = SUM(m, "einsora_http_responses_total", "code=\"415\"");
    free(m);
    ts_submit(&ts, h100); /* asserts its 201 */
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/requests/999999", NULL, NULL), 404);
    cr_assert_eq(post_typed("/v1/requests", h100, "text/plain"), 415);
    m = ts_metrics(&ts);
    cr_expect_eq(SUM(m, "einsora_http_responses_total", "code=\"201\""), created0 + 1, "%s", m);
    cr_expect_eq(SUM(m, "einsora_http_responses_total", "code=\"404\""), missing0 + 1, "%s", m);
    cr_expect_eq(SUM(m, "einsora_http_responses_total", "code=\"415\""), media0 + 1, "%s", m);
    cr_expect(!strstr(m, "xx\""), "no status class is left beside the codes:\n%s", m);
    free(m);
}
