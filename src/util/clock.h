/* clock.h: absolute deadlines for pthread_cond_timedwait(), which takes a point in time. */
#pragma once

#include <stdint.h>
#include <time.h>

/* The time ms milliseconds after now on clock (the one the condition variable waits on). */
static inline struct timespec timespec_after_ms(clockid_t clock, uint64_t ms) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L)
        ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    return ts;
}
