/* fuzz-plan-world.h: a tiny catalog and inventory shared by the inventory and requests fuzz
 * targets, so that parsed input is also applied to a real Sched and checked. */
#pragma once

#include <stdlib.h>
#include <string.h>

#include "config/catalog-yaml.h"
#include "core/sched.h"

static const char fuzz_catalog[] =
        "classes:\n"
        "  - {name: h100, vendor: nvidia, match: {pci: '10de:2330'}, memory_gb: 80,\n"
        "     container_resource: nvidia.com/gpu, node_selector: p=h100,\n"
        "     mig_profiles: [1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb]}\n"
        "  - {name: rtx, vendor: nvidia, match: {pci: '10de:2684'}, memory_gb: 24, consumer: "
        "true,\n"
        "     internal_only: true, container_resource: nvidia.com/gpu, node_selector: p=rtx}\n"
        "  - {name: apple-silicon-64gb, vendor: apple, match: {apple_memory_gb: 64}, memory_gb: "
        "64, owner_only: true}\n"
        "  - {name: cpu, vendor: cpu}\n";

/* A catalog, created once per process (libFuzzer runs many inputs). */
static inline Catalog *fuzz_world_catalog(void) {
    static Catalog *cat;
    if (!cat && catalog_parse_yaml(fuzz_catalog, strlen(fuzz_catalog), "fuzz-catalog", NULL, &cat,
                                   NULL) < 0)
        abort();
    return cat;
}
