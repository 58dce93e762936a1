/* json-text.h: one encoder, two outputs. An encoder written against JsonText makes either
 * compact JSON text, byte for byte what jansson's json_dumps(JSON_COMPACT) writes for the
 * same values in the same member order, or the jansson tree itself: a hot path gets the text
 * without building a tree only to encode it (a placement's record, its events), and parsing
 * that text back is never how a tree is made (it costs more than building it).
 * Separators are implied: a member or an item after another gets its comma.
 *
 * A string that is not valid UTF-8 (which jansson refuses to hold, so has no text for), a
 * NULL one, or a failed allocation fails the whole output: json_text_take*() return NULL. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/strutil.h"

#define JSON_TEXT_DEPTH_MAX 8

typedef struct JsonText {
    bool to_tree; /* set before the first call: build the tree instead of the text */
    bool failed;
    StrBuf text;
    json_t *root; /* the tree's outermost value */
    json_t *open[JSON_TEXT_DEPTH_MAX];
    size_t depth;
    const char *key; /* the tree's pending key (a literal of the caller's) */
} JsonText;

/* Room for about n bytes of text at once (strbuf_reserve(); nothing for a tree): the writer's
 * texts are built once per change, and growing one from nothing copies it several times. */
void json_text_reserve(JsonText *w, size_t n);
void json_text_open(JsonText *w, char bracket); /* '{' or '[' */
void json_text_close(JsonText *w, char bracket);
/* An object's key (not escaped: keys are ASCII identifiers, and stay the caller's). */
void json_text_key(JsonText *w, const char *key);
/* Values: an array's next item, or the value of the key just written. */
void json_text_string(JsonText *w, const char *s);
void json_text_int(JsonText *w, int64_t v);
void json_text_bool(JsonText *w, bool v);
/* A value that is JSON text already (compact, as json_dumps wrote it). */
void json_text_raw(JsonText *w, const char *json);
/* A value that is a tree already (a shape without an encoder of its own): the tree itself, or
 * its compact text. Takes v; NULL fails the output. */
void json_text_value(JsonText *w, json_t *v);

/* key and value in one call */
void json_text_member_string(JsonText *w, const char *key, const char *s);
void json_text_member_int(JsonText *w, const char *key, int64_t v);
void json_text_member_bool(JsonText *w, const char *key, bool v);
void json_text_member_raw(JsonText *w, const char *key, const char *json);

/* The result, handed to the caller (free() / json_decref()); NULL when anything failed. Both
 * leave w empty. */
char *json_text_take(JsonText *w);
/* The text with a newline after it: an HTTP answer's body. */
char *json_text_take_line(JsonText *w);
json_t *json_text_take_tree(JsonText *w);
/* Drop whatever w holds (after an early return). */
void json_text_done(JsonText *w);
