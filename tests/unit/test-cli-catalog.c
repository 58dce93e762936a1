/* test-cli-catalog.c: `einsora catalog check|show` as a user runs them. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../helpers.h"
#include "config.h"

Test(cli_catalog, r8_check_valid_catalog_exits_0) {
    char *out = NULL;
    int rc = run_einsora(&out, NULL, "catalog", "check", TEST_DATA "/catalog.yaml", NULL);
    cr_expect_eq(rc, 0);
    cr_expect(strstr(out, "valid"), "%s", out);
    free(out);
}

Test(cli_catalog, r8_check_invalid_catalog_exits_1_with_position) {
    char *path = write_temp_file("classes:\n  - name: a\n    vendor: cpu\n    flavour: x\n");
    char *err = NULL;
    int rc = run_einsora(NULL, &err, "catalog", "check", path, NULL);
    cr_expect_eq(rc, 1);
    char want[256];
    snprintf(want, sizeof(want), "%s:4:5: unknown key 'flavour'", path);
    cr_expect(strstr(err, want), "want '%s' in '%s'", want, err);
    unlink(path);
    free(path);
    free(err);
}

/* A script asking for JSON gets the invalid verdict as JSON on stdout too, with the place. */
Test(cli_catalog, r8_check_invalid_catalog_with_json_prints_the_verdict_as_json) {
    char *path = write_temp_file("classes:\n  - name: a\n    vendor: cpu\n    flavour: x\n");
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "catalog", "check", path, "--json", NULL);
    cr_expect_eq(rc, 1);
    json_error_t jerr;
    json_t *j = json_loads(out, 0, &jerr);
    cr_assert_not_null(j, "stdout is JSON: %s (%s)", out, jerr.text);
    cr_expect_eq(json_object_get(j, "valid"), json_false());
    cr_expect_str_eq(json_string_value(json_object_get(j, "file")), path);
    char want[256];
    snprintf(want, sizeof(want), "%s:4:5: unknown key 'flavour'", path);
    const char *error = json_string_value(json_object_get(j, "error"));
    cr_expect(error && strstr(error, want), "want '%s' in '%s'", want, error);
    json_decref(j);
    unlink(path);
    free(path);
    free(out);
    free(err);
}

Test(cli_catalog, r8_check_missing_file_exits_1) {
    char *err = NULL;
    cr_expect_eq(run_einsora(NULL, &err, "catalog", "check", "/nonexistent.yaml", NULL), 1);
    cr_expect(strstr(err, "cannot read catalog /nonexistent.yaml"), "%s", err);
    free(err);
}

Test(cli_catalog, usage_errors_exit_2) {
    cr_expect_eq(run_einsora(NULL, NULL, "catalog", NULL), 2);
    cr_expect_eq(run_einsora(NULL, NULL, "catalog", "frobnicate", NULL), 2);
    cr_expect_eq(run_einsora(NULL, NULL, "catalog", "check", NULL), 2);
    cr_expect_eq(run_einsora(NULL, NULL, "catalog", "show", "--bogus", NULL), 2);
    cr_expect_eq(run_einsora(NULL, NULL, "nosuchverb", NULL), 2);
    char *out = NULL;
    cr_expect_eq(run_einsora(&out, NULL, "catalog", "--help", NULL), 0);
    cr_expect(strstr(out, "usage: einsora catalog"));
    free(out);
}

Test(cli_catalog, r8_show_table_is_aligned_and_marks_raw_ids) {
    char *out = NULL;
    cr_assert_eq(run_einsora(&out, NULL, "catalog", "show", "--catalog", TEST_DATA "/catalog.yaml",
                             NULL),
                 0);
    cr_expect(strncmp(out, "CLASS ", 6) == 0);
    const char *h100 = strstr(out, "\nnvidia-h100-80gb-pcie ");
    cr_assert_not_null(h100);
    /* columns line up: VENDOR starts at the same offset on every line */
    const char *header_vendor = strstr(out, "VENDOR");
    const char *row_vendor = strstr(h100 + 1, "nvidia ");
    cr_expect_eq(header_vendor - out, row_vendor - (h100 + 1));
    cr_expect(strstr(out, "nvidia.com/GH100_H100_PCIE"));
    cr_expect(strstr(out, "nvidia.com/2b85 *"), "raw-id names are marked");
    cr_expect(strstr(out, "nvidia.com/GH100_H200_SXM_141GB"), "stated in the catalog (R6)");
    cr_expect(strstr(out, "pci.ids has no name for this device"));
    /* R8: every way a class matches devices is shown, NVML names too. */
    cr_expect(strstr(out, "nvml 'NVIDIA H200'"), "%s", out);
    free(out);
}

