/* pciids.h: names of PCI vendors and devices from a pci.ids database (Debian's pci.ids). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct PciIds PciIds;

/* Parse a pci.ids text (as shipped in /usr/share/misc/pci.ids). Lines that do not follow the
 * format are skipped, as lspci does; only vendor and device lines are kept. */
int pci_ids_parse(const char *text, size_t len, PciIds **ret, Error *err);

/* Load and parse a file. -ENOENT when it does not exist. */
int pci_ids_load(const char *path, PciIds **ret, Error *err);

void pci_ids_free(PciIds *db);

/* The device's name ("GH100 [H100 PCIe]") or NULL when the database does not know it. */
const char *pci_ids_device_name(const PciIds *db, uint16_t vendor, uint16_t device);
const char *pci_ids_vendor_name(const PciIds *db, uint16_t vendor);
size_t pci_ids_count(const PciIds *db);
