/* capacity.c: capacity per class, per mode and per site (R6), and what a datacenter node
 * advertises to Kubernetes in its mode (R3). Computed from the devices on demand. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched-internal.h"

typedef struct Acc {
    uint64_t total, allocated, free, cordoned, quarantined;
} Acc;

/* Count one unit-carrying thing into acc by its state. */
static void count_units(Acc *a, uint64_t units, uint64_t allocated, bool quarantined,
                        bool cordoned) {
    a->total += units;
    a->allocated += allocated;
    uint64_t rest = units - allocated;
    if (quarantined)
        a->quarantined += rest;
    else if (cordoned)
        a->cordoned += rest;
    else
        a->free += rest;
}

static size_t slot(const Sched *s, int cls, uint32_t site, CapacityMode m) {
    return ((size_t)cls * s->n_sites + site) * _CAPACITY_MODE_MAX + m;
}

static void count_mig(const Sched *s, const Node *n, const Device *d, Acc *acc, uint32_t site) {
    for (size_t c = 0; c < s->cat->n_classes; c++) {
        const GpuClass *g = &s->cat->classes[c];
        if (g->mig_parent_index != d->cls)
            continue;
        const MigShapeInfo *si = mig_shape_info(g->mig_shape);
        uint64_t alloc = 0;
        for (unsigned i = 0; i < d->n_allocs; i++)
            alloc += s->reqs[dev_allocs_const(d)[i]].pcls == (int)c;
        Acc *a = &acc[slot(s, (int)c, site, CAPACITY_CONTAINER)];
        if (!device_offers_mig(d, g->mig_shape)) {
            /* NVML has no such profile on this GPU (R2c): none to offer, only what runs. */
            a->total += alloc;
            a->allocated += alloc;
            continue;
        }
        uint64_t fits = mig_count_placeable(d->mig_layout, g->mig_shape);
        a->total += si->max_instances;
        a->allocated += alloc;
        if (d->quarantined)
            a->quarantined += fits;
        else if (d->cordoned || !node_schedulable(n) || d->binding != BINDING_HOST)
            a->cordoned += fits;
        else
            a->free += fits;
    }
}

static Acc *tally(const Sched *s) {
    size_t cells = MAX(s->cat->n_classes, 1) * MAX(s->n_sites, 1) * _CAPACITY_MODE_MAX;
    Acc *acc = calloc(cells, sizeof(Acc));
    if (!acc)
        return NULL;
    for (size_t k = 0; k < s->n_order; k++) {
        const Node *n = &s->nodes[s->order[k]];
        bool down = !node_schedulable(n);
        if (s->cpu_class >= 0 && n->cpu_cores)
            count_units(&acc[slot(s, s->cpu_class, n->site, CAPACITY_CPU)], n->cpu_cores,
                        n->cpu_used, false, down);
        for (unsigned i = 0; i < n->n_devices; i++) {
            const Device *d = &n->devices[i];
            if (d->cls < 0)
                continue;
            if (n->platform == PLATFORM_MACOS) {
                count_units(&acc[slot(s, d->cls, n->site, CAPACITY_APPLE)], 1, d->n_allocs > 0,
                            d->quarantined, down || d->cordoned);
                continue;
            }
            /* A GPU in MIG mode whose class lists no MIG profile offers no slice: it is still
             * one of the class's GPUs, counted as a whole one that takes no work until MIG is
             * off (R6, R8: shown, never dropped). */
            if (d->mig_enabled && s->cat->classes[d->cls].n_mig_profiles == 0) {
                count_units(&acc[slot(s, d->cls, n->site, CAPACITY_CONTAINER)], 1, d->n_allocs > 0,
                            d->quarantined, true);
                continue;
            }
            if (d->mig_enabled) {
                count_mig(s, n, d, acc, n->site);
                continue;
            }
            bool vfio = d->binding == BINDING_VFIO;
            /* A consumer GPU not yet reset-checked is not offered for VFIO use (R9). */
            bool held = vfio && s->cat->classes[d->cls].consumer && !d->reset_verified;
            count_units(&acc[slot(s, d->cls, n->site, vfio ? CAPACITY_VM : CAPACITY_CONTAINER)], 1,
                        d->n_allocs > 0, d->quarantined, down || d->cordoned || held);
        }
    }
    return acc;
}

static CapacityMode natural_mode(const GpuClass *g) {
    return g->vendor == VENDOR_CPU     ? CAPACITY_CPU
           : g->vendor == VENDOR_APPLE ? CAPACITY_APPLE
                                       : CAPACITY_CONTAINER;
}

static CapacityRow make_row(const Sched *s, int c, const char *site, CapacityMode m, const Acc *a) {
    const GpuClass *g = &s->cat->classes[c];
    return (CapacityRow){
            .class_index = c,
            .class_name = g->name,
            .site = site,
            .mode = m,
            .resource = m == CAPACITY_VM          ? g->vm_device_name
                        : m == CAPACITY_CONTAINER ? g->container_resource
                                                  : NULL,
            .node_selector = m == CAPACITY_CONTAINER ? g->node_selector : NULL,
            .total = a->total,
            .allocated = a->allocated,
            .free = a->free,
            .cordoned = a->cordoned,
            .quarantined = a->quarantined,
    };
}

