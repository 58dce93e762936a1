/* test-random.c: a seeded, reproducible run of many random operations (add and remove nodes,
 * submit, release, cordon, quarantine, change modes and bindings, MIG on/off, reset checks,
 * trust, advance the clock, ids announced ahead) with the whole-state invariant check (R15,
 * R16, bookkeeping) after every one. EINSORA_RANDOM_OPS sets the count (default 200,000 in the
 * unit suite; the slow tier runs 1,000,000) and EINSORA_RANDOM_SEED the seed; a failure names
 * the op number to replay. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "core-fixture.h"

TestSuite(random, .init = fx_setup, .fini = fx_teardown);

static size_t by_method[_METHOD_MAX];

static const char *const classes[] = {
        "nvidia-h100-80gb",
        "nvidia-h100-80gb-mig-1g.10gb",
        "nvidia-h100-80gb-mig-3g.40gb",
        "nvidia-h100-80gb-mig-1g.20gb",
        "nvidia-rtx-4090",
        "amd-mi300x",
        "apple-silicon-64gb",
        "apple-silicon-16gb",
        "cpu",
        "nvidia-a100-vgpu",
};
static const char *const users[] = {"ops", "amy", "bob", "staff", "eve"};
static const char *const node_names[] = {"dc-c",  "dc-v",  "dc-m",  "lab-1",
                                         "lab-2", "mac-1", "mac-2", "home"};
static const char *const sites[] = {"dc", "dc", "dc", "lab", "lab", "lab", "home", "home"};

static void add_node(unsigned k) {
    DeviceSpec devs[4];
    NodeSpec spec = {.name = node_names[k],
                     .site = sites[k],
                     .owner = users[k % 3],
                     .cpu_cores = 8 + fx_pick(24),
                     .kata = fx_pick(2),
                     .mig_in_kata = fx_pick(3) == 0,
                     .devices = devs};
    SchedLabel label = {SCHED_MODE_LABEL, fx_pick(2) ? "container" : "vm-passthrough"};
    if (k < 3) {
        spec.owner = "ops";
        spec.labels = &label;
        spec.n_labels = 1;
    }
    if (k == 5 || k == 6) {
        spec.platform = PLATFORM_MACOS;
        spec.apple_unified_memory_gb = k == 5 ? 64 : 16;
        spec.apple_usable_memory_gb = k == 5 ? 48 : 12;
    } else {
        spec.n_devices = 1 + fx_pick(4);
        const char *cls = k == 3 ? "nvidia-rtx-4090" : k == 4 ? "amd-mi300x" : "nvidia-h100-80gb";
        for (size_t i = 0; i < spec.n_devices; i++)
            devs[i] = (DeviceSpec){.class_name = cls,
                                   .binding = (Binding)fx_pick(2),
                                   .mig_enabled = cls[7] == 'h' && fx_pick(2),
                                   .reset_verified = fx_pick(2)};
    }
    Error err = {0};
    int r = sched_add_node(fx, &spec, 0, &err);
    cr_assert(r == 0 || r == -EEXIST, "%s", err.message);
}

static void submit(unsigned op, uint64_t now) {
    char id[32];
    snprintf(id, sizeof(id), "r%u", fx_pick(64));
    static const char *fb[3];
    RequestSpec spec = {.id = id,
                        .user = users[fx_pick(ARRAY_SIZE(users))],
                        .kind = (WorkloadKind)fx_pick(4),
                        .guest = (GuestOs)fx_pick(2),
                        .class_name = classes[fx_pick(ARRAY_SIZE(classes))],
                        .count = fx_pick(4) == 0 ? 2 + fx_pick(3) : 1,
                        .share = fx_pick(3) == 0,
                        .submitted = now,
                        .runtime = fx_pick(4) == 0 ? (EndpointRuntime)fx_pick(4)
                                                   : ENDPOINT_RUNTIME_NONE,
                        .memory_gb = fx_pick(3) == 0 ? fx_pick(40) : 0};
    if (fx_pick(8) == 0)
        spec.class_name = NULL;
    if (fx_pick(3) == 0) {
        spec.n_fallback = 1 + fx_pick(2);
        for (size_t i = 0; i < spec.n_fallback; i++)
            fb[i] = classes[fx_pick(ARRAY_SIZE(classes) - 1)];
        spec.fallback = fb;
        spec.wait_s = fx_pick(20);
    }
    Decision d;
    Error err = {0};
    size_t before = sched_request_count(fx);
    cr_assert_eq(sched_submit(fx, &spec, now, &d, &err), 0, "op %u: %s", op, err.message);
    if (d.kind == DECISION_PLACED)
        by_method[d.placement.method]++;
    if (d.kind == DECISION_REFUSED)
        cr_assert_eq(sched_request_count(fx), before, "op %u: a refusal changes nothing", op);
    else
        cr_assert_eq(sched_request_count(fx), before + 1, "op %u", op);
}

static void release_one(uint64_t now) {
    char id[32];
    snprintf(id, sizeof(id), "r%u", fx_pick(64));
    Error err = {0};
    int r = sched_release(fx, id, now, &err);
    cr_assert(r == 0 || r == -ENOENT, "%s", err.message);
}

static void node_op(uint64_t now) {
    const char *n = node_names[fx_pick(ARRAY_SIZE(node_names))];
    unsigned dev = fx_pick(4);
    Error err = {0};
    int r;
    switch (fx_pick(10)) {
    case 0:
        r = sched_remove_node(fx, n, &err);
        cr_assert(r == 0 || r == -EBUSY || r == -ENOENT, "%s", err.message);
        break;
    case 1:
        r = sched_node_set_cordoned(fx, n, fx_pick(2), now, &err);
        break;
    case 2:
        r = sched_node_set_mode(fx, n, fx_pick(2) ? NODE_MODE_CONTAINER : NODE_MODE_VM_PASSTHROUGH,
                                now, &err);
        break;
    case 3:
        r = sched_device_set_cordoned(fx, n, dev, fx_pick(3) == 0, now, &err);
        break;
    case 4:
        r = sched_device_set_quarantine(fx, n, dev, fx_pick(3) == 0 ? "bad" : NULL, now, &err);
        break;
    case 5:
        r = sched_device_set_binding(fx, n, dev, (Binding)fx_pick(2), now, &err);
        break;
    case 6:
        r = sched_device_set_mig(fx, n, dev, fx_pick(2), now, &err);
        break;
    case 7:
        r = sched_device_reset_result(fx, n, dev, fx_pick(4) != 0, NULL, now, &err);
        break;
    case 8:
        r = sched_node_set_capabilities(fx, n, fx_pick(2), fx_pick(2), now, &err);
        break;
    default:
        r = sched_node_set_unreachable(fx, n, fx_pick(4) == 0, now, &err);
    }
    cr_assert(r <= 0);
}

Test(random, r15_r16_invariants_hold_after_every_random_operation, .timeout = 600) {
    const char *e = getenv("EINSORA_RANDOM_OPS");
    unsigned ops = e ? (unsigned)strtoul(e, NULL, 10) : 200000;
    e = getenv("EINSORA_RANDOM_SEED");
    fx_seed(e ? strtoull(e, NULL, 10) : 0x5eed1234abcdull);
    fx_site("dc", SITE_DATACENTER);
    fx_site("lab", SITE_LAB);
    fx_site("home", SITE_SOLO);
    Error err = {0};
    sched_site_trust(fx, "dc", "staff", true, &err);
    sched_site_trust(fx, "lab", "bob", true, &err);
    uint64_t now = 0;
    size_t placed_seen = 0;
    for (unsigned op = 0; op < ops; op++) {
        /* Ids announced ahead as a stream's caller would (sched_announce(): a hint), here with
         * no look at what comes: requests placed, waiting, gone, on nodes since removed. Taken
         * from the op number, not the seeded stream, so that the operations stay the same. */
        char ahead[16];
        snprintf(ahead, sizeof(ahead), "r%u", op * 7 % 64);
        sched_announce(fx, ahead);
        unsigned what = fx_pick(100);
        if (what < 40)
            submit(op, now);
        else if (what < 70)
            release_one(now);
        else if (what < 80)
            node_op(now);
        else if (what < 85)
            add_node(fx_pick(ARRAY_SIZE(node_names)));
        else if (what < 88)
            sched_site_trust(fx, fx_pick(2) ? "dc" : "lab", users[fx_pick(ARRAY_SIZE(users))],
                             fx_pick(2), &err);
        else {
            now += fx_pick(5);
            sched_tick(fx, now);
        }
        placed_seen += sched_request_count(fx) - sched_waiting_count(fx);
    }
    /* The check also ran after every mutation inside the Sched (fx_setup turns it on). */
    cr_assert_eq(sched_check(fx, &err), 0, "%s", err.message);
    cr_assert(ops == 0 || placed_seen > 0, "the run placed something");
    /* A long run reaches every delivery method, so every rule set was exercised. */
    for (int m = 0; ops >= 100000 && m < _METHOD_MAX; m++)
        cr_assert(by_method[m] > 0, "no placement by %s in %u ops", method_to_string((Method)m),
                  ops);
}
