/* place.c: finding room for a request (best-fit whole GPUs, fragmentation-aware MIG slots,
 * same-user time slices, the owner's Macs, cpu cores), applying and undoing placements, and
 * the nodes waiting gangs reserve (why a request waits: diagnose.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched-internal.h"

/* ---- MIG slot preferences ---- */

/* Placeability value of a layout: how much of each profile still fits, weighted by size, so
 * that losing room for a 7g or 4g costs more than losing a 1g. */
static unsigned mig_value(uint8_t layout) {
    unsigned v = 0;
    for (int sh = 0; sh < _MIG_SHAPE_MAX; sh++)
        v += mig_count_placeable(layout, (MigShape)sh) * mig_shape_info((MigShape)sh)->mem_slots;
    return v;
}

typedef struct Scored {
    MigChoice c;
    unsigned loss, used;
} Scored;

static int scored_cmp(const void *a, const void *b) {
    const Scored *x = a, *y = b;
    if (x->loss != y->loss)
        return x->loss < y->loss ? -1 : 1;
    if (x->used != y->used) /* fuller GPUs first: keep empty ones whole */
        return x->used > y->used ? -1 : 1;
    if (x->c.layout != y->c.layout)
        return x->c.layout < y->c.layout ? -1 : 1;
    return x->c.start < y->c.start ? -1 : x->c.start > y->c.start;
}

void mig_prefs_build(Sched *s) {
    for (int sh = 0; sh < _MIG_SHAPE_MAX; sh++)
        for (unsigned layout = 0; layout < 256; layout++) {
            s->mig_fits[sh][layout] = (uint8_t)mig_count_placeable((uint8_t)layout, (MigShape)sh);
            for (unsigned start = 0; start < MIG_SLOTS; start++)
                if (mig_can_place((uint8_t)layout, (MigShape)sh, start))
                    s->mig_starts[sh][layout] |= (uint8_t)(1u << start);
        }
    for (int sh = 0; sh < _MIG_SHAPE_MAX; sh++) {
        Scored tmp[256 * MIG_SLOTS];
        size_t k = 0;
        for (unsigned layout = 0; layout < 256; layout++)
            for (unsigned start = 0; start < MIG_SLOTS; start++)
                if (mig_can_place((uint8_t)layout, (MigShape)sh, start)) {
                    uint8_t after = (uint8_t)(layout | mig_shape_mask((MigShape)sh, start));
                    tmp[k++] = (Scored){{(uint8_t)layout, (uint8_t)start},
                                        mig_value((uint8_t)layout) - mig_value(after),
                                        (unsigned)__builtin_popcount(layout)};
                }
        qsort(tmp, k, sizeof(tmp[0]), scored_cmp);
        s->mig_pref[sh] = malloc(k * sizeof(MigChoice));
        if (!s->mig_pref[sh])
            continue; /* sched_new checks */
        for (size_t i = 0; i < k; i++) {
            s->mig_pref[sh][i] = tmp[i].c;
            if (s->mig_rank)
                s->mig_rank[sh][tmp[i].c.layout][tmp[i].c.start] = (uint16_t)i;
        }
        s->n_mig_pref[sh] = k;
    }
}

/* ---- eligibility ---- */

static bool class_access(const Sched *s, const Req *r, const Node *n, const GpuClass *g,
                         Relation rel) {
    (void)r;
    return class_access_at(s, n->site, g, rel);
}

/* The users of a device's allocations: true when all are `user` (or there are none). */
bool device_only_user(const Sched *s, const Device *d, uint32_t user) {
    for (unsigned i = 0; i < d->n_allocs; i++)
        if (s->reqs[dev_allocs_const(d)[i]].user != user)
            return false;
    return true;
}

bool mig_joinable(const Sched *s, const Node *n, const Device *d, uint32_t user, bool kata) {
    if (device_only_user(s, d, user))
        return true;
    /* Different users share a GPU only through slices that all run under Kata on a
     * mig_in_kata node (R2c, R15). */
    if (!kata || !n->kata || !n->mig_in_kata)
        return false;
    for (unsigned i = 0; i < d->n_allocs; i++)
        if (s->reqs[dev_allocs_const(d)[i]].crt != CONTAINER_RUNTIME_KATA)
            return false;
    return true;
}

