/* test-agent-node.c: the agent's node description from discovered fixture machines (pure
 * translation, agent_node_json), checked by the server's own strict node parser. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent-run.h"
#include "config/catalog-yaml.h"
#include "wire/node.h"

static Catalog *catalog;

static void setup(void) {
    Error err = {0};
    cr_assert_eq(catalog_load_file(TEST_DATA "/catalog.yaml", NULL, &catalog, &err), 0, "%s",
                 err.message);
}

static void teardown(void) {
    catalog_free(catalog);
}

TestSuite(agent_node, .init = setup, .fini = teardown);

/* Discover a fixture machine and translate it; the result must parse as a node. */
static json_t *describe(const char *fixture, const char *apple, const AgentIdentity *id,
                        const char *sim, ApiNode *ret) {
    char sys[256], proc[256], mac[256];
    snprintf(sys, sizeof(sys), "%s/machines/%s/sys", TEST_FIXTURES, fixture);
    snprintf(proc, sizeof(proc), "%s/machines/%s/proc", TEST_FIXTURES, fixture);
    snprintf(mac, sizeof(mac), "%s/machines/%s", TEST_FIXTURES, apple ? apple : "");
    DiscoverOptions o = {.sysfs_root = sys,
                         .proc_root = proc,
                         .no_nvml = true,
                         .catalog = catalog,
                         .apple_fixture = apple ? mac : NULL};
    MachineInventory *inv = NULL;
    Error err = {0};
    cr_assert_eq(machine_discover(&o, &inv, &err), 0, "%s", err.message);
    json_t *j = agent_node_json(id, inv, sim);
    machine_inventory_free(inv);
    cr_assert(j);
    char *text = json_dumps(j, JSON_COMPACT);
    cr_assert_eq(api_node_parse(text, strlen(text), ret, &err), 0, "%s: %s", err.message, text);
    free(text);
    return j;
}

Test(agent_node, r3_datacenter_hgx_reports_eight_h100s_in_its_mode) {
    AgentIdentity id = {.name = "dc1-h100",
                        .site = "dc1",
                        .site_kind = "datacenter",
                        .owner = "ops",
                        .mode = "container",
                        .capabilities = "kata,mig_in_kata"};
    ApiNode n;
    json_decref(describe("hgx-h100-8gpu", NULL, &id, NULL, &n));
    cr_expect_str_eq(node_mode_to_string(n.mode), "container");
    cr_expect_eq(n.n_devices, 8);
    for (size_t i = 0; i < n.n_devices; i++) {
        cr_expect_str_eq(n.devices[i].cls, "nvidia-h100-80gb");
        cr_expect_str_eq(n.devices[i].pci_id, "10de:2330", "the vendor:device ids read from sysfs");
        cr_expect_str_eq(binding_to_string(n.devices[i].binding), "host");
    }
    cr_expect(api_node_has_cap(&n, "kata") && api_node_has_cap(&n, "mig_in_kata"));
    cr_expect_gt(n.cpus, 0);
}

Test(agent_node, r7_lab_4090_on_vfio_and_r8_unclassified_apu_is_kept) {
    AgentIdentity id = {.name = "lab-4090", .site = "lab", .site_kind = "lab", .owner = "me"};
    ApiNode n;
    json_decref(describe("rtx4090-clean-group", NULL, &id, NULL, &n));
    cr_expect_eq(n.mode, NODE_MODE_NONE, "lab GPUs switch one by one (R7): no node mode");
    cr_assert_eq(n.n_devices, 2);
    bool gpu = false, unclassified = false;
    for (size_t i = 0; i < n.n_devices; i++) {
        if (!strcmp(n.devices[i].cls, "nvidia-rtx-4090")) {
            gpu = true;
            cr_expect_str_eq(binding_to_string(n.devices[i].binding), "vfio");
        } else if (!n.devices[i].cls[0]) {
            unclassified = true;
            cr_expect_eq(strlen(n.devices[i].pci_id), 9,
                         "an unclassified device shows its ids, to add to the catalog: '%s'",
                         n.devices[i].pci_id);
        }
    }
    cr_expect(gpu && unclassified);
    /* A simulated rebind (demo, tests) shows up as the GPU's binding. */
    json_decref(describe("rtx4090-clean-group", NULL, &id, "0000:01:00.0 host\n", &n));
    for (size_t i = 0; i < n.n_devices; i++)
        if (!strcmp(n.devices[i].cls, "nvidia-rtx-4090"))
            cr_expect_str_eq(binding_to_string(n.devices[i].binding), "host");
}

Test(agent_node, r10_mac_reports_unified_and_usable_memory) {
    AgentIdentity id = {.name = "mac", .site = "home", .site_kind = "solo", .owner = "me"};
    ApiNode n;
    json_decref(describe("no-accelerator", "mac-m2-max-64gb.txt", &id, NULL, &n));
    cr_expect_str_eq(platform_to_string(n.platform), "macos");
    cr_expect_eq(n.apple_unified_memory_gb, 64);
    cr_expect_gt(n.apple_usable_memory_gb, 0);
    cr_expect_lt(n.apple_usable_memory_gb, 64, "the owner's headroom is kept back (R10)");
    cr_expect_eq(n.n_devices, 0);
}

Test(agent_node, r11_r12_cpu_box_and_amd_machine) {
    AgentIdentity id = {.name = "box", .owner = "me"};
    ApiNode n;
    json_decref(describe("no-accelerator", NULL, &id, NULL, &n));
    cr_expect_eq(n.n_devices, 0);
    cr_expect_gt(n.cpus, 0);
    cr_expect_str_eq(site_kind_to_string(n.site_kind), "lab");
    json_decref(describe("amd-mi300x", NULL, &id, NULL, &n));
    cr_assert_eq(n.n_devices, 2);
    cr_expect_str_eq(n.devices[0].cls, "amd-mi300x");
    cr_expect_gt(n.devices[0].memory_gb, 100);
}
