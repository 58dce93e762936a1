/* decode.c: the table-driven strict decoder (decode.h). */
#include "wire/decode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"

bool wire_name_is_valid(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n >= WIRE_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
            return false;
    }
    return true;
}

int wire_parse_text(const char *text, size_t len, json_t **ret, Error *err) {
    json_error_t je;
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!j) {
        /* jansson's own words where they name its API rather than the input. */
        const char *why = strstr(je.text, "JSON_ALLOW_NUL") ? "\\u0000 (a NUL) is not allowed"
                          : memchr(text, 0, len) && strstr(je.text, "end of file expected")
                                  ? "a NUL byte is not allowed"
                                  : je.text;
        return error_set(err, -EINVAL, "malformed JSON at line %d column %d: %s", je.line,
                         je.column, why);
    }
    *ret = j;
    return 0;
}

/* Every object is checked against the list of the fields it may have, so a misspelt field
 * is an error rather than ignored. */
static int check_fields(json_t *obj, const char *what, const WireField *fields, size_t n,
                        Error *err) {
    if (!json_is_object(obj)) /* "a node must be ...": the outermost layer capitalises it */
        return error_set(err, -EINVAL, "%s must be a JSON object", what);
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        bool ok = false;
        for (size_t i = 0; i < n && !ok; i++)
            ok = STREQ(key, fields[i].name);
        if (!ok) {
            if (STREQ(key, "user"))
                return error_set(err, -EINVAL,
                                 "field 'user' is not accepted in %s: the user is the token's",
                                 what);
            return error_set(err, -EINVAL, "unknown field '%.64s' in %s", key, what);
        }
    }
    return 0;
}

static int get_string(const WireField *f, json_t *v, char *buf, Error *err) {
    if (!json_is_string(v))
        return error_set(err, -EINVAL, "field '%s' must be a string", f->name);
    const char *s = json_string_value(v);
    if (strlen(s) >= f->size || strlen(s) != json_string_length(v))
        return error_set(err, -EINVAL, "field '%s' is too long or holds a NUL byte", f->name);
    memcpy(buf, s, strlen(s) + 1);
    return 0;
}

static int get_uint(const WireField *f, json_t *v, unsigned *ret, Error *err) {
    if (!json_is_integer(v))
        return error_set(err, -EINVAL, "field '%s' must be an integer", f->name);
    json_int_t i = json_integer_value(v);
    if (i < (json_int_t)f->min || i > (json_int_t)f->max)
        return error_set(err, -ERANGE, "field '%s' must be between %u and %u", f->name, f->min,
                         f->max);
    *ret = (unsigned)i;
    return 0;
}

static int get_enum(const WireField *f, json_t *v, int *ret, Error *err) {
    if (!json_is_string(v))
        return error_set(err, -EINVAL, "field '%s' must be a string", f->name);
    if (f->empty_is_absent && json_string_length(v) == 0)
        return 0;
    int e = f->parse(json_string_value(v));
    if (e < 0 || strlen(json_string_value(v)) != json_string_length(v))
        return error_set(err, -EINVAL, "field '%s' must be %s, not '%.32s'", f->name, f->choices,
                         json_string_value(v));
    *ret = e;
    return 0;
}

/* "command" (arguments) or "env" (KEY=VALUE items): a list of 1 to 64 texts. */
static int get_strv(const WireField *f, json_t *v, char *buf, Error *err) {
    bool kv = f->type == WIRE_ENVV;
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > 64)
        return error_set(err, -EINVAL, "field '%s' must be a list of 1 to 64 texts", f->name);
    size_t i;
    json_t *a;
    json_array_foreach(v, i, a) {
        const char *s = json_string_value(a);
        if (!s || strlen(s) != json_string_length(a) || (kv && (!strchr(s, '=') || s[0] == '=')))
            return error_set(err, -EINVAL, "item %zu of '%s' is not a text%s", i, f->name,
                             kv ? " KEY=VALUE" : "");
    }
    char *text = json_dumps(v, JSON_COMPACT);
    if (!text)
        return error_set(err, -ENOMEM, "out of memory");
    int r = strlen(text) < f->size ? 0
                                   : error_set(err, -E2BIG, "field '%s' is longer than %zu bytes",
                                               f->name, f->size - 1);
    if (r == 0)
        memcpy(buf, text, strlen(text) + 1);
    free(text);
    return r;
}

int wire_decode(json_t *j, const char *what, const WireField *fields, size_t n, void *obj,
                Error *err) {
    int r = check_fields(j, what, fields, n, err);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n; i++) {
        const WireField *f = &fields[i];
        json_t *v = json_object_get(j, f->name);
        char *at = (char *)obj + f->offset;
        if (!v) {
            if (f->required)
                return error_set(err, -EINVAL, "field '%s' is required", f->name);
            continue;
        }
        switch (f->type) {
        case WIRE_STRING:
            r = get_string(f, v, at, err);
            break;
        case WIRE_UINT:
            r = get_uint(f, v, (unsigned *)(void *)at, err);
            break;
        case WIRE_BOOL:
            if (!json_is_boolean(v))
                return error_set(err, -EINVAL, "field '%s' must be true or false", f->name);
            *(bool *)at = json_is_true(v);
            break;
        case WIRE_ENUM:
            r = get_enum(f, v, (int *)(void *)at, err);
            break;
        case WIRE_ARGV:
        case WIRE_ENVV:
            r = get_strv(f, v, at, err);
            break;
        case WIRE_CUSTOM:
            r = f->decode(v, obj, err);
            break;
        }
        if (r < 0)
            return r;
    }
    return 0;
}
