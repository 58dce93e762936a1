/* test-cli-config.c: the CLI finds its server and token without exports: contexts
 * in $XDG_CONFIG_HOME/einsora/config written by `einsora login`, chosen with `einsora config
 * use-context`, and the precedence flags > environment > context, against the real server. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "srv-helpers.h"

static TestServer ts;
static char cfg_dir[64], tok_file[128], cfg_file[128];

static void setup(void) {
    ts_start(&ts);
    strcpy(cfg_dir, "/tmp/einsora-cfg-XXXXXX");
    cr_assert(mkdtemp(cfg_dir));
    snprintf(tok_file, sizeof(tok_file), "%s/admin.token", cfg_dir);
    snprintf(cfg_file, sizeof(cfg_file), "%s/einsora/config", cfg_dir);
    FILE *f = fopen(tok_file, "w");
    cr_assert(f);
    fprintf(f, "%s\n", ts.admin);
    fclose(f);
    setenv("XDG_CONFIG_HOME", cfg_dir, 1);
    unsetenv("EINSORA_SERVER");
    unsetenv("EINSORA_TOKEN");
    unsetenv("EINSORA_CONTEXT");
}

static void teardown(void) {
    ts_stop(&ts);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cfg_dir);
    cr_expect_eq(system(cmd), 0);
}

TestSuite(cli_config, .init = setup, .fini = teardown, .timeout = 60);

static void write_config(const char *text) {
    char dir[128];
    snprintf(dir, sizeof(dir), "%s/einsora", cfg_dir);
    mkdir(dir, 0700);
    FILE *f = fopen(cfg_file, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
}

Test(cli_config, cli_login_saves_a_context_that_later_verbs_use_without_exports) {
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "login", "--server", ts.url, "--token-file", tok_file,
                         "--context", "lab", NULL);
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect(strstr(out, "context \"lab\" is current"), "%s", out);
    free(out), free(err);
    struct stat st;
    cr_assert_eq(stat(cfg_file, &st), 0, "login wrote %s", cfg_file);
    cr_expect_eq(st.st_mode & 0777, 0600);
    char *text = slurp(cfg_file);
    cr_expect(strstr(text, tok_file), "the file names the token file: %s", text);
    cr_expect(!strstr(text, ts.admin), "the token itself is never copied: %s", text);
    free(text);
    /* No flag, no environment: the context says where and who. */
    rc = run_einsora(&out, &err, "requests", NULL);
    cr_expect_eq(rc, 0, "%s", err);
    free(out), free(err);
    rc = run_einsora(&out, &err, "config", "current-context", NULL);
    cr_expect_eq(rc, 0);
    cr_expect_str_eq(out, "lab\n");
    free(out), free(err);
    rc = run_einsora(&out, &err, "config", "get-contexts", NULL);
    cr_expect_eq(rc, 0);
    cr_expect(strstr(out, "*") && strstr(out, "lab") && strstr(out, ts.url), "%s", out);
    free(out), free(err);
}

Test(cli_config, cli_login_refuses_a_token_the_server_does_not_know_and_saves_nothing) {
    write_config("{}");
    FILE *f = fopen(tok_file, "w");
    fputs("not-a-token\n", f);
    fclose(f);
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "login", "--server", ts.url, "--token-file", tok_file, NULL);
    cr_expect_eq(rc, 4, "not allowed: %s", err);
    cr_expect(strstr(err, "einsora login"), "a 401 says what to run: %s", err);
    cr_expect(!strstr(err, "Authorization"), "not which header to send: %s", err);
    free(out), free(err);
    char *text = slurp(cfg_file);
    cr_expect_str_eq(text, "{}", "nothing saved");
    free(text);
}

Test(cli_config, cli_use_context_switches_and_flags_beat_environment_beat_context) {
    char text[1024];
    snprintf(text, sizeof(text),
             "{\"current-context\": \"dead\", \"contexts\": ["
             "{\"name\": \"dead\", \"servers\": [\"http://127.0.0.1:9\"], \"token-file\": \"%s\"},"
             "{\"name\": \"live\", \"servers\": [\"%s\"], \"token-file\": \"%s\"}]}",
             tok_file, ts.url, tok_file);
    write_config(text);
    char *out = NULL, *err = NULL;
    cr_expect_eq(run_einsora(&out, &err, "nodes", NULL), 3, "the current context is down");
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "nodes", "--context", "live", NULL), 0, "%s", err);
    free(out), free(err);
    /* The environment beats the context, the flag beats the environment. */
    setenv("EINSORA_SERVER", ts.url, 1);
    setenv("EINSORA_TOKEN", ts.admin, 1);
    cr_expect_eq(run_einsora(&out, &err, "nodes", NULL), 0, "%s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "nodes", "--server", "http://127.0.0.1:9", NULL), 3);
    free(out), free(err);
    setenv("EINSORA_TOKEN", "wrong", 1);
    cr_expect_eq(run_einsora(&out, &err, "nodes", NULL), 4, "the env's token is used: %s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "nodes", "--token", ts.admin, NULL), 0, "%s", err);
    free(out), free(err);
    unsetenv("EINSORA_SERVER");
    unsetenv("EINSORA_TOKEN");
    cr_expect_eq(run_einsora(&out, &err, "config", "use-context", "live", NULL), 0, "%s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "nodes", NULL), 0, "%s", err);
    free(out), free(err);
    /* A lookup in the local file, not an HTTP 404: 1 (docs/cli.md), as is no current one. */
    cr_expect_eq(run_einsora(&out, &err, "config", "use-context", "nowhere", NULL), 1);
    cr_expect(strstr(err, "no context 'nowhere'"), "%s", err);
    free(out), free(err);
    /* A context saved wrong is removed by name; the current one, then, is none. */
    cr_expect_eq(run_einsora(&out, &err, "config", "delete-context", "dead", NULL), 0, "%s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "config", "get-contexts", NULL), 0);
    cr_expect(out && !strstr(out, "dead") && strstr(out, "live"), "%s", out);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "config", "delete-context", "live", NULL), 0, "%s", err);
    cr_expect(out && strstr(out, "no context is current now"), "%s", out);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "config", "current-context", NULL), 1);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "config", "delete-context", "live", NULL), 1);
    cr_expect(err && strstr(err, "no context 'live'"), "%s", err);
    free(out), free(err);
    write_config("{\"contexts\": []}");
    cr_expect_eq(run_einsora(&out, &err, "config", "current-context", NULL), 1);
    cr_expect(strstr(err, "no current context"), "%s", err);
    free(out), free(err);
}

