/* history.c: the live-request and per-user indexes (see history.h). */
#include "history.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "node-work.h"
#include "server-internal.h"
#include "util/macro.h"
#include "util/strutil.h"

static int vec_push(ReqVec *v, Req *r) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 8;
        Req **x = realloc(v->v, cap * sizeof(Req *));
        if (!x)
            return -ENOMEM;
        v->v = x;
        v->cap = cap;
    }
    v->v[v->n++] = r;
    return 0;
}

bool history_req_is_live(const Req *r) {
    return r->state == REQ_PENDING || r->state == REQ_PLACED || r->state == REQ_ACTIVE;
}

int history_req_added(Server *s, Req *r) {
    ReqVec *u = ptrmap_get(&s->reqs_by_user, r->user);
    bool made = false;
    if (!u) {
        if (!(u = calloc(1, sizeof(*u))) || ptrmap_put(&s->reqs_by_user, r->user, u) < 0) {
            free(u);
            return -ENOMEM;
        }
        made = true;
    }
    if (vec_push(u, r) < 0) {
        if (made)
            free(ptrmap_remove(&s->reqs_by_user, r->user));
        return -ENOMEM;
    }
    if (vec_push(history_req_is_live(r) ? &s->live : &s->ended, r) < 0) {
        u->n--;
        return -ENOMEM;
    }
    return 0;
}

ReqVec *history_live(Server *s) {
    /* A stable filter keeps id order; amortised, each request leaves the index once, for the
     * queue of ended ones the retention frees. */
    size_t w = 0;
    for (size_t i = 0; i < s->live.n; i++) {
        Req *r = s->live.v[i];
        /* an ended one the queue cannot take (out of memory) stays: tried again next time */
        if (history_req_is_live(r) || vec_push(&s->ended, r) < 0)
            s->live.v[w++] = r;
    }
    s->live.n = w;
    s->live_ended = 0;
    return &s->live;
}

/* Filtering `live` costs a pass over every live request: at every batch, with tens of
 * thousands placed, that pass was most of a placement's cost. Requests that end are changed
 * in a batch, so they are among its dirty ones: counted there, the index is filtered once
 * they are a good share of it, or before the retention looks (once a second). Until then an
 * ended one may sit in `live`, which its readers check anyway (history_req_is_live). */
static void live_filter_if_worth(Server *s, bool retention_due) {
    for (size_t i = 0; i < s->n_dirty; i++)
        if (!history_req_is_live(s->dirty[i]))
            s->live_ended++;
    if (retention_due || (s->live_ended > 0 && s->live_ended * 8 >= s->live.n))
        (void)history_live(s);
}

const ReqVec *history_user(Server *s, const char *user) {
    return ptrmap_get(&s->reqs_by_user, user);
}

size_t history_first_after(const ReqVec *v, uint64_t after) {
    size_t lo = 0, hi = v ? v->n : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v->v[mid]->id <= after)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Forget r everywhere and free it: its id answers 404 from now on, its idempotency key may
 * be used again. */
static void drop(Server *s, Req *r) {
    s->reqs[r->id - 1] = NULL;
    node_work_forget(s, r);
    ReqVec *u = ptrmap_get(&s->reqs_by_user, r->user);
    if (u) {
        size_t i = history_first_after(u, r->id - 1);
        if (i < u->n && u->v[i] == r) {
            memmove(u->v + i, u->v + i + 1, (u->n - i - 1) * sizeof(Req *));
            u->n--;
        }
        if (u->n == 0) {
            free(u->v);
            free(u);
            ptrmap_remove(&s->reqs_by_user, r->user);
        }
    }
    if (r->idem_key) {
        char *k = strprintf("%s\n%s", r->user, r->idem_key);
        if (k && ptrmap_get(&s->idem, k) == r)
            ptrmap_remove(&s->idem, k);
        free(k);
        /* The store's unique (user, key) index would refuse the key's next use. */
        Error err = {0};
        (void)writer_check(s, store_request_forget_key(s->store, r->id, &err), &err,
                           "forgetting an idempotency key");
    }
    state_req_free(r);
}

static int64_t retention(int64_t set, int64_t def) {
    return set ? set : def;
}

