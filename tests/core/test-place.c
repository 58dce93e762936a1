/* test-place.c: how a GPU reaches a workload (R2 a-e, seed "NVIDIA: the options"), node modes
 * (R3, R4, R5), per-GPU modes in a lab (R7) and packing. */
#include <errno.h>
#include <stdio.h>

#include "core-fixture.h"

#define H100 "nvidia-h100-80gb"
#define H100_1G "nvidia-h100-80gb-mig-1g.10gb"
#define H100_3G "nvidia-h100-80gb-mig-3g.40gb"
#define H100_7G "nvidia-h100-80gb-mig-7g.80gb"
#define H200 "nvidia-h200-141gb"
#define H200_3G "nvidia-h200-141gb-mig-3g.71gb"
#define H200_4G "nvidia-h200-141gb-mig-4g.71gb"

/* What NVML offers on an H200 that has no 4g.71gb (R2c: "as NVML reports"). */
static const char *const h200_no_4g[] = {"1g.18gb", "1g.35gb",  "2g.35gb",
                                         "3g.71gb", "7g.141gb", NULL};

TestSuite(place, .init = fx_setup, .fini = fx_teardown);

static void dc(void) {
    fx_site("dc", SITE_DATACENTER);
}

/* ---- R2a passthrough ---- */

Test(place, r2a_vm_gets_whole_gpu_by_passthrough) {
    dc();
    fx_gpu_node(.name = "vm1", .site = "dc", .owner = "ops", .mode = "vm-passthrough", .cls = H100,
                .gpus = 8, .kata = true);
    Decision d = fx_req(.id = "v", .user = "alice", .kind = WORKLOAD_VM, .class_name = H100);
    cr_assert_eq(d.kind, DECISION_PLACED, "%s", d.message);
    cr_assert_eq(d.placement.method, METHOD_PASSTHROUGH);
    cr_assert_eq(d.placement.container_runtime, CONTAINER_RUNTIME_NONE);
    cr_assert_str_eq(d.placement.node, "vm1");
}

Test(place, request_placement_matches_the_decision_without_a_sentence) {
    dc();
    fx_gpu_node(.name = "vm1", .site = "dc", .owner = "ops", .mode = "vm-passthrough", .cls = H100,
                .gpus = 2, .kata = true);
    Decision d =
            fx_req(.id = "v", .user = "alice", .kind = WORKLOAD_VM, .class_name = H100, .count = 2);
    cr_assert_eq(d.kind, DECISION_PLACED, "%s", d.message);
    Placement p;
    cr_assert_eq(sched_request_placement(fx, "v", &p), 0);
    cr_assert_str_eq(p.node, "vm1");
    cr_assert_eq(p.method, d.placement.method);
    cr_assert_eq(p.n_devices, 2);
    cr_assert_eq(p.devices[0], d.placement.devices[0]);
    cr_assert_eq(p.devices[1], d.placement.devices[1]);
    Decision w = fx_req(.id = "w", .user = "alice", .kind = WORKLOAD_VM, .class_name = H100);
    cr_assert_eq(w.kind, DECISION_WAITING, "%s", w.message);
    cr_assert_eq(sched_request_placement(fx, "w", &p), -EAGAIN);
    cr_assert_eq(sched_request_placement(fx, "nope", &p), -ENOENT);
}

/* The core keeps short node names inside the node as well as on the heap: a placement and
 * its sentence name the node whole on either side of that bound. */