/* A backfill never takes a GPU of class c on a node an older waiting gang of c reserved. */
static bool reserved_against(const Sched *s, const Want *w, int c, uint32_t ni) {
    const Node *n = &s->nodes[ni];
    return w->backfill && n->reserved_by != NIL && n->reserved_choice == c &&
           n->reserved_seq < w->r->seq;
}

/* Writes the placement fields of out only; the request itself is read from r. */
static void fill(const Sched *s, const Req *r, Req *out, uint32_t ni, int c, Method m) {
    out->node = ni;
    out->pcls = c;
    out->method = m;
    out->crt = policy_container_runtime(s, r, &s->nodes[ni], m);
    out->ert = policy_endpoint_runtime(r, c >= 0 ? (int)s->cat->classes[c].vendor : VENDOR_CPU);
    out->n_dev = 0;
    out->mig_start = out->mig_slots = 0;
    out->cores = 0;
    out->mem = 0;
}

static unsigned take_free_devices(const Sched *s, const Node *n, int c, Binding b, unsigned count,
                                  Req *out) {
    /* The pool's free mask lists exactly the devices that are free in it, in index order. */
    unsigned k = 0;
    for (unsigned p = 0; p < n->n_pools; p++)
        if (n->pools[p].pool == c * 2 + (int)b) {
            for (uint32_t m = n->pools[p].free_mask; m && k < count; m &= m - 1)
                out->devs[k++] = (uint8_t)__builtin_ctz(m);
            break;
        }
    return k;
}

static bool ts_device_ok(const Sched *s, const Req *r, const Device *d, const Node *n, int c) {
    Relation rel = relation_of(s, n, r->user);
    return d->cls == c && rel != RELATION_STRANGER &&
           class_access(s, r, n, &s->cat->classes[c], rel) && device_only_user(s, d, r->user);
}

static bool find_time_slice(Sched *s, const Want *w, int c, Req *out) {
    const Req *r = w->r;
    for (uint32_t gid = s->users[r->user].ts_head; gid != NIL; gid = dev_of(s, gid)->link.next) {
        uint32_t ni = gid >> DEV_SHIFT;
        if ((w->only != NIL && ni != w->only) ||
            !ts_device_ok(s, r, dev_of(s, gid), &s->nodes[ni], c))
            continue;
        fill(s, r, out, ni, c, METHOD_TIME_SLICE);
        out->devs[0] = (uint8_t)(gid & ((1u << DEV_SHIFT) - 1));
        out->n_dev = 1;
        return true;
    }
    return false;
}

/* Can r take `count` whole GPUs of class c on node ni through binding b? Sets the method. */
static bool whole_node_ok(const Sched *s, const Want *w, int c, uint32_t ni, Binding b, Method *m) {
    const Req *r = w->r;
    const Node *n = &s->nodes[ni];
    Relation rel = relation_of(s, n, r->user);
    if (n->platform != PLATFORM_LINUX || !class_access(s, r, n, &s->cat->classes[c], rel) ||
        reserved_against(s, w, c, ni))
        return false;
    if (r->kind == WORKLOAD_VM) {
        *m = METHOD_PASSTHROUGH;
        return b == BINDING_VFIO;
    }
    bool kata = rel == RELATION_STRANGER;
    /* Kata gets its GPU over VFIO (R2b); runc needs the host driver. */
    if (kata != (b == BINDING_VFIO) || (kata && !n->kata))
        return false;
    *m = (r->share && !kata && r->count == 1) ? METHOD_TIME_SLICE : METHOD_CONTAINER;
    return true;
}

static bool take_whole(Sched *s, const Want *w, int c, uint32_t ni, Binding b, Method m, Req *out) {
    fill(s, w->r, out, ni, c, m);
    out->n_dev = (uint8_t)take_free_devices(s, &s->nodes[ni], c, b, w->r->count, out);
    return out->n_dev == w->r->count;
}

