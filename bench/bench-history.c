/* bench-history.c: does the server's cost follow the live state or the whole history?
 * Drives the real server in process (handlers, writer, group commit, SQLite on
 * tmpfs; no HTTP) through many submit + release cycles, and reports, each against the same
 * figure measured earlier in the same run (the baseline):
 *
 *   - RSS after warm-up and at the end (flat when memory follows the live state);
 *   - submit p99 over the first and the last window of cycles;
 *   - heartbeat p99 with --nodes registered nodes, before and after the history;
 *   - restart time (close, reopen, rebuild from the store) after warm-up and at the end.
 *
 *   bench-history [--cycles N] [--nodes N] [--warmup N] [--window N] [--retention-ms MS]
 *                 [--store-retention-ms MS]
 *
 * Retention (memory 0.2 s, store 0.4 s by default here, so that a short run reaches a steady
 * state; the server's defaults are a day and thirty days) is what keeps the figures flat.
 * The issue asks for 1,000,000 cycles and 10,000 nodes (the defaults); a smaller --cycles
 * gives the same figures sooner. */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench-inproc.h"

static const char admin_token[] = "ens_bench-history-admin";
static char state_dir[64], state_path[128];
static Server *srv;
static int64_t retention_ms = 200, store_retention_ms = 400;

/* Heap bytes in use (not RSS: freed memory glibc keeps counts in RSS, not here). */
static long heap_kib(void) {
    struct mallinfo2 mi = mallinfo2();
    return (long)(mi.uordblks / 1024);
}

static long rss_kib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* One call on the in-process server; returns the status, *ret the answer (may be NULL). */
static int call(const char *method, const char *path, const char *body, json_t **ret) {
    return bench_call(srv, "Bearer ens_bench-history-admin", method, path, body, ret);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double p99(double *v, size_t n) {
    if (!n)
        return 0;
    qsort(v, n, sizeof(double), cmp_double);
    return v[(size_t)((double)(n - 1) * 0.99)];
}

static void open_server(void) {
    ServerConfig cfg = {.state_path = state_path,
                        .retention_ms = retention_ms,
                        .store_retention_ms = store_retention_ms};
    Error err = {0};
    if (server_open(&cfg, &srv, &err) < 0) {
        fprintf(stderr, "bench-history: %s\n", error_message(&err));
        exit(1);
    }
}

static double restart_s(void) {
    server_close(srv);
    double t0 = bench_seconds();
    open_server();
    return bench_seconds() - t0;
}

static double heartbeat_p99_us(unsigned nodes, unsigned n) {
    double *lat = calloc(n, sizeof(double));
    unsigned seed = 7;
    for (unsigned i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/v1/nodes/n%u/heartbeat", rand_r(&seed) % nodes);
        double t0 = bench_seconds();
        int st = call("POST", path, "{\"interval_s\":3600,\"running\":[]}", NULL);
        lat[i] = (bench_seconds() - t0) * 1e6;
        if (st != 200) {
            fprintf(stderr, "bench-history: heartbeat answered %d\n", st);
            exit(1);
        }
    }
    double r = p99(lat, n);
    free(lat);
    return r;
}

/* How the submits were answered: a history of refusals would measure nothing. */
static unsigned long n_placed, n_pending, n_refused;

/* One submit + end cycle; returns the submit's latency in microseconds. */
static double cycle(void) {
    json_t *q = NULL;
    double t0 = bench_seconds();
    int st = call("POST", "/v1/requests", "{\"kind\":\"container\",\"class\":\"cpu\"}", &q);
    double us = (bench_seconds() - t0) * 1e6;
    if (st != 201) {
        fprintf(stderr, "bench-history: submit answered %d\n", st);
        exit(1);
    }
    const char *state = json_string_value(json_object_get(q, "state"));
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%lld/%s",
             (long long)json_integer_value(json_object_get(q, "id")),
             state && strcmp(state, "pending") == 0 ? "cancel" : "release");
    bool ends = state && strcmp(state, "refused") != 0; /* read before q (and state) goes */
    n_refused += !ends;
    n_pending += ends && strcmp(state, "pending") == 0;
    n_placed += ends && strcmp(state, "pending") != 0;
    json_decref(q);
    if (ends && call("POST", path, NULL, NULL) != 200) {
        fprintf(stderr, "bench-history: %s failed\n", path);
        exit(1);
    }
    return us;
}

