/* test-hardening.c: hardening against the real server over HTTP: no input crashes it, numbers
 * from outside are decimal only, an escaped NUL never truncates a path, roles cannot be bent. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

TestSuite(hardening, .init = setup, .fini = teardown, .timeout = 60);

static const char *str(json_t *j, const char *key) {
    const char *s = json_string_value(json_object_get(j, key));
    return s ? s : "";
}

static json_int_t num(json_t *j, const char *key) {
    return json_integer_value(json_object_get(j, key));
}

static const char h100[] = "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}";

static json_int_t submit(const char *token, const char *body) {
    json_t *j = NULL;
    long st = ts_call(&ts, token, "POST", "/v1/requests", body, &j);
    cr_assert_eq(st, 201, "submit: %ld %s", st, str(j, "message"));
    json_int_t id = num(j, "id");
    json_decref(j);
    return id;
}

static void expect_status(const char *token, const char *method, const char *path, long want,
                          const char *code) {
    json_t *j = NULL;
    long st = ts_call(&ts, token, method, path, NULL, &j);
    cr_assert_eq(st, want, "%s %s: got %ld (%s)", method, path, st, str(j, "message"));
    if (code) {
        cr_assert_str_eq(str(j, "code"), code, "%s %s", method, path);
        cr_assert_neq(str(j, "message")[0], 0, "an error says why");
    }
    json_decref(j);
}

/* The server still answers, and its invariants hold. */
static void expect_alive(void) {
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/debug/invariants", NULL, &j), 200);
    cr_assert(json_is_true(json_object_get(j, "ok")), "%s", str(j, "violation"));
    json_decref(j);
}

Test(hardening, bad_input_list_cursor_at_its_max_does_not_wrap) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    submit(ts.admin, h100);
    json_t *j = NULL;
    /* The requests' cursor is opaque: a number is not one. */
    expect_status(ts.admin, "GET", "/v1/requests?after=9223372036854775807", 400, "bad_request");
    /* The events' largest cursor is past the newest event: refused as one never given. */
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/events?after=9223372036854775807", NULL, &j),
                 400);
    cr_assert(strstr(str(j, "message"), "past the newest event"), "%s", str(j, "message"));
    json_decref(j);
    /* Beyond what the events' "next" (a JSON integer) can say: refused, not wrapped to 0. */
    expect_status(ts.admin, "GET", "/v1/requests?after=18446744073709551615", 400, "bad_request");
    expect_status(ts.admin, "GET", "/v1/events?after=18446744073709551615", 400, "bad_request");
    expect_status(ts.admin, "GET", "/v1/requests?after=18446744073709551616", 400, "bad_request");
    expect_status(ts.admin, "GET", "/v1/requests?limit=10001", 400, "bad_request");
    expect_alive();
}

Test(hardening, bad_input_ids_and_query_numbers_are_decimal_only) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    json_int_t id = submit(ts.admin, h100);
    cr_assert_eq(id, 1);
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/requests/1", NULL, &j), 200);
    char before[32];
    snprintf(before, sizeof(before), "%s", str(j, "state"));
    json_decref(j);
    /* No id's spelling: a 400 (docs/openapi.yaml), never taken for another id; an id of the
     * right spelling that names nothing: a 404. */
    expect_status(ts.admin, "GET", "/v1/requests/0x1", 400, "bad_request");
    expect_status(ts.admin, "GET", "/v1/requests/01", 400, "bad_request");
    expect_status(ts.admin, "GET", "/v1/requests/abc", 400, "bad_request");
    expect_status(ts.admin, "POST", "/v1/requests/0x1/release", 400, "bad_request");
    expect_status(ts.admin, "POST", "/v1/requests/1x/end", 400, "bad_request");
    expect_status(ts.admin, "GET", "/v1/requests/0", 404, "not_found");
    expect_status(ts.admin, "GET", "/v1/requests/99999999999999999999999", 404, "not_found");
    expect_status(ts.admin, "GET", "/v1/requests?after=0x0", 400, "bad_request");
    expect_status(ts.admin, "GET", "/v1/events?limit=0x10", 400, "bad_request");
    expect_status(ts.admin, "GET", "/v1/events?after=-1", 400, "bad_request");
    /* the 0x1 release above changed nothing */
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/requests/1", NULL, &j), 200);
    cr_assert_str_eq(str(j, "state"), before);
    json_decref(j);
}

Test(hardening, bad_input_escaped_nul_in_path_is_400_and_changes_nothing) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    submit(ts.admin, h100);
    /* Truncated at the NUL this would read "/v1/nodes/n1" (a 405) or the request itself. */
    expect_status(ts.admin, "POST", "/v1/nodes/n1%00/cordon", 400, "bad_request");
    expect_status(ts.admin, "GET", "/v1/requests/1%00", 400, "bad_request");
    expect_status(ts.admin, "GET", "/v1/requests?state=placed%00x", 400, "bad_request");
    /* An escaped '/' would split one segment into two once decoded. */
    expect_status(ts.admin, "POST", "/v1/nodes/n1%2Fcordon", 400, "bad_request");
    expect_status(ts.admin, "POST", "/v1/nodes/x%2f..%2fn1/cordon", 400, "bad_request");
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/n1", NULL, &j), 200);
    cr_assert(!json_is_true(json_object_get(j, "cordoned")), "nothing was cordoned");
    json_decref(j);
    expect_alive();
}

static const char n1_push[] =
        "{\"name\":\"n1\",\"site\":\"dc1\",\"site_kind\":\"datacenter\",\"platform\":\"linux\","
        "\"owner\":\"%s\",\"mode\":\"container\",\"cpus\":64,\"devices\":[{\"pci\":\"0000:17:00."
        "0\","
        "\"class\":\"nvidia-h100-80gb\",\"memory_gb\":80}]}";

static long put_n1(const char *token, const char *owner, json_t **ret) {
    char body[512];
    snprintf(body, sizeof(body), n1_push, owner);
    return ts_call(&ts, token, "PUT", "/v1/nodes/n1", body, ret);
}

static const char *n1_owner(char buf[64]) {
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/n1", NULL, &j), 200);
    snprintf(buf, 64, "%s", str(j, "owner"));
    json_decref(j);
    return buf;
}

