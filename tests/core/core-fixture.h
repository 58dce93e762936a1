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
/* A Linux node with n GPUs of one class; mode NULL for solo/lab (binding applies). */
void fx_gpu_node(const char *name, const char *site, const char *owner, const char *mode, const char *cls,
                 unsigned n, Binding binding, bool kata, bool mig_in_kata, bool mig_enabled);
void fx_mac(const char *name, const char *site, const char *owner, unsigned unified_gb, unsigned usable_gb);

/* Submit a request at time `now`; returns the decision. */
#define fx_req(...) fx_submit((RequestSpec){__VA_ARGS__}, 0)
Decision fx_submit(RequestSpec spec, uint64_t now);
void fx_release(const char *id);
