/* invariants.c: the whole-state checker: R15 (strangers never share a GPU except MIG slices
 * under Kata), R2e (time slices of one user), R10 (Mac limits), R16 (no device in two
 * allocations the rules forbid; no request placed twice) and the bookkeeping of every index.
 * It recomputes everything from the requests and compares, so it trusts nothing cached. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched-internal.h"

static int check_device(const Sched *s, const Node *n, unsigned di, Error *err) {
    const Device *d = &n->devices[di];
    uint8_t layout = 0;
    uint32_t first_user = NIL;
    bool multi = false, all_mig_kata = true;
    for (unsigned i = 0; i < d->n_allocs; i++) {
        uint32_t ri = dev_allocs_const(d)[i];
        if (ri >= s->n_reqs || !s->reqs[ri].used || !s->reqs[ri].placed ||
            &s->nodes[s->reqs[ri].node] != n)
            return error_set(err, -EUCLEAN,
                             "device %u of '%s' lists an allocation that is not placed there", di,
                             n->name);
        const Req *r = &s->reqs[ri];
        unsigned seen = 0;
        for (unsigned j = 0; j < r->n_dev; j++)
            seen += r->devs[j] == di;
        for (unsigned j = 0; j < d->n_allocs; j++)
            seen -= (j != i && dev_allocs_const(d)[j] == ri);
        if (seen != 1)
            return error_set(err, -EUCLEAN,
                             "request '%s' is counted %u times on device %u of '%s' (R16)",
                             req_id(r), seen, di, n->name);
        if (first_user == NIL)
            first_user = r->user;
        else if (r->user != first_user)
            multi = true;
        if (r->method != METHOD_MIG || r->crt != CONTAINER_RUNTIME_KATA || !n->mig_in_kata)
            all_mig_kata = false;
        if (r->method == METHOD_MIG) {
            uint8_t m = (uint8_t)(((1u << r->mig_slots) - 1u) << r->mig_start);
            if (layout & m)
                return error_set(err, -EUCLEAN, "MIG slices overlap on device %u of '%s' (R16)", di,
                                 n->name);
            layout |= m;
        }
        DevUse want = r->method == METHOD_TIME_SLICE    ? USE_TIME_SLICE
                      : r->method == METHOD_MIG         ? USE_MIG
                      : r->method == METHOD_APPLE_WHOLE ? USE_APPLE
                                                        : USE_EXCLUSIVE;
        if (d->use != want)
            return error_set(err, -EUCLEAN,
                             "device %u of '%s' is used as %d but '%s' holds it by %s", di, n->name,
                             (int)d->use, req_id(r), method_to_string(r->method));
    }
    if (!d->n_allocs && d->use != USE_NONE)
        return error_set(err, -EUCLEAN, "device %u of '%s' is marked in use without allocations",
                         di, n->name);
    if (layout & d->mig_reserved)
        return error_set(err, -EUCLEAN,
                         "device %u of '%s': a slice holds MIG slots a foreign process uses", di,
                         n->name);
    layout |= d->mig_reserved;
    if (layout != d->mig_layout)
        return error_set(err, -EUCLEAN, "device %u of '%s': MIG layout %#x but its slices make %#x",
                         di, n->name, d->mig_layout, layout);
    if (multi && !all_mig_kata)
        return error_set(err, -EUCLEAN,
                         "device %u of '%s' is shared by different users outside MIG slices under "
                         "Kata (R15)",
                         di, n->name);
    if (d->use == USE_EXCLUSIVE && d->n_allocs > 1)
        return error_set(err, -EUCLEAN, "device %u of '%s' is given whole to %u workloads (R16)",
                         di, n->name, d->n_allocs);
    if (d->use == USE_TIME_SLICE && d->n_allocs > n->ts_replicas)
        return error_set(err, -EUCLEAN, "device %u of '%s' has %u time slices, above %u", di,
                         n->name, d->n_allocs, n->ts_replicas);
    if (d->use == USE_APPLE && first_user != n->owner)
        return error_set(err, -EUCLEAN,
                         "the GPU of Mac '%s' serves someone other than its owner (R10)", n->name);
    return 0;
}

typedef struct Usage {
    unsigned cores, mem, vms, allocs;
} Usage;

static int check_node(const Sched *s, uint32_t ni, const Usage *u, Error *err) {
    const Node *n = &s->nodes[ni];
    uint32_t v;
    if (!strmap_get(&s->node_map, n->name, &v) || v != ni)
        return error_set(err, -EUCLEAN, "node '%s' is missing from the name index", n->name);
    if (n->name_len != strlen(n->name) || strcmp(node_name(n), n->name) != 0)
        return error_set(err, -EUCLEAN, "node '%s': its name's recorded length or copy is wrong",
                         n->name);
    int classes[SCHED_NODE_MAX_DEVICES];
    unsigned n_classes = node_device_classes(n, classes);
    if (n_classes != n->n_dev_classes ||
        memcmp(classes, n->dev_classes, n_classes * sizeof(int)) != 0)
        return error_set(err, -EUCLEAN, "node '%s': its list of device classes is stale", n->name);
    const User *owner = &s->users[n->owner];
    uint32_t pos = s->owned_pos[ni];
    const OwnedNode *own =
            pos < owner->n_owned && owner->owned[pos].node == ni ? &owner->owned[pos] : NULL;
    /* dev_classes was found right just above, so the mask may be taken from it. */
    if (!own || own->site != n->site || own->classes != node_class_bits(n))
        return error_set(err, -EUCLEAN, "node '%s': its owner's record of it is missing or stale",
                         n->name);
    uint32_t ts = 0;
    for (unsigned i = 0; i < n->n_devices; i++)
        ts |= (uint32_t)(n->devices[i].use == USE_TIME_SLICE) << i;
    if (ts != n->ts_devices)
        return error_set(err, -EUCLEAN, "node '%s': its mask of time-sliced GPUs is stale",
                         n->name);
    if (u->cores != n->cpu_used || u->mem != n->apple_used_gb || u->vms != n->macos_vms ||
        u->allocs != n->n_allocs)
        return error_set(err, -EUCLEAN, "node '%s': usage counters disagree with its allocations",
                         n->name);
    if (n->cpu_used > n->cpu_cores)
        return error_set(err, -EUCLEAN, "node '%s' gives out more cores than it has", n->name);
    if (n->apple_used_gb > n->apple_usable_gb)
        return error_set(err, -EUCLEAN, "Mac '%s' gives out more GPU memory than is usable (R10)",
                         n->name);
    if (n->macos_vms > SCHED_MAX_MACOS_VMS)
        return error_set(err, -EUCLEAN, "Mac '%s' runs %u macOS VMs, above the licence's 2 (R10)",
                         n->name, n->macos_vms);
    for (unsigned i = 0; i < n->n_devices; i++) {
        int r = check_device(s, n, i, err);
        if (r < 0)
            return r;
        const Device *d = &n->devices[i];
        if (s->sites[n->site].kind == SITE_DATACENTER && n->mode != NODE_MODE_NONE &&
            d->binding != (n->mode == NODE_MODE_VM_PASSTHROUGH ? BINDING_VFIO : BINDING_HOST))
            return error_set(err, -EUCLEAN, "node '%s': device %u is not in the node's mode (R3)",
                             n->name, i);
    }
    for (unsigned k = 0; k < n->n_pools; k++) {
        const PoolLink *pl = &n->pools[k];
        if (pl->free != node_pool_free(s, n, pl->pool / 2, (Binding)(pl->pool % 2)))
            return error_set(err, -EUCLEAN, "node '%s': free-GPU index is stale", n->name);
        uint16_t mask = 0;
        for (unsigned i = 0; i < n->n_devices; i++)
            if (node_device_free(s, n, i, pl->pool / 2, (Binding)(pl->pool % 2)))
                mask |= (uint16_t)(1u << i);
        if (pl->free_mask != mask)
            return error_set(err, -EUCLEAN, "node '%s': a pool's free-GPU mask is stale", n->name);
        unsigned total = 0;
        for (unsigned i = 0; i < n->n_devices; i++)
            total += n->devices[i].cls >= 0 && !n->devices[i].mig_enabled &&
                     n->devices[i].cls * 2 + (int)n->devices[i].binding == pl->pool;
        if (pl->total != total)
            return error_set(err, -EUCLEAN, "node '%s': a pool's GPU total is stale", n->name);
        /* The idle GPUs of the pool that take no work, and those held only by a reset check. */
        unsigned blocked = 0, reset = 0;
        for (unsigned i = 0; i < n->n_devices; i++) {
            const Device *d = &n->devices[i];
            if (d->cls * 2 + (int)d->binding != pl->pool || d->cls < 0 || d->mig_enabled ||
                d->n_allocs)
                continue;
            bool takes = device_takes_new_work(n, d);
            bool held = d->binding == BINDING_VFIO && s->cat->classes[d->cls].consumer &&
                        !d->reset_verified;
            blocked += !takes || held;
            reset += takes && held;
        }
        if (pl->blocked != blocked || pl->reset != reset)
            return error_set(err, -EUCLEAN, "node '%s': idle-but-blocked GPU counts are stale",
                             n->name);
    }
    return 0;
}

