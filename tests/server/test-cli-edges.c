/* test-cli-edges.c: the CLI builds requests that say only what the user meant:
 * every path segment and query value from user input is escaped, header values never carry
 * CR/LF, and a create always carries an Idempotency-Key that a retry reuses. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
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

TestSuite(cli_edges, .init = setup, .fini = teardown, .timeout = 60);

static bool n1_cordoned(void) {
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/n1", NULL, &j), 200);
    bool on = json_is_true(json_object_get(j, "cordoned"));
    json_decref(j);
    return on;
}

Test(cli_edges, bad_input_cli_never_lets_an_id_or_name_add_path_segments) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "request", "cancel", "x/../../nodes/n1/cordon?", "--server",
                         ts.url, "--token", ts.admin, NULL);
    cr_assert_eq(rc, 2, "not a request id: usage error (%s)", err);
    free(out), free(err);
    cr_assert(!n1_cordoned(), "the cancel never turned into a cordon");
    /* A node name is escaped: it stays one segment, whatever it holds. */
    rc = run_einsora(&out, &err, "node", "uncordon", "../nodes/n1/cordon", "--server", ts.url,
                     "--token", ts.admin, NULL);
    cr_assert_eq(rc, 2, "the server finds it a bad name: usage: %s", err);
    cr_assert(strstr(err, "escaped '/'"), "%s", err);
    free(out), free(err);
    rc = run_einsora(&out, &err, "node", "cordon", "n1/../n1", "--server", ts.url, "--token",
                     ts.admin, NULL);
    cr_assert_eq(rc, 2, "a bad name: usage: %s", err);
    free(out), free(err);
    cr_assert(!n1_cordoned());
    /* A query value cannot add a parameter. */
    rc = run_einsora(&out, &err, "requests", "--state", "placed&after=18446744073709551615",
                     "--server", ts.url, "--token", ts.admin, NULL);
    cr_assert_eq(rc, 2, "an unknown state is a usage error: %s", err);
    cr_assert(strstr(err, "Unknown state"), "%s", err);
    free(out), free(err);
}

Test(cli_edges, bad_input_cli_refuses_cr_lf_in_header_values) {
    char *out = NULL, *err = NULL;
    char bad[300];
    snprintf(bad, sizeof(bad), "%s\r\nX-Injected: 1", ts.admin);
    int rc = run_einsora(&out, &err, "requests", "--server", ts.url, "--token", bad, NULL);
    cr_assert_eq(rc, 2, "%s", err);
    cr_assert(strstr(err, "control character"), "%s", err);
    free(out), free(err);
    rc = run_einsora(&out, &err, "request", "create", "--kind", "container", "--class", "cpu",
                     "--key", "k\nX: y", "--server", ts.url, "--token", ts.admin, NULL);
    cr_assert_eq(rc, 2, "%s", err);
    free(out), free(err);
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/requests", NULL, &j), 200);
    cr_assert_eq(json_array_size(json_object_get(j, "requests")), 0, "nothing was submitted");
    json_decref(j);
}

/* A double of the server for one thing the real one cannot do on demand: lose an answer.
 * It reads the first create and closes the connection without answering, then answers the
 * retry; it records the Idempotency-Key of each. */
typedef struct Dropper {
    int fd;
    char keys[2][128];
} Dropper;

static void read_key(int c, char out[128]) {
    char buf[8192];
    size_t n = 0;
    ssize_t k;
    while (n < sizeof(buf) - 1 && (k = read(c, buf + n, sizeof(buf) - 1 - n)) > 0) {
        n += (size_t)k;
        buf[n] = 0;
        char *end = strstr(buf, "\r\n\r\n");
        if (end && strstr(end + 4, "}"))
            break; /* the headers and the JSON body */
    }
    buf[n] = 0;
    out[0] = 0;
    char *h = strcasestr(buf, "\r\nIdempotency-Key: ");
    if (h)
        sscanf(h + 19, "%127[^\r]", out);
}