Test(place, r2a_placement_names_its_node_whole_at_any_name_length) {
    dc();
    static const char *const names[] = {
            "n", "node-31-chars-xxxxxxxxxxxxxxxxx", "node-32-chars-xxxxxxxxxxxxxxxxxx",
            "node-a-long-host-name-of-the-datacenter-rack-17.gpu.example.internal"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        fx_gpu_node(.name = names[i], .site = "dc", .owner = "ops", .mode = "vm-passthrough",
                    .cls = H100, .gpus = 1, .kata = true);
        char id[16];
        snprintf(id, sizeof(id), "v%zu", i);
        Decision d = fx_req(.id = id, .user = "alice", .kind = WORKLOAD_VM, .class_name = H100);
        cr_assert_eq(d.kind, DECISION_PLACED, "%s", d.message);
        cr_assert_str_eq(d.placement.node, names[i]);
        char want[256];
        snprintf(want, sizeof(want), "placed on %s: 1 GPU, " H100 " by passthrough", names[i]);
        cr_assert_str_eq(d.message, want);
        Placement p;
        cr_assert_eq(sched_request_placement(fx, id, &p), 0);
        cr_assert_str_eq(p.node, names[i]);
    }
}

Test(place, r2a_vm_on_container_node_waits_for_mode) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8, .kata = true);
    Decision d = fx_req(.id = "v", .user = "ops", .kind = WORKLOAD_VM, .class_name = H100);
    cr_assert_eq(d.kind, DECISION_WAITING);
    cr_assert_eq(d.reason, SCHED_REASON_MODE_MISMATCH, "%s", d.message);
    cr_assert_eq(d.queue_position, 1);
}

/* ---- R2b whole GPU to a container ---- */

Test(place, r2b_owner_container_runs_under_runc_on_host_gpu) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8, .kata = true);
    Decision d = fx_req(.id = "c", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    cr_assert_eq(d.kind, DECISION_PLACED, "%s", d.message);
    cr_assert_eq(d.placement.method, METHOD_CONTAINER);
    cr_assert_eq(d.placement.container_runtime, CONTAINER_RUNTIME_RUNC);
}

Test(place, r2b_trusted_tenant_container_runs_under_runc) {
    dc();
    Error err = {0};
    cr_assert_eq(sched_site_trust(fx, "dc", "staff", true, &err), 0);
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8);
    Decision d = fx_req(.id = "c", .user = "staff", .kind = WORKLOAD_NOTEBOOK, .class_name = H100);
    cr_assert_eq(d.kind, DECISION_PLACED, "%s", d.message);
    cr_assert_eq(d.placement.container_runtime, CONTAINER_RUNTIME_RUNC);
    cr_assert_eq(sched_relation(fx, "c1", "staff"), RELATION_TRUSTED);
}

Test(place, r2b_stranger_container_runs_under_kata_on_vm_passthrough_node) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8, .kata = true);
    fx_gpu_node(.name = "v1", .site = "dc", .owner = "ops", .mode = "vm-passthrough", .cls = H100,
                .gpus = 8, .kata = true);
    Decision d = fx_req(.id = "c", .user = "bob", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    cr_assert_eq(d.kind, DECISION_PLACED, "%s", d.message);
    cr_assert_str_eq(d.placement.node, "v1");
    cr_assert_eq(d.placement.method, METHOD_CONTAINER);
    cr_assert_eq(d.placement.container_runtime, CONTAINER_RUNTIME_KATA);
}

Test(place, r18_stranger_container_without_any_kata_node_is_refused_or_waits_when_asked) {
    dc();
    fx_gpu_node(.name = "v1", .site = "dc", .owner = "ops", .mode = "vm-passthrough", .cls = H100,
                .gpus = 8);
    Decision d = fx_req(.id = "c", .user = "bob", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    cr_assert_eq(d.kind, DECISION_REFUSED, "%s", d.message);
    cr_assert_eq(d.reason, SCHED_REASON_NO_KATA, "%s", d.message);
    d = fx_req(.id = "c", .user = "bob", .kind = WORKLOAD_CONTAINER, .class_name = H100,
               .wait_for_nodes = true);
    cr_assert_eq(d.kind, DECISION_WAITING);
    cr_assert_eq(d.reason, SCHED_REASON_NO_KATA, "%s", d.message);
}

Test(place, r2b_notebooks_and_endpoints_default_to_whole_gpu_container) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8);
    Decision a = fx_req(.id = "n", .user = "ops", .kind = WORKLOAD_NOTEBOOK, .class_name = H100);
    Decision b = fx_req(.id = "e", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H100);
    cr_assert_eq(a.placement.method, METHOD_CONTAINER, "%s", a.message);
    cr_assert_eq(b.placement.method, METHOD_CONTAINER, "%s", b.message);
    cr_assert_neq(a.placement.devices[0], b.placement.devices[0]);
}

