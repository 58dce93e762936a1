/* fuzz-inventory.c: libFuzzer target for the YAML inventory parser and its application to a
 * Sched (every accepted inventory leaves a state that passes the invariant check). */
#include <stdint.h>
#include <stdlib.h>

#include "config/inventory-yaml.h"
#include "fuzz-plan-world.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    InventoryFile *inv = NULL;
    Error err = {0};
    if (inventory_parse_yaml((const char *)data, size, "fuzz.yaml", &inv, &err) < 0) {
        if (inv || !err.message[0])
            abort(); /* failures return nothing and always say why */
        return 0;
    }
    Sched *s = sched_new(fuzz_world_catalog());
    if (!s)
        abort();
    Error e2 = {0};
    if (inventory_apply(inv, s, 0, &e2) < 0 && !e2.message[0])
        abort();
    if (sched_check(s, &e2) < 0)
        abort();
    CapacityRow *rows;
    size_t n;
    if (sched_capacity(s, &rows, &n, NULL) == 0)
        free(rows);
    sched_free(s);
    inventory_file_free(inv);
    return 0;
}
