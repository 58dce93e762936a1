/* bench-api.c: acknowledged placements per second and latency over HTTP (loopback) with 1, 8
 * and 64 concurrent clients against a simulated fleet registered through the API, durable
 * (each answer only after its commit). The baseline in the same run is the same load with one
 * transaction per request (--batch 1: no group commit).
 *
 *   bench-api [--nodes N] [--seconds S] [--clients 1,8,64] [--window W] [--no-baseline]
 *             [--healthz] [--load-threads T] [--postgresql]
 *
 * --postgresql also runs the group-commit load against a PostgreSQL 15 it starts in a temp
 * dir (fsync on; one `einsora serve` leading on it), beside SQLite in the same run.
 *
 * Every node has 16 H100s. A run stops after S seconds or when 90% of the GPUs are placed.
 * With --window W each client keeps at most W placements and releases the oldest before it
 * submits past it (releases are committed too, but not counted as placements). A client is a
 * keep-alive connection with one request in flight; T threads (default 1) drive them all
 * from epoll. --healthz measures GET /healthz instead (the HTTP layer alone, no commit).
 * "srv/cli cpu us" is the CPU time the server process / the clients used per placement while
 * measuring, which on a shared machine says more than the rate; "wrt cpu us" the part of the
 * server's that its writer thread used (every change passes through that one thread, so
 * 1e6 / wrt bounds the rate however many cores serve the rest); "placed" is how many the row
 * counted (for instructions per placement: callgrind's count of a run minus a short one);
 * "steal %" the share of the machine's CPU time its hypervisor gave to other guests meanwhile
 * (a row with much of it measured the host more than the server). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
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

#define GPUS_PER_NODE 16
#define WINDOW_MAX 64

static const char *token = "ens_bench-admin-token";
static char url[64];
static uint16_t server_port;
static atomic_bool stop;
static atomic_ullong placed_total;
static unsigned window;  /* 0: never release */
static bool no_baseline; /* --no-baseline: group commit only (e.g. for profiling) */
/* --healthz: GET /healthz instead of submitting: the HTTP layer's own ceiling (no commit) */
static bool healthz;
static unsigned load_threads = 1; /* --load-threads: threads driving the clients */
static PgTest *pg;                /* --postgresql: the server the PostgreSQL rows run on */

typedef struct Worker {
    unsigned idx;
    uint64_t placed, other, errors;
    double *lat; /* seconds, of placement submits */
    size_t n_lat, cap_lat;
} Worker;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_ready(uint16_t port, void *userdata) {
    int fd = *(int *)userdata;
    if (write(fd, &port, sizeof(port)) != (ssize_t)sizeof(port))
        _exit(1);
    close(fd);
}

/* Start `einsora serve`'s code in a child process; returns its pid. */
static pid_t start_server(const char *state, unsigned batch) {
    int p[2];
    if (pipe(p) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        ServerConfig cfg = {.listen = "127.0.0.1:0",
                            .state_path = state,
                            .catalog_path = TEST_DATA "/catalog.yaml",
                            .batch_max = batch};
        Error err = {0};
        int r = server_run(&cfg, on_ready, &p[1], &err);
        if (r < 0)
            fprintf(stderr, "bench-api: server: %s\n", err.message);
        _exit(r < 0);
    }
    close(p[1]);
    uint16_t port = 0;
    if (read(p[0], &port, sizeof(port)) != (ssize_t)sizeof(port)) {
        close(p[0]);
        return -1;
    }
    close(p[0]);
    server_port = port;
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", port);
    /* On PostgreSQL the server listens as a standby first and leads once elected. */
    Client *c = NULL;
    if (client_new(url, NULL, &c, NULL) < 0)
        return -1;
    long st = 0;
    for (int i = 0; i < 3000 && st != 200; i++)
        if (client_call(c, "GET", "/readyz", NULL, NULL, &st, NULL, NULL) < 0 || st != 200)
            usleep(10000);
    client_free(c);
    return st == 200 ? pid : -1;
}

