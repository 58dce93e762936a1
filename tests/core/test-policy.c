/* test-policy.c: accelerator kinds (R1, seed table "Accelerators"), capacity (R6), catalog
 * (R8), consumer cards (R9), Apple (R10), CPU (R11), AMD (R12), fallback (R13), runtimes
 * (R14), the invariants (R15, R16) and the queue's fairness. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "core-fixture.h"

#define H100 "nvidia-h100-80gb"
#define H100_1G "nvidia-h100-80gb-mig-1g.10gb"
#define MAC64 "apple-silicon-64gb"

TestSuite(policy, .init = fx_setup, .fini = fx_teardown);

/* ---- R1: every row of the seed's accelerator table ---- */

Test(policy, r1_nvidia_on_linux_containers_and_vms) {
    fx_site("lab", SITE_LAB);
    fx_gpu_node(.name = "box", .site = "lab", .owner = "amy", .cls = "nvidia-rtx-4090", .gpus = 1);
    Decision d = fx_req(.id = "c", .user = "amy", .kind = WORKLOAD_CONTAINER,
                        .class_name = "nvidia-rtx-4090");
    cr_assert_eq(d.placement.method, METHOD_CONTAINER, "%s", d.message);
}

Test(policy, r1_apple_metal_for_native_processes_and_macos_vms) {
    fx_site("home", SITE_SOLO);
    fx_mac("mac", "home", "amy", 64, 48);
    Decision n = fx_req(.id = "n", .user = "amy", .kind = WORKLOAD_NOTEBOOK, .class_name = MAC64);
    Decision v = fx_req(.id = "v", .user = "amy", .kind = WORKLOAD_VM, .guest = GUEST_MACOS,
                        .class_name = MAC64);
    cr_assert_eq(n.placement.method, METHOD_APPLE_WHOLE, "%s", n.message);
    cr_assert_eq(v.placement.method, METHOD_APPLE_WHOLE, "%s", v.message);
    cr_assert_eq(n.placement.container_runtime, CONTAINER_RUNTIME_NONE);
    /* A container on a Mac runs in a Linux VM, which gets no GPU: refused, and as an
     * alternative never taken (it falls to cpu). */
    Decision c = fx_req(.id = "c", .user = "amy", .kind = WORKLOAD_CONTAINER, .class_name = MAC64);
    cr_assert_eq(c.kind, DECISION_REFUSED, "%s", c.message);
    cr_assert_eq(c.reason, SCHED_REASON_LINUX_GUEST_GPU);
    cr_assert(strstr(c.message, "nor do containers"), "%s", c.message);
    const char *fb[] = {MAC64, "cpu"};
    Decision f = fx_req(.id = "f", .user = "amy", .kind = WORKLOAD_CONTAINER,
                        .class_name = "nvidia-rtx-4090", .fallback = fb, .n_fallback = 2,
                        .wait_for_nodes = true);
    cr_assert_neq(f.placement.method, METHOD_APPLE_WHOLE, "%s", f.message);
}

Test(policy, r1_cpu_on_all_platforms) {
    fx_site("home", SITE_SOLO);
    fx_mac("mac", "home", "amy", 16, 12);
    fx_gpu_node(.name = "box", .site = "home", .owner = "amy", .cls = "nvidia-rtx-4090", .gpus = 0);
    Decision a = fx_req(.id = "a", .user = "amy", .kind = WORKLOAD_CONTAINER, .class_name = "cpu",
                        .count = 32);
    Decision b = fx_req(.id = "b", .user = "amy", .kind = WORKLOAD_NOTEBOOK, .class_name = "cpu",
                        .count = 10);
    cr_assert_eq(a.placement.method, METHOD_CPU, "%s", a.message);
    cr_assert_str_eq(a.placement.node, "box");
    cr_assert_str_eq(b.placement.node, "mac", "%s", b.message);
}

Test(policy, r12_amd_goes_to_containers_only) {
    fx_site("lab", SITE_LAB);
    fx_gpu_node(.name = "rocm", .site = "lab", .owner = "amy", .cls = "amd-mi300x", .gpus = 2);
    Decision c = fx_req(.id = "c", .user = "amy", .kind = WORKLOAD_CONTAINER,
                        .class_name = "amd-mi300x");
    Decision v = fx_req(.id = "v", .user = "amy", .kind = WORKLOAD_VM, .class_name = "amd-mi300x");
    cr_assert_eq(c.placement.method, METHOD_CONTAINER, "%s", c.message);
    cr_assert_eq(v.kind, DECISION_REFUSED);
    cr_assert_eq(v.reason, SCHED_REASON_VM_AMD);
}

/* ---- R6 capacity ---- */

static CapacityRow cap(const char *cls, const char *site, CapacityMode m) {
    CapacityRow row;
    Error err = {0};
    cr_assert_eq(sched_capacity_class(fx, cls, site, m, &row, &err), 0, "%s", err.message);
    return row;
}

/* An allocation on a node that went unreachable is kept (R16), and shown as allocated -- in the
 * device's state as in capacity -- not as cordoned; its free GPUs are the cordoned ones. */
Test(policy, r16_a_gpu_allocated_on_an_unreachable_node_shows_allocated) {
    fx_site("dc", SITE_DATACENTER);
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 2);
    Decision d = fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    cr_assert_eq(d.kind, DECISION_PLACED);
    Error err = {0};
    cr_assert_eq(sched_node_set_unreachable(fx, "c1", true, 0, &err), 0, "%s", err.message);
    DeviceInfo used, idle;
    cr_assert_eq(sched_device_info(fx, "c1", d.placement.devices[0], &used), 0);
    cr_assert_eq(sched_device_info(fx, "c1", 1 - d.placement.devices[0], &idle), 0);
    cr_expect_eq(used.state, DEVICE_ALLOCATED);
    cr_expect_eq(idle.state, DEVICE_CORDONED);
    CapacityRow ct = cap(H100, NULL, CAPACITY_CONTAINER);
    cr_expect_eq(ct.allocated, 1);
    cr_expect_eq(ct.cordoned, 1);
}

/* A node whose GPUs had MIG on, switched to vm-passthrough (R4): on vfio-pci a GPU goes whole
 * to a VM (which may use MIG inside), so it counts once under the card's VM row and serves a
 * VM; its slice rows are gone until the node is back in container mode with MIG on. */