static void *dropper_main(void *p) {
    Dropper *d = p;
    for (int i = 0; i < 2; i++) {
        int c = accept(d->fd, NULL, NULL);
        if (c < 0)
            return NULL;
        read_key(c, d->keys[i]);
        if (i == 1) {
            static const char body[] = "{\"id\":7,\"state\":\"pending\",\"reason\":\"waiting\"}";
            char resp[256];
            int n = snprintf(
                    resp, sizeof(resp),
                    "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nEinsora-API: 1\r\n"
                    "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                    strlen(body), body);
            (void)!write(c, resp, (size_t)n);
        }
        close(c);
    }
    return NULL;
}

Test(cli_edges, r16_cli_create_always_sends_an_idempotency_key_and_retries_with_it) {
    Dropper d = {.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(d.fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(d.fd, 4), 0);
    socklen_t len = sizeof(sa);
    getsockname(d.fd, (struct sockaddr *)&sa, &len);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", ntohs(sa.sin_port));
    pthread_t t;
    pthread_create(&t, NULL, dropper_main, &d);
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "request", "create", "--kind", "container", "--class", "cpu",
                         "--server", url, "--token", "ens_x", NULL);
    pthread_join(t, NULL);
    close(d.fd);
    cr_assert_eq(rc, 0, "the retry was answered: %s", err);
    cr_assert_neq(d.keys[0][0], 0, "the first try carried a key");
    cr_assert_str_eq(d.keys[0], d.keys[1], "the retry reused it");
    free(out), free(err);
}

/* Another web server at the URL given: it answers every call 200 with JSON of its own. */
static void *stranger_main(void *p) {
    int fd = *(int *)p;
    for (int c; (c = accept(fd, NULL, NULL)) >= 0;) {
        char buf[4096];
        (void)!read(c, buf, sizeof(buf));
        static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                   "Content-Length: 17\r\nConnection: close\r\n\r\n"
                                   "{\"hello\":\"world\"}";
        (void)!write(c, resp, sizeof(resp) - 1);
        close(c);
    }
    return NULL;
}

/* Bad input: a --server that is some other web server. Its 200s are not read as a request
 * made or an empty fleet (exit 0 to a script): the CLI says it is not Einsora, exit 3. */
Test(cli_edges, bad_input_a_server_that_is_not_einsora_is_refused_not_believed) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(fd, 8), 0);
    socklen_t len = sizeof(sa);
    getsockname(fd, (struct sockaddr *)&sa, &len);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", ntohs(sa.sin_port));
    pthread_t t;
    pthread_create(&t, NULL, stranger_main, &fd);
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "request", "create", "--kind", "container", "--class", "cpu",
                         "--server", url, "--token", "ens_x", NULL);
    cr_expect_eq(rc, 3, "%s%s", out, err);
    cr_expect(strstr(err, "not an Einsora control plane"), "%s", err);
    cr_expect_str_empty(out);
    free(out), free(err);
    rc = run_einsora(&out, &err, "nodes", "-o", "json", "--server", url, "--token", "ens_x", NULL);
    cr_expect_eq(rc, 3, "%s%s", out, err);
    cr_expect_str_empty(out);
    free(out), free(err);
    shutdown(fd, SHUT_RDWR);
    close(fd);
    pthread_join(t, NULL);
}

Test(cli_edges, r9_cli_tenant_trust_untrust_and_list) {
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "tenant", "trust", "tina", "--server", ts.url, "--token",
                         ts.admin, NULL);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert(strstr(out, "tenant tina: trusted"), "%s", out);
    free(out), free(err);
    rc = run_einsora(&out, &err, "tenant", "list", "--server", ts.url, "--token", ts.admin, NULL);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert_str_eq(out, "TENANT\ntina\n");
    free(out), free(err);
    rc = run_einsora(&out, &err, "tenant", "list", "-o", "name", "--server", ts.url, "--token",
                     ts.admin, NULL);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert_str_eq(out, "tenant/tina\n");
    free(out), free(err);
    char *user = ts_token(&ts, "ulf", "user", NULL);
    rc = run_einsora(&out, &err, "tenant", "trust", "ulf", "--server", ts.url, "--token", user,
                     NULL);
    cr_assert_eq(rc, 4, "only an admin grants trust: %s", err);
    free(out), free(err);
    rc = run_einsora(&out, &err, "tenant", "untrust", "tina", "--server", ts.url, "--token",
                     ts.admin, NULL);
    cr_assert_eq(rc, 0, "%s", err);
    free(out), free(err);
    rc = run_einsora(&out, &err, "tenant", "list", "--server", ts.url, "--token", ts.admin, NULL);
    cr_assert_str_eq(out, "TENANT\n", "nobody is trusted any more");
    free(out), free(err);
    rc = run_einsora(&out, &err, "tenant", "list", "--no-headers", "--server", ts.url, "--token",
                     ts.admin, NULL);
    cr_assert_str_eq(out, "", "nobody is trusted any more");
    free(out), free(err);
    free(user);
}