Test(hardening, r10_agent_push_never_changes_the_owner_an_admin_registered) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *agent = ts_token(&ts, "n1-agent", "node", "n1");
    json_t *j = NULL;
    long st = put_n1(agent, "mallory", &j);
    cr_assert_eq(st, 200, "%s", str(j, "message"));
    cr_assert_str_eq(str(j, "owner"), "alice", "the push's owner is ignored");
    json_decref(j);
    char buf[64];
    cr_assert_str_eq(n1_owner(buf), "alice");
    /* An admin may change it. */
    cr_assert_eq(put_n1(ts.admin, "bob", NULL), 200);
    cr_assert_str_eq(n1_owner(buf), "bob");
    free(agent);
}

Test(hardening, r10_owner_token_cannot_take_a_node_another_owns) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *bob = ts_token(&ts, "bob", "owner", "n1");
    json_t *j = NULL;
    cr_assert_eq(put_n1(bob, "bob", &j), 403, "%s", str(j, "message"));
    cr_assert_str_eq(str(j, "code"), "forbidden");
    json_decref(j);
    char buf[64];
    cr_assert_str_eq(n1_owner(buf), "alice");
    free(bob);
}

Test(hardening, node_token_reports_but_cannot_release_a_tenants_request) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *agent = ts_token(&ts, "n1-agent", "node", "n1");
    char *ulf = ts_token(&ts, "alice", "user", NULL); /* the owner: runc, no Kata needed */
    json_int_t id = submit(ulf, h100);
    char path[64];
    json_t *j = NULL;
    snprintf(path, sizeof(path), "/v1/requests/%lld", (long long)id);
    cr_assert_eq(ts_call(&ts, agent, "GET", path, NULL, &j), 200,
                 "the agent sees what is placed on its node");
    cr_assert_str_eq(str(j, "state"), "placed");
    json_decref(j);
    snprintf(path, sizeof(path), "/v1/requests/%lld/release", (long long)id);
    expect_status(agent, "POST", path, 403, "forbidden");
    snprintf(path, sizeof(path), "/v1/requests/%lld/activate", (long long)id);
    expect_status(agent, "POST", path, 200, NULL);
    snprintf(path, sizeof(path), "/v1/requests/%lld/release", (long long)id);
    expect_status(agent, "POST", path, 403, "forbidden");
    snprintf(path, sizeof(path), "/v1/requests/%lld", (long long)id);
    cr_assert_eq(ts_call(&ts, ulf, "GET", path, NULL, &j), 200);
    cr_assert_str_eq(str(j, "state"), "active", "the refused release changed nothing");
    json_decref(j);
    snprintf(path, sizeof(path), "/v1/requests/%lld/release", (long long)id);
    expect_status(ulf, "POST", path, 200, NULL);
    free(agent);
    free(ulf);
}

Test(hardening, roles_state_file_is_readable_by_its_owner_only) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    struct stat st;
    cr_assert_eq(stat(ts.state, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "state.db is %o", st.st_mode & 0777);
    char wal[200];
    snprintf(wal, sizeof(wal), "%s-wal", ts.state);
    if (stat(wal, &st) == 0)
        cr_assert_eq(st.st_mode & 0777, 0600, "state.db-wal is %o", st.st_mode & 0777);
}

static char *token_id_of(const char *user);

static bool node_registered(const char *name) {
    char path[64];
    snprintf(path, sizeof(path), "/v1/nodes/%s", name);
    return ts_call(&ts, ts.admin, "GET", path, NULL, NULL) == 200;
}

Test(hardening, roles_agent_takes_its_token_from_a_file_never_from_argv) {
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "agent", "run", "--server", ts.url, "--token", "ens_secret",
                         "--name", "box", "--owner", "root", NULL);
    cr_assert_eq(rc, 2, "a token on the command line is refused: %s", err);
    free(out), free(err);

    char *token = ts_token(&ts, "box-agent", "node", "box");
    char dir[200], file[240], sys[240];
    snprintf(dir, sizeof(dir), "%s/agent", ts.dir);
    snprintf(file, sizeof(file), "%s/token", dir);
    snprintf(sys, sizeof(sys), "%s/empty", dir);
    cr_assert_eq(mkdir(dir, 0700), 0);
    cr_assert_eq(mkdir(sys, 0700), 0);
    char bus[300]; /* a machine without GPUs: its sysfs has an empty PCI bus */
    snprintf(bus, sizeof(bus), "%s/bus", sys);
    cr_assert_eq(mkdir(bus, 0700), 0);
    strcat(bus, "/pci");
    cr_assert_eq(mkdir(bus, 0700), 0);
    strcat(bus, "/devices");
    cr_assert_eq(mkdir(bus, 0700), 0);
    FILE *f = fopen(file, "w");
    cr_assert(f);
    fprintf(f, "%s\n", token);
    fclose(f);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        unsetenv("EINSORA_TOKEN");
        char log[260];
        snprintf(log, sizeof(log), "%s/agent.log", dir);
        if (!freopen(log, "w", stderr))
            _exit(126);
        execl(EINSORA_BIN, EINSORA_BIN, "agent", "run", "--server", ts.url, "--token-file", file,
              "--name", "box", "--owner", "root", "--heartbeat", "1", "--state-dir", dir,
              "--sysfs-root", sys, "--dev-root", sys, "--no-nvml", "--catalog",
              TEST_DATA "/catalog.yaml", "--simulate", NULL);
        _exit(127);
    }
    bool ok = false;
    for (int i = 0; i < 3000 && !(ok = node_registered("box")); i++)
        usleep(10000); /* a deadline, not a measure: 30 s */
    /* Its token revoked while it runs: refused at every heartbeat, which the agent says once,
     * with what to do, not once a heartbeat (three more refusals, counted by the server). */
    char *id = token_id_of("box-agent");
    char *o2 = NULL, *e2 = NULL;
    cr_assert_eq(run_einsora(&o2, &e2, "token", "revoke", "--state", ts.state, id, NULL), 0);
    free(o2), free(e2), free(id);
    double before = -1, now = -1;
    char alog[260];
    snprintf(alog, sizeof(alog), "%s/agent.log", dir);
    for (int i = 0; i < 3000 && before < 0; i++) { /* deadlines, not measures */
        char *text = slurp(alog);
        if (text && strstr(text, "refuses this agent's token"))
            before = ts_metric(&ts, "einsora_http_responses_total{code=\"401\"}");
        free(text);
        if (before < 0)
            usleep(10000);
    }
    cr_assert_geq(before, 1, "the agent said its token is refused");
    for (int i = 0;
         i < 3000 &&
         (now = ts_metric(&ts, "einsora_http_responses_total{code=\"401\"}")) < before + 3;
         i++)
        usleep(10000);
    char *said = slurp(alog);
    size_t lines = 0;
    for (const char *p = said; p && (p = strstr(p, "refuses this agent's token")); p++)
        lines++;
    cr_expect_eq(lines, 1, "said once for %g refusals: %s", now, said);
    cr_expect(said && strstr(said, "einsora token create --role node --nodes box"), "%s", said);
    free(said);
    kill(pid, SIGTERM);
    int status;
    waitpid(pid, &status, 0);
    char log[260];
    snprintf(log, sizeof(log), "%s/agent.log", dir);
    char *text = slurp(log);
    cr_assert(ok, "the agent registered its node with the token from the file: %s", text);
    free(text);
    free(token);
}