/* Whether the request's own machine in site `site` is for the owner's search, not the sites':
 * a site that trusts the user offers its host pools to their containers itself. */
static bool owner_searches(const Sched *s, const Req *r, uint32_t site, bool owner_only) {
    return r->kind == WORKLOAD_VM || owner_only || !site_trusts(&s->sites[site], r->user);
}

/* Best fit among the nodes r's user owns where a site's pools do not offer them (a site that
 * does not trust the user, an owner-only class, a VM): the fewest free GPUs of class c that
 * hold the request, below *best_k, and among nodes with as many the first in the user's
 * `owned` list. A user with more than Sched.own_lists_min nodes has them found through
 * their pool rows by free GPUs and position in `owned` (User.own_bits), which decides as the
 * scan of `owned` in order does. */
static void find_owned(Sched *s, const Want *w, int c, uint32_t *best, unsigned *best_k,
                       Binding *best_b, Method *best_m) {
    const Req *r = w->r;
    const User *u = &s->users[r->user];
    bool owner_only = s->cat->classes[c].owner_only;
    Binding b = r->kind == WORKLOAD_VM ? BINDING_VFIO : BINDING_HOST;
    Method m;
    if (u->n_owned <= s->own_lists_min || user_own_lists(s, r->user) < 0) {
        for (size_t i = 0; i < u->n_owned && r->count < *best_k; i++) {
            if (!owned_may_have(&u->owned[i], c) ||
                !owner_searches(s, r, u->owned[i].site, owner_only))
                continue;
            uint32_t ni = u->owned[i].node;
            unsigned k = pool_free_of(&s->nodes[ni], c * 2 + b);
            if (k >= r->count && k < *best_k && whole_node_ok(s, w, c, ni, b, &m))
                *best = ni, *best_k = k, *best_b = b, *best_m = m;
        }
        return;
    }
    int pool = c * 2 + b;
    for (uint32_t bk = own_buckets_from(u, pool, r->count); bk; bk &= bk - 1) {
        unsigned k = (unsigned)__builtin_ctz(bk);
        if (k >= *best_k)
            return;
        /* The row's nodes in `owned` order: the first that takes the request is the one. */
        const uint64_t *row = u->own_bits[pool] + k * u->own_words;
        for (size_t wd = 0; wd < u->own_words; wd++)
            for (uint64_t bits = row[wd]; bits; bits &= bits - 1) {
                size_t pos = wd * 64 + (size_t)__builtin_ctzll(bits);
                uint32_t ni = u->owned[pos].node;
                if (owner_searches(s, r, u->owned[pos].site, owner_only) &&
                    whole_node_ok(s, w, c, ni, b, &m)) {
                    *best = ni, *best_k = k, *best_b = b, *best_m = m;
                    return;
                }
            }
    }
}

