/* fuzz-procfd.c: libFuzzer target for the /proc/PID/fd link parser and the cpuinfo/meminfo
 * parsers (the kernel text discovery reads from /proc). First byte picks the parser. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/discover.h"
#include "agent/procfd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 65536)
        return 0;
    /* The parsers read C strings: an embedded NUL ends the text for them as it does here. */
    char *s = strndup((const char *)data + 1, size - 1);
    if (!s)
        return 0;
    DevNode node;
    char buf[64];
    unsigned cores;
    char *model = NULL;
    uint64_t bytes;
    switch (data[0] % 3) {
    case 0:
        /* A parsed node must format again into a path under the same root. */
        if (devnode_parse("/dev", s, &node) == 0 &&
            (devnode_format("/dev", &node, buf, sizeof(buf)) != 0 || strncmp(buf, "/dev/", 5) != 0))
            abort();
        break;
    case 1:
        if (cpu_parse_cpuinfo(s, &cores, &model) == 0)
            free(model);
        break;
    default:
        (void)cpu_parse_meminfo(s, &bytes);
        break;
    }
    free(s);
    return 0;
}
