/* cursor.c: opaque paging cursors: base64url of the position and a check over it and the
 * list it belongs to. The check is a SHA-256 prefix, not a secret: it catches a cursor
 * mistyped, cut, edited or reused on another list, which is all a cursor must resist (it
 * grants nothing; the caller's token decides what the page may show). */
#include "cursor.h"

#include <errno.h>
#include <string.h>

#include "util/sha256.h"

#define CURSOR_BYTES 12
static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static void check_of(uint64_t after, const char *scope, uint8_t out[4]) {
    static const char domain[] = "einsora-cursor-v1";
    uint8_t pos[8], digest[SHA256_DIGEST_SIZE];
    for (int i = 0; i < 8; i++)
        pos[i] = (uint8_t)(after >> (56 - 8 * i));
    Sha256 s;
    sha256_init(&s);
    sha256_update(&s, domain, sizeof(domain)); /* with its NUL: the fields cannot run together */
    sha256_update(&s, scope, strlen(scope) + 1);
    sha256_update(&s, pos, sizeof(pos));
    sha256_final(&s, digest);
    memcpy(out, digest, 4);
}

void cursor_encode(uint64_t after, const char *scope, char buf[CURSOR_TEXT_SIZE]) {
    uint8_t raw[CURSOR_BYTES];
    for (int i = 0; i < 8; i++)
        raw[i] = (uint8_t)(after >> (56 - 8 * i));
    check_of(after, scope, raw + 8);
    /* 12 bytes are four whole 3-byte groups: 16 characters, no padding. */
    for (int g = 0; g < CURSOR_BYTES / 3; g++) {
        uint32_t v = (uint32_t)raw[3 * g] << 16 | (uint32_t)raw[3 * g + 1] << 8 | raw[3 * g + 2];
        for (int k = 0; k < 4; k++)
            buf[4 * g + k] = b64url[(v >> (18 - 6 * k)) & 63];
    }
    buf[CURSOR_TEXT_SIZE - 1] = 0;
}

int cursor_decode(const char *text, const char *scope, uint64_t *ret, Error *err) {
    uint8_t raw[CURSOR_BYTES];
    if (strlen(text) != CURSOR_TEXT_SIZE - 1)
        return error_set(err, -EINVAL,
                         "is not a cursor of this list: pass back the `next` of "
                         "the previous page as it was");
    for (int g = 0; g < CURSOR_BYTES / 3; g++) {
        uint32_t v = 0;
        for (int k = 0; k < 4; k++) {
            const char *p = text[4 * g + k] ? strchr(b64url, text[4 * g + k]) : NULL;
            if (!p)
                return error_set(err, -EINVAL,
                                 "is not a cursor (base64url text expected): "
                                 "pass back the `next` of the previous page");
            v = v << 6 | (uint32_t)(p - b64url);
        }
        raw[3 * g] = (uint8_t)(v >> 16), raw[3 * g + 1] = (uint8_t)(v >> 8),
                raw[3 * g + 2] = (uint8_t)v;
    }
    uint64_t after = 0;
    for (int i = 0; i < 8; i++)
        after = after << 8 | raw[i];
    uint8_t check[4];
    check_of(after, scope, check);
    if (memcmp(check, raw + 8, 4) != 0)
        return error_set(err, -EINVAL,
                         "does not belong to this list (edited, or from a list "
                         "with other filters): start again without `after`");
    *ret = after;
    return 0;
}