/* R14: an endpoint serves a model, and `request create` and `run` say which with --model
 * (the API's `model`); the server refuses it for another kind, so the flag reaches it. */
Test(cli_edges, r14_cli_model_names_an_endpoints_model) {
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "request", "create", "--kind", "endpoint", "--class", "cpu",
                         "--model", "/models/tiny.gguf", "--wait-for-nodes", "-o", "json",
                         "--server", ts.url, "--token", ts.admin, NULL);
    cr_assert_eq(rc, 0, "%s", err);
    json_t *q = json_loads(out, 0, NULL);
    cr_assert_not_null(q, "%s", out);
    json_int_t id = json_integer_value(json_object_get(q, "id"));
    json_decref(q);
    free(out), free(err);
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%lld", (long long)id);
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", path, NULL, &j), 200);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(j, "request"), "model")),
                     "/models/tiny.gguf");
    json_decref(j);
    static const char *const verbs[][2] = {{"request", "create"}, {"run", NULL}};
    for (size_t i = 0; i < 2; i++) {
        rc = verbs[i][1] ? run_einsora(&out, &err, verbs[i][0], verbs[i][1], "--kind", "container",
                                       "--class", "cpu", "--model", "m", "--server", ts.url,
                                       "--token", ts.admin, NULL)
                         : run_einsora(&out, &err, verbs[i][0], "--kind", "container", "--class",
                                       "cpu", "--model", "m", "--detach", "--server", ts.url,
                                       "--token", ts.admin, NULL);
        cr_expect_eq(rc, 2, "%s: the server refuses a model on a container: %s", verbs[i][0], err);
        cr_expect(err && strstr(err, "'model' applies to kind endpoint only"), "%s", err);
        free(out), free(err);
    }
}

/* R17: what docs/fleet.md says a request may carry (image, command, env, ports) the CLI can say:
 * `request create` and `run` take the same flags, and the request holds exactly them. */
Test(cli_edges, r17_cli_request_create_and_run_carry_image_command_env_and_ports) {
    static const char *const verbs[] = {"request", "run"};
    for (size_t i = 0; i < 2; i++) {
        char *out = NULL, *err = NULL;
        int rc = i == 0 ? run_einsora(&out, &err, "request", "create", "--kind", "container",
                                      "--class", "cpu", "--count", "2", "--image", "app:1", "--env",
                                      "A=1", "--env", "B=two words", "--port", "8080", "--port",
                                      "9090", "--fallback", "nvidia-l40s", "--wait-s", "5",
                                      "--wait-for-nodes", "-o", "json", "--server", ts.url,
                                      "--token", ts.admin, "--", "python3", "train.py", "--lr",
                                      "0.1", NULL)
                        : run_einsora(&out, &err, "run", "--kind", "container", "--class", "cpu",
                                      "--count", "2", "--image", "app:1", "--env", "A=1", "--env",
                                      "B=two words", "--port", "8080", "--port", "9090",
                                      "--fallback", "nvidia-l40s", "--wait-s", "5", "-o", "json",
                                      "--server", ts.url, "--token", ts.admin, "--", "python3",
                                      "train.py", "--lr", "0.1", NULL);
        /* No node can run either here: create's waits (--wait-for-nodes), run's is refused
         * (R18), so run returns (1); both are kept with what was sent. */
        cr_expect_eq(rc, i == 0 ? 0 : 1, "%s: %s", verbs[i], err);
        free(out), free(err);
    }
    json_t *all = ts_list_all(&ts, ts.admin, "/v1/requests", "requests");
    size_t seen = 0, k;
    json_t *q;
    json_array_foreach(all, k, q) {
        json_t *req = json_object_get(q, "request");
        const char *image = json_string_value(json_object_get(req, "image"));
        if (!image || strcmp(image, "app:1") != 0)
            continue;
        seen++;
        const char *cmd = json_dumps(json_object_get(req, "command"), JSON_COMPACT);
        cr_expect_str_eq(cmd, "[\"python3\",\"train.py\",\"--lr\",\"0.1\"]");
        free((void *)cmd);
        const char *env = json_dumps(json_object_get(req, "env"), JSON_COMPACT);
        cr_expect_str_eq(env, "[\"A=1\",\"B=two words\"]");
        free((void *)env);
        const char *ports = json_dumps(json_object_get(req, "ports"), JSON_COMPACT);
        cr_expect_str_eq(ports, "[8080,9090]");
        free((void *)ports);
        cr_expect_eq(json_integer_value(json_object_get(req, "count")), 2);
        cr_expect_eq(json_integer_value(json_object_get(req, "wait_s")), 5);
    }
    json_decref(all);
    cr_expect_eq(seen, 2, "request create's and run's");
    char *out = NULL, *err = NULL;
    cr_expect_eq(run_einsora(&out, &err, "request", "create", "--kind", "container", "--class",
                             "cpu", "--env", "NOEQUALS", "--server", ts.url, "--token", ts.admin,
                             NULL),
                 2);
    cr_expect(err && strstr(err, "--env takes KEY=VALUE"), "%s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "request", "create", "stray", "--kind", "container",
                             "--class", "cpu", "--server", ts.url, "--token", ts.admin, NULL),
                 2, "an argument before no -- is a mistake, not a command");
    free(out), free(err);
}

