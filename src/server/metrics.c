/* metrics.c: histogram bookkeeping and its Prometheus text form. */
#include "metrics.h"

const double metrics_bounds[METRICS_BUCKETS] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                0.025,  0.05,    0.1,    0.25,  0.5,    1,     10};

void histogram_observe(Histogram *h, uint64_t us) {
    size_t i = 0;
    while (i < METRICS_BUCKETS && (double)us > metrics_bounds[i] * 1e6)
        i++;
    atomic_fetch_add_explicit(&h->bucket[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_us, us, memory_order_relaxed);
}

void histogram_write(StrBuf *b, const char *name, const char *labels, const Histogram *h) {
    uint64_t cum = 0;
    const char *sep = labels && labels[0] ? "," : "";
    labels = labels ? labels : "";
    for (size_t i = 0; i <= METRICS_BUCKETS; i++) {
        cum += atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
        if (i < METRICS_BUCKETS)
            strbuf_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep,
                          metrics_bounds[i], (unsigned long long)cum);
        else
            strbuf_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
                          (unsigned long long)cum);
    }
    const char *open = labels[0] ? "{" : "", *close = labels[0] ? "}" : "";
    strbuf_printf(b, "%s_sum%s%s%s %.6f\n", name, open, labels, close,
                  (double)atomic_load_explicit(&h->sum_us, memory_order_relaxed) / 1e6);
    strbuf_printf(b, "%s_count%s%s%s %llu\n", name, open, labels, close,
                  (unsigned long long)atomic_load_explicit(&h->count, memory_order_relaxed));
}