/* ---- R2c MIG ---- */

Test(place, r2c_owner_gets_mig_slice_under_runc) {
    dc();
    fx_gpu_node(.name = "m1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1, .mig_enabled = true);
    Decision d = fx_req(.id = "s", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G);
    cr_assert_eq(d.kind, DECISION_PLACED, "%s", d.message);
    cr_assert_eq(d.placement.method, METHOD_MIG);
    cr_assert_eq(d.placement.mig_slots, 1);
    cr_assert_eq(d.placement.container_runtime, CONTAINER_RUNTIME_RUNC);
    cr_assert_eq(d.placement.endpoint_runtime, ENDPOINT_RUNTIME_VLLM);
}

Test(place, r18_stranger_slice_needs_mig_in_kata_refused_or_waits_when_asked) {
    dc();
    fx_gpu_node(.name = "m1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1, .kata = true, .mig_enabled = true);
    Decision d = fx_req(.id = "s", .user = "bob", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G);
    cr_assert_eq(d.kind, DECISION_REFUSED, "%s", d.message);
    cr_assert_eq(d.reason, SCHED_REASON_NO_MIG_IN_KATA, "%s", d.message);
    d = fx_req(.id = "s", .user = "bob", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G,
               .wait_for_nodes = true);
    cr_assert_eq(d.kind, DECISION_WAITING);
    cr_assert_eq(d.reason, SCHED_REASON_NO_MIG_IN_KATA, "%s", d.message);
}

Test(place, r2c_strangers_share_a_gpu_only_through_slices_under_kata) {
    dc();
    fx_gpu_node(.name = "m1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1, .kata = true, .mig_in_kata = true, .mig_enabled = true);
    Decision a = fx_req(.id = "a", .user = "bob", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G);
    Decision b =
            fx_req(.id = "b", .user = "carol", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G);
    cr_assert_eq(a.kind, DECISION_PLACED, "%s", a.message);
    cr_assert_eq(b.kind, DECISION_PLACED, "%s", b.message);
    cr_assert_eq(a.placement.container_runtime, CONTAINER_RUNTIME_KATA);
    cr_assert_eq(b.placement.container_runtime, CONTAINER_RUNTIME_KATA);
    cr_assert_neq(a.placement.mig_start, b.placement.mig_start);
    Error err = {0};
    cr_assert_eq(sched_check(fx, &err), 0, "%s", err.message);
}

Test(place, r2c_without_mig_in_kata_one_gpu_serves_one_user) {
    dc();
    Error err = {0};
    sched_site_trust(fx, "dc", "staff", true, &err);
    fx_gpu_node(.name = "m1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1, .kata = true, .mig_enabled = true);
    Decision a = fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G);
    Decision b =
            fx_req(.id = "b", .user = "staff", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G);
    cr_assert_eq(a.kind, DECISION_PLACED);
    cr_assert_eq(b.kind, DECISION_WAITING, "%s", b.message);
    Decision c = fx_req(.id = "c", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G);
    cr_assert_eq(c.kind, DECISION_PLACED, "the same user may add slices: %s", c.message);
}

Test(place, r2c_slices_follow_allowed_start_slots) {
    dc();
    fx_gpu_node(.name = "m1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1, .mig_enabled = true);
    Decision a = fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H100_3G);
    Decision b = fx_req(.id = "b", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H100_3G);
    Decision c = fx_req(.id = "c", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G);
    cr_assert_eq(a.kind, DECISION_PLACED);
    cr_assert_eq(b.kind, DECISION_PLACED);
    cr_assert(a.placement.mig_start % 4 == 0 && b.placement.mig_start % 4 == 0);
    cr_assert_eq(a.placement.mig_slots, 4);
    cr_assert_eq(c.kind, DECISION_WAITING, "two 3g take all 8 slots: %s", c.message);
}

Test(place, r2c_fragmentation_aware_slices_keep_large_profiles_placeable) {
    dc();
    fx_gpu_node(.name = "m1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 2, .mig_enabled = true);
    Decision a = fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G);
    Decision b = fx_req(.id = "b", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G);
    cr_assert_eq(a.placement.devices[0], b.placement.devices[0], "small slices pack onto one GPU");
    /* The other GPU stays whole, so a 7g still fits. */
    Decision c = fx_req(.id = "c", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H100_7G);
    cr_assert_eq(c.kind, DECISION_PLACED, "%s", c.message);
    /* And a 3g still fits next to the 1g slices: they sit in one half. */
    Decision d = fx_req(.id = "d", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H100_3G);
    cr_assert_eq(d.kind, DECISION_PLACED, "%s", d.message);
}

Test(place, r2c_mig_slice_for_a_vm_is_refused) {
    dc();
    Decision d = fx_req(.id = "v", .user = "ops", .kind = WORKLOAD_VM, .class_name = H100_1G);
    cr_assert_eq(d.kind, DECISION_REFUSED);
    cr_assert_eq(d.reason, SCHED_REASON_VM_MIG, "%s", d.message);
}

Test(place, r2c_gpus_not_in_mig_mode_give_no_slices) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1);
    Decision d = fx_req(.id = "s", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G);
    cr_assert_eq(d.kind, DECISION_WAITING);
    cr_assert_eq(d.reason, SCHED_REASON_MODE_MISMATCH, "%s", d.message);
}

static CapacityRow capacity_of(const char *cls) {
    CapacityRow row;
    Error err = {0};
    cr_assert_eq(sched_capacity_class(fx, cls, NULL, _CAPACITY_MODE_INVALID, &row, &err), 0, "%s",
                 err.message);
    return row;
}

Test(place, r2c_a_profile_nvml_does_not_report_is_not_offered) {
    dc();
    fx_gpu_node(.name = "m1", .site = "dc", .owner = "ops", .mode = "container", .cls = H200,
                .gpus = 1, .mig_enabled = true, .mig_profiles = h200_no_4g);
    CapacityRow row = capacity_of(H200_4G);
    cr_assert_eq(row.total, 0, "capacity counts a profile NVML does not offer: %lu",
                 (unsigned long)row.total);
    cr_assert_eq(row.free, 0);
    cr_assert_eq(capacity_of(H200_3G).total, 2, "the profiles NVML offers stay offered");
    /* No GPU of the fleet could ever hold it: refused at submit (R18), or waits when asked. */
    Decision d = fx_req(.id = "s", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H200_4G);
    cr_assert_eq(d.kind, DECISION_REFUSED, "%s", d.message);
    cr_assert_eq(d.reason, SCHED_REASON_NO_NODE, "%s", d.message);
    d = fx_req(.id = "s", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H200_4G,
               .wait_for_nodes = true);
    cr_assert_eq(d.kind, DECISION_WAITING, "%s", d.message);
    Decision ok =
            fx_req(.id = "t", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H200_3G);
    cr_assert_eq(ok.kind, DECISION_PLACED, "%s", ok.message);
}

Test(place, r2c_a_slice_goes_only_to_a_gpu_whose_nvml_offers_its_profile) {
    dc();
    static const char *const all[] = {"1g.18gb", "1g.35gb",  "2g.35gb", "3g.71gb",
                                      "4g.71gb", "7g.141gb", NULL};
    fx_gpu_node(.name = "m1", .site = "dc", .owner = "ops", .mode = "container", .cls = H200,
                .gpus = 2, .mig_enabled = true, .mig_profiles = h200_no_4g);
    fx_gpu_node(.name = "m2", .site = "dc", .owner = "ops", .mode = "container", .cls = H200,
                .gpus = 1, .mig_enabled = true, .mig_profiles = all);
    cr_assert_eq(capacity_of(H200_4G).total, 1);
    Decision a = fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H200_4G);
    cr_assert_eq(a.kind, DECISION_PLACED, "%s", a.message);
    cr_assert_str_eq(a.placement.node, "m2");
    /* m2's one 4g is taken: the next waits for it rather than landing on m1. */
    Decision b = fx_req(.id = "b", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H200_4G);
    cr_assert_eq(b.kind, DECISION_WAITING, "%s", b.message);
    cr_assert_eq(b.reason, SCHED_REASON_NO_CAPACITY, "%s", b.message);
    fx_release("a"); /* b takes m2's 4g, as it was waiting for */
    CapacityRow row = capacity_of(H200_4G);
    cr_assert(row.total == 1 && row.allocated == 1 && row.free == 0);
    Error err = {0};
    cr_assert_eq(sched_check(fx, &err), 0, "%s", err.message);
}

