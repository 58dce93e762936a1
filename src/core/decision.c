/* decision.c: what the engine says of a request: its decision and the sentence users read,
 * its queue position, and the read-only queries by request id. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "sched-internal.h"
#include "sentence.h"
#include "util/strutil.h"

const char *decision_choice_name(const Sched *s, int c) {
    if (c == CHOICE_CPU)
        return "cpu";
    if (c == CHOICE_MEMORY)
        return "a class with enough memory";
    return s->cat->classes[c].name;
}

static bool msg_too_large(Msg *m, const Sched *s, const Req *r);

/* "refused (SUBJECT)<middle>REASON<tail>"; with s and r, a size (TOO_LARGE) is said with the
 * sizes where they are known (msg_too_large()). */
static void refusal(Decision *d, SchedReason why, const char *subject, const char *middle,
                    const char *tail, const Sched *s, const Req *r) {
    if (!d)
        return;
    *d = (Decision){.kind = DECISION_REFUSED, .reason = why};
    Msg m = msg_start(d->message, sizeof(d->message));
    msg_put(&m, "refused (");
    msg_put(&m, strempty(subject));
    msg_put(&m, middle);
    if (!(why == SCHED_REASON_TOO_LARGE && s && msg_too_large(&m, s, r)))
        msg_text(&m, reason_text(why));
    msg_put(&m, tail);
    msg_end(&m);
}

void decision_refuse(Decision *d, SchedReason why, const char *subject) {
    refusal(d, why, subject, "): ", "", NULL, NULL);
}

void decision_refuse_memory(Decision *d, SchedReason why, const Sched *s, unsigned memory_gb,
                            int choice, bool never) {
    if (!d)
        return;
    *d = (Decision){.kind = DECISION_REFUSED, .reason = why};
    Msg m = msg_start(d->message, sizeof(d->message));
    msg_put(&m, never ? "refused (memory), no node could ever run it: " : "refused (memory): ");
    if (choice >= 0) {
        const GpuClass *g = &s->cat->classes[choice];
        msg_put(&m, "one unit of ");
        msg_put(&m, g->name);
        msg_put(&m, " holds ");
        msg_uint(&m, g->memory_gb);
        msg_put(&m, " GB, less than the ");
    } else
        msg_put(&m, why == SCHED_REASON_NO_NODE ? "no node has a class that holds "
                                                : "no class of the catalog holds ");
    msg_uint(&m, memory_gb);
    msg_put(&m, choice >= 0 ? " GB asked" : " GB in one unit");
    msg_put(&m, why == SCHED_REASON_NO_NODE ? " yet" : "");
    msg_put(&m, " (a memory need is what one GPU, MIG slice or Mac's GPU must hold; ask for a "
                "larger class, or a count of GPUs)");
    msg_put(&m, never ? "; ask with wait_for_nodes to wait for nodes that may join (R18)" : "");
    msg_end(&m);
}

/* R18's size refusal with the sizes: how much was asked and how much the largest node that
 * could otherwise run it offers. False (nothing written) where that is not known. */
static bool msg_too_large(Msg *m, const Sched *s, const Req *r) {
    int c = r->choice;
    if (c != CHOICE_CPU && c < 0)
        return false;
    unsigned most = feasible_most(s, r, c);
    if (!most)
        return false;
    bool apple = c >= 0 && s->cat->classes[c].vendor == VENDOR_APPLE;
    if (apple) {
        msg_put(m, "no Mac of the class offers this user ");
        msg_uint(m, r->memory_gb);
        msg_put(m, " GB of GPU memory (the most one offers is ");
        msg_uint(m, most);
        msg_put(m, " GB: its wired-memory limit less the owner's headroom, R10)");
        return true;
    }
    msg_put(m, "no node of the fleet that could run it has ");
    msg_uint(m, r->count);
    msg_put(m, c == CHOICE_CPU ? " cores" : " GPUs of the class");
    msg_put(m, " (the most one node has is ");
    msg_uint(m, most);
    msg_put(m, "; a request runs on one node)");
    return true;
}

