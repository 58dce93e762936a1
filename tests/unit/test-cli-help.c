/* test-cli-help.c: help and mistakes on the command line: every verb's --help lists
 * every flag it mentions with a sentence, `einsora help VERB` is `einsora VERB --help`, and a
 * mistyped verb, sub-verb or option is refused with the nearest one suggested. */
#include <ctype.h>
#include <criterion/criterion.h>
#include <jansson.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "helpers.h"

/* The verbs as `einsora help` lists them (two spaces, a name, spaces, a sentence). */
static size_t list_verbs(char names[][32], size_t max) {
    char *out = NULL;
    cr_assert_eq(run_einsora(&out, NULL, "help", NULL), 0);
    char *p = strstr(out, "Verbs:\n");
    cr_assert(p, "%s", out);
    size_t n = 0;
    for (p = strchr(p, '\n') + 1; strncmp(p, "  ", 2) == 0 && n < max;) {
        size_t len = strcspn(p + 2, " ");
        cr_assert_lt(len, 32);
        snprintf(names[n++], 32, "%.*s", (int)len, p + 2);
        p = strchr(p, '\n');
        if (!p)
            break;
        p++;
    }
    free(out);
    return n;
}

/* Every --flag the help mentions has a line of its own that says what it does: the flag
 * starts a line (after spaces) or a second column (after two spaces), and words follow. */
static void expect_flags_described(const char *verb, const char *help) {
    regex_t flag;
    cr_assert_eq(regcomp(&flag, "--[a-z][a-z0-9-]*", REG_EXTENDED), 0);
    regmatch_t m;
    for (const char *p = help; regexec(&flag, p, 1, &m, 0) == 0; p += m.rm_eo) {
        char name[64], pattern[160];
        snprintf(name, sizeof(name), "%.*s", (int)(m.rm_eo - m.rm_so), p + m.rm_so);
        snprintf(pattern, sizeof(pattern), "(^|\n|  )[ ]*(-[a-zA-Z], )?%s[ =][^\n]*[a-z]{3}", name);
        regex_t described;
        cr_assert_eq(regcomp(&described, pattern, REG_EXTENDED), 0);
        cr_expect_eq(regexec(&described, help, 0, NULL, 0), 0,
                     "`einsora %s --help` mentions %s without a line saying what it does", verb,
                     name);
        regfree(&described);
    }
    regfree(&flag);
}

Test(cli_help, cli_every_verb_has_help_that_describes_each_flag) {
    char verbs[64][32];
    size_t n = list_verbs(verbs, 64);
    cr_assert_geq(n, 16, "the verb table is listed");
    static const char *const subs[][2] = {{"agent", "run"},
                                          {"agent", "discover"},
                                          {"agent", "bind"},
                                          {"node", "mode"},
                                          {"k8s", "sync"}};
    for (size_t i = 0; i < n + sizeof(subs) / sizeof(subs[0]); i++) {
        const char *verb = i < n ? verbs[i] : subs[i - n][0], *sub = i < n ? NULL : subs[i - n][1];
        char *out = NULL, *err = NULL;
        int rc = sub ? run_einsora(&out, &err, verb, sub, "--help", NULL)
                     : run_einsora(&out, &err, verb, "--help", NULL);
        cr_expect_eq(rc, 0, "%s %s --help: %s", verb, sub ? sub : "", err);
        cr_expect(strstr(out, "usage: einsora"), "%s --help: %s", verb, out);
        cr_expect(strstr(out, "--help"), "%s --help names --help: %s", verb, out);
        if (strcmp(verb, "help") != 0) /* the overview: verbs, not flags */
            expect_flags_described(verb, out);
        free(out), free(err);
    }
}

/* `einsora k8s sync --help` lists every option the sync takes, the cluster options it
 * shares with kubevirt-config included: an option the help leaves out is one nobody finds. */