/* R4, R3: a cordon may say why, and node show says it with the cordon; uncordon ends it. */
Test(cli_edges, r4_node_cordon_with_a_reason_is_shown_and_uncordon_ends_it) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "node", "cordon", "n1", "--reason", "fan replaced Tuesday",
                         "--server", ts.url, "--token", ts.admin, NULL);
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect(strstr(out, "cordoned  yes: fan replaced Tuesday"), "%s", out);
    free(out), free(err);
    cr_assert(n1_cordoned());
    rc = run_einsora(&out, &err, "node", "uncordon", "n1", "--reason", "x", "--server", ts.url,
                     "--token", ts.admin, NULL);
    cr_expect_eq(rc, 2, "--reason is the cordon's: %s", err);
    free(out), free(err);
    rc = run_einsora(&out, &err, "node", "uncordon", "n1", "--server", ts.url, "--token", ts.admin,
                     NULL);
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect(strstr(out, "cordoned  no"), "%s", out);
    free(out), free(err);
}

/* A cordon's reason is one line: control characters (a terminal's escapes, a forged line) and
 * a reason too long to keep whole are refused; server text a terminal prints (a quarantine
 * reason an agent gave) has its control bytes shown as '?'. */
Test(cli_edges, bad_input_server_text_never_reaches_a_terminal_with_its_control_bytes) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes/n1/cordon",
                         "{\"reason\": \"maint\\u001b]0;pwned\\u0007\\rfake\"}", &j),
                 400);
    const char *msg = json_string_value(json_object_get(j, "message"));
    cr_expect(msg && strstr(msg, "without control characters"), "%s", msg);
    json_decref(j);
    char long_reason[1100] = "{\"reason\": \"";
    memset(long_reason + strlen(long_reason), 'x', 1000);
    strcpy(long_reason + strlen(long_reason), "\"}");
    cr_expect_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes/n1/cordon", long_reason, NULL), 400);
    cr_assert(!n1_cordoned(), "a refused cordon changes nothing");
    const char *q = "{\"name\":\"q1\",\"site\":\"lab1\",\"site_kind\":\"lab\",\"platform\":"
                    "\"linux\",\"owner\":\"alice\",\"cpus\":8,\"devices\":[{\"pci\":"
                    "\"0000:01:00.0\",\"class\":\"nvidia-rtx-4090\",\"quarantined\":"
                    "\"board\\u001b[2Jgone\"}]}";
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes", q, NULL), 201);
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "node", "show", "q1", "--server", ts.url, "--token", ts.admin,
                         NULL);
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect(strstr(out, "board?[2Jgone"), "%s", out);
    cr_expect_null(strchr(out, '\033'), "an escape reached the terminal");
    free(out), free(err);
}

