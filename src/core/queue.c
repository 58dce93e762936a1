/* queue.c: requests (submit, restore, release), the FIFO queue with backfill and fallback
 * deadlines (R13), and the walks that place waiters when a node frees room. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched-internal.h"
#include "sentence.h"
#include "util/strutil.h"

static void check_now(const Sched *s) {
    if (!s->check)
        return;
    Error e = {0};
    if (sched_check(s, &e) < 0) {
        fprintf(stderr, "sched invariant violated: %s\n", e.message);
        abort();
    }
}

/* ---- requests ---- */

/* Resolve a class name of a request: a class index, CHOICE_CPU, or a refusal reason. */
static SchedReason resolve_class(const Sched *s, const char *name, int *ret) {
    /* "cpu" by its bytes, not by strcmp(): every request's class is tested. */
    if (name[0] == 'c' && name[1] == 'p' && name[2] == 'u' && name[3] == '\0') {
        *ret = CHOICE_CPU;
        return SCHED_REASON_NONE;
    }
    uint32_t ci;
    if (!strmap_get(&s->class_map, name, &ci))
        return string_contains_nocase(name, "vgpu") ? SCHED_REASON_VGPU
                                                    : SCHED_REASON_UNKNOWN_CLASS;
    int c = (int)ci;
    *ret = s->cat->classes[c].vendor == VENDOR_CPU ? CHOICE_CPU : c;
    return SCHED_REASON_NONE;
}

/* Grow s->reqs to nc requests, aligned to cache lines (see Req): realloc() the raw block with
 * room to align inside it, since large blocks then move by remapping pages instead of being
 * copied (aligned_alloc() and a copy cost 50 MB of copying while a 10,000-node fleet fills). */
static int reqs_grow(Sched *s, size_t nc) {
    size_t old_off = s->reqs ? (size_t)((char *)s->reqs - (char *)s->reqs_raw) : 0;
    char *raw = realloc(s->reqs_raw, nc * sizeof(Req) + _Alignof(Req));
    if (!raw)
        return -ENOMEM;
    size_t off = (size_t)(-(uintptr_t)raw & (_Alignof(Req) - 1));
    if (s->n_reqs && off != old_off)
        memmove(raw + off, raw + old_off, s->n_reqs * sizeof(Req));
    s->reqs_raw = raw;
    s->reqs = (Req *)(void *)(raw + off);
    return 0;
}

static int req_slot(Sched *s, uint32_t *ret) {
    if (s->free_req != NIL) {
        *ret = s->free_req;
        s->free_req = s->reqs[*ret].q.next;
        return 0;
    }
    if (s->n_reqs == s->cap_reqs) {
        size_t nc = s->cap_reqs ? s->cap_reqs * 2 : 64;
        if (reqs_grow(s, nc) < 0)
            return -ENOMEM;
        s->cap_reqs = nc;
    }
    *ret = (uint32_t)s->n_reqs++;
    return 0;
}

static void req_drop(Sched *s, uint32_t ri) {
    Req *r = &s->reqs[ri];
    reqmap_remove(&s->req_map, r->id_hash, ri);
    if (r->id_len >= REQ_ID_INLINE)
        free(r->idb.heap_id);
    /* Only what marks the slot free and chains it: every reader of s->reqs tests `used`
     * first, and a reuse overwrites the whole Req. Zeroing all of it wrote every cache line
     * of the Req, most of which a release does not otherwise touch. */
    r->used = false;
    r->placed = false;
    r->q = (Link){NIL, s->free_req};
    s->free_req = ri;
    s->n_live_reqs--;
}

/* req_build()'s checks of the classes and fields of a spec whose id and user were checked,
 * filling *r as it goes. */
