/* fuzz-json-text.c: libFuzzer target for the JSON text writer (wire/json-text.h): for any
 * bytes as a string, it writes exactly what json_dumps writes for it, builds the tree jansson
 * builds, and has no text exactly when jansson refuses the string (not UTF-8). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/json-text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = 0; /* a C string ends at its first NUL, as every caller's does */
    JsonText w = {0}, t = {.to_tree = true};
    json_text_open(&w, '[');
    json_text_open(&t, '[');
    json_text_string(&w, s);
    json_text_int(&w, (int64_t)size);
    json_text_string(&t, s);
    json_text_int(&t, (int64_t)size);
    json_text_close(&w, ']');
    json_text_close(&t, ']');
    char *text = json_text_take(&w);
    json_t *tree = json_text_take_tree(&t);
    json_t *want = json_pack("[s,I]", s, (json_int_t)size);
    char *want_text = want ? json_dumps(want, JSON_COMPACT) : NULL;
    if (!want != !text || !want != !tree)
        abort(); /* text exactly when jansson holds the string */
    if (want && (strcmp(text, want_text) != 0 || !json_equal(tree, want)))
        abort(); /* the same bytes, the same tree */
    free(text);
    free(want_text);
    json_decref(tree);
    json_decref(want);
    free(s);
    return 0;
}
