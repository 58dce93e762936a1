/* test-discover.c: each fixture machine gives its exact inventory, field by field (R1, R8,
 * R10, R11, R12). Fixtures: tests/fixtures/machines/ (generate.py); NVML: the fake library. */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/discover.h"
#include "config/catalog-yaml.h"
#include "util/fileio.h"

static Catalog *cat;
static PciIds *ids;

static void setup(void) {
    cr_assert_eq(catalog_load_file(TEST_DATA "/catalog.yaml", NULL, &cat, NULL), 0);
    cr_assert_eq(pci_ids_load(MACHINES "/pci.ids", &ids, NULL), 0);
}

static void teardown(void) {
    catalog_free(cat);
    pci_ids_free(ids);
}

TestSuite(discover, .init = setup, .fini = teardown);

/* Discover fixture machine `name`; with_nvml loads the fake NVML on <name>/nvml.txt. */
static MachineInventory *discover(const char *name, bool with_nvml) {
    char sys[512], proc[512], nvml[512];
    snprintf(sys, sizeof(sys), "%s/%s/sys", MACHINES, name);
    snprintf(proc, sizeof(proc), "%s/%s/proc", MACHINES, name);
    snprintf(nvml, sizeof(nvml), "%s/%s/nvml.txt", MACHINES, name);
    setenv("EINSORA_FAKE_NVML", nvml, 1);
    DiscoverOptions o = {.sysfs_root = sys,
                         .proc_root = proc,
                         .nvml_lib = FAKE_NVML_LIB,
                         .no_nvml = !with_nvml,
                         .catalog = cat,
                         .pci_ids = ids};
    MachineInventory *inv = NULL;
    Error err = {0};
    cr_assert_eq(machine_discover(&o, &inv, &err), 0, "%s", err.message);
    return inv;
}

static void expect_files(const Accelerator *a, const char *const *want, size_t n) {
    cr_assert_eq(a->n_device_files, n, "%s: %zu device files", a->bdf, a->n_device_files);
    for (size_t i = 0; i < n; i++)
        cr_expect_str_eq(a->device_files[i], want[i]);
}

static void expect_holder(const Accelerator *a, size_t i, int pid, const char *comm,
                          const char *path) {
    cr_assert_gt(a->n_holders, i, "%s: only %zu holders", a->bdf, a->n_holders);
    cr_expect_eq(a->holders[i].pid, pid);
    cr_expect_str_eq(a->holders[i].comm, comm);
    cr_expect_str_eq(a->holders[i].path, path);
}

Test(discover, r1_hgx_h100_eight_gpus_with_nvml_and_no_nvswitches) {
    MachineInventory *inv = discover("hgx-h100-8gpu", true);
    cr_expect_eq(inv->cpu.logical_cores, 16);
    cr_expect_str_eq(inv->cpu.model, "Intel(R) Xeon(R) Platinum 8480+");
    cr_expect_eq(inv->cpu.memory_bytes, 2113628672ull * 1024);
    cr_expect(inv->iommu_enabled);
    cr_expect(inv->nvml_loaded);
    cr_expect_str_eq(inv->nvml_status, "NVML answered for 8 GPUs");
    cr_expect_null(inv->apple_status);
    cr_assert_eq(inv->n_accelerators, 8); /* the 4 NVSwitches (class 0x0680) are not accelerators */
    static const char *bdfs[] = {"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
                                 "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"};
    for (size_t i = 0; i < 8; i++) {
        const Accelerator *a = &inv->accelerators[i];
        char uuid[64], dev[32];
        snprintf(uuid, sizeof(uuid), "GPU-5d3c1a0e-77f2-4b1e-9c3d-0000000000%02zu", i);
        snprintf(dev, sizeof(dev), "/dev/nvidia%zu", i);
        cr_expect_str_eq(a->bdf, bdfs[i]);
        cr_expect_eq(a->vendor, VENDOR_NVIDIA);
        cr_expect_eq(a->vendor_id, 0x10de);
        cr_expect_eq(a->device_id, 0x2330);
        cr_expect_eq(a->class_code, 0x030200);
        cr_expect_eq(a->subsystem_vendor_id, 0x10de);
        cr_expect_eq(a->subsystem_device_id, 0x16c1);
        cr_expect_str_eq(a->model, "NVIDIA H100 80GB HBM3");
        cr_expect_str_eq(a->nvml_name, "NVIDIA H100 80GB HBM3");
        cr_expect_str_eq(a->pci_name, "GH100 [H100 SXM5 80GB]");
        cr_expect_str_eq(a->uuid, uuid);
        cr_expect_str_eq(accelerator_class_name(a), "nvidia-h100-80gb");
        cr_expect_not(a->consumer);
        cr_expect_eq(a->memory_total_bytes, 85520809984ull);
        cr_expect_eq(a->memory_used_bytes, (i + 1) * 536870912ull);
        cr_expect_str_eq(a->memory_source, "nvml");
        cr_expect_eq(a->numa_node, (int)(i / 4));
        cr_expect_eq(a->link_speed_mts, 32000);
        cr_expect_eq(a->max_link_speed_mts, 32000);
        cr_expect_eq(a->link_width, 16);
        cr_expect_eq(a->max_link_width, 16);
        cr_expect_str_eq(a->driver, "nvidia");
        cr_expect_null(a->driver_override);
        cr_expect_eq(a->iommu_group, (int)(20 + i));
        cr_expect_eq(a->n_group, 0);
        cr_expect_eq(a->boot_vga, -1); /* 3D controllers have no boot_vga */
        cr_assert(a->has_reset_method);
        cr_assert_eq(a->n_reset_methods, 2);
        cr_expect_str_eq(a->reset_methods[0], "flr");
        cr_expect_str_eq(a->reset_methods[1], "bus");
        cr_expect_eq(a->mig_current, 0);
        cr_expect_eq(a->mig_pending, 0);
        cr_expect_eq(a->n_mig, 0);
        cr_expect_eq(a->nvidia_minor, (int)i);
        expect_files(a, (const char *[]){dev}, 1);
        cr_expect_eq(a->n_holders, i < 2 ? 1 : 0);
        if (i < 2)
            expect_holder(a, 0, 4242, "python3", dev);
        cr_expect_null(a->error, "%s", a->error);
    }
    machine_inventory_free(inv);
}