static bool find_whole(Sched *s, const Want *w, int c, Req *out) {
    const Req *r = w->r;
    const GpuClass *g = &s->cat->classes[c];
    bool vm = r->kind == WORKLOAD_VM;
    unsigned count = r->count;
    if (r->share && !vm && count == 1 && find_time_slice(s, w, c, out))
        return true;
    Method m;
    if (w->only != NIL) {
        Relation rel = relation_of(s, &s->nodes[w->only], r->user);
        Binding b = (vm || rel == RELATION_STRANGER) ? BINDING_VFIO : BINDING_HOST;
        return pool_free_of(&s->nodes[w->only], c * 2 + b) >= count &&
               whole_node_ok(s, w, c, w->only, b, &m) && take_whole(s, w, c, w->only, b, m, out);
    }
    /* Best fit over sites: the node with the fewest free GPUs that holds the gang, so that
     * whole nodes stay free for gangs. A site that trusts the user offers its host pools
     * (runc), one that does not its VFIO pools (VMs, Kata). */
    uint32_t best = NIL;
    unsigned best_k = SCHED_NODE_MAX_DEVICES + 1;
    Binding best_b = BINDING_HOST;
    Method best_m = METHOD_CONTAINER;
    /* Newer than every reserving gang (a fresh submission always is): a node a gang of c
     * holds is closed to it (reserved_against()), which the pool record already says. */
    bool newest = w->backfill && r->seq > s->held_seq_max;
    for (size_t st = 0; st < s->n_sites && !g->owner_only; st++) {
        const Site *site = &s->sites[st];
        bool trusted = r->user < site->n_trusted_cap && site->trusted[r->user];
        if (g->internal_only && !trusted && site->kind == SITE_DATACENTER)
            continue;
        Binding b = (vm || !trusted) ? BINDING_VFIO : BINDING_HOST;
        for (uint32_t bk = pool_buckets_from(site, c * 2 + b, count); bk; bk &= bk - 1) {
            unsigned k = (unsigned)__builtin_ctz(bk);
            if (k >= best_k)
                break;
            if (newest && !site->pool_open[c * 2 + b][k])
                continue; /* every node listed there is held by an older gang of c */
            for (uint32_t id = site->pool_heads[c * 2 + b][k]; id != NIL;) {
                uint32_t ni = id >> POOL_SHIFT;
                const PoolLink *pl = &s->nodes[ni].pools[id & ((1u << POOL_SHIFT) - 1)];
                id = pl->link.next;
                if (newest && pl->held)
                    continue;
                if (whole_node_ok(s, w, c, ni, b, &m)) {
                    best = ni, best_k = k, best_b = b, best_m = m;
                    goto next_site;
                }
            }
        }
    next_site:
        if (best_k == count)
            break;
    }
    /* The user's own machines, in sites that do not trust them: runc on the host pool. */
    if (best_k > count)
        find_owned(s, w, c, &best, &best_k, &best_b, &best_m);
    return best != NIL && take_whole(s, w, c, best, best_b, best_m, out);
}

bool place_whole_free(const Sched *s, uint32_t ni, int c, unsigned ret_free[2]) {
    if (c < 0 || (size_t)c >= s->cat->n_classes || s->cat->classes[c].vendor == VENDOR_APPLE ||
        s->cat->classes[c].mig_parent_index >= 0)
        return false;
    ret_free[BINDING_HOST] = pool_free_of(&s->nodes[ni], c * 2 + BINDING_HOST);
    ret_free[BINDING_VFIO] = pool_free_of(&s->nodes[ni], c * 2 + BINDING_VFIO);
    return true;
}

static bool mig_device_ok(const Sched *s, const Want *w, const GpuClass *g, const Node *n,
                          const Device *d) {
    const Req *r = w->r;
    Relation rel = relation_of(s, n, r->user);
    bool kata_mig = n->kata && n->mig_in_kata;
    if (!class_access(s, r, n, g, rel) || (!kata_mig && rel == RELATION_STRANGER) ||
        d->binding != BINDING_HOST || !d->mig_enabled || !device_offers_mig(d, g->mig_shape) ||
        !device_takes_new_work(n, d))
        return false;
    /* A fallback never joins another user's GPU even with Kata (R13). */
    return w->fallback ? device_only_user(s, d, r->user) : mig_joinable(s, n, d, r->user, kata_mig);
}

static bool take_mig(Sched *s, const Want *w, const GpuClass *g, int c, uint32_t gid,
                     unsigned start, Req *out) {
    fill(s, w->r, out, gid >> DEV_SHIFT, c, METHOD_MIG);
    out->devs[0] = (uint8_t)(gid & ((1u << DEV_SHIFT) - 1));
    out->n_dev = 1;
    out->mig_start = (uint8_t)start;
    out->mig_slots = (uint8_t)mig_shape_info(g->mig_shape)->mem_slots;
    return true;
}

