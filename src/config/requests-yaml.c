/* requests-yaml.c: the YAML request list that `einsora plan` replays.
 *
 *   version: 1
 *   requests:
 *     - id: train-1                 # unique
 *       user: alice
 *       kind: container             # vm | container | notebook | endpoint
 *       guest: linux                # vm only: linux | macos
 *       class: nvidia-h100-80gb     # a catalog class or cpu; or leave out and give memory_gb
 *       memory_gb: 20               # with no class: the smallest class with this much memory;
 *                                   # on a Mac: memory taken from the usable pool
 *       count: 8                    # GPUs of one node (a gang), or cores for cpu
 *       share: false                # may time-slice with the same user's work (R2e)
 *       runtime: vllm               # endpoints: vllm | mlx | llama.cpp (R14)
 *       fallback: [nvidia-a100-80gb, cpu]  # alternatives after the wait (R13)
 *       wait_s: 300
 *       wait_for_nodes: false       # wait even if no node could ever run it (R18)
 *       at: 0                       # submission time, seconds from the start of the plan
 *       release_at: 3600            # when it ends (optional)
 *
 * Times are plain seconds so that a plan is reproducible; unknown keys are errors. */
#include "requests-yaml.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/fileio.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "yaml-util.h"

#define MAX_REQUESTS 1000000

static int str_field(YamlCtx *y, yaml_node_t *v, const char *key, const char **ret) {
    char *s = NULL;
    int r = yaml_get_string(y, v, key, &s);
    if (r >= 0)
        *ret = s;
    return r;
}

static int get_time(YamlCtx *y, yaml_node_t *v, const char *key, uint64_t *ret) {
    const char *s;
    int r = yaml_expect_scalar(y, v, key, &s);
    if (r < 0)
        return r;
    uint64_t t;
    if (parse_uint64(s, UINT64_MAX / 4, &t) < 0)
        return YAML_FAIL_AT(y, v, -EINVAL, "bad time '%s' for '%s': expected whole seconds", s,
                            key);
    *ret = t;
    return 0;
}

static int add_fallback(YamlCtx *y, yaml_node_t *item, void *userdata) {
    RequestSpec *spec = userdata;
    if (spec->n_fallback >= SCHED_MAX_FALLBACKS)
        return YAML_FAIL_AT(y, item, -E2BIG, "at most %d fallbacks", SCHED_MAX_FALLBACKS);
    const char **fb = (const char **)spec->fallback;
    int r = str_field(y, item, "fallback", &fb[spec->n_fallback]);
    if (r >= 0)
        spec->n_fallback++;
    return r;
}

#define ENUM_FIELD(field, parse, known)                                                            \
    do {                                                                                           \
        const char *s_;                                                                            \
        int r_ = yaml_expect_scalar(y, v, key, &s_);                                               \
        if (r_ < 0)                                                                                \
            return r_;                                                                             \
        field = parse(s_);                                                                         \
        if ((int)field < 0)                                                                        \
            return YAML_FAIL_AT(y, v, -EINVAL, "unknown %s '%s' (known: %s)", key, s_, known);     \
        return 0;                                                                                  \
    } while (0)