Test(discover, r1_without_nvml_sysfs_and_driver_proc_still_give_minor_and_files) {
    MachineInventory *inv = discover("hgx-h100-8gpu", false);
    cr_expect_not(inv->nvml_loaded);
    cr_expect(strstr(inv->nvml_status, "NVML was not loaded"), "%s", inv->nvml_status);
    cr_assert_eq(inv->n_accelerators, 8);
    const Accelerator *a = &inv->accelerators[3];
    cr_expect_str_eq(a->model, "GH100 [H100 SXM5 80GB]");
    cr_expect_null(a->nvml_name);
    cr_expect_null(a->uuid);
    cr_expect_null(a->memory_source);
    cr_expect_eq(a->memory_total_bytes, 0);
    cr_expect_eq(a->mig_current, -1);
    cr_expect_eq(a->nvidia_minor,
                 3); /* "Device Minor" in /proc/driver/nvidia/gpus/BDF/information */
    expect_files(a, (const char *[]){"/dev/nvidia3"}, 1);
    cr_expect_str_eq(accelerator_class_name(a), "nvidia-h100-80gb");
    machine_inventory_free(inv);
}

Test(discover, r2c_h200_mig_instances_with_profiles_and_slice_classes) {
    MachineInventory *inv = discover("h200-mig", true);
    cr_assert_eq(inv->n_accelerators, 1);
    const Accelerator *a = &inv->accelerators[0];
    cr_expect_str_eq(a->bdf, "0000:4e:00.0");
    cr_expect_str_eq(a->model, "NVIDIA H200");
    cr_expect_str_eq(a->pci_name, "GH100 [H200 SXM 141GB]");
    cr_expect_str_eq(accelerator_class_name(a), "nvidia-h200-141gb");
    cr_expect_eq(a->memory_total_bytes, 150754820096ull);
    cr_expect_eq(a->memory_used_bytes, 21474836480ull);
    cr_expect_eq(a->mig_current, 1);
    cr_expect_eq(a->mig_pending, 1);
    cr_assert_eq(a->n_mig, 3);
    static const struct {
        unsigned gi, profile_id, start, size;
        const char *profile, *cls;
    } want[] = {
            {2, 9, 0, 4, "3g.71gb", "nvidia-h200-141gb-mig-3g.71gb"},
            {5, 14, 4, 2, "2g.35gb", "nvidia-h200-141gb-mig-2g.35gb"},
            {13, 19, 6, 1, "1g.18gb", "nvidia-h200-141gb-mig-1g.18gb"},
    };
    for (size_t i = 0; i < 3; i++) {
        cr_expect_eq(a->mig[i].gpu_instance_id, want[i].gi);
        cr_expect_eq(a->mig[i].profile_id, want[i].profile_id);
        cr_expect_eq(a->mig[i].start, want[i].start);
        cr_expect_eq(a->mig[i].size, want[i].size);
        cr_expect_str_eq(a->mig[i].profile, want[i].profile);
        cr_expect_str_eq(a->mig[i].slice_class, want[i].cls);
    }
    cr_assert_eq(a->n_nvml_pids, 1);
    cr_expect_eq(a->nvml_pids[0], 7001);
    expect_files(a, (const char *[]){"/dev/nvidia0"}, 1);
    cr_assert_eq(a->n_holders, 1);
    expect_holder(a, 0, 7001, "vllm", "/dev/nvidia0");
    cr_expect_eq(a->iommu_group, 10);
    cr_expect_null(a->error, "%s", a->error);
    machine_inventory_free(inv);
}