static SchedReason req_fill(Sched *s, const RequestSpec *spec, size_t id_len, uint32_t id_hash,
                            Req *r, const char **subject) {
    /* Every field before fb_names, whose first n_fb entries the loop below sets and nothing
     * reads past: the array's tail is the Req's fifth cache line, which a request with at most
     * four alternatives then never writes (in a grown array, a line never touched before). */
    memset(r, 0, offsetof(Req, fb_names));
    r->kind = spec->kind;
    r->guest = spec->kind == WORKLOAD_VM ? spec->guest : GUEST_LINUX;
    r->memory_gb = spec->memory_gb;
    r->count = spec->count ? spec->count : 1;
    r->share = spec->share;
    r->runtime = spec->kind == WORKLOAD_ENDPOINT ? spec->runtime : ENDPOINT_RUNTIME_NONE;
    r->gguf = spec->kind == WORKLOAD_ENDPOINT && spec->gguf;
    r->submitted = spec->submitted;
    r->n_fb = (unsigned)spec->n_fallback;
    r->fb_index = -1;
    r->wait_for_nodes = spec->wait_for_nodes;
    r->q = (Link){NIL, NIL};
    r->pcls = -1;
    r->id_len = (uint8_t)id_len;
    r->id_hash = id_hash;
    if (id_len < REQ_ID_INLINE)
        memcpy(r->idb.inline_id, spec->id, id_len); /* the rest is zero: terminated */
    else
        r->idb.heap_id = (char *)spec->id; /* borrowed until register_req() copies it */
    /* R13: the fallback opens at submitted + wait exactly, in the caller's own units. */
    uint64_t wait;
    if (!spec->n_fallback || __builtin_mul_overflow(spec->wait_s, s->units_per_second, &wait) ||
        __builtin_add_overflow(spec->submitted, wait, &r->deadline))
        r->deadline = UINT64_MAX;
    SchedReason why;
    if (!spec->class_name) {
        if (!spec->memory_gb)
            return SCHED_REASON_BAD_REQUEST;
        r->choice = CHOICE_MEMORY;
        *subject = "memory";
        /* R18, the true reason: no class has that much memory, or none of those that have
         * may run this workload (the first one's refusal says why). */
        SchedReason first = SCHED_REASON_TOO_LARGE;
        bool any = false;
        for (size_t i = 0; i < s->n_by_memory && !any; i++) {
            int c = s->by_memory[i];
            if (s->cat->classes[c].memory_gb < spec->memory_gb)
                continue;
            SchedReason why_not = policy_refusal(s, r, c);
            any = why_not == SCHED_REASON_NONE;
            if (first == SCHED_REASON_TOO_LARGE)
                first = why_not;
        }
        if (!any)
            return first;
    } else {
        *subject = spec->class_name;
        why = resolve_class(s, spec->class_name, &r->choice);
        if (why)
            return why;
        why = policy_refusal(s, r, r->choice);
        if (why)
            return why;
        /* R18: a memory need is what one unit must hold, and every unit of a card or slice
         * class has the class's memory: above it, none ever could. (A Mac's need is GPU memory
         * out of its unified pool, which placement measures against each Mac.) */
        if (spec->memory_gb && r->choice >= 0) {
            const GpuClass *g = &s->cat->classes[r->choice];
            if (g->vendor != VENDOR_APPLE && g->memory_gb && spec->memory_gb > g->memory_gb)
                return SCHED_REASON_TOO_LARGE;
        }
    }
    for (size_t i = 0; i < spec->n_fallback; i++) {
        *subject = spec->fallback[i];
        if (isempty(spec->fallback[i]))
            return SCHED_REASON_BAD_REQUEST;
        why = resolve_class(s, spec->fallback[i], &r->fb[i]);
        if (why)
            return why;
        r->fb_names[i] = decision_choice_name(s, r->fb[i]);
        /* An alternative a rule keeps from ever taking this request (a Mac's one GPU for a
         * gang of two, a macOS guest off a Mac) is never free, so it is never taken (R13): it
         * is skipped, not a refusal of a request its other choices can run (R18). It keeps
         * its place, which fallback_index counts as the user wrote the list. */
        if (policy_refusal_alternative(s, r, r->fb[i]) != SCHED_REASON_NONE)
            r->fb[i] = CHOICE_NEVER;
    }
    return SCHED_REASON_NONE;
}

/* Validate a spec into *r (not yet registered). Returns a refusal reason and its subject, and
 * the user name's strmap_hash() in *user_hash, for registration (the name is measured here
 * anyway). */
static SchedReason req_build(Sched *s, const RequestSpec *spec, Req *r, const char **subject,
                             uint32_t *user_hash) {
    *subject = spec->id;
    size_t id_len = spec->id ? strnlen(spec->id, SCHED_ID_MAX) : 0;
    size_t user_len = spec->user ? strnlen(spec->user, SCHED_ID_MAX) : 0;
    if (!id_len || id_len >= SCHED_ID_MAX || !user_len || user_len >= SCHED_ID_MAX ||
        (int)spec->kind < 0 || spec->kind >= _WORKLOAD_KIND_MAX || (int)spec->guest < 0 ||
        spec->guest >= _GUEST_OS_MAX || (int)spec->runtime < 0 ||
        spec->runtime >= _ENDPOINT_RUNTIME_MAX || spec->n_fallback > SCHED_MAX_FALLBACKS ||
        (spec->n_fallback && !spec->fallback))
        return SCHED_REASON_BAD_REQUEST;
    uint32_t id_hash = strmap_hash_len(spec->id, id_len);
    *user_hash = strmap_hash_len(spec->user, user_len);
    /* The duplicate check reads a slot of an index of every live request, in a random place:
     * mostly a miss of every cache. It is started here and looked at after the class checks,
     * which need nothing from it, so that the two overlap; a duplicate still says so first. */
    reqmap_prefetch(&s->req_map, id_hash);
    SchedReason why = req_fill(s, spec, id_len, id_hash, r, subject);
    if (reqmap_find(&s->req_map, s->reqs, spec->id, id_len, id_hash) != NIL) {
        *subject = spec->id;
        return SCHED_REASON_DUPLICATE;
    }
    return why;
}

