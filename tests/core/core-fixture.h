/* core-fixture.h: a small world for placement tests: the shipped catalog, sites, nodes. */
#pragma once

#include <criterion/criterion.h>
#include <string.h>

#include "config/catalog-yaml.h"
#include "core/sched.h"

extern Catalog *fx_cat;
extern Sched *fx;

/* Load the shipped catalog and a Sched with the invariant check after every mutation. */
void fx_setup(void);
void fx_teardown(void);

void fx_site(const char *name, SiteKind kind);
/* A Linux node with `gpus` GPUs of one class. Fields left out are zero: no mode label (solo
 * and lab sites, where the binding applies), BINDING_HOST, no Kata, no MIG. */
typedef struct FxGpuNode {
    const char *name, *site, *owner;
    const char *mode; /* the datacenter mode label, or NULL */
    const char *cls;
    unsigned gpus;
    Binding binding;
    bool kata, mig_in_kata, mig_enabled;
    /* The MIG profiles every GPU's NVML offers (R2c), NULL-terminated; NULL: not reported. */
    const char *const *mig_profiles;
} FxGpuNode;
#define fx_gpu_node(...) fx_gpu_node_add((FxGpuNode){__VA_ARGS__})
void fx_gpu_node_add(FxGpuNode node);
void fx_mac(const char *name, const char *site, const char *owner, unsigned unified_gb,
            unsigned usable_gb);

/* Submit a request at time `now`; returns the decision. */
#define fx_req(...) fx_submit((RequestSpec){__VA_ARGS__}, 0)
Decision fx_submit(RequestSpec spec, uint64_t now);
void fx_release(const char *id);

/* A seeded xorshift64* stream, the same on every machine, for the randomized tests: a failure
 * names its op, and the seed replays it. fx_pick(n) is uniform enough over [0, n). */
void fx_seed(uint64_t seed);
unsigned fx_pick(unsigned n);