Test(discover, r1_a100_plain_folder_tree_and_old_link_speed_format) {
    MachineInventory *inv = discover("a100-40gb-pcie", true);
    cr_assert_eq(inv->n_accelerators, 1);
    const Accelerator *a = &inv->accelerators[0];
    cr_expect_str_eq(a->bdf, "0000:65:00.0");
    cr_expect_str_eq(a->model, "NVIDIA A100-PCIE-40GB");
    cr_expect_str_eq(accelerator_class_name(a), "nvidia-a100-40gb");
    cr_expect_eq(a->link_speed_mts, 16000); /* "16 GT/s", the pre-5.x format */
    cr_expect_eq(a->max_link_speed_mts, 16000);
    cr_expect_eq(a->mig_current, 0);
    cr_expect_eq(a->mig_pending, 1); /* enabled, waiting for a GPU reset */
    cr_expect_eq(a->memory_total_bytes, 42949672960ull);
    cr_expect_str_eq(a->driver, "nvidia");
    cr_expect_eq(a->iommu_group, 31);
    cr_expect_eq(a->numa_node, 0);
    cr_expect_eq(a->subsystem_device_id, 0x145f);
    cr_expect_null(a->error, "%s", a->error);
    machine_inventory_free(inv);
}

Test(discover, r7_rtx4090_on_vfio_is_reported_from_sysfs_with_its_clean_group) {
    MachineInventory *inv = discover("rtx4090-clean-group", true);
    cr_expect(inv->nvml_loaded);
    cr_expect_str_eq(inv->nvml_status, "NVML answered for 0 GPUs");
    cr_assert_eq(inv->n_accelerators, 2);
    const Accelerator *a = &inv->accelerators[0];
    cr_expect_str_eq(a->bdf, "0000:01:00.0");
    cr_expect_str_eq(a->model, "AD102 [GeForce RTX 4090]");
    cr_expect_null(a->nvml_name); /* on vfio-pci: invisible to NVML */
    cr_expect_str_eq(accelerator_class_name(a), "nvidia-rtx-4090");
    cr_expect(a->consumer);
    cr_expect_str_eq(a->driver, "vfio-pci");
    cr_expect_str_eq(a->driver_override, "vfio-pci");
    cr_expect_eq(a->boot_vga, 0);
    cr_assert_eq(a->n_reset_methods, 1);
    cr_expect_str_eq(a->reset_methods[0], "bus");
    cr_expect_eq(a->iommu_group, 14);
    cr_assert_eq(a->n_group, 1);
    cr_expect_str_eq(a->group[0].bdf, "0000:01:00.1");
    cr_expect_str_eq(a->group[0].kind, "audio");
    cr_expect_eq(a->group[0].vendor_id, 0x10de);
    cr_expect_eq(a->group[0].device_id, 0x22ba);
    cr_expect_eq(a->group[0].class_code, 0x040300);
    cr_expect_str_eq(a->group[0].driver, "vfio-pci");
    cr_expect_eq(a->numa_node, -1);
    cr_expect_eq(a->mig_current, -1);
    cr_expect_null(a->memory_source);
    expect_files(a, (const char *[]){"/dev/vfio/14"}, 1);
    cr_assert_eq(a->n_holders, 1);
    expect_holder(a, 0, 3001, "qemu-system-x86", "/dev/vfio/14");
    cr_expect_null(a->error, "%s", a->error);
    /* the board's AMD APU graphics, boot VGA, not in the catalog: unclassified, kept */
    const Accelerator *apu = &inv->accelerators[1];
    cr_expect_str_eq(apu->bdf, "0000:10:00.0");
    cr_expect_eq(apu->vendor, VENDOR_AMD);
    cr_expect_str_eq(apu->model, "unknown device 1002:164e");
    cr_expect_str_eq(accelerator_class_name(apu), "unclassified");
    cr_expect_eq(apu->memory_total_bytes, 536870912ull);
    cr_expect_eq(apu->memory_used_bytes, 104857600ull);
    cr_expect_eq(apu->gtt_total_bytes, 33554432000ull);
    cr_expect_eq(apu->gtt_used_bytes, 52428800ull);
    cr_expect_eq(apu->boot_vga, 1);
    expect_files(apu, (const char *[]){"/dev/dri/card0", "/dev/dri/renderD128", "/dev/kfd"}, 3);
    machine_inventory_free(inv);
}