/* Try every class the request may take now, in order; on success apply it. */
static bool attempt(Sched *s, uint32_t ri, uint64_t now, bool backfill, uint32_t only) {
    Req *r = &s->reqs[ri];
    /* place_find() reads the request from w.r and writes only the placement fields (node up
     * to fb_index) of its scratch: copy that range, not the whole Req, in and out. */
    const size_t off = offsetof(Req, node), len = offsetof(Req, fb_index) - offsetof(Req, node);
    Req tmp;
    memcpy((char *)&tmp + off, (const char *)r + off, len);
    Want w = {.r = r, .backfill = backfill, .only = only};
    bool found = false;
    if (r->choice == CHOICE_MEMORY) {
        for (size_t i = 0; i < s->n_by_memory && !found; i++) {
            int c = s->by_memory[i];
            if (s->cat->classes[c].memory_gb < r->memory_gb || policy_refusal(s, r, c))
                continue;
            w.cls = c;
            found = place_find(s, &w, &tmp);
        }
    } else {
        w.cls = r->choice;
        found = place_find(s, &w, &tmp);
    }
    int fb_index = -1;
    for (unsigned i = 0; !found && r->expired && i < r->n_fb; i++) {
        if (r->fb[i] == CHOICE_NEVER)
            continue;
        w.cls = r->fb[i];
        w.fallback = true;
        found = place_find(s, &w, &tmp);
        fb_index = (int)i;
    }
    if (!found)
        return false;
    memcpy((char *)r + off, (const char *)&tmp + off, len);
    r->fb_index = fb_index;
    if (place_apply(s, ri) < 0) {
        r->placed = false;
        return false;
    }
    return true;
}

/* Insert ri into a FIFO ordered by (submitted, arrival), searching from the tail since new
 * requests almost always come last. */
typedef Link *(*QLinkOf)(Sched *s, uint32_t ri);
static Link *q_of(Sched *s, uint32_t ri) {
    return &s->reqs[ri].q;
}
static Link *cq_of(Sched *s, uint32_t ri) {
    return &s->reqs[ri].cq;
}
static Link *xq_of(Sched *s, uint32_t ri) {
    return &s->reqs[ri].xq;
}
static Link *dq_of(Sched *s, uint32_t ri) {
    return &s->reqs[ri].dq;
}

static void fifo_insert(Sched *s, QLinkOf of, uint32_t *head, uint32_t *tail, uint32_t ri) {
    uint64_t sub = s->reqs[ri].submitted;
    uint32_t after = *tail;
    while (after != NIL && s->reqs[after].submitted > sub)
        after = of(s, after)->prev;
    Link *l = of(s, ri);
    l->prev = after;
    l->next = after == NIL ? *head : of(s, after)->next;
    if (l->next != NIL)
        of(s, l->next)->prev = ri;
    else
        *tail = ri;
    if (after != NIL)
        of(s, after)->next = ri;
    else
        *head = ri;
}

static void fifo_remove(Sched *s, QLinkOf of, uint32_t *head, uint32_t *tail, uint32_t ri) {
    Link *l = of(s, ri);
    if (l->prev != NIL)
        of(s, l->prev)->next = l->next;
    else
        *head = l->next;
    if (l->next != NIL)
        of(s, l->next)->prev = l->prev;
    else
        *tail = l->prev;
    l->prev = l->next = NIL;
}

static int qkey_of(const Sched *s, const Req *r) {
    int n = (int)s->cat->n_classes;
    return r->choice == CHOICE_CPU ? n : r->choice == CHOICE_MEMORY ? n + 1 : r->choice;
}

/* Adds (sign 1) or takes away (-1) a waiting request's GPUs in its class's gang share. */
static void gang_share_count(Sched *s, const Req *r, int sign) {
    GangShare *g = &s->gang_share[r->qkey];
    uint32_t n = MAX(r->count, 1u) * (uint32_t)sign; /* wraps to subtract */
    g->wait_gpus += n;
    if (r->count >= 2)
        g->gang_gpus += n;
}

/* Whether one more gang of class c may reserve a node: the class's gangs reserve at most
 * their share of its waiting GPUs, of its nodes (rounded up, at least one). More would close
 * nodes that the one-GPU requests ahead of the younger gangs could keep busy. */
static bool gang_may_reserve(const Sched *s, int c) {
    const GangShare *g = &s->gang_share[c];
    uint64_t cap = g->wait_gpus ? ((uint64_t)s->class_nodes[c] * g->gang_gpus + g->wait_gpus - 1) /
                                          g->wait_gpus
                                : 0;
    return g->reserved < MAX(cap, 1u);
}

/* Whether waiter r, joining or leaving its FIFO, is among the waiters a walk of that reach
 * meets. One that joins with the submit time of the last met goes behind it; one that leaves
 * with it may be the last met or one before. */
static bool reach_meets(const WalkReach *reach, const Req *r, bool joins) {
    return !reach->full || r->submitted < reach->last || (!joins && r->submitted == reach->last);
}

/* Waiter r joined its class FIFO (WalkMemo: what keeps the memo). A memo by binding is
 * dropped for any joiner the walk would meet and not pass over for its count. */
