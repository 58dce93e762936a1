/* cap-history.c: the capacity ring the dashboard charts (sampled from the core's capacity). */
#include "server/cap-history.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "server/server-internal.h"
#include "util/macro.h"

static size_t known_slot(const CapHistory *h, const char *name) {
    for (size_t i = 0; i < h->n_classes; i++)
        if (STREQ(h->classes[i], name))
            return i;
    return SIZE_MAX;
}

static size_t class_slot(CapHistory *h, const char *name) {
    size_t k = known_slot(h, name);
    if (k != SIZE_MAX)
        return k;
    if (h->n_classes == CAP_HISTORY_CLASSES || strlen(name) >= sizeof(h->classes[0]))
        return SIZE_MAX;
    strcpy(h->classes[h->n_classes], name);
    return h->n_classes++;
}

void cap_history_maybe_sample(Server *s, int64_t now_ms) {
    CapHistory *h = &s->cap_history;
    if (pthread_mutex_trylock(&h->lock) != 0)
        return; /* another call is sampling right now: no API call waits for the chart */
    size_t newest = (h->next + CAP_HISTORY_SAMPLES - 1) % CAP_HISTORY_SAMPLES;
    if (h->n && now_ms - h->time_ms[newest] < CAP_HISTORY_REFRESH_MS) {
        pthread_mutex_unlock(&h->lock);
        return;
    }
    bool fresh = !h->n || now_ms - h->started_ms >= CAP_HISTORY_INTERVAL_MS;
    CapacityRow *rows = NULL;
    size_t n = 0;
    pthread_rwlock_rdlock(&s->lock);
    int r = sched_capacity(s->sched, &rows, &n, NULL);
    pthread_rwlock_unlock(&s->lock);
    if (r >= 0) {
        size_t at = fresh ? h->next : newest;
        memset(h->allocated[at], 0, sizeof(h->allocated[at]));
        memset(h->free[at], 0, sizeof(h->free[at]));
        h->time_ms[at] = now_ms;
        for (size_t i = 0; i < n; i++) {
            if (rows[i].site) /* the per-class sums over sites only */
                continue;
            /* A slot goes to a class once it has units: the catalog's classes no device
             * matches must not take the slots of those the fleet has. */
            size_t k = rows[i].total || rows[i].allocated ? class_slot(h, rows[i].class_name)
                                                          : known_slot(h, rows[i].class_name);
            if (k == SIZE_MAX)
                continue;
            h->allocated[at][k] += (uint32_t)MIN(rows[i].allocated, UINT32_MAX / 8);
            h->free[at][k] += (uint32_t)MIN(rows[i].free, UINT32_MAX / 8);
        }
        if (fresh) {
            h->started_ms = now_ms;
            h->next = (at + 1) % CAP_HISTORY_SAMPLES;
            h->n = MIN(h->n + 1, (size_t)CAP_HISTORY_SAMPLES);
        }
    }
    free(rows);
    pthread_mutex_unlock(&h->lock);
}

json_t *cap_history_to_json(CapHistory *h) {
    json_t *classes = json_array();
    pthread_mutex_lock(&h->lock);
    size_t first = (h->next + CAP_HISTORY_SAMPLES - h->n) % CAP_HISTORY_SAMPLES;
    for (size_t k = 0; k < h->n_classes; k++) {
        json_t *points = json_array();
        for (size_t i = 0; i < h->n; i++) {
            size_t at = (first + i) % CAP_HISTORY_SAMPLES;
            json_array_append_new(points, json_pack("[I, I, I]", (json_int_t)h->time_ms[at],
                                                    (json_int_t)h->allocated[at][k],
                                                    (json_int_t)h->free[at][k]));
        }
        json_array_append_new(classes,
                              json_pack("{s:s, s:o}", "class", h->classes[k], "points", points));
    }
    pthread_mutex_unlock(&h->lock);
    return json_pack("{s:I, s:o}", "interval_ms", (json_int_t)CAP_HISTORY_INTERVAL_MS, "classes",
                     classes);
}
