/* test-cli-discover.c: `einsora agent discover` as a user and the control plane run it. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../helpers.h"

#define HGX MACHINES "/hgx-h100-8gpu"

Test(cli_discover, r11_this_machine_reports_cpu_and_truthfully_no_accelerators) {
    /* The build machine: real /sys and /proc, no GPU, no NVML installed. */
    char *out = NULL;
    int rc = run_einsora(&out, NULL, "agent", "discover", "--json", "--catalog",
                         TEST_DATA "/catalog.yaml", NULL);
    cr_assert_eq(rc, 0);
    json_error_t jerr;
    json_t *j = json_loads(out, 0, &jerr);
    cr_assert_not_null(j, "%s: %s", jerr.text, out);
    json_t *cpu = json_object_get(j, "cpu");
    cr_expect_str_eq(json_string_value(json_object_get(cpu, "class")), "cpu");
    cr_expect_gt(json_integer_value(json_object_get(cpu, "logical_cores")), 0);
    cr_expect_gt(json_integer_value(json_object_get(cpu, "memory_bytes")), 0);
    cr_expect_eq(json_array_size(json_object_get(j, "accelerators")), 0);
    json_t *nvml = json_object_get(j, "nvml");
    cr_expect(json_is_false(json_object_get(nvml, "loaded")));
    cr_expect(strstr(json_string_value(json_object_get(nvml, "status")), "NVML data is absent"));
    json_decref(j);
    free(out);
    cr_assert_eq(run_einsora(&out, NULL, "agent", "discover", NULL), 0);
    cr_expect(strstr(out, "no accelerators found"), "%s", out);
    cr_expect(strstr(out, "logical cores"), "%s", out);
    free(out);
}

Test(cli_discover, r1_json_of_the_hgx_fixture) {
    char *out = NULL;
    setenv("EINSORA_FAKE_NVML", HGX "/nvml.txt", 1);
    int rc = run_einsora(&out, NULL, "agent", "discover", "--json", "--sysfs-root", HGX "/sys",
                         "--proc-root", HGX "/proc", "--nvml-lib", FAKE_NVML_LIB, "--pci-ids",
                         MACHINES "/pci.ids", NULL);
    cr_assert_eq(rc, 0);
    json_t *j = json_loads(out, 0, NULL);
    cr_assert_not_null(j, "%s", out);
    json_t *acc = json_object_get(j, "accelerators");
    cr_assert_eq(json_array_size(acc), 8);
    json_t *a = json_array_get(acc, 0);
    cr_expect_str_eq(json_string_value(json_object_get(a, "pci_address")), "0000:18:00.0");
    cr_expect_str_eq(json_string_value(json_object_get(a, "class")), "nvidia-h100-80gb");
    cr_expect_str_eq(json_string_value(json_object_get(a, "pci_class")), "0x030200");
    cr_expect_str_eq(json_string_value(json_object_get(a, "model")), "NVIDIA H100 80GB HBM3");
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(a, "memory"), "total_bytes")),
                 85520809984);
    cr_expect_eq(json_real_value(json_object_get(json_object_get(a, "link"), "speed_gts")), 32.0);
    cr_expect(json_is_null(json_object_get(a, "driver_override")));
    cr_expect(json_is_null(json_object_get(a, "boot_vga")));
    cr_expect_eq(json_integer_value(json_object_get(a, "iommu_group")), 20);
    json_t *h = json_array_get(json_object_get(a, "holders"), 0);
    cr_expect_eq(json_integer_value(json_object_get(h, "pid")), 4242);
    cr_expect_str_eq(json_string_value(json_object_get(h, "device_file")), "/dev/nvidia0");
    cr_expect(json_is_null(json_object_get(a, "error")));
    json_decref(j);
    free(out);
}

Test(cli_discover, r8_table_shows_unclassified_and_errors) {
    char *out = NULL;
    cr_assert_eq(run_einsora(&out, NULL, "agent", "discover", "--no-nvml", "--sysfs-root",
                             MACHINES "/intel-igpu-bootvga/sys", "--proc-root",
                             MACHINES "/intel-igpu-bootvga/proc", "--pci-ids", MACHINES "/pci.ids",
                             NULL),
                 0);
    cr_expect(
            strstr(out, "0000:00:02.0  intel   Raptor Lake-S GT1 [UHD Graphics 770]  unclassified"),
            "%s", out);
    free(out);
    cr_assert_eq(run_einsora(&out, NULL, "agent", "discover", "--no-nvml", "--sysfs-root",
                             MACHINES "/malformed-sysfs/sys", "--proc-root",
                             MACHINES "/malformed-sysfs/proc", NULL),
                 0);
    cr_expect(strstr(out, "0000:17:00.0 ERROR: sysfs class reads 'garbage'"), "%s", out);
    free(out);
}

Test(cli_discover, r10_apple_fixture_on_linux) {
    char *out = NULL;
    cr_assert_eq(run_einsora(&out, NULL, "agent", "discover", "--json", "--no-nvml", "--sysfs-root",
                             MACHINES "/no-such-sysfs", "--proc-root",
                             MACHINES "/no-accelerator/proc", "--apple-fixture",
                             MACHINES "/mac-m2-max-64gb.txt", "--apple-headroom-gb", "16", NULL),
                 0);
    json_t *j = json_loads(out, 0, NULL);
    cr_assert_not_null(j, "%s", out);
    json_t *a = json_array_get(json_object_get(j, "accelerators"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(a, "vendor")), "apple");
    cr_expect_str_eq(json_string_value(json_object_get(a, "class")), "apple-silicon-64gb");
    cr_expect(json_is_null(json_object_get(a, "pci_address")));
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(a, "memory"), "total_bytes")),
                 32ll << 30);
    json_decref(j);
    free(out);
}

Test(cli_discover, usage_and_bad_input_errors) {
    char *err = NULL;
    cr_expect_eq(run_einsora(NULL, &err, "agent", "discover", "--bogus", NULL), 2);
    free(err);
    cr_expect_eq(run_einsora(NULL, &err, "agent", "discover", "extra", NULL), 2);
    cr_expect(strstr(err, "unexpected argument 'extra'"), "%s", err);
    free(err);
    cr_expect_eq(run_einsora(NULL, &err, "agent", "discover", "--apple-headroom-gb", "-3", NULL),
                 2);
    cr_expect(strstr(err, "a number of GB, 0 or more"), "%s", err);
    free(err);
    cr_expect_eq(
            run_einsora(NULL, &err, "agent", "discover", "--apple-fixture", "/nonexistent", NULL),
            1);
    cr_expect(strstr(err, "cannot read the Mac fixture /nonexistent"), "%s", err);
    free(err);
    cr_expect_eq(
            run_einsora(NULL, &err, "agent", "discover", "--catalog", "/nonexistent.yaml", NULL),
            1);
    free(err);
    char *out = NULL;
    cr_expect_eq(run_einsora(&out, NULL, "agent", "discover", "--help", NULL), 0);
    cr_expect(strstr(out, "usage: einsora agent discover"));
    free(out);
}