static void walk_memo_joined(WalkMemo *m, const Req *r) {
    if (m->room && reach_meets(&m->reach, r, true) &&
        (m->reach.full || r->count <= m->room || r->expired))
        m->room = 0;
}

/* Waiter ri leaves its class FIFO, still linked in it (WalkMemo: what keeps the memo). If
 * the memo's walk stopped at its miss limit and ri was among the waiters it met (or may have
 * been: one submitted at the same time as the last met may stand behind it), a walk now
 * meets one more, the one after the last it met. Where that one is passed over too, the memo
 * reaches it and stays: after a release most leavers are among the first waiters of a FIFO,
 * and clearing the memo for each sent the next walks through the same waiters again. */
static void walk_memo_left(Sched *s, WalkMemo *m, uint32_t ri) {
    const Req *r = &s->reqs[ri];
    if (!m->room || !m->reach.full || !reach_meets(&m->reach, r, false))
        return;
    uint32_t after = m->last_met == ri ? r->cq.next : s->reqs[m->last_met].cq.next;
    if (after == ri) /* ri stood just behind the last met: the one after it comes in */
        after = r->cq.next;
    if (after == NIL) {
        m->reach.full = false; /* a walk now reaches the FIFO's end, passing everyone */
        return;
    }
    if (!walk_memo_passes(s, m, &s->reqs[after])) {
        m->room = 0;
        return;
    }
    m->last_met = after;
    m->reach.last = s->reqs[after].submitted;
}

static void queue_insert(Sched *s, uint32_t ri) {
    Req *r = &s->reqs[ri];
    fifo_insert(s, q_of, &s->q_head, &s->q_tail, ri);
    queue_positions_add(s, r->seq, 1);
    r->qkey = qkey_of(s, r);
    fifo_insert(s, cq_of, &s->cq_head[r->qkey], &s->cq_tail[r->qkey], ri);
    walk_memo_joined(&s->walk_memo[r->qkey], r);
    gang_share_count(s, r, 1);
    if (r->n_fb && r->deadline < s->min_deadline)
        s->min_deadline = r->deadline;
    if (r->expired && r->n_fb) {
        fifo_insert(s, xq_of, &s->xq_head, &s->xq_tail, ri);
        r->in_xq = true;
    } else if (r->n_fb) {
        fifo_insert(s, dq_of, &s->dq_head, &s->dq_tail, ri);
        r->in_dq = true;
    }
    s->n_waiting++;
}

static void reserve_gang(Sched *s, uint32_t ri);

/* A waiting gang that holds no node reserves one (reserve_gang()). Inline, because the queue
 * walks call it for every waiter they pass and most are no gang or hold one already: the test
 * reads the Req line the walk just read, where a call would cost more than the test. */
static inline __attribute__((always_inline)) void maybe_reserve(Sched *s, uint32_t ri) {
    if (gang_to_reserve(&s->reqs[ri]))
        reserve_gang(s, ri);
}

/* How far down its class FIFO a released reservation looks for the next gang to hold one:
 * gangs are rarely far apart, and a bound keeps a release O(1). */
#define RESERVE_SCAN_LIMIT 256

/* A reservation was let go (its gang placed or gone): the oldest waiting gang of the class
 * that holds none takes one now, not only when a walk happens to reach it (a walk ends as
 * soon as the freed GPUs are taken, usually well before the gangs deeper in the queue). */
static void reserve_next_gang(Sched *s, int c) {
    if (!gang_may_reserve(s, c))
        return;
    unsigned seen = 0;
    for (uint32_t ri = s->cq_head[c]; ri != NIL && seen < RESERVE_SCAN_LIMIT;
         ri = s->reqs[ri].cq.next, seen++)
        if (s->reqs[ri].count >= 2 && s->reqs[ri].reserved_node == NIL) {
            maybe_reserve(s, ri);
            return;
        }
}

/* Returns the node a gang reservation held for ri, or NIL. */
static uint32_t queue_remove(Sched *s, uint32_t ri) {
    Req *r = &s->reqs[ri];
    fifo_remove(s, q_of, &s->q_head, &s->q_tail, ri);
    queue_positions_add(s, r->seq, -1);
    walk_memo_left(s, &s->walk_memo[r->qkey], ri); /* before it is unlinked: it reads after it */
    fifo_remove(s, cq_of, &s->cq_head[r->qkey], &s->cq_tail[r->qkey], ri);
    gang_share_count(s, r, -1);
    if (r->in_xq)
        fifo_remove(s, xq_of, &s->xq_head, &s->xq_tail, ri);
    if (r->in_dq)
        fifo_remove(s, dq_of, &s->dq_head, &s->dq_tail, ri);
    r->in_xq = r->in_dq = false;
    s->n_waiting--;
    uint32_t held = r->reserved_node;
    r->reserved_node = NIL;
    if (held != NIL) {
        node_set_reserved(s, held, NIL);
        reserve_next_gang(s, r->choice);
    }
    return held;
}

