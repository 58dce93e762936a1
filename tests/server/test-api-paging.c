/* test-api-paging.c: GET /v1/requests pages with an opaque cursor: `next` is a string the
 * client gives back as `after`, absent on the last page; a cursor edited by hand, taken from
 * a list with other filters, or a bare number answers 400 with a sentence and lists nothing.
 * Against the real server. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "srv-helpers.h"

static TestServer ts;

static void setup(void) {
    ts_start(&ts);
    ts_add_h100_node(&ts, "n1", "root", 1);
    for (int i = 0; i < 5; i++)
        json_decref(ts_wait_state(&ts, ts_submit(&ts, "{\"kind\":\"container\",\"class\":\"cpu\"}"),
                                  "placed", NULL));
}

static void teardown(void) {
    ts_stop(&ts);
}

TestSuite(api_paging, .init = setup, .fini = teardown, .timeout = 120);

static json_t *get(const char *path, long want) {
    json_t *j = NULL;
    long st = ts_call(&ts, ts.admin, "GET", path, NULL, &j);
    cr_assert_eq(st, want, "GET %s: %ld %s", path, st,
                 json_string_value(json_object_get(j, "message")));
    return j;
}

Test(api_paging, api_cursor_is_opaque_and_absent_on_the_last_page) {
    json_t *p1 = get("/v1/requests?limit=2", 200);
    cr_assert_eq(json_array_size(json_object_get(p1, "requests")), 2);
    const char *c1 = json_string_value(json_object_get(p1, "next"));
    cr_assert(c1, "next is a string, not a number the client could do sums with");
    char path[128];
    snprintf(path, sizeof(path), "/v1/requests?limit=2&after=%s", c1);
    json_t *p2 = get(path, 200);
    cr_expect_eq(json_integer_value(
                         json_object_get(json_array_get(json_object_get(p2, "requests"), 0), "id")),
                 3);
    const char *c2 = json_string_value(json_object_get(p2, "next"));
    cr_assert(c2);
    snprintf(path, sizeof(path), "/v1/requests?limit=2&after=%s", c2);
    json_t *p3 = get(path, 200);
    cr_expect_eq(json_array_size(json_object_get(p3, "requests")), 1);
    cr_expect(!json_object_get(p3, "next"), "no cursor on the last page");
    json_decref(p3), json_decref(p2);
    /* One whole page that holds everything is also the last. */
    json_t *all = get("/v1/requests", 200);
    cr_expect_eq(json_array_size(json_object_get(all, "requests")), 5);
    cr_expect(!json_object_get(all, "next"));
    json_decref(all);
    json_decref(p1);
}

static void expect_refused(const char *path, const char *words) {
    json_t *j = get(path, 400);
    const char *msg = json_string_value(json_object_get(j, "message"));
    cr_expect(msg && strstr(msg, "'after'") && strstr(msg, words), "%s: %s", path, msg);
    cr_expect(!json_object_get(j, "requests"), "nothing listed");
    json_decref(j);
}

Test(api_paging, bad_input_api_cursor_tampered_foreign_or_numeric_is_400) {
    json_t *p1 = get("/v1/requests?limit=2", 200);
    char cursor[64], path[160];
    snprintf(cursor, sizeof(cursor), "%s", json_string_value(json_object_get(p1, "next")));
    json_decref(p1);
    /* Each character changed in turn: never a valid cursor. */
    for (size_t i = 0; cursor[i]; i++) {
        char edited[64];
        snprintf(edited, sizeof(edited), "%s", cursor);
        edited[i] = edited[i] == 'A' ? 'B' : 'A';
        snprintf(path, sizeof(path), "/v1/requests?limit=2&after=%s", edited);
        expect_refused(path, "does not belong to this list");
    }
    /* The same cursor on a list with another filter. */
    snprintf(path, sizeof(path), "/v1/requests?state=placed&limit=2&after=%s", cursor);
    expect_refused(path, "does not belong to this list");
    expect_refused("/v1/requests?after=2", "not a cursor");
    expect_refused("/v1/requests?after=%2A%2A%2A%2A%2A%2A%2A%2A%2A%2A%2A%2A%2A%2A%2A%2A",
                   "not a cursor");
    /* A cursor of the filtered list works on that list. */
    json_t *f = get("/v1/requests?state=placed&limit=2", 200);
    snprintf(path, sizeof(path), "/v1/requests?state=placed&limit=2&after=%s",
             json_string_value(json_object_get(f, "next")));
    json_decref(f);
    json_decref(get(path, 200));
}

/* limit=0 asks for nothing: both lists answer no items and a `next` to resume from (the
 * cursor given), and the event feed answers at once rather than waiting for an event it
 * would not send. */
Test(api_paging, api_limit_0_lists_nothing_on_both_lists) {
    json_t *r = get("/v1/requests?limit=0", 200);
    cr_expect_eq(json_array_size(json_object_get(r, "requests")), 0);
    const char *next = json_string_value(json_object_get(r, "next"));
    cr_assert_not_null(next, "more requests follow: a cursor to resume from");
    char path[256];
    snprintf(path, sizeof(path), "/v1/requests?limit=10&after=%s", next);
    json_t *rest = get(path, 200);
    cr_expect_eq(json_array_size(json_object_get(rest, "requests")), 5, "resumed where it was");
    json_decref(rest);
    json_decref(r);

    json_t *e = get("/v1/events?limit=0", 200);
    cr_expect_eq(json_array_size(json_object_get(e, "events")), 0);
    cr_expect_eq(json_integer_value(json_object_get(e, "next")), 0);
    json_decref(e);
    time_t t0 = time(NULL);
    e = get("/v1/events?after=2&limit=0&wait=30", 200);
    cr_expect_lt(time(NULL) - t0, 20, "limit=0 has nothing to wait for");
    cr_expect_eq(json_array_size(json_object_get(e, "events")), 0);
    cr_expect_eq(json_integer_value(json_object_get(e, "next")), 2);
    json_decref(e);
    e = get("/v1/events?after=2&limit=1", 200);
    cr_expect_eq(json_array_size(json_object_get(e, "events")), 1, "events follow cursor 2");
    json_decref(e);
}
