/* test-plan.c: the inventory and request file formats (errors at FILE:LINE, nothing applied)
 * and `einsora plan` as an operator runs it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../helpers.h"
#include "config/catalog-yaml.h"
#include "config/inventory-yaml.h"
#include "config/requests-yaml.h"

#define INV TEST_FIXTURES "/plan/inventory.yaml"
#define REQ TEST_FIXTURES "/plan/requests.yaml"

static void inventory_error(const char *text, int code, const char *pos, const char *needle) {
    InventoryFile *inv = NULL;
    Error err = {0};
    cr_assert_eq(inventory_parse_yaml(text, strlen(text), "inv.yaml", &inv, &err), code, "%s",
                 err.message);
    cr_assert_null(inv);
    cr_assert(strncmp(err.message, pos, strlen(pos)) == 0, "want position %s in '%s'", pos,
              err.message);
    cr_assert(strstr(err.message, needle), "want '%s' in '%s'", needle, err.message);
}

static void requests_error(const char *text, int code, const char *pos, const char *needle) {
    RequestsFile *rf = NULL;
    Error err = {0};
    cr_assert_eq(requests_parse_yaml(text, strlen(text), "req.yaml", &rf, &err), code, "%s",
                 err.message);
    cr_assert_null(rf);
    cr_assert(strncmp(err.message, pos, strlen(pos)) == 0, "want position %s in '%s'", pos,
              err.message);
    cr_assert(strstr(err.message, needle), "want '%s' in '%s'", needle, err.message);
}

Test(plan_files, example_files_parse) {
    InventoryFile *inv = NULL;
    RequestsFile *rf = NULL;
    Error err = {0};
    cr_assert_eq(inventory_load_file(INV, &inv, &err), 0, "%s", err.message);
    cr_assert_eq(requests_load_file(REQ, &rf, &err), 0, "%s", err.message);
    cr_assert_eq(inv->n_sites, 2);
    cr_assert_eq(inv->nodes[0].spec.n_devices, 8, "count: 8 expands");
    cr_assert_eq(rf->entries[5].spec.n_fallback, 1);
    cr_assert_eq(rf->entries[0].release_at, 100);
    inventory_file_free(inv);
    requests_file_free(rf);
}

Test(plan_files, inventory_errors_name_file_and_line) {
    inventory_error("sites:\n  - {name: a, kind: moon}\n", -EINVAL,
                    "inv.yaml:2:", "unknown site kind 'moon'");
    inventory_error("nodes:\n  - name: n\n    site: s\n", -EINVAL,
                    "inv.yaml:2:", "needs an 'owner'");
    inventory_error("nodes:\n  - name: n\n    colour: red\n", -EINVAL,
                    "inv.yaml:3:", "unknown key 'colour'");
    inventory_error("nodes:\n  - {name: n, site: s, owner: o, devices: [{class: x, count: 17}]}\n",
                    -ERANGE, "inv.yaml:2:", "at most 16");
    inventory_error("nodes: [\n", -EINVAL, "inv.yaml:", "YAML syntax error");
    inventory_error("version: 2\n", -EINVAL, "inv.yaml:1:", "version 2");
    /* R10, as the API: usable GPU memory is part of the Mac's unified memory. */
    inventory_error("nodes:\n  - {name: m, site: s, owner: o, platform: macos,\n"
                    "     apple_unified_memory_gb: 16, apple_usable_memory_gb: 99}\n",
                    -EINVAL, "inv.yaml:2:", "is more than apple_unified_memory_gb (16)");
}

/* R10: a Mac whose headroom leaves no GPU memory says 0, and offers nothing: the same as the
 * agent's report through the API. */
Test(plan_files, r10_a_mac_with_no_usable_gpu_memory_offers_nothing) {
    const char *text = "sites: [{name: home, kind: solo}]\n"
                       "nodes:\n  - {name: m, site: home, owner: o, platform: macos,\n"
                       "     apple_unified_memory_gb: 16, apple_usable_memory_gb: 0}\n";
    InventoryFile *inv = NULL;
    Error err = {0};
    cr_assert_eq(inventory_parse_yaml(text, strlen(text), "inv.yaml", &inv, &err), 0, "%s",
                 err.message);
    Catalog *cat = NULL;
    cr_assert_eq(catalog_load_file(TEST_DATA "/catalog.yaml", NULL, &cat, &err), 0);
    Sched *s = sched_new(cat);
    cr_assert_eq(inventory_apply(inv, s, 0, &err), 0, "%s", err.message);
    DeviceInfo di;
    cr_assert_eq(sched_device_info(s, "m", 0, &di), 0);
    cr_expect_eq(di.state, DEVICE_QUARANTINED);
    cr_expect(di.quarantine_reason && strstr(di.quarantine_reason, "no GPU memory to offer"));
    Decision d;
    cr_assert_eq(sched_submit(s,
                              &(RequestSpec){.id = "e",
                                             .user = "o",
                                             .kind = WORKLOAD_ENDPOINT,
                                             .class_name = "apple-silicon-16gb"},
                              0, &d, &err),
                 0, "%s", err.message);
    cr_expect_neq(d.kind, DECISION_PLACED, "%s", d.message);
    sched_free(s);
    inventory_file_free(inv);
    catalog_free(cat);
}