static __attribute__((noinline)) void reserve_gang(Sched *s, uint32_t ri) {
    Req *r = &s->reqs[ri];
    if (!gang_may_reserve(s, r->choice))
        return;
    uint32_t ni = place_reserve_node(s, r, r->choice);
    if (ni != NIL) {
        node_set_reserved(s, ni, ri);
        r->reserved_node = ni;
    }
}

static void placed_from_queue(Sched *s, uint32_t ri) {
    uint32_t held = queue_remove(s, ri);
    /* A gang placed away from the node it held leaves that node's room to the requests its
     * reservation kept off it (FIFO with backfill, sched.h): offered to them after this walk,
     * unless the next gang holds it now. */
    if (held != NIL && held != s->reqs[ri].node && s->nodes[held].reserved_by == NIL) {
        if (s->n_unheld < UNHELD_MAX)
            s->unheld[s->n_unheld++] = held;
        else
            s->unheld_overflow = true;
    }
    if (s->on_placed) {
        Decision d;
        decision_of(s, ri, false, false, &d);
        s->on_placed(s->on_placed_data, req_id(&s->reqs[ri]), &d);
    }
}

/* The most units of class key node ni could still give (an upper bound; UINT_MAX: unknown). */
static unsigned node_room(const Sched *s, uint32_t ni, int key) {
    const Node *n = &s->nodes[ni];
    if (key == (int)s->cat->n_classes)
        return n->cpu_cores - n->cpu_used;
    if (key > (int)s->cat->n_classes || key < 0)
        return UINT32_MAX;
    const GpuClass *g = &s->cat->classes[key];
    if (g->mig_parent_index >= 0) {
        for (unsigned i = 0; i < n->n_devices; i++) {
            const Device *d = &n->devices[i];
            if (d->cls == g->mig_parent_index && d->mig_enabled &&
                s->mig_fits[g->mig_shape][d->mig_layout])
                return 1;
        }
        return 0;
    }
    if (g->vendor == VENDOR_APPLE)
        return UINT32_MAX;
    unsigned best = 0;
    for (unsigned k = 0; k < n->n_pools; k++)
        if (n->pools[k].pool / 2 == key)
            best = MAX(best, (unsigned)n->pools[k].free);
    for (uint32_t ts = n->ts_devices; ts && !best; ts &= ts - 1)
        if (n->devices[__builtin_ctz(ts)].cls == key)
            best = 1; /* a time slice may have room */
    return best;
}

/* Whether attempt() on node ni alone surely fails for a waiter of a whole-GPU class FIFO,
 * given the node's free GPUs of that class per binding. It mirrors find_whole() restricted to
 * one node: a first choice only (an expired request also tries its fallbacks), not a time
 * slice (it may join a shared GPU), and the pool of the binding it would use there has fewer
 * free GPUs than its gang. */
static bool surely_misses(const Sched *s, const Req *r, uint32_t ni, const unsigned pool_free[2]) {
    const Node *n = &s->nodes[ni];
    return binding_misses(s, r, n->owner, n->site, pool_free[BINDING_HOST],
                          pool_free[BINDING_VFIO]);
}

/* Whether memo m, by binding, holds for node ni with these free GPUs per binding: every
 * verdict of its walk stands there (see WalkMemo). */
static bool memo_binding_holds(const Sched *s, const WalkMemo *m, uint32_t ni,
                               const unsigned pool_free[2]) {
    const Node *n = &s->nodes[ni];
    return n->site == m->site && n->owner == m->owner && pool_free[BINDING_HOST] <= m->free[0] &&
           pool_free[BINDING_VFIO] <= m->free[1];
}

static void walk_fifo_list(Sched *s, uint64_t now, uint32_t ni, bool xq, int key, uint32_t head) {
    unsigned misses = 0, room = xq ? UINT32_MAX : node_room(s, ni, key), pool_free[2] = {0};
    WalkMemo *memo = xq || s->no_walk_memos ? NULL : &s->walk_memo[key];
    if (memo && room <= memo->room && !memo->by_binding)
        return; /* it would pass every waiter it meets over, as a walk with that room did */
    bool whole = !xq && place_whole_free(s, ni, key, pool_free), tried = false;
    if (memo && room <= memo->room && whole && memo_binding_holds(s, memo, ni, pool_free))
        return; /* the same, some of them for the binding they would use here */
    /* by_binding: passed some over by binding alone, none a gang still to reserve a node */
    bool by_binding = false;
    uint32_t ri = head, met = NIL; /* met: the last waiter it met */
    for (uint32_t next; ri != NIL && room && misses < WALK_MISS_LIMIT; ri = next) {
        met = ri;
        next = xq ? s->reqs[ri].xq.next : s->reqs[ri].cq.next;
        /* The next waiter's line is most often a miss: started now, it overlaps this one's
         * checks and attempt instead of following them. */
        if (next != NIL)
            __builtin_prefetch(&s->reqs[next]);
        if (s->reqs[ri].count > room && !s->reqs[ri].expired) {
            misses++; /* cannot fit here: no need to try */
            continue;
        }
        if (whole && surely_misses(s, &s->reqs[ri], ni, pool_free)) {
            if (gang_to_reserve(&s->reqs[ri])) {
                tried = true;
                reserve_gang(s, ri); /* what a failed attempt below leads to, without its cost */
            } else
                by_binding = true;
            misses++;
            continue;
        }
        tried = true;
        if (attempt(s, ri, now, true, ni)) {
            room = xq ? UINT32_MAX : node_room(s, ni, key);
            whole = !xq && place_whole_free(s, ni, key, pool_free);
            placed_from_queue(s, ri);
            misses = 0;
        } else {
            maybe_reserve(s, ri);
            misses++;
        }
    }
    /* It passed everyone it met over. A memo by binding does not replace one for count alone,
     * which holds on any node. */
    if (memo && !tried && room && met != NIL && !(by_binding && memo->room && !memo->by_binding)) {
        const Node *n = &s->nodes[ni];
        *memo = (WalkMemo){
                .room = room,
                .reach = {.full = ri != NIL, .last = s->reqs[met].submitted},
                .last_met = met,
                .by_binding = by_binding,
                .free = {(uint8_t)pool_free[BINDING_HOST], (uint8_t)pool_free[BINDING_VFIO]},
                .site = n->site,
                .owner = n->owner,
        };
    }
}

