/* contexts.c: the CLI's named contexts (server URLs and token file) in one JSON file. */
#include "contexts.h"

#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/fileio.h"
#include "util/macro.h"
#include "util/strutil.h"

#define CONFIG_MAX_BYTES (1u << 20)
#define CONTEXTS_MAX 256
#define SERVERS_MAX 16

static void context_done(CliContext *ctx) {
    free(ctx->name);
    for (size_t i = 0; i < ctx->n_servers; i++)
        free(ctx->servers[i]);
    free(ctx->servers);
    free(ctx->token_file);
    *ctx = (CliContext){0};
}

void cli_config_free(CliConfig *c) {
    if (!c)
        return;
    for (size_t i = 0; i < c->n_contexts; i++)
        context_done(&c->contexts[i]);
    free(c->contexts);
    free(c->current);
    free(c);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(CliConfig *, cli_config_free);

const CliContext *cli_config_find(const CliConfig *c, const char *name) {
    for (size_t i = 0; c && name && i < c->n_contexts; i++)
        if (STREQ(c->contexts[i].name, name))
            return &c->contexts[i];
    return NULL;
}

/* A name or URL is printable one-line text: it is shown in tables and sent in URLs. */
static bool text_ok(const char *s, size_t max) {
    size_t n = strlen(s);
    if (n == 0 || n > max)
        return false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false;
    return true;
}

static bool url_ok(const char *s) {
    return text_ok(s, 512) && !strchr(s, ',') && !strchr(s, ' ');
}

static int add_servers_from_list(CliContext *ctx, const char *list, Error *err) {
    _cleanup_free_ char *copy = strdup(list);
    if (!copy)
        return error_set(err, -ENOMEM, "out of memory");
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!url_ok(tok))
            return error_set(err, -EINVAL, "'%.100s' is not a server URL", tok);
        if (ctx->n_servers >= SERVERS_MAX)
            return error_set(err, -EINVAL, "a context holds at most %d servers", SERVERS_MAX);
        char **grown = realloc(ctx->servers, (ctx->n_servers + 1) * sizeof(*grown));
        if (!grown)
            return error_set(err, -ENOMEM, "out of memory");
        ctx->servers = grown;
        if (!(ctx->servers[ctx->n_servers] = strdup(tok)))
            return error_set(err, -ENOMEM, "out of memory");
        ctx->n_servers++;
    }
    if (ctx->n_servers == 0)
        return error_set(err, -EINVAL, "a context needs at least one server URL");
    return 0;
}

static int parse_context(json_t *o, size_t index, CliContext *ctx, Error *err) {
    if (!json_is_object(o))
        return error_set(err, -EINVAL, "contexts[%zu] is not an object", index);
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        if (STRNEQ(key, "name") && STRNEQ(key, "servers") && STRNEQ(key, "token-file"))
            return error_set(err, -EINVAL, "contexts[%zu]: unknown key '%.64s'", index, key);
    }
    const char *name = json_string_value(json_object_get(o, "name"));
    if (!name || !text_ok(name, 128))
        return error_set(err, -EINVAL, "contexts[%zu] needs a \"name\" (printable, 1-128 bytes)",
                         index);
    json_t *servers = json_object_get(o, "servers");
    if (!json_is_array(servers) || json_array_size(servers) == 0 ||
        json_array_size(servers) > SERVERS_MAX)
        return error_set(err, -EINVAL, "context '%s' needs \"servers\": a list of 1-%d URLs", name,
                         SERVERS_MAX);
    json_t *tf = json_object_get(o, "token-file");
    if (tf && (!json_is_string(tf) || !text_ok(json_string_value(tf), 4096)))
        return error_set(err, -EINVAL, "context '%s': \"token-file\" must be a path", name);
    if (!(ctx->name = strdup(name)))
        return error_set(err, -ENOMEM, "out of memory");
    if (tf && !(ctx->token_file = strdup(json_string_value(tf))))
        return error_set(err, -ENOMEM, "out of memory");
    size_t i;
    json_t *s;
    json_array_foreach(servers, i, s) {
        if (!json_is_string(s) || !url_ok(json_string_value(s)))
            return error_set(err, -EINVAL, "context '%s': servers[%zu] is not a URL", name, i);
        int r = add_servers_from_list(ctx, json_string_value(s), err);
        if (r < 0)
            return r;
    }
    return 0;
}

