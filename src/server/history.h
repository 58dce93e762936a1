/* history.h: a small ring of allocated/free units per class over the last hours, for the
 * dashboard's capacity chart.
 *
 * Fixed size and zero-initialised (it lives inside Server, which is calloc'ed; an all-zero
 * glibc mutex is an unlocked default mutex), so it needs neither setup nor teardown. */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#define HISTORY_SAMPLES 720        /* 4 hours at one sample every 20 s */
#define HISTORY_INTERVAL_MS 20000
#define HISTORY_CLASSES 48         /* classes past this many are not charted */

typedef struct CapHistory {
    pthread_mutex_t lock;
    char classes[HISTORY_CLASSES][64]; /* in order of first appearance */
    size_t n_classes;
    int64_t time_ms[HISTORY_SAMPLES];
    uint32_t allocated[HISTORY_SAMPLES][HISTORY_CLASSES], free[HISTORY_SAMPLES][HISTORY_CLASSES];
    size_t next, n; /* ring: the next slot to write, samples held */
    int64_t last_ms;
} CapHistory;

typedef struct Server Server;

/* Take a sample when the last one is HISTORY_INTERVAL_MS old (or none exists). Called on
 * every API call (agents' heartbeats keep it ticking); takes the state lock for reading. */
void history_maybe_sample(Server *s, int64_t now_ms);
/* {"interval_ms", "classes": [{"class", "points": [[time_ms, allocated, free], ...]}]} */
json_t *history_to_json(CapHistory *h);