Test(discover, r7_rtx5090_dirty_group_lists_bridge_audio_and_board_usb) {
    MachineInventory *inv = discover("rtx5090-dirty-group", true);
    cr_assert_eq(inv->n_accelerators, 1);
    const Accelerator *a = &inv->accelerators[0];
    cr_expect_str_eq(a->model, "NVIDIA GeForce RTX 5090");
    cr_expect_str_eq(a->pci_name, "GB202 [GeForce RTX 5090]");
    cr_expect_str_eq(accelerator_class_name(a), "nvidia-rtx-5090");
    cr_expect(a->consumer);
    cr_expect_eq(a->mig_current, -1);      /* NVML: Not Supported on GeForce */
    cr_expect_eq(a->link_speed_mts, 2500); /* idle link trained down */
    cr_expect_eq(a->max_link_speed_mts, 32000);
    cr_expect_eq(a->boot_vga, 1);
    cr_expect_eq(a->iommu_group, 2);
    cr_assert_eq(a->n_group, 3);
    static const struct {
        const char *bdf, *kind, *driver;
        uint16_t vendor, device;
    } want[] = {
            {"0000:00:01.1", "bridge", "pcieport", 0x1022, 0x14db},
            {"0000:01:00.1", "audio", "snd_hda_intel", 0x10de, 0x22e8},
            {"0000:02:00.0", "usb", "xhci_hcd", 0x1022, 0x43f7},
    };
    for (size_t i = 0; i < 3; i++) {
        cr_expect_str_eq(a->group[i].bdf, want[i].bdf);
        cr_expect_str_eq(a->group[i].kind, want[i].kind);
        cr_expect_str_eq(a->group[i].driver, want[i].driver);
        cr_expect_eq(a->group[i].vendor_id, want[i].vendor);
        cr_expect_eq(a->group[i].device_id, want[i].device);
    }
    expect_files(a, (const char *[]){"/dev/nvidia0", "/dev/dri/card1", "/dev/dri/renderD128"}, 3);
    cr_assert_eq(a->n_holders, 4);
    expect_holder(a, 0, 2210, "Xorg", "/dev/nvidia0");
    expect_holder(a, 1, 2210, "Xorg", "/dev/dri/card1");
    expect_holder(a, 2, 2544, "gnome-shell", "/dev/dri/card1");
    expect_holder(a, 3, 2544, "gnome-shell",
                  "/dev/dri/renderD128"); /* "(deleted)" node still held */
    cr_expect_null(a->error, "%s", a->error);
    machine_inventory_free(inv);
}

Test(discover, r7_iommu_off_is_a_state_not_an_error) {
    MachineInventory *inv = discover("iommu-off", false);
    cr_expect_not(inv->iommu_enabled);
    cr_assert_eq(inv->n_accelerators, 1);
    const Accelerator *a = &inv->accelerators[0];
    cr_expect_str_eq(a->bdf, "0000:ca:00.0");
    cr_expect_str_eq(accelerator_class_name(a), "nvidia-l40s");
    cr_expect_eq(a->iommu_group, -1);
    cr_expect_eq(a->n_group, 0);
    cr_expect_eq(a->numa_node, -1);
    cr_expect_eq(a->nvidia_minor, 3);
    expect_files(a, (const char *[]){"/dev/nvidia3"}, 1);
    cr_expect_null(a->error, "%s", a->error);
    machine_inventory_free(inv);
}

