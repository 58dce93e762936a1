/* core-fixture.c: helpers shared by the core tests. */
#include "core-fixture.h"

Catalog *fx_cat;
Sched *fx;

void fx_setup(void) {
    Error err = {0};
    cr_assert_eq(catalog_load_file(TEST_DATA "/catalog.yaml", NULL, &fx_cat, &err), 0, "%s",
                 err.message);
    fx = sched_new(fx_cat);
    cr_assert_not_null(fx);
    sched_set_check_invariants(fx, true);
    sched_set_own_lists_min(fx, 0); /* every owner's pool lists built and checked */
}

void fx_teardown(void) {
    sched_free(fx);
    catalog_free(fx_cat);
    fx = NULL;
    fx_cat = NULL;
}

void fx_site(const char *name, SiteKind kind) {
    Error err = {0};
    cr_assert_eq(sched_add_site(fx, name, kind, &err), 0, "%s", err.message);
}

void fx_gpu_node_add(FxGpuNode node) {
    DeviceSpec devs[SCHED_NODE_MAX_DEVICES];
    cr_assert_leq(node.gpus, SCHED_NODE_MAX_DEVICES);
    size_t n_profiles = 0;
    while (node.mig_profiles && node.mig_profiles[n_profiles])
        n_profiles++;
    for (unsigned i = 0; i < node.gpus; i++)
        devs[i] = (DeviceSpec){.class_name = node.cls,
                               .binding = node.binding,
                               .mig_enabled = node.mig_enabled,
                               .mig_profiles_reported = node.mig_profiles != NULL,
                               .mig_profiles = node.mig_profiles,
                               .n_mig_profiles = n_profiles};
    SchedLabel label = {SCHED_MODE_LABEL, node.mode};
    NodeSpec spec = {.name = node.name,
                     .site = node.site,
                     .platform = PLATFORM_LINUX,
                     .owner = node.owner,
                     .labels = node.mode ? &label : NULL,
                     .n_labels = node.mode ? 1 : 0,
                     .kata = node.kata,
                     .mig_in_kata = node.mig_in_kata,
                     .cpu_cores = 32,
                     .devices = devs,
                     .n_devices = node.gpus};
    Error err = {0};
    cr_assert_eq(sched_add_node(fx, &spec, 0, &err), 0, "%s", err.message);
}

void fx_mac(const char *name, const char *site, const char *owner, unsigned unified_gb,
            unsigned usable_gb) {
    NodeSpec spec = {.name = name,
                     .site = site,
                     .platform = PLATFORM_MACOS,
                     .owner = owner,
                     .cpu_cores = 10,
                     .apple_unified_memory_gb = unified_gb,
                     .apple_usable_memory_gb = usable_gb};
    Error err = {0};
    cr_assert_eq(sched_add_node(fx, &spec, 0, &err), 0, "%s", err.message);
}

Decision fx_submit(RequestSpec spec, uint64_t now) {
    Decision d;
    Error err = {0};
    if (!spec.submitted)
        spec.submitted = now;
    cr_assert_eq(sched_submit(fx, &spec, now, &d, &err), 0, "%s", err.message);
    return d;
}

void fx_release(const char *id) {
    Error err = {0};
    cr_assert_eq(sched_release(fx, id, 0, &err), 0, "%s", err.message);
}

static uint64_t fx_rng = 1;

void fx_seed(uint64_t seed) {
    fx_rng = seed ? seed : 1; /* xorshift never leaves 0 */
}

unsigned fx_pick(unsigned n) {
    fx_rng ^= fx_rng >> 12;
    fx_rng ^= fx_rng << 25;
    fx_rng ^= fx_rng >> 27;
    return (unsigned)(fx_rng * 2685821657736338717ull % n);
}
