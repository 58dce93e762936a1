/* test-openapi.c: docs/openapi.yaml against the real server: the document and the router
 * agree route for route, every documented operation answers with a documented status (as an
 * admin, as a plain user, without a token, with a body that is not JSON), and every JSON
 * answer validates against its documented schema, so drift between the two fails here. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "core/sched.h"
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
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
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

/* ---- the subset of JSON Schema the document uses: $ref, type, nullable, enum, required,
 * properties, additionalProperties (false or a schema) and items. ---- */

typedef struct Problems {
    char text[2048];
    size_t len;
} Problems;

static void problem(Problems *p, const char *where, const char *what, const char *detail) {
    if (p->len < sizeof(p->text))
        p->len += (size_t)snprintf(p->text + p->len, sizeof(p->text) - p->len, "\n  %s: %s%s",
                                   where, what, detail);
}

static bool type_ok(json_t *v, const char *type) {
    if (!strcmp(type, "object"))
        return json_is_object(v);
    if (!strcmp(type, "array"))
        return json_is_array(v);
    if (!strcmp(type, "string"))
        return json_is_string(v);
    if (!strcmp(type, "integer"))
        return json_is_integer(v);
    if (!strcmp(type, "number"))
        return json_is_number(v);
    if (!strcmp(type, "boolean"))
        return json_is_boolean(v);
    cr_assert_fail("openapi.yaml uses type '%s', which this checker does not know", type);
    return false;
}

static bool enum_ok(json_t *v, yaml_node_t *values) {
    for (yaml_node_item_t *i = values->data.sequence.items.start;
         i < values->data.sequence.items.top; i++) {
        const char *allowed = scalar(yaml_document_get_node(&doc, *i));
        char text[64] = "";
        if (json_is_string(v))
            snprintf(text, sizeof(text), "%s", json_string_value(v));
        else if (json_is_integer(v))
            snprintf(text, sizeof(text), "%lld", (long long)json_integer_value(v));
        if (allowed && !strcmp(allowed, text))
            return true;
    }
    return false;
}

static void validate(json_t *v, yaml_node_t *schema, const char *where, Problems *p) {
    schema = deref(schema);
    if (!schema)
        return;
    const char *nullable = scalar(get(schema, "nullable"));
    if (json_is_null(v) && nullable && !strcmp(nullable, "true"))
        return;
    const char *type = scalar(get(schema, "type"));
    if (type && !type_ok(v, type)) {
        problem(p, where, "not of type ", type);
        return;
    }
    yaml_node_t *values = get(schema, "enum");
    if (values && !enum_ok(v, values)) {
        char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        problem(p, where, "not one of the enum's values: ", s ? s : "?");
        free(s);
    }
    char sub[512];
    if (json_is_array(v) && get(schema, "items")) {
        size_t i;
        json_t *item;
        json_array_foreach(v, i, item) {
            snprintf(sub, sizeof(sub), "%s[%zu]", where, i);
            validate(item, get(schema, "items"), sub, p);
        }
    }
    if (!json_is_object(v))
        return;
    yaml_node_t *req = get(schema, "required");
    for (yaml_node_item_t *i = req ? req->data.sequence.items.start : NULL;
         req && i < req->data.sequence.items.top; i++) {
        const char *field = scalar(yaml_document_get_node(&doc, *i));
        if (!json_object_get(v, field))
            problem(p, where, "required field missing: ", field);
    }
    yaml_node_t *props = get(schema, "properties"), *extra = get(schema, "additionalProperties");
    const char *key;
    json_t *value;
    json_object_foreach(v, key, value) {
        snprintf(sub, sizeof(sub), "%s.%s", where, key);
        yaml_node_t *prop = get(props, key);
        if (prop)
            validate(value, prop, sub, p);
        else if (extra && scalar(extra) && !strcmp(scalar(extra), "false"))
            problem(p, sub, "a field the schema does not name (additionalProperties: false)", "");
        else if (extra && !scalar(extra))
            validate(value, extra, sub, p);
    }
}

/* The schema documented for status `code` of op, or NULL; *ret_documented says whether the
 * status is documented at all. */
static yaml_node_t *answer_schema(yaml_node_t *op, long code, bool *ret_documented) {
    char text[8];
    snprintf(text, sizeof(text), "%ld", code);
    yaml_node_t *resp = deref(get(get(op, "responses"), text));
    *ret_documented = resp != NULL;
    return deref(get(get(get(resp, "content"), "application/json"), "schema"));
}