Test(place, r2c_a_gpu_that_reports_no_profile_list_offers_the_tables) {
    dc();
    fx_gpu_node(.name = "m1", .site = "dc", .owner = "ops", .mode = "container", .cls = H200,
                .gpus = 1, .mig_enabled = true);
    cr_assert_eq(capacity_of(H200_4G).total, 1);
    Decision d = fx_req(.id = "s", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H200_4G);
    cr_assert_eq(d.kind, DECISION_PLACED, "%s", d.message);
}

/* ---- R2d vGPU ---- */

Test(place, r2d_vgpu_request_is_refused_naming_alternatives) {
    Decision d =
            fx_req(.id = "v", .user = "ops", .kind = WORKLOAD_VM, .class_name = "nvidia-a100-vgpu");
    cr_assert_eq(d.kind, DECISION_REFUSED);
    cr_assert_eq(d.reason, SCHED_REASON_VGPU);
    cr_assert(strstr(d.message, "passthrough") && strstr(d.message, "MIG"), "%s", d.message);
}

Test(place, r2d_vm_vgpu_node_mode_is_refused) {
    dc();
    DeviceSpec dev = {.class_name = H100};
    SchedLabel l = {SCHED_MODE_LABEL, "vm-vgpu"};
    NodeSpec spec = {.name = "n",
                     .site = "dc",
                     .owner = "ops",
                     .labels = &l,
                     .n_labels = 1,
                     .devices = &dev,
                     .n_devices = 1};
    Error err = {0};
    cr_assert_eq(sched_add_node(fx, &spec, 0, &err), -EOPNOTSUPP);
    cr_assert(strstr(err.message, "passthrough"), "%s", err.message);
    cr_assert_eq(sched_node_count(fx), 0, "nothing changed");
}