static int request_pair(YamlCtx *y, yaml_node_t *k, const char *key, yaml_node_t *v,
                        void *userdata) {
    RequestEntry *e = userdata;
    RequestSpec *spec = &e->spec;
    if (STREQ(key, "id"))
        return str_field(y, v, key, &spec->id);
    if (STREQ(key, "user"))
        return str_field(y, v, key, &spec->user);
    if (STREQ(key, "class"))
        return str_field(y, v, key, &spec->class_name);
    if (STREQ(key, "kind"))
        ENUM_FIELD(spec->kind, workload_kind_from_string, "vm, container, notebook, endpoint");
    if (STREQ(key, "guest")) {
        e->guest_given = true;
        ENUM_FIELD(spec->guest, guest_os_from_string, "linux, macos");
    }
    if (STREQ(key, "runtime"))
        ENUM_FIELD(spec->runtime, endpoint_runtime_from_string, "vllm, mlx, llama.cpp");
    if (STREQ(key, "memory_gb"))
        return yaml_get_uint(y, v, key, 1u << 20, &spec->memory_gb);
    if (STREQ(key, "count"))
        return yaml_get_uint(y, v, key, 1u << 16, &spec->count);
    if (STREQ(key, "share"))
        return yaml_get_bool(y, v, key, &spec->share);
    if (STREQ(key, "fallback"))
        return yaml_for_each_item(y, v, key, add_fallback, spec);
    if (STREQ(key, "wait_s"))
        return get_time(y, v, key, &spec->wait_s);
    if (STREQ(key, "wait_for_nodes"))
        return yaml_get_bool(y, v, key, &spec->wait_for_nodes);
    if (STREQ(key, "at"))
        return get_time(y, v, key, &spec->submitted);
    if (STREQ(key, "release_at"))
        return get_time(y, v, key, &e->release_at);
    return YAML_FAIL_AT(
            y, k, -EINVAL,
            "unknown key '%s' in a request (known: id, user, kind, guest, class, memory_gb, count, "
            "share, runtime, fallback, wait_s, wait_for_nodes, at, release_at)",
            key);
}

static void entry_done(RequestEntry *e) {
    free((char *)e->spec.id);
    free((char *)e->spec.user);
    free((char *)e->spec.class_name);
    for (size_t i = 0; i < e->spec.n_fallback; i++)
        free((char *)e->spec.fallback[i]);
    free((char **)e->spec.fallback);
}

void requests_file_free(RequestsFile *rf) {
    if (!rf)
        return;
    for (size_t i = 0; i < rf->n_entries; i++)
        entry_done(&rf->entries[i]);
    free(rf->entries);
    free(rf->file);
    free(rf);
}

static int load_requests(YamlCtx *y, yaml_node_t *seq, RequestsFile *rf) {
    if (seq->type != YAML_SEQUENCE_NODE)
        return YAML_FAIL_AT(y, seq, -EINVAL, "'requests' must be a list of requests");
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
         it++) {
        yaml_node_t *n = yaml_document_get_node(y->doc, *it);
        if (rf->n_entries >= MAX_REQUESTS)
            return YAML_FAIL_AT(y, n, -E2BIG, "too many requests (at most %d)", MAX_REQUESTS);
        RequestEntry *ne = realloc(rf->entries, (rf->n_entries + 1) * sizeof(*ne));
        if (!ne)
            return error_set(y->err, -ENOMEM, "out of memory");
        rf->entries = ne;
        RequestEntry *e = &rf->entries[rf->n_entries++];
        *e = (RequestEntry){.release_at = REQUEST_NO_RELEASE,
                            .line = (unsigned)n->start_mark.line + 1,
                            .spec = {.kind = _WORKLOAD_KIND_INVALID}};
        e->spec.fallback = calloc(SCHED_MAX_FALLBACKS, sizeof(char *));
        if (!e->spec.fallback)
            return error_set(y->err, -ENOMEM, "out of memory");
        int r = yaml_for_each_pair(y, n, "a request", request_pair, e);
        if (r >= 0 && !e->spec.id)
            r = YAML_FAIL_AT(y, n, -EINVAL, "a request needs an 'id'");
        if (r >= 0 && !e->spec.user)
            r = YAML_FAIL_AT(y, n, -EINVAL, "request '%s' needs a 'user'", e->spec.id);
        if (r >= 0 && e->spec.kind < 0)
            r = YAML_FAIL_AT(y, n, -EINVAL,
                             "request '%s' needs a 'kind' (vm, container, notebook, endpoint)",
                             e->spec.id);
        if (r >= 0 && !e->spec.class_name && !e->spec.memory_gb)
            r = YAML_FAIL_AT(y, n, -EINVAL, "request '%s' needs a 'class' or a 'memory_gb'",
                             e->spec.id);
        /* Fields of other kinds, as the API refuses them: never silently ignored. */
        if (r >= 0 && e->guest_given && e->spec.kind != WORKLOAD_VM)
            r = YAML_FAIL_AT(y, n, -EINVAL, "request '%s': 'guest' applies to kind vm only",
                             e->spec.id);
        if (r >= 0 && e->spec.runtime != ENDPOINT_RUNTIME_NONE && e->spec.kind != WORKLOAD_ENDPOINT)
            r = YAML_FAIL_AT(y, n, -EINVAL, "request '%s': 'runtime' applies to kind endpoint only",
                             e->spec.id);
        if (r >= 0 && e->spec.memory_gb && e->spec.class_name && STREQ(e->spec.class_name, "cpu"))
            r = YAML_FAIL_AT(y, n, -EINVAL,
                             "request '%s': 'memory_gb' is GPU memory; class cpu takes 'count' "
                             "cores",
                             e->spec.id);
        if (r >= 0 && e->spec.wait_s && !e->spec.n_fallback) /* as the API says (R13) */
            r = YAML_FAIL_AT(y, n, -EINVAL,
                             "request '%s': 'wait_s' needs a 'fallback' list to fall back to",
                             e->spec.id);
        if (r >= 0 && e->release_at != REQUEST_NO_RELEASE && e->release_at < e->spec.submitted)
            r = YAML_FAIL_AT(y, n, -EINVAL, "request '%s' ends (release_at) before it starts (at)",
                             e->spec.id);
        for (size_t j = 0; r >= 0 && j + 1 < rf->n_entries; j++)
            if (STREQ(rf->entries[j].spec.id, e->spec.id))
                r = YAML_FAIL_AT(y, n, -EEXIST, "request id '%s' is used twice (first on line %u)",
                                 e->spec.id, rf->entries[j].line);
        if (r < 0)
            return r;
    }
    return 0;
}