Test(cli_help, cli_k8s_sync_help_lists_every_option_it_takes) {
    static const char *const flags[] = {"--server",
                                        "--token",
                                        "--kubeconfig",
                                        "--context",
                                        "--in-cluster",
                                        "--catalog",
                                        "--site",
                                        "--owner",
                                        "--capabilities",
                                        "--interval",
                                        "--switch-timeout",
                                        "--namespace",
                                        "--pod-image",
                                        "--vm-image",
                                        "--kata-runtime-class",
                                        "--quiet",
                                        "--help"};
    char *out = NULL;
    cr_assert_eq(run_einsora(&out, NULL, "k8s", "sync", "--help", NULL), 0);
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) /* each described: above */
        cr_expect(strstr(out, flags[i]), "%s is not listed: %s", flags[i], out);
    free(out);
}

Test(cli_help, cli_help_verb_is_the_verbs_own_help) {
    char *a = NULL, *b = NULL;
    cr_assert_eq(run_einsora(&a, NULL, "help", "requests", NULL), 0);
    cr_assert_eq(run_einsora(&b, NULL, "requests", "--help", NULL), 0);
    cr_expect_str_eq(a, b);
    free(a), free(b);
    cr_assert_eq(run_einsora(&a, NULL, "help", "node", "mode", NULL), 0);
    cr_assert_eq(run_einsora(&b, NULL, "node", "mode", "--help", NULL), 0);
    cr_expect_str_eq(a, b);
    free(a), free(b);
    char *err = NULL;
    cr_expect_eq(run_einsora(&a, &err, "help", "reqests", NULL), 2);
    cr_expect(strstr(err, "did you mean `requests`?"), "%s", err);
    free(a), free(err);
}