/* ---- R2e time slicing ---- */

Test(place, r2e_one_users_workloads_share_a_time_sliced_gpu) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 2);
    Decision a = fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_NOTEBOOK, .class_name = H100,
                        .share = true);
    Decision b = fx_req(.id = "b", .user = "ops", .kind = WORKLOAD_NOTEBOOK, .class_name = H100,
                        .share = true);
    cr_assert_eq(a.placement.method, METHOD_TIME_SLICE, "%s", a.message);
    cr_assert_eq(b.placement.method, METHOD_TIME_SLICE);
    cr_assert_eq(a.placement.devices[0], b.placement.devices[0]);
}

Test(place, r2e_time_slices_never_mix_users) {
    dc();
    Error err = {0};
    sched_site_trust(fx, "dc", "staff", true, &err);
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1);
    Decision a = fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_NOTEBOOK, .class_name = H100,
                        .share = true);
    Decision b = fx_req(.id = "b", .user = "staff", .kind = WORKLOAD_NOTEBOOK, .class_name = H100,
                        .share = true);
    cr_assert_eq(a.kind, DECISION_PLACED);
    cr_assert_eq(b.kind, DECISION_WAITING, "%s", b.message);
}

Test(place, r2e_time_slice_replicas_are_bounded) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1);
    char id[8];
    for (int i = 0; i < SCHED_DEFAULT_TIME_SLICE_REPLICAS; i++) {
        snprintf(id, sizeof(id), "t%d", i);
        cr_assert_eq(fx_req(.id = id, .user = "ops", .kind = WORKLOAD_NOTEBOOK, .class_name = H100,
                            .share = true)
                             .kind,
                     DECISION_PLACED);
    }
    cr_assert_eq(fx_req(.id = "x", .user = "ops", .kind = WORKLOAD_NOTEBOOK, .class_name = H100,
                        .share = true)
                         .kind,
                 DECISION_WAITING);
}

