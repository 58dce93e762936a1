/* test-reasons.c: every reason code against a scenario that produces it, and for each waiting
 * reason the event that clears it: the reason shown names what, removed, would let the
 * request run (R18); requests no node could ever run are refused at submit unless the user
 * asks to wait for nodes (R18). */
#include <stdio.h>

#include "core-fixture.h"
#include "core/sentence.h"

#define H100 "nvidia-h100-80gb"
#define H200 "nvidia-h200-141gb"
#define H100_1G "nvidia-h100-80gb-mig-1g.10gb"
#define H100_7G "nvidia-h100-80gb-mig-7g.80gb"
#define MAC64 "apple-silicon-64gb"
#define RTX4090 "nvidia-rtx-4090"

TestSuite(reasons, .init = fx_setup, .fini = fx_teardown);

static Error err;

static void expect(const Decision *d, DecisionKind kind, SchedReason reason) {
    cr_assert_eq(d->kind, kind, "want %s, got %s: %s", decision_kind_to_string(kind),
                 decision_kind_to_string(d->kind), d->message);
    cr_assert_eq(d->reason, reason, "want reason %s, got %s: %s", sched_reason_to_string(reason),
                 sched_reason_to_string(d->reason), d->message);
}

static void expect_placed(const char *id) {
    Decision d;
    cr_assert_eq(sched_request_decision(fx, id, &d), 0);
    cr_assert_eq(d.kind, DECISION_PLACED, "cleared, %s runs: %s", id, d.message);
}

static void dc(void) {
    fx_site("dc", SITE_DATACENTER);
}

/* Each scenario produces its reason (and for a waiting one, clears it); the last test checks
 * that together they cover every reason code. */
static bool covered[_SCHED_REASON_MAX];

static void saw(const Decision *d, DecisionKind kind, SchedReason reason) {
    expect(d, kind, reason);
    covered[reason] = true;
}

/* ---- waiting reasons, each cleared by the one change it names ---- */

static void no_capacity(void) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1);
    fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    Decision d = fx_req(.id = "b", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    saw(&d, DECISION_WAITING, SCHED_REASON_NO_CAPACITY);
    fx_release("a");
    expect_placed("b");
}

static void mode_mismatch(void) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1);
    Decision d = fx_req(.id = "v", .user = "ops", .kind = WORKLOAD_VM, .class_name = H100);
    saw(&d, DECISION_WAITING, SCHED_REASON_MODE_MISMATCH);
    cr_assert_eq(sched_node_set_mode(fx, "c1", NODE_MODE_VM_PASSTHROUGH, 0, &err), 0, "%s",
                 err.message);
    expect_placed("v");
}

static void queued(void) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 2);
    fx_req(.id = "x", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    fx_req(.id = "gang", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100, .count = 2);
    Decision d = fx_req(.id = "y", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    saw(&d, DECISION_WAITING, SCHED_REASON_QUEUED);
    fx_release("gang"); /* the older gang that keeps the free GPU goes away */
    expect_placed("y");
}

static void owner_only(void) {
    fx_site("lab", SITE_LAB);
    fx_mac("mac", "lab", "amy", 64, 48);
    Decision d = fx_req(.id = "s", .user = "bob", .kind = WORKLOAD_ENDPOINT, .class_name = MAC64);
    saw(&d, DECISION_REFUSED, SCHED_REASON_OWNER_ONLY);
    d = fx_req(.id = "s", .user = "bob", .kind = WORKLOAD_ENDPOINT, .class_name = MAC64,
               .wait_for_nodes = true);
    saw(&d, DECISION_WAITING, SCHED_REASON_OWNER_ONLY);
    fx_mac("bobs-mac", "lab", "bob", 64, 48);
    expect_placed("s");
}

static void internal_only(void) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = RTX4090,
                .gpus = 1, .kata = true);
    Decision d =
            fx_req(.id = "s", .user = "bob", .kind = WORKLOAD_CONTAINER, .class_name = RTX4090);
    saw(&d, DECISION_REFUSED, SCHED_REASON_INTERNAL_ONLY);
    d = fx_req(.id = "s", .user = "bob", .kind = WORKLOAD_CONTAINER, .class_name = RTX4090,
               .wait_for_nodes = true);
    saw(&d, DECISION_WAITING, SCHED_REASON_INTERNAL_ONLY);
    fx_gpu_node(.name = "bobs", .site = "dc", .owner = "bob", .mode = "container", .cls = RTX4090,
                .gpus = 1);
    expect_placed("s");
}