int cli_config_parse(const char *text, size_t len, CliConfig **ret, Error *err) {
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return error_set(err, -EINVAL, "not JSON (line %d: %.200s)", jerr.line, jerr.text);
    _cleanup_(cli_config_freep) CliConfig *c = calloc(1, sizeof(*c));
    int r = 0;
    if (!c) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    if (!json_is_object(root)) {
        r = error_set(err, -EINVAL, "the configuration is not a JSON object");
        goto out;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (STRNEQ(key, "current-context") && STRNEQ(key, "contexts")) {
            r = error_set(err, -EINVAL, "unknown key '%.64s'", key);
            goto out;
        }
    }
    json_t *list = json_object_get(root, "contexts");
    if (list && (!json_is_array(list) || json_array_size(list) > CONTEXTS_MAX)) {
        r = error_set(err, -EINVAL, "\"contexts\" must be a list of at most %d contexts",
                      CONTEXTS_MAX);
        goto out;
    }
    if (json_array_size(list) > 0 &&
        !(c->contexts = calloc(json_array_size(list), sizeof(*c->contexts)))) {
        r = error_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    size_t i;
    json_array_foreach(list, i, v) {
        assert(c->contexts); /* allocated above, as the list is not empty */
        r = parse_context(v, i, &c->contexts[i], err);
        c->n_contexts = i + 1; /* so that the partly filled one is freed too */
        if (r < 0)
            goto out;
        if (cli_config_find(c, c->contexts[i].name) != &c->contexts[i]) {
            r = error_set(err, -EINVAL, "two contexts are named '%s'", c->contexts[i].name);
            goto out;
        }
    }
    json_t *cur = json_object_get(root, "current-context");
    if (cur) {
        if (!json_is_string(cur) || !cli_config_find(c, json_string_value(cur))) {
            r = error_set(err, -EINVAL, "\"current-context\" names no context in the file");
            goto out;
        }
        if (!(c->current = strdup(json_string_value(cur)))) {
            r = error_set(err, -ENOMEM, "out of memory");
            goto out;
        }
    }
    *ret = TAKE_PTR(c);
out:
    json_decref(root);
    return r;
}

char *cli_config_format(const CliConfig *c) {
    json_t *list = json_array();
    json_t *root = json_object();
    bool ok = list && root;
    for (size_t i = 0; ok && i < c->n_contexts; i++) {
        const CliContext *ctx = &c->contexts[i];
        json_t *servers = json_array(), *o = json_object();
        ok = servers && o;
        for (size_t k = 0; ok && k < ctx->n_servers; k++)
            ok = json_array_append_new(servers, json_string(ctx->servers[k])) == 0;
        ok = ok && json_object_set_new(o, "name", json_string(ctx->name)) == 0 &&
             json_object_set(o, "servers", servers) == 0 &&
             (!ctx->token_file ||
              json_object_set_new(o, "token-file", json_string(ctx->token_file)) == 0) &&
             json_array_append(list, o) == 0;
        json_decref(servers);
        json_decref(o);
    }
    ok = ok &&
         (!c->current ||
          json_object_set_new(root, "current-context", json_string(c->current)) == 0) &&
         json_object_set(root, "contexts", list) == 0;
    char *text = ok ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(list);
    json_decref(root);
    if (!text)
        return NULL;
    char *with_newline = strprintf("%s\n", text);
    free(text);
    return with_newline;
}

int cli_config_path(char **ret, Error *err) {
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    char *p;
    /* The XDG base directory spec: a relative $XDG_CONFIG_HOME is invalid and ignored. */
    if (xdg && xdg[0] == '/')
        p = strprintf("%s/einsora/config", xdg);
    else if (home && home[0] == '/')
        p = strprintf("%s/.config/einsora/config", home);
    else
        return error_set(err, -ENOENT,
                         "neither $XDG_CONFIG_HOME nor $HOME is set: no place for "
                         "the configuration file");
    if (!p)
        return error_set(err, -ENOMEM, "out of memory");
    *ret = p;
    return 0;
}

int cli_config_load(const char *path, CliConfig **ret, Error *err) {
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = read_full_file(path, CONFIG_MAX_BYTES, &text, &len);
    /* An empty (or blank) file is a config without contexts, as kubectl reads one: what
     * `touch` or a provisioning tool leaves behind is not corrupt. */
    bool blank = r >= 0 && text && strspn(text, " \t\r\n") == len;
    if (r == -ENOENT || blank) {
        CliConfig *c = calloc(1, sizeof(*c));
        if (!c)
            return error_set(err, -ENOMEM, "out of memory");
        *ret = c;
        return 0;
    }
    if (r < 0)
        return error_set(err, r, "cannot read %s: %s", path, strerror(-r));
    Error perr = {0};
    r = cli_config_parse(text, len, ret, &perr);
    if (r < 0)
        return error_set(err, r, "%s: %s", path, error_message(&perr));
    return 0;
}

/* mkdir -p of path's folder, private to the user (it may list where tokens are). */
static int make_parent(const char *path) {
    _cleanup_free_ char *dir = strdup(path);
    if (!dir)
        return -ENOMEM;
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = 0;
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return -errno;
            *p = '/';
        }
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

int cli_config_save(const char *path, const CliConfig *c, Error *err) {
    _cleanup_free_ char *text = cli_config_format(c);
    if (!text)
        return error_set(err, -ENOMEM, "out of memory");
    int r = make_parent(path);
    if (r < 0)
        return error_set(err, r, "cannot make the folder of %s: %s", path, strerror(-r));
    mode_t old = umask(077);
    r = write_string_file_atomic(path, text);
    umask(old);
    if (r < 0)
        return error_set(err, r, "cannot write %s: %s", path, strerror(-r));
    return 0;
}

int cli_config_remove(CliConfig *c, const char *name) {
    CliContext *ctx = (CliContext *)cli_config_find(c, name);
    if (!ctx)
        return -ENOENT;
    if (c->current && strcmp(c->current, name) == 0) {
        free(c->current);
        c->current = NULL;
    }
    context_done(ctx);
    size_t i = (size_t)(ctx - c->contexts);
    memmove(ctx, ctx + 1, (c->n_contexts - i - 1) * sizeof(*ctx));
    c->n_contexts--;
    return 0;
}

int cli_config_set(CliConfig *c, const char *name, const char *servers, const char *token_file,
                   Error *err) {
    if (!name || !text_ok(name, 128))
        return error_set(err, -EINVAL, "a context name is printable text of 1-128 bytes");
    if (token_file && !text_ok(token_file, 4096))
        return error_set(err, -EINVAL, "the token file must be a path");
    CliContext fresh = {0};
    int r = add_servers_from_list(&fresh, servers ? servers : "", err);
    if (r >= 0 &&
        (!(fresh.name = strdup(name)) || (token_file && !(fresh.token_file = strdup(token_file)))))
        r = error_set(err, -ENOMEM, "out of memory");
    char *current = r >= 0 ? strdup(name) : NULL;
    if (r >= 0 && !current)
        r = error_set(err, -ENOMEM, "out of memory");
    CliContext *slot = (CliContext *)cli_config_find(c, name);
    if (r >= 0 && !slot) {
        if (c->n_contexts >= CONTEXTS_MAX)
            r = error_set(err, -EINVAL, "at most %d contexts", CONTEXTS_MAX);
        else {
            CliContext *grown = realloc(c->contexts, (c->n_contexts + 1) * sizeof(*grown));
            if (!grown)
                r = error_set(err, -ENOMEM, "out of memory");
            else {
                c->contexts = grown;
                slot = &c->contexts[c->n_contexts++];
                *slot = (CliContext){0};
            }
        }
    }
    if (r < 0) {
        context_done(&fresh);
        free(current);
        return r;
    }
    context_done(slot);
    *slot = fresh;
    free(c->current);
    c->current = current;
    return 0;
}

char *cli_context_servers(const CliContext *ctx) {
    StrBuf b = {0};
    for (size_t i = 0; i < ctx->n_servers; i++) {
        if (i)
            strbuf_puts(&b, ",");
        strbuf_puts(&b, ctx->servers[i]);
    }
    const char *s = strbuf_cstr(&b);
    char *out = s ? strdup(s) : NULL;
    strbuf_done(&b);
    return out;
}