static bool find_mig(Sched *s, const Want *w, int c, Req *out) {
    const GpuClass *g = &s->cat->classes[c];
    int parent = g->mig_parent_index;
    if (w->only != NIL) {
        /* The best (layout, start) among this node's GPUs, by the same preference order. */
        const Node *n = &s->nodes[w->only];
        unsigned best_rank = UINT32_MAX, best_dev = 0, best_start = 0;
        for (unsigned i = 0; i < n->n_devices; i++) {
            const Device *d = &n->devices[i];
            if (d->cls != parent || !mig_device_ok(s, w, g, n, d))
                continue;
            for (unsigned st = 0; st < MIG_SLOTS; st++)
                if ((s->mig_starts[g->mig_shape][d->mig_layout] & (1u << st)) &&
                    s->mig_rank[g->mig_shape][d->mig_layout][st] < best_rank)
                    best_rank = s->mig_rank[g->mig_shape][d->mig_layout][st], best_dev = i,
                    best_start = st;
        }
        return best_rank != UINT32_MAX &&
               take_mig(s, w, g, c, w->only << DEV_SHIFT | best_dev, best_start, out);
    }
    for (size_t i = 0; i < s->n_mig_pref[g->mig_shape]; i++) {
        MigChoice ch = s->mig_pref[g->mig_shape][i];
        for (uint32_t gid = s->mig[parent].heads[ch.layout]; gid != NIL;
             gid = dev_of(s, gid)->link.next)
            if (mig_device_ok(s, w, g, &s->nodes[gid >> DEV_SHIFT], dev_of(s, gid)))
                return take_mig(s, w, g, c, gid, ch.start, out);
    }
    return false;
}

static bool find_apple(Sched *s, const Want *w, int c, Req *out) {
    const Req *r = w->r;
    if (r->user >= s->n_users)
        return false;
    const User *u = &s->users[r->user];
    bool macos_vm = r->kind == WORKLOAD_VM;
    uint32_t best = NIL;
    unsigned best_left = 0;
    for (size_t i = 0; i < u->n_owned; i++) {
        if ((w->only != NIL && u->owned[i].node != w->only) || !owned_may_have(&u->owned[i], c))
            continue;
        const Node *n = &s->nodes[u->owned[i].node];
        if (n->platform != PLATFORM_MACOS || !n->n_devices || n->devices[0].cls != c ||
            !device_takes_new_work(n, &n->devices[0]))
            continue;
        if (macos_vm && n->macos_vms >= SCHED_MAX_MACOS_VMS)
            continue;
        if (n->apple_used_gb + r->memory_gb > n->apple_usable_gb)
            continue;
        if (w->fallback && !device_only_user(s, &n->devices[0], r->user))
            continue;
        unsigned left = n->apple_usable_gb - n->apple_used_gb - r->memory_gb;
        if (best == NIL || left < best_left) {
            best = u->owned[i].node;
            best_left = left;
        }
    }
    if (best == NIL)
        return false;
    fill(s, r, out, best, c, METHOD_APPLE_WHOLE);
    out->devs[0] = 0;
    out->n_dev = 1;
    out->mem = r->memory_gb;
    return true;
}

static bool cpu_node_ok(const Sched *s, const Req *r, const Node *n) {
    if (!node_schedulable(n) || n->cpu_cores - n->cpu_used < r->count)
        return false;
    Relation rel = relation_of(s, n, r->user);
    /* A macOS guest gets paravirtualized Metal, the Mac's one GPU: its owner's only (R10). */
    if (r->kind == WORKLOAD_VM)
        return r->guest != GUEST_MACOS || (n->platform == PLATFORM_MACOS && rel == RELATION_OWNER &&
                                           n->macos_vms < SCHED_MAX_MACOS_VMS);
    if (n->platform == PLATFORM_MACOS)
        return rel != RELATION_STRANGER; /* native processes: no isolation for strangers */
    return rel != RELATION_STRANGER || n->kata;
}

static bool take_cpu(Sched *s, const Req *r, uint32_t ni, Req *out) {
    fill(s, r, out, ni, -1, METHOD_CPU);
    out->pcls = s->cpu_class;
    out->cores = r->count;
    return true;
}

static bool find_cpu(Sched *s, const Want *w, Req *out) {
    const Req *r = w->r;
    if (w->only != NIL)
        return cpu_node_ok(s, r, &s->nodes[w->only]) && take_cpu(s, r, w->only, out);
    for (unsigned b = MIN(r->count, (unsigned)CPU_BUCKETS - 1); b < CPU_BUCKETS; b++)
        for (uint32_t ni = s->cpu_heads[b]; ni != NIL; ni = s->nodes[ni].cpu_link.next)
            if (cpu_node_ok(s, r, &s->nodes[ni]))
                return take_cpu(s, r, ni, out);
    return false;
}

