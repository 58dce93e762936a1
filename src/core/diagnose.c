/* diagnose.c: why a request waits (R18): the one thing that, removed, would let it run, from
 * the per-class cells when they can tell and from a look at the nodes when not. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched-internal.h"

/* What keeps a request off one node, as a set of reasons (bit 1 << SchedReason). A node with
 * exactly one blocker is one where removing that blocker would let the request run there, so
 * the reason shown comes from such a node when there is one (R18: the reason names what,
 * removed, would let it run); an empty set is room the queue's order keeps (QUEUED). */
typedef struct Diag {
    bool any, allowed, internal;
    uint32_t all, single;
} Diag;

#define BLOCK(reason) (1u << (reason))

static void diag_note(Diag *dg, uint32_t blockers) {
    if (!blockers)
        blockers = BLOCK(SCHED_REASON_QUEUED);
    dg->all |= blockers;
    if (__builtin_popcount(blockers) == 1)
        dg->single |= blockers;
}

/* A MIG slice of class c on node n. */
static void diag_slice(const Sched *s, const Req *r, const Node *n, int c, Diag *dg) {
    const GpuClass *g = &s->cat->classes[c];
    int card = g->mig_parent_index;
    bool vm = r->kind == WORKLOAD_VM;
    Relation rel = relation_of(s, n, r->user);
    bool kata = !vm && rel == RELATION_STRANGER;
    Binding want = (vm || kata) ? BINDING_VFIO : BINDING_HOST;
    const PoolLink *pw = pool_of(n, card * 2 + (int)want), *po = pool_of(n, card * 2 + !want);
    if (!pw || !po)
        return; /* no GPU of the class here */
    unsigned fits = 0, whole_free = 0, blocked = 0, offering = 0;
    {
        bool node_ok = node_schedulable(n);
        for (unsigned i = 0; i < n->n_devices; i++) {
            const Device *d = &n->devices[i];
            /* A GPU whose NVML has no such profile is no GPU of this slice (R2c). */
            if (d->cls != card || !device_offers_mig(d, g->mig_shape))
                continue;
            offering++;
            if (!d->mig_enabled) {
                whole_free += !d->n_allocs;
                continue;
            }
            if (s->mig_fits[g->mig_shape][d->mig_layout] == 0)
                continue;
            if (!(node_ok && !d->cordoned && !d->quarantined)) /* device_takes_new_work, cls >= 0 */
                blocked++;
            else if (mig_joinable(s, n, d, r->user, n->kata && n->mig_in_kata))
                fits++;
        }
    }
    if (!offering)
        return; /* as a node without the class */
    dg->any = true;
    if (!class_access_at(s, n->site, g, rel)) {
        dg->internal |= g->internal_only && !g->owner_only;
        return;
    }
    dg->allowed = true;
    uint32_t b = 0;
    /* What the node is comes first: without mig_in_kata no slice here is ever a stranger's,
     * so turning MIG on would not help (R2c). */
    if (kata && !(n->kata && n->mig_in_kata))
        b |= BLOCK(SCHED_REASON_NO_MIG_IN_KATA);
    if (fits)
        ;
    else if (whole_free)
        b |= BLOCK(SCHED_REASON_MODE_MISMATCH); /* GPUs of the card exist but are not in MIG
                                                   mode */
    else if (blocked)
        b |= BLOCK(SCHED_REASON_CORDONED);
    else
        b |= BLOCK(SCHED_REASON_NO_CAPACITY);
    diag_note(dg, b);
}

/* Whole GPUs of class c on the node of `cell`. Every GPU of a class puts the node in both
 * pools of the class, and node_refresh() keeps each pool's free / blocked / reset-pending
 * counts of its idle GPUs in the node's cell (sched_check verifies them), so a whole-GPU
 * diagnosis reads them instead of walking the devices: this runs for up to DIAG_MAX_NODES
 * nodes per waiting decision. */
