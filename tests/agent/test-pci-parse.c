/* test-pci-parse.c: the pure parsers of kernel text and the Apple arithmetic (R1, R10, R11). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/apple.h"
#include "agent/discover.h"
#include "agent/nvml.h"
#include "agent/pci-parse.h"
#include "agent/pci-sysfs.h"
#include "agent/procfd.h"
#include "config/catalog-yaml.h"

Test(pci_parse, r1_ids_and_class_as_the_kernel_writes_them) {
    uint16_t id = 0;
    cr_expect_eq(pci_parse_id("0x10de\n", &id), 0);
    cr_expect_eq(id, 0x10de);
    cr_expect_eq(pci_parse_id("0x10DE", &id), 0);
    cr_expect_eq(id, 0x10de);
    cr_expect_eq(pci_parse_id("10de", &id), -EINVAL);
    cr_expect_eq(pci_parse_id("0x10de0", &id), -EINVAL);
    cr_expect_eq(pci_parse_id("0xzzzz", &id), -EINVAL);
    cr_expect_eq(pci_parse_id("", &id), -EINVAL);
    uint32_t cls = 0;
    cr_expect_eq(pci_parse_class("0x030200\n", &cls), 0);
    cr_expect_eq(cls, 0x030200);
    cr_expect_eq(pci_parse_class("0x0302", &cls), -EINVAL);
    cr_expect_eq(pci_parse_class("garbage", &cls), -EINVAL);
}

Test(pci_parse, r1_accelerator_classes_and_vendors) {
    cr_expect(pci_class_is_accelerator(0x030000));     /* VGA */
    cr_expect(pci_class_is_accelerator(0x030200));     /* 3D controller */
    cr_expect(pci_class_is_accelerator(0x038000));     /* other display */
    cr_expect(pci_class_is_accelerator(0x120000));     /* processing accelerator (MI300X) */
    cr_expect_not(pci_class_is_accelerator(0x068000)); /* NVSwitch */
    cr_expect_not(pci_class_is_accelerator(0x040300));
    cr_expect(pci_vendor_is_accelerator(0x10de) && pci_vendor_is_accelerator(0x1002) &&
              pci_vendor_is_accelerator(0x8086));
    cr_expect_not(pci_vendor_is_accelerator(0x1a03)); /* ASPEED BMC display */
    cr_expect_str_eq(pci_class_kind(0x040300), "audio");
    cr_expect_str_eq(pci_class_kind(0x0c0330), "usb");
    cr_expect_str_eq(pci_class_kind(0x060400), "bridge");
    cr_expect_str_eq(pci_class_kind(0x0c8000), "serial-bus");
    cr_expect_str_eq(pci_class_kind(0x068000), "switch");
    cr_expect_str_eq(pci_class_kind(0x020000), "other");
}

Test(pci_parse, link_speed_old_and_new_formats) {
    unsigned mts = 1;
    cr_expect_eq(pci_parse_link_speed("8 GT/s\n", &mts), 0);
    cr_expect_eq(mts, 8000);
    cr_expect_eq(pci_parse_link_speed("2.5 GT/s", &mts), 0);
    cr_expect_eq(mts, 2500);
    cr_expect_eq(pci_parse_link_speed("16.0 GT/s PCIe\n", &mts), 0);
    cr_expect_eq(mts, 16000);
    cr_expect_eq(pci_parse_link_speed("2.5 GT/s PCIe", &mts), 0);
    cr_expect_eq(mts, 2500);
    cr_expect_eq(pci_parse_link_speed("64.0 GT/s PCIe", &mts), 0);
    cr_expect_eq(mts, 64000);
    cr_expect_eq(pci_parse_link_speed("Unknown", &mts), 0);
    cr_expect_eq(mts, 0);
    cr_expect_eq(pci_parse_link_speed("fast", &mts), -EINVAL);
    cr_expect_eq(pci_parse_link_speed("16.0 GB/s", &mts), -EINVAL);
    cr_expect_eq(pci_parse_link_speed("16. GT/s", &mts), -EINVAL);
    unsigned w = 9;
    cr_expect_eq(pci_parse_link_width("16\n", &w), 0);
    cr_expect_eq(w, 16);
    cr_expect_eq(pci_parse_link_width("255", &w), 0);
    cr_expect_eq(w, 0);
    cr_expect_eq(pci_parse_link_width("sixteen", &w), -EINVAL);
    cr_expect_eq(pci_parse_link_width("", &w), -EINVAL);
}

