/* listing.c: paging to the end and the -o/--no-headers/--limit flags of the list verbs. */
#include "listing.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "verbs.h"

/* The server's own default page; asking for more per call buys little. */
#define LIST_PAGE 1000

bool list_option(ListOpts *l, int c, const char *arg, int *ret_code) {
    *ret_code = 0;
    switch (c) {
    case 'o': {
        static const struct {
            const char *name;
            ListFormat f;
        } formats[] = {{"table", LIST_TABLE},
                       {"wide", LIST_WIDE},
                       {"json", LIST_JSON},
                       {"yaml", LIST_YAML},
                       {"name", LIST_NAME}};
        for (size_t i = 0; i < ARRAY_SIZE(formats); i++)
            if (STREQ(arg, formats[i].name)) {
                l->format = formats[i].f;
                return true;
            }
        *ret_code = fail(EXIT_USAGE, "-o takes table, wide, json, yaml or name, not '%s'", arg);
        return true;
    }
    case 0x111:
        l->no_headers = true;
        return true;
    case 0x113:
        l->watch = true;
        return true;
    case 0x112:
        if (parse_decimal_uint64(arg, UINT64_MAX, &l->limit) < 0 || l->limit == 0)
            *ret_code = fail(EXIT_USAGE, "--limit takes a positive number, not '%s'", arg);
        return true;
    default:
        return false;
    }
}

int list_only_option(int c, const char *arg, void *userdata) {
    int r;
    if (list_option(userdata, c, arg, &r))
        return r;
    return EXIT_USAGE;
}

void list_finish(ListOpts *l, const RemoteOpts *o) {
    if (o->json)
        l->format = LIST_JSON;
}

int list_fetch(const RemoteOpts *o, Client *cl, const char *path, const char *key,
               const ListOpts *l, uint64_t after, json_t **ret) {
    Client *own = NULL;
    int r = EXIT_OK;
    if (!cl) {
        if ((r = remote_open(o, &own)) != EXIT_OK)
            return r;
        cl = own;
    }
    json_t *all = json_array();
    /* The cursor as the server gave it: an opaque string (paged lists, absent on the last
     * page) or the event feed's sequence number (always there, to follow from). */
    json_t *cursor = after > 0 ? json_integer((json_int_t)after) : NULL;
    const char *sep = strchr(path, '?') ? "&" : "?";
    for (;;) {
        uint64_t want = LIST_PAGE;
        if (l->limit && l->limit - json_array_size(all) < want)
            want = l->limit - json_array_size(all);
        char page[1024], at[64] = "";
        if (json_is_integer(cursor))
            snprintf(at, sizeof(at), "after=%llu&", (unsigned long long)json_integer_value(cursor));
        else if (json_is_string(cursor)) /* base64url: nothing to escape */
            snprintf(at, sizeof(at), "after=%.40s&", json_string_value(cursor));
        snprintf(page, sizeof(page), "%s%s%slimit=%llu", path, sep, at, (unsigned long long)want);
        json_t *j = NULL;
        if ((r = remote_call_on(cl, "GET", page, NULL, NULL, &j)) != EXIT_OK)
            break;
        json_t *items = json_object_get(j, key), *next = json_object_get(j, "next");
        size_t got = json_array_size(items);
        json_array_extend(all, items);
        bool moved = next && !json_equal(next, cursor);
        json_decref(cursor);
        cursor = json_incref(next);
        json_decref(j);
        /* A short page or no cursor is the last; a cursor that did not move would loop for
         * ever. */
        if (got < want || !moved || (l->limit && json_array_size(all) >= l->limit))
            break;
    }
    client_free(own);
    if (r != EXIT_OK) {
        json_decref(cursor);
        json_decref(all);
        return r;
    }
    json_t *doc = json_object();
    json_object_set_new(doc, key, all);
    if (cursor)
        json_object_set_new(doc, "next", cursor);
    *ret = doc;
    return EXIT_OK;
}

/* A plain YAML scalar needs no quotes; anything that could read as another type or holds
 * YAML syntax is written as a JSON string, which YAML reads as a double-quoted scalar. */