/* Each node's diagnosis cells: at its position in each class's list, equal to its pools; and
 * the fleet's GPUs per pool, the sum of the live nodes' pool totals. */
static int check_cells(const Sched *s, Error *err) {
    size_t n_pools = s->cat->n_classes * _BINDING_MAX;
    uint32_t *sum = calloc(MAX(n_pools, 1), sizeof(uint32_t));
    if (!sum)
        return error_set(err, -ENOMEM, "out of memory");
    for (size_t k = 0; k < s->n_order; k++) {
        const Node *n = &s->nodes[s->order[k]];
        for (unsigned p = 0; p < n->n_pools && n->alive; p++)
            sum[n->pools[p].pool] += n->pools[p].total;
    }
    bool same = memcmp(sum, s->pool_gpus, n_pools * sizeof(uint32_t)) == 0;
    free(sum);
    if (!same)
        return error_set(err, -EUCLEAN, "the fleet's GPU count per class and binding is stale");
    for (size_t c = 0; c < s->cat->n_classes; c++)
        for (uint32_t i = 0; i < s->class_nodes[c]; i++) {
            const Node *n = &s->nodes[s->class_list[c][i]];
            const DiagCell *cell = &s->class_cells[c][i];
            for (unsigned k = 0; k < n->n_pools; k++) {
                const PoolLink *pl = &n->pools[k];
                int b = pl->pool % 2;
                if (pl->pool / 2 == (int)c &&
                    (pl->class_pos != i || cell->free[b] != pl->free ||
                     cell->mig != node_mig_gpus(n, (int)c) || cell->reset[b] != pl->reset ||
                     cell->blocked[b] != pl->blocked || cell->total[b] != pl->total ||
                     cell->kata != n->kata || cell->owner != n->owner || cell->site != n->site))
                    return error_set(err, -EUCLEAN,
                                     "node '%s': its diagnosis cell of class %s is stale", n->name,
                                     s->cat->classes[c].name);
            }
        }
    return 0;
}

