/* test-cli-outputs.c: the CLI's remaining list and wait habits, against the real server:
 * -o json|yaml|wide|name and --no-headers on classes and capacity; --watch redrawing a list
 * when it changes and ending on Ctrl-C with exit 0; `request create --wait` showing progress
 * one line per change into a pipe and one line redrawn in place on a terminal (a real pty),
 * ending after --timeout with exit 6; `node mode --wait --timeout` with the same exit 6. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "srv-helpers.h"

static TestServer ts;

static void setup(void) {
    ts_start(&ts);
    /* One H100 the admin (root) owns: a second request of root's waits for it. */
    ts_add_h100_node(&ts, "n1", "root", 1);
}

static void teardown(void) {
    ts_stop(&ts);
}

TestSuite(cli_outputs, .init = setup, .fini = teardown, .timeout = 240);

#define CLI(out, ...)                                                                              \
    run_einsora(out, NULL, __VA_ARGS__, "--server", ts.url, "--token", ts.admin, NULL)

static size_t count_lines(const char *s) {
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

Test(cli_outputs, cli_classes_and_capacity_take_every_output_format) {
    char *out = NULL;
    cr_assert_eq(CLI(&out, "classes", "-o", "name"), 0);
    cr_expect(strstr(out, "class/nvidia-h100-80gb\n"), "%s", out);
    cr_expect(!strstr(out, "CLASS"), "names only: %s", out);
    free(out);
    cr_assert_eq(CLI(&out, "classes", "-o", "json"), 0);
    json_t *j = json_loads(out, 0, NULL);
    cr_expect(json_array_size(json_object_get(j, "classes")) > 0, "-o json is the document");
    json_decref(j);
    free(out);
    cr_assert_eq(CLI(&out, "classes", "-o", "yaml"), 0);
    cr_expect(strncmp(out, "classes:\n- name: ", 17) == 0, "%.80s", out);
    free(out);
    cr_assert_eq(CLI(&out, "classes", "-o", "wide"), 0);
    cr_expect(strstr(out, "PCI_IDS") && strstr(out, "10de:2330"), "wide shows the PCI ids");
    /* R6 counts container nodes by node_selector: wide shows it, and every way to match. */
    cr_expect(strstr(out, "NODE_SELECTOR") &&
                      strstr(out, "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"),
              "%s", out);
    cr_expect(strstr(out, "NVML_NAMES") && strstr(out, "APPLE_MEMORY"), "%s", out);
    free(out);
    cr_assert_eq(CLI(&out, "classes", "--no-headers"), 0);
    cr_expect(strncmp(out, "CLASS", 5) != 0 && out[0], "%.80s", out);
    free(out);

    cr_assert_eq(CLI(&out, "capacity", "-o", "name"), 0);
    const char *h100 = strstr(out, "class/nvidia-h100-80gb\n");
    cr_expect(h100, "%s", out);
    cr_expect(h100 && !strstr(h100 + 1, "class/nvidia-h100-80gb\n"),
              "each class once, though the answer has a row per site: %s", out);
    free(out);
    cr_assert_eq(CLI(&out, "capacity", "-o", "json"), 0);
    j = json_loads(out, 0, NULL);
    cr_expect(json_is_array(json_object_get(j, "classes")), "%.80s", out);
    json_decref(j);
    free(out);
    cr_assert_eq(CLI(&out, "capacity", "-o", "wide", "--no-headers"), 0);
    cr_expect(strncmp(out, "nvidia-h100-80gb ", 17) == 0, "no header line: %.80s", out);
    cr_expect(strstr(out, " nvidia ") && !strstr(out, "NODE "),
              "wide adds the vendor; no header on the nodes' table either: %s", out);
    cr_expect(!strstr(out, "advertise") && !strstr(out, "\n\n"),
              "--no-headers is the rows alone, for a script: %s", out);
    free(out);
    cr_assert_eq(CLI(&out, "capacity", "-o", "xml"), 2, "an unknown format is usage");
    free(out);
}

/* A child einsora whose stdout (and stderr) is a pipe, or a terminal (a pty) with tty. */
typedef struct Child {
    pid_t pid;
    int fd;
    char buf[1 << 16];
    size_t len;
} Child;

static void child_start(Child *c, bool tty, const char *const *args) {
    const char *argv[32] = {EINSORA_BIN};
    size_t n = 1;
    for (; args[n - 1] && n < 26; n++)
        argv[n] = args[n - 1];
    const char *tail[] = {"--server", ts.url, "--token", ts.admin, NULL};
    memcpy(argv + n, tail, sizeof(tail));
    memset(c, 0, sizeof(*c));
    if (tty) {
        struct winsize ws = {.ws_row = 40, .ws_col = 200};
        c->pid = forkpty(&c->fd, NULL, NULL, &ws);
    } else {
        int p[2];
        cr_assert_eq(pipe(p), 0);
        c->pid = fork();
        if (c->pid == 0) {
            dup2(p[1], 1);
            dup2(p[1], 2);
            close(p[0]);
            close(p[1]);
        }
        close(p[1]);
        c->fd = p[0];
    }
    cr_assert(c->pid >= 0);
    if (c->pid == 0) {
        execv(EINSORA_BIN, (char *const *)argv);
        _exit(127);
    }
}

/* Read until `needle` has appeared after offset `from` (true), the child's output ends, or a
 * generous deadline passes (a condition polled for, never a measure of speed). */
static bool child_read_until(Child *c, size_t from, const char *needle) {
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        c->buf[c->len] = 0;
        if (needle && strstr(c->buf + from, needle))
            return true;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > 90 || c->len + 1 >= sizeof(c->buf))
            return false;
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        if (poll(&pfd, 1, 1000) <= 0)
            continue;
        ssize_t got = read(c->fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len);
        if (got <= 0) /* EOF, or EIO on a pty whose child has exited */
            return needle == NULL;
        c->len += (size_t)got;
    }
}