static void diag_whole(const Sched *s, const Req *r, const DiagCell *cell, int c, Diag *dg) {
    const GpuClass *g = &s->cat->classes[c];
    bool vm = r->kind == WORKLOAD_VM;
    Relation rel = relation_at(s, cell->owner, cell->site, r->user);
    bool kata = !vm && rel == RELATION_STRANGER;
    Binding want = (vm || kata) ? BINDING_VFIO : BINDING_HOST;
    dg->any = true;
    if (!class_access_at(s, cell->site, g, rel)) {
        dg->internal |= g->internal_only && !g->owner_only;
        return;
    }
    dg->allowed = true;
    /* A node with fewer GPUs of the class than the request asks, in any binding or mode, can
     * never run it: nothing removed there would let it run, so it names no blocker (a fleet
     * of only such nodes refuses the request at submit, R18). */
    if ((unsigned)(cell->total[0] + cell->total[1] + cell->mig) < r->count)
        return;
    uint32_t b = 0;
    /* Idle GPUs of the class: in the wanted binding free, waiting for a reset check (R9) or
     * taking no work; in the other binding, those that take work (free or reset pending). */
    unsigned free_want = cell->free[want], reset = cell->reset[want],
             free_other = cell->free[!want] + cell->reset[!want];
    unsigned blocked = cell->blocked[want] - cell->reset[want],
             blocked_other = cell->blocked[!want] - cell->reset[!want];
    if (kata && !cell->kata) /* a mode switch would not help a node without Kata (R2b) */
        b |= BLOCK(SCHED_REASON_NO_KATA);
    /* Too few GPUs of the class in the wanted binding, busy or not, where the others (in the
     * other binding, or in MIG mode) would do: the mode keeps it off this node however many
     * are taken, so it is a blocker of its own, beside a cordon or taken GPUs (R18). */
    if (cell->total[want] < r->count &&
        (unsigned)(cell->total[want] + cell->total[!want] + cell->mig) >= r->count)
        b |= BLOCK(SCHED_REASON_MODE_MISMATCH);
    /* On a lab or solo node one class's GPUs may be split between the bindings (R7): a gang
     * larger than either part runs once some are switched, which is a binding matter. */
    if (free_want >= r->count)
        ;
    else if (free_want + free_other >= r->count)
        b |= BLOCK(SCHED_REASON_MODE_MISMATCH);
    else if (free_want + reset >= r->count)
        b |= BLOCK(SCHED_REASON_RESET_CHECK);
    else if (free_want + reset + blocked >= r->count)
        b |= BLOCK(SCHED_REASON_CORDONED);
    else if (free_want + free_other + reset + blocked + blocked_other >= r->count)
        /* idle, but cordoned (maybe by a switch to the wanted mode) in the other mode: nothing
         * is taken, and no free GPU is in the other mode either; the cordon is what is said */
        b |= BLOCK(SCHED_REASON_CORDONED);
    else
        b |= BLOCK(SCHED_REASON_NO_CAPACITY);
    diag_note(dg, b);
}

static void diag_apple(const Sched *s, const Req *r, const Node *n, int c, Diag *dg) {
    if (n->platform != PLATFORM_MACOS || !n->n_devices || n->devices[0].cls != c)
        return;
    dg->any = true;
    if (n->owner != r->user)
        return;
    dg->allowed = true;
    uint32_t b = 0;
    if (!device_takes_new_work(n, &n->devices[0]))
        b |= BLOCK(SCHED_REASON_CORDONED);
    if (r->kind == WORKLOAD_VM && n->macos_vms >= SCHED_MAX_MACOS_VMS)
        b |= BLOCK(SCHED_REASON_MACOS_VM_LIMIT);
    if (n->apple_used_gb + r->memory_gb > n->apple_usable_gb)
        b |= BLOCK(SCHED_REASON_NO_CAPACITY);
    diag_note(dg, b);
}

static void diag_cpu(const Sched *s, const Req *r, const Node *n, Diag *dg) {
    dg->any = dg->allowed = true;
    uint32_t b = 0;
    if (r->kind == WORKLOAD_VM && r->guest == GUEST_MACOS) {
        if (n->platform != PLATFORM_MACOS || relation_of(s, n, r->user) != RELATION_OWNER)
            return; /* its paravirtualized Metal is the Mac's GPU: the owner's only (R10) */
        if (n->macos_vms >= SCHED_MAX_MACOS_VMS)
            b |= BLOCK(SCHED_REASON_MACOS_VM_LIMIT);
    } else if (r->kind != WORKLOAD_VM && relation_of(s, n, r->user) == RELATION_STRANGER) {
        if (n->platform == PLATFORM_MACOS)
            return; /* native processes: never a stranger's */
        if (!n->kata)
            b |= BLOCK(SCHED_REASON_NO_KATA);
    }
    if (n->cpu_cores - n->cpu_used < r->count)
        b |= BLOCK(SCHED_REASON_NO_CAPACITY);
    else if (!node_schedulable(n))
        b |= BLOCK(SCHED_REASON_CORDONED);
    diag_note(dg, b);
}