Test(discover, r12_mi300x_memory_product_name_and_rocm_device_files) {
    MachineInventory *inv = discover("amd-mi300x", false);
    cr_expect_eq(inv->cpu.logical_cores, 8);
    cr_assert_eq(inv->n_accelerators, 2);
    for (size_t i = 0; i < 2; i++) {
        const Accelerator *a = &inv->accelerators[i];
        cr_expect_str_eq(a->bdf, i ? "0000:22:00.0" : "0000:0c:00.0");
        cr_expect_eq(a->vendor, VENDOR_AMD);
        cr_expect_eq(a->class_code, 0x120000); /* processing accelerator */
        cr_expect_str_eq(a->model, "AMD Instinct MI300X");
        cr_expect_str_eq(a->pci_name, "Aqua Vanjaram [Instinct MI300X]");
        cr_expect_str_eq(accelerator_class_name(a), "amd-mi300x");
        cr_expect_not(a->consumer);
        cr_expect_eq(a->memory_total_bytes, 206141652992ull);
        cr_expect_eq(a->memory_used_bytes, 293601280ull * (i + 1));
        cr_expect_str_eq(a->memory_source, "amdgpu");
        cr_expect_eq(a->gtt_total_bytes, 1217120169984ull);
        cr_expect_eq(a->numa_node, (int)i);
        cr_expect_str_eq(a->driver, "amdgpu");
        cr_expect_null(a->error, "%s", a->error);
    }
    const Accelerator *a0 = &inv->accelerators[0], *a1 = &inv->accelerators[1];
    expect_files(a0, (const char *[]){"/dev/dri/card1", "/dev/dri/renderD128", "/dev/kfd"}, 3);
    expect_files(a1, (const char *[]){"/dev/dri/card2", "/dev/dri/renderD129", "/dev/kfd"}, 3);
    cr_assert_eq(a0->n_holders, 2);
    expect_holder(a0, 0, 8080, "rocm-smi", "/dev/dri/renderD128");
    expect_holder(a0, 1, 8080, "rocm-smi", "/dev/kfd");
    cr_assert_eq(a1->n_holders, 1); /* /dev/kfd is shared by every AMD GPU */
    expect_holder(a1, 0, 8080, "rocm-smi", "/dev/kfd");
    machine_inventory_free(inv);
}

Test(discover, r12_consumer_amd_card_named_from_pci_ids) {
    MachineInventory *inv = discover("amd-rx7900xtx", false);
    cr_assert_eq(inv->n_accelerators, 1);
    const Accelerator *a = &inv->accelerators[0];
    cr_expect_str_eq(
            a->model,
            "Navi 31 [Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M]"); /* product_name empty */
    cr_expect_str_eq(accelerator_class_name(a), "amd-rx-7900-xtx");
    cr_expect(a->consumer);
    cr_expect_eq(a->memory_total_bytes, 25753026560ull);
    cr_expect_eq(a->memory_used_bytes, 1180946432ull);
    cr_expect_eq(a->gtt_total_bytes, 16777216000ull);
    cr_expect_eq(a->boot_vga, 1);
    cr_assert_eq(a->n_group, 1);
    cr_expect_str_eq(a->group[0].bdf, "0000:03:00.1");
    cr_expect_str_eq(a->group[0].kind, "audio");
    expect_files(a, (const char *[]){"/dev/dri/card0", "/dev/dri/renderD128", "/dev/kfd"}, 3);
    machine_inventory_free(inv);
}

Test(discover, r8_intel_igpu_boot_vga_is_unclassified_never_dropped) {
    MachineInventory *inv = discover("intel-igpu-bootvga", false);
    cr_assert_eq(inv->n_accelerators, 1);
    const Accelerator *a = &inv->accelerators[0];
    cr_expect_str_eq(a->bdf, "0000:00:02.0");
    cr_expect_eq(a->vendor, VENDOR_INTEL);
    cr_expect_str_eq(a->model, "Raptor Lake-S GT1 [UHD Graphics 770]");
    cr_expect_null(a->class_name);
    cr_expect_str_eq(accelerator_class_name(a), "unclassified");
    cr_expect_eq(a->boot_vga, 1);
    cr_expect_eq(a->link_speed_mts, 0); /* "Unknown": integrated, no PCIe link */
    cr_expect_eq(a->link_width, 0);
    cr_expect_null(a->memory_source);
    cr_expect_str_eq(a->driver, "i915");
    expect_files(a, (const char *[]){"/dev/dri/card0", "/dev/dri/renderD128"}, 2);
    cr_expect_null(a->error, "%s", a->error);
    machine_inventory_free(inv);
}

