/* yaml-util.h: shared helpers for the YAML loaders (libyaml document API): typed getters and
 * iteration with FILE:LINE:COL errors, so every config file reports mistakes the same way. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <yaml.h>

#include "util/error.h"

typedef struct YamlCtx {
    yaml_document_t *doc;
    const char *file;
    Error *err;
} YamlCtx;

#define YAML_FAIL_AT(Y, node, code, ...)                                                           \
    error_set_at((Y)->err, (code), (Y)->file, (unsigned)(node)->start_mark.line + 1,               \
                 (unsigned)(node)->start_mark.column + 1, __VA_ARGS__)

/* Parse text into *doc; a syntax error is reported at its position. The caller deletes the
 * document with yaml_document_delete() on success. */
int yaml_load_text(const char *text, size_t len, const char *file, yaml_document_t *doc,
                   Error *err);

/* The value of a scalar node, or NULL for lists and mappings. */
const char *yaml_scalar(const yaml_node_t *n);

int yaml_expect_scalar(YamlCtx *y, yaml_node_t *n, const char *key, const char **ret);
/* Replace *ret with a copy of the scalar. */
int yaml_get_string(YamlCtx *y, yaml_node_t *n, const char *key, char **ret);
/* A whole number in 1..max. */
int yaml_get_uint(YamlCtx *y, yaml_node_t *n, const char *key, unsigned max, unsigned *ret);
/* A whole number in 0..max. */
int yaml_get_uint0(YamlCtx *y, yaml_node_t *n, const char *key, unsigned max, unsigned *ret);
int yaml_get_bool(YamlCtx *y, yaml_node_t *n, const char *key, bool *ret);

/* Call fn for each item of a list; a single scalar counts as a one-item list. */
typedef int (*yaml_item_fn)(YamlCtx *y, yaml_node_t *item, void *userdata);
int yaml_for_each_item(YamlCtx *y, yaml_node_t *n, const char *key, yaml_item_fn fn,
                       void *userdata);

/* Call fn for each pair of a mapping, refusing duplicate keys. */
typedef int (*yaml_pair_fn)(YamlCtx *y, yaml_node_t *key_node, const char *key, yaml_node_t *value,
                            void *userdata);
int yaml_for_each_pair(YamlCtx *y, yaml_node_t *n, const char *what, yaml_pair_fn fn,
                       void *userdata);