int main(int argc, char **argv) {
    unsigned long cycles = 1000000, warmup = 20000, window = 20000;
    unsigned nodes = 10000;
    static const struct option opts[] = {{"cycles", required_argument, NULL, 'c'},
                                         {"nodes", required_argument, NULL, 'n'},
                                         {"warmup", required_argument, NULL, 'w'},
                                         {"window", required_argument, NULL, 'W'},
                                         {"retention-ms", required_argument, NULL, 'r'},
                                         {"store-retention-ms", required_argument, NULL, 'R'},
                                         {}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) >= 0) {
        if (o == 'c')
            cycles = strtoul(optarg, NULL, 10);
        else if (o == 'n')
            nodes = (unsigned)strtoul(optarg, NULL, 10);
        else if (o == 'w')
            warmup = strtoul(optarg, NULL, 10);
        else if (o == 'W')
            window = strtoul(optarg, NULL, 10);
        else if (o == 'r')
            retention_ms = strtoll(optarg, NULL, 10);
        else if (o == 'R')
            store_retention_ms = strtoll(optarg, NULL, 10);
        else
            return 2;
    }
    if (warmup + 2 * window > cycles)
        window = (cycles - (warmup < cycles ? warmup : cycles)) / 2;
    if (!nodes || !window) {
        fprintf(stderr, "bench-history: --cycles too small for --warmup and two windows\n");
        return 2;
    }
    bench_store_with_admin(admin_token, state_dir, state_path);
    open_server();

    for (unsigned i = 0; i < nodes; i++) {
        char name[32];
        snprintf(name, sizeof(name), "n%u", i);
        bench_add_cpu_node(srv, "Bearer ens_bench-history-admin", name, "ops", 64);
    }
    /* The submitter is a trusted tenant of the datacenter: its containers run under runc on
     * these nodes, which declare no Kata (a stranger's would be refused, R2b). */
    if (call("PUT", "/v1/tenants/root/trust", NULL, NULL) != 200)
        return fprintf(stderr, "bench-history: trusting the tenant failed\n"), 1;
    double hb_start = heartbeat_p99_us(nodes, 2000);

    double *lat = calloc(window, sizeof(double));
    double submit_start = 0, submit_end = 0, restart_start = 0;
    long rss_start = 0, heap_start = 0;
    double t_run = bench_seconds();
    for (unsigned long i = 0; i < cycles; i++) {
        if (i == warmup) {
            rss_start = rss_kib();
            heap_start = heap_kib();
            restart_start = restart_s();
        }
        double us = cycle();
        if (i >= warmup && i < warmup + window)
            lat[i - warmup] = us;
        if (i + 1 == warmup + window)
            submit_start = p99(lat, window);
        if (i >= cycles - window)
            lat[i - (cycles - window)] = us;
    }
    submit_end = p99(lat, window);
    double run_s = bench_seconds() - t_run;
    long rss_end = rss_kib(), heap_end = heap_kib();
    size_t held = 0;
    pthread_rwlock_rdlock(&srv->lock);
    for (size_t i = 0; i < srv->n_reqs; i++)
        held += srv->reqs[i] != NULL;
    size_t slots = srv->n_reqs, live = srv->live.n, queued = srv->ended.n - srv->ended_head;
    pthread_rwlock_unlock(&srv->lock);
    pthread_mutex_lock(&srv->events.lock);
    size_t events = srv->events.n;
    pthread_mutex_unlock(&srv->events.lock);
    double hb_end = heartbeat_p99_us(nodes, 2000);
    double restart_end = restart_s();

    printf("bench-history: %lu submit+release cycles (warm-up %lu, windows of %lu), %u nodes, "
           "retention %lld ms (store %lld ms), %.1f s\n",
           cycles, warmup, window, nodes, (long long)retention_ms, (long long)store_retention_ms,
           run_s);
    printf("  submits answered: %lu placed, %lu pending, %lu refused\n", n_placed, n_pending,
           n_refused);
    printf("  in memory at the end: %zu request records of %zu ids (%zu live, %zu ended waiting "
           "for "
           "retention), %zu events\n",
           held, slots, live, queued, events);
    printf("  RSS             after warm-up %8ld KiB   end %8ld KiB   ratio %.2f\n", rss_start,
           rss_end, (double)rss_end / (double)(rss_start ? rss_start : 1));
    printf("  heap in use     after warm-up %8ld KiB   end %8ld KiB   ratio %.2f\n", heap_start,
           heap_end, (double)heap_end / (double)(heap_start ? heap_start : 1));
    printf("  submit p99      first window %8.0f us     last window %8.0f us   ratio %.2f\n",
           submit_start, submit_end, submit_end / (submit_start > 0 ? submit_start : 1));
    printf("  heartbeat p99   before history %6.0f us     after %8.0f us   ratio %.2f\n", hb_start,
           hb_end, hb_end / (hb_start > 0 ? hb_start : 1));
    printf("  restart         after warm-up %7.3f s      end %8.3f s    ratio %.2f\n",
           restart_start, restart_end, restart_end / (restart_start > 0 ? restart_start : 1));
    free(lat);
    server_close(srv);
    return bench_store_remove(state_dir) == 0 ? 0 : 1;
}