static void no_kata(void) {
    dc();
    fx_gpu_node(.name = "k1", .site = "dc", .owner = "ops", .mode = "vm-passthrough", .cls = H100,
                .gpus = 1, .kata = true);
    fx_gpu_node(.name = "n1", .site = "dc", .owner = "ops", .mode = "vm-passthrough", .cls = H100,
                .gpus = 1);
    fx_req(.id = "a", .user = "bob", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    Decision d = fx_req(.id = "b", .user = "bob", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    saw(&d, DECISION_WAITING, SCHED_REASON_NO_KATA);
    cr_assert_eq(sched_node_set_capabilities(fx, "n1", true, false, 0, &err), 0, "%s", err.message);
    expect_placed("b");
}

static void no_mig_in_kata(void) {
    dc();
    fx_gpu_node(.name = "m1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1, .kata = true, .mig_enabled = true);
    fx_gpu_node(.name = "m2", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1, .kata = true, .mig_in_kata = true, .mig_enabled = true);
    fx_req(.id = "big", .user = "bob", .kind = WORKLOAD_ENDPOINT, .class_name = H100_7G);
    Decision d = fx_req(.id = "s", .user = "bob", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G);
    saw(&d, DECISION_WAITING, SCHED_REASON_NO_MIG_IN_KATA);
    cr_assert_eq(sched_node_set_capabilities(fx, "m1", true, true, 0, &err), 0, "%s", err.message);
    expect_placed("s");
}

static void reset_check(void) {
    fx_site("lab", SITE_LAB);
    fx_gpu_node(.name = "box", .site = "lab", .owner = "amy", .cls = "nvidia-rtx-5090", .gpus = 1,
                .binding = BINDING_VFIO);
    Decision d =
            fx_req(.id = "v", .user = "amy", .kind = WORKLOAD_VM, .class_name = "nvidia-rtx-5090");
    saw(&d, DECISION_WAITING, SCHED_REASON_RESET_CHECK);
    cr_assert_eq(sched_device_reset_result(fx, "box", 0, true, NULL, 0, &err), 0, "%s",
                 err.message);
    expect_placed("v");
}

static void macos_vm_limit(void) {
    fx_site("home", SITE_SOLO);
    fx_mac("mac", "home", "amy", 64, 48);
    fx_req(.id = "v1", .user = "amy", .kind = WORKLOAD_VM, .guest = GUEST_MACOS,
           .class_name = MAC64);
    fx_req(.id = "v2", .user = "amy", .kind = WORKLOAD_VM, .guest = GUEST_MACOS,
           .class_name = MAC64);
    Decision d = fx_req(.id = "v3", .user = "amy", .kind = WORKLOAD_VM, .guest = GUEST_MACOS,
                        .class_name = MAC64);
    saw(&d, DECISION_WAITING, SCHED_REASON_MACOS_VM_LIMIT);
    fx_release("v1");
    expect_placed("v3");
}

static void cordoned(void) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1);
    cr_assert_eq(sched_node_set_cordoned(fx, "c1", true, 0, &err), 0, "%s", err.message);
    Decision d = fx_req(.id = "c", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    saw(&d, DECISION_WAITING, SCHED_REASON_CORDONED);
    cr_assert_eq(sched_node_set_cordoned(fx, "c1", false, 0, &err), 0, "%s", err.message);
    expect_placed("c");
}

static void no_node(void) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1);
    Decision d = fx_req(.id = "h", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H200);
    saw(&d, DECISION_REFUSED, SCHED_REASON_NO_NODE);
    cr_assert_eq(sched_request_count(fx), 0, "a refused request is not kept");
    d = fx_req(.id = "h", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H200,
               .wait_for_nodes = true);
    saw(&d, DECISION_WAITING, SCHED_REASON_NO_NODE);
    fx_gpu_node(.name = "h1", .site = "dc", .owner = "ops", .mode = "container", .cls = H200,
                .gpus = 1);
    expect_placed("h");
}

static void too_large(void) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 2);
    Decision d = fx_req(.id = "g", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100,
                        .count = 4);
    saw(&d, DECISION_REFUSED, SCHED_REASON_TOO_LARGE);
    cr_assert(strstr(d.message, "wait_for_nodes"), "says how to wait anyway: %s", d.message);
    d = fx_req(.id = "g", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100, .count = 4,
               .wait_for_nodes = true);
    saw(&d, DECISION_WAITING, SCHED_REASON_TOO_LARGE);
    fx_gpu_node(.name = "c4", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 4);
    expect_placed("g");
}

/* ---- refusals ---- */

