/* inventory-cache.h: the machine's inventory from the agent's last discovery, reused by
 * workload starts instead of loading NVML and walking sysfs again for each one. Dropped
 * whenever what the kernel shows changes under the agent (a rebind), and replaced by each
 * inventory push's fresh discovery, so a start never sees an older machine than the last
 * push did. */
#pragma once

#include "agent/discover.h"

typedef struct InventoryCache {
    MachineInventory *inv; /* NULL: discover at the next get */
} InventoryCache;

/* The cached inventory, discovered with o first when there is none; it stays owned by the
 * cache (valid until the next set or drop). */
int inventory_cache_get(InventoryCache *c, const DiscoverOptions *o, const MachineInventory **ret,
                        Error *err);
/* Keep inv (taken) as the current inventory. */
void inventory_cache_set(InventoryCache *c, MachineInventory *inv);
/* Forget the inventory (the machine changed); accepts an empty cache. */
void inventory_cache_drop(InventoryCache *c);