bool place_find(Sched *s, const Want *w, Req *out) {
    if (w->cls == CHOICE_CPU)
        return find_cpu(s, w, out);
    const GpuClass *g = &s->cat->classes[w->cls];
    if (g->vendor == VENDOR_APPLE)
        return find_apple(s, w, w->cls, out);
    if (g->mig_parent_index >= 0)
        return find_mig(s, w, w->cls, out);
    return find_whole(s, w, w->cls, out);
}

/* ---- apply / undo ---- */

static int dev_add_alloc(Device *d, uint32_t ri) {
    if (d->n_allocs == (d->cap_allocs ? d->cap_allocs : DEV_INLINE_ALLOCS)) {
        uint16_t nc = (uint16_t)(d->n_allocs * 2);
        uint32_t *na =
                d->cap_allocs ? realloc(d->al.heap, nc * sizeof(*na)) : malloc(nc * sizeof(*na));
        if (!na)
            return -ENOMEM;
        if (!d->cap_allocs)
            memcpy(na, d->al.inl, sizeof(d->al.inl));
        d->al.heap = na;
        d->cap_allocs = nc;
    }
    dev_allocs(d)[d->n_allocs++] = ri;
    return 0;
}

/* The devices of a placement as a node_refresh_devices() mask (apply and undo change only
 * them, besides the node's counters). */
static uint32_t devs_mask(const Req *r) {
    uint32_t m = 0;
    for (unsigned i = 0; i < r->n_dev; i++)
        m |= r->devs[i] < 32 ? 1u << r->devs[i] : UINT32_MAX;
    return m;
}

static DevUse use_of(Method m) {
    switch (m) {
    case METHOD_TIME_SLICE:
        return USE_TIME_SLICE;
    case METHOD_MIG:
        return USE_MIG;
    case METHOD_APPLE_WHOLE:
        return USE_APPLE;
    default:
        return USE_EXCLUSIVE;
    }
}

int place_apply(Sched *s, uint32_t ri) {
    Req *r = &s->reqs[ri];
    Node *n = &s->nodes[r->node];
    place_prefetch(n, r);
    for (unsigned i = 0; i < r->n_dev; i++)
        if (dev_add_alloc(&n->devices[r->devs[i]], ri) < 0) {
            for (unsigned j = 0; j < i; j++)
                n->devices[r->devs[j]].n_allocs--;
            return -ENOMEM;
        }
    for (unsigned i = 0; i < r->n_dev; i++) {
        Device *d = &n->devices[r->devs[i]];
        d->use = use_of(r->method);
        if (d->use == USE_TIME_SLICE)
            n->ts_devices |= (uint16_t)(1u << r->devs[i]);
        if (r->method == METHOD_MIG)
            d->mig_layout |= (uint8_t)(((1u << r->mig_slots) - 1u) << r->mig_start);
    }
    n->cpu_used += r->cores;
    n->apple_used_gb += r->mem;
    n->macos_vms += r->kind == WORKLOAD_VM && r->guest == GUEST_MACOS;
    n->n_allocs++;
    r->placed = true;
    node_refresh_devices(s, r->node, devs_mask(r));
    return 0;
}

void place_undo(Sched *s, uint32_t ri) {
    Req *r = &s->reqs[ri];
    Node *n = &s->nodes[r->node];
    place_prefetch(n, r);
    for (unsigned i = 0; i < r->n_dev; i++) {
        Device *d = &n->devices[r->devs[i]];
        uint32_t *allocs = dev_allocs(d);
        for (unsigned j = 0; j < d->n_allocs; j++)
            if (allocs[j] == ri) {
                allocs[j] = allocs[--d->n_allocs];
                break;
            }
        if (r->method == METHOD_MIG)
            d->mig_layout &= (uint8_t) ~(((1u << r->mig_slots) - 1u) << r->mig_start);
        if (!d->n_allocs) {
            if (d->use == USE_TIME_SLICE)
                n->ts_devices &= (uint16_t) ~(1u << r->devs[i]);
            d->use = USE_NONE;
        }
        /* A VM (passthrough or Kata) stopped on a consumer card: check its reset again (R9). */
        if (d->binding == BINDING_VFIO && d->cls >= 0 && s->cat->classes[d->cls].consumer)
            d->reset_verified = false;
    }
    n->cpu_used -= r->cores;
    n->apple_used_gb -= r->mem;
    n->macos_vms -= r->kind == WORKLOAD_VM && r->guest == GUEST_MACOS;
    n->n_allocs--;
    r->placed = false;
    node_refresh_devices(s, r->node, devs_mask(r));
}