/* Wait for the child's exit status (-1 when a signal ended it). */
static int child_wait(Child *c) {
    child_read_until(c, 0, NULL);
    int status;
    cr_assert_eq(waitpid(c->pid, &status, 0), c->pid);
    close(c->fd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Test(cli_outputs, cli_requests_watch_redraws_on_change_and_ends_on_ctrl_c_with_0) {
    Child c;
    child_start(&c, false, (const char *[]){"requests", "--watch", "-o", "name", NULL});
    /* The first drawing comes before any request: an empty list, so wait for the first
     * change's drawing, which holds the new request. */
    long id = ts_submit(&ts, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}");
    char want[32];
    snprintf(want, sizeof(want), "request/%ld\n", id);
    cr_assert(child_read_until(&c, 0, want), "the watch showed the new request: %s", c.buf);
    size_t mark = c.len;
    /* A second request: the list changes again, and is drawn again with both. */
    long id2 = ts_submit(&ts, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}");
    snprintf(want, sizeof(want), "request/%ld\n", id2);
    cr_assert(child_read_until(&c, mark, want), "redrawn after the change: %s", c.buf + mark);
    snprintf(want, sizeof(want), "request/%ld\n", id);
    cr_expect(strstr(c.buf + mark, want), "the redraw is the whole list: %s", c.buf + mark);
    kill(c.pid, SIGINT);
    cr_expect_eq(child_wait(&c), 0, "Ctrl-C is a watch's normal end: exit 0");
}

Test(cli_outputs, cli_nodes_watch_redraws_when_a_node_is_cordoned) {
    Child c;
    child_start(&c, false, (const char *[]){"nodes", "--watch", "--no-headers", NULL});
    cr_assert(child_read_until(&c, 0, "n1 "), "%s", c.buf);
    size_t mark = c.len;
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes/n1/cordon", "{}", NULL), 200);
    cr_assert(child_read_until(&c, mark, "cordoned"), "redrawn cordoned: %s", c.buf + mark);
    kill(c.pid, SIGINT);
    cr_expect_eq(child_wait(&c), 0);
}

/* Take n1's only GPU, so that the next request waits (queue position 1). */
static void fill_n1(void) {
    json_decref(ts_wait_state(&ts,
                              ts_submit(&ts, "{\"kind\":\"container\",\"class\":"
                                             "\"nvidia-h100-80gb\"}"),
                              "placed", NULL));
}

static const char *const waiting_create[] = {"request",    "create",
                                             "--kind",     "container",
                                             "--class",    "nvidia-h100-80gb",
                                             "--fallback", "nvidia-h200-141gb",
                                             "--wait-s",   "3600",
                                             "--timeout",  "2s",
                                             NULL};

Test(cli_outputs, r13_wait_into_a_pipe_prints_one_line_per_change_and_times_out_with_6) {
    fill_n1();
    Child c;
    child_start(&c, false, waiting_create);
    cr_expect_eq(child_wait(&c), 6, "--timeout has its own exit code: %s", c.buf);
    cr_expect(!strchr(c.buf, '\r') && !strstr(c.buf, "\033["), "no terminal codes in a pipe");
    cr_expect(strstr(c.buf, ": pending: waiting for nvidia-h100-80gb") &&
                      strstr(c.buf, "[queue position 1] [fallback opens in "),
              "%s", c.buf);
    cr_expect(strstr(c.buf, "still pending after --timeout") &&
                      strstr(c.buf, "einsora request cancel "),
              "says it stays queued and how to cancel it: %s", c.buf);
    /* The reason did not change while it waited: one progress line, then the message. */
    cr_expect_eq(count_lines(c.buf), 2, "%s", c.buf);
}

Test(cli_outputs, r13_wait_on_a_terminal_redraws_one_line_with_the_fallback_countdown) {
    fill_n1();
    Child c;
    child_start(&c, true, waiting_create);
    cr_expect_eq(child_wait(&c), 6, "%s", c.buf);
    cr_expect(strstr(c.buf, "\r\033[Krequest "), "redrawn in place: %s", c.buf);
    cr_expect(strstr(c.buf, "[queue position 1] fallback opens in 59m"),
              "the time until the fallback opens (wait-s 3600): %s", c.buf);
    cr_expect(strstr(c.buf, "still pending after --timeout"), "%s", c.buf);
}

Test(cli_outputs, r4_node_mode_wait_ends_after_timeout_with_6) {
    fill_n1();
    char *out = NULL, *err = NULL;
    /* A workload runs on n1 and --drain wait lets it end: the switch stays at its drain step. */
    int rc = run_einsora(&out, &err, "node", "mode", "n1", "vm-passthrough", "--drain", "wait",
                         "--timeout", "1s", "--server", ts.url, "--token", ts.admin, NULL);
    cr_expect_eq(rc, 6, "%s%s", out, err);
    cr_expect(strstr(err, "not done after --timeout") && strstr(err, "einsora node show n1"), "%s",
              err);
    free(out), free(err);
    rc = run_einsora(&out, &err, "node", "mode", "n1", "container", "--timeout", "soon", "--server",
                     ts.url, "--token", ts.admin, NULL);
    cr_expect_eq(rc, 2, "a bad duration is usage: %s", err);
    free(out), free(err);
}

Test(cli_outputs, r8_node_show_lists_the_unclassified_devices) {
    static const char node[] =
            "{\"name\":\"lab1\",\"site\":\"lab\",\"site_kind\":\"lab\",\"platform\":\"linux\","
            "\"owner\":\"root\",\"devices\":[{\"pci\":\"0000:01:00.0\",\"class\":"
            "\"nvidia-h100-80gb\",\"memory_gb\":80,\"pci_id\":\"10de:2330\"},{\"pci\":"
            "\"0000:02:00.0\",\"class\":\"\",\"memory_gb\":16,\"pci_id\":\"1002:1681\"}]}";
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes", node, NULL), 201);
    char *out = NULL;
    cr_assert_eq(CLI(&out, "node", "show", "lab1"), 0);
    cr_expect(strstr(out, "(unclassified)"), "%s", out);
    cr_expect(strstr(out, " 0000:01:00.0  10de:2330  nvidia-h100-80gb "),
              "each device with its vendor:device ids: %s", out);
    const char *list = strstr(out, "\nUnclassified (R8");
    cr_expect(list && strstr(list, "\n  #1 0000:02:00.0 (1002:1681)\n") &&
                      !strstr(list, "0000:01:00.0"),
              "only the unclassified device is listed: %s", out);
    free(out);
    /* Ids that are not vendor:device in lower-case hex are refused, and nothing is stored. */
    char *bad = strdup(node);
    memcpy(strstr(bad, "1002:1681"), "1002-1681", 9);
    memcpy(strstr(bad, "lab1"), "lab2", 4);
    json_t *ans = NULL;
    cr_expect_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes", bad, &ans), 400);
    cr_expect(strstr(json_string_value(json_object_get(ans, "message")), "pci_id"));
    json_decref(ans);
    free(bad);
    cr_expect_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/lab2", NULL, NULL), 404);
    cr_assert_eq(CLI(&out, "node", "show", "n1"), 0);
    cr_expect(!strstr(out, "Unclassified"), "no list when every device has a class: %s", out);
    free(out);
}

/* kubectl users type `-o json` on every verb; the verbs without list formats take it for
 * --json (and refuse the list formats they cannot print). */
Test(cli_outputs, cli_show_verbs_take_o_json_as_scripts_type_it) {
    char *out = NULL, *err = NULL;
    cr_assert_eq(CLI(&out, "node", "show", "n1", "-o", "json"), 0);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    cr_assert(j, "node show -o json prints JSON: %s", out);
    cr_expect_str_eq(json_string_value(json_object_get(j, "name")), "n1");
    json_decref(j);
    free(out);
    cr_assert_eq(CLI(&out, "node", "show", "n1", "--output=table"), 0);
    cr_expect(!json_loads(out, 0, &je) && strstr(out, "n1"), "table stays text: %s", out);
    free(out);
    int rc = run_einsora(&out, &err, "node", "show", "n1", "-o", "yaml", "--server", ts.url,
                         "--token", ts.admin, NULL);
    cr_expect_eq(rc, 2, "a format show cannot print is a usage error");
    cr_expect(strstr(err, "-o takes json or table"), "%s", err);
    free(out), free(err);
}

/* R13: `request show` says when a waiting request's fallback opens, and that a placement was
 * its fallback's, on the line a person reads (not only under -o json). */
Test(cli_outputs, r13_request_show_says_when_the_fallback_opens_and_that_it_was_taken) {
    fill_n1();
    long waiting = ts_submit(&ts, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\","
                                  "\"fallback\":[\"nvidia-l40s\"],\"wait_s\":3600}");
    long fell = ts_submit(&ts, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\","
                               "\"fallback\":[\"cpu\"],\"wait_s\":0}");
    json_decref(ts_wait_state(&ts, fell, "placed", NULL));
    char id[24], *out = NULL;
    snprintf(id, sizeof(id), "%ld", waiting);
    cr_assert_eq(CLI(&out, "request", "show", id), 0);
    cr_expect(strstr(out, "pending") && strstr(out, "[fallback opens in "), "%s", out);
    free(out);
    snprintf(id, sizeof(id), "%ld", fell);
    cr_assert_eq(CLI(&out, "request", "show", id), 0);
    cr_expect(strstr(out, "(cpu, cpu") && strstr(out, "by its fallback 1, after the wait"), "%s",
              out);
    free(out);
}
