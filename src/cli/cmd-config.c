/* cmd-config.c: where the CLI finds its server and token without exports: named contexts in
 * ~/.config/einsora/config (src/config/contexts.c), `einsora config use-context NAME |
 * get-contexts | current-context | delete-context NAME`, and `einsora login --server URL
 * --token-file F`.
 * Precedence, as kubectl's: flags, then $EINSORA_SERVER/$EINSORA_TOKEN, then the context
 * (--context NAME, else $EINSORA_CONTEXT, else the file's current one). */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/contexts.h"
#include "output.h"
#include "remote.h"
#include "util/fileio.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "suggest.h"
#include "verbs.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(CliConfig *, cli_config_free);

/* Read a token file: one line, trailing newline stripped. */
static int read_token_file(const char *path, char **ret) {
    char *tok = NULL;
    int r = read_full_file(path, 4096, &tok, NULL);
    if (r < 0)
        return r;
    warn_if_others_can_read(path, "token file");
    strip_trailing(tok);
    if (!tok[0] || strchr(tok, '\n')) {
        free(tok);
        return -EBADMSG; /* empty, or more than the one line `einsora token create` prints */
    }
    *ret = tok;
    return 0;
}

int remote_apply_context(RemoteOpts *o) {
    if (o->server && o->token)
        return EXIT_OK;
    if (!o->server && !isempty(getenv("EINSORA_SERVER")) && !o->context)
        o->server = getenv("EINSORA_SERVER");
    /* Set but empty is not set, for both (`EINSORA_TOKEN= einsora ...` in a script). */
    if (!o->token && !isempty(getenv("EINSORA_TOKEN")) && !o->context)
        o->token = getenv("EINSORA_TOKEN");
    if (o->server && o->token)
        return EXIT_OK;
    Error err = {0};
    _cleanup_free_ char *path = NULL;
    _cleanup_(cli_config_freep) CliConfig *cfg = NULL;
    if (cli_config_path(&path, &err) < 0) {
        if (o->context)
            return fail_error(EXIT_USAGE, &err);
        return EXIT_OK; /* no file to look in: the defaults apply */
    }
    /* A file that cannot be read is a bad file (docs/cli.md: exit 1), as `einsora config`
     * finds it: the command line may be right. */
    if (cli_config_load(path, &cfg, &err) < 0)
        return fail_error(EXIT_FAIL, &err);
    const char *name = o->context ? o->context : getenv("EINSORA_CONTEXT");
    if (isempty(name))
        name = cfg->current;
    const CliContext *ctx = cli_config_find(cfg, name);
    if (!ctx) {
        if (!isempty(name) && (o->context || getenv("EINSORA_CONTEXT")))
            return fail(EXIT_USAGE, "no context '%s' in %s (see `einsora config get-contexts`)",
                        name, path);
        return EXIT_OK;
    }
    /* The CLI runs once and exits: what it read lives until then, reachable from here. */
    static char *servers, *token;
    if (!o->server) {
        free(servers);
        if (!(servers = cli_context_servers(ctx)))
            return fail(EXIT_FAIL, "out of memory");
        o->server = servers;
        o->server_from_context = true;
    }
    /* A token goes only to the servers its context names: a server from a flag or the
     * environment with a context's token would hand one control plane's secret to another,
     * also when the context was named (--context prod --server OTHER). */
    if (!o->server_from_context) {
        _cleanup_free_ char *mine = cli_context_servers(ctx);
        if (!mine || STRNEQ(mine, o->server))
            return EXIT_OK;
    }
    if (!o->token && ctx->token_file) {
        free(token);
        token = NULL;
        int r = read_token_file(ctx->token_file, &token);
        if (r < 0)
            return fail(EXIT_FAIL, "context '%s': cannot read the token file %s: %s", ctx->name,
                        ctx->token_file,
                        r == -EBADMSG ? "it must hold the token on one line" : strerror(-r));
        o->token = token;
    }
    return EXIT_OK;
}

static const char config_usage[] =
        "usage: einsora config use-context NAME | get-contexts | current-context |\n"
        "                      delete-context NAME\n\n"
        "Contexts name a control plane (its URLs) and the file holding your token, as kubectl's\n"
        "do; they live in $XDG_CONFIG_HOME/einsora/config (else ~/.config/einsora/config).\n"
        "`einsora login` and `einsora up` write them.\n"
        "  use-context NAME   make NAME the context every verb uses\n"
        "  get-contexts       list the contexts; * marks the current one\n"
        "  current-context    print the current context's name\n"
        "  delete-context NAME  remove NAME (its token file stays; when it was current, no\n"
        "                     context is current until `use-context` or `login`)\n"
        "  --json             get-contexts as JSON (also -o json)\n"
        "  -h, --help         show this help\n";