Test(policy, r6_a_mig_node_switched_to_passthrough_counts_and_serves_whole_gpus) {
    fx_site("dc", SITE_DATACENTER);
    fx_gpu_node(.name = "m1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 2, .mig_enabled = true);
    fx_gpu_node(.name = "c2", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1);
    const char *slice = "nvidia-h100-80gb-mig-1g.10gb";
    cr_assert_eq(cap(slice, NULL, CAPACITY_CONTAINER).total, 14);
    cr_assert_eq(cap(H100, NULL, CAPACITY_VM).total, 0);
    Error err = {0};
    cr_assert_eq(sched_node_set_mode(fx, "m1", NODE_MODE_VM_PASSTHROUGH, 0, &err), 0, "%s",
                 err.message);
    CapacityRow vm = cap(H100, NULL, CAPACITY_VM);
    cr_expect_eq(vm.total, 2, "both GPUs count for VMs");
    cr_expect_eq(vm.free, 2);
    cr_expect_eq(cap(slice, NULL, CAPACITY_CONTAINER).total, 0, "no slices on vfio-pci");
    Decision d = fx_req(.id = "vm", .user = "ops", .kind = WORKLOAD_VM, .class_name = H100);
    cr_assert_eq(d.kind, DECISION_PLACED, "%s", d.message);
    cr_expect_str_eq(d.placement.node, "m1");
    cr_expect_eq(cap(H100, NULL, CAPACITY_VM).allocated, 1);
    fx_release("vm");
    /* Back in container mode the reported MIG mode holds again: slices, no whole GPU. */
    cr_assert_eq(sched_node_set_mode(fx, "m1", NODE_MODE_CONTAINER, 0, &err), 0, "%s", err.message);
    cr_expect_eq(cap(slice, NULL, CAPACITY_CONTAINER).total, 14);
    cr_expect_eq(cap(H100, NULL, CAPACITY_VM).total, 0);
    cr_expect_eq(cap(H100, NULL, CAPACITY_CONTAINER).total, 1, "only c2's GPU");
}

Test(policy, r6_capacity_counts_vm_nodes_by_vm_device_name_and_container_nodes_by_resource) {
    fx_site("dc", SITE_DATACENTER);
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8);
    fx_gpu_node(.name = "v1", .site = "dc", .owner = "ops", .mode = "vm-passthrough", .cls = H100,
                .gpus = 4);
    fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100, .count = 3);
    CapacityRow vm = cap(H100, NULL, CAPACITY_VM), ct = cap(H100, NULL, CAPACITY_CONTAINER);
    cr_assert_eq(vm.total, 4);
    cr_assert_eq(ct.total, 8);
    cr_assert_eq(ct.allocated, 3);
    cr_assert_eq(ct.free, 5);
    cr_assert_str_eq(ct.resource, "nvidia.com/gpu");
    cr_assert_str_eq(ct.node_selector, "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3");
    cr_assert_str_eq(vm.resource, fx_cat->classes[catalog_find_index(fx_cat, H100)].vm_device_name);

    ResourceCount *rc;
    size_t n;
    Error err = {0};
    cr_assert_eq(sched_node_resources(fx, "v1", &rc, &n, &err), 0);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(rc[0].name, vm.resource);
    cr_assert_eq(rc[0].count, 4);
    free(rc);
}

Test(policy, r6_capacity_per_site_shows_cordoned_and_quarantined) {
    fx_site("dc1", SITE_DATACENTER);
    fx_site("dc2", SITE_DATACENTER);
    fx_gpu_node(.name = "a", .site = "dc1", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 4);
    fx_gpu_node(.name = "b", .site = "dc2", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 2);
    Error err = {0};
    cr_assert_eq(sched_device_set_quarantine(fx, "a", 1, "fell off the bus", 0, &err), 0);
    cr_assert_eq(sched_device_set_cordoned(fx, "a", 2, true, 0, &err), 0);
    CapacityRow one = cap(H100, "dc1", CAPACITY_CONTAINER),
                two = cap(H100, "dc2", CAPACITY_CONTAINER);
    cr_assert_eq(one.total, 4);
    cr_assert_eq(one.quarantined, 1);
    cr_assert_eq(one.cordoned, 1);
    cr_assert_eq(one.free, 2);
    cr_assert_eq(two.total, 2);
    DeviceInfo di;
    sched_device_info(fx, "a", 1, &di);
    cr_assert_eq(di.state, DEVICE_QUARANTINED);
    cr_assert_str_eq(di.quarantine_reason, "fell off the bus");
}

Test(policy, r6_mig_capacity_counts_instances_of_each_profile) {
    fx_site("dc", SITE_DATACENTER);
    fx_gpu_node(.name = "m", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 2, .mig_enabled = true);
    fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G);
    CapacityRow r = cap(H100_1G, NULL, CAPACITY_CONTAINER);
    cr_assert_eq(r.total, 14);
    cr_assert_eq(r.allocated, 1);
    cr_assert_eq(r.free, 13);
    cr_assert_str_eq(r.resource, "nvidia.com/mig-1g.10gb");
}

/* ---- R8 catalog ---- */

Test(policy, r8_unclassified_device_is_shown_never_placed) {
    fx_site("lab", SITE_LAB);
    DeviceSpec devs[1] = {{.class_name = NULL, .address = "0000:65:00.0"}};
    NodeSpec spec = {.name = "box", .site = "lab", .owner = "amy", .devices = devs, .n_devices = 1};
    Error err = {0};
    cr_assert_eq(sched_add_node(fx, &spec, 0, &err), 0, "%s", err.message);
    cr_assert_eq(sched_unclassified_count(fx), 1);
    DeviceInfo di;
    cr_assert_eq(sched_device_info(fx, "box", 0, &di), 0);
    cr_assert_null(di.class_name);
}

/* R8: a GPU with MIG on whose class lists no MIG profiles (or that no class matches) is still
 * registered and shown, with its node: nothing of the node is dropped, and no slice or whole
 * GPU of it is offered (the catalog names no slice of it, and MIG is on). */
