/* reqmap.c: the request-id index, {hash, request index} slots compared against ids kept inline.
 *
 * A lookup reads one slot run and then the Req it needs anyway; a string map would chase a
 * pointer to a separately allocated key, a cache miss of its own on every release. Linear
 * probing with backward-shift deletion, as in strmap.c, so that probe runs stay short. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched-internal.h"

uint32_t reqmap_find(const ReqMap *m, const Req *reqs, const char *id, size_t len, uint32_t hash) {
    if (!m->cap)
        return NIL;
    size_t mask = m->cap - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        const ReqMapSlot *sl = &m->slots[i];
        if (sl->ri == NIL)
            return NIL;
        if (sl->hash != hash)
            continue;
        const Req *r = &reqs[sl->ri];
        /* A match is nearly always the request itself, found to be released or changed:
         * what that reads next, its placement (the Req's second line), is a miss that then
         * overlaps this one (the id's line) instead of following it. */
        __builtin_prefetch((const char *)r + 64);
        if (r->id_len == len && memcmp(req_id(r), id, len) == 0)
            return sl->ri;
    }
}

uint32_t reqmap_peek(const ReqMap *m, uint32_t hash) {
    if (!m->cap)
        return NIL;
    size_t mask = m->cap - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask)
        if (m->slots[i].ri == NIL || m->slots[i].hash == hash)
            return m->slots[i].ri;
}

/* The first empty slot of hash's probe run. */
static size_t free_slot(const ReqMapSlot *slots, size_t cap, uint32_t hash) {
    size_t mask = cap - 1, i = hash & mask;
    while (slots[i].ri != NIL)
        i = (i + 1) & mask;
    return i;
}

static int grow(ReqMap *m) {
    size_t ncap = m->cap ? m->cap * 2 : 64;
    ReqMapSlot *ns = malloc(ncap * sizeof(*ns));
    if (!ns)
        return -ENOMEM;
    memset(ns, 0xff, ncap * sizeof(*ns)); /* every ri NIL */
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].ri != NIL)
            ns[free_slot(ns, ncap, m->slots[i].hash)] = m->slots[i];
    free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return 0;
}

int reqmap_insert(ReqMap *m, uint32_t hash, uint32_t ri) {
    if ((m->n + 1) * 4 > m->cap * 3) {
        int r = grow(m);
        if (r < 0)
            return r;
    }
    m->slots[free_slot(m->slots, m->cap, hash)] = (ReqMapSlot){hash, ri};
    m->n++;
    return 0;
}

void reqmap_remove(ReqMap *m, uint32_t hash, uint32_t ri) {
    if (!m->cap)
        return;
    size_t mask = m->cap - 1, i = hash & mask;
    while (m->slots[i].ri != ri) {
        if (m->slots[i].ri == NIL)
            return; /* not in the map */
        i = (i + 1) & mask;
    }
    /* Backward shift (see probe_entry_stays()): i is the hole. */
    for (size_t j = (i + 1) & mask; m->slots[j].ri != NIL; j = (j + 1) & mask)
        if (!probe_entry_stays(i, j, m->slots[j].hash & mask)) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    m->slots[i] = (ReqMapSlot){0, NIL};
    m->n--;
}

void reqmap_done(ReqMap *m) {
    free(m->slots);
    *m = (ReqMap){0};
}
