/* yaml-util.c: typed access to libyaml documents with positions in every error. */
#include "yaml-util.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"
#include "util/strutil.h"

int yaml_load_text(const char *text, size_t len, const char *file, yaml_document_t *doc,
                   Error *err) {
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return error_set(err, -ENOMEM, "out of memory");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, doc)) {
        int r = error_set_at(err, -EINVAL, file, (unsigned)parser.problem_mark.line + 1,
                             (unsigned)parser.problem_mark.column + 1, "YAML syntax error: %s%s%s",
                             strempty(parser.problem), parser.context ? " " : "",
                             strempty(parser.context));
        yaml_parser_delete(&parser);
        return r;
    }
    /* One document per file: a second one ("---") would be ignored without a word. */
    yaml_document_t next;
    bool more = false, bad = !yaml_parser_load(&parser, &next);
    unsigned line = (unsigned)parser.problem_mark.line + 1;
    if (!bad) {
        more = yaml_document_get_root_node(&next) != NULL;
        line = (unsigned)next.start_mark.line + 1;
        yaml_document_delete(&next);
    }
    if (bad || more) {
        int r = error_set_at(err, -EINVAL, file, line, 1,
                             "a second YAML document ('---') follows the first: one per file");
        yaml_parser_delete(&parser);
        yaml_document_delete(doc);
        return r;
    }
    yaml_parser_delete(&parser);
    /* A "\0" escape makes a scalar whose C string ends early ("cpu\0evil" would read as
     * "cpu" and pass every check): refused wherever it is, key or value. */
    for (yaml_node_t *n = doc->nodes.start; n < doc->nodes.top; n++)
        if (n->type == YAML_SCALAR_NODE && memchr(n->data.scalar.value, 0, n->data.scalar.length)) {
            int r = error_set_at(err, -EINVAL, file, (unsigned)n->start_mark.line + 1,
                                 (unsigned)n->start_mark.column + 1,
                                 "a value holds a NUL byte (\\0), which no name or number may");
            yaml_document_delete(doc);
            return r;
        }
    return 0;
}

const char *yaml_scalar(const yaml_node_t *n) {
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

int yaml_expect_scalar(YamlCtx *y, yaml_node_t *n, const char *key, const char **ret) {
    const char *s = yaml_scalar(n);
    if (!s)
        return YAML_FAIL_AT(y, n, -EINVAL, "'%s' must be a single value, not a list or mapping",
                            key);
    if (!*s)
        return YAML_FAIL_AT(y, n, -EINVAL, "'%s' is empty", key);
    *ret = s;
    return 0;
}

int yaml_get_string(YamlCtx *y, yaml_node_t *n, const char *key, char **ret) {
    const char *s;
    int r = yaml_expect_scalar(y, n, key, &s);
    if (r < 0)
        return r;
    char *copy = strdup(s);
    if (!copy)
        return error_set(y->err, -ENOMEM, "out of memory");
    free(*ret);
    *ret = copy;
    return 0;
}

static int get_number(YamlCtx *y, yaml_node_t *n, const char *key, unsigned min, unsigned max,
                      unsigned *ret) {
    const char *s;
    int r = yaml_expect_scalar(y, n, key, &s);
    if (r < 0)
        return r;
    uint64_t v;
    r = parse_uint64(s, max, &v);
    if (r == -ERANGE)
        return YAML_FAIL_AT(y, n, -ERANGE, "bad number '%s' for '%s': it must be at most %u", s,
                            key, max);
    if (r < 0 || v < min)
        return YAML_FAIL_AT(y, n, -EINVAL, "bad number '%s' for '%s': expected a whole number%s", s,
                            key, min ? " above 0" : "");
    *ret = (unsigned)v;
    return 0;
}

int yaml_get_uint(YamlCtx *y, yaml_node_t *n, const char *key, unsigned max, unsigned *ret) {
    return get_number(y, n, key, 1, max, ret);
}

int yaml_get_uint0(YamlCtx *y, yaml_node_t *n, const char *key, unsigned max, unsigned *ret) {
    return get_number(y, n, key, 0, max, ret);
}

int yaml_get_bool(YamlCtx *y, yaml_node_t *n, const char *key, bool *ret) {
    const char *s;
    int r = yaml_expect_scalar(y, n, key, &s);
    if (r < 0)
        return r;
    if (STREQ(s, "true"))
        *ret = true;
    else if (STREQ(s, "false"))
        *ret = false;
    else
        return YAML_FAIL_AT(y, n, -EINVAL, "'%s' must be true or false, not '%s'", key, s);
    return 0;
}

int yaml_for_each_item(YamlCtx *y, yaml_node_t *n, const char *key, yaml_item_fn fn,
                       void *userdata) {
    if (n->type == YAML_SCALAR_NODE)
        return fn(y, n, userdata);
    if (n->type != YAML_SEQUENCE_NODE)
        return YAML_FAIL_AT(y, n, -EINVAL, "'%s' must be a value or a list of values", key);
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        int r = fn(y, yaml_document_get_node(y->doc, *it), userdata);
        if (r < 0)
            return r;
    }
    return 0;
}

int yaml_for_each_pair(YamlCtx *y, yaml_node_t *n, const char *what, yaml_pair_fn fn,
                       void *userdata) {
    if (n->type != YAML_MAPPING_NODE)
        return YAML_FAIL_AT(y, n, -EINVAL, "%s must be a mapping of key: value", what);
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(y->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(y->doc, p->value);
        const char *key = yaml_scalar(k);
        if (!key)
            return YAML_FAIL_AT(y, k, -EINVAL, "keys in %s must be plain words", what);
        for (yaml_node_pair_t *q = n->data.mapping.pairs.start; q < p; q++)
            if (STREQ(strempty(yaml_scalar(yaml_document_get_node(y->doc, q->key))), key))
                return YAML_FAIL_AT(y, k, -EINVAL, "key '%s' appears twice in %s", key, what);
        int r = fn(y, k, key, v, userdata);
        if (r < 0)
            return r;
    }
    return 0;
}
