/* test-cli-lists.c: the list verbs follow the API's paging to the end (they stopped
 * silently at 1,000), honour --limit N, and print -o json|yaml|wide|name and --no-headers;
 * `events` has a header and its cursor in -o json. Against the real server. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "srv-helpers.h"

#define N_REQUESTS 1005 /* past the server's 1,000 per page */

static TestServer ts;

static void setup(void) {
    ts_start(&ts);
    ts_add_h100_node(&ts, "n1", "alice", 1);
    for (int i = 0; i < N_REQUESTS; i++)
        cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/requests",
                             "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", NULL),
                     201);
}

static void teardown(void) {
    ts_stop(&ts);
}

TestSuite(cli_lists, .init = setup, .fini = teardown, .timeout = 240);

static size_t count_lines(const char *s) {
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Run einsora with the args and this server's URL and admin token; stderr is dropped. */
#define CLI(out, ...)                                                                              \
    run_einsora(out, NULL, __VA_ARGS__, "--server", ts.url, "--token", ts.admin, NULL)

Test(cli_lists, cli_requests_follow_paging_to_the_end_and_stop_at_limit) {
    char *out = NULL;
    cr_assert_eq(CLI(&out, "requests", "-o", "name"), 0);
    cr_expect_eq(count_lines(out), N_REQUESTS, "every request, not the first page only");
    cr_expect(strstr(out, "request/1\n") && strstr(out, "request/1005\n"));
    free(out);
    cr_assert_eq(CLI(&out, "requests", "--limit", "3", "--no-headers"), 0);
    cr_expect_eq(count_lines(out), 3, "%s", out);
    cr_expect(strncmp(out, "1 ", 2) == 0, "no header line: %s", out);
    free(out);
    cr_assert_eq(CLI(&out, "requests"), 0);
    cr_expect_eq(count_lines(out), N_REQUESTS + 1, "a header and every request");
    cr_expect(strncmp(out, "ID ", 3) == 0);
    free(out);
    cr_assert_eq(CLI(&out, "requests", "-o", "wide", "--limit"), 2, "--limit needs a value");
    free(out);
    cr_assert_eq(CLI(&out, "requests", "-o", "wide"), 0);
    cr_expect(strstr(out, "METHOD") && strstr(out, "DEVICES"), "wide shows more: %.200s", out);
    free(out);
    cr_assert_eq(CLI(&out, "requests", "-o", "xml"), 2, "an unknown format is usage");
    free(out);
}

Test(cli_lists, cli_requests_json_and_yaml_hold_every_item_and_the_cursor) {
    char *out = NULL;
    cr_assert_eq(CLI(&out, "requests", "-o", "json"), 0);
    json_t *j = json_loads(out, 0, NULL);
    cr_assert(j, "-o json is one JSON document");
    cr_expect_eq(json_array_size(json_object_get(j, "requests")), N_REQUESTS);
    cr_expect(!json_object_get(j, "next"), "everything was listed: no cursor to go on from");
    json_decref(j);
    free(out);
    cr_assert_eq(CLI(&out, "requests", "--json", "--limit", "2"), 0, "--json is kept");
    j = json_loads(out, 0, NULL);
    cr_expect_eq(json_array_size(json_object_get(j, "requests")), 2);
    cr_expect(json_is_string(json_object_get(j, "next")), "the opaque cursor to go on from");
    json_decref(j);
    free(out);
    cr_assert_eq(CLI(&out, "requests", "-o", "yaml", "--limit", "2"), 0);
    cr_expect(strncmp(out, "requests:\n- id: 1\n", 18) == 0, "%s", out);
    cr_expect(strstr(out, "\n  state: ") && strstr(out, "\nnext: "), "%s", out);
    free(out);
}

Test(cli_lists, cli_events_have_a_header_page_to_the_end_and_a_cursor_in_json) {
    json_t *all = ts_list_all(&ts, ts.admin, "/v1/events", "events");
    size_t n = json_array_size(all);
    cr_assert_gt(n, 1000, "the setup made more events than one page");
    json_int_t last = json_integer_value(json_object_get(json_array_get(all, n - 1), "seq"));
    json_decref(all);
    char *out = NULL;
    cr_assert_eq(CLI(&out, "events"), 0);
    cr_expect(strncmp(out, "SEQ ", 4) == 0, "a header: %.100s", out);
    cr_expect_eq(count_lines(out), n + 1);
    free(out);
    cr_assert_eq(CLI(&out, "events", "-o", "json"), 0);
    json_t *j = json_loads(out, 0, NULL);
    cr_assert(j);
    cr_expect_eq(json_array_size(json_object_get(j, "events")), n);
    cr_expect_eq(json_integer_value(json_object_get(j, "next")), last, "the cursor to resume from");
    json_decref(j);
    free(out);
    char after[24];
    snprintf(after, sizeof(after), "%lld", (long long)(last - 2));
    cr_assert_eq(CLI(&out, "events", "--after", after, "--no-headers"), 0);
    cr_expect_eq(count_lines(out), 2, "resumed after the cursor: %s", out);
    free(out);
    /* --limit stops after N events with --follow too: it ends once they are printed, instead
     * of following for ever (the suite's timeout would end it). */
    cr_assert_eq(CLI(&out, "events", "--after", after, "--no-headers", "--follow", "--limit", "2"),
                 0);
    cr_expect_eq(count_lines(out), 2, "%s", out);
    free(out);
}
