/* events.c: the in-memory change feed with a commit watermark and long-poll reads. */
#include "events.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/macro.h"
#include "wire/event.h"

int events_init(EventLog *l) {
    *l = (EventLog){0};
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->cond, &a);
    pthread_condattr_destroy(&a);
    return 0;
}

/* The four names share one allocation, which actor points to (event_names()). */
static void event_done(Event *e) {
    free(e->actor);
    free(e->data);
}

/* Copy an event's names into one block: every placement records two events, and four
 * allocations each for its short names were a fifth of what recording one cost. */
static bool event_names(Event *e, const char *actor, const char *type, const char *object,
                        const char *user) {
    size_t la = strlen(actor) + 1, lt = strlen(type) + 1, lo = strlen(object) + 1,
           lu = user ? strlen(user) + 1 : 0;
    char *block = malloc(la + lt + lo + lu);
    if (!block)
        return false;
    e->actor = memcpy(block, actor, la);
    e->type = memcpy(block + la, type, lt);
    e->object = memcpy(block + la + lt, object, lo);
    e->user = user ? memcpy(block + la + lt + lo, user, lu) : NULL;
    return true;
}

void events_done(EventLog *l) {
    for (size_t i = 0; i < l->n; i++)
        event_done(&l->ev[i]);
    free(l->ev);
    for (size_t i = 0; i < l->by_user.cap; i++)
        if (l->by_user.keys[i] && l->by_user.keys[i] != PTRMAP_TOMB) {
            SeqVec *v = l->by_user.values[i];
            free(v->v);
            free(v);
        }
    ptrmap_done(&l->by_user);
    pthread_mutex_destroy(&l->lock);
    pthread_cond_destroy(&l->cond);
}

/* Index seq under user; false when out of memory. */
static bool index_user(EventLog *l, const char *user, uint64_t seq) {
    SeqVec *v = ptrmap_get(&l->by_user, user);
    if (!v) {
        if (!(v = calloc(1, sizeof(*v))) || ptrmap_put(&l->by_user, user, v) < 0) {
            free(v);
            return false;
        }
    }
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 16;
        uint64_t *x = realloc(v->v, cap * sizeof(uint64_t));
        if (!x)
            return false;
        v->v = x;
        v->cap = cap;
    }
    v->v[v->n++] = seq;
    return true;
}

uint64_t events_append(EventLog *l, int64_t time_ms, const char *actor, const char *type,
                       const char *object, const char *user, char *data) {
    pthread_mutex_lock(&l->lock);
    uint64_t seq = 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 1024;
        Event *ev = realloc(l->ev, cap * sizeof(Event));
        if (!ev)
            goto out;
        l->ev = ev;
        l->cap = cap;
    }
    Event *e = &l->ev[l->n];
    *e = (Event){
            .seq = l->base + l->n + 1,
            .time_ms = time_ms,
            .data = data ? data : strdup("{}"),
    };
    data = NULL;
    bool named = event_names(e, actor, type, object, user);
    /* Indexed under its user last: nothing can fail after that. */
    if (!named || !e->data || (user && !index_user(l, user, e->seq))) {
        event_done(e);
        goto out;
    }
    l->n++;
    seq = e->seq;
out:
    pthread_mutex_unlock(&l->lock);
    free(data);
    return seq;
}

void events_rollback(EventLog *l) {
    pthread_mutex_lock(&l->lock);
    while (l->base + l->n > l->published) {
        Event *e = &l->ev[--l->n];
        SeqVec *v = e->user ? ptrmap_get(&l->by_user, e->user) : NULL;
        if (v && v->n && v->v[v->n - 1] == e->seq)
            v->n--;
        event_done(e);
    }
    pthread_mutex_unlock(&l->lock);
}

void events_publish(EventLog *l) {
    pthread_mutex_lock(&l->lock);
    if (l->published != l->base + l->n) {
        if (l->on_publish)
            for (size_t i = (size_t)(l->published - l->base); i < l->n; i++)
                l->on_publish(l->on_publish_userdata, l->ev[i].user);
        l->published = l->base + l->n;
        pthread_cond_broadcast(&l->cond);
    }
    pthread_mutex_unlock(&l->lock);
}

void events_close(EventLog *l) {
    pthread_mutex_lock(&l->lock);
    l->closing = true;
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->lock);
}

uint64_t events_last(EventLog *l) {
    pthread_mutex_lock(&l->lock);
    uint64_t p = l->published;
    pthread_mutex_unlock(&l->lock);
    return p;
}

static WireEvent event_wire(const Event *e) {
    return (WireEvent){.seq = e->seq,
                       .time_ms = e->time_ms,
                       .actor = e->actor,
                       .type = e->type,
                       .object = e->object,
                       .user = e->user,
                       .data_text = e->data};
}