Test(cli_help, cli_unknown_verb_suggests_the_nearest) {
    static const char *const cases[][2] = {{"reqests", "requests"}, {"evnets", "events"},
                                           {"nodse", "nodes"},      {"capcity", "capacity"},
                                           {"vesion", "version"},   {"loign", "login"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out = NULL, *err = NULL, want[64];
        cr_expect_eq(run_einsora(&out, &err, cases[i][0], NULL), 2);
        snprintf(want, sizeof(want), "did you mean `%s`?", cases[i][1]);
        cr_expect(strstr(err, want), "%s: %s", cases[i][0], err);
        free(out), free(err);
    }
    char *out = NULL, *err = NULL;
    cr_expect_eq(run_einsora(&out, &err, "zzzzzzzz", NULL), 2);
    cr_expect(!strstr(err, "did you mean"), "nothing is near: %s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "agent", "discovr", NULL), 2);
    cr_expect(strstr(err, "did you mean `discover`?"), "%s", err);
    free(out), free(err);
    /* A prefix several flags share is ambiguous, and names them all, not one guess. */
    cr_expect_eq(run_einsora(&out, &err, "request", "create", "--wai", NULL), 2);
    cr_expect(err && strstr(err, "'--wai' is ambiguous") && strstr(err, "`--wait`") &&
                      strstr(err, "`--wait-s`") && strstr(err, "`--wait-for-nodes`"),
              "%s", err);
    free(out), free(err);
}

/* The options every API verb takes may come before the verb too, as kubectl takes them:
 * `einsora --server URL nodes` asks that server (exit 3: nobody listens there), and a
 * command's words after `--` stay the command's. */
Test(cli_help, cli_remote_options_before_the_verb_are_the_verbs) {
    char *out = NULL, *err = NULL;
    cr_expect_eq(run_einsora(&out, &err, "--server", "http://127.0.0.1:1", "--json", "nodes", NULL),
                 3, "%s", err);
    cr_expect(strstr(err, "cannot reach the server at http://127.0.0.1:1"), "%s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "--server=http://127.0.0.1:1", "node", "show", "x", NULL),
                 3, "%s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "--server", "http://127.0.0.1:1", "run", "--kind",
                             "container", "--class", "cpu", "--", "echo", "--json", NULL),
                 3, "%s", err);
    free(out), free(err);
    /* Not one of them: still an unknown verb. */
    cr_expect_eq(run_einsora(&out, &err, "--serve", "x", "nodes", NULL), 2);
    cr_expect(strstr(err, "unknown verb '--serve'"), "%s", err);
    free(out), free(err);
}

/* Every verb with sub-commands names a mistyped one and suggests the nearest (docs/cli.md),
 * or lists them all when none is near; exit 2, before anything is sent. */
Test(cli_help, cli_unknown_sub_command_suggests_the_nearest_for_every_verb) {
    static const char *const cases[][4] = {
            {"request", "creat", "", "create"},   {"request", "shw", "1", "show"},
            {"token", "creat", "", "create"},     {"config", "use-contxt", "x", "use-context"},
            {"tenant", "trst", "x", "trust"},     {"catalog", "shwo", "", "show"},
            {"k8s", "snc", "", "sync"},           {"node", "shw", "n1", "show"},
            {"agent", "discovr", "", "discover"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out = NULL, *err = NULL, want[96];
        int rc = cases[i][2][0]
                         ? run_einsora(&out, &err, cases[i][0], cases[i][1], cases[i][2], NULL)
                         : run_einsora(&out, &err, cases[i][0], cases[i][1], NULL);
        cr_expect_eq(rc, 2, "%s %s", cases[i][0], cases[i][1]);
        snprintf(want, sizeof(want), "%s: unknown sub-command '%s'; did you mean `%s`?",
                 cases[i][0], cases[i][1], cases[i][3]);
        cr_expect(err && strstr(err, want), "want '%s' in: %s", want, err);
        cr_expect(err && !strstr(err, "usage:"), "one line, not the usage above it: %s", err);
        free(out), free(err);
    }
    char *out = NULL, *err = NULL;
    /* With more arguments than any sub-command takes, the typo is still named first. */
    cr_expect_eq(run_einsora(&out, &err, "node", "mod", "n1", "container", NULL), 2);
    cr_expect(err && strstr(err, "node: unknown sub-command 'mod'; did you mean `mode`?"), "%s",
              err);
    free(out), free(err);
    /* `einsora help help` is `einsora help`, as `help VERB` is `VERB --help`. */
    cr_expect_eq(run_einsora(&out, &err, "help", "help", NULL), 0, "%s", err);
    cr_expect(out && strstr(out, "help VERB"), "%s", out);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "tenant", "zzzzzzzz", "x", NULL), 2);
    cr_expect(err && strstr(err, "unknown sub-command 'zzzzzzzz' (list, trust, untrust;"), "%s",
              err);
    free(out), free(err);
}

/* Small things a user reads: the common options once in `stop --help`, and a node file that
 * cannot be opened named without the JSON reader's "-1:-1" placeholder position. */
Test(cli_help, cli_help_and_file_errors_read_cleanly) {
    char *out = NULL, *err = NULL;
    cr_assert_eq(run_einsora(&out, &err, "stop", "--help", NULL), 0);
    const char *first = strstr(out, "  --server URL"),
               *again = first ? strstr(first + 1, "  --server URL") : NULL;
    cr_expect(first && !again, "the common options once: %s", out);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "node", "register", "/nonexistent-einsora.json",
                             "--server", "http://127.0.0.1:1", "--token", "x", NULL),
                 1);
    cr_expect(err && strstr(err, "/nonexistent-einsora.json: unable to open") && !strstr(err, "-1"),
              "%s", err);
    free(out), free(err);
    /* A missing required option is named, not left to the usage text to imply. */
    cr_expect_eq(run_einsora(&out, &err, "login", "--server", "http://127.0.0.1:1", NULL), 2);
    cr_expect(err && strstr(err, "login: --token-file FILE is missing"), "%s", err);
    free(out), free(err);
    /* A token file others may read is warned about, as ssh and kubectl do (the login itself
     * fails here: no server). */
    char tok[] = "/tmp/einsora-tok-XXXXXX";
    int fd = mkstemp(tok);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, "secret\n", 7), 7);
    close(fd);
    cr_assert_eq(chmod(tok, 0644), 0);
    run_einsora(&out, &err, "login", "--server", "http://127.0.0.1:1", "--token-file", tok, NULL);
    cr_expect(err && strstr(err, "can be read by others (mode 0644): chmod 600"), "%s", err);
    free(out), free(err);
    cr_assert_eq(chmod(tok, 0600), 0);
    run_einsora(&out, &err, "login", "--server", "http://127.0.0.1:1", "--token-file", tok, NULL);
    cr_expect(err && !strstr(err, "can be read by others"), "%s", err);
    free(out), free(err);
    unlink(tok);
}

