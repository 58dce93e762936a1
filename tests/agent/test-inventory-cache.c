/* test-inventory-cache.c: a workload start reuses the last discovery (no NVML load, no sysfs
 * walk per start) until the agent drops it, and a push's fresh discovery replaces it (R17).
 * The machine is a copy of a fixture's sysfs that the test takes away: a second discovery
 * would see it gone. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/inventory-cache.h"
#include "config/catalog-yaml.h"
#include "helpers.h"

static Catalog *cat;
static PciIds *ids;
static char tmp[64], sys[128], gone[128];

static void setup(void) {
    cr_assert_eq(catalog_load_file(TEST_DATA "/catalog.yaml", NULL, &cat, NULL), 0);
    cr_assert_eq(pci_ids_load(MACHINES "/pci.ids", &ids, NULL), 0);
    snprintf(tmp, sizeof(tmp), "/tmp/einsora-invcache-XXXXXX");
    cr_assert(mkdtemp(tmp));
    snprintf(sys, sizeof(sys), "%s/sys", tmp);
    snprintf(gone, sizeof(gone), "%s/gone", tmp);
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "cp -a '%s/hgx-h100-8gpu/sys' '%s'", MACHINES, sys);
    cr_assert_eq(system(cmd), 0);
}

static void teardown(void) {
    catalog_free(cat);
    pci_ids_free(ids);
    (void)remove_temp_tree(tmp);
}

TestSuite(inventory_cache, .init = setup, .fini = teardown);

static size_t gpus(const MachineInventory *inv) {
    size_t n = 0;
    for (size_t i = 0; i < inv->n_accelerators; i++)
        n += inv->accelerators[i].vendor == VENDOR_NVIDIA;
    return n;
}

Test(inventory_cache, r17_a_start_reuses_the_last_discovery_until_it_is_dropped) {
    DiscoverOptions o = {.sysfs_root = sys,
                         .proc_root = MACHINES "/hgx-h100-8gpu/proc",
                         .no_nvml = true,
                         .catalog = cat,
                         .pci_ids = ids};
    InventoryCache c = {0};
    const MachineInventory *first = NULL, *again = NULL;
    Error err = {0};
    cr_assert_eq(inventory_cache_get(&c, &o, &first, &err), 0, "%s", err.message);
    cr_assert_eq(gpus(first), 8);

    /* The machine's PCI devices are taken away (a sysfs with an empty PCI bus in its place: a
     * root that is not there at all, or has no PCI bus, is an error): only a fresh discovery
     * would notice. */
    char bus[400], pci[420], devices[440];
    snprintf(bus, sizeof(bus), "%s/bus", sys);
    snprintf(pci, sizeof(pci), "%s/pci", bus);
    snprintf(devices, sizeof(devices), "%s/devices", pci);
    cr_assert_eq(rename(sys, gone), 0);
    cr_assert_eq(mkdir(sys, 0755), 0);
    cr_assert_eq(mkdir(bus, 0755), 0);
    cr_assert_eq(mkdir(pci, 0755), 0);
    cr_assert_eq(mkdir(devices, 0755), 0);
    cr_assert_eq(inventory_cache_get(&c, &o, &again, &err), 0, "%s", err.message);
    cr_assert_eq(again, first, "the second start discovered the machine again");
    cr_assert_eq(gpus(again), 8);

    /* Dropped (a rebind changed the machine): the next start discovers what is there now. */
    inventory_cache_drop(&c);
    cr_assert_eq(inventory_cache_get(&c, &o, &again, &err), 0, "%s", err.message);
    cr_assert_eq(gpus(again), 0, "a dropped inventory was used again");

    /* A push's discovery replaces it. */
    cr_assert_eq(rmdir(devices), 0);
    cr_assert_eq(rmdir(pci), 0);
    cr_assert_eq(rmdir(bus), 0);
    cr_assert_eq(rmdir(sys), 0);
    cr_assert_eq(rename(gone, sys), 0);
    MachineInventory *fresh = NULL;
    cr_assert_eq(machine_discover(&o, &fresh, &err), 0, "%s", err.message);
    inventory_cache_set(&c, fresh);
    cr_assert_eq(inventory_cache_get(&c, &o, &again, &err), 0, "%s", err.message);
    cr_assert_eq(again, fresh);
    cr_assert_eq(gpus(again), 8);
    inventory_cache_drop(&c);
    inventory_cache_drop(&c); /* an empty cache too */
}