/* The reservation window's counts: recounted from the first RESERVE_FULL_SCAN nodes of each
 * class's list. */
static int check_window(const Sched *s, Error *err) {
    size_t n_pools = MAX(s->cat->n_classes, 1) * 2;
    uint32_t(*want)[SCHED_NODE_MAX_DEVICES + 1] =
            calloc(n_pools * MAX(s->n_sites, 1), sizeof(*want));
    if (!want)
        return error_set(err, -ENOMEM, "out of memory");
    const char *stale = NULL;
    for (size_t c = 0; c < s->cat->n_classes && !stale; c++)
        for (uint32_t i = 0; i < s->class_nodes[c] && !stale; i++) {
            const Node *n = &s->nodes[s->class_list[c][i]];
            bool counted = n->alive && node_schedulable(n) && n->reserved_by == NIL;
            if (counted != n->window_counted)
                stale = "a node's window flag";
            if (n->reserved_by != NIL && (n->reserved_choice != s->reqs[n->reserved_by].choice ||
                                          n->reserved_seq != s->reqs[n->reserved_by].seq))
                stale = "a node's copy of its reserving gang's class and arrival";
            for (unsigned k = 0; k < n->n_pools; k++) {
                if (n->pools[k].pool / 2 != (int)c)
                    continue;
                if (n->pools[k].in_window != (i < RESERVE_FULL_SCAN))
                    stale = "a node's window position";
                if (n->pools[k].held != (n->reserved_by != NIL && n->reserved_choice == (int)c))
                    stale = "a pool's copy of its node's reservation";
                if (n->reserved_by != NIL && n->reserved_seq > s->held_seq_max)
                    stale = "the bound on reserving gangs' arrival";
                if (i < RESERVE_FULL_SCAN && counted)
                    want[n->site * n_pools + (size_t)n->pools[k].pool][n->pools[k].total]++;
            }
        }
    for (size_t st = 0; st < s->n_sites && !stale; st++) {
        if (memcmp(want + st * n_pools, s->sites[st].window_free, n_pools * sizeof(*want)) != 0)
            stale = "the reservation window's counts";
        for (size_t p = 0; p < n_pools && !stale; p++) {
            uint32_t bits = 0;
            for (unsigned t = 0; t <= SCHED_NODE_MAX_DEVICES; t++)
                bits |= (uint32_t)(want[st * n_pools + p][t] != 0) << t;
            if (bits != s->sites[st].window_bits[p])
                stale = "the reservation window's size bits";
        }
    }
    free(want);
    if (stale)
        return error_set(err, -EUCLEAN, "%s is stale", stale);
    return 0;
}