static void refusals(void) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1, .mig_enabled = true);
    Decision d =
            fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_VM, .class_name = "nvidia-h100-vgpu");
    saw(&d, DECISION_REFUSED, SCHED_REASON_VGPU);
    d = fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = "no-such-class");
    saw(&d, DECISION_REFUSED, SCHED_REASON_UNKNOWN_CLASS);
    d = fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_VM, .guest = GUEST_LINUX,
               .class_name = MAC64);
    saw(&d, DECISION_REFUSED, SCHED_REASON_LINUX_GUEST_GPU);
    d = fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_VM, .guest = GUEST_MACOS,
               .class_name = H100);
    saw(&d, DECISION_REFUSED, SCHED_REASON_MACOS_GUEST_NOT_MAC);
    d = fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_VM, .class_name = H100_1G);
    saw(&d, DECISION_REFUSED, SCHED_REASON_VM_MIG);
    d = fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_VM, .class_name = "amd-mi300x");
    saw(&d, DECISION_REFUSED, SCHED_REASON_VM_AMD);
    d = fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G,
               .count = 2);
    saw(&d, DECISION_REFUSED, SCHED_REASON_BAD_COUNT);
    d = fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H100,
               .runtime = ENDPOINT_RUNTIME_MLX);
    saw(&d, DECISION_REFUSED, SCHED_REASON_BAD_RUNTIME);
    d = fx_req(.id = "a", .user = NULL, .kind = WORKLOAD_CONTAINER, .class_name = H100);
    saw(&d, DECISION_REFUSED, SCHED_REASON_BAD_REQUEST);
    d = fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100_1G);
    saw(&d, DECISION_PLACED, SCHED_REASON_NONE);
    d = fx_req(.id = "a", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100_1G);
    saw(&d, DECISION_REFUSED, SCHED_REASON_DUPLICATE);
}

static void fallback(void) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1);
    const char *fb[] = {"cpu"};
    /* R18 with R13: a first choice no node has still waits when an alternative can run. */
    Decision d = fx_submit((RequestSpec){.id = "f",
                                         .user = "ops",
                                         .kind = WORKLOAD_CONTAINER,
                                         .class_name = H200,
                                         .fallback = fb,
                                         .n_fallback = 1,
                                         .wait_s = 10},
                           0);
    expect(&d, DECISION_WAITING, SCHED_REASON_NO_NODE);
    cr_assert_eq(sched_tick(fx, 9), 0, "not before the wait ran out");
    cr_assert_eq(sched_tick(fx, 10), 1);
    cr_assert_eq(sched_request_decision(fx, "f", &d), 0);
    saw(&d, DECISION_PLACED, SCHED_REASON_FALLBACK);
}

typedef void (*Scenario)(void);

static const Scenario scenarios[] = {
        no_capacity, mode_mismatch,  queued,   owner_only, internal_only, no_kata,  no_mig_in_kata,
        reset_check, macos_vm_limit, cordoned, no_node,    too_large,     refusals, fallback,
};

/* Criterion runs each test in its own process: run them all here, each on a fresh Sched. */
static void run_all(void) {
    for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
        fx_teardown();
        fx_setup();
        scenarios[i]();
    }
}

Test(reasons, r18_every_reason_code_has_a_scenario_and_each_wait_clears_on_its_blocker) {
    run_all();
    for (int r = 0; r < _SCHED_REASON_MAX; r++)
        cr_expect(covered[r], "no scenario produces reason %s",
                  sched_reason_to_string((SchedReason)r));
}