/* Runs `einsora ARGS...` in the background with its stdout into a fresh file (*out_path, a
 * mkstemp template); returns its pid. */
static pid_t spawn_cli(char *out_path, const char *const *argv) {
    int out = mkstemp(out_path);
    cr_assert(out >= 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        dup2(out, 1);
        execv(EINSORA_BIN, (char *const *)argv);
        _exit(127);
    }
    close(out);
    return pid;
}

/* Waits until the server holds one parked long-poll (a deadline, not a measure: 60 s). */
static bool one_long_poll_parked(void) {
    for (int i = 0; i < 600; i++) {
        char *m = ts_metrics(&ts);
        bool parked = m && strstr(m, "\neinsora_parked_long_polls 1");
        free(m);
        if (parked)
            return true;
        nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
    }
    return false;
}

/* The CLI ended well (killed after a 60 s deadline) and printed `want`; its stdout file is
 * removed. */
static void expect_cli_printed(pid_t pid, const char *out_path, const char *want) {
    int status = -1;
    for (int i = 0; i < 600 && waitpid(pid, &status, WNOHANG) == 0; i++)
        nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
    if (waitpid(pid, NULL, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    char *text = slurp(out_path);
    unlink(out_path);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the CLI ended with %d: %s", status,
              text);
    cr_expect(strstr(text, want), "%s", text);
    free(text);
}

/* `events --follow` outlives a planned restart of the server: the 503 of its drain and the
 * refused connections after it are waited out, and the follow goes on from its cursor. */
Test(cli_edges, r16_events_follow_goes_on_across_a_server_restart) {
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/events?limit=10000", NULL, &j), 200);
    char after[32];
    snprintf(after, sizeof(after), "%lld",
             (long long)json_integer_value(json_object_get(j, "next")));
    json_decref(j);
    char out_path[] = "/tmp/einsora-follow-XXXXXX";
    pid_t pid = spawn_cli(out_path, (const char *[]){EINSORA_BIN, "events", "--follow", "--json",
                                                     "--limit", "1", "--after", after, "--server",
                                                     ts.url, "--token", ts.admin, NULL});
    /* Restarted once the follow waits in its long-poll (the feed's first pages are read before
     * it, and a server away then is an error, as for any other call). */
    cr_assert(one_long_poll_parked(), "the follow never waited in its long-poll");
    ts_kill(&ts, false);
    ts_respawn_same_port(&ts);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/requests",
                         "{\"kind\":\"container\",\"class\":\"cpu\",\"wait_for_nodes\":true}",
                         NULL),
                 201);
    expect_cli_printed(pid, out_path, "request.submitted");
}

/* R16: `request create --wait` outlives a crash (hard) or a planned restart of the control
 * plane (its drain answers 503 to what comes meanwhile): the wait goes on once the server
 * answers again, and ends with the placement made after it. */
static void request_wait_across_a_restart(bool hard) {
    char out_path[] = "/tmp/einsora-wait-XXXXXX";
    pid_t pid = spawn_cli(
            out_path, (const char *[]){EINSORA_BIN, "request", "create", "--kind", "container",
                                       "--class", "nvidia-h100-80gb", "--wait-for-nodes", "--wait",
                                       "--json", "--server", ts.url, "--token", ts.admin, NULL});
    /* Once the request is stored and its wait parked in the feed's long-poll. */
    cr_assert(one_long_poll_parked(), "the wait never parked in its long-poll");
    ts_kill(&ts, hard);
    nanosleep(&(struct timespec){1, 500 * 1000 * 1000}, NULL); /* away a while */
    ts_respawn_same_port(&ts);
    ts_add_h100_node(&ts, "n1", "root", 1); /* the token's user owns it: runs at once */
    expect_cli_printed(pid, out_path, "\"placed\"");
}

Test(cli_edges, r16_request_wait_goes_on_across_a_server_crash) {
    request_wait_across_a_restart(true);
}

Test(cli_edges, r16_request_wait_goes_on_across_a_planned_server_restart) {
    request_wait_across_a_restart(false);
}