Test(policy, r8_a_mig_on_gpu_the_catalog_has_no_profiles_for_is_shown_not_offered) {
    fx_site("lab", SITE_LAB);
    DeviceSpec devs[2] = {
            {.class_name = "nvidia-rtx-4090", .address = "0000:01:00.0", .mig_enabled = true},
            {.class_name = NULL, .address = "0000:02:00.0", .mig_enabled = true}};
    NodeSpec spec = {.name = "box", .site = "lab", .owner = "amy", .devices = devs, .n_devices = 2};
    Error err = {0};
    cr_assert_eq(sched_add_node(fx, &spec, 0, &err), 0, "%s", err.message);
    DeviceInfo di;
    cr_assert_eq(sched_device_info(fx, "box", 0, &di), 0);
    cr_assert_str_eq(di.class_name, "nvidia-rtx-4090");
    cr_assert(di.mig_enabled);
    cr_assert_eq(sched_device_info(fx, "box", 1, &di), 0);
    cr_assert_null(di.class_name);
    Decision d = fx_req(.id = "c", .user = "amy", .kind = WORKLOAD_CONTAINER,
                        .class_name = "nvidia-rtx-4090");
    cr_assert_neq(d.kind, DECISION_PLACED, "%s", d.message);
    /* Counted, as a GPU of its class that takes no work until MIG is off (R6). */
    CapacityRow row;
    cr_assert_eq(sched_capacity_class(fx, "nvidia-rtx-4090", NULL, CAPACITY_CONTAINER, &row, &err),
                 0, "%s", err.message);
    cr_assert_eq(row.total, 1);
    cr_assert_eq(row.free, 0);
    cr_assert_eq(row.cordoned, 1);
}

Test(policy, r8_class_without_devices_has_zero_capacity) {
    CapacityRow *rows;
    size_t n;
    Error err = {0};
    cr_assert_eq(sched_capacity(fx, &rows, &n, &err), 0);
    cr_assert_eq(n, fx_cat->n_classes, "one zero row per class");
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(rows[i].total, 0);
    free(rows);
}

Test(policy, r8_unknown_class_is_refused) {
    Decision d = fx_req(.id = "x", .user = "u", .kind = WORKLOAD_CONTAINER,
                        .class_name = "nvidia-z9000");
    cr_assert_eq(d.kind, DECISION_REFUSED);
    cr_assert_eq(d.reason, SCHED_REASON_UNKNOWN_CLASS);
}

/* ---- R9 consumer cards ---- */

Test(policy, r9_internal_only_class_is_for_trusted_tenants_in_a_datacenter) {
    fx_site("dc", SITE_DATACENTER);
    Error err = {0};
    sched_site_trust(fx, "dc", "staff", true, &err);
    fx_gpu_node(.name = "g", .site = "dc", .owner = "ops", .mode = "vm-passthrough",
                .cls = "nvidia-rtx-4090", .gpus = 2, .kata = true);
    sched_device_reset_result(fx, "g", 0, true, NULL, 0, &err);
    sched_device_reset_result(fx, "g", 1, true, NULL, 0, &err);
    Decision s =
            fx_req(.id = "s", .user = "bob", .kind = WORKLOAD_VM, .class_name = "nvidia-rtx-4090");
    Decision t = fx_req(.id = "t", .user = "staff", .kind = WORKLOAD_VM,
                        .class_name = "nvidia-rtx-4090");
    cr_assert_eq(s.kind, DECISION_REFUSED, "R18: no node would ever take it: %s", s.message);
    cr_assert_eq(s.reason, SCHED_REASON_INTERNAL_ONLY, "%s", s.message);
    cr_assert_eq(t.kind, DECISION_PLACED, "%s", t.message);
}

Test(policy, r9_consumer_cards_are_used_normally_at_home) {
    fx_site("lab", SITE_LAB);
    fx_gpu_node(.name = "box", .site = "lab", .owner = "amy", .cls = "nvidia-rtx-4090", .gpus = 1,
                .binding = BINDING_VFIO, .kata = true);
    Error err = {0};
    sched_device_reset_result(fx, "box", 0, true, NULL, 0, &err);
    Decision d = fx_req(.id = "c", .user = "bob", .kind = WORKLOAD_CONTAINER,
                        .class_name = "nvidia-rtx-4090");
    cr_assert_eq(d.kind, DECISION_PLACED, "a stranger at a lab gets it under Kata: %s", d.message);
    cr_assert_eq(d.placement.container_runtime, CONTAINER_RUNTIME_KATA);
}

Test(policy, r9_consumer_passthrough_waits_for_reset_check_and_rechecks_after_each_vm) {
    fx_site("lab", SITE_LAB);
    fx_gpu_node(.name = "box", .site = "lab", .owner = "amy", .cls = "nvidia-rtx-5090", .gpus = 1,
                .binding = BINDING_VFIO);
    Decision d =
            fx_req(.id = "v", .user = "amy", .kind = WORKLOAD_VM, .class_name = "nvidia-rtx-5090");
    cr_assert_eq(d.reason, SCHED_REASON_RESET_CHECK, "%s", d.message);
    Error err = {0};
    cr_assert_eq(sched_device_reset_result(fx, "box", 0, true, NULL, 0, &err), 0);
    sched_request_decision(fx, "v", &d);
    cr_assert_eq(d.kind, DECISION_PLACED, "%s", d.message);
    fx_release("v");
    DeviceInfo di;
    sched_device_info(fx, "box", 0, &di);
    cr_assert(!di.reset_verified, "checked again after the VM stops");
}

Test(policy, r9_failed_reset_quarantines_with_reason) {
    fx_site("lab", SITE_LAB);
    fx_gpu_node(.name = "box", .site = "lab", .owner = "amy", .cls = "nvidia-rtx-5090", .gpus = 1,
                .binding = BINDING_VFIO);
    Error err = {0};
    cr_assert_eq(sched_device_reset_result(fx, "box", 0, false, "no FLR after stop", 0, &err), 0);
    DeviceInfo di;
    sched_device_info(fx, "box", 0, &di);
    cr_assert_eq(di.state, DEVICE_QUARANTINED);
    cr_assert_str_eq(di.quarantine_reason, "no FLR after stop");
}

/* ---- R10 Apple Silicon ---- */

Test(policy, r10_apple_classes_go_to_the_owner_only) {
    fx_site("lab", SITE_LAB);
    fx_mac("mac", "lab", "amy", 64, 48);
    Decision s = fx_req(.id = "s", .user = "bob", .kind = WORKLOAD_ENDPOINT, .class_name = MAC64);
    cr_assert_eq(s.kind, DECISION_REFUSED, "R18: no node would ever take it: %s", s.message);
    cr_assert_eq(s.reason, SCHED_REASON_OWNER_ONLY, "%s", s.message);
    Decision o = fx_req(.id = "o", .user = "amy", .kind = WORKLOAD_ENDPOINT, .class_name = MAC64);
    cr_assert_eq(o.kind, DECISION_PLACED, "%s", o.message);
}

