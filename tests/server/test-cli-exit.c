/* test-cli-exit.c: one exit-code table for every error class: 0 ok, 1 refused,
 * 2 usage (also when the server finds the arguments wrong), 3 unreachable, 4 not allowed,
 * 5 not found, 6 a wait that ran past --timeout. Against the real server. */
#include <criterion/criterion.h>
#include <fcntl.h>
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

TestSuite(cli_exit, .init = setup, .fini = teardown, .timeout = 60);

#define CLI_AS(tok, out, err, ...)                                                                 \
    run_einsora(out, err, __VA_ARGS__, "--server", ts.url, "--token", tok, NULL)

Test(cli_exit, cli_exit_codes_follow_one_table) {
    char *out = NULL, *err = NULL;
    cr_expect_eq(CLI_AS(ts.admin, &out, &err, "request", "show", "999"), 5, "not found: %s", err);
    free(out), free(err);
    cr_expect_eq(CLI_AS("nonsense", &out, &err, "requests"), 4, "unknown token: %s", err);
    cr_expect(strstr(err, "einsora login --server"), "a 401 says what to run: %s", err);
    free(out), free(err);
    char *user = ts_token(&ts, "bob", "user", NULL);
    cr_expect_eq(CLI_AS(user, &out, &err, "tenant", "trust", "bob"), 4, "not allowed: %s", err);
    free(out), free(err);
    free(user);
    /* A user name that is no name is the argument's fault (usage), not a missing endpoint. */
    cr_expect_eq(CLI_AS(ts.admin, &out, &err, "tenant", "trust", "caf\xc3\xa9"), 2, "%s", err);
    cr_expect(strstr(err, "is not a valid user name"), "%s", err);
    free(out), free(err);
    cr_expect_eq(CLI_AS(ts.admin, &out, &err, "request", "create", "--kind", "container", "--class",
                        "no-such-class"),
                 2, "the server finds the class wrong: usage: %s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "requests", "--server", "http://127.0.0.1:9", "--token",
                             ts.admin, NULL),
                 3, "unreachable: %s", err);
    free(out), free(err);
    /* A server that is no URL is the user's typo, not an unreachable server; so is none. */
    cr_expect_eq(
            run_einsora(&out, &err, "requests", "--server", "not a url", "--token", ts.admin, NULL),
            2, "%s", err);
    cr_expect(strstr(err, "'not a url' is not a server URL"), "%s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "requests", "--server", "", NULL), 2, "%s", err);
    cr_expect(strstr(err, "--server needs a URL"), "%s", err);
    free(out), free(err);
    /* A token sent over plain http to an address that is not loopback is warned about (0.0.0.0
     * reaches this machine, but is not a loopback name); to loopback it is not. */
    char clear[96];
    snprintf(clear, sizeof(clear), "http://0.0.0.0:%s", strrchr(ts.url, ':') + 1);
    cr_expect_eq(run_einsora(&out, &err, "requests", "--server", clear, "--token", ts.admin, NULL),
                 0, "%s", err);
    cr_expect(err && strstr(err, "warning: the token goes in clear to http://0.0.0.0:"), "%s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "requests", "--server", ts.url, "--token", ts.admin, NULL),
                 0);
    cr_expect(err && !strstr(err, "in clear"), "%s", err);
    free(out), free(err);
    /* A URL copied from a request's, with the API's own /v1, names the same server. */
    char v1[96];
    snprintf(v1, sizeof(v1), "%s/v1/", ts.url);
    cr_expect_eq(run_einsora(&out, &err, "requests", "--server", v1, "--token", ts.admin, NULL), 0,
                 "%s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "requests", "--server", "ftp://127.0.0.1:9", NULL), 2);
    free(out), free(err);
    /* A URL libcurl cannot read (an IPv6 address left open, a port that is no number). */
    cr_expect_eq(run_einsora(&out, &err, "requests", "--server", "http://[::1", NULL), 2, "%s",
                 err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "requests", "--server", "http://127.0.0.1:port", NULL), 2,
                 "%s", err);
    free(out), free(err);
    /* serve: a --listen that is no address is usage, and no state file is made. */
    char state[] = "/tmp/einsora-exit-XXXXXX";
    cr_assert(mkdtemp(state));
    char db[64];
    snprintf(db, sizeof(db), "%s/s.db", state);
    cr_expect_eq(run_einsora(&out, &err, "serve", "--listen", "bogus", "--state", db, NULL), 2,
                 "%s", err);
    cr_expect(access(db, F_OK) < 0, "no state file is made for a bad --listen");
    free(out), free(err);
    /* A capability the control plane would refuse for every node the sync describes. */
    cr_expect_eq(run_einsora(&out, &err, "k8s", "sync", "--capabilities", "warp", NULL), 2, "%s",
                 err);
    cr_expect(strstr(err, "unknown capability 'warp'"), "%s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "k8s", "sync", "--capabilities", "kata,kata", NULL), 2,
                 "%s", err);
    cr_expect(strstr(err, "'kata' is given twice"), "%s", err);
    free(out), free(err);
    /* Half of the TLS pair is a command line that is wrong, too. */
    cr_expect_eq(run_einsora(&out, &err, "serve", "--tls-cert", "/c.pem", "--state", db, NULL), 2,
                 "%s", err);
    cr_expect(strstr(err, "both --tls-cert and --tls-key"), "%s", err);
    cr_expect(access(db, F_OK) < 0, "no state file is made for half a TLS pair");
    free(out), free(err);
    rmdir(state);
}

