/* bench-failover.c: failover time of replicas on PostgreSQL: the leader SIGKILLed -> the first
 * write acknowledged by the new leader, as a client with all the replicas' URLs sees it.
 *
 *   bench-failover [--failovers N] [--lease-ms L] [--reads SECONDS]
 *
 * Three `einsora serve` replicas on a PostgreSQL 15 the benchmark starts in a temp dir (fsync
 * on). Each round kills the leader, then submits (with an idempotency key) until one is
 * acknowledged. The baseline in the same run is the same submission with no failover.
 *
 * --reads instead measures GET /v1/requests/ID per second answered by a standby from its
 * replay against the leader (the baseline), on the same state in the same run, and how long
 * the standby's replay takes to catch up after a burst of writes. */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"
#include "pg-helper.h"
#include "server/server.h"
#include "store/store.h"
#include "util/macro.h"
#include "util/sha256.h"

#define REPLICAS 3

static const char *token = "ens_bench-admin-token";
static char conninfo[256], urls[256];
static unsigned ports[REPLICAS], lease_ms = 1000;
static pid_t pids[REPLICAS];

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static unsigned free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof(sa);
    unsigned port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &n) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static void spawn(int i) {
    pid_t pid = fork();
    if (pid == 0) {
        char listen[64];
        snprintf(listen, sizeof(listen), "127.0.0.1:%u", ports[i]);
        ServerConfig cfg = {.listen = listen,
                            .state_path = conninfo,
                            .lease_ms = lease_ms,
                            .catalog_path = TEST_DATA "/catalog.yaml",
                            .batch_max = SERVER_BATCH_MAX};
        Error err = {0};
        int r = server_run(&cfg, NULL, NULL, &err);
        if (r < 0)
            fprintf(stderr, "bench-failover: replica %d: %s\n", i, err.message);
        _exit(r < 0);
    }
    pids[i] = pid;
}

/* The replica that says it leads, or -1. */
static int leader(void) {
    for (int i = 0; i < REPLICAS; i++) {
        char url[64];
        snprintf(url, sizeof(url), "http://127.0.0.1:%u", ports[i]);
        Client *c = NULL;
        long st = 0;
        bool leads = client_new(url, NULL, &c, NULL) >= 0 &&
                     client_call(c, "GET", "/readyz", NULL, NULL, &st, NULL, NULL) >= 0 &&
                     st == 200;
        client_free(c);
        if (leads)
            return i;
    }
    return -1;
}

static int wait_leader(void) {
    for (int i = 0; i < 3000; i++) {
        int l = leader();
        if (l >= 0)
            return l;
        usleep(10000);
    }
    return -1;
}

