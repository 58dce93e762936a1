/* test-nvml.c: NVML through the fake library: every way NVML can be absent or fail leaves
 * the sysfs inventory intact and says why (R1). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../fake-nvml/nvml-fixture.h"
#include "../helpers.h"
#include "agent/discover.h"
#include "agent/nvml-mig.h"
#include "agent/nvml.h"
#include "util/strutil.h"
#include "util/fileio.h"

#define RTX5090 MACHINES "/rtx5090-dirty-group"

/* Discover fixture machine dir with the fake NVML library lib answering from fixture_text. */
static MachineInventory *discover_on(const char *dir, const char *lib, const char *fixture_text) {
    char *path = write_temp_file(fixture_text);
    setenv("EINSORA_FAKE_NVML", path, 1);
    char sys[512], proc[512];
    snprintf(sys, sizeof(sys), "%s/sys", dir);
    snprintf(proc, sizeof(proc), "%s/proc", dir);
    DiscoverOptions o = {.sysfs_root = sys, .proc_root = proc, .nvml_lib = lib};
    MachineInventory *inv = NULL;
    Error err = {0};
    cr_assert_eq(machine_discover(&o, &inv, &err), 0, "%s", err.message);
    unlink(path);
    free(path);
    cr_assert_eq(inv->n_accelerators, 1, "sysfs still reports the GPU");
    return inv;
}

static MachineInventory *discover_5090(const char *lib, const char *fixture_text) {
    return discover_on(RTX5090, lib, fixture_text);
}

static const char gpu_5090[] = "gpu 00000000:01:00.0 0x2B8510DE\nname NVIDIA GeForce RTX 5090\n"
                               "uuid GPU-1\nmemory 34190917632 0\nminor 0\n";

Test(nvml, r1_init_failure_keeps_sysfs_and_says_why) {
    MachineInventory *inv = discover_5090(FAKE_NVML_LIB, "init 9\n");
    cr_expect_not(inv->nvml_loaded);
    cr_expect_str_eq(inv->nvml_status,
                     "NVML data is absent: nvmlInit_v2 failed: Driver Not Loaded (NVML error 9)");
    cr_expect_null(inv->accelerators[0].nvml_name);
    cr_expect_str_eq(inv->accelerators[0].driver, "nvidia");
    cr_expect_eq(inv->accelerators[0].nvidia_minor, 0); /* from /proc/driver/nvidia */
    machine_inventory_free(inv);
    inv = discover_5090(FAKE_NVML_LIB, "init 18\n");
    cr_expect(strstr(inv->nvml_status, "version mismatch"), "%s", inv->nvml_status);
    machine_inventory_free(inv);
}

Test(nvml, r1_missing_library_says_so) {
    MachineInventory *inv = discover_5090("/nonexistent/libnvidia-ml.so.1", gpu_5090);
    cr_expect_not(inv->nvml_loaded);
    cr_expect(strstr(inv->nvml_status, "could not be loaded"), "%s", inv->nvml_status);
    cr_expect(strstr(inv->nvml_status, "/nonexistent/libnvidia-ml.so.1"), "%s", inv->nvml_status);
    machine_inventory_free(inv);
}

Test(nvml, r1_old_library_without_v2_symbols_is_named) {
    MachineInventory *inv = discover_5090(FAKE_NVML_OLD_LIB, gpu_5090);
    cr_expect_not(inv->nvml_loaded);
    cr_expect(strstr(inv->nvml_status, "is too old (it lacks nvmlInit_v2)"), "%s",
              inv->nvml_status);
    cr_expect_null(inv->accelerators[0].nvml_name);
    machine_inventory_free(inv);
}

Test(nvml, r1_per_gpu_query_failures_are_reported_on_the_gpu) {
    char text[512];
    snprintf(text, sizeof(text),
             "%sfail nvmlDeviceGetMemoryInfo_v2 15\nfail nvmlDeviceGetMemoryInfo 15\n"
             "fail nvmlDeviceGetUUID 4\n",
             gpu_5090);
    MachineInventory *inv = discover_5090(FAKE_NVML_LIB, text);
    const Accelerator *a = &inv->accelerators[0];
    cr_expect(inv->nvml_loaded);
    cr_expect_str_eq(a->nvml_name, "NVIDIA GeForce RTX 5090");
    cr_expect_null(a->uuid);
    cr_expect_null(a->memory_source);
    cr_assert_not_null(a->error);
    cr_expect(strstr(a->error, "nvmlDeviceGetUUID failed: Insufficient Permissions."), "%s",
              a->error);
    cr_expect(strstr(a->error, "nvmlDeviceGetMemoryInfo failed: GPU is lost."), "%s", a->error);
    machine_inventory_free(inv);
}