Test(cli_exit, cli_wait_timeout_has_its_own_exit_code_and_leaves_the_request_queued) {
    char *out = NULL, *err = NULL;
    /* No node at all, and told to wait for nodes: it stays pending. */
    int rc = CLI_AS(ts.admin, &out, &err, "request", "create", "--kind", "container", "--class",
                    "nvidia-h100-80gb", "--wait-for-nodes", "--timeout", "1s");
    cr_expect_eq(rc, 6, "%s %s", out, err);
    cr_expect(strstr(err, "still pending") && strstr(err, "einsora request cancel 1"), "%s", err);
    free(out), free(err);
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/requests/1", NULL, &j), 200);
    cr_expect_str_eq(json_string_value(json_object_get(j, "state")), "pending");
    json_decref(j);
}

Test(cli_exit, cli_server_version_is_in_healthz_and_build_info) {
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, NULL, "GET", "/healthz", NULL, &j), 200);
    cr_expect_str_eq(json_string_value(json_object_get(j, "version")), EINSORA_VERSION);
    json_decref(j);
    char *text = ts_metrics(&ts);
    cr_expect(strstr(text, "\neinsora_build_info{version=\"" EINSORA_VERSION "\"} 1\n"), "%.300s",
              text);
    free(text);
}

Test(cli_exit, cli_ctrl_c_during_a_wait_says_the_request_stays_queued) {
    char dir[] = "/tmp/einsora-int-XXXXXX", out[64], err[64];
    cr_assert(mkdtemp(dir));
    snprintf(out, sizeof(out), "%s/out", dir);
    snprintf(err, sizeof(err), "%s/err", dir);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600),
            e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(o, 1);
        dup2(e, 2);
        execl(EINSORA_BIN, EINSORA_BIN, "request", "create", "--kind", "container", "--class",
              "nvidia-h100-80gb", "--wait-for-nodes", "--wait", "--server", ts.url, "--token",
              ts.admin, NULL);
        _exit(127);
    }
    /* Interrupt once it waits (it printed the pending state), whatever the machine's pace. */
    bool waiting = false;
    for (int i = 0; i < 600 && !waiting; i++) {
        char *text = NULL;
        waiting = read_full_file(out, 1 << 16, &text, NULL) >= 0 && strstr(text, "pending");
        free(text);
        if (!waiting)
            nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    cr_assert(waiting, "the wait never started");
    kill(pid, SIGINT);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 130, "status %d", status);
    char *text = slurp(err);
    cr_expect(strstr(text, "still pending") && strstr(text, "einsora request cancel 1"), "%s",
              text);
    free(text);
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/requests/1", NULL, &j), 200);
    cr_expect_str_eq(json_string_value(json_object_get(j, "state")), "pending", "still queued");
    json_decref(j);
    char cmd[96];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

/* Wording: MIG capacity reads as alternatives of one GPU, not an additive sum. */
Test(cli_exit, cli_capacity_shows_mig_slices_as_alternatives_of_one_gpu) {
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes",
                         "{\"name\":\"m1\",\"site\":\"dc\",\"site_kind\":\"datacenter\","
                         "\"platform\":\"linux\",\"owner\":\"ops\",\"mode\":\"container\","
                         "\"capabilities\":[\"kata\",\"mig_in_kata\"],\"cpus\":16,\"devices\":[{"
                         "\"pci\":\"0000:17:00.0\",\"class\":\"nvidia-h100-80gb\",\"memory_gb\":80,"
                         "\"mig_enabled\":true}]}",
                         NULL),
                 201);
    char *out = NULL, *err = NULL;
    cr_assert_eq(CLI_AS(ts.admin, &out, &err, "capacity"), 0, "%s", err);
    cr_expect(strstr(out, "SLICE OF"), "%s", out);
    cr_expect(strstr(out, "nvidia-h100-80gb-mig-1g.10gb") && strstr(out, "They do not add up"),
              "%s", out);
    /* The slice row names its card in its last column. */
    const char *row = strstr(out, "nvidia-h100-80gb-mig-1g.10gb");
    cr_assert(row);
    char line[512];
    snprintf(line, sizeof(line), "%.*s", (int)strcspn(row, "\n"), row);
    size_t n = strlen(line), k = strlen(" nvidia-h100-80gb");
    cr_expect(n > k && strcmp(line + n - k, " nvidia-h100-80gb") == 0, "%s", line);
    free(out), free(err);
}