/* Most FIFOs of a node's classes (MIG slices, ...) are empty: the test is inlined in the
 * caller, since entering the walk (saving its registers) cost more than the test itself. */
static inline __attribute__((always_inline)) void walk_fifo(Sched *s, uint64_t now, uint32_t ni,
                                                            bool xq, int key, uint32_t head) {
    if (head != NIL)
        walk_fifo_list(s, now, ni, xq, key, head);
}

static void walk_node(Sched *s, uint64_t now, uint32_t ni);

/* Offer the nodes gangs placed elsewhere let go of (placed_from_queue()); their walks may let
 * go of more. */
static void walk_unheld(Sched *s, uint64_t now) {
    while (s->n_unheld || s->unheld_overflow) {
        if (s->unheld_overflow) {
            s->unheld_overflow = false;
            s->n_unheld = 0;
            for (size_t k = 0; k < s->n_order && s->n_waiting; k++)
                walk_node(s, now, s->order[k]);
            continue;
        }
        uint32_t ni = s->unheld[--s->n_unheld];
        if (s->nodes[ni].reserved_by == NIL)
            walk_node(s, now, ni);
    }
}

void queue_walk_node(Sched *s, uint64_t now, uint32_t ni) {
    walk_node(s, now, ni);
    walk_unheld(s, now);
}

static void walk_node(Sched *s, uint64_t now, uint32_t ni) {
    const Node *n = &s->nodes[ni];
    if (!s->n_waiting || !n->alive || !node_schedulable(n))
        return;
    /* The FIFOs of every class this node can serve, then cpu, memory needs and fallbacks. */
    for (unsigned i = 0; i < n->n_dev_classes; i++) {
        int c = n->dev_classes[i];
        walk_fifo(s, now, ni, false, c, s->cq_head[c]);
        for (const int *sl = s->slices_of[c]; *sl >= 0; sl++)
            walk_fifo(s, now, ni, false, *sl, s->cq_head[*sl]);
    }
    int nc = (int)s->cat->n_classes;
    walk_fifo(s, now, ni, false, nc, s->cq_head[nc]);
    walk_fifo(s, now, ni, false, nc + 1, s->cq_head[nc + 1]);
    walk_fifo(s, now, ni, true, -1, s->xq_head);
}

int sched_site_offer(Sched *s, const char *site, uint64_t now, Error *err) {
    uint32_t si;
    if (!site || !strmap_get(&s->site_map, site, &si))
        return error_set(err, -ENOENT, "no site named '%s'", strempty(site));
    for (size_t k = 0; k < s->n_order && s->n_waiting; k++)
        if (s->nodes[s->order[k]].site == si)
            queue_walk_node(s, now, s->order[k]);
    check_now(s);
    return 0;
}

/* Register the request req_build() wrote into slot ri: its own copy of a long id, its user,
 * its id in the index. On failure the caller gives the slot back (req_unslot()). */
static int register_in_place(Sched *s, const RequestSpec *spec, uint32_t user_hash, uint32_t ri,
                             Error *err) {
    Req *r = &s->reqs[ri];
    uint32_t user;
    char *heap_id = NULL; /* a long id's own copy */
    if ((r->id_len >= REQ_ID_INLINE && !(heap_id = strdup(r->idb.heap_id))) ||
        sched_user_intern_hashed(s, spec->user, user_hash, &user) < 0 ||
        reqmap_insert(&s->req_map, r->id_hash, ri) < 0) {
        free(heap_id);
        return error_set(err, -ENOMEM, "out of memory");
    }
    if (heap_id)
        r->idb.heap_id = heap_id;
    r->user = user;
    r->used = true;
    r->seq = s->next_seq++;
    r->reserved_node = NIL;
    s->n_live_reqs++;
    return 0;
}