Test(pci_parse, numa_override_boot_vga_reset) {
    int node = 7;
    cr_expect_eq(pci_parse_numa_node("-1\n", &node), 0);
    cr_expect_eq(node, -1);
    cr_expect_eq(pci_parse_numa_node("1", &node), 0);
    cr_expect_eq(node, 1);
    cr_expect_eq(pci_parse_numa_node("node0", &node), -EINVAL);
    char *ovr = (char *)"x";
    cr_expect_eq(pci_parse_driver_override("(null)\n", &ovr), 0);
    cr_expect_null(ovr);
    cr_expect_eq(pci_parse_driver_override("vfio-pci\n", &ovr), 0);
    cr_expect_str_eq(ovr, "vfio-pci");
    free(ovr);
    cr_expect_eq(pci_parse_driver_override("bad driver", &ovr), -EINVAL);
    bool b = false;
    cr_expect_eq(pci_parse_bool01("1\n", &b), 0);
    cr_expect(b);
    cr_expect_eq(pci_parse_bool01("2", &b), -EINVAL);
    char **m = NULL;
    size_t n = 0;
    cr_expect_eq(pci_parse_reset_methods("flr bus\n", &m, &n), 0);
    cr_assert_eq(n, 2);
    cr_expect_str_eq(m[0], "flr");
    cr_expect_str_eq(m[1], "bus");
    strv_free(m, n);
    cr_expect_eq(pci_parse_reset_methods("\n", &m, &n), 0);
    cr_expect_eq(n, 0);
    strv_free(m, n);
    cr_expect_eq(pci_parse_reset_methods("flr BUS!", &m, &n), -EINVAL);
}

Test(pci_parse, nvml_bus_ids_normalise_to_sysfs_form) {
    char bdf[13];
    cr_expect_eq(pci_bdf_from_nvml("00000000:3B:00.0", bdf), 0);
    cr_expect_str_eq(bdf, "0000:3b:00.0");
    cr_expect_eq(pci_bdf_from_nvml("0001:DB:00.0", bdf), 0);
    cr_expect_str_eq(bdf, "0001:db:00.0");
    cr_expect_eq(pci_bdf_from_nvml("00010000:3B:00.0", bdf), -EINVAL);
    cr_expect_eq(pci_bdf_from_nvml("3B:00.0", bdf), -EINVAL);
    cr_expect_eq(pci_bdf_from_nvml("00000000:3B:00.9", bdf), -EINVAL);
}

