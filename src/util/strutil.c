/* strutil.c: string helpers with explicit ownership and checked number parsing. */
#include "strutil.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

char *strdup_or_null(const char *s) {
    return s ? strdup(s) : NULL;
}

char *strprintf(const char *fmt, ...) {
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int r = vasprintf(&s, fmt, ap);
    va_end(ap);
    return r < 0 ? NULL : s;
}

int parse_uint64(const char *s, uint64_t max, uint64_t *ret) {
    if (!s || !*s)
        return -EINVAL;
    int base = 10;
    const char *p = s;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        base = 16;
        p += 2;
    }
    if (!*p)
        return -EINVAL;
    for (const char *q = p; *q; q++)
        if (base == 10 ? !isdigit((unsigned char)*q) : !isxdigit((unsigned char)*q))
            return -EINVAL;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(p, &end, base);
    if (errno == ERANGE || v > max)
        return -ERANGE;
    if (!end || *end)
        return -EINVAL;
    *ret = v;
    return 0;
}

int parse_decimal_uint64(const char *s, uint64_t max, uint64_t *ret) {
    if (!s || !*s)
        return -EINVAL;
    if (s[0] == '0' && s[1])
        return -EINVAL;
    uint64_t v = 0;
    for (const char *q = s; *q; q++) {
        if (*q < '0' || *q > '9')
            return -EINVAL;
        unsigned d = (unsigned)(*q - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    if (v > max)
        return -ERANGE;
    *ret = v;
    return 0;
}

/* Length of the valid UTF-8 sequence at p (1-4), or 0 (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF). */
static size_t utf8_seq_len(const unsigned char *p) {
    if (p[0] < 0x80)
        return 1;
    size_t n = p[0] >= 0xc2 && p[0] <= 0xdf   ? 2
               : p[0] >= 0xe0 && p[0] <= 0xef ? 3
               : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4
                                              : 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] > 0x9f) ||
        (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] > 0x8f))
        return 0;
    return n;
}

char *utf8_make_valid(char *s) {
    for (unsigned char *p = (unsigned char *)s; *p;) {
        size_t n = utf8_seq_len(p);
        if (n == 0)
            *p++ = '?';
        else
            p += n;
    }
    return s;
}

int parse_duration_ms(const char *s, int64_t max_ms, int64_t *ret) {
    static const struct {
        char unit;
        int64_t ms;
    } units[] = {{'s', 1000}, {'m', 60000}, {'h', 3600000}, {'d', 86400000}};
    size_t n = s ? strlen(s) : 0;
    char num[24];
    if (n < 2 || n - 1 >= sizeof(num))
        return -EINVAL;
    memcpy(num, s, n - 1);
    num[n - 1] = 0;
    uint64_t v;
    int r = parse_decimal_uint64(num, UINT64_MAX / 86400000, &v);
    if (r < 0)
        return r;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (s[n - 1] == units[i].unit) {
            if (v > (uint64_t)max_ms / (uint64_t)units[i].ms)
                return -ERANGE;
            *ret = (int64_t)v * units[i].ms;
            return 0;
        }
    return -EINVAL;
}

int parse_hex16(const char *s, uint16_t *ret) {
    if (!s)
        return -EINVAL;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        s += 2;
    if (strlen(s) != 4)
        return -EINVAL;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int c = (unsigned char)s[i];
        if (!isxdigit(c))
            return -EINVAL;
        v = v * 16 + (unsigned)(isdigit(c) ? c - '0' : tolower(c) - 'a' + 10);
    }
    *ret = (uint16_t)v;
    return 0;
}

char *strip_trailing(char *s) {
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

bool string_has_prefix(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool string_is_digits(const char *s) {
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return false;
    return true;
}

static bool is_control(unsigned char c) {
    return c < 0x20 || c == 0x7f;
}

bool string_has_control(const char *s) {
    for (; *s; s++)
        if (is_control((unsigned char)*s))
            return true;
    return false;
}

char *string_mask_control(char *s) {
    for (char *c = s; *c; c++)
        if (is_control((unsigned char)*c))
            *c = '?';
    return s;
}

bool string_contains_nocase(const char *haystack, const char *needle) {
    return strcasestr(haystack, needle) != NULL;
}

void str_copy_cut(char *buf, size_t size, const char *s) {
    if (!size)
        return;
    size_t n = strnlen(s, size - 1);
    memcpy(buf, s, n);
    buf[n] = '\0';
}

void str_copy_cut_utf8(char *buf, size_t size, const char *s) {
    if (!size)
        return;
    size_t n = strnlen(s, size);
    if (n == size) { /* too long: cut before the character the limit falls in */
        bool dots = size > 8;
        n = size - 1 - (dots ? 3 : 0);
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--;
        memcpy(buf, s, n);
        memcpy(buf + n, "...", dots ? 3 : 0);
        n += dots ? 3 : 0;
    } else
        memcpy(buf, s, n);
    buf[n] = '\0';
    utf8_make_valid(buf);
}

size_t format_u64(char buf[DECIMAL_U64_SIZE], uint64_t v) {
    char tmp[DECIMAL_U64_SIZE];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    buf[n] = '\0';
    return n;
}

static bool strbuf_resize(StrBuf *b, size_t cap) {
    char *d = realloc(b->data, cap);
    if (!d) {
        b->oom = true;
        return false;
    }
    b->data = d;
    b->cap = cap;
    return true;
}

/* Room for extra more bytes and the NUL, doubling (an append). */
static bool strbuf_room(StrBuf *b, size_t extra) {
    if (b->oom)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    return strbuf_resize(b, cap);
}

bool strbuf_reserve(StrBuf *b, size_t extra) {
    if (b->oom)
        return false;
    size_t need = b->len + extra + 1;
    return need <= b->cap || strbuf_resize(b, need);
}

void strbuf_append_grow(StrBuf *b, const char *s, size_t n) {
    if (!strbuf_room(b, n))
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void strbuf_printf(StrBuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !strbuf_room(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

const char *strbuf_cstr(StrBuf *b) {
    if (!strbuf_reserve(b, 0))
        return NULL;
    b->data[b->len] = '\0';
    return b->data;
}

bool text_line_has_key(const char *line, const char *end, const char *key) {
    size_t n = strlen(key);
    return (size_t)(end - line) > n && !strncmp(line, key, n) && line[n] == ' ';
}

bool text_key_value(const char *text, const char *key, const char **ret_value, size_t *ret_len) {
    size_t n = strlen(key);
    bool found = false;
    for (const char *l = text; l && *l;) {
        const char *e = strchrnul(l, '\n');
        if (text_line_has_key(l, e, key)) {
            *ret_value = l + n + 1;
            *ret_len = (size_t)(e - l) - n - 1;
            found = true;
        }
        l = *e ? e + 1 : e;
    }
    return found;
}

void strbuf_done(StrBuf *b) {
    free(b->data);
    *b = (StrBuf){0};
}

char *sentence_case(char *s, size_t size) {
    size_t word = 0;
    while (s[word] >= 'a' && s[word] <= 'z')
        word++;
    if (word > 0 && (s[word] == ' ' || s[word] == '\0'))
        s[0] = (char)(s[0] - 'a' + 'A');
    size_t n = strlen(s);
    if (n > 0 && !strchr(".!?", s[n - 1]) && n + 1 < size) {
        s[n] = '.';
        s[n + 1] = '\0';
    }
    return s;
}