#define DIAG_MAX_NODES 128
/* How many of the nodes the pools list with room a diagnosis looks at first. */
#define DIAG_ROOM_NODES 8

/* Adds node ni's blockers for r (its cell of whole-GPU class c) to dg; true once they settle
 * the answer: a node where only the queue's order keeps r off (QUEUED). */
static bool diag_room_node(const Sched *s, const Req *r, int c, uint32_t ni, int pool, Diag *dg) {
    const PoolLink *pl = pool_of(&s->nodes[ni], pool);
    if (pl)
        diag_whole(s, r, &s->class_cells[c][pl->class_pos], c, dg);
    return dg->allowed && (dg->single & BLOCK(SCHED_REASON_QUEUED));
}

/* The nodes with room where r would run, as the pools of whole-GPU class c list them (its own
 * nodes' rows first, then the sites' pools by trust, as diagnose_fast() looked): it sends a
 * request here when there are such nodes and the request waits all the same. One with no
 * blocker of its own settles the answer (QUEUED: the queue's order keeps that room, a gang's
 * reservation mostly), where the bounded scan of the class's nodes might not meet it and name
 * what blocks the nodes it did meet instead. Up to DIAG_ROOM_NODES of them. */
static void diag_room_nodes(const Sched *s, const Req *r, int c, Diag *dg) {
    bool vm = r->kind == WORKLOAD_VM;
    unsigned looked = 0;
    const User *u = &s->users[r->user];
    int own_pool = c * 2 + (vm ? BINDING_VFIO : BINDING_HOST);
    if (u->own_buckets) {
        for (uint32_t bk = own_buckets_from(u, own_pool, r->count); bk; bk &= bk - 1) {
            const uint64_t *row = u->own_bits[own_pool] + (size_t)__builtin_ctz(bk) * u->own_words;
            for (size_t wd = 0; wd < u->own_words; wd++)
                for (uint64_t bits = row[wd]; bits; bits &= bits - 1) {
                    uint32_t ni = u->owned[wd * 64 + (size_t)__builtin_ctzll(bits)].node;
                    if (looked++ == DIAG_ROOM_NODES || diag_room_node(s, r, c, ni, own_pool, dg))
                        return;
                }
        }
    } else
        for (size_t i = 0; i < u->n_owned && i < DIAG_MAX_NODES; i++) {
            uint32_t ni = u->owned[i].node;
            if (!owned_may_have(&u->owned[i], c) ||
                pool_free_of(&s->nodes[ni], own_pool) < r->count)
                continue;
            if (looked++ == DIAG_ROOM_NODES || diag_room_node(s, r, c, ni, own_pool, dg))
                return;
        }
    for (size_t st = 0; st < s->n_sites; st++) {
        const Site *site = &s->sites[st];
        int pool = c * 2 + ((vm || !site_trusts(site, r->user)) ? BINDING_VFIO : BINDING_HOST);
        for (uint32_t bk = pool_buckets_from(site, pool, r->count); bk; bk &= bk - 1)
            for (uint32_t id = site->pool_heads[pool][__builtin_ctz(bk)]; id != NIL;) {
                uint32_t ni = id >> POOL_SHIFT;
                if (looked++ == DIAG_ROOM_NODES || diag_room_node(s, r, c, ni, pool, dg))
                    return;
                id = s->nodes[ni].pools[id & ((1u << POOL_SHIFT) - 1)].link.next;
            }
    }
}

/* Whether any site's pool of class c (either binding) has a node with `count` free GPUs. */
static bool any_pool_room(const Sched *s, int c, unsigned count) {
    for (size_t st = 0; st < s->n_sites; st++)
        for (int b = 0; b < _BINDING_MAX; b++)
            if (pool_buckets_from(&s->sites[st], c * 2 + b, count))
                return true;
    return false;
}

