/* lookahead.c: ids a caller announces ahead of their operations, loaded in stages.
 *
 * A release reads three things one after the other, each mostly a miss of every cache: the id
 * index's slot, the request it names, then the node and devices of its placement. Nothing in
 * one operation can start the next read before the last arrives, but a caller that knows its
 * next operations (a stream, a batch, a replay) can name them early: each announcement starts
 * the first read for the newest id and, for ids announced earlier, the read that the previous
 * one made possible, so that the misses of several operations overlap. It is only a hint:
 * nothing a decision reads changes, and an id that is not (or no longer) there costs nothing
 * but the loads. */
#include <string.h>

#include "sched-internal.h"

/* Announcements back at which an id's request, then its placement, is loaded: the id's slot
 * has had the time of STAGE_REQ operations to arrive, the request that of the next two. The
 * distances were measured (bench-place, same-time A/B): 6 and 9 of 12 ahead did as well (1 %),
 * 12 and 18 of 24 worse (0.95: lines loaded too early to still be there), 3 and 5 of 6 a
 * little worse (0.99). */
#define STAGE_REQ 4
#define STAGE_PLACEMENT 6
_Static_assert(STAGE_PLACEMENT < SCHED_ANNOUNCE_AHEAD && SCHED_ANNOUNCE_AHEAD <= LOOKAHEAD_RING,
               "each stage runs before the announced operation does");

/* Start loading the lines a release of request ri reads first: its two. */
PREFETCHER void load_request(const Sched *s, uint32_t ri) {
    const Req *r = &s->reqs[ri];
    __builtin_prefetch(r);
    __builtin_prefetch((const char *)r + 64);
}

/* Once those are in, what the end of a placement goes on to: what place_undo() writes, and
 * the node's first line, pools and device classes, which the undo's refresh and the walk
 * after it read. A request in use and placed holds a placement that is whole (the devices
 * valid on its node), so its indexes need no bounds of their own. (A waiting request's queue
 * record and FIFO neighbours, loaded the same way, gained nothing.) */
PREFETCHER void load_placement(const Sched *s, uint32_t ri) {
    const Req *r = &s->reqs[ri];
    if (!r->used || !r->placed)
        return;
    const Node *n = &s->nodes[r->node];
    place_prefetch(n, r);
    __builtin_prefetch(n, 1);
    __builtin_prefetch(&n->pools[0], 1);
    __builtin_prefetch(&n->n_dev_classes);
}

void sched_announce(Sched *s, const char *id) {
    if (!id)
        return;
    Lookahead *la = &s->ahead;
    uint32_t now = la->n++;
    uint32_t k = now % LOOKAHEAD_RING;
    la->hash[k] = strmap_hash_len(id, strnlen(id, SCHED_ID_MAX));
    la->ri[k] = NIL;
    reqmap_prefetch(&s->req_map, la->hash[k]);

    /* Unsigned arithmetic: before the ring first fills, these are entries never announced
     * (hash 0, ri NIL), which load nothing of use and read nothing out of bounds. */
    k = (now - STAGE_REQ) % LOOKAHEAD_RING;
    la->ri[k] = reqmap_peek(&s->req_map, la->hash[k]); /* a live request, or NIL */
    if (la->ri[k] != NIL)
        load_request(s, la->ri[k]);

    /* Operations since the peek may have dropped the request, or shrunk the array past it. */
    k = (now - STAGE_PLACEMENT) % LOOKAHEAD_RING;
    if (la->ri[k] < s->n_reqs)
        load_placement(s, la->ri[k]);
}
