/* metrics.h: counters and histograms for /metrics (Prometheus text format). Lock-free:
 * connection threads update them with atomics. */
#pragma once

#include <stdatomic.h>
#include <stdint.h>

#include "util/strutil.h"

#define METRICS_BUCKETS 14
#define METRICS_ROUTES 32
#define METRICS_CODES 500 /* status codes 100..599 */

typedef struct Histogram {
    _Atomic uint64_t bucket[METRICS_BUCKETS + 1]; /* last: +Inf */
    _Atomic uint64_t count;
    _Atomic uint64_t sum_us;
} Histogram;

typedef struct Metrics {
    Histogram api[METRICS_ROUTES];             /* per route index */
    _Atomic uint64_t responses[METRICS_CODES]; /* by exact status code - 100 (100..599) */
    Histogram queue_wait;                      /* submit -> placed */
    Histogram commit;                          /* transaction latency */
    _Atomic uint64_t commits, committed_ops;
    _Atomic uint64_t decisions[3];      /* placed, waiting, refused: each request's first */
    _Atomic uint64_t queue_exits[3];    /* a waiting request later placed (or refused) */
    _Atomic uint64_t work_idle_wakeups; /* a parked work poll woken, its work unchanged */
} Metrics;

/* Upper bounds of the buckets, in seconds. */
extern const double metrics_bounds[METRICS_BUCKETS];

void histogram_observe(Histogram *h, uint64_t us);
void histogram_write(StrBuf *b, const char *name, const char *labels, const Histogram *h);
