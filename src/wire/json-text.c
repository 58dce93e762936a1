/* json-text.c: compact JSON text, or its tree, from one encoder (json-text.h). */
#include "wire/json-text.h"

#include <stdlib.h>
#include <string.h>

/* Text: a comma before anything that follows a value; none after an opening bracket or a
 * key. */
static void separate(JsonText *w) {
    StrBuf *b = &w->text;
    if (b->len > 0 && !b->oom) {
        char last = b->data[b->len - 1];
        if (last != '{' && last != '[' && last != ':')
            strbuf_append(b, ",", 1);
    }
}

/* Tree: v goes under the pending key of the open object, at the end of the open array, or is
 * the root. Takes v. */
static void add(JsonText *w, json_t *v) {
    if (!v || w->failed) {
        json_decref(v);
        w->failed = true;
        return;
    }
    if (w->depth == 0) {
        json_decref(w->root);
        w->root = v;
        return;
    }
    json_t *top = w->open[w->depth - 1];
    int r = json_is_object(top) ? (w->key ? json_object_set_new(top, w->key, v) : -1)
                                : json_array_append_new(top, v);
    w->key = NULL;
    if (r < 0)
        w->failed = true;
}

void json_text_reserve(JsonText *w, size_t n) {
    if (!w->to_tree)
        (void)strbuf_reserve(&w->text, n);
}

void json_text_open(JsonText *w, char bracket) {
    if (!w->to_tree) {
        separate(w);
        strbuf_append(&w->text, &bracket, 1);
        return;
    }
    json_t *v = bracket == '{' ? json_object() : json_array();
    if (w->depth == JSON_TEXT_DEPTH_MAX) {
        json_decref(v);
        w->failed = true;
        return;
    }
    add(w, json_incref(v));
    w->open[w->depth++] = v;
}

void json_text_close(JsonText *w, char bracket) {
    if (!w->to_tree) {
        strbuf_append(&w->text, &bracket, 1);
        return;
    }
    if (w->depth > 0)
        json_decref(w->open[--w->depth]);
}

void json_text_key(JsonText *w, const char *key) {
    if (w->to_tree) {
        w->key = key;
        return;
    }
    separate(w);
    /* One piece, `"key":`, assembled where it fits (keys are short identifiers). */
    size_t n = strlen(key);
    char piece[64];
    if (n + 3 <= sizeof(piece)) {
        piece[0] = '"';
        memcpy(piece + 1, key, n);
        memcpy(piece + 1 + n, "\":", 2);
        strbuf_append(&w->text, piece, n + 3);
        return;
    }
    strbuf_append(&w->text, "\"", 1);
    strbuf_append(&w->text, key, n);
    strbuf_append(&w->text, "\":", 2);
}

/* Length of the UTF-8 sequence at s, or 0 when it is not one jansson accepts (overlong
 * forms, surrogates and code points past U+10FFFF included). */
static size_t utf8_seq_len(const unsigned char *s) {
    unsigned char c = s[0];
    size_t n;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, cp = c & 0x07;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || (cp >= 0xd800 && cp <= 0xdfff) ||
        cp > 0x10ffff)
        return 0;
    return n;
}

/* The escapes json_dumps writes without flags: the two mandatory ones, the short forms of
 * control characters, \u00XX (upper-case hex) for the others; UTF-8 passes as it is. */