/* The pool rows of the nodes each user owns (User.own_bits) hold every listed pool of every
 * node under its owner, at its position in `owned`, in the row of its free count; returns
 * how many they list. */
static int check_own_lists(const Sched *s, size_t *ret_listed, Error *err) {
    size_t listed = 0;
    for (size_t ui = 0; ui < s->n_users; ui++) {
        const User *u = &s->users[ui];
        if (!u->own_buckets)
            continue; /* never searched, or few nodes: scanned */
        if (u->n_owned > u->own_words * 64)
            return error_set(err, -EUCLEAN, "user %s owns nodes its pool rows have no bit for",
                             u->name);
        for (size_t p = 0; p < s->cat->n_classes * 2; p++)
            for (unsigned f = 0; f <= SCHED_NODE_MAX_DEVICES; f++) {
                size_t in_row = 0;
                for (size_t wd = 0; u->own_bits[p] && wd < u->own_words; wd++)
                    for (uint64_t bits = u->own_bits[p][f * u->own_words + wd]; bits;
                         bits &= bits - 1) {
                        size_t pos = wd * 64 + (size_t)__builtin_ctzll(bits);
                        const Node *n = pos < u->n_owned ? &s->nodes[u->owned[pos].node] : NULL;
                        const PoolLink *pl = NULL;
                        for (unsigned j = 0; n && j < n->n_pools && !pl; j++)
                            if (n->pools[j].pool == (int)p)
                                pl = &n->pools[j];
                        if (!n || !n->alive || n->owner != ui || !pl || pl->free != f || !f)
                            return error_set(err, -EUCLEAN,
                                             "user %s's own pool rows have a node in the wrong "
                                             "row",
                                             u->name);
                        in_row++;
                    }
                if (in_row != u->own_count[p][f] ||
                    (in_row != 0) != !!(u->own_buckets[p] & (1u << f)))
                    return error_set(err, -EUCLEAN,
                                     "user %s's own pool row counts or bucket bits are stale",
                                     u->name);
                listed += in_row;
            }
    }
    *ret_listed = listed;
    return 0;
}