static int load_config(char **ret_path, CliConfig **ret) {
    Error err = {0};
    if (cli_config_path(ret_path, &err) < 0 || cli_config_load(*ret_path, ret, &err) < 0)
        return fail_error(EXIT_FAIL, &err);
    return EXIT_OK;
}

/* get-contexts for scripts: the config file's shape, each context marked current or not. */
static int print_contexts_json(const CliConfig *cfg) {
    json_t *list = json_array();
    for (size_t i = 0; list && i < cfg->n_contexts; i++) {
        const CliContext *ctx = &cfg->contexts[i];
        json_t *servers = json_array();
        for (size_t k = 0; servers && k < ctx->n_servers; k++)
            json_array_append_new(servers, json_string(ctx->servers[k]));
        json_array_append_new(list, json_pack("{s:s, s:o, s:s?, s:b}", "name", ctx->name, "servers",
                                              servers ? servers : json_null(), "token-file",
                                              ctx->token_file, "current",
                                              cfg->current && STREQ(cfg->current, ctx->name)));
    }
    json_t *j = json_pack("{s:s?, s:o}", "current-context", cfg->current, "contexts",
                          list ? list : json_null());
    if (!j)
        return fail(EXIT_FAIL, "out of memory");
    return print_json(j);
}

int verb_config(int argc, char **argv) {
    static const struct option opts[] = {{"help", no_argument, NULL, 'h'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"output", required_argument, NULL, 'o'},
                                         {}};
    bool json = false;
    int c;
    while ((c = cli_getopt(argc, argv, "ho:", opts)) >= 0) {
        if (c == 'h') {
            fputs(config_usage, stdout);
            return EXIT_OK;
        }
        if (c == 'j') {
            json = true;
            continue;
        }
        if (c == 'o') {
            int r = output_one_object(optarg, &json);
            if (r != 0)
                return r;
            continue;
        }
        fputs(config_usage, stderr);
        return EXIT_USAGE;
    }
    const char *sub = optind < argc ? argv[optind++] : NULL;
    const char *arg = optind < argc ? argv[optind++] : NULL;
    bool use = sub && STREQ(sub, "use-context"), del = sub && STREQ(sub, "delete-context");
    if (sub && !use && !del && STRNEQ(sub, "get-contexts") && STRNEQ(sub, "current-context")) {
        static const char *const subs[] = {"get-contexts", "current-context", "use-context",
                                           "delete-context"};
        return cli_unknown_sub("config", sub, subs, ARRAY_SIZE(subs));
    }
    if (!sub || optind < argc || (use || del ? !arg : arg != NULL)) {
        fputs(config_usage, stderr);
        return EXIT_USAGE;
    }
    _cleanup_free_ char *path = NULL;
    _cleanup_(cli_config_freep) CliConfig *cfg = NULL;
    int r = load_config(&path, &cfg);
    if (r != EXIT_OK)
        return r;
    assert(cfg); /* load_config() sets it whenever it returns EXIT_OK */
    /* A context the file does not have is looked up here, not on a server: exit 1, never
     * the 5 of an HTTP 404 (docs/cli.md). */
    if (use) {
        if (!cli_config_find(cfg, arg))
            return fail(EXIT_FAIL, "no context '%s' in %s (see `einsora config get-contexts`)", arg,
                        path);
        char *cur = strdup(arg);
        if (!cur)
            return fail(EXIT_FAIL, "out of memory");
        free(cfg->current);
        cfg->current = cur;
        Error err = {0};
        if (cli_config_save(path, cfg, &err) < 0)
            return fail_error(EXIT_FAIL, &err);
        printf("Switched to context \"%s\".\n", arg);
        return EXIT_OK;
    }
    if (del) {
        if (cli_config_remove(cfg, arg) < 0)
            return fail(EXIT_FAIL, "no context '%s' in %s (see `einsora config get-contexts`)", arg,
                        path);
        Error err = {0};
        if (cli_config_save(path, cfg, &err) < 0)
            return fail_error(EXIT_FAIL, &err);
        printf("Deleted context \"%s\"%s.\n", arg,
               cfg->current ? "" : "; no context is current now");
        return EXIT_OK;
    }
    if (STREQ(sub, "current-context")) {
        if (!cfg->current)
            return fail(EXIT_FAIL, "no current context (run `einsora login` or `einsora config "
                                   "use-context NAME`)");
        printf("%s\n", cfg->current);
        return EXIT_OK;
    }
    if (json)
        return print_contexts_json(cfg);
    printf("%-8s %-20s %-40s %s\n", "CURRENT", "NAME", "SERVERS", "TOKEN-FILE");
    for (size_t i = 0; i < cfg->n_contexts; i++) {
        const CliContext *ctx = &cfg->contexts[i];
        _cleanup_free_ char *servers = cli_context_servers(ctx);
        printf("%-8s %-20s %-40s %s\n", cfg->current && STREQ(cfg->current, ctx->name) ? "*" : "",
               ctx->name, strempty(servers), ctx->token_file ? ctx->token_file : "-");
    }
    return EXIT_OK;
}