int sched_capacity(const Sched *s, CapacityRow **ret, size_t *ret_n, Error *err) {
    Acc *acc = tally(s);
    size_t nc = s->cat->n_classes;
    size_t max_rows = nc * (s->n_sites + 1) * _CAPACITY_MODE_MAX + nc;
    CapacityRow *rows = calloc(MAX(max_rows, 1), sizeof(CapacityRow));
    if (!acc || !rows) {
        free(acc);
        free(rows);
        return error_set(err, -ENOMEM, "out of memory");
    }
    size_t k = 0;
    for (size_t c = 0; c < nc; c++) {
        bool any = false;
        for (int m = 0; m < _CAPACITY_MODE_MAX; m++) {
            Acc sum = {0};
            for (size_t st = 0; st < s->n_sites; st++) {
                const Acc *a = &acc[slot(s, (int)c, (uint32_t)st, (CapacityMode)m)];
                if (!a->total)
                    continue;
                rows[k++] = make_row(s, (int)c, s->sites[st].name, (CapacityMode)m, a);
                sum.total += a->total;
                sum.allocated += a->allocated;
                sum.free += a->free;
                sum.cordoned += a->cordoned;
                sum.quarantined += a->quarantined;
            }
            if (sum.total) {
                rows[k++] = make_row(s, (int)c, NULL, (CapacityMode)m, &sum);
                any = true;
            }
        }
        if (!any) {
            Acc zero = {0};
            rows[k++] = make_row(s, (int)c, NULL, natural_mode(&s->cat->classes[c]), &zero);
        }
    }
    free(acc);
    *ret = rows;
    *ret_n = k;
    return 0;
}

int sched_capacity_class(const Sched *s, const char *class_name, const char *site,
                         CapacityMode mode, CapacityRow *ret, Error *err) {
    int c = class_name ? catalog_find_index(s->cat, class_name) : -1;
    if (c < 0)
        return error_set(err, -ENOENT, "no class named '%s'", strempty(class_name));
    uint32_t si = 0;
    if (site && !strmap_get(&s->site_map, site, &si))
        return error_set(err, -ENOENT, "no site named '%s'", site);
    Acc *acc = tally(s);
    if (!acc)
        return error_set(err, -ENOMEM, "out of memory");
    Acc sum = {0};
    for (size_t st = 0; st < s->n_sites; st++)
        for (int m = 0; m < _CAPACITY_MODE_MAX; m++) {
            if ((site && st != si) || ((int)mode >= 0 && m != (int)mode))
                continue;
            const Acc *a = &acc[slot(s, c, (uint32_t)st, (CapacityMode)m)];
            sum.total += a->total;
            sum.allocated += a->allocated;
            sum.free += a->free;
            sum.cordoned += a->cordoned;
            sum.quarantined += a->quarantined;
        }
    free(acc);
    *ret = make_row(s, c, site ? s->sites[si].name : NULL,
                    (int)mode >= 0 ? mode : natural_mode(&s->cat->classes[c]), &sum);
    return 0;
}

size_t sched_unclassified_count(const Sched *s) {
    size_t k = 0;
    for (size_t i = 0; i < s->n_order; i++) {
        const Node *n = &s->nodes[s->order[i]];
        for (unsigned j = 0; j < n->n_devices; j++)
            k += n->devices[j].cls < 0;
    }
    return k;
}

static void add_resource(ResourceCount *rc, size_t *n, const char *name, uint64_t count) {
    if (!name)
        return;
    for (size_t i = 0; i < *n; i++)
        if (STREQ(rc[i].name, name)) {
            rc[i].count += count;
            return;
        }
    rc[(*n)++] = (ResourceCount){name, count};
}

int sched_node_resources(const Sched *s, const char *node, ResourceCount **ret, size_t *ret_n,
                         Error *err) {
    uint32_t ni;
    int r = node_lookup(s, node, &ni, err);
    if (r < 0)
        return r;
    const Node *n = &s->nodes[ni];
    ResourceCount *rc = calloc((size_t)SCHED_NODE_MAX_DEVICES * (_MIG_SHAPE_MAX + 1), sizeof(*rc));
    if (!rc)
        return error_set(err, -ENOMEM, "out of memory");
    size_t k = 0;
    for (unsigned i = 0; i < n->n_devices; i++) {
        const Device *d = &n->devices[i];
        if (d->cls < 0 || n->platform != PLATFORM_LINUX)
            continue;
        const GpuClass *g = &s->cat->classes[d->cls];
        if (d->binding == BINDING_VFIO) {
            add_resource(rc, &k, g->vm_device_name, 1);
            continue;
        }
        if (!d->mig_enabled) {
            add_resource(rc, &k, g->container_resource, 1);
            continue;
        }
        /* A MIG GPU advertises its slices: those running plus those that still fit. */
        for (size_t c = 0; c < s->cat->n_classes; c++) {
            const GpuClass *sl = &s->cat->classes[c];
            if (sl->mig_parent_index != d->cls)
                continue;
            uint64_t cnt = device_offers_mig(d, sl->mig_shape)
                                   ? mig_count_placeable(d->mig_layout, sl->mig_shape)
                                   : 0;
            for (unsigned j = 0; j < d->n_allocs; j++)
                cnt += s->reqs[dev_allocs_const(d)[j]].pcls == (int)c;
            if (cnt)
                add_resource(rc, &k, sl->container_resource, cnt);
        }
    }
    *ret = rc;
    *ret_n = k;
    return 0;
}