Test(policy, r10_owner_workloads_share_the_mac_gpu_within_usable_memory) {
    fx_site("home", SITE_SOLO);
    fx_mac("mac", "home", "amy", 64, 48);
    Decision a = fx_req(.id = "a", .user = "amy", .kind = WORKLOAD_ENDPOINT, .class_name = MAC64,
                        .memory_gb = 30);
    Decision b = fx_req(.id = "b", .user = "amy", .kind = WORKLOAD_NOTEBOOK, .class_name = MAC64,
                        .memory_gb = 18);
    Decision c = fx_req(.id = "c", .user = "amy", .kind = WORKLOAD_NOTEBOOK, .class_name = MAC64,
                        .memory_gb = 1);
    cr_assert_eq(a.kind, DECISION_PLACED);
    cr_assert_eq(b.kind, DECISION_PLACED, "%s", b.message);
    cr_assert_eq(c.kind, DECISION_WAITING, "48 GB usable are used up: %s", c.message);
    /* R18: told it is the Mac's memory, which frees as the owner's workloads end. */
    cr_assert(strstr(c.message, "1 GB of GPU memory free"), "%s", c.message);
}

Test(policy, r10_at_most_two_macos_vms_per_mac) {
    fx_site("home", SITE_SOLO);
    fx_mac("mac", "home", "amy", 64, 48);
    cr_assert_eq(fx_req(.id = "1", .user = "amy", .kind = WORKLOAD_VM, .guest = GUEST_MACOS,
                        .class_name = MAC64)
                         .kind,
                 DECISION_PLACED);
    cr_assert_eq(fx_req(.id = "2", .user = "amy", .kind = WORKLOAD_VM, .guest = GUEST_MACOS,
                        .class_name = "cpu")
                         .kind,
                 DECISION_PLACED);
    Decision d = fx_req(.id = "3", .user = "amy", .kind = WORKLOAD_VM, .guest = GUEST_MACOS,
                        .class_name = MAC64);
    cr_assert_eq(d.reason, SCHED_REASON_MACOS_VM_LIMIT, "%s", d.message);
}

/* A macOS guest gets paravirtualized Metal, which is the Mac's one GPU: asking for "cpu" does
 * not make it anyone's but the owner's, or a stranger's VM would share the GPU with the owner's
 * own work (R15). A Linux guest gets no GPU on a Mac, so anyone's may take its cores. */
Test(policy, r10_a_macos_guest_runs_only_on_its_users_own_mac) {
    fx_site("home", SITE_SOLO);
    fx_mac("mac", "home", "amy", 64, 48);
    Decision e = fx_req(.id = "e", .user = "amy", .kind = WORKLOAD_ENDPOINT, .class_name = MAC64);
    cr_assert_eq(e.kind, DECISION_PLACED, "%s", e.message);
    Decision v = fx_req(.id = "v", .user = "bob", .kind = WORKLOAD_VM, .guest = GUEST_MACOS,
                        .class_name = "cpu");
    cr_assert_eq(v.kind, DECISION_REFUSED, "%s", v.message);
    cr_assert_eq(v.reason, SCHED_REASON_OWNER_ONLY, "%s", v.message);
    Decision w = fx_req(.id = "w", .user = "bob", .kind = WORKLOAD_VM, .guest = GUEST_MACOS,
                        .class_name = "cpu", .wait_for_nodes = true);
    cr_assert_eq(w.kind, DECISION_WAITING, "%s", w.message);
    Decision l = fx_req(.id = "l", .user = "bob", .kind = WORKLOAD_VM, .guest = GUEST_LINUX,
                        .class_name = "cpu");
    cr_assert_eq(l.kind, DECISION_PLACED, "%s", l.message);
    Decision o = fx_req(.id = "o", .user = "amy", .kind = WORKLOAD_VM, .guest = GUEST_MACOS,
                        .class_name = "cpu");
    cr_assert_eq(o.kind, DECISION_PLACED, "%s", o.message);
    cr_assert_eq(o.placement.method, METHOD_CPU);
}

Test(policy, r10_linux_guest_on_a_mac_gets_no_gpu_but_cpu_is_fine) {
    fx_site("home", SITE_SOLO);
    fx_mac("mac", "home", "amy", 64, 48);
    Decision g = fx_req(.id = "g", .user = "amy", .kind = WORKLOAD_VM, .guest = GUEST_LINUX,
                        .class_name = MAC64);
    cr_assert_eq(g.kind, DECISION_REFUSED);
    cr_assert_eq(g.reason, SCHED_REASON_LINUX_GUEST_GPU);
    Decision c = fx_req(.id = "c", .user = "amy", .kind = WORKLOAD_VM, .guest = GUEST_LINUX,
                        .class_name = "cpu");
    cr_assert_eq(c.kind, DECISION_PLACED, "%s", c.message);
}

Test(policy, r10_mac_class_is_the_largest_tier_not_above_its_memory) {
    fx_site("home", SITE_SOLO);
    fx_mac("mac", "home", "amy", 36, 27);
    DeviceInfo di;
    cr_assert_eq(sched_device_info(fx, "mac", 0, &di), 0);
    cr_assert_str_eq(di.class_name, "apple-silicon-32gb");
}

/* ---- R11, R14 runtimes ---- */

Test(policy, r14_endpoint_runtime_follows_placement) {
    fx_site("home", SITE_SOLO);
    fx_mac("mac", "home", "amy", 64, 48);
    fx_gpu_node(.name = "box", .site = "home", .owner = "amy", .cls = "nvidia-rtx-4090", .gpus = 1);
    Decision n = fx_req(.id = "n", .user = "amy", .kind = WORKLOAD_ENDPOINT,
                        .class_name = "nvidia-rtx-4090");
    Decision m = fx_req(.id = "m", .user = "amy", .kind = WORKLOAD_ENDPOINT, .class_name = MAC64);
    Decision l = fx_req(.id = "l", .user = "amy", .kind = WORKLOAD_ENDPOINT, .class_name = MAC64,
                        .runtime = ENDPOINT_RUNTIME_LLAMA_CPP);
    Decision c = fx_req(.id = "c", .user = "amy", .kind = WORKLOAD_ENDPOINT, .class_name = "cpu");
    cr_assert_eq(n.placement.endpoint_runtime, ENDPOINT_RUNTIME_VLLM);
    cr_assert_eq(m.placement.endpoint_runtime, ENDPOINT_RUNTIME_MLX);
    cr_assert_eq(l.placement.endpoint_runtime, ENDPOINT_RUNTIME_LLAMA_CPP);
    cr_assert_eq(c.placement.endpoint_runtime, ENDPOINT_RUNTIME_LLAMA_CPP, "R11: %s", c.message);
}