/* ---- gang reservations and restore ---- */

/* Whether some schedulable, unreserved node among the first RESERVE_FULL_SCAN of class c
 * has enough GPUs of c in the binding r would use there: per site the one its trust gives,
 * and the host binding too where r's user owns nodes (an owner's containers run under runc). */
static bool window_may_hold(const Sched *s, const Req *r, int c) {
    bool vm = r->kind == WORKLOAD_VM;
    const User *u = &s->users[r->user];
    for (size_t st = 0; st < s->n_sites; st++) {
        const Site *site = &s->sites[st];
        bool host = !vm && site_trusts(site, r->user), owns = false;
        for (size_t i = 0; i < u->n_owned && !vm && !host && !owns; i++)
            owns = u->owned[i].site == st;
        for (int b = BINDING_HOST; b < _BINDING_MAX; b++) {
            if (b == BINDING_HOST ? !(host || owns) : host)
                continue;
            unsigned t = MAX(r->count, 1u);
            if (t <= SCHED_NODE_MAX_DEVICES && site->window_bits[c * 2 + b] >> t)
                return true;
        }
    }
    return false;
}

/* A node whose GPUs of class c are all busy but that could hold r once they end. */
static uint32_t reserve_full_node(const Sched *s, const Req *r, int c) {
    Want w = {.r = r, .cls = c, .only = NIL};
    Method m;
    if (!window_may_hold(s, r, c))
        return NIL; /* the look below would pass every node */
    for (uint32_t i = 0; i < s->class_nodes[c] && i < RESERVE_FULL_SCAN; i++) {
        uint32_t ni = s->class_list[c][i];
        const Node *n = &s->nodes[ni];
        if (!node_schedulable(n) || n->reserved_by != NIL)
            continue;
        Binding b = r->kind == WORKLOAD_VM || relation_of(s, n, r->user) == RELATION_STRANGER
                            ? BINDING_VFIO
                            : BINDING_HOST;
        const PoolLink *pl = pool_of(n, c * 2 + (int)b);
        unsigned have = pl ? pl->total : 0;
        if (have >= MAX(r->count, 1u) && whole_node_ok(s, &w, c, ni, b, &m))
            return ni;
    }
    return NIL;
}

/* Could node n hold r's gang through binding b once its running work ends? A reservation on
 * a node without GPUs of the class (or too few of them) would hold others back for nothing. */
static bool could_hold_gang(const Node *n, const Req *r, int c, Binding b) {
    const PoolLink *pl = pool_of(n, c * 2 + (int)b);
    return pl && pl->total >= MAX(r->count, 1u);
}