Test(discover, r11_no_accelerator_machine_has_cpu_only) {
    MachineInventory *inv = discover("no-accelerator", false);
    cr_expect_eq(inv->n_accelerators, 0); /* the ASPEED BMC display (1a03) is not an accelerator */
    cr_expect_eq(inv->cpu.logical_cores, 2);
    cr_expect_eq(inv->cpu.memory_bytes, 16384000ull * 1024);
    machine_inventory_free(inv);
}

/* A --sysfs-root that is not there is a typo: reporting "no accelerators" would take every
 * GPU of the node out of the fleet. (A root without a PCI bus stays a machine without one.) */
Test(discover, bad_input_a_sysfs_root_that_does_not_exist_is_an_error_not_an_empty_machine) {
    DiscoverOptions o = {.sysfs_root = "/nonexistent-einsora-sysfs",
                         .proc_root = MACHINES "/no-accelerator/proc",
                         .no_nvml = true,
                         .catalog = cat,
                         .pci_ids = ids};
    MachineInventory *inv = NULL;
    Error err = {0};
    cr_expect_lt(machine_discover(&o, &inv, &err), 0);
    cr_expect_null(inv);
    cr_expect(strstr(err.message, "--sysfs-root /nonexistent-einsora-sysfs"), "%s", err.message);
    machine_inventory_free(inv);
}

/* A scratch copy of fixture machine `name`'s sysfs in dir (mkdtemp'd), whose attribute attr of
 * device bdf is written into *ret_path (the file the devices entry links to). */
static void scratch_sysfs(char *dir, const char *name, const char *bdf, const char *attr,
                          char ret_path[PATH_MAX]) {
    char cmd[512], link[640];
    cr_assert(mkdtemp(dir));
    snprintf(cmd, sizeof(cmd), "cp -a '%s/%s/sys' '%s/sys'", MACHINES, name, dir);
    cr_assert_eq(system(cmd), 0);
    snprintf(link, sizeof(link), "%s/sys/bus/pci/devices/%s/%s", dir, bdf, attr);
    cr_assert(realpath(link, ret_path), "%s", link);
}

static MachineInventory *discover_scratch(const char *dir, const char *name) {
    char sys[300], proc[512];
    snprintf(sys, sizeof(sys), "%s/sys", dir);
    snprintf(proc, sizeof(proc), "%s/%s/proc", MACHINES, name);
    DiscoverOptions o = {
            .sysfs_root = sys, .proc_root = proc, .no_nvml = true, .catalog = cat, .pci_ids = ids};
    MachineInventory *inv = NULL;
    Error err = {0};
    cr_assert_eq(machine_discover(&o, &inv, &err), 0, "%s", err.message);
    char cmd[320];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
    return inv;
}

/* A FIFO where a sysfs attribute should be (a bad root, a planted tree) would block a reader
 * opening it until something writes: a host attribute is read only when it is a regular file,
 * so discovery finishes, with the device's error, instead of hanging the agent. */
Test(discover, bad_input_a_fifo_in_sysfs_is_an_error_not_a_hang, .timeout = 30) {
    char dir[] = "/tmp/einsora-fifo-XXXXXX", target[PATH_MAX];
    scratch_sysfs(dir, "rtx4090-clean-group", "0000:01:00.0", "vendor", target);
    cr_assert_eq(unlink(target), 0);
    cr_assert_eq(mkfifo(target, 0600), 0);
    char *line = NULL;
    cr_expect_eq(read_attr_line(target, &line), -EINVAL, "a FIFO is no attribute");
    machine_inventory_free(discover_scratch(dir, "rtx4090-clean-group"));
}

/* A byte count no GPU could have (2^64 - 1 would read as -1 in JSON's signed integers) and a
 * used amount above the total are the device's errors, not its memory. */