Test(reasons, r18_stranger_slice_is_never_told_to_wait_for_a_mode_switch_that_cannot_help) {
    /* m1 has whole GPUs (MIG off) but no mig_in_kata: turning MIG on would not give a
     * stranger a slice there. m2 could, once bob's own 7g slice ends. */
    dc();
    fx_gpu_node(.name = "m1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1, .kata = true);
    fx_gpu_node(.name = "m2", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1, .kata = true, .mig_in_kata = true, .mig_enabled = true);
    fx_req(.id = "big", .user = "bob", .kind = WORKLOAD_ENDPOINT, .class_name = H100_7G);
    Decision d = fx_req(.id = "s", .user = "bob", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G);
    expect(&d, DECISION_WAITING, SCHED_REASON_NO_CAPACITY);
    fx_release("big");
    expect_placed("s");
}

Test(reasons, r18_stranger_container_is_never_told_to_wait_for_a_mode_switch_that_cannot_help) {
    /* c1 has a free GPU in container mode but no Kata: switching it to vm-passthrough would
     * not run a stranger's container there. k1 will, once bob's other container ends. */
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1);
    fx_gpu_node(.name = "k1", .site = "dc", .owner = "ops", .mode = "vm-passthrough", .cls = H100,
                .gpus = 1, .kata = true);
    fx_req(.id = "a", .user = "bob", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    Decision d = fx_req(.id = "b", .user = "bob", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    expect(&d, DECISION_WAITING, SCHED_REASON_NO_CAPACITY);
    fx_release("a");
    expect_placed("b");
}

Test(reasons, r18_stranger_time_slice_request_is_not_told_other_mode) {
    /* share = true from a stranger runs under Kata on a whole GPU (R2e never crosses users):
     * ops' time slices and a free host GPU on a node without Kata are no help. */
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 2);
    fx_gpu_node(.name = "k1", .site = "dc", .owner = "ops", .mode = "vm-passthrough", .cls = H100,
                .gpus = 1, .kata = true);
    fx_req(.id = "t", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100, .share = true);
    fx_req(.id = "a", .user = "bob", .kind = WORKLOAD_CONTAINER, .class_name = H100, .share = true);
    Decision d = fx_req(.id = "b", .user = "bob", .kind = WORKLOAD_CONTAINER, .class_name = H100,
                        .share = true);
    cr_assert_eq(d.kind, DECISION_WAITING, "%s", d.message);
    cr_assert_neq(d.reason, SCHED_REASON_MODE_MISMATCH, "%s", d.message);
    fx_release("a");
    expect_placed("b");
}

/* The one node with room in ops' mode is kept by an older gang's reservation; 300 others
 * have a GPU free only in the other mode. A diagnosis looks at a bounded window of a class's
 * nodes, and that window alone would say a mode switch helps: the node the pools list with
 * room is looked at first, and its room is what the wait is for (QUEUED), not a switch. */
Test(reasons, r18_a_wait_for_room_a_gang_keeps_is_queued_not_a_mode_switch_on_a_large_fleet) {
    dc();
    char name[16];
    for (int i = 0; i < 300; i++) {
        snprintf(name, sizeof(name), "v%03d", i);
        fx_gpu_node(.name = name, .site = "dc", .owner = "ops", .mode = "vm-passthrough",
                    .cls = H100, .gpus = 1);
    }
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8);
    for (int i = 0; i < 7; i++) {
        snprintf(name, sizeof(name), "busy%d", i);
        Decision d =
                fx_req(.id = name, .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
        cr_assert_eq(d.kind, DECISION_PLACED, "%s", d.message);
    }
    Decision gang = fx_req(.id = "gang", .user = "ops", .kind = WORKLOAD_CONTAINER,
                           .class_name = H100, .count = 8);
    cr_assert_eq(gang.kind, DECISION_WAITING, "%s", gang.message); /* it reserves c1 */
    for (int i = 0; i < 40; i++) { /* diagnoses from 40 different windows */
        snprintf(name, sizeof(name), "one%d", i);
        Decision d =
                fx_req(.id = name, .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
        expect(&d, DECISION_WAITING, SCHED_REASON_QUEUED);
    }
    for (int i = 0; i < 7; i++) { /* the room was the gang's: it runs first */
        snprintf(name, sizeof(name), "busy%d", i);
        fx_release(name);
    }
    expect_placed("gang");
}

/* A memory need no class of the catalog meets is too large, said of the memory asked; one
 * that only classes this workload may not use meet gets their refusal, not "bad count". */
Test(reasons, r18_a_memory_need_above_every_unit_is_refused_naming_the_sizes) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 2);
    Decision d = fx_req(.id = "m", .user = "ops", .kind = WORKLOAD_ENDPOINT, .memory_gb = 100000);
    expect(&d, DECISION_REFUSED, SCHED_REASON_TOO_LARGE);
    cr_assert(strstr(d.message, "(memory): no class of the catalog holds 100000 GB in one unit"),
              "names the memory need and its size, not the id: %s", d.message);
    d = fx_req(.id = "m", .user = "ops", .kind = WORKLOAD_ENDPOINT, .memory_gb = 100000,
               .wait_for_nodes = true);
    expect(&d, DECISION_REFUSED, SCHED_REASON_TOO_LARGE);
    d = fx_req(.id = "s", .user = "ops", .kind = WORKLOAD_ENDPOINT, .memory_gb = 10);
    cr_assert_eq(d.kind, DECISION_PLACED, "a need some class meets still runs: %s", d.message);
    /* With a class: a card of 80 GB never holds 1000 GB. */
    d = fx_req(.id = "c", .user = "ops", .kind = WORKLOAD_NOTEBOOK, .class_name = H100,
               .memory_gb = 1000);
    expect(&d, DECISION_REFUSED, SCHED_REASON_TOO_LARGE);
    cr_assert(strstr(d.message, "one unit of " H100 " holds 80 GB, less than the 1000 GB asked"),
              "the class's memory, not a GPU count, is what is too small: %s", d.message);
    /* Without a class, a need only classes no node has yet meet says so. */
    d = fx_req(.id = "n", .user = "ops", .kind = WORKLOAD_NOTEBOOK, .memory_gb = 100);
    expect(&d, DECISION_REFUSED, SCHED_REASON_NO_NODE);
    cr_assert(strstr(d.message, "no node has a class that holds 100 GB in one unit yet"), "%s",
              d.message);
    d = fx_req(.id = "c", .user = "ops", .kind = WORKLOAD_NOTEBOOK, .class_name = H100,
               .memory_gb = 80);
    cr_assert_eq(d.kind, DECISION_PLACED, "the class's own memory fits: %s", d.message);
}