/* `einsora token create` with extra arguments; returns the secret. */
static char *token_expiring(const char *user, const char *expires) {
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "token", "create", "--state", ts.state, "--user", user,
                         "--role", "user", "--expires", expires, NULL);
    cr_assert_eq(rc, 0, "%s", err);
    free(err);
    out[strcspn(out, "\n")] = 0;
    return out;
}

static char *token_id_of(const char *user) {
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "token", "list", "--state", ts.state, "--json", NULL);
    cr_assert_eq(rc, 0, "%s", err);
    json_t *j = json_loads(out, 0, NULL);
    free(out), free(err);
    char *id = NULL;
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(j, "tokens"), i, t) if (strcmp(str(t, "user"), user) == 0)
            id = strdup(str(t, "id"));
    json_decref(j);
    cr_assert(id, "token list shows %s's token", user);
    return id;
}

Test(hardening, roles_token_revoked_is_refused_at_once_without_restart) {
    char *ulf = ts_token(&ts, "ulf", "user", NULL);
    expect_status(ulf, "GET", "/v1/requests", 200, NULL);
    char *id = token_id_of("ulf");
    char *out = NULL, *err = NULL;
    cr_assert_eq(run_einsora(&out, &err, "token", "revoke", "--state", ts.state, id, NULL), 0, "%s",
                 err);
    free(out), free(err);
    expect_status(ulf, "GET", "/v1/requests", 401, "unauthorized");
    /* Revoking again: nothing to revoke. */
    cr_assert_eq(run_einsora(&out, &err, "token", "revoke", "--state", ts.state, id, NULL), 5);
    free(out), free(err);
    /* A script revokes what it made: create --json gives the id revoke takes, and the expiry. */
    cr_assert_eq(run_einsora(&out, &err, "token", "create", "--state", ts.state, "--user", "vera",
                             "--role", "user", "--expires", "1h", "--json", NULL),
                 0, "%s", err);
    json_t *made = json_loads(out, 0, NULL);
    cr_assert(made, "%s", out);
    cr_expect_gt(json_integer_value(json_object_get(made, "expires_ms")), 0);
    char *made_id = strdup(str(made, "id"));
    json_decref(made);
    free(out), free(err);
    char *listed = token_id_of("vera");
    cr_expect_str_eq(made_id, listed, "the id token list shows");
    free(listed);
    cr_expect_eq(run_einsora(&out, &err, "token", "revoke", "--state", ts.state, made_id, NULL), 0,
                 "%s", err);
    free(made_id);
    free(out), free(err);
    free(id);
    free(ulf);
}

/* A mistyped --state must not make an empty state file and answer from it (an empty list, a
 * revoke that "finds nothing"): it is an error naming the path, and no file is left behind. */
Test(hardening, bad_input_token_list_and_revoke_on_a_missing_state_file_create_nothing) {
    char path[300];
    snprintf(path, sizeof(path), "%s.typo", ts.state);
    char *out = NULL, *err = NULL;
    cr_expect_eq(run_einsora(&out, &err, "token", "list", "--state", path, NULL), 1);
    cr_expect(err && strstr(err, "no state file") && strstr(err, path), "%s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "token", "revoke", "--state", path, "abcdef12", NULL), 1);
    cr_expect(err && strstr(err, "no state file"), "%s", err);
    free(out), free(err);
    cr_expect_eq(access(path, F_OK), -1, "%s was created", path);
}

static bool refused(const char *token) {
    return ts_call(&ts, token, "GET", "/v1/requests", NULL, NULL) == 401;
}

Test(hardening, roles_token_expired_is_refused_without_restart) {
    char *long_lived = token_expiring("ulf", "1h"), *short_lived = token_expiring("vera", "1s");
    expect_status(long_lived, "GET", "/v1/requests", 200, NULL);
    bool ok = false;
    for (int i = 0; i < 3000 && !(ok = refused(short_lived)); i++)
        usleep(10000); /* a deadline, not a measure: 30 s */
    cr_assert(ok, "a token past its expiry is refused");
    expect_status(short_lived, "GET", "/v1/requests", 401, "unauthorized");
    expect_status(long_lived, "GET", "/v1/requests", 200, NULL);
    char *out = NULL, *err = NULL;
    cr_assert_eq(run_einsora(&out, &err, "token", "create", "--state", ts.state, "--user", "x",
                             "--role", "user", "--expires", "soon", NULL),
                 2);
    free(out), free(err);
    free(long_lived), free(short_lived);
}

static const char rtx[] = "{\"kind\":\"container\",\"class\":\"nvidia-rtx-4090\"}";

static void add_rtx_node(void) {
    const char *node =
            "{\"name\":\"r1\",\"site\":\"dc1\",\"site_kind\":\"datacenter\",\"platform\":"
            "\"linux\",\"owner\":\"ops\",\"mode\":\"container\",\"cpus\":32,\"devices\":["
            "{\"pci\":\"0000:01:00.0\",\"class\":\"nvidia-rtx-4090\",\"memory_gb\":24}]}";
    json_t *j = NULL;
    long st = ts_call(&ts, ts.admin, "POST", "/v1/nodes", node, &j);
    cr_assert_eq(st, 201, "%s", str(j, "message"));
    json_decref(j);
}

/* Submit an RTX 4090 container and say whether it was placed; a request not placed is
 * withdrawn so the next one starts from a free GPU. */
static bool rtx_placed(const char *token) {
    json_t *j = NULL;
    long st = ts_call(&ts, token, "POST", "/v1/requests", rtx, &j);
    cr_assert(st == 201, "submit: %ld %s", st, str(j, "message"));
    bool placed = strcmp(str(j, "state"), "placed") == 0;
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%lld/%s", (long long)num(j, "id"),
             placed ? "release" : "cancel");
    if (strcmp(str(j, "state"), "refused") != 0)
        cr_assert_eq(ts_call(&ts, token, "POST", path, NULL, NULL), 200, "%s", path);
    json_decref(j);
    return placed;
}