/* R18: refused because no node of the fleet could ever run it; says how to wait anyway. */
void decision_refuse_never(Decision *d, SchedReason why, const char *subject, const Sched *s,
                           const Req *r) {
    refusal(d, why, subject, "), no node could ever run it: ",
            "; ask with wait_for_nodes to wait for nodes that may join (R18)", s, r);
}

/* What a request that waits for capacity is told (R18): what frees to let it run. A gang or a
 * number of cores needs them on one node, which "every unit is taken" would misstate while
 * fewer are free there. */
static void msg_no_capacity(Msg *m, const Sched *s, const Req *r) {
    bool apple = r->choice >= 0 && s->cat->classes[r->choice].vendor == VENDOR_APPLE;
    if (apple && r->memory_gb) {
        /* A Mac's one GPU is shared by its owner's workloads by memory (R10): what frees
         * it is memory, not a unit. */
        msg_put(m, "no Mac of the class has ");
        msg_uint(m, r->memory_gb);
        msg_put(m, " GB of GPU memory free (the owner's other workloads use it); it waits for "
                   "them to free memory (R10)");
    } else if (r->count > 1 &&
               (r->choice == CHOICE_CPU ||
                (r->choice >= 0 && !apple && s->cat->classes[r->choice].mig_parent_index < 0))) {
        msg_put(m, "no node that this user may use has ");
        msg_uint(m, r->count);
        msg_put(m, r->choice == CHOICE_CPU ? " cores" : " GPUs of the class");
        msg_put(m, " free at once; it waits for enough of them to free on one node");
    } else if (r->choice == CHOICE_CPU)
        msg_put(m, "every core that this user may use is taken; it waits for one to free");
    else
        msg_text(m, reason_text(SCHED_REASON_NO_CAPACITY));
}

static void fill_placement(const Sched *s, const Req *r, Placement *p) {
    *p = (Placement){
            .node = node_name(&s->nodes[r->node]),
            .class_name = r->pcls >= 0 ? s->cat->classes[r->pcls].name : "cpu",
            .class_index = r->pcls,
            .method = r->method,
            .container_runtime = r->crt,
            .endpoint_runtime = r->ert,
            .n_devices = r->n_dev,
            .mig_start = r->mig_start,
            .mig_slots = r->mig_slots,
            .cpu_cores = r->cores,
            .memory_gb = r->mem,
            .fallback_index = r->fb_index,
    };
    for (unsigned i = 0; i < r->n_dev; i++)
        p->devices[i] = r->devs[i];
}

/* Queue positions in O(log n): a Fenwick tree counts the waiting requests by arrival seq.
 * The position is exact while the FIFO follows arrival order, which it does except for
 * requests restored with older submission times (then it is the arrival rank). */
static void fen_add_raw(Sched *s, size_t i, int32_t delta) {
    for (i++; i <= s->fen_size; i += i & (~i + 1))
        s->fen[i - 1] += (uint32_t)delta;
}

static int fen_rebuild(Sched *s) {
    uint64_t base = s->next_seq, top = s->next_seq;
    for (uint32_t ri = s->q_head; ri != NIL; ri = s->reqs[ri].q.next)
        base = MIN(base, s->reqs[ri].seq);
    size_t size = 64;
    while (size < 2 * (top - base + 1))
        size *= 2;
    uint32_t *nf = calloc(size, sizeof(uint32_t));
    if (!nf)
        return -ENOMEM;
    free(s->fen);
    s->fen = nf;
    s->fen_size = size;
    s->seq_base = base;
    for (uint32_t ri = s->q_head; ri != NIL; ri = s->reqs[ri].q.next)
        fen_add_raw(s, s->reqs[ri].seq - base, 1);
    return 0;
}

/* Called after the FIFO changed: a rebuild already counts the change. */
void queue_positions_add(Sched *s, uint64_t seq, int32_t delta) {
    if (!s->fen || seq < s->seq_base || seq - s->seq_base >= s->fen_size) {
        (void)fen_rebuild(
                s); /* on failure positions degrade to estimates; placement is unaffected */
        return;
    }
    fen_add_raw(s, seq - s->seq_base, delta);
}