Test(nvml, r1_memory_falls_back_to_v1_and_count_failure_is_global) {
    char text[512];
    snprintf(text, sizeof(text), "%sfail nvmlDeviceGetMemoryInfo_v2 3\n", gpu_5090);
    MachineInventory *inv = discover_5090(FAKE_NVML_LIB, text);
    cr_expect_eq(inv->accelerators[0].memory_total_bytes, 34190917632ull);
    cr_expect_str_eq(inv->accelerators[0].memory_source, "nvml");
    cr_expect_null(inv->accelerators[0].error, "%s", inv->accelerators[0].error);
    machine_inventory_free(inv);
    inv = discover_5090(FAKE_NVML_LIB, "fail nvmlDeviceGetCount_v2 999\n");
    cr_expect_str_eq(inv->nvml_status,
                     "NVML data is absent: nvmlDeviceGetCount_v2 failed: Unknown Error");
    machine_inventory_free(inv);
}

/* The driver's name for a GPU reaches a terminal and JSON: its control bytes (an escape
 * sequence would run in the operator's terminal) and invalid UTF-8 (JSON would drop the whole
 * name) become '?', the rest stays. */
Test(nvml, bad_input_a_gpu_name_with_control_bytes_or_bad_utf8_is_made_safe) {
    MachineInventory *inv =
            discover_5090(FAKE_NVML_LIB, "gpu 00000000:01:00.0 0x2B8510DE\n"
                                         "name RTX \xff\x1b]0;pwned\x07 5090\n"
                                         "uuid GPU-1\nmemory 34190917632 0\nminor 0\n");
    const char *name = inv->accelerators[0].nvml_name;
    cr_assert(name);
    cr_expect_str_eq(name, "RTX ??]0;pwned? 5090");
    machine_inventory_free(inv);
}

/* The driver's "Device Minor" is what bind checks holders against (R7): an NVML minor that
 * disagrees is said, and the driver's number kept, so discovery and bind see the same file. */
Test(nvml, r7_an_nvml_minor_the_driver_contradicts_is_said_and_the_drivers_kept) {
    MachineInventory *inv =
            discover_5090(FAKE_NVML_LIB, "gpu 00000000:01:00.0 0x2B8510DE\n"
                                         "name NVIDIA GeForce RTX 5090\n"
                                         "uuid GPU-1\nmemory 34190917632 0\nminor 5\n");
    const Accelerator *a = &inv->accelerators[0];
    cr_expect_eq(a->nvidia_minor, 0);
    cr_expect(a->error && strstr(a->error, "NVML says minor 5, the driver's information file 0"),
              "%s", a->error);
    machine_inventory_free(inv);
}

Test(nvml, r1_gpu_only_nvml_knows_is_reported_with_a_note) {
    char text[512];
    snprintf(text, sizeof(text),
             "%sgpu 00000000:C1:00.0 0x2B8510DE\nname NVIDIA GeForce RTX 5090\n", gpu_5090);
    char *path = write_temp_file(text);
    setenv("EINSORA_FAKE_NVML", path, 1);
    DiscoverOptions o = {
            .sysfs_root = RTX5090 "/sys", .proc_root = RTX5090 "/proc", .nvml_lib = FAKE_NVML_LIB};
    MachineInventory *inv = NULL;
    cr_assert_eq(machine_discover(&o, &inv, NULL), 0);
    cr_assert_eq(inv->n_accelerators, 2);
    cr_expect_str_eq(inv->accelerators[1].bdf, "0000:c1:00.0");
    cr_expect(strstr(inv->accelerators[1].error, "does not list it"), "%s",
              inv->accelerators[1].error);
    machine_inventory_free(inv);
    unlink(path);
    free(path);
}

Test(nvml_fixture, malformed_fixture_lines_name_the_line) {
    FakeNvml *f = malloc(sizeof(*f));
    char msg[128];
    cr_expect_eq(fake_nvml_parse("init 0\nname x\n", 14, f, msg, sizeof(msg)), -22);
    cr_expect_str_eq(msg, "line 2: 'name' before any gpu line");
    const char *t = "gpu 00000000:01:00.0 0x2B8510DE\nmemory 5 9\n";
    cr_expect_eq(fake_nvml_parse(t, strlen(t), f, msg, sizeof(msg)), -22);
    cr_expect(strstr(msg, "line 2: memory needs"), "%s", msg);
    t = "gpu 00000000:01:00.0 0x2B8510DE\nmig 1 0\nprofile 0 19 1 7 16384 MIG 1g.18gb\ninstance 1 "
        "19 0 1\n";
    cr_expect_eq(fake_nvml_parse(t, strlen(t), f, msg, sizeof(msg)), 0);
    cr_expect_eq(f->n_gpus, 1);
    cr_expect_str_eq(f->gpus[0].profiles[0].name, "MIG 1g.18gb");
    cr_expect_eq(f->gpus[0].n_instances, 1);
    free(f);
}