/* A flag that would be dropped or ignored is refused (exit 2, before anything runs): a
 * capability the control plane never acts on, a node mode outside a datacenter, two state
 * locations, nodes on a token whose role names none. */
Test(cli_help, bad_input_cli_flags_that_would_be_ignored_are_refused) {
    char tok[] = "/tmp/einsora-tok-XXXXXX";
    int fd = mkstemp(tok);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, "secret\n", 7), 7);
    close(fd);
    static const char *const agent[] = {"agent",        "run", "--server", "http://127.0.0.1:1",
                                        "--token-file", NULL,  "--owner",  "ops"};
    static const struct {
        const char *flag, *value, *want;
    } cases[] = {
            {"--capabilities", "kata,bogus", "unknown capability 'bogus'"},
            {"--capabilities", "mig-in-kat", "did you mean `mig-in-kata`?"},
            {"--mode", "vm-passthrough", "--mode is for a datacenter node"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out = NULL, *err = NULL;
        int rc = run_einsora(&out, &err, agent[0], agent[1], agent[2], agent[3], agent[4], tok,
                             agent[6], agent[7], cases[i].flag, cases[i].value, NULL);
        cr_expect_eq(rc, 2, "%s %s", cases[i].flag, cases[i].value);
        cr_expect(err && strstr(err, cases[i].want), "want '%s' in: %s", cases[i].want, err);
        free(out), free(err);
    }
    unlink(tok);
    char *out = NULL, *err = NULL;
    cr_expect_eq(run_einsora(&out, &err, "serve", "--state", "/tmp/einsora-a.db", "--store",
                             "/tmp/einsora-b.db", NULL),
                 2);
    cr_expect(err && strstr(err, "give the state once"), "%s", err);
    free(out), free(err);
    cr_expect_eq(access("/tmp/einsora-a.db", F_OK) < 0 && access("/tmp/einsora-b.db", F_OK) < 0, 1,
                 "no state made");
    cr_expect_eq(run_einsora(&out, &err, "token", "create", "--state", "/tmp/einsora-t.db",
                             "--user", "u", "--role", "user", "--nodes", "n1", NULL),
                 2);
    cr_expect(err && strstr(err, "--nodes is for the owner and node roles"), "%s", err);
    free(out), free(err);
    cr_expect_eq(access("/tmp/einsora-t.db", F_OK), -1, "no state made");
}