/* The seed: on a Mac MLX serves safetensors weights, llama.cpp (Metal) GGUF ones. */
Test(policy, r14_a_gguf_model_on_a_mac_runs_llama_cpp_not_mlx) {
    fx_site("home", SITE_SOLO);
    fx_mac("mac", "home", "amy", 64, 48);
    Decision g = fx_req(.id = "g", .user = "amy", .kind = WORKLOAD_ENDPOINT, .class_name = MAC64,
                        .memory_gb = 8, .gguf = true);
    cr_assert_eq(g.kind, DECISION_PLACED, "%s", g.message);
    cr_assert_eq(g.placement.endpoint_runtime, ENDPOINT_RUNTIME_LLAMA_CPP, "%s", g.message);
    Decision m = fx_req(.id = "m", .user = "amy", .kind = WORKLOAD_ENDPOINT, .class_name = MAC64,
                        .memory_gb = 8);
    cr_assert_eq(m.placement.endpoint_runtime, ENDPOINT_RUNTIME_MLX, "%s", m.message);
    RequestSpec back;
    cr_assert_eq(sched_request_spec(fx, "g", &back), 0);
    cr_assert(back.gguf, "kept with the request (a restart decides the same)");
}

Test(policy, r14_vllm_is_never_used_on_a_mac) {
    Decision d = fx_req(.id = "v", .user = "amy", .kind = WORKLOAD_ENDPOINT, .class_name = MAC64,
                        .runtime = ENDPOINT_RUNTIME_VLLM);
    cr_assert_eq(d.kind, DECISION_REFUSED);
    cr_assert_eq(d.reason, SCHED_REASON_BAD_RUNTIME);
}

/* ---- R13 fallback ---- */

static const char *const to_cpu[] = {"cpu"};

Test(policy, r13_waits_for_first_choice_then_takes_the_alternative) {
    fx_site("home", SITE_SOLO);
    fx_gpu_node(.name = "box", .site = "home", .owner = "amy", .cls = "nvidia-rtx-4090", .gpus = 1);
    fx_req(.id = "busy", .user = "amy", .kind = WORKLOAD_CONTAINER,
           .class_name = "nvidia-rtx-4090");
    Decision d = fx_submit((RequestSpec){.id = "r",
                                         .user = "amy",
                                         .kind = WORKLOAD_ENDPOINT,
                                         .class_name = "nvidia-rtx-4090",
                                         .fallback = to_cpu,
                                         .n_fallback = 1,
                                         .wait_s = 60},
                           100);
    cr_assert_eq(d.kind, DECISION_WAITING);
    cr_assert_eq(sched_next_deadline(fx), 160);
    cr_assert_eq(sched_tick(fx, 159), 0, "not before the wait ends");
    cr_assert_eq(sched_tick(fx, 160), 1);
    sched_request_decision(fx, "r", &d);
    cr_assert_eq(d.kind, DECISION_PLACED);
    cr_assert_eq(d.reason, SCHED_REASON_FALLBACK);
    cr_assert_eq(d.placement.method, METHOD_CPU);
    cr_assert_eq(d.placement.fallback_index, 0);
    cr_assert_eq(d.placement.endpoint_runtime, ENDPOINT_RUNTIME_LLAMA_CPP);
}

Test(policy, r13_first_choice_wins_when_it_frees_before_the_deadline) {
    fx_site("home", SITE_SOLO);
    fx_gpu_node(.name = "box", .site = "home", .owner = "amy", .cls = "nvidia-rtx-4090", .gpus = 1);
    fx_req(.id = "busy", .user = "amy", .kind = WORKLOAD_CONTAINER,
           .class_name = "nvidia-rtx-4090");
    fx_submit((RequestSpec){.id = "r",
                            .user = "amy",
                            .kind = WORKLOAD_CONTAINER,
                            .class_name = "nvidia-rtx-4090",
                            .fallback = to_cpu,
                            .n_fallback = 1,
                            .wait_s = 60},
              0);
    fx_release("busy");
    Decision d;
    sched_request_decision(fx, "r", &d);
    cr_assert_eq(d.placement.method, METHOD_CONTAINER, "%s", d.message);
    cr_assert_eq(d.placement.fallback_index, -1);
}

Test(policy, r13_on_a_mac_metal_then_cpu) {
    fx_site("home", SITE_SOLO);
    fx_mac("mac", "home", "amy", 64, 48);
    fx_req(.id = "big", .user = "amy", .kind = WORKLOAD_ENDPOINT, .class_name = MAC64,
           .memory_gb = 40);
    Decision d = fx_submit((RequestSpec){.id = "r",
                                         .user = "amy",
                                         .kind = WORKLOAD_ENDPOINT,
                                         .class_name = MAC64,
                                         .memory_gb = 20,
                                         .fallback = to_cpu,
                                         .n_fallback = 1,
                                         .wait_s = 5},
                           0);
    cr_assert_eq(d.kind, DECISION_WAITING);
    sched_tick(fx, 5);
    sched_request_decision(fx, "r", &d);
    cr_assert_eq(d.placement.method, METHOD_CPU, "%s", d.message);
    cr_assert_str_eq(d.placement.node, "mac");
}

/* R13 with R14: the runtime a request names is its first choice's; its alternative runs the one
 * its own placement calls for. A Mac endpoint asked with MLX falls back to CPU under llama.cpp,
 * and a vLLM endpoint on NVIDIA may fall back to CPU: neither is refused for its fallback
 * (R18: a request whose first choice can run is not refused). */