/* May this user use class c anywhere at all (R9 internal_only, R10 owner_only)? */
static bool allowed_somewhere(const Sched *s, const Req *r, const GpuClass *g) {
    if (!g->owner_only && !g->internal_only)
        return true;
    const User *u = &s->users[r->user];
    int card = g->mig_parent_index >= 0 ? g->mig_parent_index : (int)(g - s->cat->classes);
    for (size_t i = 0; i < u->n_owned; i++) {
        if (!owned_may_have(&u->owned[i], card))
            continue;
        const Node *n = &s->nodes[u->owned[i].node];
        for (unsigned d = 0; d < n->n_devices; d++)
            if (n->devices[d].cls == card)
                return true;
    }
    if (g->owner_only)
        return false;
    for (size_t st = 0; st < s->n_sites; st++)
        if (s->sites[st].kind != SITE_DATACENTER ||
            (r->user < s->sites[st].n_trusted_cap && s->sites[st].trusted[r->user]))
            return true;
    return false;
}

/* The common case, a full class, answered from the indexes; -1 when a scan must decide. */
static int diagnose_fast(const Sched *s, const Req *r, int c) {
    if (c == CHOICE_CPU) {
        for (unsigned b = MIN(r->count, (unsigned)CPU_BUCKETS - 1); b < CPU_BUCKETS; b++)
            if (s->cpu_heads[b] != NIL)
                return -1;
        return SCHED_REASON_NO_CAPACITY;
    }
    const GpuClass *g = &s->cat->classes[c];
    int card = g->mig_parent_index >= 0 ? g->mig_parent_index : c;
    if (!s->class_nodes[card])
        return SCHED_REASON_NO_NODE;
    if (!allowed_somewhere(s, r, g))
        return g->owner_only ? SCHED_REASON_OWNER_ONLY : SCHED_REASON_INTERNAL_ONLY;
    if (g->vendor == VENDOR_APPLE || s->class_blocked[card])
        return -1;
    if (g->mig_parent_index >= 0) {
        if (s->class_mig_blocked[card])
            return -1; /* a GPU that takes no work may be what it waits for: the scan says */
        for (size_t i = 0; i < s->n_mig_pref[g->mig_shape]; i++)
            if (s->mig[card].heads[s->mig_pref[g->mig_shape][i].layout] != NIL)
                return -1;
        return any_pool_room(s, card, 1) ? -1 : SCHED_REASON_NO_CAPACITY;
    }
    /* Room in the pools this user would use, or only in the other binding (R3, R5, R7)? */
    bool vm = r->kind == WORKLOAD_VM, cand = false, other = false, unsure = false;
    for (size_t st = 0; st < s->n_sites && !cand; st++) {
        const Site *site = &s->sites[st];
        bool trusted = r->user < site->n_trusted_cap && site->trusted[r->user];
        /* Room at a site whose class this user may not have (R9) is no room, in either mode;
         * the user's own nodes are looked at below. */
        if (!class_access_at(s, (uint32_t)st, g, trusted ? RELATION_TRUSTED : RELATION_STRANGER))
            continue;
        Binding b = (vm || !trusted) ? BINDING_VFIO : BINDING_HOST;
        cand = pool_buckets_from(site, c * 2 + b, r->count) != 0;
        if (cand)
            break; /* room where this user would run: the scan decides, not the other mode */
        for (uint32_t bk = pool_buckets_from(site, c * 2 + !b, r->count); bk; bk &= bk - 1) {
            uint32_t id = site->pool_heads[c * 2 + !b][__builtin_ctz(bk)];
            if (other)
                continue;
            if (vm || trusted) {
                other = true;
                continue;
            }
            /* A stranger's container needs Kata too: a mode switch helps only on a node
             * that has it (R2b). A short look; past it, the full diagnosis decides. */
            for (unsigned look = 0; id != NIL && look < 8 && !other; look++) {
                const Node *n = &s->nodes[id >> POOL_SHIFT];
                other = n->kata;
                id = n->pools[id & ((1u << POOL_SHIFT) - 1)].link.next;
            }
            unsure = unsure || !other;
        }
    }
    /* A node of the user's own with room (its pool rows, when built, say so without a look
     * at the nodes). */
    const User *u = &s->users[r->user];
    int pool = c * 2 + (vm ? BINDING_VFIO : BINDING_HOST);
    if (u->own_buckets)
        cand = cand || own_buckets_from(u, pool, r->count) != 0;
    for (size_t i = 0; i < u->n_owned && !cand && !u->own_buckets; i++)
        cand = owned_may_have(&u->owned[i], c) &&
               pool_free_of(&s->nodes[u->owned[i].node], pool) >= r->count;
    if (cand)
        return -1;
    if (other)
        return SCHED_REASON_MODE_MISMATCH;
    /* No room anywhere; but where the fleet has no GPU of the class at all in one binding
     * (only in the other, or only in MIG mode), the mode may be what keeps this request, not
     * taken units: the nodes' cells tell. */
    if (!s->pool_gpus[c * 2 + BINDING_HOST] || !s->pool_gpus[c * 2 + BINDING_VFIO])
        return -1;
    /* A gang: the nodes that have enough GPUs of the class may have them in the other binding
     * (a whole node in the other mode, or a lab node's GPUs split between bindings, R7), busy
     * or not, which only a look at the nodes' cells sees. */
    if (r->count > 1)
        return -1;
    return unsure ? -1 : SCHED_REASON_NO_CAPACITY;
}

