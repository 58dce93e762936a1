/* feasible.c: whether any node of the fleet could ever run a request (R18).
 *
 * "Ever" means: whatever changes by itself or by an operator's ordinary action is assumed to
 * turn out right (allocations end, a node's mode or a GPU's binding is switched, MIG mode is
 * turned on, cordons and quarantines are lifted, reset checks pass, lost agents return).
 * What a node is decides: which classes and how many GPUs (or cores, or Mac GPU memory) it
 * has, who owns it, which site trusts whom, whether it runs Kata and MIG under Kata, its
 * platform. A request for which no node passes those checks is refused at submit with the
 * reason of the node that came closest, unless its user asked to wait for nodes that may
 * join.
 *
 * Cost: only for a request that could not be placed at once. Most are answered in O(1) from
 * a per-class summary (the most GPUs of the class on any node, and on a node with Kata, ...),
 * kept lazily up to date; the rest look at the nodes that have the class (all nodes for cpu,
 * the user's own for an owner-only class), stopping at the first that could run it. */
#include <stdlib.h>

#include "sched-internal.h"

/* What the fleet could ever hold of one card class (or of cpu cores), whoever asks. */
struct FeasCap {
    unsigned max_any;  /* GPUs of the class on one node (cores for cpu) */
    unsigned max_kata; /* the same on a Linux node with Kata */
    uint8_t kata_mig;  /* bit s: a node with the class runs MIG slices under Kata, and a GPU
                        * of the class there offers MIG shape s (R2c) */
};

void feasible_prepare(Sched *s) {
    size_t nc = s->cat->n_classes;
    if (s->feas && s->feas_gen == s->fleet_gen)
        return;
    if (!s->feas && !(s->feas = calloc(nc + 1, sizeof(*s->feas))))
        return; /* feasible_reason() scans instead */
    for (size_t c = 0; c <= nc; c++)
        s->feas[c] = (struct FeasCap){0};
    for (size_t i = 0; i < s->n_order; i++) {
        const Node *n = &s->nodes[s->order[i]];
        bool kata_linux = n->kata && n->platform == PLATFORM_LINUX;
        struct FeasCap *cpu = &s->feas[nc];
        cpu->max_any = MAX(cpu->max_any, n->cpu_cores);
        if (kata_linux)
            cpu->max_kata = MAX(cpu->max_kata, n->cpu_cores);
        unsigned have[SCHED_NODE_MAX_DEVICES] = {0};
        uint8_t shapes[SCHED_NODE_MAX_DEVICES] = {0};
        int cls[SCHED_NODE_MAX_DEVICES];
        unsigned k = 0;
        for (unsigned d = 0; d < n->n_devices; d++) {
            int c = n->devices[d].cls;
            if (c < 0)
                continue;
            unsigned j = 0;
            while (j < k && cls[j] != c)
                j++;
            if (j == k)
                cls[k++] = c;
            have[j]++;
            shapes[j] |= n->devices[d].mig_offered;
        }
        for (unsigned j = 0; j < k; j++) {
            struct FeasCap *f = &s->feas[cls[j]];
            f->max_any = MAX(f->max_any, have[j]);
            if (kata_linux)
                f->max_kata = MAX(f->max_kata, have[j]);
            if (kata_linux && n->mig_in_kata)
                f->kata_mig |= shapes[j];
        }
    }
    s->feas_gen = s->fleet_gen;
}

/* True when the summary shows a node that runs r on class c whoever r's user is (a node with
 * Kata serves strangers and everyone else alike); false when only a look at the nodes tells. */
static bool summary_says_yes(const Sched *s, const Req *r, int c) {
    if (!s->feas || s->feas_gen != s->fleet_gen)
        return false;
    bool vm = r->kind == WORKLOAD_VM;
    if (c == CHOICE_CPU) {
        const struct FeasCap *f = &s->feas[s->cat->n_classes];
        return vm ? r->guest == GUEST_LINUX && f->max_any >= r->count : f->max_kata >= r->count;
    }
    const GpuClass *g = &s->cat->classes[c];
    if (g->owner_only || g->internal_only || g->vendor == VENDOR_APPLE)
        return false;
    if (g->mig_parent_index >= 0)
        return (s->feas[g->mig_parent_index].kata_mig >> g->mig_shape) & 1u;
    const struct FeasCap *f = &s->feas[c];
    return (vm ? f->max_any : f->max_kata) >= r->count;
}

/* How far a node got through the checks, in order; the reason of the furthest is shown. */
typedef enum Stage {
    STAGE_NONE,       /* no node of the class looked at */
    STAGE_ACCESS,     /* failed who may use the class (R9, R10) */
    STAGE_CAPABILITY, /* failed Kata or MIG under Kata (R2b, R2c), or the platform */
    STAGE_SIZE,       /* failed the size: too few GPUs, cores or Mac GPU memory */
    STAGE_OK,
} Stage;

