/* fuzz-nvml-fixture.c: libFuzzer target for the fake NVML's fixture loader
 * (tests/fake-nvml/nvml-fixture.c). */
#include <stdint.h>
#include <stdlib.h>

#include "../tests/fake-nvml/nvml-fixture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FakeNvml *f = malloc(sizeof(*f));
    char msg[128];
    if (!f)
        return 0;
    if (fake_nvml_parse((const char *)data, size, f, msg, sizeof(msg)) == 0 && f->n_gpus)
        (void)fake_nvml_fail_code(f, &f->gpus[0], "nvmlDeviceGetName");
    free(f);
    return 0;
}