Test(place, r2e_strangers_share_flag_gives_a_whole_gpu_under_kata) {
    dc();
    fx_gpu_node(.name = "v1", .site = "dc", .owner = "ops", .mode = "vm-passthrough", .cls = H100,
                .gpus = 2, .kata = true);
    Decision a = fx_req(.id = "a", .user = "bob", .kind = WORKLOAD_NOTEBOOK, .class_name = H100,
                        .share = true);
    Decision b = fx_req(.id = "b", .user = "bob", .kind = WORKLOAD_NOTEBOOK, .class_name = H100,
                        .share = true);
    cr_assert_eq(a.placement.method, METHOD_CONTAINER, "%s", a.message);
    cr_assert_eq(a.placement.container_runtime, CONTAINER_RUNTIME_KATA);
    cr_assert_neq(a.placement.devices[0], b.placement.devices[0]);
}

/* ---- R3, R4, R5 node modes ---- */

Test(place, r3_missing_mode_label_is_an_error) {
    dc();
    DeviceSpec dev = {.class_name = H100};
    NodeSpec spec = {.name = "n", .site = "dc", .owner = "ops", .devices = &dev, .n_devices = 1};
    Error err = {0};
    cr_assert_eq(sched_add_node(fx, &spec, 0, &err), -EINVAL);
    cr_assert(strstr(err.message, SCHED_MODE_LABEL), "%s", err.message);
}

Test(place, r3_unknown_mode_label_is_an_error) {
    dc();
    DeviceSpec dev = {.class_name = H100};
    SchedLabel l = {SCHED_MODE_LABEL, "both"};
    NodeSpec spec = {.name = "n",
                     .site = "dc",
                     .owner = "ops",
                     .labels = &l,
                     .n_labels = 1,
                     .devices = &dev,
                     .n_devices = 1};
    Error err = {0};
    cr_assert_eq(sched_add_node(fx, &spec, 0, &err), -EINVAL);
    cr_assert(strstr(err.message, "both"), "%s", err.message);
}

Test(place, r3_all_gpus_of_a_node_follow_its_mode) {
    dc();
    fx_gpu_node(.name = "v1", .site = "dc", .owner = "ops", .mode = "vm-passthrough", .cls = H100,
                .gpus = 4);
    for (unsigned i = 0; i < 4; i++) {
        DeviceInfo di;
        cr_assert_eq(sched_device_info(fx, "v1", i, &di), 0);
        cr_assert_eq(di.binding, BINDING_VFIO);
    }
}

Test(place, r4_mode_switch_refused_while_workloads_run_naming_them) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 2);
    fx_req(.id = "job-42", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    Error err = {0};
    cr_assert_eq(sched_node_set_mode(fx, "c1", NODE_MODE_VM_PASSTHROUGH, 0, &err), -EBUSY);
    cr_assert(strstr(err.message, "job-42"), "%s", err.message);
    NodeInfo ni;
    sched_node_info(fx, "c1", &ni);
    cr_assert_eq(ni.mode, NODE_MODE_CONTAINER);
}