Test(cli_help, cli_unknown_flag_is_refused_and_the_nearest_suggested) {
    char *out = NULL, *err = NULL;
    /* The verb would reach no server: the flag is refused before anything is sent. */
    cr_expect_eq(
            run_einsora(&out, &err, "events", "--folow", "--server", "http://127.0.0.1:9", NULL),
            2);
    cr_expect(strstr(err, "unknown option '--folow'; did you mean `--follow`?"), "%s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "serve", "--prot-file", "x", NULL), 2);
    cr_expect(strstr(err, "did you mean `--port-file`?"), "%s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "requests", "--bogus", NULL), 2);
    cr_expect(strstr(err, "unknown option '--bogus'"), "%s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "request", "create", "--kind", NULL), 2);
    cr_expect(strstr(err, "option '--kind' needs a value"), "%s", err);
    free(out), free(err);
    cr_expect_eq(
            run_einsora(&out, &err, "request", "create", "--kind", "vm", "--timeout", "soon", NULL),
            2);
    cr_expect(strstr(err, "--timeout takes a duration"), "%s", err);
    free(out), free(err);
}

/* A numeric flag's mistake names the flag, the range it takes and what was given, as
 * `requests --limit` does, before anything is sent: never "'-3' is not a number". */
Test(cli_help, bad_input_cli_numeric_flag_errors_name_the_flag_and_its_range) {
    static const struct {
        const char *verb, *sub, *flag, *value, *want;
    } cases[] = {
            {"request", "create", "--count", "-3",
             "--count takes a whole number from 1 to 64, not '-3'"},
            {"request", "create", "--count", "0",
             "--count takes a whole number from 1 to 64, not '0'"},
            {"request", "create", "--count", "65",
             "--count takes a whole number from 1 to 64, not '65'"},
            {"request", "create", "--memory", "lots",
             "--memory takes whole GB from 1 to 1048576, not 'lots'"},
            {"request", "create", "--wait-s", "5m",
             "--wait-s takes whole seconds from 0 to 2592000, not '5m'"},
            {"request", "create", "--wait-s", "-1",
             "--wait-s takes whole seconds from 0 to 2592000, not '-1'"},
            {"request", "create", "--wait-s", "2592001",
             "--wait-s takes whole seconds from 0 to 2592000, not '2592001'"},
            {"events", NULL, "--after", "x", "--after takes an event number, not 'x'"},
            {"requests", NULL, "--limit", "-3", "--limit takes a positive number, not '-3'"},
            {"up", NULL, "--heartbeat", "5m",
             "--heartbeat takes whole seconds from 1 to 3600, not '5m'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out = NULL, *err = NULL;
        int rc = cases[i].sub ? run_einsora(&out, &err, cases[i].verb, cases[i].sub, "--kind",
                                            "container", "--class", "cpu", cases[i].flag,
                                            cases[i].value, "--server", "http://127.0.0.1:9", NULL)
                              : run_einsora(&out, &err, cases[i].verb, cases[i].flag,
                                            cases[i].value, "--server", "http://127.0.0.1:9", NULL);
        cr_expect_eq(rc, 2, "%s %s %s: %s", cases[i].verb, cases[i].flag, cases[i].value, err);
        cr_expect(err && strstr(err, cases[i].want), "want '%s' in: %s", cases[i].want, err);
        free(out), free(err);
    }
    char *out = NULL, *err = NULL;
    cr_expect_eq(run_einsora(&out, &err, "k8s", "sync", "--interval", "1m", NULL), 2);
    cr_expect(err && strstr(err, "--interval takes whole seconds from 1 to 3600, not '1m'"), "%s",
              err);
    free(out), free(err);
}

/* What the flags alone show wrong is a usage error before any call, naming the flags (not the
 * API's fields), whatever the server: here none answers, which must not turn it into exit 3. */
Test(cli_help, bad_input_cli_request_create_flags_that_cannot_make_a_request_are_usage) {
    static const struct {
        const char *args[6], *want;
    } cases[] = {
            {{"--class", "cpu"}, "--kind is required"},
            {{"--kind", "container"}, "--class CLASS or --memory GB is required"},
            {{"--kind", "container", "--class", "nvidia-h100-80gb", "--count", "17"},
             "--count takes 1 to 16 GPUs (up to 64 only with --class cpu"},
            {{"--kind", "container", "--memory", "40", "--count", "20"},
             "--count takes 1 to 16 GPUs"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *const *a = cases[i].args; /* its first NULL ends the command */
        char *out = NULL, *err = NULL;
        int rc = run_einsora(&out, &err, "request", "create", "--server", "http://127.0.0.1:9",
                             a[0], a[1], a[2], a[3], a[4], a[5], NULL);
        cr_expect_eq(rc, 2, "case %zu: %s", i, err);
        cr_expect(err && strstr(err, cases[i].want), "want '%s' in: %s", cases[i].want, err);
        free(out), free(err);
    }
}

/* --fallback lists classes: an empty entry is refused naming the flag (usage, before
 * anything is sent), never dropped, which would send a shorter list or none at all. */
Test(cli_help, bad_input_r13_cli_fallback_with_an_empty_entry_is_refused) {
    static const char *const bad[] = {"cpu,,cpu", "", ",cpu", "cpu,", ","};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *out = NULL, *err = NULL;
        int rc = run_einsora(&out, &err, "request", "create", "--kind", "container", "--class",
                             "nvidia-h100-80gb", "--fallback", bad[i], "--wait-s", "5", "--server",
                             "http://127.0.0.1:9", NULL);
        cr_expect_eq(rc, 2, "--fallback '%s': %s", bad[i], err);
        cr_expect(err && strstr(err, "--fallback takes class names separated by commas"),
                  "--fallback '%s': %s", bad[i], err);
        free(out), free(err);
    }
}

Test(cli_help, cli_version_prints_the_build_version) {
    char *out = NULL, *b = NULL;
    cr_assert_eq(run_einsora(&out, NULL, "version", NULL), 0);
    cr_expect_str_eq(out, "einsora " EINSORA_VERSION "\n");
    cr_assert_eq(run_einsora(&b, NULL, "--version", NULL), 0);
    cr_expect_str_eq(out, b);
    free(out), free(b);
    /* For scripts: one JSON object, the same with either spelling. */
    char *j = NULL, *j2 = NULL, *err = NULL;
    cr_assert_eq(run_einsora(&j, NULL, "version", "-o", "json", NULL), 0);
    cr_assert_eq(run_einsora(&j2, NULL, "version", "--json", NULL), 0);
    cr_expect_str_eq(j, j2);
    json_t *doc = json_loads(j, 0, NULL);
    cr_assert(doc, "not JSON: %s", j);
    cr_expect_str_eq(json_string_value(json_object_get(doc, "version")), EINSORA_VERSION);
    cr_expect_str_eq(json_string_value(json_object_get(doc, "api")), "1");
    json_decref(doc);
    cr_expect_eq(run_einsora(NULL, &err, "version", "-o", "yaml", NULL), 2);
    cr_expect(err && strstr(err, "-o takes json"), "%s", err);
    free(j), free(j2), free(err);
}

/* A missing argument is named in one line (exit 2), not left to be guessed from a usage dump. */
Test(cli_help, bad_input_cli_a_missing_argument_is_named) {
    static const struct {
        const char *args[3], *want;
    } cases[] = {
            {{"request", "show"}, "request show: missing the request ID"},
            {{"request"}, "request: missing what to do"},
            {{"node", "show"}, "node show: missing the node's name"},
            {{"node", "unquarantine", "n1"}, "node unquarantine: missing the GPU"},
            {{"node", "mode", "n1"}, "node mode: missing the mode"},
            {{"tenant", "trust"}, "tenant trust: missing the user name"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *const *a = cases[i].args; /* its first NULL ends the command */
        char *out = NULL, *err = NULL;
        int rc = run_einsora(&out, &err, a[0], a[1], a[2], NULL);
        cr_expect_eq(rc, 2, "case %zu: %s", i, err);
        cr_expect(err && strstr(err, cases[i].want), "want '%s' in: %s", cases[i].want, err);
        free(out), free(err);
    }
}

/* R16: a store location in a scheme no store has (a typo of postgresql://, another database)
 * is said as such, not "cannot create state file mysql://..."; an empty one too; and a replica's
 * advertised URL, where standbys send clients, is a URL. Nothing is made. */
Test(cli_help, bad_input_serve_store_scheme_and_advertise_url_are_checked) {
    static const struct {
        const char *flag, *value, *want;
        int rc;
    } cases[] = {
            {"--store", "mysql://db/einsora", "is a URL of no store this server knows", 1},
            {"--store", "postgressql://db/einsora", "is a URL of no store", 1},
            {"--store", "", "the state location is empty", 1},
            {"--advertise", "not a url", "--advertise takes the URL", 2},
            {"--advertise", "ftp://host:1", "--advertise takes the URL", 2},
            {"--advertise", "http://", "--advertise takes the URL", 2},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out = NULL, *err = NULL;
        int rc = strcmp(cases[i].flag, "--store") == 0
                         ? run_einsora(&out, &err, "serve", "--listen", "127.0.0.1:0", "--store",
                                       cases[i].value, NULL)
                         : run_einsora(&out, &err, "serve", "--listen", "127.0.0.1:0", "--state",
                                       "/nonexistent/einsora-adv.db", "--advertise", cases[i].value,
                                       NULL);
        cr_expect_eq(rc, cases[i].rc, "case %zu: %s", i, err);
        cr_expect(err && strstr(err, cases[i].want), "case %zu: want '%s' in: %s", i, cases[i].want,
                  err);
        free(out), free(err);
    }
    cr_expect_neq(access("mysql:", F_OK), 0, "no file made of the URL");
}

/* A port file that can never be written (its folder is missing) is usage, before any state
 * file is made: a script waiting for the port would otherwise wait forever. */
Test(cli_help, bad_input_serve_port_file_in_a_missing_folder_is_usage) {
    char dir[] = "/tmp/einsora-pf-XXXXXX", state[64], port[64];
    cr_assert(mkdtemp(dir));
    snprintf(state, sizeof(state), "%s/state.db", dir);
    snprintf(port, sizeof(port), "%s/nosuch/port", dir);
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "serve", "--listen", "127.0.0.1:0", "--state", state,
                         "--port-file", port, NULL);
    cr_expect_eq(rc, 2, "%s", err);
    cr_expect(err && strstr(err, "--port-file") && strstr(err, "No such file or directory"), "%s",
              err);
    cr_expect_neq(access(state, F_OK), 0, "a state file was made");
    free(out), free(err);
    rmdir(dir);
}

/* A state file that keeps ended requests for less time than memory shows them would lose at a
 * restart what the API answered before it: refused as usage, before any file is made. */
Test(cli_help, bad_input_serve_store_retention_shorter_than_retention_is_usage) {
    char dir[] = "/tmp/einsora-ret-XXXXXX", state[64];
    cr_assert(mkdtemp(dir));
    snprintf(state, sizeof(state), "%s/state.db", dir);
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "serve", "--listen", "127.0.0.1:0", "--state", state,
                         "--retention", "30d", "--store-retention", "1s", NULL);
    cr_expect_eq(rc, 2, "%s", err);
    cr_expect(err && strstr(err, "--store-retention is shorter than --retention"), "%s", err);
    cr_expect_neq(access(state, F_OK), 0, "a state file was made");
    free(out), free(err);
    rmdir(dir);
}

/* `login --token T` (or `einsora --token T login`) is not --token-file by prefix: the secret
 * is never taken for a file name, nor echoed in the error. */
Test(cli_help, bad_input_cli_login_refuses_a_token_without_echoing_it) {
    char *out = NULL, *err = NULL;
    cr_expect_eq(run_einsora(&out, &err, "login", "--server", "http://127.0.0.1:1", "--token",
                             "ens_not_for_the_screen", NULL),
                 2);
    cr_expect(strstr(err, "--token-file FILE"), "%s", err);
    cr_expect_null(strstr(err, "ens_not_for_the_screen"), "%s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "--token", "ens_not_for_the_screen", "login", "--server",
                             "http://127.0.0.1:1", NULL),
                 2);
    cr_expect_null(strstr(err, "ens_not_for_the_screen"), "%s", err);
    free(out), free(err);
}
