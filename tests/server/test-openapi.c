/* test-openapi.c: docs/openapi.yaml against the real server: the document and the router
 * agree route for route, every documented operation answers with a documented status, and
 * JSON answers carry the fields the document marks required. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "server/api.h"
#include "server/router.h"
#include "srv-helpers.h"

#ifndef OPENAPI_PATH
#error "OPENAPI_PATH must point at docs/openapi.yaml"
#endif

static yaml_document_t doc;

static void load_doc(void) {
    FILE *f = fopen(OPENAPI_PATH, "rb");
    cr_assert(f, "cannot open %s", OPENAPI_PATH);
    yaml_parser_t p;
    yaml_parser_initialize(&p);
    yaml_parser_set_input_file(&p, f);
    cr_assert(yaml_parser_load(&p, &doc), "openapi.yaml is not valid YAML: %s (line %zu)",
              p.problem, p.problem_mark.line + 1);
    yaml_parser_delete(&p);
    fclose(f);
}

static const char *scalar(yaml_node_t *n) {
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static yaml_node_t *get(yaml_node_t *map, const char *key) {
    if (!map || map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const char *k = scalar(yaml_document_get_node(&doc, p->key));
        if (k && !strcmp(k, key))
            return yaml_document_get_node(&doc, p->value);
    }
    return NULL;
}

/* Follow '#/a/b/c' references (one or more hops). */
static yaml_node_t *deref(yaml_node_t *n) {
    for (int hops = 0; hops < 8; hops++) {
        const char *ref = scalar(get(n, "$ref"));
        if (!ref)
            return n;
        cr_assert(!strncmp(ref, "#/", 2), "only local $ref: %s", ref);
        yaml_node_t *cur = yaml_document_get_root_node(&doc);
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", ref + 2);
        char *save = NULL;
        for (char *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save))
            cur = get(cur, t);
        cr_assert(cur, "dangling $ref %s", ref);
        n = cur;
    }
    cr_assert_fail("$ref loop");
    return NULL;
}

static const char *const methods[] = {"get", "post", "put", "delete", "patch"};

static void upper(const char *in, char *out) {
    for (; *in; in++)
        *out++ = (char)toupper((unsigned char)*in);
    *out = 0;
}

Test(openapi, document_and_router_agree_route_for_route) {
    load_doc();
    yaml_node_t *paths = get(yaml_document_get_root_node(&doc), "paths");
    cr_assert(paths, "no paths");
    size_t ops = 0;
    for (yaml_node_pair_t *p = paths->data.mapping.pairs.start; p < paths->data.mapping.pairs.top; p++) {
        const char *path = scalar(yaml_document_get_node(&doc, p->key));
        yaml_node_t *item = yaml_document_get_node(&doc, p->value);
        for (size_t m = 0; m < sizeof(methods) / sizeof(methods[0]); m++) {
            if (!get(item, methods[m]))
                continue;
            char M[16];
            upper(methods[m], M);
            bool found = false;
            for (size_t i = 0; i < api_n_routes; i++)
                found = found || (!strcmp(api_routes[i].method, M) && !strcmp(api_routes[i].pattern, path));
            cr_assert(found, "documented %s %s is not routed", M, path);
            ops++;
        }
    }
    cr_assert_eq(ops, api_n_routes, "the router has %zu routes, the document %zu", api_n_routes, ops);
    yaml_document_delete(&doc);
}

static char *substitute(const char *path) {
    char out[256];
    size_t n = 0;
    for (const char *c = path; *c && n < sizeof(out) - 8;) {
        if (!strncmp(c, "{name}", 6)) {
            n += (size_t)sprintf(out + n, "n1");
            c += 6;
        } else if (!strncmp(c, "{id}", 4)) {
            n += (size_t)sprintf(out + n, "1");
            c += 4;
        } else
            out[n++] = *c++;
    }
    out[n] = 0;
    return strdup(out);
}