static bool plain_ok(const char *s) {
    if (!s[0] || isdigit((unsigned char)s[0]) || s[0] == '-' || s[0] == '.')
        return false;
    static const char *const reserved[] = {
            "true", "false", "null", "yes",  "no",    "on",   "off", "True", "False", "Null", "Yes",
            "No",   "On",    "Off",  "TRUE", "FALSE", "NULL", "YES", "NO",   "ON",    "OFF",  "~"};
    for (size_t i = 0; i < ARRAY_SIZE(reserved); i++)
        if (STREQ(s, reserved[i]))
            return false;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (!isalnum(*p) && !strchr("_-./@+", *p))
            return false;
    return true;
}

static void yaml_scalar(json_t *j, FILE *f) {
    if (json_is_string(j) && plain_ok(json_string_value(j))) {
        fputs(json_string_value(j), f);
        return;
    }
    char *s = json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT);
    fputs(s ? s : "null", f);
    free(s);
}

static bool yaml_is_block(json_t *j) {
    return (json_is_object(j) && json_object_size(j) > 0) ||
           (json_is_array(j) && json_array_size(j) > 0);
}

static void yaml_node(json_t *j, FILE *f, int indent, bool inline_first);

static void yaml_key(const char *key, FILE *f) {
    if (plain_ok(key)) {
        fputs(key, f);
        return;
    }
    json_t *k = json_string(key);
    yaml_scalar(k, f);
    json_decref(k);
}

static void yaml_node(json_t *j, FILE *f, int indent, bool inline_first) {
    bool first = true;
    if (json_is_object(j) && json_object_size(j) > 0) {
        const char *key;
        json_t *v;
        json_object_foreach(j, key, v) {
            if (!(first && inline_first))
                fprintf(f, "%*s", indent, "");
            first = false;
            yaml_key(key, f);
            fputc(':', f);
            if (yaml_is_block(v)) {
                fputc('\n', f);
                yaml_node(v, f, json_is_array(v) ? indent : indent + 2, false);
            } else {
                fputc(' ', f);
                yaml_scalar(v, f);
                fputc('\n', f);
            }
        }
    } else if (json_is_array(j) && json_array_size(j) > 0) {
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) {
            if (!(first && inline_first))
                fprintf(f, "%*s", indent, "");
            first = false;
            fputs("- ", f);
            if (yaml_is_block(v))
                yaml_node(v, f, indent + 2, true);
            else {
                yaml_scalar(v, f);
                fputc('\n', f);
            }
        }
    } else {
        if (!(first && inline_first))
            fprintf(f, "%*s", indent, "");
        yaml_scalar(j, f);
        fputc('\n', f);
    }
}

void print_yaml(json_t *j, FILE *f) {
    yaml_node(j, f, 0, false);
}

int list_print_document(const ListOpts *l, json_t *doc) {
    if (l->format == LIST_YAML) {
        print_yaml(doc, stdout);
        json_decref(doc);
        return EXIT_OK;
    }
    return print_json(doc);
}

bool list_print_untabled(const ListOpts *l, json_t *doc, const char *key, const char *kind,
                         const char *name_field, int *ret_code) {
    if (l->format == LIST_JSON || l->format == LIST_YAML) {
        *ret_code = list_print_document(l, doc);
        return true;
    }
    if (l->format != LIST_NAME)
        return false;
    size_t i;
    json_t *item;
    json_array_foreach(json_object_get(doc, key), i, item) {
        json_t *name = name_field ? json_object_get(item, name_field) : item;
        if (json_is_integer(name))
            printf("%s/%lld\n", kind, (long long)json_integer_value(name));
        else if (json_is_string(name))
            printf("%s/%s\n", kind, json_string_value(name));
    }
    json_decref(doc);
    *ret_code = EXIT_OK;
    return true;
}

void list_print_table(const ListOpts *l, Table *t) {
    if (l->no_headers)
        table_print_body(t, stdout);
    else
        table_print(t, stdout);
    table_free(t);
}
