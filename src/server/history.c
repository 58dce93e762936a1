/* history.c: the live-request and per-user indexes (see history.h). */
#include "history.h"

#include <errno.h>
#include <stdlib.h>

#include "server-internal.h"

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
    if (history_req_is_live(r) && vec_push(&s->live, r) < 0) {
        u->n--;
        return -ENOMEM;
    }
    return 0;
}

ReqVec *history_live(Server *s) {
    /* A stable filter keeps id order; amortised, each request leaves the index once. */
    size_t w = 0;
    for (size_t i = 0; i < s->live.n; i++)
        if (history_req_is_live(s->live.v[i]))
            s->live.v[w++] = s->live.v[i];
    s->live.n = w;
    return &s->live;
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
}
