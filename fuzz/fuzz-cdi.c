/* fuzz-cdi.c: libFuzzer target for the CDI spec reader (drivers/cdi.h). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "drivers/cdi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const names[] = {"nvidia.com/gpu=GPU-aaaa", "nvidia.com/gpu=0",
                                        "nvidia.com/gpu=all"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        CdiDevice d = {0};
        Error err = {0};
        int r = cdi_resolve_text((const char *)data, size, "fuzz.yaml", names[i], &d, &err);
        if (r == 0) {
            /* A resolved device has absolute paths and KEY=VALUE variables only. */
            for (size_t k = 0; k < d.n_nodes; k++)
                if (d.nodes[k].path[0] != '/' || d.nodes[k].host_path[0] != '/')
                    abort();
            for (size_t k = 0; k < d.n_env; k++)
                if (!strchr(d.env[k], '=') || d.env[k][0] == '=')
                    abort();
            cdi_device_done(&d);
        } else if (r != -ENOENT && err.message[0] == '\0') {
            abort(); /* a refusal always says why */
        }
    }
    return 0;
}