Test(cli_config, cli_a_token_from_a_context_never_goes_to_another_server) {
    char text[1024];
    snprintf(
            text, sizeof(text),
            "{\"current-context\": \"live\", \"contexts\": ["
            "{\"name\": \"live\", \"servers\": [\"http://127.0.0.1:9\"], \"token-file\": \"%s\"}]}",
            tok_file);
    write_config(text);
    setenv("EINSORA_SERVER", ts.url, 1);
    char *out = NULL, *err = NULL;
    cr_expect_eq(run_einsora(&out, &err, "nodes", NULL), 4,
                 "the server from the environment gets no token from a context of another: %s",
                 err);
    free(out), free(err);
    unsetenv("EINSORA_SERVER");
    /* Nor a server from the flag, even with the context named. */
    cr_expect_eq(run_einsora(&out, &err, "nodes", "--context", "live", "--server", ts.url, NULL), 4,
                 "--context live --server OTHER sends live's token to OTHER: %s", err);
    free(out), free(err);
}

/* A bad contexts file is a bad file (docs/cli.md: exit 1) for every verb, those that only
 * read it on their way to a server as `einsora config` itself: never a usage error (2), since
 * the command line may be right, and the message names the file. */
Test(cli_config, bad_input_config_file_is_a_clear_error_with_exit_1_for_every_verb) {
    static const char *const bad[] = {
            "not json",
            "[]",
            "{\"contexts\": [{\"name\": \"a\"}]}",
            "{\"contexts\": [{\"name\": \"a\", \"servers\": []}]}",
            "{\"contexts\": [{\"name\": \"a\", \"servers\": [\"x\"], \"color\": 1}]}",
            "{\"current-context\": \"b\", \"contexts\": [{\"name\": \"a\", \"servers\": [\"x\"]}]}",
            "{\"contexts\": [{\"name\": \"a\", \"servers\": [\"x\"]}, {\"name\": \"a\", "
            "\"servers\": [\"y\"]}]}",
            "{\"contexts\": [{\"name\": \"a\\n\", \"servers\": [\"x\"]}]}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        write_config(bad[i]);
        char *out = NULL, *err = NULL;
        static const char *const verbs[][3] = {{"nodes"},
                                               {"requests"},
                                               {"events"},
                                               {"request", "show", "1"},
                                               {"config", "get-contexts"},
                                               {"config", "use-context", "a"},
                                               {"config", "current-context"}};
        for (size_t v = 0; v < sizeof(verbs) / sizeof(verbs[0]); v++) {
            int rc = run_einsora(&out, &err, verbs[v][0], verbs[v][1], verbs[v][2], NULL);
            cr_expect_eq(rc, 1, "%s %s: %s: %s", verbs[v][0], verbs[v][1] ? verbs[v][1] : "",
                         bad[i], err);
            cr_expect(err && strstr(err, cfg_file), "the message names the file: %s", err);
            free(out), free(err);
        }
        char *after = slurp(cfg_file);
        cr_expect_str_eq(after, bad[i], "a bad file is left as it was");
        free(after);
    }
}

/* An empty config file (what `touch` leaves) holds no contexts, as kubectl reads one. */
Test(cli_config, cli_an_empty_config_file_is_one_without_contexts) {
    write_config("\n");
    char *out = NULL, *err = NULL;
    cr_expect_eq(run_einsora(&out, &err, "config", "get-contexts", NULL), 0, "%s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "login", "--server", ts.url, "--token-file", tok_file,
                             "--context", "lab", NULL),
                 0, "%s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "requests", NULL), 0, "the saved context is used: %s",
                 err);
    free(out), free(err);
}

Test(cli_config, cli_get_contexts_as_json_for_scripts) {
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "login", "--server", ts.url, "--token-file", tok_file,
                         "--context", "lab", NULL);
    cr_assert_eq(rc, 0, "%s", err);
    free(out), free(err);
    rc = run_einsora(&out, &err, "config", "get-contexts", "-o", "json", NULL);
    cr_assert_eq(rc, 0, "%s", err);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    cr_assert(j, "%s", out);
    cr_expect_str_eq(json_string_value(json_object_get(j, "current-context")), "lab");
    json_t *ctx = json_array_get(json_object_get(j, "contexts"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(ctx, "name")), "lab");
    cr_expect_str_eq(json_string_value(json_array_get(json_object_get(ctx, "servers"), 0)), ts.url);
    cr_expect(json_is_true(json_object_get(ctx, "current")));
    cr_expect_str_eq(json_string_value(json_object_get(ctx, "token-file")), tok_file);
    json_decref(j);
    free(out), free(err);
}
