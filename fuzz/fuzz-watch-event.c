/* fuzz-watch-event.c: libFuzzer target for the watch-event parser and the RBAC words of a path. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k8s/watch-event.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    K8sEvent e;
    Error err = {0};
    if (k8s_watch_event_parse((const char *)data, size, &e, &err) == 0)
        k8s_event_done(&e);
    char path[512];
    snprintf(path, sizeof(path), "%.*s", (int)(size < 511 ? size : 511), (const char *)data);
    if (!memchr(path, 0, strlen(path))) {
        K8sAccess a;
        k8s_describe_access("GET", path, &a);
    }
    return 0;
}
