/* catalog-yaml.h: load a catalog of GPU classes from YAML (libyaml), with file:line:col errors. */
#pragma once

#include <stddef.h>

#include "config/pciids.h"
#include "core/catalog.h"
#include "util/error.h"

/* Largest catalog file we accept; a catalog is a few hundred lines. */
#define CATALOG_MAX_BYTES (4u << 20)
#define CATALOG_MAX_CLASSES 4096

/* Parse text (filename is used in messages only). ids may be NULL: vm_device_name then falls
 * back to the raw device id, exactly as when pci.ids does not know the device. On error,
 * nothing is returned and err says where and why. */
int catalog_parse_yaml(const char *text, size_t len, const char *filename, const PciIds *ids,
                       Catalog **ret, Error *err);

/* Read a file and parse it. */
int catalog_load_file(const char *path, const PciIds *ids, Catalog **ret, Error *err);

/* The catalog a command uses when none is named: $EINSORA_CATALOG, then the installed
 * data dir, then the source tree's data/catalog.yaml. */
const char *catalog_default_path(void);
