/* fuzz-cursor.c: libFuzzer target for the paging cursor's decoder (the `after` of
 * GET /v1/requests). Any text is either refused or a cursor that encodes back to exactly
 * itself; the position it decodes to encodes to a cursor that decodes back to it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/cursor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char scope[] = "requests?state=&node=";
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    uint64_t pos;
    Error err = {0};
    if (cursor_decode(text, scope, &pos, &err) == 0) {
        char back[CURSOR_TEXT_SIZE];
        cursor_encode(pos, scope, back);
        if (strcmp(back, text) != 0)
            abort(); /* one spelling per cursor */
        if (cursor_decode(back, "requests?state=placed&node=", &pos, &err) == 0)
            abort(); /* never good on another list */
    } else if (!err.message[0])
        abort(); /* a refusal always says why */
    error_clear(&err);
    uint64_t any = 0;
    memcpy(&any, data, size < sizeof(any) ? size : sizeof(any));
    char c[CURSOR_TEXT_SIZE];
    cursor_encode(any, scope, c);
    if (cursor_decode(c, scope, &pos, &err) < 0 || pos != any)
        abort();
    free(text);
    return 0;
}