/* Whether one whole GPU of card class c, asked for by r, is kept from it only by MIG mode:
 * an idle GPU of the class with MIG on, on a node where r may have the class (and a
 * stranger's container its Kata). Then turning MIG off would let r run there, which the
 * other-mode sentence names; a gang would need several on one node, which this short look
 * does not count. */
static bool idle_mig_gpu_would_serve(const Sched *s, const Req *r, int c) {
    const GpuClass *g = &s->cat->classes[c];
    if (g->mig_parent_index >= 0 || g->vendor == VENDOR_APPLE || r->count != 1)
        return false;
    unsigned look = 0;
    for (uint32_t gid = s->mig[c].heads[0]; gid != NIL && look < DIAG_ROOM_NODES; look++) {
        const Node *n = &s->nodes[gid >> DEV_SHIFT];
        gid = n->devices[gid & ((1u << DEV_SHIFT) - 1)].link.next;
        Relation rel = relation_of(s, n, r->user);
        if (class_access_at(s, n->site, g, rel) &&
            (r->kind == WORKLOAD_VM || rel != RELATION_STRANGER || n->kata))
            return true;
    }
    return false;
}

static SchedReason diagnose(const Sched *s, const Req *r, int c);

SchedReason place_diagnose(const Sched *s, const Req *r, int c) {
    SchedReason why = diagnose(s, r, c);
    if (why == SCHED_REASON_NO_CAPACITY && c >= 0 && idle_mig_gpu_would_serve(s, r, c))
        return SCHED_REASON_MODE_MISMATCH;
    return why;
}

/* How far a request by memory alone looks: the smallest classes that hold it first. */
#define DIAG_MEMORY_CLASSES 8

SchedReason place_diagnose_by_memory(const Sched *s, const Req *r) {
    /* The classes that could hold it, each diagnosed; the one reason shown is the first of
     * theirs in the order a single class's are weighed (what, removed, lets it run soonest):
     * a free GPU in the other mode is not "every unit is taken" (R18). */
    static const SchedReason order[] = {
            SCHED_REASON_QUEUED,   SCHED_REASON_RESET_CHECK,    SCHED_REASON_MODE_MISMATCH,
            SCHED_REASON_NO_KATA,  SCHED_REASON_NO_MIG_IN_KATA, SCHED_REASON_MACOS_VM_LIMIT,
            SCHED_REASON_CORDONED, SCHED_REASON_NO_CAPACITY,
    };
    size_t best = sizeof(order) / sizeof(order[0]) - 1;
    for (size_t i = 0, looked = 0; i < s->n_by_memory && looked < DIAG_MEMORY_CLASSES && best;
         i++) {
        int c = s->by_memory[i];
        const GpuClass *g = &s->cat->classes[c];
        int card = g->mig_parent_index >= 0 ? g->mig_parent_index : c;
        if (g->memory_gb < r->memory_gb || !s->class_nodes[card] || policy_refusal(s, r, c))
            continue;
        looked++;
        SchedReason why = place_diagnose(s, r, c);
        for (size_t k = 0; k < best; k++)
            if (order[k] == why)
                best = k;
    }
    return order[best];
}