static void string_text(JsonText *w, const char *s) {
    StrBuf *b = &w->text;
    separate(w);
    strbuf_append(b, "\"", 1);
    const unsigned char *p = (const unsigned char *)s, *run = p;
    while (*p) {
        if (*p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') {
            p++;
            continue;
        }
        if (*p >= 0x80) {
            size_t n = utf8_seq_len(p);
            if (n == 0) {
                w->failed = true; /* no JSON text for it: see json-text.h */
                return;
            }
            p += n;
            continue;
        }
        strbuf_append(b, (const char *)run, (size_t)(p - run));
        static const char hex[] = "0123456789ABCDEF";
        char esc[6] = {'\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 0xf]};
        switch (*p) {
        case '"':
            strbuf_append(b, "\\\"", 2);
            break;
        case '\\':
            strbuf_append(b, "\\\\", 2);
            break;
        case '\b':
            strbuf_append(b, "\\b", 2);
            break;
        case '\f':
            strbuf_append(b, "\\f", 2);
            break;
        case '\n':
            strbuf_append(b, "\\n", 2);
            break;
        case '\r':
            strbuf_append(b, "\\r", 2);
            break;
        case '\t':
            strbuf_append(b, "\\t", 2);
            break;
        default:
            strbuf_append(b, esc, sizeof(esc));
            break;
        }
        run = ++p;
    }
    strbuf_append(b, (const char *)run, (size_t)(p - run));
    strbuf_append(b, "\"", 1);
}

void json_text_string(JsonText *w, const char *s) {
    if (!s) /* as json_pack refuses a NULL string */
        w->failed = true;
    else if (w->to_tree)
        add(w, json_string(s)); /* NULL for a string that is not UTF-8 */
    else
        string_text(w, s);
}

void json_text_int(JsonText *w, int64_t v) {
    if (w->to_tree) {
        add(w, json_integer(v));
        return;
    }
    /* The magnitude in unsigned arithmetic, so that INT64_MIN has one too. */
    char digits[1 + DECIMAL_U64_SIZE];
    digits[0] = '-';
    size_t n = format_u64(digits + 1, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
    separate(w);
    if (v < 0)
        strbuf_append(&w->text, digits, n + 1);
    else
        strbuf_append(&w->text, digits + 1, n);
}

void json_text_bool(JsonText *w, bool v) {
    if (w->to_tree) {
        add(w, json_boolean(v));
        return;
    }
    separate(w);
    strbuf_puts(&w->text, v ? "true" : "false");
}

void json_text_raw(JsonText *w, const char *json) {
    if (w->to_tree) {
        add(w, json_loads(json, 0, NULL));
        return;
    }
    separate(w);
    strbuf_puts(&w->text, json);
}

void json_text_value(JsonText *w, json_t *v) {
    if (w->to_tree) {
        add(w, v);
        return;
    }
    char *text = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(v);
    if (!text) {
        w->failed = true;
        return;
    }
    separate(w);
    strbuf_puts(&w->text, text);
    free(text);
}

void json_text_member_string(JsonText *w, const char *key, const char *s) {
    json_text_key(w, key);
    json_text_string(w, s);
}

void json_text_member_int(JsonText *w, const char *key, int64_t v) {
    json_text_key(w, key);
    json_text_int(w, v);
}

void json_text_member_bool(JsonText *w, const char *key, bool v) {
    json_text_key(w, key);
    json_text_bool(w, v);
}

void json_text_member_raw(JsonText *w, const char *key, const char *json) {
    json_text_key(w, key);
    json_text_raw(w, json);
}

char *json_text_take(JsonText *w) {
    char *t = !w->failed && strbuf_cstr(&w->text) ? w->text.data : NULL;
    if (t)
        w->text = (StrBuf){0};
    json_text_done(w);
    return t;
}

char *json_text_take_line(JsonText *w) {
    strbuf_append(&w->text, "\n", 1);
    return json_text_take(w);
}

json_t *json_text_take_tree(JsonText *w) {
    json_t *t = !w->failed && w->depth == 0 ? w->root : NULL;
    if (t)
        w->root = NULL;
    json_text_done(w);
    return t;
}

void json_text_done(JsonText *w) {
    strbuf_done(&w->text);
    while (w->depth > 0)
        json_decref(w->open[--w->depth]);
    json_decref(w->root);
    w->root = NULL;
    w->key = NULL;
    w->failed = false;
}