Test(procfd, device_paths_map_to_nodes) {
    DevNode n;
    cr_expect_eq(devnode_parse("/dev", "/dev/nvidia3", &n), 0);
    cr_expect(n.kind == DEVNODE_NVIDIA && n.num == 3);
    cr_expect_eq(devnode_parse("/dev", "/dev/dri/renderD129 (deleted)", &n), 0);
    cr_expect(n.kind == DEVNODE_DRI_RENDER && n.num == 129);
    cr_expect_eq(devnode_parse("/dev", "/dev/dri/card0", &n), 0);
    cr_expect(n.kind == DEVNODE_DRI_CARD && n.num == 0);
    cr_expect_eq(devnode_parse("/dev", "/dev/kfd", &n), 0);
    cr_expect(n.kind == DEVNODE_KFD);
    cr_expect_eq(devnode_parse("/dev/", "/dev/vfio/14", &n), 0);
    cr_expect(n.kind == DEVNODE_VFIO && n.num == 14);
    cr_expect_eq(devnode_parse("/dev", "/dev/nvidiactl", &n), -ENOENT);
    cr_expect_eq(devnode_parse("/dev", "/dev/nvidia-uvm", &n), -ENOENT);
    cr_expect_eq(devnode_parse("/dev", "/dev/vfio/vfio", &n), -ENOENT);
    cr_expect_eq(devnode_parse("/dev", "socket:[1234]", &n), -ENOENT);
    cr_expect_eq(devnode_parse("/dev", "/devx/nvidia0", &n), -ENOENT);
    /* R7: under another dev root, the name the holder itself sees counts too. */
    cr_expect_eq(devnode_parse("/host/dev", "/dev/nvidia2", &n), 0);
    cr_expect(n.kind == DEVNODE_NVIDIA && n.num == 2);
    cr_expect_eq(devnode_parse("/host/dev", "/host/dev/dri/renderD130", &n), 0);
    cr_expect(n.kind == DEVNODE_DRI_RENDER && n.num == 130);
    cr_expect_eq(devnode_parse("/host/dev", "/host/devx/nvidia0", &n), -ENOENT);
    char buf[64];
    cr_expect_eq(devnode_format("/dev", &(DevNode){DEVNODE_DRI_RENDER, 128}, buf, sizeof(buf)), 0);
    cr_expect_str_eq(buf, "/dev/dri/renderD128");
}

Test(cpu, r11_cpuinfo_and_meminfo) {
    unsigned cores = 0;
    char *model = NULL;
    cr_expect_eq(
            cpu_parse_cpuinfo(
                    "processor\t: 0\nmodel name\t: Xeon\n\nprocessor\t: 1\nmodel name\t: Xeon\n",
                    &cores, &model),
            0);
    cr_expect_eq(cores, 2);
    cr_expect_str_eq(model, "Xeon");
    free(model);
    /* arm64 kernels write no model name */
    cr_expect_eq(cpu_parse_cpuinfo("processor\t: 0\nBogoMIPS\t: 50.00\n", &cores, &model), 0);
    cr_expect_eq(cores, 1);
    cr_expect_null(model);
    cr_expect_eq(cpu_parse_cpuinfo("nothing here\n", &cores, &model), -EINVAL);
    uint64_t bytes = 0;
    cr_expect_eq(cpu_parse_meminfo("MemTotal:       16384000 kB\nMemFree: 1 kB\n", &bytes), 0);
    cr_expect_eq(bytes, 16384000ull * 1024);
    cr_expect_eq(cpu_parse_meminfo("MemFree: 1 kB\n", &bytes), -EINVAL);
}

