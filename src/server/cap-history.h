/* cap-history.h: a small ring of allocated/free units per class over the last hours, for the
 * dashboard's capacity chart.
 *
 * Fixed size and zero-initialised (it lives inside Server, which is calloc'ed; an all-zero
 * glibc mutex is an unlocked default mutex), so it needs neither setup nor teardown. */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#define CAP_HISTORY_SAMPLES 720 /* 4 hours at one sample every 20 s */
#define CAP_HISTORY_INTERVAL_MS 20000
#define CAP_HISTORY_REFRESH_MS 1000 /* the newest sample follows the state this closely */
#define CAP_HISTORY_CLASSES 96      /* classes with units past this many are not charted */

typedef struct CapHistory {
    pthread_mutex_t lock;
    char classes[CAP_HISTORY_CLASSES][64]; /* in order of first appearance */
    size_t n_classes;
    int64_t time_ms[CAP_HISTORY_SAMPLES];
    uint32_t allocated[CAP_HISTORY_SAMPLES][CAP_HISTORY_CLASSES],
            free[CAP_HISTORY_SAMPLES][CAP_HISTORY_CLASSES];
    size_t next, n;     /* ring: the slot after the newest, samples held */
    int64_t started_ms; /* when the newest sample's interval began */
} CapHistory;

typedef struct Server Server;

/* Keep the ring current: a new sample once the newest one's interval (CAP_HISTORY_INTERVAL_MS) is
 * over, else the newest one is rewritten (at most every CAP_HISTORY_REFRESH_MS), so the chart's
 * last point is the present. Called on every API call (agents' heartbeats keep it ticking);
 * takes the state lock for reading. */
void cap_history_maybe_sample(Server *s, int64_t now_ms);
/* {"interval_ms", "classes": [{"class", "points": [[time_ms, allocated, free], ...]}]} */
json_t *cap_history_to_json(CapHistory *h);