static size_t queue_position(const Sched *s, uint32_t ri) {
    uint64_t seq = s->reqs[ri].seq;
    if (!s->fen || seq < s->seq_base || seq - s->seq_base >= s->fen_size)
        return s->n_waiting;
    size_t k = 0;
    for (size_t i = seq - s->seq_base + 1; i > 0; i -= i & (~i + 1))
        k += s->fen[i - 1];
    return k;
}

/* Why a waiting request waits now (R18: what, removed, would let it run), given what
 * feasible_reason() says of it. */
SchedReason decision_waiting_reason(const Sched *s, const Req *r, SchedReason never,
                                    SchedReason first_never) {
    if (never)
        return never; /* only a request that asked to wait for nodes gets here */
    /* A first choice no node could ever run waits on its alternatives only (its fallback is
     * open, sched_submit()): that is what, removed, would let it run as asked. */
    if (first_never)
        return first_never;
    if (r->choice == CHOICE_MEMORY)
        return place_diagnose_by_memory(s, r);
    return place_diagnose(s, r, r->choice);
}

static SchedReason waiting_reason(const Sched *s, const Req *r) {
    SchedReason first;
    SchedReason never = feasible_reason(s, r, r->user, &first);
    return decision_waiting_reason(s, r, never, first);
}

/* fresh: find the waiting reason again (a later look); else the one found at submission. */
void decision_of(const Sched *s, uint32_t ri, bool with_position, bool fresh, Decision *d) {
    const Req *r = &s->reqs[ri];
    /* Field by field, not `*d = (Decision){...}`: that would also clear the message buffer,
     * which the sentence below overwrites (and terminates) anyway. */
    if (r->placed) {
        d->kind = DECISION_PLACED;
        d->reason = r->fb_index >= 0 ? SCHED_REASON_FALLBACK : SCHED_REASON_NONE;
        d->queue_position = 0;
        d->fallback_open = false;
        fill_placement(s, r, &d->placement);
        const Placement *p = &d->placement;
        /* "placed on NODE: WHERE, CLASS by METHOD[ under CRT][, endpoint runs ERT][ (fallback...)]"
         */
        Msg m = msg_start(d->message, sizeof(d->message));
        msg_put(&m, "placed on ");
        msg_putn(&m, p->node, s->nodes[r->node].name_len);
        msg_put(&m, ":");
        if (p->method == METHOD_MIG) {
            msg_put(&m, " device ");
            msg_uint(&m, p->devices[0]);
            msg_put(&m, " slots ");
            msg_uint(&m, p->mig_start);
            msg_put(&m, "-");
            msg_uint(&m, p->mig_start + p->mig_slots - 1);
        } else if (p->method == METHOD_CPU) {
            msg_put(&m, " ");
            msg_uint(&m, p->cpu_cores);
            msg_put(&m, p->cpu_cores == 1 ? " core" : " cores");
        } else if (p->n_devices) {
            msg_put(&m, " ");
            msg_uint(&m, p->n_devices);
            msg_put(&m, p->n_devices > 1 ? " GPUs" : " GPU");
        }
        msg_put(&m, ", ");
        if (r->pcls >= 0)
            msg_putn(&m, p->class_name, s->class_name_len[r->pcls]);
        else
            msg_put(&m, p->class_name);
        msg_put(&m, " by ");
        msg_method(&m, p->method);
        if (p->container_runtime) {
            msg_put(&m, " under ");
            msg_container_runtime(&m, p->container_runtime);
        }
        if (p->endpoint_runtime) {
            msg_put(&m, ", endpoint runs ");
            msg_endpoint_runtime(&m, p->endpoint_runtime);
        }
        if (r->fb_index >= 0)
            msg_put(&m, " (fallback after the wait, R13)");
        msg_end(&m);
        return;
    }
    /* The reason as of now, not as of submission: nodes, capacity and modes have moved. */
    SchedReason why = fresh ? waiting_reason(s, r) : r->reason;
    d->kind = DECISION_WAITING;
    d->reason = why;
    d->queue_position = with_position ? queue_position(s, ri) : 0;
    d->fallback_open = r->expired && r->n_fb;
    d->placement = (Placement){0};
    Msg m = msg_start(d->message, sizeof(d->message));
    msg_put(&m, "waiting for ");
    if (r->choice >= 0)
        msg_putn(&m, s->cat->classes[r->choice].name, s->class_name_len[r->choice]);
    else
        msg_put(&m, decision_choice_name(s, r->choice));
    msg_put(&m, ": ");
    if (why == SCHED_REASON_NO_CAPACITY)
        msg_no_capacity(&m, s, r);
    else if (why != SCHED_REASON_TOO_LARGE || !msg_too_large(&m, s, r))
        msg_text(&m, reason_text(why));
    if (d->fallback_open)
        msg_put(&m, "; its fallback is open: it takes the first alternative that frees (R13)");
    msg_end(&m);
}