Test(plan_files, r3_inventory_rule_errors_point_at_the_node) {
    Catalog *cat = NULL;
    Error err = {0};
    cr_assert_eq(catalog_load_file(TEST_DATA "/catalog.yaml", NULL, &cat, &err), 0);
    const char *text = "sites: [{name: dc, kind: datacenter}]\n"
                       "nodes:\n"
                       "  - name: ok\n    site: dc\n    owner: ops\n"
                       "  - name: bad\n    site: dc\n    owner: ops\n    devices: [{class: "
                       "nvidia-h100-80gb}]\n";
    InventoryFile *inv = NULL;
    cr_assert_eq(inventory_parse_yaml(text, strlen(text), "inv.yaml", &inv, &err), 0, "%s",
                 err.message);
    Sched *s = sched_new(cat);
    cr_assert_eq(inventory_apply(inv, s, 0, &err), -EINVAL);
    cr_assert(strstr(err.message, "inv.yaml:6: node 'bad'") &&
                      strstr(err.message, SCHED_MODE_LABEL),
              "%s", err.message);
    sched_free(s);
    inventory_file_free(inv);
    catalog_free(cat);
}

Test(plan_files, request_errors_name_file_and_line) {
    requests_error("requests:\n  - {id: a, user: u, kind: spaceship, class: cpu}\n", -EINVAL,
                   "req.yaml:2:", "unknown kind 'spaceship'");
    requests_error("requests:\n  - {id: a, user: u, kind: vm}\n", -EINVAL,
                   "req.yaml:2:", "'class' or a 'memory_gb'");
    requests_error("requests:\n  - {id: a, user: u, kind: vm, class: cpu, wait_s: 30}\n", -EINVAL,
                   "req.yaml:2:", "'wait_s' needs a 'fallback' list"); /* as the API says */
    requests_error("requests:\n  - {id: a, user: u, kind: vm, class: cpu}\n  - {id: a, user: u, "
                   "kind: vm, class: cpu}\n",
                   -EEXIST, "req.yaml:3:", "used twice");
    requests_error("requests:\n  - {id: a, user: u, kind: vm, class: cpu, at: soon}\n", -EINVAL,
                   "req.yaml:2:", "bad time 'soon'");
    requests_error("requests:\n  - {id: a, user: u, kind: vm, class: cpu, at: 9, release_at: 3}\n",
                   -EINVAL, "req.yaml:2:", "before it starts");
    /* Fields of another kind, and GPU memory for cpu, are refused as the API refuses them. */
    requests_error("requests:\n  - {id: a, user: u, kind: container, class: cpu, guest: macos}\n",
                   -EINVAL, "req.yaml:2:", "'guest' applies to kind vm only");
    requests_error("requests:\n  - {id: a, user: u, kind: container, class: cpu, runtime: "
                   "llama.cpp}\n",
                   -EINVAL, "req.yaml:2:", "'runtime' applies to kind endpoint only");
    requests_error("requests:\n  - {id: a, user: u, kind: endpoint, class: cpu, memory_gb: 8}\n",
                   -EINVAL, "req.yaml:2:", "class cpu takes 'count' cores");
}

Test(plan_cli, plan_prints_each_decision_and_capacity_before_and_after) {
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "plan", "--inventory", INV, "--requests", REQ, NULL);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert(strstr(out, "Capacity before:") && strstr(out, "Capacity after:"), "%s", out);
    cr_assert(strstr(out, "refused (nvidia-h100-vgpu)"), "R2d: %s", out);
    cr_assert(strstr(out, "only the machine's owner may use it"), "%s", out);
    cr_assert(strstr(out, "fallback after the wait, R13"), "%s", out);
    free(out);
    free(err);
}

Test(plan_cli, plan_json_lists_every_decision) {
    char *out = NULL;
    cr_assert_eq(
            run_einsora(&out, NULL, "plan", "--inventory", INV, "--requests", REQ, "--json", NULL),
            0);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    cr_assert_not_null(j, "%s", je.text);
    json_t *dec = json_object_get(j, "decisions");
    size_t submits = 0, i;
    json_t *e;
    json_array_foreach(dec, i, e) {
        if (strcmp(json_string_value(json_object_get(e, "event")), "submit") == 0)
            submits++;
    }
    cr_assert_eq(submits, 11, "one decision per request");
    cr_assert(json_array_size(json_object_get(j, "capacity_after")) > 0);
    json_decref(j);
    free(out);
}

Test(plan_cli, plan_bad_file_exits_1_with_position) {
    char *path =
            write_temp_file("requests:\n  - {id: a, user: u, kind: vm, colour: red, class: cpu}\n");
    char *err = NULL;
    cr_assert_eq(run_einsora(NULL, &err, "plan", "--inventory", INV, "--requests", path, NULL), 1);
    char want[256];
    snprintf(want, sizeof(want), "%s:2:", path);
    cr_assert(strstr(err, want) && strstr(err, "colour"), "%s", err);
    unlink(path);
    free(path);
    free(err);
}

Test(plan_cli, plan_usage_errors_exit_2) {
    cr_assert_eq(run_einsora(NULL, NULL, "plan", NULL), 2);
    cr_assert_eq(run_einsora(NULL, NULL, "plan", "--inventory", INV, NULL), 2);
}
