/* fuzz-apple-fixture.c: libFuzzer target for the Mac fixture parser and the R10 arithmetic. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/apple.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    AppleHost h;
    AppleGpuMemory m;
    if (apple_parse_fixture(s, "fuzz", &h, NULL) == 0 && apple_gpu_memory(&h, -1, &m, NULL) == 0 &&
        m.usable_bytes > m.limit_bytes)
        abort();
    free(s);
    return 0;
}
