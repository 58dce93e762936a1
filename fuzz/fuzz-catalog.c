/* fuzz-catalog.c: libFuzzer target for the YAML catalog parser. */
#include <stdint.h>
#include <stdlib.h>

#include "config/catalog-yaml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Catalog *cat = NULL;
    Error err = {0};
    if (catalog_parse_yaml((const char *)data, size, "fuzz.yaml", NULL, &cat, &err) == 0) {
        /* A parsed catalog must be usable: matching never crashes. */
        catalog_match_pci(cat, 0x10de, 0x2330);
        catalog_match_apple(cat, 64);
        catalog_free(cat);
    } else if (cat || err.message[0] == '\0') {
        abort(); /* failures return nothing and always say why */
    }
    return 0;
}