Test(cli_catalog, r6_check_warns_where_the_hosts_pci_ids_spells_a_stated_name_otherwise) {
    char *out = NULL, *err = NULL;
    cr_assert_eq(run_einsora(&out, &err, "catalog", "check", TEST_DATA "/catalog.yaml", NULL), 0,
                 "%s", err);
    cr_expect(strstr(err, "warning: class nvidia-h100-80gb: vm_device_name "
                          "nvidia.com/GH100_H100_SXM5_80GB"),
              "%s", err);
    cr_expect(strstr(err, "nvidia.com/GH100H100_SXM5_80GB"), "%s", err);
    free(out);
    free(err);
}

Test(cli_catalog, r8_show_json_has_every_field) {
    char *out = NULL;
    cr_assert_eq(run_einsora(&out, NULL, "catalog", "show", "--json", "--catalog",
                             TEST_DATA "/catalog.yaml", NULL),
                 0);
    json_error_t jerr;
    json_t *j = json_loads(out, 0, &jerr);
    cr_assert_not_null(j, "not JSON: %s", jerr.text);
    json_t *classes = json_object_get(j, "classes");
    cr_assert(json_array_size(classes) > 40);
    json_t *first = json_array_get(classes, 0);
    static const char *const fields[] = {"name",
                                         "vendor",
                                         "match",
                                         "memory_gb",
                                         "container_resource",
                                         "node_selector",
                                         "vm_device_name",
                                         "mig_profiles",
                                         "internal_only",
                                         "owner_only",
                                         "consumer"};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        cr_expect_not_null(json_object_get(first, fields[i]), "field %s", fields[i]);
    json_decref(j);
    free(out);
}

/* R9: a class whose PCI id pci.ids names a GeForce card but that is not marked consumer would
 * skip the reset check before passthrough: the check says so (the operator decides). */
Test(cli_catalog, r9_a_geforce_class_not_marked_consumer_is_warned_about) {
    if (access(EINSORA_PCI_IDS, R_OK) != 0)
        cr_skip_test("no pci.ids on this machine");
    char *path = write_temp_file(
            "classes:\n"
            "  - {name: my-4090, vendor: nvidia, match: {pci: '10de:2684'}, memory_gb: 24,\n"
            "     container_resource: nvidia.com/gpu, node_selector: a=b}\n");
    char *out = NULL, *err = NULL;
    cr_expect_eq(run_einsora(&out, &err, "catalog", "check", path, NULL), 0, "%s", err);
    cr_expect(strstr(err, "class my-4090 matches") && strstr(err, "GeForce RTX 4090") &&
                      strstr(err, "not marked consumer: true"),
              "%s", err);
    free(out), free(err);
    /* Matched by NVML's name alone: the same. */
    char *by_name = write_temp_file(
            "classes:\n"
            "  - {name: my-4080, vendor: nvidia, match: {nvml: 'NVIDIA GeForce RTX 4080'},\n"
            "     memory_gb: 16, container_resource: nvidia.com/gpu, node_selector: a=b}\n");
    cr_expect_eq(run_einsora(&out, &err, "catalog", "check", by_name, NULL), 0, "%s", err);
    cr_expect(strstr(err, "class my-4080 matches NVIDIA GeForce RTX 4080"), "%s", err);
    free(out), free(err);
    unlink(by_name);
    free(by_name);
    /* The shipped catalog marks its GeForce classes: no warning. */
    cr_expect_eq(run_einsora(&out, &err, "catalog", "check", TEST_DATA "/catalog.yaml", NULL), 0);
    cr_expect_null(strstr(err, "not marked consumer"), "%s", err);
    free(out), free(err);
    unlink(path);
    free(path);
}