Test(hardening, r9_trust_is_an_admins_grant_decided_at_each_placement) {
    add_rtx_node();
    char *tina = ts_token(&ts, "tina", "user", NULL);
    cr_assert(!rtx_placed(tina), "internal-only GPUs go to trusted tenants only");

    expect_status(tina, "PUT", "/v1/tenants/tina/trust", 403, "forbidden");
    expect_status(ts.admin, "PUT", "/v1/tenants/tina/trust", 200, NULL);
    cr_assert(rtx_placed(tina), "granted: placed");
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/tenants/trusted", NULL, &j), 200);
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(j, "trusted"), 0)), "tina");
    json_decref(j);

    /* A grant survives a restart; nothing is rebuilt from stored requests. */
    ts_kill(&ts, false);
    ts_spawn(&ts);
    cr_assert(rtx_placed(tina), "the grant was stored");
    expect_status(ts.admin, "DELETE", "/v1/tenants/tina/trust", 200, NULL);
    cr_assert(!rtx_placed(tina), "withdrawn: decided from what is granted now");
    ts_kill(&ts, false);
    ts_spawn(&ts);
    cr_assert(!rtx_placed(tina),
              "withdrawn stays withdrawn after a restart, whatever was placed before");
    expect_status(ts.admin, "PUT", "/v1/tenants/Bad/trust", 400, "bad_request");
    free(tina);
}

/* "A user the site marks trusted": an admin marks one by making a token of the trusted role.
 * Its first request grants the user trust, as `tenant trust` does - stored, an event saying
 * so, for the user's other tokens too - and a withdrawal holds until that token is used again. */
Test(hardening, r9_a_trusted_role_token_marks_its_user_trusted) {
    add_rtx_node();
    char *tina = ts_token(&ts, "tina", "user", NULL),
         *tina_trusted = ts_token(&ts, "tina", "trusted", NULL);
    cr_assert(!rtx_placed(tina), "internal-only GPUs go to trusted tenants only");
    cr_assert(rtx_placed(tina_trusted), "a trusted tenant's token: placed");
    cr_assert(rtx_placed(tina), "the user is trusted, not the token");
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/events?limit=10000", NULL, &j), 200);
    json_t *ev = NULL, *e;
    size_t i;
    json_array_foreach(json_object_get(j, "events"), i,
                       e) if (strcmp(str(e, "type"), "tenant.trusted") == 0) ev = e;
    cr_assert_not_null(ev, "no tenant.trusted event");
    cr_expect_str_eq(str(ev, "object"), "tina");
    cr_expect_str_eq(str(json_object_get(ev, "data"), "by"), "token");
    json_decref(j);
    expect_status(ts.admin, "DELETE", "/v1/tenants/tina/trust", 200, NULL);
    cr_assert(!rtx_placed(tina), "withdrawn");
    free(tina), free(tina_trusted);
}

/* A request that waits only for its user's trust (an internal-only card) is placed when an
 * admin grants it, not at the next release on its node, which may never come. */
Test(hardening, r9_a_request_waiting_for_trust_is_placed_at_the_grant) {
    add_rtx_node();
    char *tina = ts_token(&ts, "tina", "user", NULL);
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, tina, "POST", "/v1/requests",
                         "{\"kind\":\"container\",\"class\":\"nvidia-rtx-4090\","
                         "\"wait_for_nodes\":true}",
                         &j),
                 201);
    cr_assert_str_eq(str(j, "state"), "pending", "internal-only: she waits");
    cr_expect(json_is_false(json_object_get(j, "trusted")));
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%lld", (long long)num(j, "id"));
    json_decref(j);
    expect_status(ts.admin, "PUT", "/v1/tenants/tina/trust", 200, NULL);
    cr_assert_eq(ts_call(&ts, tina, "GET", path, NULL, &j), 200);
    cr_expect_str_eq(str(j, "state"), "placed", "placed by the grant itself: %s", str(j, "reason"));
    cr_expect(json_is_true(json_object_get(j, "trusted")),
              "the record says the grant it ran under");
    json_decref(j);
    /* A second one waits for the card; withdrawn meanwhile, it says so as it says why it waits. */
    cr_assert_eq(ts_call(&ts, tina, "POST", "/v1/requests",
                         "{\"kind\":\"container\",\"class\":\"nvidia-rtx-4090\"}", &j),
                 201);
    snprintf(path, sizeof(path), "/v1/requests/%lld", (long long)num(j, "id"));
    cr_expect_str_eq(str(j, "state"), "pending");
    json_decref(j);
    expect_status(ts.admin, "DELETE", "/v1/tenants/tina/trust", 200, NULL);
    cr_assert_eq(ts_call(&ts, tina, "GET", path, NULL, &j), 200);
    cr_expect(json_is_false(json_object_get(j, "trusted")), "%s", str(j, "reason"));
    json_decref(j);
    free(tina);
}

