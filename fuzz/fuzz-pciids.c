/* fuzz-pciids.c: libFuzzer target for the pci.ids parser. */
#include <stdint.h>
#include <stdlib.h>

#include "config/pciids.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    PciIds *db = NULL;
    if (pci_ids_parse((const char *)data, size, &db, NULL) == 0) {
        pci_ids_device_name(db, 0x10de, 0x2330);
        pci_ids_vendor_name(db, 0x10de);
        pci_ids_free(db);
    }
    return 0;
}