Test(nvml, r1_gpu_nvml_cannot_open_is_named_in_the_status) {
    char text[512];
    snprintf(text, sizeof(text), "%sfail nvmlDeviceGetHandleByIndex_v2 15\n", gpu_5090);
    MachineInventory *inv = discover_5090(FAKE_NVML_LIB, text);
    cr_expect(inv->nvml_loaded);
    cr_expect_str_eq(inv->nvml_status, "NVML answered for 1 GPU; GPU index 0: "
                                       "nvmlDeviceGetHandleByIndex_v2 failed: GPU is lost.");
    cr_expect_null(inv->accelerators[0].nvml_name); /* sysfs still reports it */
    machine_inventory_free(inv);
}

Test(nvml, r2c_mig_instances_unreadable_without_permission_say_so_once) {
    const char *text = "gpu 00000000:4E:00.0 0x233510DE\nname NVIDIA H200\nmig 1 1\n"
                       "profile 0 19 1 7 16384 MIG 1g.18gb\nprofile 2 9 3 2 71424 MIG 3g.71gb\n"
                       "instance 2 9 0 4\nfail nvmlDeviceGetGpuInstances 4\n";
    MachineInventory *inv = discover_on(MACHINES "/h200-mig", FAKE_NVML_LIB, text);
    const Accelerator *a = &inv->accelerators[0];
    cr_expect_eq(a->mig_current, 1);
    cr_expect_eq(a->n_mig, 0);
    cr_assert_not_null(a->error);
    const char *sentence = "nvmlDeviceGetGpuInstances failed: Insufficient Permissions.";
    const char *first = strstr(a->error, sentence);
    cr_expect_not_null(first, "%s", a->error);
    cr_expect_null(first ? strstr(first + 1, sentence) : NULL, "said twice: %s", a->error);
    machine_inventory_free(inv);
}

Test(nvml, r2c_profile_names_derived_when_the_library_has_no_names) {
    /* nvmlDeviceGetGpuInstanceProfileInfoV refusing our struct version (an older library):
     * the unnamed call gives the fields and the name is derived from slices and memory. */
    const char *text =
            "gpu 00000000:4E:00.0 0x233510DE\nname NVIDIA H200\nmig 1 1\n"
            "profile 0 19 1 7 17920 MIG 1g.18gb\nprofile 2 9 3 2 72192 MIG 3g.71gb\n"
            "instance 9 19 3 1\ninstance 2 9 4 4\nfail nvmlDeviceGetGpuInstanceProfileInfoV 25\n";
    MachineInventory *inv = discover_on(MACHINES "/h200-mig", FAKE_NVML_LIB, text);
    const Accelerator *a = &inv->accelerators[0];
    cr_assert_eq(a->n_mig, 2);
    cr_expect_str_eq(a->mig[0].profile, "1g.18gb");
    cr_expect_eq(a->mig[0].start, 3);
    cr_expect_null(a->mig[0].slice_class); /* no catalog given here */
    cr_expect_str_eq(a->mig[1].profile, "3g.71gb");
    cr_expect_null(a->error, "%s", a->error);
    machine_inventory_free(inv);
}

/* The H200 of the h200-mig fixture: a 3g.71gb at slot 0 a process (pid 7001) works in, an idle
 * 2g.35gb at slot 4 and an idle 1g.18gb at slot 6, as nvml_probe reports them. */
static NvmlGpu *h200(NvmlReport **rep) {
    Error err = {0};
    cr_assert_eq(nvml_probe(FAKE_NVML_LIB, rep, &err), 0, "%s", err.message);
    cr_assert_eq((*rep)->n_gpus, 1);
    return &(*rep)->gpus[0];
}

static bool has_instance(const NvmlGpu *g, const char *profile, unsigned start) {
    for (size_t i = 0; i < g->n_mig; i++)
        if (!strcmp(g->mig[i].profile, profile) && g->mig[i].start == start)
            return true;
    return false;
}

/* R2c, R15, R17: a slice's workload gets its own MIG device. The agent makes the placement's
 * instance through NVML: the one already on those slots is taken as it is; an idle one in the
 * way is removed first; one a process works in is never touched; a removal leaves the slots
 * free. Busy instances are reported so (the control plane never offers their slots). */