static int64_t store_prune_every(const Server *s, int64_t keep) {
    return MIN(60 * 1000, keep / 2);
}

/* How often the retention looks: once a second, or twice per retention when shorter. */
static int64_t prune_every(const Server *s) {
    return MAX(MIN(1000, retention(s->cfg.retention_ms, SERVER_RETENTION_MS) / 2), 1);
}

bool history_prune_due(Server *s, int64_t now) {
    if (now - s->last_prune_ms < prune_every(s))
        return false;
    int64_t cutoff = now - retention(s->cfg.retention_ms, SERVER_RETENTION_MS);
    if (s->ended_head < s->ended.n && s->ended.v[s->ended_head]->updated_ms < cutoff)
        return true;
    if (s->live_ended > 0) /* ended ones not yet queued (live_filter_if_worth) */
        return true;
    if (events_oldest_ms(&s->events) < cutoff)
        return true;
    int64_t keep = retention(s->cfg.store_retention_ms, SERVER_STORE_RETENTION_MS);
    return keep > 0 && now - s->last_store_prune_ms >= store_prune_every(s, keep);
}

void history_prune(Server *s) {
    bool due = s->now_ms - s->last_prune_ms >= prune_every(s);
    live_filter_if_worth(s, due); /* moves the requests that ended to the queue */
    if (!due)
        return; /* once a second is plenty */
    s->last_prune_ms = s->now_ms;
    int64_t cutoff = s->now_ms - retention(s->cfg.retention_ms, SERVER_RETENTION_MS);
    while (s->ended_head < s->ended.n) {
        Req *r = s->ended.v[s->ended_head];
        if (r->updated_ms >= cutoff || r->dirty)
            break; /* the queue is in the order requests ended */
        s->ended_head++;
        drop(s, r);
        s->dropped_since_trim++;
    }
    if (s->ended_head > 1024 && s->ended_head * 2 > s->ended.n) {
        memmove(s->ended.v, s->ended.v + s->ended_head,
                (s->ended.n - s->ended_head) * sizeof(Req *));
        s->ended.n -= s->ended_head;
        s->ended_head = 0;
    }
    (void)events_prune(&s->events, cutoff);

    int64_t keep = retention(s->cfg.store_retention_ms, SERVER_STORE_RETENTION_MS);
    if (keep > 0 && s->now_ms - s->last_store_prune_ms >= store_prune_every(s, keep)) {
        s->last_store_prune_ms = s->now_ms;
        Error err = {0};
        (void)writer_check(s, store_prune(s->store, s->now_ms - keep, &err), &err,
                           "dropping old history");
    }
}

void history_free(Server *s) {
    for (size_t i = 0; i < s->reqs_by_user.cap; i++)
        if (s->reqs_by_user.keys[i] && s->reqs_by_user.keys[i] != PTRMAP_TOMB) {
            ReqVec *u = s->reqs_by_user.values[i];
            free(u->v);
            free(u);
        }
    ptrmap_done(&s->reqs_by_user);
    free(s->live.v);
    s->live = (ReqVec){0};
    free(s->ended.v);
    s->ended = (ReqVec){0};
}

/* Freed memory stays with the process: glibc keeps what a thread's arena freed for that arena,
 * and gives back only the top of each heap. After a day's worth of requests left the history,
 * the control plane's RSS would keep the peak of the day, not follow its live state
 * (bench-history: heap in use 1.14x, RSS 1.95x over a million requests). So once enough
 * requests were dropped, and at most every HISTORY_TRIM_EVERY_MS, the free pages of every arena
 * go back to the system (malloc_trim: madvise, the memory stays mapped). Called by the writer
 * outside the state lock, after it answered its batch. */
#define HISTORY_TRIM_MIN_DROPPED 4096
#define HISTORY_TRIM_EVERY_MS 10000

void history_trim(Server *s, int64_t now_ms) {
    if (s->dropped_since_trim < HISTORY_TRIM_MIN_DROPPED ||
        now_ms - s->last_trim_ms < HISTORY_TRIM_EVERY_MS)
        return;
    s->dropped_since_trim = 0;
    s->last_trim_ms = now_ms;
    malloc_trim(0);
}
