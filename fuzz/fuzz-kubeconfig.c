/* fuzz-kubeconfig.c: libFuzzer target for the kubeconfig parser. */
#include <stdint.h>
#include <stdlib.h>

#include "k8s/kubeconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    KubeConfig *k = NULL;
    Error err = {0};
    if (kubeconfig_parse((const char *)data, size, "fuzz", "/base", NULL, &k, &err) == 0)
        kubeconfig_free(k);
    return 0;
}
