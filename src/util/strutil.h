/* strutil.h: string helpers with explicit ownership and checked number parsing. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* strdup that returns NULL for NULL. */
char *strdup_or_null(const char *s);

/* snprintf(buf, size, "%s", s) without parsing a format, which costs a few hundred
 * instructions a call (several a request on the server's writer): s cut to size - 1 bytes,
 * always terminated; size 0 writes nothing. */
void str_copy_cut(char *buf, size_t size, const char *s);
/* The same for a sentence of UTF-8 text that is kept and shown: a cut falls before the
 * character it would split (a string cut inside one is not JSON and cannot be stored) and
 * ends in "..." where room allows. Bytes that are not UTF-8 become '?'. */
void str_copy_cut_utf8(char *buf, size_t size, const char *s);

/* snprintf(buf, DECIMAL_U64_SIZE, "%" PRIu64, v) the same way; returns the digits' count. */
#define DECIMAL_U64_SIZE 21 /* UINT64_MAX's 20 digits and the NUL */
size_t format_u64(char buf[DECIMAL_U64_SIZE], uint64_t v);

/* Allocating printf; NULL on allocation failure. */
char *strprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parse an unsigned integer (decimal, or hex with 0x) that must fill the whole string and
 * fit in max. Returns 0 or -EINVAL / -ERANGE; *ret written only on success. */
int parse_uint64(const char *s, uint64_t max, uint64_t *ret);

/* The same for ids and counts that come from outside (URLs, query strings): ASCII decimal
 * digits only, no sign, no 0x, no leading zero (one spelling per number, so "7" and "007"
 * never name the same thing twice). */
int parse_decimal_uint64(const char *s, uint64_t max, uint64_t *ret);

/* Make s valid UTF-8 in place: each byte of an invalid or incomplete sequence (also one
 * that a truncation cut in half at the end) becomes '?'. Returns s. JSON strings must be
 * valid UTF-8, and messages quote what clients sent. */
char *utf8_make_valid(char *s);

/* Make a message from a lower layer a sentence for the outermost one (docs/CODING_STYLE.md):
 * a first word of lower-case letters only is capitalised (a path, a class name such as
 * nvidia-h100-80gb or an identifier with '_' is left as written), and a full stop is added
 * when the text ends without one ('.', '!' or '?') and size leaves room. Returns s. */
char *sentence_case(char *s, size_t size);

/* "90s", "15m", "12h", "30d" (a decimal number and a unit) -> milliseconds, at most max_ms.
 * Returns 0, -EINVAL or -ERANGE; *ret written only on success. */
int parse_duration_ms(const char *s, int64_t max_ms, int64_t *ret);

/* Parse exactly four hex digits (with or without 0x), as PCI ids are written. */
int parse_hex16(const char *s, uint16_t *ret);

/* Strip trailing white space (and newlines) in place; returns s. */
char *strip_trailing(char *s);

bool string_has_prefix(const char *s, const char *prefix);

/* Non-empty and nothing but the digits 0-9 (a pid, an fd number, a device minor). */
bool string_is_digits(const char *s);

/* Whether s holds a control byte (below 0x20, or DEL): in a header line it would start another
 * header, on a terminal an escape sequence. */
bool string_has_control(const char *s);
/* Each control byte of s becomes '?'. Returns s. */
char *string_mask_control(char *s);

/* Case-insensitive substring test. */
bool string_contains_nocase(const char *haystack, const char *needle);

/* Whether the line [line, end) is "<key> <value>" for key. */
bool text_line_has_key(const char *line, const char *end, const char *key);
/* In lines of "<key> <value>" (the agent's state files), the value of key's last line: true
 * with *ret_value and *ret_len (not terminated), or false when no line has key. */
bool text_key_value(const char *text, const char *key, const char **ret_value, size_t *ret_len);

/* Growable byte buffer for building output; never NULL-terminated implicitly except by
 * strbuf_cstr(). A failed allocation makes the buffer sticky-failed (oom = true). */
typedef struct StrBuf {
    char *data;
    size_t len, cap;
    bool oom;
} StrBuf;

/* The append's way when the buffer must grow (or failed before), out of line. */
void strbuf_append_grow(StrBuf *b, const char *s, size_t n);

/* Inline: the JSON writer (wire/json-text.h) appends a few bytes at a time, a dozen pieces per
 * member, and a call per piece cost more than its copy. */
static inline void strbuf_append(StrBuf *b, const char *s, size_t n) {
    if (__builtin_expect(b->len + n < b->cap && !b->oom, 1)) {
        memcpy(b->data + b->len, s, n);
        b->len += n;
        b->data[b->len] = '\0';
    } else {
        strbuf_append_grow(b, s, n);
    }
}

static inline void strbuf_puts(StrBuf *b, const char *s) {
    strbuf_append(b, s, strlen(s));
}
/* Room for extra more bytes at once, exactly (appends grow by doubling): a caller that knows
 * about how long its text will be allocates once, and a text kept for long keeps no slack.
 * False when the allocation failed (the buffer is then failed, as by an append). */
bool strbuf_reserve(StrBuf *b, size_t extra);
void strbuf_printf(StrBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* NUL-terminated view; NULL when an allocation failed. */
const char *strbuf_cstr(StrBuf *b);
void strbuf_done(StrBuf *b);