uint32_t place_reserve_node(Sched *s, const Req *r, int c) {
    if (c < 0 || s->cat->classes[c].mig_parent_index >= 0 ||
        s->cat->classes[c].vendor == VENDOR_APPLE)
        return NIL;
    Want w = {.r = r, .cls = c, .only = NIL};
    uint32_t best = NIL;
    int best_k = -1; /* a full node too: a gang that waits on a busy fleet still needs one */
    Method m;
    for (size_t st = 0; st < s->n_sites; st++) {
        const Site *site = &s->sites[st];
        bool trusted = r->user < site->n_trusted_cap && site->trusted[r->user];
        Binding b = (r->kind == WORKLOAD_VM || !trusted) ? BINDING_VFIO : BINDING_HOST;
        /* Fullest-free bucket first: the buckets that list a node, from the top. */
        for (uint32_t bk = site->pool_buckets[c * 2 + b]; bk;) {
            int k = 31 - __builtin_clz(bk);
            bk &= ~(1u << k);
            if (k <= best_k)
                break;
            /* The bucket's unreserved nodes are counted: once the last of them is passed, the
             * rest of the list is reserved nodes, which a walk to its end would only read. */
            uint32_t left = site->pool_unreserved[c * 2 + b][k];
            for (uint32_t id = left ? site->pool_heads[c * 2 + b][k] : NIL; id != NIL && left;) {
                uint32_t ni = id >> POOL_SHIFT;
                const PoolLink *pl = &s->nodes[ni].pools[id & ((1u << POOL_SHIFT) - 1)];
                id = pl->link.next;
                /* `held` (a gang of c reserved it) is in the pool record just read: most
                 * reserved nodes are passed without reading their own first line too. */
                if (pl->held || s->nodes[ni].reserved_by != NIL)
                    continue;
                left--;
                if (could_hold_gang(&s->nodes[ni], r, c, b) && whole_node_ok(s, &w, c, ni, b, &m)) {
                    best = ni, best_k = k;
                    goto next_site;
                }
            }
        }
    next_site:;
    }
    const User *u = &s->users[r->user];
    for (size_t i = 0; i < u->n_owned; i++) {
        if (!owned_may_have(&u->owned[i], c))
            continue; /* it could not hold the gang */
        uint32_t ni = u->owned[i].node;
        Binding b = r->kind == WORKLOAD_VM ? BINDING_VFIO : BINDING_HOST;
        int k = (int)pool_free_of(&s->nodes[ni], c * 2 + b);
        if (k > best_k && s->nodes[ni].reserved_by == NIL &&
            could_hold_gang(&s->nodes[ni], r, c, b) && whole_node_ok(s, &w, c, ni, b, &m))
            best = ni, best_k = k;
    }
    return best != NIL ? best : reserve_full_node(s, r, c);
}

int place_check_conflicts(const Sched *s, const Req *r, Error *err) {
    const Node *n = &s->nodes[r->node];
    if (r->kind == WORKLOAD_VM && r->guest == GUEST_MACOS && n->macos_vms >= SCHED_MAX_MACOS_VMS)
        return error_set(err, -EBUSY, "request '%s': Mac '%s' already runs %d macOS VMs (R10)",
                         req_id(r), n->name, SCHED_MAX_MACOS_VMS);
    if (r->cores > n->cpu_cores - n->cpu_used)
        return error_set(err, -EBUSY, "request '%s': node '%s' has not %u free cores", req_id(r),
                         n->name, r->cores);
    if (r->mem > n->apple_usable_gb - n->apple_used_gb)
        return error_set(err, -EBUSY, "request '%s': Mac '%s' has not %u GB of GPU memory free",
                         req_id(r), n->name, r->mem);
    for (unsigned i = 0; i < r->n_dev; i++) {
        const Device *d = &n->devices[r->devs[i]];
        bool ok;
        switch (r->method) {
        case METHOD_TIME_SLICE:
            ok = d->n_allocs == 0 || (d->use == USE_TIME_SLICE && d->n_allocs < n->ts_replicas &&
                                      device_only_user(s, d, r->user));
            break;
        case METHOD_MIG:
            ok = (d->use == USE_NONE || d->use == USE_MIG) &&
                 mig_can_place(d->mig_layout, s->cat->classes[r->pcls].mig_shape, r->mig_start) &&
                 mig_joinable(s, n, d, r->user, r->crt == CONTAINER_RUNTIME_KATA);
            break;
        case METHOD_APPLE_WHOLE:
            ok = device_only_user(s, d, r->user);
            break;
        default:
            ok = d->n_allocs == 0;
        }
        if (!ok)
            return error_set(
                    err, -EBUSY,
                    "request '%s': device %u of '%s' is already held by '%s' in a way the rules "
                    "do not let it share (R15, R16)",
                    req_id(r), r->devs[i], n->name,
                    d->n_allocs ? req_id(&s->reqs[dev_allocs_const(d)[0]]) : "?");
    }
    return 0;
}