/* Give back slot ri, taken by req_slot() while free_before was the free list's head and not
 * registered: the free list and the array end are left as they were, so that the next request
 * gets the index it would have got had the slot never been taken. */
static void req_unslot(Sched *s, uint32_t ri, uint32_t free_before) {
    if (free_before == ri) {
        s->reqs[ri] = (Req){.q = {NIL, s->free_req}};
        s->free_req = ri;
    } else {
        s->n_reqs--; /* it was the array's new last slot */
    }
}

static int register_req(Sched *s, const RequestSpec *spec, uint32_t user_hash, Req *built,
                        uint32_t *ret, Error *err) {
    uint32_t ri, free_before = s->free_req;
    if (req_slot(s, &ri) < 0)
        return error_set(err, -ENOMEM, "out of memory");
    s->reqs[ri] = *built;
    int r = register_in_place(s, spec, user_hash, ri, err);
    if (r < 0) {
        req_unslot(s, ri, free_before);
        return r;
    }
    *ret = ri;
    return 0;
}

int sched_submit(Sched *s, const RequestSpec *spec, uint64_t now, Decision *ret, Error *err) {
    /* Built in its slot, not on the stack and copied there: a Req is five cache lines, and a
     * copy wrote each of them twice. A refused request gives its slot back. */
    uint32_t ri, free_before = s->free_req;
    if (req_slot(s, &ri) < 0)
        return error_set(err, -ENOMEM, "out of memory");
    const char *subject;
    uint32_t user_hash;
    SchedReason why = req_build(s, spec, &s->reqs[ri], &subject, &user_hash);
    if (why) {
        /* A memory need above every unit it may take is said with the sizes (R18). */
        bool memory = spec->memory_gb && subject &&
                      (subject == spec->class_name || STREQ(subject, "memory")) &&
                      (why == SCHED_REASON_TOO_LARGE ||
                       (why == SCHED_REASON_NO_NODE && !spec->class_name));
        if (memory)
            decision_refuse_memory(ret, why, s, spec->memory_gb,
                                   spec->class_name ? s->reqs[ri].choice : -1, false);
        else
            decision_refuse(ret, why, why == SCHED_REASON_DUPLICATE ? spec->id : subject);
        req_unslot(s, ri, free_before);
        return 0;
    }
    int r = register_in_place(s, spec, user_hash, ri, err);
    if (r < 0) {
        req_unslot(s, ri, free_before);
        return r;
    }
    Req *nr = &s->reqs[ri];
    nr->expired = nr->n_fb && now >= nr->deadline;
    if (!attempt(s, ri, now, true, NIL)) {
        Req *q = &s->reqs[ri];
        /* R18: nothing waits for what no node of the fleet could ever give it. */
        feasible_prepare(s);
        SchedReason first_never;
        SchedReason never = feasible_reason(s, q, q->user, &first_never);
        if (never && !q->wait_for_nodes) {
            if (!spec->class_name && never == SCHED_REASON_NO_NODE)
                decision_refuse_memory(ret, never, s, spec->memory_gb, -1, true);
            else
                decision_refuse_never(ret, never, spec->class_name ? spec->class_name : "memory", s,
                                      q);
            req_drop(s, ri);
            check_now(s);
            return 0;
        }
        /* R13 with R18: a first choice no node could ever run still has its wait (the user
         * chose it; an alternative can run), told the first choice's true reason. */
        q->reason = decision_waiting_reason(s, q, never, first_never);
        queue_insert(s, ri);
        maybe_reserve(s, ri);
    }
    if (ret)
        decision_of(s, ri, true, false, ret);
    check_now(s);
    return 0;
}