/* Submit until acknowledged (the client fails over between the replicas), then release. */
static int submit_acked(Client *c, unsigned n) {
    char key[32];
    snprintf(key, sizeof(key), "bench-%u", n);
    json_t *body = json_pack("{s:s, s:s}", "kind", "container", "class", "nvidia-h100-80gb");
    long st = 0;
    json_t *ans = NULL;
    int r = -EIO;
    for (int tries = 0; tries < 100 && r < 0; tries++) {
        if (client_call(c, "POST", "/v1/requests", body, key, &st, &ans, NULL) >= 0 &&
            (st == 201 || st == 200))
            r = 0;
        else {
            json_decref(ans);
            ans = NULL;
        }
    }
    json_decref(body);
    if (r == 0) {
        char path[64];
        snprintf(path, sizeof(path), "/v1/requests/%lld/release",
                 (long long)json_integer_value(json_object_get(ans, "id")));
        (void)client_call(c, "POST", path, NULL, NULL, &st, NULL, NULL);
    }
    json_decref(ans);
    return r;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void summary(const char *what, double *v, size_t n) {
    qsort(v, n, sizeof(double), cmp_double);
    printf("%-34s %6zu %9.1f %9.1f %9.1f %9.1f\n", what, n, v[0] * 1e3, v[n / 2] * 1e3,
           v[(size_t)((double)n * 0.99)] * 1e3, v[n - 1] * 1e3);
}

/* ---- --reads: a standby's reads against the leader's ---- */

#define READ_THREADS 4
#define READ_IDS 500

typedef struct Reader {
    char url[64];
    double until;
    unsigned seed;
    unsigned long ok, failed;
} Reader;

static void *reader_main(void *p) {
    Reader *r = p;
    Client *c = NULL;
    if (client_new(r->url, token, &c, NULL) < 0)
        return NULL;
    while (now_s() < r->until) {
        char path[64];
        snprintf(path, sizeof(path), "/v1/requests/%u", 1 + rand_r(&r->seed) % READ_IDS);
        long st = 0;
        json_t *ans = NULL;
        if (client_call(c, "GET", path, NULL, NULL, &st, &ans, NULL) >= 0 && st == 200)
            r->ok++;
        else
            r->failed++;
        json_decref(ans);
    }
    client_free(c);
    return NULL;
}

/* GETs per second from READ_THREADS clients on replica i for seconds. */
static double read_rate(int i, double seconds, unsigned long *failed) {
    Reader r[READ_THREADS];
    pthread_t t[READ_THREADS];
    double t0 = now_s();
    for (int k = 0; k < READ_THREADS; k++) {
        r[k] = (Reader){.until = t0 + seconds, .seed = (unsigned)k + 1};
        snprintf(r[k].url, sizeof(r[k].url), "http://127.0.0.1:%u", ports[i]);
        pthread_create(&t[k], NULL, reader_main, &r[k]);
    }
    unsigned long ok = 0;
    *failed = 0;
    for (int k = 0; k < READ_THREADS; k++) {
        pthread_join(t[k], NULL);
        ok += r[k].ok;
        *failed += r[k].failed;
    }
    return (double)ok / (now_s() - t0);
}

/* Replica i's /readyz member (-1 when it does not answer). */
static long long readyz_value(int i, const char *member) {
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", ports[i]);
    Client *c = NULL;
    long st = 0;
    json_t *j = NULL;
    long long v = -1;
    if (client_new(url, NULL, &c, NULL) >= 0 &&
        client_call(c, "GET", "/readyz", NULL, NULL, &st, &j, NULL) >= 0 &&
        json_is_integer(json_object_get(j, member)))
        v = json_integer_value(json_object_get(j, member));
    json_decref(j);
    client_free(c);
    return v;
}

static int bench_reads(Client *c, double seconds) {
    int l = wait_leader();
    if (l < 0)
        return fprintf(stderr, "bench-failover: no leader\n"), 1;
    int sb = (l + 1) % REPLICAS;
    /* A burst of writes (submissions, half of them waiting: the node has 16 GPUs), then the
     * time until the standby's replay holds the leader's last commit. */
    json_t *body = json_pack("{s:s, s:s}", "kind", "container", "class", "nvidia-h100-80gb");
    for (unsigned k = 0; k < READ_IDS; k++) {
        long st = 0;
        if (client_call(c, "POST", "/v1/requests", body, NULL, &st, NULL, NULL) < 0 || st != 201)
            return fprintf(stderr, "bench-failover: a submission failed (%ld)\n", st), 1;
    }
    json_decref(body);
    double t0 = now_s();
    long long last = readyz_value(l, "applied");
    while (readyz_value(sb, "applied") < last && now_s() - t0 < 60)
        usleep(1000);
    double catch_up = now_s() - t0;
    double load[3] = {0};
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3)
            load[0] = -1;
        fclose(f);
    }
    printf("bench-failover --reads: %d replicas on PostgreSQL 15 (fsync on), %u requests, %d "
           "client "
           "threads, %.1f s each; load average %.2f %.2f %.2f\n",
           REPLICAS, READ_IDS, READ_THREADS, seconds, load[0], load[1], load[2]);
    printf("standby replay caught up %.1f ms after a burst of %u submissions (seq %lld)\n",
           catch_up * 1e3, READ_IDS, last);
    unsigned long lf = 0, sf = 0;
    double lr = read_rate(l, seconds, &lf);
    double sr = read_rate(sb, seconds, &sf);
    printf("%-40s %10.0f GET/s (%lu failed)\n", "GET /v1/requests/ID on the leader", lr, lf);
    printf("%-40s %10.0f GET/s (%lu failed)\n", "GET /v1/requests/ID on a standby", sr, sf);
    printf("%-40s %9.2fx (standby / leader)\n", "ratio", lr > 0 ? sr / lr : 0);
    return 0;
}

static PgTest pg = {.durable = 1};

static void stop_all(void) {
    for (int i = 0; i < REPLICAS; i++)
        if (pids[i] > 0) {
            kill(pids[i], SIGKILL);
            waitpid(pids[i], NULL, 0);
        }
    pg_test_stop(&pg);
}

