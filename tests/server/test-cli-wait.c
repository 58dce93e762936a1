/* test-cli-wait.c: `einsora request create --wait` is woken by the event feed's long-poll, not
 * a timed poll of the request: while it waits it is parked on GET /v1/events?wait=..., and
 * the placement it waits for costs about one read of the request. The server's own per-route
 * counters tell how often the request was read. Against the real server and CLI. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "helpers.h"
#include "srv-helpers.h"
#include "util/fileio.h"

static TestServer ts;

static void setup(void) {
    ts_start(&ts);
    unsetenv("EINSORA_SERVER");
    unsetenv("EINSORA_TOKEN");
}

static void teardown(void) {
    ts_stop(&ts);
}

TestSuite(cli_wait, .init = setup, .fini = teardown, .timeout = 120);

/* Reads of the request so far (absent until the first one). */
static double request_reads(void) {
    double v = ts_metric(&ts, "einsora_api_request_seconds_count{route=\"GET /v1/requests/{id}\"}");
    return v < 0 ? 0 : v;
}

static const char h100[] = "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}";

Test(cli_wait, r13_wait_sees_a_placement_through_the_event_feed_not_a_timed_poll) {
    ts_add_h100_node(&ts, "n1", "root", 1);
    long first = ts_submit(&ts, h100);
    json_decref(ts_wait_state(&ts, first, "placed", NULL));

    char dir[] = "/tmp/einsora-wait-XXXXXX", out[64];
    cr_assert(mkdtemp(dir));
    snprintf(out, sizeof(out), "%s/out", dir);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        /* A file, not a terminal: one line per change, and long-polls of 30 s. */
        if (!freopen(out, "w", stdout))
            _exit(127);
        execl(EINSORA_BIN, EINSORA_BIN, "request", "create", "--kind", "container", "--class",
              "nvidia-h100-80gb", "--wait", "--server", ts.url, "--token", ts.admin, NULL);
        _exit(127);
    }
    /* It waits: it printed the pending state and is parked on the feed (a condition, polled
     * with a generous deadline, whatever the machine's pace). */
    bool parked = false;
    for (int i = 0; i < 1200 && !parked; i++) {
        char *text = NULL;
        parked = read_full_file(out, 1 << 16, &text, NULL) >= 0 && strstr(text, "pending") &&
                 ts_metric(&ts, "einsora_parked_long_polls") >= 1;
        free(text);
        if (!parked)
            nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    cr_assert(parked, "the wait never parked on the event feed");
    double before = request_reads();

    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld/release", first);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, NULL, NULL), 200);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
    char *text = slurp(out);
    cr_expect(strstr(text, "placed on n1"), "the placement is shown:\n%s", text);
    free(text);
    /* The release's event woke it: one read of the request shows the placement (a second
     * only if a 30 s long-poll ran out quietly on the way). A timed poll reads it again on
     * every tick while parked, which it never was. */
    double reads = request_reads() - before;
    cr_expect(reads >= 1 && reads <= 2, "the request was read %g times after the release", reads);
    char cmd[96];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

/* A wait that ends with the request cancelled (never to be placed) exits 1, not 0: a script
 * waiting for the placement must not read it as done. --timeout with --json prints the
 * request as it is (its id first of all) on stdout, exit 6. */
Test(cli_wait, r13_a_wait_ended_by_a_cancel_fails_and_a_timeout_prints_the_request_as_json) {
    ts_add_h100_node(&ts, "n1", "root", 1);
    long first = ts_submit(&ts, h100);
    json_decref(ts_wait_state(&ts, first, "placed", NULL));
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "request", "create", "--kind", "container", "--class",
                         "nvidia-h100-80gb", "--timeout", "1s", "--json", "--server", ts.url,
                         "--token", ts.admin, NULL);
    cr_expect_eq(rc, 6, "%s %s", out, err);
    json_t *j = json_loads(out, 0, NULL);
    cr_assert_not_null(j, "stdout is the request as JSON: '%s'", out);
    cr_expect_str_eq(json_string_value(json_object_get(j, "state")), "pending");
    long waiting = (long)json_integer_value(json_object_get(j, "id"));
    cr_expect_gt(waiting, first);
    json_decref(j);
    free(out), free(err);

    char dir[] = "/tmp/einsora-wait-XXXXXX", file[64];
    cr_assert(mkdtemp(dir));
    snprintf(file, sizeof(file), "%s/out", dir);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        if (!freopen(file, "w", stdout))
            _exit(127);
        execl(EINSORA_BIN, EINSORA_BIN, "request", "create", "--kind", "container", "--class",
              "nvidia-h100-80gb", "--wait", "--server", ts.url, "--token", ts.admin, NULL);
        _exit(127);
    }
    /* It waits (pending printed), then its request is cancelled by someone else. */
    long id = 0;
    for (int i = 0; i < 1200 && !id; i++) {
        char *text = NULL;
        if (read_full_file(file, 1 << 16, &text, NULL) >= 0 && strstr(text, "pending"))
            id = strtol(text + strcspn(text, "0123456789"), NULL, 10);
        free(text);
        if (!id)
            nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    cr_assert_gt(id, waiting, "the wait never printed its pending request");
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld/cancel", id);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, NULL, NULL), 200);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d", status);
    char cmd[96];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}
