/* pci-address.h: the PCI address check both ends share: the agent before it touches sysfs,
 * the server before it takes a node description. Pure. */
#pragma once

#include <stdbool.h>

/* dddd:bb:dd.f in lower-case hex, function 0..7. */
bool pci_bdf_is_valid(const char *bdf);