static SchedReason diagnose(const Sched *s, const Req *r, int c) {
    int fast = diagnose_fast(s, r, c);
    if (fast >= 0)
        return (SchedReason)fast;
    Diag dg = {0};
    const GpuClass *g = c >= 0 ? &s->cat->classes[c] : NULL;
    if (g && g->vendor == VENDOR_APPLE) {
        dg.any = s->class_nodes[c] > 0;
        const User *u = &s->users[r->user];
        for (size_t i = 0; i < u->n_owned; i++)
            diag_apple(s, r, &s->nodes[u->owned[i].node], c, &dg);
        dg.any = dg.any || dg.allowed;
    } else {
        /* A bounded look at the nodes that have the class (all nodes for cpu), from a start
         * that differs per request: the reason is a sentence for people, and must not make a
         * decision O(fleet). Read-only, so a request's reason is found afresh when asked. */
        int card = g ? (g->mig_parent_index >= 0 ? g->mig_parent_index : c) : -1;
        size_t n = card >= 0 ? s->class_nodes[card] : s->n_order;
        size_t look = MIN(n, (size_t)DIAG_MAX_NODES), start = n ? (size_t)(r->seq % n) : 0;
        if (card == c)
            diag_room_nodes(s, r, c, &dg);
        /* QUEUED as some node's only blocker outranks everything, and later nodes only add
         * blockers: once it is noted, the answer is settled and the rest need no look. */
        /* k walks the list from start, wrapping to 0 (without a division per node). */
        for (size_t i = 0, k = start;
             i < look && !(dg.allowed && (dg.single & BLOCK(SCHED_REASON_QUEUED)));
             i++, k = k + 1 == n ? 0 : k + 1) {
            if (card < 0)
                diag_cpu(s, r, &s->nodes[s->order[k]], &dg);
            else if (card != c)
                diag_slice(s, r, &s->nodes[s->class_list[card][k]], c, &dg);
            else
                diag_whole(s, r, &s->class_cells[card][k], c, &dg);
        }
    }
    if (!dg.any)
        return SCHED_REASON_NO_NODE;
    if (!dg.allowed)
        return dg.internal ? SCHED_REASON_INTERNAL_ONLY : SCHED_REASON_OWNER_ONLY;
    /* A node's only blocker first (removed, the request runs there), in this order. When
     * every node has several, what the node is (Kata, mig_in_kata) comes before a mode switch:
     * a switch alone would not let the request run on any of them. */
    /* A reset check passes on its own, soon; a mode switch waits for an operator: where both
     * are some node's only blocker, the check is what lets the request run soonest (R9). */
    static const SchedReason single_order[] = {
            SCHED_REASON_QUEUED,   SCHED_REASON_RESET_CHECK,    SCHED_REASON_MODE_MISMATCH,
            SCHED_REASON_NO_KATA,  SCHED_REASON_NO_MIG_IN_KATA, SCHED_REASON_MACOS_VM_LIMIT,
            SCHED_REASON_CORDONED, SCHED_REASON_NO_CAPACITY,
    };
    static const SchedReason all_order[] = {
            SCHED_REASON_QUEUED,        SCHED_REASON_NO_KATA,     SCHED_REASON_NO_MIG_IN_KATA,
            SCHED_REASON_MODE_MISMATCH, SCHED_REASON_RESET_CHECK, SCHED_REASON_MACOS_VM_LIMIT,
            SCHED_REASON_CORDONED,      SCHED_REASON_NO_CAPACITY,
    };
    _Static_assert(sizeof(single_order) == sizeof(all_order), "the same reasons, reordered");
    const SchedReason *order = dg.single ? single_order : all_order;
    uint32_t set = dg.single ? dg.single : dg.all;
    for (size_t i = 0; i < sizeof(single_order) / sizeof(single_order[0]); i++)
        if (set & BLOCK(order[i]))
            return order[i];
    return SCHED_REASON_NO_CAPACITY;
}