/* The answer (status, JSON body) to op is documented and matches its schema. */
static void expect_documented(yaml_node_t *op, const char *who, const char *M, const char *path,
                              long st, json_t *ans) {
    bool documented;
    yaml_node_t *schema = answer_schema(op, st, &documented);
    cr_expect(documented, "%s %s (%s) answered %ld, which the document does not list", M, path, who,
              st);
    if (!schema)
        return;
    cr_expect(ans, "%s %s (%s, %ld): the answer is not JSON", M, path, who, st);
    Problems p = {0};
    validate(ans, schema, "answer", &p);
    char *text = p.len ? json_dumps(ans, JSON_COMPACT) : NULL;
    cr_expect_eq(p.len, 0, "%s %s (%s, %ld) does not match its schema:%s\n  the answer: %.600s", M,
                 path, who, st, p.text, text ? text : "");
    free(text);
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
    for (yaml_node_pair_t *p = paths->data.mapping.pairs.start; p < paths->data.mapping.pairs.top;
         p++) {
        const char *path = scalar(yaml_document_get_node(&doc, p->key));
        yaml_node_t *item = yaml_document_get_node(&doc, p->value);
        for (size_t m = 0; m < sizeof(methods) / sizeof(methods[0]); m++) {
            if (!get(item, methods[m]))
                continue;
            char M[16];
            upper(methods[m], M);
            bool found = false;
            for (size_t i = 0; i < api_n_routes; i++)
                found = found ||
                        (!strcmp(api_routes[i].method, M) && !strcmp(api_routes[i].pattern, path));
            cr_assert(found, "documented %s %s is not routed", M, path);
            ops++;
        }
    }
    cr_assert_eq(ops, api_n_routes, "the router has %zu routes, the document %zu", api_n_routes,
                 ops);
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
    snprintf(
            buf, sizeof(buf),
            "{\"name\":\"%s\",\"site\":\"dc1\",\"site_kind\":\"datacenter\",\"platform\":\"linux\","
            "\"owner\":\"root\",\"mode\":\"container\",\"cpus\":16,\"devices\":[{\"pci\":\"0000:17:"
            "00.0\","
            "\"class\":\"nvidia-h100-80gb\",\"memory_gb\":80}]}",
            name);
    return buf;
}

/* An admin's call with a body of the given Content-Type (the client always sends JSON). */
static long call_typed(TestServer *ts, const char *M, const char *url, const char *type,
                       json_t **ret) {
    CURL *h = curl_easy_init();
    char full[512], auth[512], ctype[128], body[16384] = "";
    snprintf(full, sizeof(full), "%s%s", ts->url, url);
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", ts->admin);
    snprintf(ctype, sizeof(ctype), "Content-Type: %s", type);
    struct curl_slist *hdr = curl_slist_append(curl_slist_append(NULL, auth), ctype);
    FILE *out = fmemopen(body, sizeof(body) - 1, "w");
    curl_easy_setopt(h, CURLOPT_URL, full);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, M);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, "{}");
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    cr_assert_eq(curl_easy_perform(h), CURLE_OK);
    long st = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
    fclose(out);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    *ret = json_loads(body, 0, NULL);
    return st;
}

Test(openapi, every_documented_operation_answers_as_documented, .timeout = 120) {
    load_doc();
    TestServer ts;
    ts_start(&ts);
    char *user = ts_token(&ts, "ulf", "user", NULL), *agent = ts_token(&ts, "n9", "node", "n9");
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes", node_json("n1"), NULL), 201);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/requests",
                         "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", NULL),
                 201);
    yaml_node_t *paths = get(yaml_document_get_root_node(&doc), "paths");
    for (yaml_node_pair_t *p = paths->data.mapping.pairs.start; p < paths->data.mapping.pairs.top;
         p++) {
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
            /* Strangers and plain users first: they change nothing. */
            json_t *ans = NULL;
            long st = ts_call(&ts, NULL, M, url, body, &ans);
            expect_documented(op, "no token", M, path, st, ans);
            json_decref(ans);
            ans = NULL;
            st = ts_call(&ts, user, M, url, body, &ans);
            expect_documented(op, "a user", M, path, st, ans);
            json_decref(ans);
            ans = NULL;
            st = ts_call(&ts, agent, M, url, body, &ans);
            expect_documented(op, "node n9's agent", M, path, st, ans);
            json_decref(ans);
            if (get(op, "requestBody")) {
                ans = NULL;
                st = call_typed(&ts, M, url, "text/plain", &ans);
                cr_expect_eq(st, 415, "%s %s with a text/plain body: %ld", M, path, st);
                expect_documented(op, "a text/plain body", M, path, st, ans);
                json_decref(ans);
            }
            ans = NULL;
            st = ts_call(&ts, ts.admin, M, url, body, &ans);
            expect_documented(op, "the admin", M, path, st, ans);
            json_decref(ans);
            free(url);
        }
    }
    free(user), free(agent);
    ts_stop(&ts);
    yaml_document_delete(&doc);
}

/* A script switches on reason_code: the document lists every code the core gives, and no
 * other (R18's reasons are the contract, not only the sentence beside them). */
Test(openapi, r18_reason_code_enum_is_every_reason_the_core_gives) {
    load_doc();
    yaml_node_t *schemas = get(get(yaml_document_get_root_node(&doc), "components"), "schemas");
    yaml_node_t *values =
            get(get(get(get(schemas, "Request"), "properties"), "reason_code"), "enum");
    cr_assert(values && values->type == YAML_SEQUENCE_NODE, "Request.reason_code has no enum");
    size_t n = (size_t)(values->data.sequence.items.top - values->data.sequence.items.start);
    cr_expect_eq(n, (size_t)_SCHED_REASON_MAX, "the enum lists %zu codes, the core has %d", n,
                 _SCHED_REASON_MAX);
    for (int r = 0; r < _SCHED_REASON_MAX; r++) {
        bool listed = false;
        for (yaml_node_item_t *it = values->data.sequence.items.start;
             it < values->data.sequence.items.top; it++)
            listed = listed ||
                     !strcmp(scalar(yaml_document_get_node(&doc, *it)), sched_reason_to_string(r));
        cr_expect(listed, "reason_code %s is not in openapi.yaml's enum",
                  sched_reason_to_string(r));
    }
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
    for (yaml_node_pair_t *p = paths->data.mapping.pairs.start; p < paths->data.mapping.pairs.top;
         p++) {
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