Test(place, r4_mode_switch_after_drain_serves_the_waiting_vm) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 2);
    fx_req(.id = "job", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    Decision v = fx_req(.id = "vm", .user = "ops", .kind = WORKLOAD_VM, .class_name = H100);
    cr_assert_eq(v.kind, DECISION_WAITING);
    Error err = {0};
    cr_assert_eq(sched_node_set_cordoned(fx, "c1", true, 0, &err), 0);
    fx_release("job");
    cr_assert_eq(sched_node_set_mode(fx, "c1", NODE_MODE_VM_PASSTHROUGH, 0, &err), 0, "%s",
                 err.message);
    cr_assert_eq(sched_node_set_cordoned(fx, "c1", false, 0, &err), 0);
    cr_assert_eq(sched_request_decision(fx, "vm", &v), 0);
    cr_assert_eq(v.kind, DECISION_PLACED, "%s", v.message);
}

Test(place, r5_placement_never_flips_a_nodes_mode) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8);
    fx_gpu_node(.name = "c2", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8);
    Decision d = fx_req(.id = "v", .user = "ops", .kind = WORKLOAD_VM, .class_name = H100);
    cr_assert_eq(d.reason, SCHED_REASON_MODE_MISMATCH);
    NodeInfo a, b;
    sched_node_info(fx, "c1", &a);
    sched_node_info(fx, "c2", &b);
    cr_assert(a.mode == NODE_MODE_CONTAINER && b.mode == NODE_MODE_CONTAINER);
}

/* ---- R7 lab per-GPU modes ---- */

Test(place, r7_lab_gpus_switch_one_by_one) {
    fx_site("lab", SITE_LAB);
    DeviceSpec devs[2] = {{.class_name = "nvidia-l40s", .binding = BINDING_HOST},
                          {.class_name = "nvidia-l40s", .binding = BINDING_VFIO}};
    NodeSpec spec = {.name = "box",
                     .site = "lab",
                     .owner = "amy",
                     .cpu_cores = 16,
                     .devices = devs,
                     .n_devices = 2};
    Error err = {0};
    cr_assert_eq(sched_add_node(fx, &spec, 0, &err), 0, "%s", err.message);
    Decision vm =
            fx_req(.id = "vm", .user = "amy", .kind = WORKLOAD_VM, .class_name = "nvidia-l40s");
    Decision ct = fx_req(.id = "ct", .user = "amy", .kind = WORKLOAD_CONTAINER,
                         .class_name = "nvidia-l40s");
    cr_assert_eq(vm.placement.devices[0], 1, "%s", vm.message);
    cr_assert_eq(ct.placement.devices[0], 0, "%s", ct.message);
}

Test(place, r7_gpu_in_use_is_never_rebound) {
    fx_site("lab", SITE_LAB);
    fx_gpu_node(.name = "box", .site = "lab", .owner = "amy", .cls = "nvidia-l40s", .gpus = 1);
    fx_req(.id = "ct", .user = "amy", .kind = WORKLOAD_CONTAINER, .class_name = "nvidia-l40s");
    Error err = {0};
    cr_assert_eq(sched_device_set_binding(fx, "box", 0, BINDING_VFIO, 0, &err), -EBUSY);
    cr_assert(strstr(err.message, "ct"), "%s", err.message);
    fx_release("ct");
    cr_assert_eq(sched_device_set_binding(fx, "box", 0, BINDING_VFIO, 0, &err), 0, "%s",
                 err.message);
}

/* R9: a consumer GPU rebound to vfio-pci is checked again before it is offered for
 * passthrough, in memory as in the server's record: a restart must not change the answer. */
Test(place, r9_a_consumer_gpu_rebound_to_vfio_waits_for_a_reset_check) {
    fx_site("lab", SITE_LAB);
    DeviceSpec dev = {
            .class_name = "nvidia-rtx-4090", .binding = BINDING_HOST, .reset_verified = true};
    NodeSpec spec = {.name = "box",
                     .site = "lab",
                     .owner = "amy",
                     .cpu_cores = 8,
                     .devices = &dev,
                     .n_devices = 1};
    Error err = {0};
    cr_assert_eq(sched_add_node(fx, &spec, 0, &err), 0, "%s", err.message);
    cr_assert_eq(sched_device_set_binding(fx, "box", 0, BINDING_VFIO, 0, &err), 0, "%s",
                 err.message);
    DeviceInfo di;
    cr_assert_eq(sched_device_info(fx, "box", 0, &di), 0);
    cr_expect_not(di.reset_verified);
    Decision vm =
            fx_req(.id = "vm", .user = "amy", .kind = WORKLOAD_VM, .class_name = "nvidia-rtx-4090");
    cr_expect_neq(vm.kind, DECISION_PLACED, "not before its reset check: %s", vm.message);
}