Test(policy, r13_r14_an_explicit_runtime_is_the_first_choices_and_its_fallback_runs_its_own) {
    fx_site("home", SITE_SOLO);
    fx_mac("mac", "home", "amy", 64, 48);
    fx_gpu_node(.name = "box", .site = "home", .owner = "amy", .cls = "nvidia-rtx-4090", .gpus = 1);
    fx_req(.id = "big", .user = "amy", .kind = WORKLOAD_ENDPOINT, .class_name = MAC64,
           .memory_gb = 40);
    Decision d = fx_submit((RequestSpec){.id = "mlx",
                                         .user = "amy",
                                         .kind = WORKLOAD_ENDPOINT,
                                         .class_name = MAC64,
                                         .memory_gb = 20,
                                         .runtime = ENDPOINT_RUNTIME_MLX,
                                         .fallback = to_cpu,
                                         .n_fallback = 1,
                                         .wait_s = 5},
                           0);
    cr_assert_eq(d.kind, DECISION_WAITING, "%s", d.message);
    sched_tick(fx, 5);
    sched_request_decision(fx, "mlx", &d);
    cr_assert_eq(d.placement.method, METHOD_CPU, "%s", d.message);
    cr_assert_eq(d.placement.endpoint_runtime, ENDPOINT_RUNTIME_LLAMA_CPP, "%s", d.message);
    d = fx_submit((RequestSpec){.id = "vllm",
                                .user = "amy",
                                .kind = WORKLOAD_ENDPOINT,
                                .class_name = "nvidia-rtx-4090",
                                .runtime = ENDPOINT_RUNTIME_VLLM,
                                .fallback = to_cpu,
                                .n_fallback = 1,
                                .wait_s = 5},
                  10);
    cr_assert_eq(d.kind, DECISION_PLACED, "%s", d.message);
    cr_assert_eq(d.placement.endpoint_runtime, ENDPOINT_RUNTIME_VLLM);
    /* The first choice itself still must be able to run the runtime named (R14). */
    d = fx_submit((RequestSpec){.id = "bad",
                                .user = "amy",
                                .kind = WORKLOAD_ENDPOINT,
                                .class_name = "cpu",
                                .runtime = ENDPOINT_RUNTIME_VLLM,
                                .fallback = to_cpu,
                                .n_fallback = 1,
                                .wait_s = 5},
                  10);
    cr_assert_eq(d.reason, SCHED_REASON_BAD_RUNTIME, "%s", d.message);
}

Test(policy, r13_fallback_never_lands_on_stranger_slice) {
    fx_site("dc", SITE_DATACENTER);
    /* One MIG GPU with Kata slices (R2c would let strangers share it), one busy whole H200. */
    fx_gpu_node(.name = "m", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1, .kata = true, .mig_in_kata = true, .mig_enabled = true);
    fx_gpu_node(.name = "w", .site = "dc", .owner = "ops", .mode = "vm-passthrough",
                .cls = "nvidia-h200-141gb", .gpus = 1, .kata = true);
    Decision other = fx_req(.id = "other", .user = "carol", .kind = WORKLOAD_ENDPOINT,
                            .class_name = H100_1G);
    cr_assert_eq(other.kind, DECISION_PLACED, "%s", other.message);
    fx_req(.id = "busy", .user = "carol", .kind = WORKLOAD_CONTAINER,
           .class_name = "nvidia-h200-141gb");
    static const char *const to_slice[] = {H100_1G};
    fx_submit((RequestSpec){.id = "r",
                            .user = "bob",
                            .kind = WORKLOAD_ENDPOINT,
                            .class_name = "nvidia-h200-141gb",
                            .fallback = to_slice,
                            .n_fallback = 1,
                            .wait_s = 10},
              0);
    sched_tick(fx, 10);
    Decision d;
    sched_request_decision(fx, "r", &d);
    cr_assert_eq(d.kind, DECISION_WAITING, "never next to carol's slice: %s", d.message);
    /* As a first choice the same slice is fine (R2c). */
    Decision first =
            fx_req(.id = "f", .user = "bob", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G);
    cr_assert_eq(first.kind, DECISION_PLACED, "%s", first.message);
}

/* R13 with R18: a first choice no node could ever run (too large for every node of its class;
 * no node with the class) keeps the wait its user chose, since an alternative can run; what it
 * is told is why the first choice cannot run, not that its units are taken. */
Test(policy, r13_r18_a_first_choice_no_node_could_run_waits_told_the_true_reason) {
    fx_site("home", SITE_SOLO);
    fx_gpu_node(.name = "box", .site = "home", .owner = "amy", .cls = "nvidia-rtx-4090", .gpus = 1);
    Decision d = fx_submit((RequestSpec){.id = "gang",
                                         .user = "amy",
                                         .kind = WORKLOAD_CONTAINER,
                                         .class_name = "nvidia-rtx-4090",
                                         .count = 3,
                                         .fallback = to_cpu,
                                         .n_fallback = 1,
                                         .wait_s = 60},
                           100);
    cr_assert_eq(d.kind, DECISION_WAITING, "%s", d.message);
    cr_assert_eq(d.reason, SCHED_REASON_TOO_LARGE, "not no-capacity: %s", d.message);
    cr_assert_not(d.fallback_open);
    sched_request_decision(fx, "gang", &d);
    cr_assert_eq(d.reason, SCHED_REASON_TOO_LARGE, "found again, still true: %s", d.message);
    cr_assert_eq(sched_tick(fx, 159), 0, "the wait its user chose");
    cr_assert_eq(sched_tick(fx, 160), 1);
    sched_request_decision(fx, "gang", &d);
    cr_assert_eq(d.kind, DECISION_PLACED, "%s", d.message);
    cr_assert_eq(d.placement.method, METHOD_CPU);

    /* Its fallback open but every alternative busy: the sentence says the fallback is open. */
    fx_req(.id = "hold", .user = "amy", .kind = WORKLOAD_CONTAINER,
           .class_name = "nvidia-rtx-4090");
    static const char *const to_4090[] = {"nvidia-rtx-4090"};
    d = fx_submit((RequestSpec){.id = "h100",
                                .user = "amy",
                                .kind = WORKLOAD_CONTAINER,
                                .class_name = H100,
                                .fallback = to_4090,
                                .n_fallback = 1,
                                .wait_s = 10},
                  200);
    cr_assert_eq(d.kind, DECISION_WAITING, "%s", d.message);
    cr_assert_eq(d.reason, SCHED_REASON_NO_NODE, "%s", d.message);
    sched_tick(fx, 210);
    sched_request_decision(fx, "h100", &d);
    cr_assert_eq(d.kind, DECISION_WAITING, "%s", d.message);
    cr_assert(d.fallback_open);
    cr_assert(strstr(d.message, "fallback is open"), "%s", d.message);
    fx_release("hold");
    sched_request_decision(fx, "h100", &d);
    cr_assert_eq(d.kind, DECISION_PLACED, "placed as its alternative frees: %s", d.message);
    cr_assert_eq(d.placement.fallback_index, 0);
}