Test(nvml, r2c_a_slices_mig_instance_is_made_on_its_slots_and_removed_after) {
    setenv("EINSORA_FAKE_NVML", MACHINES "/h200-mig/nvml.txt", 1);
    char *state = write_temp_file("");
    setenv("EINSORA_FAKE_NVML_STATE", state, 1);
    const char *gpu = "GPU-a4f1c2d3-1111-4e5f-8a9b-0123456789ab";
    NvmlReport *rep = NULL;
    NvmlGpu *g = h200(&rep);
    cr_expect(g->mig[0].busy && !g->mig[1].busy && !g->mig[2].busy, "pid 7001 works in slot 0's");
    nvml_report_free(rep);
    char a[96], b[96];
    Error err = {0};
    /* The 1g.18gb at slot 6 is there already: its MIG device. */
    cr_assert_eq(
            nvml_mig_make(FAKE_NVML_LIB, gpu, "1g.18gb", 6, 1, false, a, sizeof(a), NULL, &err), 0,
            "%s", err.message);
    cr_expect(!strncmp(a, "MIG-", 4), "%s", a);
    /* A 1g.18gb at slot 4: the idle 2g.35gb there goes, a new instance comes. */
    cr_assert_eq(
            nvml_mig_make(FAKE_NVML_LIB, gpu, "1g.18gb", 4, 1, false, b, sizeof(b), NULL, &err), 0,
            "%s", err.message);
    cr_expect(strcmp(a, b) != 0, "two slices, two MIG devices: %s %s", a, b);
    g = h200(&rep);
    cr_expect(has_instance(g, "1g.18gb", 4) && !has_instance(g, "2g.35gb", 4));
    nvml_report_free(rep);
    /* Slot 0's instance has a process: never taken, never removed. */
    cr_expect_eq(
            nvml_mig_make(FAKE_NVML_LIB, gpu, "1g.18gb", 1, 1, false, a, sizeof(a), NULL, &err),
            -EBUSY);
    cr_expect(strstr(err.message, "a process works in"), "%s", err.message);
    Error e2 = {0};
    cr_expect_eq(nvml_mig_remove(FAKE_NVML_LIB, gpu, 0, &e2), -EBUSY);
    /* Removed after its workload: the slot is free again. */
    cr_assert_eq(nvml_mig_remove(FAKE_NVML_LIB, gpu, 4, &err), 0, "%s", err.message);
    g = h200(&rep);
    cr_expect(!has_instance(g, "1g.18gb", 4) && has_instance(g, "3g.71gb", 0));
    nvml_report_free(rep);
    /* A profile the card lacks, slots off the GPU: said, nothing made. */
    Error e3 = {0};
    cr_expect_lt(nvml_mig_make(FAKE_NVML_LIB, gpu, "1g.10gb", 4, 1, false, a, sizeof(a), NULL, &e3),
                 0);
    cr_expect(strstr(e3.message, "no MIG profile 1g.10gb"), "%s", e3.message);
    cr_expect_lt(
            nvml_mig_make(FAKE_NVML_LIB, gpu, "1g.18gb", 7, 2, false, a, sizeof(a), NULL, &err), 0);
    /* The instance a process works in is never handed to another slice, even of its very
     * profile and slots; only to the workload whose own it is (a start again). */
    bool made = true;
    Error e4 = {0};
    cr_expect_eq(nvml_mig_make(FAKE_NVML_LIB, gpu, "3g.71gb", 0, 4, false, a, sizeof(a), NULL, &e4),
                 -EBUSY, "%s", e4.message);
    cr_expect_eq(
            nvml_mig_make(FAKE_NVML_LIB, gpu, "3g.71gb", 0, 4, true, a, sizeof(a), &made, &err), 0,
            "%s", err.message);
    cr_expect(!made, "taken as it was");
    unsetenv("EINSORA_FAKE_NVML_STATE");
    unlink(state);
    free(state);
}

/* An instance made for a slice whose compute instance NVML then refuses is not left behind,
 * unrecorded: the GPU is as it was (but for the idle instance that was in the way). */
Test(nvml, r2c_a_mig_instance_half_made_is_removed_again) {
    char *text = NULL;
    cr_assert_geq(read_full_file(MACHINES "/h200-mig/nvml.txt", 1 << 16, &text, NULL), 0);
    char *fixture = strprintf("fail nvmlGpuInstanceCreateComputeInstance 23\n%s", text);
    char *path = write_temp_file(fixture), *state = write_temp_file("");
    setenv("EINSORA_FAKE_NVML", path, 1);
    setenv("EINSORA_FAKE_NVML_STATE", state, 1);
    char a[96];
    Error err = {0};
    cr_expect_lt(nvml_mig_make(FAKE_NVML_LIB, "GPU-a4f1c2d3-1111-4e5f-8a9b-0123456789ab", "1g.18gb",
                               5, 1, false, a, sizeof(a), NULL, &err),
                 0);
    cr_expect(strstr(err.message, "compute instance"), "%s", err.message);
    NvmlReport *rep = NULL;
    NvmlGpu *g = h200(&rep);
    cr_expect(!has_instance(g, "1g.18gb", 5), "the half-made instance is gone");
    nvml_report_free(rep);
    unsetenv("EINSORA_FAKE_NVML_STATE");
    unlink(path), unlink(state);
    free(path), free(state), free(fixture), free(text);
}
