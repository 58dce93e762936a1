/* decode.h: the one strict JSON decoder every wire shape uses. A shape is a table of its
 * fields (name, type, required, where in the struct it lands, the core's name table for an
 * enum); the decoder refuses unknown fields and wrong types with a sentence naming the field,
 * so that a typo never turns into a silent default. Pure: no I/O, no globals, never prints. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

typedef enum WireType {
    WIRE_STRING, /* char[size]: a text of at most size-1 bytes, no NUL inside */
    WIRE_UINT,   /* unsigned, from min to max */
    WIRE_BOOL,   /* bool */
    WIRE_ENUM,   /* an int-sized core enum, named by parse() (the core's name table) */
    WIRE_ARGV,   /* char[size]: a list of 1 to 64 texts, kept as its compact JSON text */
    WIRE_ENVV,   /* as WIRE_ARGV, each text KEY=VALUE */
    WIRE_CUSTOM, /* decode(value, struct, err): lists and nested objects */
} WireType;

typedef struct WireField {
    const char *name;
    WireType type;
    bool required;
    size_t offset;     /* of the member in the decoded struct */
    size_t size;       /* WIRE_STRING, WIRE_ARGV, WIRE_ENVV: the member's buffer size */
    unsigned min, max; /* WIRE_UINT */
    int (*parse)(const char *name); /* WIRE_ENUM: the value, or -1 for a name not taken */
    const char *choices;            /* WIRE_ENUM: the names taken, for the error sentence */
    bool empty_is_absent;           /* WIRE_ENUM: "" leaves the member as if absent */
    int (*decode)(json_t *v, void *obj, Error *err); /* WIRE_CUSTOM */
} WireField;

#define WIRE_MEMBER(T, m) .offset = offsetof(T, m), .size = sizeof(((T *)0)->m)
#define WIRE_F_STRING(T, key, m, req)                                                              \
    { .name = key, .type = WIRE_STRING, .required = req, WIRE_MEMBER(T, m) }
#define WIRE_F_UINT(T, key, m, lo, hi)                                                             \
    { .name = key, .type = WIRE_UINT, WIRE_MEMBER(T, m), .min = lo, .max = hi }
/* A number that has no default: absent is refused, never read as 0. */
#define WIRE_F_UINT_REQ(T, key, m, lo, hi)                                                         \
    { .name = key, .type = WIRE_UINT, .required = true, WIRE_MEMBER(T, m), .min = lo, .max = hi }
#define WIRE_F_BOOL(T, key, m)                                                                     \
    { .name = key, .type = WIRE_BOOL, WIRE_MEMBER(T, m) }
#define WIRE_F_ENUM(T, key, m, req, fn, names)                                                     \
    {                                                                                              \
        .name = key, .type = WIRE_ENUM, .required = req, WIRE_MEMBER(T, m), .parse = fn,           \
        .choices = names                                                                           \
    }
/* An optional enum where "" means "not given" (clients have always been able to send it). */
#define WIRE_F_ENUM_OPT(T, key, m, fn, names)                                                      \
    {                                                                                              \
        .name = key, .type = WIRE_ENUM, WIRE_MEMBER(T, m), .parse = fn, .choices = names,          \
        .empty_is_absent = true                                                                    \
    }
#define WIRE_F_ARGV(T, key, m)                                                                     \
    { .name = key, .type = WIRE_ARGV, WIRE_MEMBER(T, m) }
#define WIRE_F_ENVV(T, key, m)                                                                     \
    { .name = key, .type = WIRE_ENVV, WIRE_MEMBER(T, m) }
#define WIRE_F_CUSTOM(key, fn)                                                                     \
    { .name = key, .type = WIRE_CUSTOM, .decode = fn }

/* Decodes object j, described by fields[0..n), into obj (what names it in sentences: "a
 * node"). Fields absent from j leave obj as it was, so the caller sets defaults first. Checks
 * run in table order after the unknown-field check; the first failure is returned. */
int wire_decode(json_t *j, const char *what, const WireField *fields, size_t n, void *obj,
                Error *err);

/* Parses text as JSON (duplicate keys refused) into *ret. */
int wire_parse_text(const char *text, size_t len, json_t **ret, Error *err);

/* A name for nodes, sites, users and classes: 1..63 of [a-z0-9._-], starting with a letter or
 * digit. */
#define WIRE_NAME_MAX 64
bool wire_name_is_valid(const char *s);