static bool visible(const Event *e, const char *user) {
    return !user || (e->user && STREQ(e->user, user));
}

/* An event kept in the feed, as the next item of a read's list. One whose texts JSON cannot
 * carry (not UTF-8: only a store edited by hand has such) is left out, not the whole read. */
static void event_item(JsonText *list, const Event *e, size_t *n) {
    WireEvent we = event_wire(e);
    JsonText w = {0};
    wire_event_write(&we, &w);
    char *text = json_text_take(&w);
    if (!text)
        return;
    json_text_raw(list, text);
    free(text);
    (*n)++;
}

char *events_read(EventLog *l, uint64_t after, size_t limit, int wait_ms, const char *user,
                  size_t *ret_n) {
    struct timespec deadline = timespec_after_ms(CLOCK_MONOTONIC, (uint64_t)MAX(wait_ms, 0));

    /* The text is written under the lock, a copy of each event's kept text: no tree. */
    JsonText w = {0};
    size_t n = 0;
    json_text_open(&w, '{');
    json_text_key(&w, "events");
    json_text_open(&w, '[');
    uint64_t cursor = after;
    pthread_mutex_lock(&l->lock);
    for (;;) {
        const SeqVec *v = user ? ptrmap_get(&l->by_user, user) : NULL;
        if (user) {
            /* Only the user's own events, found by binary search: never the whole feed. */
            size_t lo = 0, hi = v ? v->n : 0;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (v->v[mid] <= cursor)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            for (; v && lo < v->n && v->v[lo] <= l->published && n < limit; lo++) {
                event_item(&w, &l->ev[v->v[lo] - 1 - l->base], &n);
                cursor = v->v[lo];
            }
            if (n < limit && cursor < l->published)
                cursor = l->published; /* nothing more of the user's up to here */
        }
        /* Events before the retained window are gone: resume from the oldest kept. */
        if (cursor < l->base)
            cursor = l->base;
        for (; !user && cursor < l->published && n < limit; cursor++) {
            const Event *e = &l->ev[cursor - l->base];
            if (visible(e, user))
                event_item(&w, e, &n);
        }
        if (n > 0 || wait_ms <= 0 || l->closing)
            break;
        if (pthread_cond_timedwait(&l->cond, &l->lock, &deadline) == ETIMEDOUT) {
            /* one last look: events may have come with the timeout */
            wait_ms = 0;
        }
    }
    /* A cursor beyond what exists (e.g. from before a reset) simply waits for new events. */
    if (cursor < after)
        cursor = after;
    pthread_mutex_unlock(&l->lock);
    json_text_close(&w, ']');
    json_text_member_int(&w, "next", (int64_t)cursor);
    json_text_close(&w, '}');
    *ret_n = n;
    return json_text_take_line(&w);
}

int64_t events_oldest_ms(EventLog *l) {
    pthread_mutex_lock(&l->lock);
    /* The newest is always kept: only more than one event can be pruned. */
    int64_t t = l->n > 1 && l->base + 1 <= l->published ? l->ev[0].time_ms : INT64_MAX;
    pthread_mutex_unlock(&l->lock);
    return t;
}

uint64_t events_base(EventLog *l) {
    pthread_mutex_lock(&l->lock);
    uint64_t b = l->base;
    pthread_mutex_unlock(&l->lock);
    return b;
}

void events_set_base(EventLog *l, uint64_t base) {
    pthread_mutex_lock(&l->lock);
    if (l->n == 0) {
        l->base = base;
        l->published = base;
    }
    pthread_mutex_unlock(&l->lock);
}

size_t events_prune(EventLog *l, int64_t before_ms) {
    pthread_mutex_lock(&l->lock);
    size_t k = 0;
    /* Published events only, from the oldest; the newest is kept so the feed's next seq and a
     * follower's cursor stay meaningful. */
    while (k + 1 < l->n && l->base + k + 1 <= l->published && l->ev[k].time_ms < before_ms)
        event_done(&l->ev[k++]);
    if (k) {
        memmove(l->ev, l->ev + k, (l->n - k) * sizeof(Event));
        l->n -= k;
        l->base += k;
        for (size_t i = 0; i < l->by_user.cap; i++) {
            if (!l->by_user.keys[i] || l->by_user.keys[i] == PTRMAP_TOMB)
                continue;
            SeqVec *v = l->by_user.values[i];
            size_t drop = 0;
            while (drop < v->n && v->v[drop] <= l->base)
                drop++;
            if (drop == v->n) {
                free(v->v);
                free(v);
                ptrmap_remove(&l->by_user, l->by_user.keys[i]); /* a tombstone: the scan goes on */
                continue;
            }
            memmove(v->v, v->v + drop, (v->n - drop) * sizeof(uint64_t));
            v->n -= drop;
        }
    }
    pthread_mutex_unlock(&l->lock);
    return k;
}