/* R13, R18: an alternative a rule keeps from ever taking the request (a Mac's GPU is one unit:
 * never a gang of two) is never free, so it is skipped - not a refusal of a request whose
 * first choice, or a later alternative, can run. The placement still counts the list as the
 * user wrote it (fallback_index 1: cpu, after the Mac). */
Test(policy, r13_r18_an_alternative_no_rule_allows_is_skipped_not_a_refusal) {
    static const char *const mac_then_cpu[] = {MAC64, "cpu"};
    fx_site("home", SITE_SOLO);
    fx_gpu_node(.name = "box", .site = "home", .owner = "amy", .cls = "nvidia-rtx-4090", .gpus = 2);
    fx_mac("mac", "home", "amy", 64, 48);
    Decision d = fx_submit((RequestSpec){.id = "now",
                                         .user = "amy",
                                         .kind = WORKLOAD_CONTAINER,
                                         .class_name = "nvidia-rtx-4090",
                                         .count = 2,
                                         .fallback = mac_then_cpu,
                                         .n_fallback = 2,
                                         .wait_s = 5},
                           0);
    cr_assert_eq(d.kind, DECISION_PLACED, "%s", d.message);
    cr_assert_eq(d.placement.fallback_index, -1);
    d = fx_submit((RequestSpec){.id = "later",
                                .user = "amy",
                                .kind = WORKLOAD_CONTAINER,
                                .class_name = "nvidia-rtx-4090",
                                .count = 2,
                                .fallback = mac_then_cpu,
                                .n_fallback = 2,
                                .wait_s = 5},
                  0);
    cr_assert_eq(d.kind, DECISION_WAITING, "%s", d.message);
    sched_tick(fx, 5);
    sched_request_decision(fx, "later", &d);
    cr_assert_eq(d.kind, DECISION_PLACED, "%s", d.message);
    cr_assert_eq(d.placement.method, METHOD_CPU, "the Mac (one unit) was taken for a gang of two");
    cr_assert_eq(d.placement.fallback_index, 1);
    /* A macOS guest asks for a Mac first; its alternatives off a Mac never take it. */
    static const char *const off_mac[] = {"nvidia-rtx-4090", "cpu"};
    d = fx_submit((RequestSpec){.id = "mvm",
                                .user = "amy",
                                .kind = WORKLOAD_VM,
                                .guest = GUEST_MACOS,
                                .class_name = MAC64,
                                .fallback = off_mac,
                                .n_fallback = 2,
                                .wait_s = 5},
                  6);
    cr_assert_eq(d.kind, DECISION_PLACED, "%s", d.message);
    cr_assert_str_eq(d.placement.node, "mac");
}

Test(policy, r13_fallback_to_an_unknown_class_is_refused) {
    static const char *const bad[] = {"nvidia-z9000"};
    Decision d = fx_req(.id = "r", .user = "amy", .kind = WORKLOAD_CONTAINER, .class_name = H100,
                        .fallback = bad, .n_fallback = 1);
    cr_assert_eq(d.kind, DECISION_REFUSED);
    cr_assert(strstr(d.message, "nvidia-z9000"), "%s", d.message);
}

/* ---- R15, R16 ---- */

Test(policy, r15_restore_refuses_a_placement_that_shares_a_gpu_with_a_stranger) {
    fx_site("dc", SITE_DATACENTER);
    fx_gpu_node(.name = "c", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1);
    fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    RequestSpec spec = {.id = "b", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100};
    Placement p = {.node = "c",
                   .class_name = H100,
                   .method = METHOD_CONTAINER,
                   .container_runtime = CONTAINER_RUNTIME_RUNC,
                   .n_devices = 1,
                   .fallback_index = -1};
    Error err = {0};
    cr_assert_eq(sched_restore_placed(fx, &spec, &p, &err), -EBUSY, "%s", err.message);
    cr_assert_eq(sched_request_count(fx), 1, "nothing changed");
}

Test(policy, r16_restore_reapplies_the_exact_placement) {
    fx_site("dc", SITE_DATACENTER);
    fx_gpu_node(.name = "m", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 2, .mig_enabled = true);
    RequestSpec spec = {.id = "s", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G};
    Placement p = {.node = "m",
                   .class_name = H100_1G,
                   .method = METHOD_MIG,
                   .container_runtime = CONTAINER_RUNTIME_RUNC,
                   .endpoint_runtime = ENDPOINT_RUNTIME_VLLM,
                   .n_devices = 1,
                   .devices = {1},
                   .mig_start = 5,
                   .mig_slots = 1,
                   .fallback_index = -1};
    Error err = {0};
    cr_assert_eq(sched_restore_placed(fx, &spec, &p, &err), 0, "%s", err.message);
    Decision d;
    sched_request_decision(fx, "s", &d);
    cr_assert_eq(d.placement.devices[0], 1);
    cr_assert_eq(d.placement.mig_start, 5);
    /* Who the user is to the node is judged as of the placement: bob's runc slice was placed
     * while he was trusted (a trust withdrawn since counts from the next placement on), and a
     * restart must bring back what the server had, not refuse to start (R9, R16). His next
     * request is decided by the rules as they are: a stranger's slice needs mig_in_kata. */
    RequestSpec was_trusted = {
            .id = "x", .user = "bob", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G};
    p.mig_start = 0;
    p.devices[0] = 0; /* a GPU of its own: sharing one with ops is checked as it is (R15) */
    cr_assert_eq(sched_restore_placed(fx, &was_trusted, &p, &err), 0, "%s", err.message);
    Decision next =
            fx_req(.id = "y", .user = "bob", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G);
    cr_assert_neq(next.kind, DECISION_PLACED);
    /* What no trust makes valid is still refused: a slice on a slot another one holds. */
    RequestSpec overlap = {
            .id = "z", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G};
    cr_assert_eq(sched_restore_placed(fx, &overlap, &p, &err), -EBUSY, "%s", err.message);
}

Test(policy, r16_a_request_is_never_placed_twice) {
    fx_site("dc", SITE_DATACENTER);
    fx_gpu_node(.name = "c", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 2);
    fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    Decision d = fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    cr_assert_eq(d.kind, DECISION_REFUSED);
    cr_assert_eq(d.reason, SCHED_REASON_DUPLICATE);
    cr_assert_eq(cap(H100, NULL, CAPACITY_CONTAINER).allocated, 1);
    /* A duplicate says so before anything else wrong with it (its class looked up first). */
    d = fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = "no-such-class");
    cr_assert_eq(d.reason, SCHED_REASON_DUPLICATE);
    cr_assert_str_eq(d.message, "refused (a): a request with this id already exists (R16)");
}