static int check_lists(const Sched *s, Error *err) {
    /* Every listed element is where its own record says, and the counts match. */
    size_t listed_pools = 0, want_pools = 0;
    for (size_t st = 0; st < s->n_sites; st++) {
        for (size_t p = 0; p < s->cat->n_classes * 2; p++)
            /* A class no node has is never listed (counted below), so skip its empty heads. */
            for (unsigned f = 0; f <= SCHED_NODE_MAX_DEVICES; f++) {
                uint32_t unreserved = 0, n_open = 0;
                for (uint32_t id = f && s->class_nodes[p / 2] ? s->sites[st].pool_heads[p][f] : NIL;
                     id != NIL;) {
                    const Node *n = &s->nodes[id >> POOL_SHIFT];
                    const PoolLink *pl = &n->pools[id & ((1u << POOL_SHIFT) - 1)];
                    if (!n->alive || pl->pool != (int)p || pl->free != f || n->site != st)
                        return error_set(err, -EUCLEAN,
                                         "whole-GPU pool lists a node in the wrong bucket");
                    if (++listed_pools > s->n_nodes * 2 * SCHED_NODE_MAX_DEVICES)
                        return error_set(err, -EUCLEAN, "whole-GPU pool list has a cycle");
                    unreserved += n->reserved_by == NIL;
                    n_open += !pl->held;
                    id = pl->link.next;
                }
                if (unreserved != s->sites[st].pool_unreserved[p][f])
                    return error_set(err, -EUCLEAN,
                                     "whole-GPU pool's count of unreserved nodes is stale");
                if (n_open != s->sites[st].pool_open[p][f])
                    return error_set(err, -EUCLEAN,
                                     "whole-GPU pool's count of nodes open to new requests is "
                                     "stale");
                bool listed = f && s->sites[st].pool_heads[p][f] != NIL;
                if (listed != !!(s->sites[st].pool_buckets[p] & (1u << f)))
                    return error_set(err, -EUCLEAN, "whole-GPU pool's bucket bits are stale");
            }
    }
    size_t listed_cpu = 0, want_cpu = 0;
    for (int b = 0; b < CPU_BUCKETS; b++)
        for (uint32_t ni = s->cpu_heads[b]; ni != NIL; ni = s->nodes[ni].cpu_link.next) {
            if (!s->nodes[ni].alive || s->nodes[ni].cpu_bucket != b)
                return error_set(err, -EUCLEAN, "cpu index lists a node in the wrong bucket");
            if (++listed_cpu > s->n_nodes)
                return error_set(err, -EUCLEAN, "cpu index has a cycle");
        }
    for (size_t k = 0; k < s->n_order; k++) {
        const Node *n = &s->nodes[s->order[k]];
        for (unsigned j = 0; j < n->n_pools; j++)
            want_pools += n->pools[j].free > 0;
        want_cpu += n->cpu_bucket >= 0;
    }
    uint32_t *blocked = calloc(MAX(s->cat->n_classes, 1), sizeof(uint32_t));
    if (!blocked)
        return error_set(err, -ENOMEM, "out of memory");
    for (size_t k = 0; k < s->n_order; k++) {
        const Node *n = &s->nodes[s->order[k]];
        for (unsigned j = 0; j < n->n_pools; j++)
            blocked[n->pools[j].pool / 2] += n->pools[j].blocked;
    }
    for (size_t c = 0; c < s->cat->n_classes; c++)
        if (blocked[c] != s->class_blocked[c]) {
            free(blocked);
            return error_set(err, -EUCLEAN, "class %s: idle-but-blocked count is stale",
                             s->cat->classes[c].name);
        }
    memset(blocked, 0, MAX(s->cat->n_classes, 1) * sizeof(uint32_t));
    for (size_t k = 0; k < s->n_order; k++) {
        const Node *n = &s->nodes[s->order[k]];
        for (unsigned i = 0; i < n->n_devices; i++) {
            const Device *d = &n->devices[i];
            if (n->alive && d->cls >= 0 && d->mig_enabled && !device_takes_new_work(n, d))
                blocked[d->cls]++;
        }
    }
    for (size_t c = 0; c < s->cat->n_classes; c++)
        if (blocked[c] != s->class_mig_blocked[c]) {
            free(blocked);
            return error_set(err, -EUCLEAN, "class %s: blocked MIG GPU count is stale",
                             s->cat->classes[c].name);
        }
    free(blocked);
    int r = check_window(s, err);
    if (r < 0)
        return r;
    r = check_cells(s, err);
    if (r < 0)
        return r;
    size_t listed_own = 0, want_own = 0;
    if ((r = check_own_lists(s, &listed_own, err)) < 0)
        return r;
    for (size_t k = 0; k < s->n_order; k++) {
        const Node *n = &s->nodes[s->order[k]];
        for (unsigned j = 0; j < n->n_pools && s->users[n->owner].own_buckets; j++)
            want_own += n->pools[j].free > 0;
    }
    if (listed_pools != want_pools || listed_own != want_own || listed_cpu != want_cpu)
        return error_set(err, -EUCLEAN, "free indexes and node records disagree");
    return 0;
}