static int seed_fleet(unsigned nodes) {
    Client *c = NULL;
    Error err = {0};
    if (client_new(url, token, &c, &err) < 0)
        return -1;
    for (unsigned n = 0; n < nodes; n++) {
        json_t *devs = json_array();
        for (unsigned i = 0; i < GPUS_PER_NODE; i++) {
            char pci[32];
            snprintf(pci, sizeof(pci), "0000:%02x:00.0", 0x10 + i);
            json_array_append_new(devs, json_pack("{s:s, s:s, s:i}", "pci", pci, "class",
                                                  "nvidia-h100-80gb", "memory_gb", 80));
        }
        char name[32];
        snprintf(name, sizeof(name), "node-%04u", n);
        json_t *node = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:o}", "name", name, "site",
                                 "dc1", "site_kind", "datacenter", "platform", "linux", "owner",
                                 "bench", "mode", "container", "cpus", 64, "devices", devs);
        long st = 0;
        int r = client_call(c, "POST", "/v1/nodes", node, NULL, &st, NULL, &err);
        json_decref(node);
        if (r < 0 || st != 201) {
            fprintf(stderr, "bench-api: registering %s: %ld %s\n", name, st, err.message);
            client_free(c);
            return -1;
        }
    }
    client_free(c);
    return 0;
}

#define LIST_ROUNDS 5

static double cpu_seconds(pid_t pid);

/* What a dashboard's or a script's view of the whole fleet costs the server. */
static int list_fleet(pid_t server_pid) {
    Client *c = NULL;
    Error err = {0};
    if (client_new(url, token, &c, &err) < 0)
        return -1;
    double t0 = now_s(), cpu0 = cpu_seconds(server_pid);
    size_t bytes = 0;
    for (int i = 0; i < LIST_ROUNDS; i++) {
        long st = 0;
        char *text = NULL;
        if (client_call_raw(c, "GET", "/v1/nodes", NULL, 0, NULL, &st, &text, &err) < 0 ||
            st != 200) {
            fprintf(stderr, "bench-api: listing the nodes: %ld %s\n", st, err.message);
            free(text);
            client_free(c);
            return -1;
        }
        bytes = text ? strlen(text) : 0;
        free(text);
    }
    fprintf(stderr,
            "bench-api: GET /v1/nodes (%zu bytes): %.1f ms per answer, server CPU %.1f ms\n", bytes,
            (now_s() - t0) / LIST_ROUNDS * 1e3,
            (cpu_seconds(server_pid) - cpu0) / LIST_ROUNDS * 1e3);
    client_free(c);
    return 0;
}

/* The load generator speaks HTTP/1.1 over a plain keep-alive socket with pre-built requests,
 * so that on a small machine the clients' own cost (libcurl, JSON) does not crowd out the
 * server being measured. Answers are read by Content-Length. */