/* A queue walk passes over the waiters that need the other binding (the VM needs vfio, the
 * container the host driver) without placing them there, and still places them where their
 * binding frees: the walk's cheap skip must decide as a full attempt would. */
Test(place, r7_freed_gpu_goes_to_the_oldest_waiter_of_its_binding) {
    fx_site("lab", SITE_LAB);
    DeviceSpec devs[2] = {{.class_name = "nvidia-l40s", .binding = BINDING_HOST},
                          {.class_name = "nvidia-l40s", .binding = BINDING_VFIO}};
    NodeSpec spec = {.name = "box",
                     .site = "lab",
                     .owner = "amy",
                     .cpu_cores = 16,
                     .devices = devs,
                     .n_devices = 2};
    Error err = {0};
    cr_assert_eq(sched_add_node(fx, &spec, 0, &err), 0, "%s", err.message);
    cr_assert_eq(fx_req(.id = "ct1", .user = "amy", .kind = WORKLOAD_CONTAINER,
                        .class_name = "nvidia-l40s")
                         .kind,
                 DECISION_PLACED);
    cr_assert_eq(
            fx_req(.id = "vm1", .user = "amy", .kind = WORKLOAD_VM, .class_name = "nvidia-l40s")
                    .kind,
            DECISION_PLACED);
    Decision vm2 =
            fx_req(.id = "vm2", .user = "amy", .kind = WORKLOAD_VM, .class_name = "nvidia-l40s");
    Decision ct2 = fx_req(.id = "ct2", .user = "amy", .kind = WORKLOAD_CONTAINER,
                          .class_name = "nvidia-l40s");
    cr_assert_eq(vm2.kind, DECISION_WAITING, "%s", vm2.message);
    cr_assert_eq(ct2.kind, DECISION_WAITING, "%s", ct2.message);

    fx_release("ct1"); /* the host GPU frees: the older VM cannot use it, the container can */
    Decision d;
    cr_assert_eq(sched_request_decision(fx, "vm2", &d), 0);
    cr_assert_eq(d.kind, DECISION_WAITING, "%s", d.message);
    cr_assert_eq(sched_request_decision(fx, "ct2", &d), 0);
    cr_assert_eq(d.kind, DECISION_PLACED, "%s", d.message);
    cr_assert_eq(d.placement.devices[0], 0);

    fx_release("vm1"); /* the vfio GPU frees: the waiting VM gets it */
    cr_assert_eq(sched_request_decision(fx, "vm2", &d), 0);
    cr_assert_eq(d.kind, DECISION_PLACED, "%s", d.message);
    cr_assert_eq(d.placement.devices[0], 1);
    cr_assert_eq(d.placement.method, METHOD_PASSTHROUGH);
}

/* ---- packing ---- */

Test(place, whole_gpus_pack_to_keep_whole_nodes_free_for_gangs) {
    dc();
    fx_gpu_node(.name = "a", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8);
    fx_gpu_node(.name = "b", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8);
    Decision one =
            fx_req(.id = "one", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    Decision two =
            fx_req(.id = "two", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    cr_assert_str_eq(one.placement.node, two.placement.node, "singles go to the same node");
    Decision gang = fx_req(.id = "gang", .user = "ops", .kind = WORKLOAD_CONTAINER,
                           .class_name = H100, .count = 8);
    cr_assert_eq(gang.kind, DECISION_PLACED, "%s", gang.message);
    cr_assert_str_neq(gang.placement.node, one.placement.node);
    cr_assert_eq(gang.placement.n_devices, 8);
}