static int top_pair(YamlCtx *y, yaml_node_t *k, const char *key, yaml_node_t *v, void *userdata) {
    if (STREQ(key, "requests"))
        return load_requests(y, v, userdata);
    if (STREQ(key, "version")) {
        unsigned ver;
        int r = yaml_get_uint(y, v, key, 1000, &ver);
        if (r >= 0 && ver != 1)
            return YAML_FAIL_AT(y, v, -EINVAL,
                                "requests version %u is not supported (this build reads 1)", ver);
        return r;
    }
    return YAML_FAIL_AT(y, k, -EINVAL, "unknown top-level key '%s' (known: version, requests)",
                        key);
}

int requests_parse_yaml(const char *text, size_t len, const char *filename, RequestsFile **ret,
                        Error *err) {
    const char *file = filename ? filename : "<requests>";
    if (len > REQUESTS_MAX_BYTES)
        return error_set(err, -EFBIG, "%s: request file is larger than %u bytes", file,
                         REQUESTS_MAX_BYTES);
    yaml_document_t doc;
    int r = yaml_load_text(text, len, file, &doc, err);
    if (r < 0)
        return r;
    YamlCtx y = {.doc = &doc, .file = file, .err = err};
    RequestsFile *rf = calloc(1, sizeof(*rf));
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!rf || !(rf->file = strdup(file)))
        r = error_set(err, -ENOMEM, "out of memory");
    else if (!root)
        r = error_set_at(err, -EINVAL, file, 1, 1,
                         "the request file is empty: expected 'requests:'");
    else
        r = yaml_for_each_pair(&y, root, "the request file", top_pair, rf);
    yaml_document_delete(&doc);
    if (r < 0) {
        requests_file_free(rf);
        return r;
    }
    *ret = rf;
    return 0;
}

int requests_load_file(const char *path, RequestsFile **ret, Error *err) {
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = read_full_file(path, REQUESTS_MAX_BYTES, &text, &len);
    if (r == -EFBIG)
        return error_set(err, r, "%s: request file is larger than %u bytes", path,
                         REQUESTS_MAX_BYTES);
    if (r < 0)
        return error_set(err, r, "cannot read request file %s: %s", path, strerror(-r));
    return requests_parse_yaml(text, len, path, ret, err);
}