/* A node whose description changes while workloads run there is kept as it was (R4), and the
 * answer says what changed -- a relabel made outside Einsora is the usual cause. */
Test(hardening, r4_a_node_changed_under_running_workloads_is_kept_and_the_change_named) {
    ts_add_h100_node(&ts, "g1", "root", 1);
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/requests",
                         "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", &j),
                 201);
    cr_assert_str_eq(str(j, "state"), "placed");
    json_decref(j);
    const char *changed =
            "{\"name\":\"g1\",\"site\":\"dc1\",\"site_kind\":\"datacenter\",\"platform\":"
            "\"linux\",\"owner\":\"root\",\"mode\":\"vm-passthrough\",\"cpus\":64,\"devices\":"
            "[{\"pci\":\"0000:17:00.0\",\"class\":\"nvidia-h100-80gb\",\"memory_gb\":80}]}";
    cr_assert_eq(ts_call(&ts, ts.admin, "PUT", "/v1/nodes/g1", changed, &j), 409);
    cr_expect(strstr(str(j, "message"),
                     "Node g1 changed (mode container to vm-passthrough) while workloads run "
                     "there"),
              "%s", str(j, "message"));
    json_decref(j);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/g1", NULL, &j), 200);
    cr_expect_str_eq(str(j, "mode"), "container", "kept as it was");
    json_decref(j);
    const char *owner =
            "{\"name\":\"g1\",\"site\":\"dc1\",\"site_kind\":\"datacenter\",\"platform\":"
            "\"linux\",\"owner\":\"carol\",\"mode\":\"container\",\"cpus\":64,\"devices\":"
            "[{\"pci\":\"0000:17:00.0\",\"class\":\"nvidia-h100-80gb\",\"memory_gb\":80}]}";
    cr_assert_eq(ts_call(&ts, ts.admin, "PUT", "/v1/nodes/g1", owner, &j), 409);
    cr_expect(strstr(str(j, "message"), "changed (owner root to carol)"), "%s", str(j, "message"));
    json_decref(j);
}

/* A trust withdrawn counts from the next placement on: what was placed under it stays placed,
 * also across a restart (R16) -- the server must come back with it, not refuse its state. */
Test(hardening, r16_a_request_placed_under_a_withdrawn_trust_survives_a_restart) {
    add_rtx_node();
    char *tina = ts_token(&ts, "tina", "user", NULL);
    expect_status(ts.admin, "PUT", "/v1/tenants/tina/trust", 200, NULL);
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, tina, "POST", "/v1/requests", rtx, &j), 201);
    cr_assert_str_eq(str(j, "state"), "placed");
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%lld", (long long)num(j, "id"));
    json_decref(j);
    expect_status(ts.admin, "DELETE", "/v1/tenants/tina/trust", 200, NULL);
    ts_kill(&ts, false);
    ts_spawn(&ts);
    cr_assert_eq(ts_call(&ts, tina, "GET", path, NULL, &j), 200, "the server came back");
    cr_expect_str_eq(str(j, "state"), "placed", "and the request keeps its GPU");
    json_decref(j);
    cr_assert(!rtx_placed(tina), "the withdrawal counts for the next placement");
    free(tina);
}

Test(hardening, bad_input_duplicate_device_pci_in_one_node_is_refused) {
    const char *node =
            "{\"name\":\"d1\",\"site\":\"dc1\",\"site_kind\":\"datacenter\",\"platform\":"
            "\"linux\",\"owner\":\"ops\",\"mode\":\"container\",\"cpus\":8,\"devices\":["
            "{\"pci\":\"0000:17:00.0\",\"class\":\"nvidia-h100-80gb\",\"memory_gb\":80},"
            "{\"pci\":\"0000:17:00.0\",\"class\":\"nvidia-h100-80gb\",\"memory_gb\":80}]}";
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes", node, &j), 400);
    cr_assert(strstr(str(j, "message"), "same PCI address"), "%s", str(j, "message"));
    json_decref(j);
    expect_status(ts.admin, "GET", "/v1/nodes/d1", 404, "not_found");
}

Test(hardening, r17_heartbeat_takes_any_number_of_workloads_per_node) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *agent = ts_token(&ts, "n1-agent", "node", "n1");
    json_int_t id = submit(ts.admin, h100);
    /* More ids than the old fixed cap of 4096, the placed one among them. */
    json_t *running = json_array();
    for (json_int_t i = 0; i < 6000; i++)
        json_array_append_new(running, json_integer(i == 4321 ? id : 100000 + i));
    json_t *hb = json_pack("{s:i, s:o}", "interval_s", 60, "running", running);
    char *body = json_dumps(hb, JSON_COMPACT);
    json_decref(hb);
    json_t *j = NULL;
    long st = ts_call(&ts, agent, "POST", "/v1/nodes/n1/heartbeat", body, &j);
    cr_assert_eq(st, 200, "%ld %s", st, str(j, "message"));
    json_decref(j);
    free(body);
    free(agent);
    expect_alive();
}

/* Make every write to `table` fail inside the server's transactions (a trigger on the state
 * file, which the running server's connections pick up), or stop doing so. */