static const char *node_json(const char *name) {
    static char buf[512];
    snprintf(buf, sizeof(buf),
             "{\"name\":\"%s\",\"site\":\"dc1\",\"site_kind\":\"datacenter\",\"platform\":\"linux\","
             "\"owner\":\"root\",\"mode\":\"container\",\"cpus\":16,\"devices\":[{\"pci\":\"0000:17:00.0\","
             "\"class\":\"nvidia-h100-80gb\",\"memory_gb\":80}]}",
             name);
    return buf;
}

Test(openapi, every_documented_operation_answers_as_documented, .timeout = 60) {
    load_doc();
    TestServer ts;
    ts_start(&ts);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes", node_json("n1"), NULL), 201);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/requests",
                         "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", NULL),
                 201);
    yaml_node_t *paths = get(yaml_document_get_root_node(&doc), "paths");
    for (yaml_node_pair_t *p = paths->data.mapping.pairs.start; p < paths->data.mapping.pairs.top; p++) {
        const char *path = scalar(yaml_document_get_node(&doc, p->key));
        yaml_node_t *item = yaml_document_get_node(&doc, p->value);
        for (size_t m = 0; m < sizeof(methods) / sizeof(methods[0]); m++) {
            yaml_node_t *op = get(item, methods[m]);
            if (!op)
                continue;
            char M[16];
            upper(methods[m], M);
            char *url = substitute(path);
            const char *body = NULL;
            if (!strcmp(M, "POST") && !strcmp(path, "/v1/nodes"))
                body = node_json("n2");
            else if (!strcmp(M, "PUT"))
                body = node_json("n1");
            else if (!strcmp(M, "POST") && !strcmp(path, "/v1/requests"))
                body = "{\"kind\":\"container\",\"class\":\"cpu\"}";
            json_t *ans = NULL;
            long st = ts_call(&ts, ts.admin, M, url, body, &ans);
            char code[8];
            snprintf(code, sizeof(code), "%ld", st);
            yaml_node_t *resp = deref(get(get(op, "responses"), code));
            cr_assert(resp, "%s %s answered %ld, which the document does not list", M, path, st);
            yaml_node_t *schema = deref(get(get(get(resp, "content"), "application/json"), "schema"));
            if (schema) {
                cr_assert(ans, "%s %s: the answer is not JSON", M, path);
                yaml_node_t *req = get(schema, "required");
                for (yaml_node_item_t *i = req ? req->data.sequence.items.start : NULL;
                     req && i < req->data.sequence.items.top; i++) {
                    const char *field = scalar(yaml_document_get_node(&doc, *i));
                    cr_assert(json_object_get(ans, field), "%s %s (%ld): required field '%s' missing",
                              M, path, st, field);
                }
            }
            json_decref(ans);
            free(url);
        }
    }
    ts_stop(&ts);
    yaml_document_delete(&doc);
}

/* Generated clients name their functions after operationId: every operation has
 * one, and no two share it. */
Test(openapi, every_operation_has_a_unique_operation_id) {
    load_doc();
    yaml_node_t *paths = get(yaml_document_get_root_node(&doc), "paths");
    cr_assert(paths, "no paths");
    const char *seen[128];
    size_t n = 0;
    for (yaml_node_pair_t *p = paths->data.mapping.pairs.start; p < paths->data.mapping.pairs.top; p++) {
        const char *path = scalar(yaml_document_get_node(&doc, p->key));
        yaml_node_t *item = yaml_document_get_node(&doc, p->value);
        for (size_t m = 0; m < sizeof(methods) / sizeof(methods[0]); m++) {
            yaml_node_t *op = get(item, methods[m]);
            if (!op)
                continue;
            const char *id = scalar(get(op, "operationId"));
            cr_expect(id && id[0], "%s %s has no operationId", methods[m], path);
            for (size_t i = 0; id && i < n; i++)
                cr_expect(strcmp(seen[i], id) != 0, "operationId %s is used twice", id);
            if (id && n < sizeof(seen) / sizeof(seen[0]))
                seen[n++] = id;
        }
    }
    cr_expect_gt(n, 0);
    yaml_document_delete(&doc);
}