Test(apple, r10_default_limit_headroom_and_class) {
    Catalog *cat = NULL;
    cr_assert_eq(catalog_load_file(TEST_DATA "/catalog.yaml", NULL, &cat, NULL), 0);
    /* 64 GB, limit 0 (system default): 3/4 of 64 = 48 GB; default headroom 8 GB -> 40 GB */
    AppleHost h = {.memsize_bytes = 64 * GIB};
    AppleGpuMemory m;
    cr_assert_eq(apple_gpu_memory(&h, -1, &m, NULL), 0);
    cr_expect_eq(m.limit_bytes, 48 * GIB);
    cr_expect_eq(m.headroom_bytes, 8 * GIB);
    cr_expect_eq(m.usable_bytes, 40 * GIB);
    cr_expect_str_eq(apple_match_class(cat, &m)->name, "apple-silicon-64gb");
    /* 16 GB: 2/3 rule, headroom capped at a quarter of RAM (4 GB) */
    h = (AppleHost){.memsize_bytes = 16 * GIB};
    cr_assert_eq(apple_gpu_memory(&h, -1, &m, NULL), 0);
    cr_expect_eq(m.limit_bytes, 16 * GIB / 3 * 2);
    cr_expect_eq(m.headroom_bytes, 4 * GIB);
    cr_expect_str_eq(apple_match_class(cat, &m)->name, "apple-silicon-16gb");
    /* iogpu.wired_limit_mb set by the owner, headroom given */
    h = (AppleHost){.memsize_bytes = 16 * GIB, .wired_limit_mb = 12288};
    cr_assert_eq(apple_gpu_memory(&h, 2, &m, NULL), 0);
    cr_expect_eq(m.limit_bytes, 12 * GIB);
    cr_expect_eq(m.usable_bytes, 10 * GIB);
    /* Metal's figure beats the rule when the limit is the default */
    h = (AppleHost){.memsize_bytes = 96 * GIB, .metal_working_set_bytes = 70 * GIB};
    cr_assert_eq(apple_gpu_memory(&h, -1, &m, NULL), 0);
    cr_expect_eq(m.limit_bytes, 70 * GIB);
    cr_expect_str_eq(apple_match_class(cat, &m)->name, "apple-silicon-96gb");
    /* 8 GB Mac: below every tier */
    h = (AppleHost){.memsize_bytes = 8 * GIB};
    cr_assert_eq(apple_gpu_memory(&h, -1, &m, NULL), 0);
    cr_expect_null(apple_match_class(cat, &m));
    /* a limit above RAM is refused */
    h = (AppleHost){.memsize_bytes = 16 * GIB, .wired_limit_mb = 32768};
    Error err = {0};
    cr_expect_eq(apple_gpu_memory(&h, -1, &m, &err), -EINVAL);
    cr_expect(strstr(err.message, "above the Mac's memory"), "%s", err.message);
    catalog_free(cat);
}

Test(apple, r10_fixture_parse_errors_name_the_line) {
    AppleHost h;
    Error err = {0};
    cr_expect_eq(apple_parse_fixture("hw.memsize: 1024\nbogus: 1\n", "f", &h, &err), -EINVAL);
    cr_expect(strstr(err.message, "f:2:1: unknown key 'bogus'"), "%s", err.message);
    error_clear(&err);
    cr_expect_eq(apple_parse_fixture("hw.memsize: lots\n", "f", &h, &err), -EINVAL);
    cr_expect(strstr(err.message, "f:1:"), "%s", err.message);
    error_clear(&err);
    cr_expect_eq(apple_parse_fixture("# nothing\n", "f", &h, &err), -EINVAL);
    cr_expect(strstr(err.message, "hw.memsize is missing"), "%s", err.message);
    error_clear(&err);
    /* an unknown key with a word for a value is an unknown key; a key twice is refused */
    cr_expect_eq(apple_parse_fixture("hw.memsize: 1024\ncolour: blue\n", "f", &h, &err), -EINVAL);
    cr_expect(strstr(err.message, "f:2:1: unknown key 'colour'"), "%s", err.message);
    error_clear(&err);
    cr_expect_eq(apple_parse_fixture("hw.memsize: 1024\nhw.memsize: 2048\n", "f", &h, &err),
                 -EINVAL);
    cr_expect(strstr(err.message, "f:2:1: key 'hw.memsize' appears twice"), "%s", err.message);
    cr_expect_eq(apple_parse_fixture("chip: Apple M4\nhw.memsize: 17179869184\n", "f", &h, NULL),
                 0);
    cr_expect_str_eq(h.chip, "Apple M4");
    cr_expect_eq(h.memsize_bytes, 16 * GIB);
}

Test(nvml, mig_profile_names_from_library_or_fields) {
    char buf[32];
    nvml_profile_name(1, 16384, "MIG 1g.18gb", buf, sizeof(buf));
    cr_expect_str_eq(buf, "1g.18gb");
    nvml_profile_name(1, 4864, NULL, buf, sizeof(buf)); /* A100-40GB 1g.5gb */
    cr_expect_str_eq(buf, "1g.5gb");
    nvml_profile_name(7, 40192, "", buf, sizeof(buf)); /* A100-40GB 7g.40gb */
    cr_expect_str_eq(buf, "7g.40gb");
}