static void inject_write_failure(const char *table, bool on) {
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(ts.state, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    char sql[256];
    if (on)
        snprintf(sql, sizeof(sql),
                 "CREATE TRIGGER inject_%s BEFORE INSERT ON %s BEGIN "
                 "SELECT RAISE(ABORT, 'injected failure'); END;",
                 table, table);
    else
        snprintf(sql, sizeof(sql), "DROP TRIGGER inject_%s;", table);
    char *msg = NULL;
    cr_assert_eq(sqlite3_exec(db, sql, NULL, NULL, &msg), SQLITE_OK, "%s", msg);
    sqlite3_close(db);
}

Test(hardening, r16_a_failed_statement_fails_the_whole_batch) {
    inject_write_failure("nodes", true);
    const char *node =
            "{\"name\":\"n9\",\"site\":\"dc1\",\"site_kind\":\"datacenter\",\"platform\":"
            "\"linux\",\"owner\":\"ops\",\"mode\":\"container\",\"cpus\":8}";
    json_t *j = NULL;
    long st = ts_call(&ts, ts.admin, "POST", "/v1/nodes", node, &j);
    cr_assert_eq(st, 503, "the node's row was not written, so nothing is acknowledged: %ld %s", st,
                 str(j, "message"));
    json_decref(j);
    /* The server stops rather than serve memory the file does not have; a restart rebuilds
     * from what was committed: no node n9, no event about it. */
    ts_kill(&ts, true);
    inject_write_failure("nodes", false);
    ts_spawn(&ts);
    expect_status(ts.admin, "GET", "/v1/nodes/n9", 404, "not_found");
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/events?after=0", NULL, &j), 200);
    cr_assert_eq(json_array_size(json_object_get(j, "events")), 0,
                 "the batch's event was rolled back");
    json_decref(j);
    ts_add_h100_node(&ts, "n1", "alice", 1);
}

Test(hardening, readyz_is_false_when_the_store_cannot_be_written_at_start) {
    expect_status(NULL, "GET", "/readyz", 200, NULL);
    ts_kill(&ts, false);
    /* Every write of a fleet record fails from now on: the start's probe does one. */
    inject_write_failure("fleet", true);
    ts_spawn(&ts);
    expect_status(NULL, "GET", "/readyz", 503, "unavailable");
    expect_status(NULL, "GET", "/healthz", 200, NULL);
    expect_status(ts.admin, "GET", "/v1/requests", 200, NULL); /* reads still work */
    ts_kill(&ts, false);
    inject_write_failure("fleet", false);
    ts_spawn(&ts);
    expect_status(NULL, "GET", "/readyz", 200, NULL);
}

/* Page through `path` with a small limit, following "next"; returns the ids (or seqs). */
static json_t *pages(const char *token, const char *path, const char *key, const char *id_key) {
    json_t *ids = json_array();
    char after[64] = "";
    for (int guard = 0; guard < 1000; guard++) {
        char url[256];
        snprintf(url, sizeof(url), "%s%s%slimit=7", path, strchr(path, '?') ? "&" : "?", after);
        json_t *j = NULL;
        cr_assert_eq(ts_call(&ts, token, "GET", url, NULL, &j), 200, "%s", url);
        json_t *items = json_object_get(j, key);
        size_t i;
        json_t *it;
        json_array_foreach(items, i, it) json_array_append_new(ids, json_integer(num(it, id_key)));
        char next[64];
        bool more = ts_next_query(j, next, sizeof(next)) && strcmp(next, after) != 0;
        size_t n = json_array_size(items);
        json_decref(j);
        if (n == 0 || !more)
            return ids;
        snprintf(after, sizeof(after), "%s", next);
    }
    cr_assert_fail("paging did not end");
    return ids;
}

Test(hardening, history_indexed_lists_page_through_exactly_ones_own) {
    char *alice = ts_token(&ts, "alice", "user", NULL), *bob = ts_token(&ts, "bob", "user", NULL);
    json_t *mine = json_array();
    for (int i = 0; i < 30; i++) {
        json_array_append_new(
                mine, json_integer(submit(alice, "{\"kind\":\"container\",\"class\":\"cpu\"}")));
        submit(bob, "{\"kind\":\"container\",\"class\":\"cpu\"}");
    }
    json_t *ids = pages(alice, "/v1/requests", "requests", "id");
    cr_assert(json_equal(ids, mine), "alice's requests, in order, across pages");
    json_decref(ids);
    /* Her events: each of her requests' submission and decision, in seq order, nobody else's. */
    json_t *seqs = pages(alice, "/v1/events", "events", "seq");
    cr_assert_geq(json_array_size(seqs), 30);
    for (size_t i = 1; i < json_array_size(seqs); i++)
        cr_assert_lt(json_integer_value(json_array_get(seqs, i - 1)),
                     json_integer_value(json_array_get(seqs, i)));
    json_t *all = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/events?after=0&limit=10000", NULL, &all), 200);
    size_t hers = 0, i;
    json_t *e;
    json_array_foreach(json_object_get(all, "events"), i, e) hers +=
            strcmp(str(e, "user"), "alice") == 0;
    cr_assert_eq(json_array_size(seqs), hers, "exactly her events");
    json_decref(all);
    json_decref(seqs);
    /* An admin's list of live requests pages through the live index. */
    json_t *live = pages(ts.admin, "/v1/requests?state=placed", "requests", "id");
    json_t *placed = ts_list_all(&ts, ts.admin, "/v1/requests", "requests");
    size_t n_placed = 0;
    json_array_foreach(placed, i, e) n_placed += strcmp(str(e, "state"), "placed") == 0;
    cr_assert_eq(json_array_size(live), n_placed);
    json_decref(live), json_decref(placed), json_decref(mine);
    free(alice), free(bob);
}

static long show(const char *token, json_int_t id) {
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%lld", (long long)id);
    return ts_call(&ts, token, "GET", path, NULL, NULL);
}

Test(hardening, history_retention_frees_ended_requests_and_the_store_keeps_ids_growing) {
    ts_kill(&ts, false);
    ts.extra[0] = "--retention", ts.extra[1] = "1s";
    ts.extra[2] = "--store-retention", ts.extra[3] = "2s";
    ts_spawn(&ts);
    char *alice = ts_token(&ts, "alice", "user", NULL);
    /* A node first: a request no node of the fleet could ever run is refused (R18). */
    ts_add_h100_node(&ts, "n1", "alice", 1);
    static const char cpu[] = "{\"kind\":\"container\",\"class\":\"cpu\"}";
    json_t *j = NULL;
    cr_assert_eq(ts_call_key(&ts, alice, "POST", "/v1/requests", cpu, "k1", &j), 201);
    json_int_t ended = num(j, "id");
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%lld/%s", (long long)ended,
             strcmp(str(j, "state"), "pending") == 0 ? "cancel" : "release");
    json_decref(j);
    cr_assert_eq(ts_call(&ts, alice, "POST", path, NULL, NULL), 200);
    /* A live request is never dropped, however old. */
    json_int_t live = submit(alice, h100);

    bool gone = false;
    for (int i = 0; i < 3000 && !(gone = show(alice, ended) == 404); i++)
        usleep(10000); /* a deadline, not a measure: 30 s */
    cr_assert(gone, "the ended request left memory after its retention");
    cr_assert_eq(show(alice, live), 200);
    /* Its idempotency key went with it: the same key now makes a new request. */
    cr_assert_eq(ts_call_key(&ts, alice, "POST", "/v1/requests", cpu, "k1", &j), 201);
    json_int_t again = num(j, "id");
    json_decref(j);
    cr_assert_gt(again, live);

    /* Once the store's retention passed too, a restart rebuilds without it, and new ids
     * still follow the newest ever handed out. */
    usleep(2500000); /* let the store retention (2 s) elapse: a wait for the clock, not a measure */
    ts_call(&ts, alice, "GET", "/v1/requests", NULL, NULL); /* a batch or two for the writer */
    bool pruned = false;
    for (int i = 0; i < 30 && !pruned; i++) {
        ts_kill(&ts, false);
        sqlite3 *db = NULL;
        cr_assert_eq(sqlite3_open(ts.state, &db), SQLITE_OK);
        char sql[96];
        snprintf(sql, sizeof(sql), "SELECT count(*) FROM requests WHERE id = %lld",
                 (long long)ended);
        sqlite3_stmt *st = NULL;
        cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
        pruned = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 0;
        sqlite3_finalize(st);
        sqlite3_close(db);
        ts_spawn(&ts);
        if (!pruned)
            usleep(1000000); /* the writer prunes the store at most every retention/2 */
    }
    cr_assert(pruned, "the store dropped the ended request after its retention");
    cr_assert_eq(show(alice, ended), 404);
    cr_assert_eq(show(alice, live), 200, "the live request survived the restart");
    json_int_t next = submit(alice, "{\"kind\":\"container\",\"class\":\"cpu\"}");
    cr_assert_gt(next, again, "ids never restart");
    expect_alive();
    free(alice);
}