typedef struct Verdict {
    Stage stage;
    SchedReason reason;
} Verdict;

static void note(Verdict *v, Stage st, SchedReason why) {
    if (st > v->stage)
        *v = (Verdict){st, why};
}

static Relation rel_of(const Sched *s, const Node *n, uint32_t user) {
    return user == NIL ? RELATION_STRANGER : relation_of(s, n, user);
}

/* The GPUs of node n that class c's units are on: of the card class, and for a slice class
 * those whose NVML offers the slice's shape (R2c). */
static unsigned gpus_of_class(const Sched *s, const Node *n, int c) {
    const GpuClass *g = &s->cat->classes[c];
    bool slice = g->mig_parent_index >= 0;
    int card = slice ? g->mig_parent_index : c;
    unsigned have = 0;
    for (unsigned i = 0; i < n->n_devices; i++)
        have += n->devices[i].cls == card &&
                (!slice || device_offers_mig(&n->devices[i], g->mig_shape));
    return have;
}

static Verdict node_gpu(const Sched *s, const Req *r, uint32_t user, const Node *n, int c) {
    const GpuClass *g = &s->cat->classes[c];
    bool slice = g->mig_parent_index >= 0;
    unsigned have = gpus_of_class(s, n, c);
    if (!have)
        return (Verdict){STAGE_NONE, SCHED_REASON_NO_NODE};
    Relation rel = rel_of(s, n, user);
    if (g->owner_only && rel != RELATION_OWNER)
        return (Verdict){STAGE_ACCESS, SCHED_REASON_OWNER_ONLY};
    if (g->internal_only && rel == RELATION_STRANGER && s->sites[n->site].kind == SITE_DATACENTER)
        return (Verdict){STAGE_ACCESS, SCHED_REASON_INTERNAL_ONLY};
    bool stranger_container = r->kind != WORKLOAD_VM && rel == RELATION_STRANGER;
    if (g->vendor == VENDOR_APPLE) {
        if (n->platform != PLATFORM_MACOS)
            return (Verdict){STAGE_NONE, SCHED_REASON_NO_NODE};
        if (r->memory_gb > n->apple_usable_gb)
            return (Verdict){STAGE_SIZE, SCHED_REASON_TOO_LARGE};
        return (Verdict){STAGE_OK, SCHED_REASON_NONE};
    }
    if (slice && stranger_container && !(n->kata && n->mig_in_kata))
        return (Verdict){STAGE_CAPABILITY, SCHED_REASON_NO_MIG_IN_KATA};
    if (!slice && stranger_container && !n->kata)
        return (Verdict){STAGE_CAPABILITY, SCHED_REASON_NO_KATA};
    if (!slice && have < r->count)
        return (Verdict){STAGE_SIZE, SCHED_REASON_TOO_LARGE};
    return (Verdict){STAGE_OK, SCHED_REASON_NONE};
}

static Verdict node_cpu(const Sched *s, const Req *r, uint32_t user, const Node *n) {
    Relation rel = rel_of(s, n, user);
    if (r->kind == WORKLOAD_VM) {
        if (r->guest == GUEST_MACOS && n->platform != PLATFORM_MACOS)
            return (Verdict){STAGE_NONE, SCHED_REASON_MACOS_GUEST_NOT_MAC};
        if (r->guest == GUEST_MACOS && rel != RELATION_OWNER) /* its Metal is the Mac's GPU */
            return (Verdict){STAGE_ACCESS, SCHED_REASON_OWNER_ONLY};
    } else if (n->platform == PLATFORM_MACOS && rel == RELATION_STRANGER)
        return (Verdict){STAGE_ACCESS,
                         SCHED_REASON_OWNER_ONLY}; /* native processes: no isolation */
    else if (n->platform == PLATFORM_LINUX && rel == RELATION_STRANGER && !n->kata)
        return (Verdict){STAGE_CAPABILITY, SCHED_REASON_NO_KATA};
    if (n->cpu_cores < r->count)
        return (Verdict){STAGE_SIZE, SCHED_REASON_TOO_LARGE};
    return (Verdict){STAGE_OK, SCHED_REASON_NONE};
}