/* "http://host:7780/" -> "host:7780": a context's default name. */
static char *name_from_url(const char *url) {
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    size_t n = strcspn(p, "/,");
    return n ? strndup(p, n) : strdup("default");
}

static const char login_usage[] =
        "usage: einsora login --server URL --token-file FILE [--context NAME]\n\n"
        "Check that the server accepts the token in FILE, then save a context naming URL and\n"
        "FILE (the token itself is not copied) and make it current.\n"
        "  --server URL        the control plane; repeat or separate by commas for several\n"
        "  --token-file FILE   file holding your token (from `einsora token create`)\n"
        "  --context NAME      the context's name (default: the server's host:port)\n"
        "  -h, --help          show this help\n";

int verb_login(int argc, char **argv) {
    static const struct option opts[] = {
            {"server", required_argument, NULL, 's'}, {"token-file", required_argument, NULL, 't'},
            {"token", required_argument, NULL, 'T'},  {"context", required_argument, NULL, 'c'},
            {"help", no_argument, NULL, 'h'},         {}};
    StrBuf servers = {0};
    const char *token_file = NULL, *name = NULL;
    int c;
    while ((c = cli_getopt(argc, argv, "h", opts)) >= 0) {
        switch (c) {
        case 's':
            if (servers.len)
                strbuf_puts(&servers, ",");
            strbuf_puts(&servers, optarg);
            break;
        case 't':
            token_file = optarg;
            break;
        case 'T':
            /* Not a prefix of --token-file: the secret itself, which a context never holds
             * (and an error must never echo). */
            strbuf_done(&servers);
            return fail(EXIT_USAGE, "login: --token takes no token here: save it in a file "
                                    "only you can read and give --token-file FILE (a context "
                                    "keeps the file's path, never the token)");
        case 'c':
            name = optarg;
            break;
        case 'h':
            strbuf_done(&servers);
            fputs(login_usage, stdout);
            return EXIT_OK;
        default:
            strbuf_done(&servers);
            fputs(login_usage, stderr);
            return EXIT_USAGE;
        }
    }
    const char *server = strbuf_cstr(&servers);
    if (!servers.len || !token_file || optind < argc) {
        const char *why = optind < argc  ? "unexpected argument (the server and token file are "
                                           "options)"
                          : !servers.len ? "--server URL is missing"
                                         : "--token-file FILE is missing";
        strbuf_done(&servers);
        fputs(login_usage, stderr);
        return fail(EXIT_USAGE, "login: %s", why);
    }
    int r;
    _cleanup_free_ char *token = NULL, *abs_file = realpath(token_file, NULL);
    _cleanup_free_ char *default_name = name ? NULL : name_from_url(server);
    _cleanup_free_ char *path = NULL;
    _cleanup_(cli_config_freep) CliConfig *cfg = NULL;
    if ((r = read_token_file(token_file, &token)) < 0 || !abs_file) {
        strbuf_done(&servers);
        return fail(EXIT_USAGE, "login: cannot read the token file %s: %s", token_file,
                    r == -EBADMSG ? "it must hold the token on one line"
                                  : strerror(r < 0 ? -r : errno));
    }
    /* Ask for something every role may read: a wrong URL or token fails here, not later. */
    RemoteOpts o = {.server = server, .token = token};
    json_t *j = NULL;
    if ((r = remote_call(&o, "GET", "/v1/requests?limit=1", NULL, NULL, &j)) != EXIT_OK) {
        strbuf_done(&servers);
        return r;
    }
    json_decref(j);
    Error err = {0};
    if ((r = load_config(&path, &cfg)) != EXIT_OK) {
        strbuf_done(&servers);
        return r;
    }
    const char *ctx_name = name ? name : default_name;
    if (cli_config_set(cfg, ctx_name, server, abs_file, &err) < 0 ||
        cli_config_save(path, cfg, &err) < 0) {
        strbuf_done(&servers);
        return fail_error(err.code == -EINVAL ? EXIT_USAGE : EXIT_FAIL, &err);
    }
    printf("Logged in to %s; context \"%s\" is current (saved in %s).\n", server, ctx_name, path);
    strbuf_done(&servers);
    return EXIT_OK;
}

int remote_save_context(const char *name, const char *server, const char *token_file) {
    Error err = {0};
    _cleanup_free_ char *path = NULL;
    _cleanup_(cli_config_freep) CliConfig *cfg = NULL;
    if (cli_config_path(&path, &err) < 0 || cli_config_load(path, &cfg, &err) < 0 ||
        cli_config_set(cfg, name, server, token_file, &err) < 0 ||
        cli_config_save(path, cfg, &err) < 0)
        return fail_error(EXIT_FAIL, &err);
    return EXIT_OK;
}
