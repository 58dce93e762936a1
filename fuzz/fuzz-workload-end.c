/* fuzz-workload-end.c: libFuzzer target for the bodies an agent sends about a workload: its end,
 * its activation, and several activations at once (server/workload-end.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/workload-end.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    WorkloadEnd e;
    Error err = {0};
    if (workload_end_parse((const char *)data, size, &e, &err) == 0) {
        char reason[512];
        workload_end_reason(&e, reason, sizeof(reason));
        if (e.exit_code < 0 || e.exit_code > 255 || (!e.failed && !e.has_exit_code) || !reason[0])
            abort();
    } else if (err.message[0] == '\0') {
        abort(); /* a refusal always says why */
    }
    char url[WORKLOAD_URL_MAX];
    Error e2 = {0};
    if (workload_activate_parse((const char *)data, size, url, &e2) == 0) {
        if (url[0] && strncmp(url, "http", 4))
            abort();
    } else if (e2.message[0] == '\0') {
        abort();
    }
    static WorkloadActivations acts; /* 13 KB: not on the fuzzer's stack */
    Error e3 = {0};
    if (workload_activate_batch_parse((const char *)data, size, &acts, &e3) == 0) {
        if (acts.n == 0 || acts.n > WORKLOAD_ACTIVATE_BATCH_MAX)
            abort();
        for (size_t i = 0; i < acts.n; i++)
            if (acts.items[i].id == 0 ||
                (acts.items[i].url[0] && strncmp(acts.items[i].url, "http", 4)))
                abort();
    } else if (e3.message[0] == '\0') {
        abort();
    }
    return 0;
}
