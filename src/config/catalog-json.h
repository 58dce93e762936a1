/* catalog-json.h: the JSON form of GPU classes, shared by the CLI and the HTTP API. */
#pragma once

#include <jansson.h>

#include "core/catalog.h"

const char *vm_name_source_to_string(VmNameSource s);
json_t *gpu_class_to_json(const GpuClass *cls);
json_t *catalog_to_json(const Catalog *c);
