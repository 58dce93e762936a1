/* inventory-yaml.h: an inventory of sites and nodes as YAML, for `einsora plan` and tests.
 *
 * Parsing gives a plain InventoryFile (nothing applied yet); inventory_apply() then adds its
 * sites, trust and nodes to a Sched, reporting rule violations (R3 labels, unknown classes,
 * vm-vgpu) at the node's FILE:LINE. The format is documented at the top of inventory-yaml.c
 * and in tests/fixtures/plan/inventory.yaml. */
#pragma once

#include <stddef.h>

#include "core/sched.h"
#include "util/error.h"

#define INVENTORY_MAX_BYTES (16u << 20)

typedef struct InventorySite {
    char *name;
    SiteKind kind;
    char **trusted;
    size_t n_trusted;
    unsigned line;
} InventorySite;

typedef struct InventoryNode {
    NodeSpec spec; /* strings and arrays owned by the InventoryFile */
    unsigned line;
} InventoryNode;

typedef struct InventoryFile {
    char *file;
    InventorySite *sites;
    size_t n_sites;
    InventoryNode *nodes;
    size_t n_nodes;
} InventoryFile;

/* Parse text (filename for messages). On error nothing is returned and err says where. */
int inventory_parse_yaml(const char *text, size_t len, const char *filename, InventoryFile **ret,
                         Error *err);
int inventory_load_file(const char *path, InventoryFile **ret, Error *err);
void inventory_file_free(InventoryFile *inv);

/* Add everything to s (normally a fresh Sched) at time now. On error, err names the
 * FILE:LINE of the site or node and s may hold the entries before it: discard it. */
int inventory_apply(const InventoryFile *inv, Sched *s, uint64_t now, Error *err);