static int raw_connect(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons(server_port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* One client: a keep-alive connection with at most one request in flight (closed loop), so
 * N clients are N requests waiting for their answers, as N users of the API would be. */
typedef struct Conn {
    Worker *w;
    int fd;
    bool releasing; /* the request in flight is a release (--window) */
    double t0;
    size_t got;
    long ids[WINDOW_MAX];
    size_t head, n;
    char buf[16384];
} Conn;

static char submit_req[512];
static size_t submit_len;

static int conn_send(Conn *c) {
    const char *req = submit_req;
    size_t len = submit_len;
    char rel[512];
    c->releasing = window && c->n == window;
    if (c->releasing) {
        int rl = snprintf(rel, sizeof(rel),
                          "POST /v1/requests/%ld/release HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          "Authorization: Bearer %s\r\nContent-Length: 0\r\n\r\n",
                          c->ids[c->head], token);
        req = rel;
        len = (size_t)rl;
    }
    c->got = 0;
    c->t0 = now_s();
    /* Requests are a few hundred bytes: an idle loopback socket takes them whole. */
    return send(c->fd, req, len, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

/* Read what arrived; returns the status once the whole answer is in (by Content-Length), 0
 * while incomplete, -1 on error. *body points into c->buf at the NUL-terminated body. */
static int conn_read(Conn *c, char **body) {
    for (;;) {
        ssize_t n = recv(c->fd, c->buf + c->got, sizeof(c->buf) - 1 - c->got, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0)
            return -1;
        c->got += (size_t)n;
        c->buf[c->got] = 0;
        char *hdr_end = strstr(c->buf, "\r\n\r\n");
        if (hdr_end) {
            const char *cl = strcasestr(c->buf, "\r\nContent-Length:");
            long clen = cl ? strtol(cl + 17, NULL, 10) : 0;
            if ((long)(c->got - (size_t)(hdr_end + 4 - c->buf)) >= clen) {
                *body = hdr_end + 4;
                return (int)strtol(c->buf + 9, NULL, 10);
            }
        }
        if (c->got + 1 >= sizeof(c->buf))
            return -1;
    }
}

/* Count a complete answer. A placement counts only with its 201 and "placed" in hand: the
 * server sends it after the commit, so each one counted is durable. */
static void conn_answer(Conn *c, int st, const char *body) {
    Worker *w = c->w;
    if (c->releasing) {
        if (st != 200)
            w->errors++;
        w->other++;
        c->head = (c->head + 1) % window;
        c->n--;
        return;
    }
    if (st != (healthz ? 200 : 201)) {
        w->errors++;
        return;
    }
    double dt = now_s() - c->t0;
    if (healthz || strstr(body, "\"state\":\"placed\"")) {
        w->placed++;
        atomic_fetch_add(&placed_total, 1);
        if (window) {
            const char *id = strstr(body, "{\"id\":");
            c->ids[(c->head + c->n) % window] = id ? strtol(id + 6, NULL, 10) : 0;
            c->n++;
        }
        if (w->n_lat == w->cap_lat) {
            w->cap_lat = w->cap_lat ? w->cap_lat * 2 : 4096;
            w->lat = realloc(w->lat, w->cap_lat * sizeof(double));
        }
        w->lat[w->n_lat++] = dt;
    } else
        w->other++;
}

/* A load thread drives its share of the clients from one epoll loop: on a 2-core machine a
 * thread per client would spend the CPU the server needs on the clients' wake-ups. */
typedef struct Loader {
    Worker *w;
    unsigned count;
} Loader;

static void *loader_main(void *p) {
    Loader *l = p;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    Conn *cs = calloc(l->count, sizeof(Conn));
    unsigned live = 0;
    for (unsigned i = 0; ep >= 0 && cs && i < l->count; i++) {
        Conn *c = &cs[i];
        c->w = &l->w[i];
        c->fd = raw_connect();
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (c->fd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) < 0 || conn_send(c) < 0) {
            c->w->errors++;
            if (c->fd >= 0)
                close(c->fd);
            c->fd = -1;
            continue;
        }
        live++;
    }
    struct epoll_event evs[64];
    while (live > 0) {
        int n = epoll_wait(ep, evs, 64, 1000);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++) {
            Conn *c = evs[i].data.ptr;
            char *body = NULL;
            int st = conn_read(c, &body);
            if (st == 0)
                continue;
            if (st > 0)
                conn_answer(c, st, body);
            else
                c->w->errors++;
            /* After stop, each client only waits for the answer it has in flight. */
            if (st < 0 || atomic_load(&stop) || conn_send(c) < 0) {
                if (st > 0 && !atomic_load(&stop))
                    c->w->errors++;
                close(c->fd);
                c->fd = -1;
                live--;
            }
        }
    }
    for (unsigned i = 0; cs && i < l->count; i++)
        if (cs[i].fd >= 0)
            close(cs[i].fd);
    free(cs);
    if (ep >= 0)
        close(ep);
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* CPU seconds (user + system) used so far by the process or thread whose stat file is path. */
static double stat_cpu_seconds(const char *path) {
    char buf[1024];
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* fields after the command name */
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* CPU seconds used so far by process pid (0: this one). */
static double cpu_seconds(pid_t pid) {
    char path[64];
    snprintf(path, sizeof(path), pid ? "/proc/%d/stat" : "/proc/self/stat", (int)pid);
    return stat_cpu_seconds(path);
}

/* CPU seconds used so far by the server's writer thread: every change passes through it one
 * at a time, so its share of a placement bounds the rate however many cores serve the rest. */
static double writer_cpu_seconds(pid_t pid) {
    char path[320], comm[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    double secs = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)pid, e->d_name);
        FILE *f = fopen(path, "re");
        bool writer = f && fgets(comm, sizeof(comm), f) && strncmp(comm, "einsora-writer", 14) == 0;
        if (f)
            fclose(f);
        if (writer) {
            snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", (int)pid, e->d_name);
            secs = stat_cpu_seconds(path);
        }
    }
    if (d)
        closedir(d);
    return secs;
}

/* The machine's CPU time so far (/proc/stat's first line, in ticks): all of it, and the part
 * its hypervisor gave to other guests ("steal"). */
static void machine_cpu(unsigned long long *ret_total, unsigned long long *ret_steal) {
    unsigned long long v[8] = {0}, total = 0;
    FILE *f = fopen("/proc/stat", "re");
    if (!f || fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                     &v[4], &v[5], &v[6], &v[7]) != 8)
        memset(v, 0, sizeof(v));
    if (f)
        fclose(f);
    for (size_t i = 0; i < 8; i++)
        total += v[i];
    *ret_total = total;
    *ret_steal = v[7];
}

typedef struct Result {
    double rate, p50_ms, p99_ms, ops_per_commit;
    double server_us, client_us; /* CPU per placement, while measuring */
    double writer_us;            /* of server_us, the writer thread's */
    /* The share of the machine's CPU its hypervisor gave to other guests while measuring: a
     * row with much of it measured the host more than the server. */
    double steal_pct;
    uint64_t placed, errors;
} Result;

/* Average operations per transaction, from the server's own counters. */
static double ops_per_commit(void) {
    Client *c = NULL;
    Error err = {0};
    char *text = NULL;
    long st = 0;
    double ratio = 0;
    if (client_new(url, NULL, &c, &err) < 0)
        return 0;
    if (client_call_raw(c, "GET", "/metrics", NULL, 0, NULL, &st, &text, &err) == 0 && st == 200) {
        const char *a = strstr(text, "\neinsora_commits_total "),
                   *b = strstr(text, "\neinsora_committed_operations_total ");
        if (a && b) {
            double commits = strtod(strchr(a + 1, ' ') + 1, NULL),
                   ops = strtod(strchr(b + 1, ' ') + 1, NULL);
            ratio = commits > 0 ? ops / commits : 0;
        }
    }
    free(text);
    client_free(c);
    return ratio;
}

static void print_row(unsigned clients, const char *mode, const Result *r) {
    printf("%-8u %-24s %10.0f %9.2f %9.2f %10.1f %7llu %10.1f %10.1f %10.1f %8llu %7.1f\n", clients,
           mode, r->rate, r->p50_ms, r->p99_ms, r->ops_per_commit, (unsigned long long)r->errors,
           r->server_us, r->writer_us, r->client_us, (unsigned long long)r->placed, r->steal_pct);
}

static int run_one(unsigned clients, unsigned batch, bool postgres, unsigned nodes, double seconds,
                   Result *res) {
    char dir[] = "/tmp/einsora-bench-XXXXXX";
    if (!mkdtemp(dir))
        return -errno;
    char state[256];
    snprintf(state, sizeof(state), "%s/state.db", dir);
    if (postgres && pg_test_new_db(pg, state, sizeof(state)) < 0)
        return -EIO;
    Store *s = NULL;
    Error err = {0};
    char hash[65];
    sha256_hex(token, strlen(token), hash);
    if (store_open(state, &s, &err) < 0 || store_begin(s, &err) < 0 ||
        store_token_add(s, hash, "bench", "admin", NULL, &err) < 0 || store_commit(s, &err) < 0) {
        fprintf(stderr, "bench-api: %s\n", err.message);
        store_close(s);
        return -EIO;
    }
    store_close(s);
    pid_t pid = start_server(state, batch);
    if (pid < 0)
        return -EIO;
    /* One admin token registers the fleet (owned by the same user, so placements go to
     * runc containers on container-mode nodes) and submits. */
    int r = 0;
    double seed_t0 = now_s(), seed_cpu0 = cpu_seconds(pid);
    if (seed_fleet(nodes) < 0)
        r = -EIO;
    else /* what an agent's first inventory push costs the server, one after another */
        fprintf(stderr, "bench-api: registered %u nodes in %.2f s, server CPU %.0f us per node\n",
                nodes, now_s() - seed_t0, (cpu_seconds(pid) - seed_cpu0) / nodes * 1e6);
    if (r == 0 && list_fleet(pid) < 0)
        r = -EIO;
    Worker *w = calloc(clients, sizeof(Worker));
    unsigned n_loaders = MIN(load_threads, clients);
    pthread_t *t = calloc(n_loaders, sizeof(pthread_t));
    Loader *ld = calloc(n_loaders, sizeof(Loader));
    atomic_store(&stop, false);
    atomic_store(&placed_total, 0);
    const unsigned long long limit = (unsigned long long)nodes * GPUS_PER_NODE * 9 / 10;
    double t0 = now_s(), srv0 = cpu_seconds(pid), wrt0 = writer_cpu_seconds(pid),
           cli0 = cpu_seconds(0);
    unsigned long long machine0, steal0, machine1, steal1;
    machine_cpu(&machine0, &steal0);
    for (unsigned i = 0, first = 0; r == 0 && i < n_loaders; i++) {
        ld[i] = (Loader){.w = w + first, .count = clients / n_loaders + (i < clients % n_loaders)};
        first += ld[i].count;
        pthread_create(&t[i], NULL, loader_main, &ld[i]);
    }
    while (r == 0 && now_s() - t0 < seconds && atomic_load(&placed_total) < limit)
        usleep(2000);
    atomic_store(&stop, true);
    double *all = NULL;
    size_t n_all = 0;
    *res = (Result){0};
    for (unsigned i = 0; r == 0 && i < n_loaders; i++)
        pthread_join(t[i], NULL);
    for (unsigned i = 0; r == 0 && i < clients; i++) {
        res->placed += w[i].placed;
        res->errors += w[i].errors;
        all = realloc(all, (n_all + w[i].n_lat + 1) * sizeof(double));
        memcpy(all + n_all, w[i].lat, w[i].n_lat * sizeof(double));
        n_all += w[i].n_lat;
        free(w[i].lat);
    }
    double elapsed = now_s() - t0;
    double srv = cpu_seconds(pid) - srv0, wrt = writer_cpu_seconds(pid) - wrt0,
           cli = cpu_seconds(0) - cli0;
    machine_cpu(&machine1, &steal1);
    if (machine1 > machine0)
        res->steal_pct = 100.0 * (double)(steal1 - steal0) / (double)(machine1 - machine0);
    if (res->placed) {
        res->server_us = srv * 1e6 / (double)res->placed;
        res->writer_us = wrt * 1e6 / (double)res->placed;
        res->client_us = cli * 1e6 / (double)res->placed;
    }
    res->ops_per_commit = ops_per_commit();
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    if (n_all) {
        qsort(all, n_all, sizeof(double), cmp_double);
        res->p50_ms = all[n_all / 2] * 1e3;
        res->p99_ms = all[(size_t)((double)n_all * 0.99)] * 1e3;
    }
    res->rate = (double)res->placed / elapsed;
    free(all);
    free(w);
    free(t);
    free(ld);
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench-api: could not remove %s\n", dir);
    return r;
}

static void stop_pg(void) {
    if (pg)
        pg_test_stop(pg);
}

int main(int argc, char **argv) {
    unsigned nodes = 1000;
    double seconds = 3;
    unsigned clients[8] = {1, 8, 64};
    size_t n_clients = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--nodes") && i + 1 < argc)
            nodes = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--no-baseline"))
            no_baseline = true;
        else if (!strcmp(argv[i], "--load-threads") && i + 1 < argc) {
            /* not inside MAX(), which evaluates its arguments twice */
            unsigned n = (unsigned)strtoul(argv[++i], NULL, 10);
            load_threads = MAX(1u, n);
        } else if (!strcmp(argv[i], "--postgresql")) {
            static PgTest server = {.durable = 1};
            pg = &server;
        } else if (!strcmp(argv[i], "--healthz"))
            healthz = no_baseline = true;
        else if (!strcmp(argv[i], "--window") && i + 1 < argc) {
            window = (unsigned)strtoul(argv[++i], NULL, 10);
            if (window > WINDOW_MAX)
                window = WINDOW_MAX;
        } else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = strtod(argv[++i], NULL);
        else if (!strcmp(argv[i], "--clients") && i + 1 < argc) {
            n_clients = 0;
            char *save = NULL;
            for (char *tok = strtok_r(argv[++i], ",", &save); tok && n_clients < 8;
                 tok = strtok_r(NULL, ",", &save))
                clients[n_clients++] = (unsigned)strtoul(tok, NULL, 10);
        } else {
            fprintf(stderr,
                    "usage: bench-api [--nodes N] [--seconds S] [--clients 1,8,64] [--window W] "
                    "[--no-baseline] [--healthz] [--load-threads T] [--postgresql]\n");
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    if (pg && pg_test_start(pg) < 0)
        return 1;
    atexit(stop_pg);
    static const char json[] = "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}";
    if (healthz)
        submit_len = (size_t)snprintf(submit_req, sizeof(submit_req),
                                      "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    else
        submit_len =
                (size_t)snprintf(submit_req, sizeof(submit_req),
                                 "POST /v1/requests HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                 "Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
                                 "Content-Length: %zu\r\n\r\n%s",
                                 token, strlen(json), json);
    printf("bench-api: %u nodes x %u GPUs, up to %.1f s per run, %s, loopback HTTP, durable "
           "commits\n",
           nodes, GPUS_PER_NODE, seconds, window ? "submit+release" : "submit only");
    printf("%-8s %-24s %10s %9s %9s %10s %7s %10s %10s %10s %8s %7s\n", "clients", "mode",
           "placed/s", "p50 ms", "p99 ms", "ops/commit", "errors", "srv cpu us", "wrt cpu us",
           "cli cpu us", "placed", "steal %");
    for (size_t i = 0; i < n_clients; i++) {
        Result g, b = {0};
        if (run_one(clients[i], SERVER_BATCH_MAX, false, nodes, seconds, &g) < 0 ||
            (!no_baseline && run_one(clients[i], 1, false, nodes, seconds, &b) < 0)) {
            fprintf(stderr, "bench-api: run failed\n");
            return 1;
        }
        print_row(clients[i], healthz ? "GET /healthz: no commit" : "group commit", &g);
        if (pg) {
            Result q = {0};
            if (run_one(clients[i], SERVER_BATCH_MAX, true, nodes, seconds, &q) < 0) {
                fprintf(stderr, "bench-api: PostgreSQL run failed\n");
                return 1;
            }
            print_row(clients[i], "postgresql group commit", &q);
            printf("%-8u %-24s %9.2fx\n", clients[i], "ratio (postgresql/sqlite)",
                   g.rate > 0 ? q.rate / g.rate : 0);
        }
        if (no_baseline)
            continue;
        print_row(clients[i], "baseline: 1 txn/request", &b);
        printf("%-8u %-24s %9.2fx\n", clients[i], "ratio (group/baseline)",
               b.rate > 0 ? g.rate / b.rate : 0);
        fflush(stdout);
    }
    return 0;
}