Test(discover, bad_input_amd_memory_counts_out_of_range_are_errors) {
    char dir[] = "/tmp/einsora-amdmem-XXXXXX", total[PATH_MAX], used[PATH_MAX];
    scratch_sysfs(dir, "amd-mi300x", "0000:0c:00.0", "mem_info_vram_total", total);
    cr_assert_eq(write_string_file(total, "18446744073709551615\n"), 0);
    char link[640];
    snprintf(link, sizeof(link), "%s/sys/bus/pci/devices/0000:22:00.0/mem_info_vram_used", dir);
    cr_assert(realpath(link, used));
    cr_assert_eq(write_string_file(used, "206141652993\n"), 0); /* one byte above its total */
    MachineInventory *inv = discover_scratch(dir, "amd-mi300x");
    cr_assert_eq(inv->n_accelerators, 2);
    const Accelerator *a = &inv->accelerators[0], *b = &inv->accelerators[1];
    cr_expect_eq(a->memory_total_bytes, 0);
    cr_expect(a->error && strstr(a->error, "mem_info_vram_total reads '18446744073709551615'"),
              "%s", a->error);
    cr_expect_eq(b->memory_used_bytes, 0);
    cr_expect(b->error && strstr(b->error, "more than mem_info_vram_total"), "%s", b->error);
    machine_inventory_free(inv);
}

/* A driver link that leads to itself (or nowhere) is the device's error, never a driver named
 * after the link ("driver"), and the GPU is still listed (R8). */
Test(discover, bad_input_a_looping_driver_link_is_an_error_not_a_driver_named_driver) {
    char dir[] = "/tmp/einsora-drvloop-XXXXXX", target[PATH_MAX];
    scratch_sysfs(dir, "rtx4090-clean-group", "0000:01:00.0", "vendor", target);
    char link[PATH_MAX];
    snprintf(link, sizeof(link), "%.*s/driver", (int)(strrchr(target, '/') - target), target);
    cr_assert_eq(unlink(link), 0);
    cr_assert_eq(symlink("driver", link), 0);
    MachineInventory *inv = discover_scratch(dir, "rtx4090-clean-group");
    const Accelerator *a = NULL;
    for (size_t i = 0; i < inv->n_accelerators; i++)
        if (STREQ(inv->accelerators[i].bdf, "0000:01:00.0"))
            a = &inv->accelerators[i];
    cr_assert_not_null(a, "the GPU is listed");
    cr_expect(!a->driver || STRNEQ(a->driver, "driver"), "read as a driver named '%s'", a->driver);
    cr_expect(a->error && strstr(a->error, "driver link cannot be read"), "%s",
              a->error ? a->error : "(no error)");
    machine_inventory_free(inv);
}

Test(discover, r8_malformed_sysfs_gives_per_device_errors_not_a_crash_or_a_drop) {
    MachineInventory *inv = discover("malformed-sysfs", false);
    cr_assert_eq(inv->n_accelerators, 2);
    const Accelerator *a = &inv->accelerators[0];
    cr_expect_str_eq(a->bdf, "0000:17:00.0");
    cr_assert_not_null(a->error);
    cr_expect(strstr(a->error, "sysfs class reads 'garbage'"), "%s", a->error);
    cr_expect_str_eq(accelerator_class_name(a), "nvidia-h100-80gb"); /* ids still classify it */
    const Accelerator *b = &inv->accelerators[1];
    cr_assert_not_null(b->error);
    static const char *const problems[] = {"numa_node reads 'node0'",
                                           "current_link_speed reads 'fast'",
                                           "current_link_width reads 'sixteen'",
                                           "driver_override reads 'bad driver'",
                                           "boot_vga reads '2'",
                                           "reset_method reads 'flr BUS!'"};
    for (size_t i = 0; i < sizeof(problems) / sizeof(problems[0]); i++)
        cr_expect(strstr(b->error, problems[i]), "want '%s' in '%s'", problems[i], b->error);
    cr_expect_eq(b->numa_node, -1);
    cr_expect_eq(b->link_speed_mts, 0);
    cr_expect_eq(b->max_link_speed_mts, 16000);
    cr_expect_null(b->driver_override);
    cr_expect_eq(b->boot_vga, -1);
    cr_expect_not(b->has_reset_method);
    machine_inventory_free(inv);
}