/* ---- queue fairness ---- */

static void count_placed(void *userdata, const char *id, const Decision *d) {
    (*(int *)userdata)++;
    cr_assert_eq(d->kind, DECISION_PLACED, "%s", id);
}

Test(policy, queue_freed_capacity_goes_to_the_oldest_waiter) {
    fx_site("dc", SITE_DATACENTER);
    fx_gpu_node(.name = "c", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1);
    int placed = 0;
    sched_set_on_placed(fx, count_placed, &placed);
    fx_req(.id = "run", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    fx_submit(
            (RequestSpec){
                    .id = "old", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100},
            1);
    fx_submit(
            (RequestSpec){
                    .id = "new", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100},
            2);
    cr_assert_str_eq(sched_waiting_at(fx, 0), "old");
    fx_release("run");
    Decision d;
    sched_request_decision(fx, "old", &d);
    cr_assert_eq(d.kind, DECISION_PLACED);
    sched_request_decision(fx, "new", &d);
    cr_assert_eq(d.queue_position, 1);
    cr_assert_eq(placed, 1);
}

Test(policy, queue_backfill_never_takes_the_node_a_waiting_gang_reserved) {
    fx_site("dc", SITE_DATACENTER);
    fx_gpu_node(.name = "a", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 4);
    fx_gpu_node(.name = "b", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 4);
    Decision x = fx_req(.id = "x", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100,
                        .count = 3);
    Decision y = fx_req(.id = "y", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100,
                        .count = 2);
    cr_assert_str_neq(x.placement.node, y.placement.node, "best fit: y does not fit next to x");
    /* x's node has 1 free, y's node 2: the gang of 4 waits and reserves y's node (nearest). */
    Decision g = fx_req(.id = "gang", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100,
                        .count = 4);
    cr_assert_eq(g.kind, DECISION_WAITING);
    Decision s1 = fx_req(.id = "s1", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    Decision s2 = fx_req(.id = "s2", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    cr_assert_str_eq(s1.placement.node, x.placement.node, "%s", s1.message);
    cr_assert_eq(s2.kind, DECISION_WAITING, "the reserved node is not backfilled: %s", s2.message);
    cr_assert_eq(s2.reason, SCHED_REASON_QUEUED);
    fx_release("y");
    sched_request_decision(fx, "gang", &g);
    cr_assert_eq(g.kind, DECISION_PLACED, "%s", g.message);
    cr_assert_str_eq(g.placement.node, y.placement.node);
}

static Decision decision_of(const char *id) {
    Decision d;
    cr_assert_eq(sched_request_decision(fx, id, &d), 0);
    return d;
}

Test(policy, r12_every_waiting_gang_reserves_a_node_and_only_older_requests_take_it) {
    fx_site("dc", SITE_DATACENTER);
    fx_gpu_node(.name = "a", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 4);
    fx_gpu_node(.name = "b", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 4);
    char id[8];
    for (int i = 0; i < 8; i++) { /* both nodes full of one-GPU work */
        snprintf(id, sizeof(id), "f%d", i);
        cr_assert_eq(fx_req(.id = id, .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100)
                             .kind,
                     DECISION_PLACED);
    }
    const char *a = decision_of("f0").placement.node;
    cr_assert_str_eq(decision_of("f3").placement.node, a, "best fit fills one node first");
    /* An older one-GPU request, two gangs (each reserves a full node of its own), a younger one. */
    cr_assert_eq(
            fx_req(.id = "old", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100).kind,
            DECISION_WAITING);
    cr_assert_eq(fx_req(.id = "g1", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100,
                        .count = 4)
                         .kind,
                 DECISION_WAITING);
    cr_assert_eq(fx_req(.id = "g2", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100,
                        .count = 4)
                         .kind,
                 DECISION_WAITING);
    cr_assert_eq(
            fx_req(.id = "young", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100)
                    .kind,
            DECISION_WAITING);
    fx_release("f0"); /* node a: the older request takes it, reserved or not */
    cr_assert_eq(decision_of("old").kind, DECISION_PLACED,
                 "a request older than the gangs is held back");
    fx_release("f4"); /* node b: reserved by an older gang too, so the younger one waits */
    cr_assert_eq(decision_of("young").kind, DECISION_WAITING,
                 "a younger request took a gang's reserved node");
    fx_release("f5"), fx_release("f6"),
            fx_release("f7"); /* b is empty: the oldest gang runs there */
    Decision g1 = decision_of("g1");
    cr_assert_eq(g1.kind, DECISION_PLACED, "%s", g1.message);
    cr_assert_str_neq(g1.placement.node, a);
    cr_assert_eq(decision_of("g2").kind, DECISION_WAITING);
    /* g2 keeps b, where it runs as soon as g1 ends (the node stays with the gangs); a is no
     * gang's any more, so the younger request takes its next free GPU. */
    fx_release("f1");
    cr_assert_eq(decision_of("young").kind, DECISION_PLACED,
                 "a node no gang reserved stays closed");
    cr_assert_str_eq(decision_of("young").placement.node, a);
    fx_release("g1");
    Decision g2 = decision_of("g2");
    cr_assert_eq(g2.kind, DECISION_PLACED, "%s", g2.message);
    cr_assert_str_eq(g2.placement.node, g1.placement.node);
}

Test(policy, names_round_trip_for_every_enum) {
    for (int i = 0; i < _SCHED_REASON_MAX; i++)
        cr_assert_eq(sched_reason_from_string(sched_reason_to_string((SchedReason)i)), i);
    for (int i = 0; i < _METHOD_MAX; i++)
        cr_assert_eq(method_from_string(method_to_string((Method)i)), i);
    for (int i = 0; i < _WORKLOAD_KIND_MAX; i++)
        cr_assert_eq(workload_kind_from_string(workload_kind_to_string((WorkloadKind)i)), i);
    cr_assert_eq(endpoint_runtime_from_string("llama.cpp"), ENDPOINT_RUNTIME_LLAMA_CPP);
    cr_assert_eq(node_mode_from_string("vm-passthrough"), NODE_MODE_VM_PASSTHROUGH);
    cr_assert_eq(device_state_from_string("quarantined"), DEVICE_QUARANTINED);
    cr_assert_eq(site_kind_from_string("nope"), _SITE_KIND_INVALID);
}