/* The verdict for one class (or cpu) over the fleet; stops at the first node that could. */
static Verdict class_verdict(const Sched *s, const Req *r, uint32_t user, int c) {
    Verdict v = {STAGE_NONE, SCHED_REASON_NO_NODE};
    if (summary_says_yes(s, r, c))
        return (Verdict){STAGE_OK, SCHED_REASON_NONE};
    if (c == CHOICE_CPU) {
        /* Nodes there are, but a macOS guest needs a Mac (R10), not "this class". */
        if (r->kind == WORKLOAD_VM && r->guest == GUEST_MACOS && s->n_order)
            v.reason = SCHED_REASON_MACOS_GUEST_NOT_MAC;
        for (size_t i = 0; i < s->n_order && v.stage < STAGE_OK; i++) {
            Verdict w = node_cpu(s, r, user, &s->nodes[s->order[i]]);
            note(&v, w.stage, w.reason);
        }
        return v;
    }
    const GpuClass *g = &s->cat->classes[c];
    int card = g->mig_parent_index >= 0 ? g->mig_parent_index : c;
    if (g->owner_only) {
        /* Only the user's own machines could ever serve it (R10). */
        if (s->class_nodes[card])
            v = (Verdict){STAGE_ACCESS, SCHED_REASON_OWNER_ONLY};
        const User *u = user != NIL ? &s->users[user] : NULL;
        for (size_t i = 0; u && i < u->n_owned && v.stage < STAGE_OK; i++) {
            const Node *n = &s->nodes[u->owned[i].node];
            if (n->alive) {
                Verdict w = node_gpu(s, r, user, n, c);
                note(&v, w.stage, w.reason);
            }
        }
        return v;
    }
    for (uint32_t i = 0; i < s->class_nodes[card] && v.stage < STAGE_OK; i++) {
        const Node *n = &s->nodes[s->class_list[card][i]];
        if (n->alive) {
            Verdict w = node_gpu(s, r, user, n, c);
            note(&v, w.stage, w.reason);
        }
    }
    return v;
}

/* What node n holds of what r asks for class c (GPUs of the class, cores, or a Mac's usable
 * GPU memory in GB), counted only where n gets as far as the size check for r's user. */
static unsigned node_size(const Sched *s, const Req *r, uint32_t user, const Node *n, int c) {
    if (!n->alive)
        return 0;
    if (c == CHOICE_CPU)
        return node_cpu(s, r, user, n).stage >= STAGE_SIZE ? n->cpu_cores : 0;
    if (node_gpu(s, r, user, n, c).stage < STAGE_SIZE)
        return 0;
    return s->cat->classes[c].vendor == VENDOR_APPLE ? n->apple_usable_gb : gpus_of_class(s, n, c);
}

unsigned feasible_most(const Sched *s, const Req *r, int c) {
    unsigned most = 0;
    if (c == CHOICE_CPU) {
        for (size_t i = 0; i < s->n_order; i++)
            most = MAX(most, node_size(s, r, r->user, &s->nodes[s->order[i]], c));
        return most;
    }
    if (c < 0 || s->cat->classes[c].mig_parent_index >= 0)
        return 0; /* a memory need, or a slice: one unit, never too many */
    if (s->cat->classes[c].owner_only) {
        const User *u = &s->users[r->user];
        for (size_t i = 0; i < u->n_owned; i++)
            most = MAX(most, node_size(s, r, r->user, &s->nodes[u->owned[i].node], c));
        return most;
    }
    for (uint32_t i = 0; i < s->class_nodes[c]; i++)
        most = MAX(most, node_size(s, r, r->user, &s->nodes[s->class_list[c][i]], c));
    return most;
}

SchedReason feasible_reason(const Sched *s, const Req *r, uint32_t user, SchedReason *ret_first) {
    Verdict first = {STAGE_NONE, SCHED_REASON_NO_NODE};
    if (r->choice == CHOICE_MEMORY) {
        /* A class that holds it, on some node, that the rules refuse for this workload (a VM
         * on an AMD GPU, a slice in a VM): the true reason when no other class could. */
        SchedReason rule = SCHED_REASON_NONE;
        for (size_t i = 0; i < s->n_by_memory && first.stage < STAGE_OK; i++) {
            int c = s->by_memory[i];
            if (s->cat->classes[c].memory_gb < r->memory_gb)
                continue;
            SchedReason refused = policy_refusal(s, r, c);
            if (refused) {
                int card = s->cat->classes[c].mig_parent_index >= 0
                                   ? s->cat->classes[c].mig_parent_index
                                   : c;
                if (!rule && s->class_nodes[card])
                    rule = refused;
                continue;
            }
            Verdict v = class_verdict(s, r, user, c);
            note(&first, v.stage, v.reason);
        }
        if (first.stage == STAGE_NONE && rule)
            first.reason = rule;
    } else
        first = class_verdict(s, r, user, r->choice);
    if (ret_first)
        *ret_first = first.stage == STAGE_OK ? SCHED_REASON_NONE : first.reason;
    if (first.stage == STAGE_OK)
        return SCHED_REASON_NONE;
    /* Alternatives count too: the request falls back to them after its wait (R13). */
    for (unsigned i = 0; i < r->n_fb; i++)
        if (r->fb[i] != CHOICE_NEVER && class_verdict(s, r, user, r->fb[i]).stage == STAGE_OK)
            return SCHED_REASON_NONE;
    return first.reason;
}