/* The index of the live request with this id: true and *ret, or false. */
bool req_lookup(const Sched *s, const char *id, uint32_t *ret) {
    size_t len = id ? strnlen(id, SCHED_ID_MAX) : SCHED_ID_MAX;
    if (len >= SCHED_ID_MAX)
        return false; /* no request has such an id */
    uint32_t ri = reqmap_find(&s->req_map, s->reqs, id, len, strmap_hash_len(id, len));
    if (ri == NIL)
        return false;
    *ret = ri;
    return true;
}

int sched_request_decision(const Sched *s, const char *id, Decision *ret) {
    uint32_t ri;
    if (!req_lookup(s, id, &ri))
        return -ENOENT;
    decision_of(s, ri, true, true, ret);
    return 0;
}

int sched_request_placement(const Sched *s, const char *id, Placement *ret) {
    uint32_t ri;
    if (!req_lookup(s, id, &ri))
        return -ENOENT;
    if (!s->reqs[ri].placed)
        return -EAGAIN;
    fill_placement(s, &s->reqs[ri], ret);
    return 0;
}

int sched_request_spec(const Sched *s, const char *id, RequestSpec *ret) {
    uint32_t ri;
    if (!req_lookup(s, id, &ri))
        return -ENOENT;
    const Req *r = &s->reqs[ri];
    *ret = (RequestSpec){
            .id = req_id(r),
            .user = s->users[r->user].name,
            .kind = r->kind,
            .guest = r->guest,
            .class_name = r->choice == CHOICE_MEMORY ? NULL : decision_choice_name(s, r->choice),
            .memory_gb = r->memory_gb,
            .count = r->count,
            .share = r->share,
            .fallback = r->n_fb ? r->fb_names : NULL,
            .n_fallback = r->n_fb,
            .wait_s = (r->deadline - r->submitted) / s->units_per_second,
            .submitted = r->submitted,
            .runtime = r->runtime,
            .gguf = r->gguf,
            .wait_for_nodes = r->wait_for_nodes,
    };
    if (!r->n_fb)
        ret->wait_s = 0;
    return 0;
}

size_t sched_request_count(const Sched *s) {
    return s->n_live_reqs;
}

size_t sched_waiting_count(const Sched *s) {
    return s->n_waiting;
}

const char *sched_waiting_at(const Sched *s, size_t i) {
    for (uint32_t ri = s->q_head; ri != NIL; ri = s->reqs[ri].q.next)
        if (i-- == 0)
            return req_id(&s->reqs[ri]);
    return NULL;
}

uint64_t sched_next_deadline(const Sched *s) {
    /* Exact (not the cached lower bound), for callers that sleep until it. */
    uint64_t best = UINT64_MAX;
    for (uint32_t ri = s->dq_head; ri != NIL; ri = s->reqs[ri].dq.next)
        best = MIN(best, s->reqs[ri].deadline);
    return best;
}
