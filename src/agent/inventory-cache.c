/* inventory-cache.c: the last discovery's inventory, reused until it may be stale
 * (inventory-cache.h). */
#include "agent/inventory-cache.h"

int inventory_cache_get(InventoryCache *c, const DiscoverOptions *o, const MachineInventory **ret,
                        Error *err) {
    if (!c->inv) {
        MachineInventory *inv = NULL;
        int r = machine_discover(o, &inv, err);
        if (r < 0)
            return r;
        c->inv = inv;
    }
    *ret = c->inv;
    return 0;
}

void inventory_cache_set(InventoryCache *c, MachineInventory *inv) {
    if (inv == c->inv)
        return;
    machine_inventory_free(c->inv);
    c->inv = inv;
}

void inventory_cache_drop(InventoryCache *c) {
    inventory_cache_set(c, NULL);
}