/* Every slot of the id index names a live request under that request's own hash, and the
 * index counts its slots right (check_requests() finds every live request in it). */
static int check_req_map(const Sched *s, Error *err) {
    size_t used = 0;
    for (size_t i = 0; i < s->req_map.cap; i++) {
        const ReqMapSlot *sl = &s->req_map.slots[i];
        if (sl->ri == NIL)
            continue;
        used++;
        if (sl->ri >= s->n_reqs || !s->reqs[sl->ri].used || s->reqs[sl->ri].id_hash != sl->hash)
            return error_set(err, -EUCLEAN, "the id index names a request that is gone (R16)");
    }
    if (used != s->req_map.n)
        return error_set(err, -EUCLEAN, "the id index counts %zu entries but holds %zu",
                         s->req_map.n, used);
    return 0;
}

/* The gang shares (queue.c): recounted from the waiting requests and the reserved nodes. */
static int check_gang_share(const Sched *s, Error *err) {
    size_t n_keys = s->cat->n_classes + 2;
    GangShare *want = calloc(n_keys, sizeof(GangShare));
    if (!want)
        return error_set(err, -ENOMEM, "out of memory");
    for (uint32_t ri = s->q_head; ri != NIL; ri = s->reqs[ri].q.next) {
        const Req *r = &s->reqs[ri];
        want[r->qkey].wait_gpus += MAX(r->count, 1u);
        want[r->qkey].gang_gpus += r->count >= 2 ? r->count : 0;
    }
    for (size_t k = 0; k < s->n_order; k++) {
        const Node *n = &s->nodes[s->order[k]];
        if (n->reserved_by != NIL)
            want[s->reqs[n->reserved_by].choice].reserved++;
    }
    bool same = memcmp(want, s->gang_share, n_keys * sizeof(GangShare)) == 0;
    free(want);
    return same ? 0
                : error_set(err, -EUCLEAN,
                            "a class's waiting GPUs or gang reservations are miscounted");
}

/* Every waiting request is in the FIFO of its first choice (the one the queue walks follow),
 * once, in arrival order, with links that agree both ways. */
static int check_class_fifos(const Sched *s, Error *err) {
    size_t listed = 0;
    for (size_t key = 0; key < s->cat->n_classes + 2; key++) {
        uint32_t prev = NIL;
        for (uint32_t ri = s->cq_head[key]; ri != NIL; ri = s->reqs[ri].cq.next) {
            const Req *r = &s->reqs[ri];
            if (!r->used || r->placed || r->qkey != (int)key || r->cq.prev != prev ||
                (prev != NIL && s->reqs[prev].submitted > r->submitted))
                return error_set(err, -EUCLEAN, "the FIFO of a first choice is broken at '%s'",
                                 req_id(r));
            prev = ri;
            if (++listed > s->n_waiting)
                return error_set(err, -EUCLEAN, "the FIFOs of first choices hold a cycle");
        }
        if (prev != s->cq_tail[key])
            return error_set(err, -EUCLEAN, "the FIFO of a first choice ends before its tail");
    }
    return listed == s->n_waiting
                   ? 0
                   : error_set(err, -EUCLEAN, "%zu waiting requests, %zu in first-choice FIFOs",
                               s->n_waiting, listed);
}

/* A walk memo still in force (queue.c) must be right: a walk with its room would pass every
 * waiter it meets over for its count (or, for a memo by binding, for the binding it would use
 * on the memo's node, a gang only once it holds a node), all of them where the memo's walk
 * reached the FIFO's end, else the first WALK_MISS_LIMIT, still the ones it met (the last of
 * them submitted no later than the last it met). */