int main(int argc, char **argv) {
    unsigned failovers = 20;
    double reads = 0;
    for (int i = 1; i < argc; i++) {
        /* MAX() evaluates its arguments twice: parse first. */
        unsigned v = i + 1 < argc ? (unsigned)strtoul(argv[i + 1], NULL, 10) : 0;
        if (!strcmp(argv[i], "--failovers") && i + 1 < argc)
            failovers = MAX(1u, v), i++;
        else if (!strcmp(argv[i], "--lease-ms") && i + 1 < argc)
            lease_ms = MAX(100u, v), i++;
        else if (!strcmp(argv[i], "--reads") && i + 1 < argc &&
                 (reads = strtod(argv[i + 1], NULL)) > 0)
            i++;
        else {
            fprintf(stderr,
                    "usage: bench-failover [--failovers N] [--lease-ms L] [--reads SECONDS]\n");
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    if (pg_test_start(&pg) < 0 || pg_test_new_db(&pg, conninfo, sizeof(conninfo)) < 0)
        return 1;
    atexit(stop_all);
    Store *s = NULL;
    Error err = {0};
    char hash[65];
    sha256_hex(token, strlen(token), hash);
    if (store_open(conninfo, &s, &err) < 0 || store_begin(s, &err) < 0 ||
        store_token_add(s, hash, "bench", "admin", NULL, &err) < 0 || store_commit(s, &err) < 0) {
        fprintf(stderr, "bench-failover: %s\n", err.message);
        store_close(s);
        return 1;
    }
    store_close(s);
    size_t len = 0;
    for (int i = 0; i < REPLICAS; i++) {
        ports[i] = free_port();
        len += (size_t)snprintf(urls + len, sizeof(urls) - len, "%shttp://127.0.0.1:%u",
                                i ? "," : "", ports[i]);
        spawn(i);
    }
    Client *c = NULL;
    if (wait_leader() < 0 || client_new(urls, token, &c, &err) < 0) {
        fprintf(stderr, "bench-failover: no replica leads\n");
        return 1;
    }
    json_t *devs = json_array();
    for (int g = 0; g < 16; g++) {
        char pci[32];
        snprintf(pci, sizeof(pci), "0000:%02x:00.0", 0x10 + g);
        json_array_append_new(devs, json_pack("{s:s, s:s, s:i}", "pci", pci, "class",
                                              "nvidia-h100-80gb", "memory_gb", 80));
    }
    json_t *node = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:o}", "name", "node-0", "site",
                             "dc1", "site_kind", "datacenter", "platform", "linux", "owner",
                             "bench", "mode", "container", "cpus", 64, "devices", devs);
    long st = 0;
    int r = client_call(c, "POST", "/v1/nodes", node, NULL, &st, NULL, &err);
    json_decref(node);
    if (r < 0 || st != 201) {
        fprintf(stderr, "bench-failover: registering the node: %ld %s\n", st, err.message);
        return 1;
    }
    if (reads > 0) {
        r = bench_reads(c, reads);
        client_free(c);
        return r;
    }
    printf("bench-failover: %d replicas on PostgreSQL 15 (fsync on), lease %u ms, %u failovers\n",
           REPLICAS, lease_ms, failovers);
    double *plain = calloc(failovers, sizeof(double)), *fo = calloc(failovers, sizeof(double));
    unsigned n = 0;
    for (unsigned k = 0; k < failovers; k++) {
        /* Baseline: an acknowledged write with no failover. */
        double t0 = now_s();
        if (submit_acked(c, n++) < 0)
            return fprintf(stderr, "bench-failover: a plain submission failed\n"), 1;
        plain[k] = now_s() - t0;
        int l = wait_leader();
        if (l < 0)
            return fprintf(stderr, "bench-failover: no leader\n"), 1;
        kill(pids[l], SIGKILL);
        t0 = now_s();
        waitpid(pids[l], NULL, 0);
        if (submit_acked(c, n++) < 0)
            return fprintf(stderr, "bench-failover: no write acknowledged after the failover\n"), 1;
        fo[k] = now_s() - t0;
        spawn(l); /* back as a standby */
    }
    printf("%-34s %6s %9s %9s %9s %9s\n", "", "n", "min ms", "p50 ms", "p99 ms", "max ms");
    summary("acknowledged write, no failover", plain, failovers);
    summary("leader SIGKILLed -> first ack", fo, failovers);
    printf("%-34s %9.1fx (p50 failover / p50 plain)\n", "ratio",
           fo[failovers / 2] / plain[failovers / 2]);
    free(plain);
    free(fo);
    client_free(c);
    return 0;
}
