/* test-up.c: `einsora up --demo`, the README's main job: it starts the control plane and the
 * demo fleet, prints the URL, the token's file (mode 0600) and the capacity found, serves
 * placements, and stops everything cleanly on SIGTERM. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"
#include "util/fileio.h"

typedef struct Up {
    char dir[64], state[128], out[128], url[64];
    char *token;
    pid_t pid;
} Up;

static void up_start(Up *u) {
    memset(u, 0, sizeof(*u));
    strcpy(u->dir, "/tmp/einsora-up-XXXXXX");
    cr_assert(mkdtemp(u->dir));
    snprintf(u->state, sizeof(u->state), "%s/state.db", u->dir);
    snprintf(u->out, sizeof(u->out), "%s/up.out", u->dir);
    char log[160];
    snprintf(log, sizeof(log), "%s/up.err", u->dir);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int o = open(u->out, O_WRONLY | O_CREAT | O_TRUNC, 0644),
            e = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(o, 1);
        dup2(e, 2);
        setenv("XDG_CONFIG_HOME", u->dir, 1); /* where it writes its context */
        execl(EINSORA_BIN, EINSORA_BIN, "up", "--demo", "--listen", "127.0.0.1:0", "--state",
              u->state, "--heartbeat", "1", "--nvml-lib", FAKE_NVML_LIB, "--fixtures",
              TEST_FIXTURES "/machines", NULL);
        _exit(127);
    }
    u->pid = pid;
    /* Wait for the summary: it is printed once the agents have registered. */
    for (int i = 0; i < 300; i++) {
        char *text = NULL;
        if (read_full_file(u->out, 1 << 16, &text, NULL) >= 0 && strstr(text, "Press Ctrl-C")) {
            char *p = strstr(text, "http://");
            cr_assert(p);
            snprintf(u->url, sizeof(u->url), "%.*s", (int)strcspn(p, " \n"), p);
            free(text);
            break;
        }
        free(text);
        nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
    }
    cr_assert(u->url[0], "einsora up printed no summary");
    char tok[160];
    snprintf(tok, sizeof(tok), "%s/token", u->dir);
    cr_assert_geq(read_one_line(tok, &u->token), 0);
}

static long call(Up *u, const char *method, const char *path, const char *body, json_t **ret) {
    Client *c = NULL;
    Error err = {0};
    cr_assert_eq(client_new(u->url, u->token, &c, &err), 0);
    json_t *b = body ? json_loads(body, 0, NULL) : NULL;
    long st = 0;
    cr_assert_eq(client_call(c, method, path, b, NULL, &st, ret, &err), 0, "%s", err.message);
    json_decref(b);
    client_free(c);
    return st;
}

Test(up, up_demo_starts_a_fleet_prints_where_things_are_and_stops_cleanly, .timeout = 90) {
    Up u;
    up_start(&u);
    char *text = NULL;
    cr_assert_geq(read_full_file(u.out, 1 << 16, &text, NULL), 0);
    cr_expect(strstr(text, "7 of 7 nodes reporting"), "%s", text);
    cr_expect(strstr(text, "nvidia-h100-80gb"), "capacity not shown: %s", text);
    cr_expect(strstr(text, "/token"), "token file not shown: %s", text);
    free(text);
    /* The token file is the user's alone. */
    char tok[160];
    struct stat st;
    snprintf(tok, sizeof(tok), "%s/token", u.dir);
    cr_assert_eq(stat(tok, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0600);
    /* The CLI finds this fleet without exports: up wrote the context "local". */
    char cfg[160];
    snprintf(cfg, sizeof(cfg), "%s/einsora/config", u.dir);
    text = NULL;
    cr_assert_geq(read_full_file(cfg, 1 << 16, &text, NULL), 0, "no context written");
    cr_expect(strstr(text, "\"current-context\": \"local\"") && strstr(text, u.url) &&
                      strstr(text, tok),
              "%s", text);
    free(text);
    /* The newcomer's first placement works through the printed URL and token. */
    json_t *j = NULL;
    cr_assert_eq(call(&u, "POST", "/v1/requests",
                      "{\"kind\":\"notebook\",\"class\":\"nvidia-h100-80gb\"}", &j),
                 201);
    cr_expect_str_eq(json_string_value(json_object_get(j, "state")), "placed");
    json_decref(j);
    /* A second up with its state in the same folder (another file there) is refused before it
     * touches anything: the token file is this fleet's, its secret stored nowhere else. */
    char cmd2[512];
    snprintf(cmd2, sizeof(cmd2),
             "XDG_CONFIG_HOME='%s/other' '%s' up --no-local --listen 127.0.0.1:0 --state "
             "'%s/other.db' > '%s/up2.out' 2>&1",
             u.dir, EINSORA_BIN, u.dir, u.dir);
    int rc = system(cmd2);
    cr_expect(WIFEXITED(rc) && WEXITSTATUS(rc) == 1, "second up: status %d", rc);
    char *again = NULL;
    cr_assert_geq(read_one_line(tok, &again), 0);
    cr_expect_str_eq(again, u.token, "the running fleet's token file was replaced");
    free(again);
    snprintf(tok, sizeof(tok), "%s/up2.out", u.dir);
    text = NULL;
    cr_assert_geq(read_full_file(tok, 1 << 16, &text, NULL), 0);
    cr_expect(strstr(text, "another `einsora up`"), "%s", text);
    free(text);
    /* A --listen no server could use is a usage error, before any file is made. */
    snprintf(cmd2, sizeof(cmd2),
             "'%s' up --no-local --listen nonsense --state '%s/fresh/x.db' > /dev/null 2>&1",
             EINSORA_BIN, u.dir);
    rc = system(cmd2);
    cr_expect(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "status %d", rc);
    snprintf(tok, sizeof(tok), "%s/fresh", u.dir);
    cr_expect_neq(access(tok, F_OK), 0, "a folder was made for a --listen no server can use");
    kill(u.pid, SIGTERM);
    int status;
    cr_assert_eq(waitpid(u.pid, &status, 0), u.pid);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "einsora up did not stop cleanly");
    free(u.token);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", u.dir);
    cr_expect_eq(system(cmd), 0);
}
