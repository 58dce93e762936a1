/* pci-address.c: the PCI address check (pci-address.h). */
#include "wire/pci-address.h"

#include <ctype.h>
#include <string.h>

bool pci_bdf_is_valid(const char *bdf) {
    /* dddd:bb:dd.f */
    static const char shape[] = "xxxx:xx:xx.x";
    if (!bdf || strlen(bdf) != sizeof(shape) - 1)
        return false;
    for (size_t i = 0; shape[i]; i++) {
        unsigned char ch = (unsigned char)bdf[i];
        if (shape[i] == 'x' ? !(isdigit(ch) || (ch >= 'a' && ch <= 'f'))
                            : ch != (unsigned char)shape[i])
            return false;
    }
    return bdf[11] <= '7';
}