Test(discover, r10_mac_fixture_reports_usable_memory_and_tier) {
    DiscoverOptions o = {.sysfs_root = MACHINES "/no-such-sysfs",
                         .proc_root = MACHINES "/no-accelerator/proc",
                         .no_nvml = true,
                         .catalog = cat,
                         .pci_ids = ids,
                         .apple_fixture = MACHINES "/mac-m2-max-64gb.txt"};
    MachineInventory *inv = NULL;
    Error err = {0};
    cr_assert_eq(machine_discover(&o, &inv, &err), 0, "%s", err.message);
    cr_assert_eq(inv->n_accelerators, 1);
    const Accelerator *a = &inv->accelerators[0];
    cr_expect_eq(a->vendor, VENDOR_APPLE);
    cr_expect_str_eq(a->bdf, "");
    cr_expect_str_eq(a->model, "Apple M2 Max GPU");
    cr_expect_str_eq(accelerator_class_name(a), "apple-silicon-64gb");
    cr_expect_eq(a->unified_memory_bytes, 64ull << 30);
    cr_expect_eq(a->wired_limit_bytes, 48ull << 30);
    cr_expect_eq(a->headroom_bytes, 8ull << 30);
    cr_expect_eq(a->memory_total_bytes, 40ull << 30);
    cr_expect_str_eq(a->memory_source, "apple");
    cr_expect(strstr(inv->apple_status, "system default"), "%s", inv->apple_status);
    machine_inventory_free(inv);
    /* the owner's headroom is configurable */
    o.apple_fixture = MACHINES "/mac-m4-16gb-wired.txt";
    o.apple_headroom_gb = 2;
    o.apple_headroom_set = true;
    cr_assert_eq(machine_discover(&o, &inv, &err), 0, "%s", err.message);
    cr_expect_eq(inv->accelerators[0].memory_total_bytes, 10ull << 30);
    cr_expect_str_eq(accelerator_class_name(&inv->accelerators[0]), "apple-silicon-16gb");
    machine_inventory_free(inv);
    /* and may be none: the whole wired limit is offered */
    o.apple_headroom_gb = 0;
    cr_assert_eq(machine_discover(&o, &inv, &err), 0, "%s", err.message);
    cr_expect_eq(inv->accelerators[0].memory_total_bytes, 12ull << 30);
    machine_inventory_free(inv);
}

Test(discover, r10_bad_mac_fixture_is_a_clear_error) {
    char *path = NULL;
    DiscoverOptions o = {.sysfs_root = MACHINES "/no-such-sysfs",
                         .proc_root = MACHINES "/no-accelerator/proc",
                         .no_nvml = true,
                         .catalog = cat,
                         .apple_fixture = MACHINES "/missing-mac.txt"};
    MachineInventory *inv = NULL;
    Error err = {0};
    cr_expect_lt(machine_discover(&o, &inv, &err), 0);
    cr_expect_null(inv);
    cr_expect(strstr(err.message, "cannot read the Mac fixture"), "%s", err.message);
    free(path);
}

/* R7: the agent may read /dev through another folder (--dev-root: an agent in a container
 * with the host's /dev mounted there); its device files are named under that folder, and a
 * process that holds the GPU names it as it sees it, /dev/nvidia0: a holder all the same. */
Test(discover, r7_dev_root_names_device_files_and_holders_still_count) {
    char dev[] = "/tmp/einsora-devroot-XXXXXX";
    cr_assert_not_null(mkdtemp(dev));
    DiscoverOptions o = {.sysfs_root = MACHINES "/hgx-h100-8gpu/sys",
                         .proc_root = MACHINES "/hgx-h100-8gpu/proc",
                         .dev_root = dev,
                         .no_nvml = true,
                         .catalog = cat,
                         .pci_ids = ids};
    MachineInventory *inv = NULL;
    cr_assert_eq(machine_discover(&o, &inv, NULL), 0);
    cr_assert_eq(inv->n_accelerators, 8);
    char file[64];
    snprintf(file, sizeof(file), "%s/nvidia0", dev);
    expect_files(&inv->accelerators[0], (const char *[]){file}, 1);
    /* the fixture's processes opened /dev/nvidia0 */
    size_t held = inv->accelerators[0].n_holders;
    cr_expect_gt(held, 0);
    machine_inventory_free(inv);
    o.dev_root = NULL;
    cr_assert_eq(machine_discover(&o, &inv, NULL), 0);
    cr_expect_eq(inv->accelerators[0].n_holders, held);
    machine_inventory_free(inv);
    o.no_holders = true;
    cr_assert_eq(machine_discover(&o, &inv, NULL), 0);
    cr_expect_eq(inv->accelerators[0].n_holders, 0);
    cr_expect_eq(inv->accelerators[0].n_device_files, 1);
    machine_inventory_free(inv);
    /* A dev root that is not there is a mistake, not a machine whose GPUs nobody holds. */
    o.no_holders = false;
    o.dev_root = "/no/such/dev";
    Error err = {0};
    cr_expect_lt(machine_discover(&o, &inv, &err), 0);
    cr_expect(strstr(err.message, "--dev-root /no/such/dev: no such directory"), "%s", err.message);
    cr_assert_eq(rmdir(dev), 0);
}