Test(hardening,
     bad_input_node_with_a_pci_address_the_agent_would_refuse_is_400_and_changes_nothing) {
    const char *bad[] = {"gpu0", "0000:3B:00.0", "0000:3b:00.8"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char node[512];
        snprintf(node, sizeof(node),
                 "{\"name\":\"badpci\",\"site\":\"dc1\",\"site_kind\":\"datacenter\",\"platform\":"
                 "\"linux\",\"owner\":\"ops\",\"mode\":\"container\",\"devices\":["
                 "{\"pci\":\"%s\",\"class\":\"nvidia-h100-80gb\",\"memory_gb\":80}]}",
                 bad[i]);
        json_t *j = NULL;
        cr_expect_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes", node, &j), 400, "%s", bad[i]);
        cr_expect(j && strstr(str(j, "message"), "'pci'"), "%s: %s", bad[i],
                  j ? str(j, "message") : "");
        json_decref(j);
    }
    expect_status(ts.admin, "GET", "/v1/nodes/badpci", 404, "not_found");
}

/* Set the stored record of request `id` to have this placement (JSON text), by hand. */
static void edit_stored_placement(long id, const char *placement_json) {
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(ts.state, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    char sql[256];
    snprintf(sql, sizeof(sql),
             "UPDATE requests SET doc = json_set(doc, '$.placement', json('%s')) WHERE id = %ld;",
             placement_json, id);
    char *msg = NULL;
    cr_assert_eq(sqlite3_exec(db, sql, NULL, NULL, &msg), SQLITE_OK, "%s", msg);
    cr_assert_eq(sqlite3_changes(db), 1);
    sqlite3_close(db);
}

/* A request keeps where it ran beside its placement's text, read back from the stored record
 * at each start (R16). A record edited by hand: a placement of null reads as none; one that
 * is not an object stops the start with the request named, rather than serve a record whose
 * placement no reader could use. */
Test(hardening, bad_input_a_stored_placement_that_is_not_an_object_stops_the_start) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *alice = ts_token(&ts, "alice", "user", NULL); /* the owner: runc, no Kata needed */
    json_int_t a = submit(alice, h100), b = submit(alice, h100);
    free(alice);
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%lld/release", (long long)a);
    expect_status(ts.admin, "POST", path, 200, NULL);
    ts_kill(&ts, false);
    edit_stored_placement((long)a, "null");
    ts_spawn(&ts);
    json_t *j = NULL;
    snprintf(path, sizeof(path), "/v1/requests/%lld", (long long)a);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", path, NULL, &j), 200);
    cr_expect_null(json_object_get(j, "placement"), "a null placement reads as none");
    json_decref(j);
    ts_kill(&ts, false);
    edit_stored_placement((long)b, "\"n1\"");
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "serve", "--listen", "127.0.0.1:0", "--state", ts.state,
                         "--catalog", TEST_DATA "/catalog.yaml", NULL);
    cr_expect_neq(rc, 0);
    char want[64];
    snprintf(want, sizeof(want), "stored request %lld cannot be read back", (long long)b);
    cr_expect(strstr(err, want), "%s", err);
    free(out);
    free(err);
}

/* R16: a second server on the same SQLite state file would answer from a copy that goes
 * stale at the first's next commit, and fail its own first write: it refuses to start,
 * saying why, and the first goes on. A token made meanwhile (the same file, no server) is
 * fine: SQLite's own locks cover it. */
Test(hardening, r16_a_second_server_on_the_same_state_file_refuses_to_start) {
    char *err = NULL;
    int rc = run_einsora(NULL, &err, "serve", "--state", ts.state, "--listen", "127.0.0.1:0", NULL);
    cr_expect_eq(rc, 1, "%s", err);
    cr_expect(strstr(err, "is in use by another einsora server"), "%s", err);
    free(err);
    char *tok = ts_token(&ts, "bob", "user", NULL);
    cr_assert(tok);
    free(tok);
    expect_alive();
}

/* R9, R3: a site's kind decides internal-only classes and node modes, so an agent's push
 * keeps its node's registered site (as it keeps the owner, R10): a node token cannot move a
 * datacenter node to a lab site, where strangers would get its internal-only cards. An admin
 * moves it (a wrong --site-kind, corrected), and that leaves no datacenter mode on a lab
 * machine (R16): such a node could not be stored again, and the server would not restart. */