int sched_restore_placed(Sched *s, const RequestSpec *spec, const Placement *p, Error *err) {
    Req built;
    const char *subject;
    uint32_t user_hash;
    SchedReason why = req_build(s, spec, &built, &subject, &user_hash);
    if (why)
        return error_set(err, -EINVAL, "request '%s' cannot be restored: %s",
                         strempty(spec ? spec->id : NULL), reason_text(why).s);
    if (!p || !p->node || !p->class_name)
        return error_set(err, -EINVAL, "request '%s': the placement names no node or class",
                         spec->id);
    uint32_t ni;
    int r = node_lookup(s, p->node, &ni, err);
    if (r < 0)
        return r;
    int c;
    if (resolve_class(s, p->class_name, &c) != SCHED_REASON_NONE)
        return error_set(err, -EINVAL, "request '%s': unknown class '%s'", spec->id, p->class_name);
    if (p->n_devices > SCHED_NODE_MAX_DEVICES || p->mig_start >= MIG_SLOTS ||
        p->mig_slots > MIG_SLOTS || (int)p->method < 0 || p->method >= _METHOD_MAX ||
        (int)p->container_runtime < 0 || p->container_runtime >= _CONTAINER_RUNTIME_MAX ||
        (int)p->endpoint_runtime < 0 || p->endpoint_runtime >= _ENDPOINT_RUNTIME_MAX ||
        p->fallback_index >= (int)spec->n_fallback || p->fallback_index < -1)
        return error_set(err, -EINVAL, "request '%s': the placement is malformed", spec->id);
    if ((c == CHOICE_CPU) != (p->method == METHOD_CPU))
        return error_set(err, -EINVAL, "request '%s': only cpu is placed by method cpu", spec->id);
    built.node = ni;
    built.pcls = c == CHOICE_CPU ? s->cpu_class : c;
    built.method = p->method;
    built.crt = p->container_runtime;
    built.ert = p->endpoint_runtime;
    built.n_dev = (uint8_t)p->n_devices;
    for (unsigned i = 0; i < p->n_devices; i++)
        built.devs[i] = (uint8_t)MIN(p->devices[i], 255u);
    built.mig_start = (uint8_t)p->mig_start;
    built.mig_slots = (uint8_t)p->mig_slots;
    built.cores = p->method == METHOD_CPU ? p->cpu_cores : 0;
    built.mem = p->method == METHOD_APPLE_WHOLE ? p->memory_gb : 0;
    built.fb_index = p->fallback_index;
    /* The user may not be interned yet; the relation needs the id. */
    uint32_t user;
    if (sched_user_intern_hashed(s, spec->user, user_hash, &user) < 0)
        return error_set(err, -ENOMEM, "out of memory");
    built.user = user;
    int want = p->fallback_index >= 0 ? built.fb[p->fallback_index] : built.choice;
    if (want != c && !(built.choice == CHOICE_MEMORY && p->fallback_index < 0))
        return error_set(err, -EINVAL,
                         "request '%s': placed class '%s' is not the one it asked for", spec->id,
                         p->class_name);
    /* The rules that depend on who the user is to the node (trust, ownership: runc or Kata,
     * internal-only and owner-only classes) are judged as of the placement: a trust withdrawn
     * since counts from the next placement on (R9), and the placement was checked when made.
     * Everything else, sharing above all (R15), is checked against the state as it is. */
    r = policy_check_placement(s, &built, false, err);
    if (r < 0)
        return r;
    r = place_check_conflicts(s, &built, err);
    if (r < 0)
        return r;
    uint32_t ri;
    r = register_req(s, spec, user_hash, &built, &ri, err);
    if (r < 0)
        return r;
    if (p->fallback_index >= 0)
        s->reqs[ri].expired = true;
    if (place_apply(s, ri) < 0) {
        req_drop(s, ri);
        return error_set(err, -ENOMEM, "out of memory");
    }
    check_now(s);
    return 0;
}

int sched_release(Sched *s, const char *id, uint64_t now, Error *err) {
    uint32_t ri;
    if (!req_lookup(s, id, &ri))
        return error_set(err, -ENOENT, "no request '%s'", strempty(id));
    bool placed = s->reqs[ri].placed;
    uint32_t freed = NIL;
    if (placed) {
        freed = s->reqs[ri].node;
        /* The walk after the undo reads the node's device classes, on a line the undo does
         * not touch, and the undo's refresh its pools: fetched now, their misses overlap the
         * undo's own (the devices' lines, place_prefetch()). */
        __builtin_prefetch(&s->nodes[freed].n_dev_classes);
        __builtin_prefetch(&s->nodes[freed].pools[0]);
        place_undo(s, ri);
    } else
        freed = queue_remove(s, ri); /* a cancelled gang frees the node it held */
    req_drop(s, ri);
    if (freed != NIL)
        queue_walk_node(s, now, freed);
    check_now(s);
    return 0;
}

int sched_tick(Sched *s, uint64_t now) {
    if (now < s->min_deadline || !s->n_waiting)
        return 0;
    /* Open the fallbacks of every request whose wait ran out (R13), oldest first. */
    uint64_t next = UINT64_MAX;
    for (uint32_t ri = s->dq_head, nx; ri != NIL; ri = nx) {
        Req *r = &s->reqs[ri];
        nx = r->dq.next;
        if (now < r->deadline) {
            next = MIN(next, r->deadline);
            continue;
        }
        fifo_remove(s, dq_of, &s->dq_head, &s->dq_tail, ri);
        r->in_dq = false;
        r->expired = true; /* a walk no longer passes it over for its count */
        s->walk_memo[r->qkey].room = 0;
        r->in_xq = true;
        fifo_insert(s, xq_of, &s->xq_head, &s->xq_tail, ri);
    }
    s->min_deadline = next;
    /* Every request with open fallbacks gets a full search (not only the newly due: one that
     * missed before may fit now that others moved). */
    size_t before = s->n_waiting;
    for (uint32_t ri = s->xq_head, nx; ri != NIL; ri = nx) {
        nx = s->reqs[ri].xq.next;
        if (attempt(s, ri, now, true, NIL))
            placed_from_queue(s, ri);
    }
    walk_unheld(s, now);
    check_now(s);
    return (int)(before - s->n_waiting);
}