static int check_walk_memos(const Sched *s, Error *err) {
    for (size_t key = 0; key < s->cat->n_classes + 2; key++) {
        const WalkMemo *m = &s->walk_memo[key];
        if (!m->room)
            continue;
        unsigned met = 0;
        uint32_t last = NIL;
        for (uint32_t ri = s->cq_head[key]; ri != NIL && (!m->reach.full || met < WALK_MISS_LIMIT);
             met++) {
            const Req *r = &s->reqs[ri];
            if (!walk_memo_passes(s, m, r))
                return error_set(err, -EUCLEAN,
                                 "a queue walk memo would skip request '%s', which fits it",
                                 req_id(r));
            last = ri;
            ri = r->cq.next;
        }
        if (m->reach.full && (met < WALK_MISS_LIMIT || s->reqs[last].submitted > m->reach.last))
            return error_set(err, -EUCLEAN, "a queue walk memo counts waiters that are gone");
    }
    return 0;
}

static int check_requests(const Sched *s, Error *err) {
    if (check_req_map(s, err) < 0)
        return -EUCLEAN;
    size_t live = 0, waiting = 0;
    for (size_t i = 0; i < s->n_reqs; i++) {
        const Req *r = &s->reqs[i];
        if (!r->used)
            continue;
        live++;
        if (r->id_len != strlen(req_id(r)) || r->id_hash != strmap_hash_len(req_id(r), r->id_len) ||
            reqmap_find(&s->req_map, s->reqs, req_id(r), r->id_len, r->id_hash) != i)
            return error_set(err, -EUCLEAN, "request '%s' is missing from the id index (R16)",
                             req_id(r));
        if (!r->placed)
            continue;
        int ret = policy_check_placement(s, r, false, err);
        if (ret < 0)
            return -EUCLEAN;
        const Node *n = &s->nodes[r->node];
        for (unsigned j = 0; j < r->n_dev; j++) {
            const Device *d = &n->devices[r->devs[j]];
            bool found = false;
            for (unsigned k = 0; k < d->n_allocs; k++)
                found |= dev_allocs_const(d)[k] == i;
            if (!found)
                return error_set(err, -EUCLEAN,
                                 "request '%s' is placed on a device that does not list it",
                                 req_id(r));
        }
    }
    uint64_t last = 0;
    uint32_t prev = NIL;
    for (uint32_t ri = s->q_head; ri != NIL; ri = s->reqs[ri].q.next) {
        const Req *r = &s->reqs[ri];
        if (!r->used || r->placed)
            return error_set(err, -EUCLEAN, "the queue holds a request that is not waiting (R16)");
        if (r->q.prev != prev || (waiting && r->submitted < last))
            return error_set(err, -EUCLEAN, "the queue is out of order at '%s'", req_id(r));
        last = r->submitted;
        prev = ri;
        if (++waiting > live)
            return error_set(err, -EUCLEAN, "the queue has a cycle");
    }
    size_t placed = 0;
    for (size_t i = 0; i < s->n_reqs; i++)
        placed += s->reqs[i].used && s->reqs[i].placed;
    int ret = check_gang_share(s, err);
    if (ret < 0 || (ret = check_walk_memos(s, err)) < 0 || (ret = check_class_fifos(s, err)) < 0)
        return ret;
    if (prev != s->q_tail || waiting != s->n_waiting || placed + waiting != live ||
        live != s->n_live_reqs || live != s->req_map.n)
        return error_set(err, -EUCLEAN,
                         "request counts disagree: %zu live, %zu placed, %zu waiting", live, placed,
                         waiting);
    return 0;
}

int sched_check(const Sched *s, Error *err) {
    Usage *use = calloc(MAX(s->n_nodes, 1), sizeof(Usage));
    if (!use)
        return error_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < s->n_reqs; i++) {
        const Req *r = &s->reqs[i];
        if (!r->used || !r->placed || r->node >= s->n_nodes)
            continue;
        Usage *u = &use[r->node];
        u->cores += r->cores;
        u->mem += r->mem;
        u->vms += r->kind == WORKLOAD_VM && r->guest == GUEST_MACOS;
        u->allocs++;
    }
    for (size_t k = 0; k < s->n_order; k++) {
        int r = check_node(s, s->order[k], &use[s->order[k]], err);
        if (r < 0) {
            free(use);
            return r;
        }
    }
    free(use);
    if (s->node_map.n != s->n_order)
        return error_set(err, -EUCLEAN, "the node index has %zu names for %zu nodes", s->node_map.n,
                         s->n_order);
    int r = check_lists(s, err);
    if (r < 0)
        return r;
    return check_requests(s, err);
}