/* A memory need no node could ever meet for its kind (AMD GPUs never go to VMs, R12) is
 * refused naming the memory need, not the request's id. */
Test(reasons, r18_a_vm_memory_need_no_node_meets_names_the_memory_not_the_id) {
    fx_site("lab", SITE_LAB);
    fx_gpu_node(.name = "amd", .site = "lab", .owner = "ops", .cls = "amd-mi300x", .gpus = 1);
    Decision d = fx_req(.id = "77", .user = "ops", .kind = WORKLOAD_VM, .memory_gb = 100);
    cr_assert_eq(d.kind, DECISION_REFUSED, "%s", d.message);
    cr_assert(strstr(d.message, "refused (memory)") && !strstr(d.message, "(77)"), "%s", d.message);
}

/* A whole GPU asked of a card whose only idle GPU has MIG on: what, removed, would let it run
 * is MIG mode (the other mode's sentence, "or MIG off"), not "every unit is taken". */
Test(reasons, r18_a_whole_gpu_kept_only_by_mig_mode_is_told_so) {
    dc();
    fx_gpu_node(.name = "m", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1, .kata = true, .mig_enabled = true);
    Decision d = fx_req(.id = "w", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    expect(&d, DECISION_WAITING, SCHED_REASON_MODE_MISMATCH);
    cr_assert(strstr(d.message, "MIG off"), "%s", d.message);
    /* Once the GPU holds a slice, the slice's end alone would not let it run either: MIG on
     * is what always has to go, and is named (R18). */
    d = fx_req(.id = "s", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100_1G);
    cr_assert_eq(d.kind, DECISION_PLACED, "%s", d.message);
    cr_assert_eq(sched_request_decision(fx, "w", &d), 0);
    expect(&d, DECISION_WAITING, SCHED_REASON_MODE_MISMATCH);
}

/* The only GPU of the class is idle on a cordoned node in the other mode: nothing is taken,
 * so the reason is not "every unit is taken" but what stands in the way. */
Test(reasons, r18_an_idle_gpu_cordoned_in_the_other_mode_is_not_told_taken) {
    dc();
    fx_gpu_node(.name = "k1", .site = "dc", .owner = "ops", .mode = "vm-passthrough", .cls = H100,
                .gpus = 1, .kata = true);
    cr_assert_eq(sched_node_set_cordoned(fx, "k1", true, 0, &err), 0, "%s", err.message);
    Decision d = fx_req(.id = "w", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    cr_assert_eq(d.kind, DECISION_WAITING, "%s", d.message);
    cr_assert(d.reason == SCHED_REASON_MODE_MISMATCH || d.reason == SCHED_REASON_CORDONED, "%s",
              d.message);
}

/* Every node with the slice's card has two blockers for a stranger: MIG off, and no
 * mig_in_kata. Turning MIG on alone would not let it run anywhere: the node's capability is
 * what the reason names. (A fallback lets it wait, since cpu could run it.) */
Test(reasons, r18_a_stranger_slice_on_nodes_without_mig_in_kata_is_not_told_other_mode) {
    dc();
    fx_gpu_node(.name = "m1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1, .kata = true);
    static const char *const to_cpu[] = {"cpu"};
    Decision d = fx_submit((RequestSpec){.id = "s",
                                         .user = "bob",
                                         .kind = WORKLOAD_ENDPOINT,
                                         .class_name = H100_1G,
                                         .fallback = to_cpu,
                                         .n_fallback = 1,
                                         .wait_s = 600},
                           0);
    expect(&d, DECISION_WAITING, SCHED_REASON_NO_MIG_IN_KATA);
}

/* A free 4090 in a datacenter is internal-only (R9): for a stranger it is no room in either
 * mode, so a VM waiting for the lab's one 4090 is told every unit it may use is taken, not to
 * wait for a mode switch of a node it may never use. */
Test(reasons, r18_room_a_user_may_not_have_is_not_other_mode) {
    dc();
    fx_site("lab", SITE_LAB);
    fx_gpu_node(.name = "l1", .site = "lab", .owner = "amy", .cls = RTX4090, .gpus = 1,
                .binding = BINDING_VFIO);
    fx_gpu_node(.name = "d1", .site = "dc", .owner = "ops", .mode = "container", .cls = RTX4090,
                .gpus = 2, .kata = true);
    Decision a = fx_req(.id = "a", .user = "amy", .kind = WORKLOAD_VM, .class_name = RTX4090);
    cr_assert_eq(sched_device_reset_result(fx, "l1", 0, true, NULL, 0, &err), 0, "%s", err.message);
    cr_assert_eq(sched_request_decision(fx, "a", &a), 0);
    cr_assert_eq(a.kind, DECISION_PLACED, "%s", a.message);
    Decision d = fx_req(.id = "b", .user = "bob", .kind = WORKLOAD_VM, .class_name = RTX4090);
    expect(&d, DECISION_WAITING, SCHED_REASON_NO_CAPACITY);
}

/* R18, R9: a VM that a consumer GPU's pending reset check alone keeps waiting is told so, even
 * where another node's GPU of the class is free in the other mode: the check passes on its
 * own, soon, where a mode switch waits for an operator (and would need a check after it). */
Test(reasons, r18_a_pending_reset_check_is_named_before_a_free_gpu_in_the_other_mode) {
    fx_site("lab", SITE_LAB);
    fx_gpu_node(.name = "vfio", .site = "lab", .owner = "amy", .cls = RTX4090, .gpus = 1,
                .binding = BINDING_VFIO);
    fx_gpu_node(.name = "host", .site = "lab", .owner = "amy", .cls = RTX4090, .gpus = 1,
                .binding = BINDING_HOST);
    Decision d = fx_req(.id = "v", .user = "amy", .kind = WORKLOAD_VM, .class_name = RTX4090);
    expect(&d, DECISION_WAITING, SCHED_REASON_RESET_CHECK);
}

Test(reasons, r18_a_waiting_reason_is_found_again_as_the_fleet_changes) {
    dc();
    Decision d = fx_req(.id = "g", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H200,
                        .count = 2, .wait_for_nodes = true);
    expect(&d, DECISION_WAITING, SCHED_REASON_NO_NODE);
    fx_gpu_node(.name = "h1", .site = "dc", .owner = "ops", .mode = "container", .cls = H200,
                .gpus = 1);
    cr_assert_eq(sched_request_decision(fx, "g", &d), 0);
    expect(&d, DECISION_WAITING, SCHED_REASON_TOO_LARGE); /* a node came, too small for the gang */
    fx_gpu_node(.name = "h2", .site = "dc", .owner = "ops", .mode = "vm-passthrough", .cls = H200,
                .gpus = 2);
    cr_assert_eq(sched_request_decision(fx, "g", &d), 0);
    expect(&d, DECISION_WAITING, SCHED_REASON_MODE_MISMATCH); /* big enough, in the other mode */
    cr_assert_eq(sched_node_set_mode(fx, "h2", NODE_MODE_CONTAINER, 0, &err), 0, "%s", err.message);
    expect_placed("g");
}

Test(reasons, r18_the_fleet_summary_follows_nodes_that_join_and_leave) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1);
    Decision d = fx_req(.id = "g", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100,
                        .count = 2);
    expect(&d, DECISION_REFUSED, SCHED_REASON_TOO_LARGE);
    fx_gpu_node(.name = "c2", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 2);
    fx_req(.id = "x", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100, .count = 2);
    d = fx_req(.id = "g", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100,
               .count = 2);
    expect(&d, DECISION_WAITING, SCHED_REASON_NO_CAPACITY); /* c2 could, once x ends */
    fx_release("g");
    fx_release("x");
    cr_assert_eq(sched_remove_node(fx, "c2", &err), 0, "%s", err.message);
    d = fx_req(.id = "g", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100,
               .count = 2);
    expect(&d, DECISION_REFUSED, SCHED_REASON_TOO_LARGE); /* c2 left: nothing holds 2 again */
    /* Kata gained by a node is seen too: bob's container is refused, then waits. */
    fx_req(.id = "own", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    d = fx_req(.id = "b", .user = "bob", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    expect(&d, DECISION_REFUSED, SCHED_REASON_NO_KATA);
    cr_assert_eq(sched_node_set_capabilities(fx, "c1", true, false, 0, &err), 0, "%s", err.message);
    /* bob's container needs Kata on VFIO GPUs, and c1's one GPU is on its host driver: the
     * mode keeps him, while own holds the GPU and after (R18: the release alone would not
     * let him run). */
    d = fx_req(.id = "b", .user = "bob", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    expect(&d, DECISION_WAITING, SCHED_REASON_MODE_MISMATCH);
    fx_release("own");
    cr_assert_eq(sched_request_decision(fx, "b", &d), 0);
    expect(&d, DECISION_WAITING, SCHED_REASON_MODE_MISMATCH);
}

/* A placed decision's sentence spells methods and runtimes as literals (sentence.h, for
 * speed): they must stay the names the API and the CLI use (sched-names.c), value by value. */
static void expect_piece(void (*put)(Msg *, int), int v, const char *want) {
    char buf[64];
    Msg m = msg_start(buf, sizeof(buf));
    put(&m, v);
    msg_end(&m);
    cr_expect_str_eq(buf, want, "value %d", v);
}
static void put_method(Msg *m, int v) {
    msg_method(m, (Method)v);
}
static void put_container_runtime(Msg *m, int v) {
    msg_container_runtime(m, (ContainerRuntime)v);
}
static void put_endpoint_runtime(Msg *m, int v) {
    msg_endpoint_runtime(m, (EndpointRuntime)v);
}

Test(reasons, r14_sentences_name_every_method_and_runtime_as_the_name_tables_do) {
    for (int v = 0; v < _METHOD_MAX; v++)
        expect_piece(put_method, v, method_to_string((Method)v));
    for (int v = 1; v < _CONTAINER_RUNTIME_MAX; v++)
        expect_piece(put_container_runtime, v, container_runtime_to_string((ContainerRuntime)v));
    for (int v = 1; v < _ENDPOINT_RUNTIME_MAX; v++)
        expect_piece(put_endpoint_runtime, v, endpoint_runtime_to_string((EndpointRuntime)v));
}

/* R18 "the true reason" for cpu work and Macs: a stranger's cpu endpoint where only a Mac
 * exists is the Mac owner's alone (native processes), not an owner-only class; a macOS VM on
 * a fleet without a Mac needs a Mac, not "this class". */
Test(reasons, r18_cpu_work_a_mac_keeps_or_lacks_is_told_why) {
    fx_site("home", SITE_SOLO);
    fx_mac("mac", "home", "amy", 64, 48);
    Decision d = fx_req(.id = "e", .user = "bob", .kind = WORKLOAD_ENDPOINT, .class_name = "cpu");
    expect(&d, DECISION_REFUSED, SCHED_REASON_OWNER_ONLY);
    cr_assert(strstr(d.message, "native processes on a Mac"), "%s", d.message);
}

Test(reasons, r18_a_macos_vm_on_a_fleet_without_a_mac_is_told_it_needs_one) {
    fx_site("lab", SITE_LAB);
    fx_gpu_node(.name = "l1", .site = "lab", .owner = "amy", .cls = RTX4090, .gpus = 1);
    Decision d = fx_req(.id = "v", .user = "amy", .kind = WORKLOAD_VM, .guest = GUEST_MACOS,
                        .class_name = "cpu");
    expect(&d, DECISION_REFUSED, SCHED_REASON_MACOS_GUEST_NOT_MAC);
}

/* R18: a size no node meets is refused with both sizes, the one asked and the largest node's
 * (GPUs of the class, cores, a Mac's usable GPU memory), not only "too large". */
Test(reasons, r18_a_size_no_node_meets_is_refused_naming_the_largest_node) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8);
    fx_gpu_node(.name = "c2", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 4);
    Decision d = fx_req(.id = "g", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100,
                        .count = 9);
    expect(&d, DECISION_REFUSED, SCHED_REASON_TOO_LARGE);
    cr_assert(strstr(d.message, "has 9 GPUs of the class (the most one node has is 8;"), "%s",
              d.message);
    d = fx_req(.id = "c", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = "cpu",
               .count = 40);
    expect(&d, DECISION_REFUSED, SCHED_REASON_TOO_LARGE);
    cr_assert(strstr(d.message, "has 40 cores (the most one node has is 32;"), "%s", d.message);
    /* Waiting for nodes that may join, it is told the same sizes. */
    d = fx_req(.id = "w", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100,
               .count = 12, .wait_for_nodes = true);
    expect(&d, DECISION_WAITING, SCHED_REASON_TOO_LARGE);
    cr_assert(strstr(d.message, "has 12 GPUs of the class (the most one node has is 8;"), "%s",
              d.message);
    fx_site("home", SITE_SOLO);
    fx_mac("mac", "home", "amy", 64, 40);
    d = fx_req(.id = "m", .user = "amy", .kind = WORKLOAD_ENDPOINT, .class_name = MAC64,
               .memory_gb = 50);
    expect(&d, DECISION_REFUSED, SCHED_REASON_TOO_LARGE);
    cr_assert(strstr(d.message, "offers this user 50 GB of GPU memory (the most one offers is 40 "
                                "GB"),
              "%s", d.message);
    /* The sentence is whole, to its way out (it was once cut at 255 bytes mid-word). */
    const char *tail = "; ask with wait_for_nodes to wait for nodes that may join (R18)";
    size_t ml = strlen(d.message), tl = strlen(tail);
    cr_assert(ml > tl && strcmp(d.message + ml - tl, tail) == 0, "%s", d.message);
}

/* R18: a gang that waits on a node with fewer of its GPUs free is told it needs them free at
 * once on one node, never "every unit is taken" while units are free; one GPU is told the
 * units are taken. */
Test(reasons, r18_a_waiting_gang_is_told_it_needs_its_gpus_free_on_one_node) {
    dc();
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8);
    fx_req(.id = "one", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    Decision d = fx_req(.id = "gang", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100,
                        .count = 8);
    expect(&d, DECISION_WAITING, SCHED_REASON_NO_CAPACITY);
    cr_assert(strstr(d.message, "has 8 GPUs of the class free at once") &&
                      !strstr(d.message, "every unit"),
              "%s", d.message);
    fx_req(.id = "rest", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = "cpu",
           .count = 32);
    d = fx_req(.id = "cores", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = "cpu",
               .count = 2);
    expect(&d, DECISION_WAITING, SCHED_REASON_NO_CAPACITY);
    cr_assert(strstr(d.message, "has 2 cores free at once"), "%s", d.message);
    fx_release("one");
    expect_placed("gang");
}

/* R18: the class's only GPU is in MIG mode and cordoned, and nothing is allocated anywhere:
 * never "every unit is taken"; the mode (MIG on) is what always has to go for a whole GPU. */
Test(reasons, r18_a_whole_gpu_request_facing_only_a_cordoned_mig_gpu_is_not_told_taken) {
    dc();
    fx_gpu_node(.name = "m", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1, .kata = true, .mig_in_kata = true, .mig_enabled = true);
    cr_assert_eq(sched_node_set_cordoned(fx, "m", true, 0, &err), 0, "%s", err.message);
    Decision d = fx_req(.id = "w", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    cr_assert_eq(d.kind, DECISION_WAITING, "%s", d.message);
    cr_assert_neq(d.reason, SCHED_REASON_NO_CAPACITY, "%s", d.message);
    expect(&d, DECISION_WAITING, SCHED_REASON_MODE_MISMATCH);
}

/* R18: a VM gang of two, with one passthrough GPU on a node too small for it and two GPUs on
 * a container node, one of them taken: the release alone would not let it run, the mode
 * would; the small node names nothing, since nothing removed there lets it run. The same on a
 * lab machine whose GPUs are split between the bindings (R7), the host one taken. */
Test(reasons, r18_a_gang_kept_by_the_mode_is_told_the_mode_even_with_gpus_taken) {
    dc();
    sched_site_trust(fx, "dc", "ops", true, NULL);
    fx_gpu_node(.name = "n1", .site = "dc", .owner = "ops", .mode = "vm-passthrough", .cls = H100,
                .gpus = 1, .binding = BINDING_VFIO);
    fx_gpu_node(.name = "n2", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 2);
    Decision c = fx_req(.id = "c", .user = "ops", .kind = WORKLOAD_CONTAINER, .class_name = H100);
    cr_assert_eq(c.kind, DECISION_PLACED, "%s", c.message);
    Decision d =
            fx_req(.id = "vm", .user = "ops", .kind = WORKLOAD_VM, .class_name = H100, .count = 2);
    expect(&d, DECISION_WAITING, SCHED_REASON_MODE_MISMATCH);
    fx_release("c");
    cr_assert_eq(sched_request_decision(fx, "vm", &d), 0);
    expect(&d, DECISION_WAITING, SCHED_REASON_MODE_MISMATCH);

    fx_site("lab", SITE_LAB);
    DeviceSpec devs[2] = {{.class_name = H200, .binding = BINDING_HOST},
                          {.class_name = H200, .binding = BINDING_VFIO}};
    NodeSpec spec = {.name = "lab1",
                     .site = "lab",
                     .owner = "amy",
                     .cpu_cores = 8,
                     .devices = devs,
                     .n_devices = 2};
    cr_assert_eq(sched_add_node(fx, &spec, 0, &err), 0, "%s", err.message);
    c = fx_req(.id = "lc", .user = "amy", .kind = WORKLOAD_CONTAINER, .class_name = H200);
    cr_assert_eq(c.kind, DECISION_PLACED, "%s", c.message);
    d = fx_req(.id = "lvm", .user = "amy", .kind = WORKLOAD_VM, .class_name = H200, .count = 2);
    expect(&d, DECISION_WAITING, SCHED_REASON_MODE_MISMATCH);
}
