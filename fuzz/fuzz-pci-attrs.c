/* fuzz-pci-attrs.c: libFuzzer target for the PCI sysfs attribute parsers (ids, class, link
 * speed and width, numa node, driver_override, reset_method, boot_vga, NVML bus ids). The
 * first byte picks the parser; the rest is the attribute text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/pci-parse.h"
#include "agent/pci-sysfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 4096)
        return 0;
    /* The parsers read C strings: an embedded NUL ends the text for them as it does here. */
    char *s = strndup((const char *)data + 1, size - 1);
    if (!s)
        return 0;
    uint16_t id;
    uint32_t cls;
    unsigned u;
    int node;
    bool b;
    char *ovr = NULL, **v = NULL, bdf[13];
    size_t n = 0;
    switch (data[0] % 9) {
    case 0:
        (void)pci_parse_id(s, &id);
        break;
    case 1:
        if (pci_parse_class(s, &cls) == 0)
            (void)pci_class_kind(cls);
        break;
    case 2:
        (void)pci_parse_link_speed(s, &u);
        break;
    case 3:
        (void)pci_parse_link_width(s, &u);
        break;
    case 4:
        (void)pci_parse_numa_node(s, &node);
        break;
    case 5:
        if (pci_parse_driver_override(s, &ovr) == 0)
            free(ovr);
        break;
    case 6:
        if (pci_parse_reset_methods(s, &v, &n) == 0)
            strv_free(v, n);
        break;
    case 7:
        (void)pci_parse_bool01(s, &b);
        break;
    default:
        if (pci_bdf_from_nvml(s, bdf) == 0 && !pci_bdf_is_valid(bdf))
            abort();
        break;
    }
    free(s);
    return 0;
}