Test(hardening, r9_r16_only_an_admin_moves_a_node_out_of_a_datacenter_and_it_restores) {
    char *agent = ts_token(&ts, "dc9-agent", "node", "dc9");
    const char *dc = "{\"name\":\"dc9\",\"site\":\"s\",\"site_kind\":\"datacenter\",\"platform\":"
                     "\"linux\",\"owner\":\"ops\",\"mode\":\"container\",\"cpus\":4}";
    const char *lab = "{\"name\":\"dc9\",\"site\":\"t\",\"site_kind\":\"lab\",\"platform\":"
                      "\"linux\",\"owner\":\"ops\",\"cpus\":4}";
    cr_assert_eq(ts_call(&ts, agent, "PUT", "/v1/nodes/dc9", dc, NULL), 201);
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, agent, "PUT", "/v1/nodes/dc9", lab, &j), 200, "%s",
                 str(j, "message"));
    cr_expect_str_eq(str(j, "site_kind"), "datacenter", "an agent moved its node's site");
    cr_expect_str_eq(str(j, "site"), "s");
    json_decref(j);
    char *owner = ts_token(&ts, "ops", "owner", "dc9");
    cr_assert_eq(ts_call(&ts, owner, "PUT", "/v1/nodes/dc9", lab, &j), 403, "%s",
                 str(j, "message"));
    json_decref(j);
    cr_assert_eq(ts_call(&ts, ts.admin, "PUT", "/v1/nodes/dc9", lab, &j), 200, "%s",
                 str(j, "message"));
    cr_expect_null(json_object_get(j, "mode"), "a lab machine has no node mode (R7)");
    json_decref(j);
    ts_kill(&ts, false);
    ts_spawn(&ts); /* asserts the server comes up */
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/dc9", NULL, &j), 200);
    cr_expect_str_eq(str(j, "site_kind"), "lab");
    json_decref(j);
    free(agent), free(owner);
}

/* R17: a workload that ends frees its allocation, cpu work too: an active cpu container the
 * node's agent no longer reports in its heartbeat has ended, as a GPU one has, and its cores
 * are free again. */
Test(hardening, r17_cpu_work_the_agent_no_longer_runs_is_ended_and_its_cores_freed) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *agent = ts_token(&ts, "n1-agent", "node", "n1");
    char *alice = ts_token(&ts, "alice", "user", NULL);
    json_int_t gpu = submit(alice, h100),
               cpu = submit(alice, "{\"kind\":\"container\",\"class\":\"cpu\",\"count\":2}");
    char path[64];
    json_int_t ids[] = {gpu, cpu};
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "/v1/requests/%lld/activate", (long long)ids[i]);
        expect_status(agent, "POST", path, 200, NULL);
    }
    cr_assert_eq(ts_call(&ts, agent, "POST", "/v1/nodes/n1/heartbeat",
                         "{\"interval_s\":60,\"running\":[]}", NULL),
                 200);
    json_t *j = NULL;
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "/v1/requests/%lld", (long long)ids[i]);
        cr_assert_eq(ts_call(&ts, alice, "GET", path, NULL, &j), 200);
        cr_expect_str_neq(str(j, "state"), "active", "request %lld", (long long)ids[i]);
        json_decref(j);
    }
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/n1", NULL, &j), 200);
    cr_expect_eq(json_integer_value(json_object_get(j, "cpu_used")), 0, "the cores are free");
    json_decref(j);
    free(agent);
    free(alice);
}

static json_t *request_of(const char *token, json_int_t id) {
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%lld", (long long)id);
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, token, "GET", path, NULL, &j), 200);
    return j;
}

/* R16: a request acknowledged as waiting goes on waiting across a restart, also when what it
 * waits for could not run now (a trust withdrawn since: a stranger's container needs Kata,
 * R2b) -- a restart is no submit to refuse at (R18); the grant again lets it run. */
Test(hardening, r16_a_waiting_request_stays_waiting_across_a_restart_after_a_trust_withdrawal) {
    ts_add_h100_node(&ts, "n1", "ops", 1);
    char *alice = ts_token(&ts, "alice", "user", NULL);
    cr_assert_eq(ts_call(&ts, ts.admin, "PUT", "/v1/tenants/alice/trust", NULL, NULL), 200);
    json_int_t first = submit(alice, h100), second = submit(alice, h100);
    json_t *j = request_of(alice, second);
    cr_assert_str_eq(str(j, "state"), "pending");
    json_decref(j);
    cr_assert_eq(ts_call(&ts, ts.admin, "DELETE", "/v1/tenants/alice/trust", NULL, NULL), 200);
    ts_kill(&ts, true);
    ts_spawn(&ts);
    j = request_of(alice, second);
    cr_expect_str_eq(str(j, "state"), "pending", "acknowledged waiting: %s", str(j, "reason"));
    json_decref(j);
    cr_assert_eq(ts_call(&ts, ts.admin, "PUT", "/v1/tenants/alice/trust", NULL, NULL), 200);
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%lld/release", (long long)first);
    cr_assert_eq(ts_call(&ts, alice, "POST", path, NULL, NULL), 200);
    j = request_of(alice, second);
    cr_expect_str_eq(str(j, "state"), "placed", "%s", str(j, "reason"));
    json_decref(j);
    free(alice);
}

/* R2c, R2e, bad input: 'share' time-slices a whole GPU; asked of a MIG slice class it would be
 * dropped without a word. Refused (400), nothing stored. */
Test(hardening, bad_input_r2e_share_on_a_mig_slice_is_refused) {
    json_t *j = NULL;
    long st = ts_call(&ts, ts.admin, "POST", "/v1/requests",
                      "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb-mig-1g.10gb\","
                      "\"share\":true}",
                      &j);
    cr_expect_eq(st, 400, "%s", str(j, "message"));
    cr_expect(strstr(str(j, "message"), "MIG slice"), "%s", str(j, "message"));
    json_decref(j);
    json_t *all = ts_list_all(&ts, ts.admin, "/v1/requests", "requests");
    cr_expect_eq(json_array_size(all), 0, "nothing was stored");
    json_decref(all);
}
