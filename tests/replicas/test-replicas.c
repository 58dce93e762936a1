/* test-replicas.c: R16 across replicas. Three `einsora serve` on one real PostgreSQL 15; clients
 * submit (with idempotency keys), release and switch nodes' modes through all three URLs
 * while the leader is SIGKILLed at random moments, SIGSTOPped (and resumed after a standby
 * took over: its late write must be refused by the fence) and PostgreSQL itself restarts.
 * After each: every acknowledged request is there in its acknowledged state, no GPU is in two
 * allocations (the invariant check), every acknowledged mode switch is there. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"
#include "helpers.h"
#include "pg-helper.h"
#include "replicas.h"
#include "util/fileio.h"

#define CLIENTS 3
#define MAX_REQS 6000
#define MAX_SWITCHES 64
#define LEASE_MS "800"

typedef struct Known {
    char state[16]; /* last acknowledged state; "" = not acknowledged */
    char maybe[16]; /* state of an operation whose answer was lost (may have committed) */
    json_t *placement;
} Known;

static PgTest pg;
char conninfo[256];
static char dir[64], urls[256];
Replica rep[REPLICAS];
static Known known[MAX_REQS + 1];
static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool stop_clients, pause_clients;
static atomic_int idle_clients;
static atomic_uint submissions;
static char *admin;
static char client_failure[512]; /* a client's unexpected answer (asserted by the main thread) */
static char switched[MAX_SWITCHES][16]; /* node -> acknowledged mode, by index */
static unsigned n_switched;

uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static unsigned free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof(sa);
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
              getsockname(fd, (struct sockaddr *)&sa, &n) == 0);
    close(fd);
    return ntohs(sa.sin_port);
}

static const char *lease_ms = LEASE_MS; /* a test may give its replicas another */

static void spawn(int i) {
    Replica *r = &rep[i];
    char listen[64];
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", r->port);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        /* Criterion's timeout kills the test without its fini: take the replicas along. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        FILE *f = freopen(r->log, "a", stdout);
        (void)f;
        dup2(1, 2);
        execl(EINSORA_BIN, EINSORA_BIN, "serve", "--listen", listen, "--store", conninfo,
              "--lease-ms", lease_ms, "--catalog", TEST_DATA "/catalog.yaml", NULL);
        _exit(127);
    }
    r->pid = pid;
}

/* A replica's own view: "leader", "standby", or NULL when it does not answer; *epoch its
 * epoch. */
char *role_of(int i, long long *epoch) {
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", rep[i].port);
    Client *c = NULL;
    long st = 0;
    json_t *j = NULL;
    char *role = NULL;
    if (client_new(url, NULL, &c, NULL) >= 0 &&
        client_call(c, "GET", "/readyz", NULL, NULL, &st, &j, NULL) >= 0)
        role = json_string_value(json_object_get(j, "role"))
                       ? strdup(json_string_value(json_object_get(j, "role")))
                       : NULL;
    *epoch = json_integer_value(json_object_get(j, "epoch"));
    json_decref(j);
    client_free(c);
    return role;
}

long long leader_epoch;
static int paused = -1; /* a SIGSTOPped replica answers nothing: not asked */

/* Wait (a generous deadline, not a count) until one replica leads under an epoch newer than
 * `after` (0: any); leader_epoch gets it. */
int wait_leader(long long after, unsigned timeout_ms) {
    uint64_t end = now_ms() + timeout_ms;
    while (now_ms() < end) {
        for (int i = 0; i < REPLICAS; i++) {
            if (i == paused)
                continue;
            long long epoch = 0;
            char *role = role_of(i, &epoch);
            bool leads = role && !strcmp(role, "leader") && epoch > after;
            free(role);
            if (leads) {
                leader_epoch = epoch;
                return i;
            }
        }
        usleep(20 * 1000);
    }
    cr_assert_fail("no replica leads under an epoch newer than %lld within %u ms", after,
                   timeout_ms);
    return -1;
}

/* Replicas that stopped (stepped down) start again as standbys. */
static void respawn_exited(void) {
    for (int i = 0; i < REPLICAS; i++) {
        int status;
        if (waitpid(rep[i].pid, &status, WNOHANG) == rep[i].pid)
            spawn(i);
    }
}

__thread Error last_err; /* the last call's transport failure, for messages */

long call(Client *c, const char *method, const char *path, const char *body, const char *key,
          json_t **ret) {
    json_t *b = body ? json_loads(body, 0, NULL) : NULL;
    long st = 0;
    error_clear(&last_err);
    int r = client_call(c, method, path, b, key, &st, ret, &last_err);
    json_decref(b);
    return r < 0 ? r : st;
}

static void record(json_t *q) {
    json_int_t id = json_integer_value(json_object_get(q, "id"));
    if (id <= 0 || id > MAX_REQS)
        return;
    pthread_mutex_lock(&known_lock);
    Known *k = &known[id];
    snprintf(k->state, sizeof(k->state), "%s", json_string_value(json_object_get(q, "state")));
    k->maybe[0] = 0;
    json_decref(k->placement);
    k->placement = json_incref(json_object_get(q, "placement"));
    pthread_mutex_unlock(&known_lock);
}

typedef struct ClientArg {
    char *token;
    unsigned seed;
    json_int_t own[MAX_REQS];
    size_t n_own;
} ClientArg;

static void *client_main(void *p) {
    ClientArg *a = p;
    Client *c = NULL;
    cr_assert_eq(client_new(urls, a->token, &c, NULL), 0);
    while (!atomic_load(&stop_clients) && a->n_own < MAX_REQS / CLIENTS - 1) {
        if (atomic_load(&pause_clients)) {
            atomic_fetch_add(&idle_clients, 1);
            while (atomic_load(&pause_clients) && !atomic_load(&stop_clients))
                usleep(5000);
            atomic_fetch_sub(&idle_clients, 1);
            continue;
        }
        unsigned r = rand_r(&a->seed) % 10;
        json_t *q = NULL;
        if (r < 7 || a->n_own == 0) {
            char key[64];
            snprintf(key, sizeof(key), "k-%u-%u", a->seed, atomic_fetch_add(&submissions, 1));
            const char *body =
                    r % 2 ? "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}"
                          : "{\"kind\":\"notebook\",\"class\":\"nvidia-h100-80gb\",\"count\":2}";
            /* The key makes the retries across a failover one submission. */
            long st = call(c, "POST", "/v1/requests", body, key, &q);
            if (st != 201 && st != 200) {
                /* Criterion's asserts belong to the test's thread: report, and stop. */
                pthread_mutex_lock(&known_lock);
                snprintf(client_failure, sizeof(client_failure),
                         "submit %s answered %ld through "
                         "the failovers: %.300s",
                         key, st,
                         st < 0 ? last_err.message
                                : json_string_value(json_object_get(q, "message")));
                pthread_mutex_unlock(&known_lock);
                json_decref(q);
                break;
            }
            record(q);
            a->own[a->n_own++] = json_integer_value(json_object_get(q, "id"));
        } else {
            json_int_t id = a->own[rand_r(&a->seed) % a->n_own];
            char path[64];
            snprintf(path, sizeof(path), "/v1/requests/%lld/release", (long long)id);
            pthread_mutex_lock(&known_lock);
            snprintf(known[id].maybe, sizeof(known[id].maybe), "released");
            pthread_mutex_unlock(&known_lock);
            long st = call(c, "POST", path, NULL, NULL, &q);
            if (st == 200)
                record(q);
            else if (st == 409) {
                pthread_mutex_lock(&known_lock);
                known[id].maybe[0] = 0; /* refused: nothing changed */
                pthread_mutex_unlock(&known_lock);
            } /* else the answer was lost in a failover: "released" stays possible */
        }
        json_decref(q);
    }
    client_free(c);
    atomic_fetch_add(&idle_clients, 1); /* a stopped client never holds the others up */
    return NULL;
}

static void quiesce(void) {
    atomic_store(&pause_clients, true);
    uint64_t end = now_ms() + 60000;
    while (atomic_load(&idle_clients) < CLIENTS && now_ms() < end)
        usleep(5000);
    cr_assert(!client_failure[0], "%s", client_failure);
    cr_assert_eq(atomic_load(&idle_clients), CLIENTS, "clients did not settle within 60 s");
}

static json_t *list_requests(Client *c) {
    json_t *all = json_array();
    char after[64] = "";
    for (;;) {
        char path[128];
        snprintf(path, sizeof(path), "/v1/requests?%slimit=10000", after);
        json_t *page = NULL;
        /* Right after a failover a standby may still name the old leader when its replay is
         * too far behind to answer (it then redirects the read there): ask again until it
         * has learnt of the new leader or caught up. */
        long st = 0;
        for (uint64_t end = now_ms() + 60000;
             (st = call(c, "GET", path, NULL, NULL, &page)) != 200 && now_ms() < end;) {
            json_decref(page); /* the refusal's answer: the next try brings its own */
            page = NULL;
            usleep(100 * 1000);
        }
        cr_assert_eq(st, 200, "GET %s: %s", path, error_message(&last_err));
        json_t *items = json_object_get(page, "requests");
        json_array_extend(all, items);
        /* The opaque cursor, absent on the last page. */
        const char *next = json_string_value(json_object_get(page, "next"));
        bool more = json_array_size(items) > 0 && next;
        if (more)
            snprintf(after, sizeof(after), "after=%.40s&", next);
        json_decref(page);
        if (!more)
            return all;
    }
}

/* Each standby answers the list from its replay as the leader did: a read there waits until
 * the replay holds every commit made before it (or is redirected to the leader). */
static void verify_standbys(const char *when, json_t *reqs) {
    for (int i = 0; i < REPLICAS; i++) {
        long long epoch = 0;
        char *role = i == paused ? NULL : role_of(i, &epoch);
        bool standby = role && !strcmp(role, "standby");
        free(role);
        if (!standby)
            continue;
        char url[64];
        snprintf(url, sizeof(url), "http://127.0.0.1:%u", rep[i].port);
        Client *c = NULL;
        cr_assert_eq(client_new(url, admin, &c, NULL), 0);
        json_t *got = list_requests(c);
        cr_assert_eq(json_array_size(got), json_array_size(reqs),
                     "%s: standby %d lists %zu requests, "
                     "the leader %zu",
                     when, i, json_array_size(got), json_array_size(reqs));
        for (size_t k = 0; k < json_array_size(reqs); k++) {
            json_t *a = json_array_get(reqs, k), *b = json_array_get(got, k);
            cr_assert(json_equal(json_object_get(a, "id"), json_object_get(b, "id")) &&
                              json_equal(json_object_get(a, "state"), json_object_get(b, "state")),
                      "%s: standby %d shows request %lld as %s, the leader as %s", when, i,
                      (long long)json_integer_value(json_object_get(a, "id")),
                      json_string_value(json_object_get(b, "state")),
                      json_string_value(json_object_get(a, "state")));
        }
        json_decref(got);
        client_free(c);
    }
}

static void verify(const char *when) {
    Client *c = NULL;
    cr_assert_eq(client_new(urls, admin, &c, NULL), 0);
    json_t *reqs = list_requests(c);
    json_t **by_id = calloc(MAX_REQS + 1, sizeof(json_t *));
    size_t i;
    json_t *v;
    json_array_foreach(reqs, i, v) {
        json_int_t id = json_integer_value(json_object_get(v, "id"));
        if (id > 0 && id <= MAX_REQS)
            by_id[id] = v;
    }
    for (json_int_t id = 1; id <= MAX_REQS; id++) {
        Known *k = &known[id];
        if (!k->state[0])
            continue;
        json_t *q = by_id[id];
        cr_assert(q, "%s: acknowledged request %lld is lost", when, (long long)id);
        const char *got = json_string_value(json_object_get(q, "state"));
        bool ok = !strcmp(got, k->state) || (k->maybe[0] && !strcmp(got, k->maybe)) ||
                  (!strcmp(k->state, "pending") && !strcmp(got, "placed"));
        cr_assert(ok, "%s: request %lld acknowledged %s (maybe %s) but is %s", when, (long long)id,
                  k->state, k->maybe, got);
        if (!strcmp(got, "placed") && !strcmp(k->state, "placed"))
            cr_assert(json_equal(json_object_get(q, "placement"), k->placement),
                      "%s: request %lld moved", when, (long long)id);
        snprintf(k->state, sizeof(k->state), "%s", got);
        k->maybe[0] = 0;
        json_decref(k->placement);
        k->placement = json_incref(json_object_get(q, "placement"));
    }
    free(by_id);
    verify_standbys(when, reqs);
    json_decref(reqs);
    /* No GPU in two allocations, and the rest of the core's invariants. */
    json_t *inv = NULL;
    cr_assert_eq(call(c, "GET", "/v1/debug/invariants", NULL, NULL, &inv), 200);
    cr_assert(json_is_true(json_object_get(inv, "ok")), "%s: %s", when,
              json_string_value(json_object_get(inv, "violation")));
    json_decref(inv);
    /* Every acknowledged mode switch is there. */
    for (unsigned s = 0; s < n_switched; s++) {
        char path[64];
        snprintf(path, sizeof(path), "/v1/nodes/sw%u", s);
        json_t *n = NULL;
        cr_assert_eq(call(c, "GET", path, NULL, NULL, &n), 200);
        json_t *sw = json_object_get(n, "switch");
        const char *mode = json_string_value(json_object_get(sw, "mode"));
        cr_assert(mode && !strcmp(mode, switched[s]),
                  "%s: the acknowledged switch of sw%u to %s is lost (%s)", when, s, switched[s],
                  mode ? mode : "no switch");
        json_decref(n);
    }
    client_free(c);
}

static void add_node(Client *c, const char *name, const char *class, unsigned gpus) {
    json_t *devs = json_array();
    for (unsigned i = 0; i < gpus; i++) {
        char pci[32];
        snprintf(pci, sizeof(pci), "0000:%02x:00.0", 0x17 + i);
        json_array_append_new(
                devs, json_pack("{s:s, s:s, s:i}", "pci", pci, "class", class, "memory_gb", 80));
    }
    json_t *node = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:o}", "name", name, "site",
                             "dc1", "site_kind", "datacenter", "platform", "linux", "owner", "ops",
                             "mode", "container", "cpus", 64, "devices", devs);
    char *body = json_dumps(node, JSON_COMPACT);
    json_decref(node);
    char path[64];
    snprintf(path, sizeof(path), "/v1/nodes/%s", name);
    /* Without an idempotency key an answer lost in a failover leaves the outcome open: send
     * it again, and an "exists" then means the first one committed. */
    long st = 0;
    uint64_t end = now_ms() + 60000;
    do {
        json_t *ans = NULL;
        st = call(c, "POST", "/v1/nodes", body, NULL, &ans);
        json_decref(ans);
        if (st == 409 && call(c, "GET", path, NULL, NULL, NULL) == 200)
            st = 201;
    } while (st != 201 && now_ms() < end);
    cr_assert_eq(st, 201, "registering %s: %ld %s", name, st, last_err.message);
    free(body);
}

/* An admin switches a fresh node's mode: acknowledged switches must survive what follows. */
static void switch_mode(Client *c) {
    cr_assert(n_switched < MAX_SWITCHES);
    char name[16], path[64];
    snprintf(name, sizeof(name), "sw%u", n_switched);
    add_node(c, name, "nvidia-a100-80gb", 2); /* a class no client asks for: nothing to drain */
    snprintf(path, sizeof(path), "/v1/nodes/%s/mode", name);
    long st = 0;
    uint64_t end = now_ms() + 60000;
    do {
        json_t *ans = NULL;
        st = call(c, "POST", path, "{\"mode\":\"vm-passthrough\"}", NULL, &ans);
        json_decref(ans);
        if (st == 409) { /* a lost answer's switch did commit: then it is there */
            char show[64];
            snprintf(show, sizeof(show), "/v1/nodes/%s", name);
            json_t *n = NULL;
            if (call(c, "GET", show, NULL, NULL, &n) == 200 &&
                !strcmp(json_string_value(json_object_get(json_object_get(n, "switch"), "mode"))
                                ?: "",
                        "vm-passthrough"))
                st = 200;
            json_decref(n);
        }
    } while (st != 200 && now_ms() < end);
    cr_assert_eq(st, 200, "switching %s: %ld %s", name, st, last_err.message);
    snprintf(switched[n_switched++], sizeof(switched[0]), "vm-passthrough");
}

char *token(const char *user, const char *role) {
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "token", "create", "--state", conninfo, "--user", user,
                         "--role", role, NULL);
    cr_assert_eq(rc, 0, "token create failed: %s", err);
    free(err);
    out[strcspn(out, "\n")] = 0;
    return out;
}

static bool log_says(int i, const char *what) {
    char *text = NULL;
    bool yes = read_full_file(rep[i].log, 16u << 20, &text, NULL) >= 0 && strstr(text, what);
    free(text);
    return yes;
}

typedef struct Late {
    unsigned port;
    char *token;
    long status;
} Late;

/* A write sent straight to the paused leader: it runs only once the leader resumes. */
static void *late_write(void *p) {
    Late *l = p;
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", l->port);
    Client *c = NULL;
    cr_assert_eq(client_new(url, l->token, &c, NULL), 0);
    l->status = call(c, "POST", "/v1/requests",
                     "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", "late-1", NULL);
    client_free(c);
    return NULL;
}

/* A failed assertion must not leave replicas running. */
void kill_replicas(void) {
    for (int i = 0; i < REPLICAS; i++)
        if (rep[i].pid > 0) {
            kill(rep[i].pid, SIGKILL);
            waitpid(rep[i].pid, NULL, 0);
            rep[i].pid = 0;
        }
}

Test(replicas, r16_failover_loses_nothing_acknowledged_under_kills_pauses_and_a_postgresql_restart,
     .timeout = 500, .fini = kill_replicas) {
    const char *env = getenv("EINSORA_FAILOVER_SEED");
    unsigned seed = env ? (unsigned)strtoul(env, NULL, 10) : 20261130u;
    const char *kills_env = getenv("EINSORA_FAILOVER_KILLS");
    unsigned kills = kills_env ? (unsigned)strtoul(kills_env, NULL, 10) : 10;
    cr_log_info("failover test seed %u (EINSORA_FAILOVER_SEED to replay), %u kills", seed, kills);

    pg_test_start(&pg);
    cr_assert_eq(pg_test_new_db(&pg, conninfo, sizeof(conninfo)), 0);
    strcpy(dir, "/tmp/einsora-rep-XXXXXX");
    cr_assert(mkdtemp(dir));
    size_t len = 0;
    for (int i = 0; i < REPLICAS; i++) {
        rep[i].port = free_port();
        snprintf(rep[i].log, sizeof(rep[i].log), "%s/replica%d.log", dir, i);
        len += (size_t)snprintf(urls + len, sizeof(urls) - len, "%shttp://127.0.0.1:%u",
                                i ? "," : "", rep[i].port);
    }
    /* The first replica migrates the database; tokens need its tables. */
    spawn(0);
    wait_leader(0, 30000);
    admin = token("root", "admin");
    for (int i = 1; i < REPLICAS; i++)
        spawn(i);
    Client *ac = NULL;
    cr_assert_eq(client_new(urls, admin, &ac, NULL), 0);
    for (int n = 0; n < 6; n++) {
        char name[16];
        snprintf(name, sizeof(name), "n%d", n);
        add_node(ac, name, "nvidia-h100-80gb", 8);
    }
    ClientArg *args = calloc(CLIENTS, sizeof(ClientArg));
    pthread_t t[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        char user[16];
        snprintf(user, sizeof(user), "tenant%d", i);
        args[i].token = token(user, "trusted");
        args[i].seed = seed * 31 + (unsigned)i;
        pthread_create(&t[i], NULL, client_main, &args[i]);
    }

    /* SIGKILL the leader at random moments under load. */
    for (unsigned k = 0; k < kills; k++) {
        switch_mode(ac);
        int leader = wait_leader(0, 30000);
        usleep(50000 + (useconds_t)(rand_r(&seed) % 400) * 1000);
        long long epoch = leader_epoch;
        kill(rep[leader].pid, SIGKILL);
        waitpid(rep[leader].pid, NULL, 0);
        spawn(leader);
        wait_leader(epoch, 30000);
        quiesce();
        char when[64];
        snprintf(when, sizeof(when), "after kill %u", k + 1);
        verify(when);
        atomic_store(&pause_clients, false);
        respawn_exited();
    }

    /* SIGSTOP the leader; a standby takes over; the resumed old leader's write is refused. */
    int old = wait_leader(0, 30000);
    long long old_epoch = leader_epoch;
    kill(rep[old].pid, SIGSTOP);
    paused = old;
    cr_log_info("paused replica %d (epoch %lld)", old, old_epoch);
    Late late = {.port = rep[old].port, .token = token("late", "user")};
    pthread_t lt;
    pthread_create(&lt, NULL, late_write, &late);
    int now_leading = wait_leader(old_epoch, 30000);
    cr_assert_neq(now_leading, old, "a paused replica cannot lead");
    {
        /* The new leader acknowledges writes while the old one is paused (a client that still
         * talks to the paused one waits for it, as it would behind a partition). */
        char url[64];
        snprintf(url, sizeof(url), "http://127.0.0.1:%u", rep[now_leading].port);
        Client *c = NULL;
        json_t *q = NULL;
        cr_assert_eq(client_new(url, args[0].token, &c, NULL), 0);
        cr_assert_eq(call(c, "POST", "/v1/requests",
                          "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", "during-pause",
                          &q),
                     201);
        record(q);
        json_decref(q);
        client_free(c);
    }
    cr_log_info("replica %d leads (epoch %lld); resuming replica %d", now_leading, leader_epoch,
                old);
    kill(rep[old].pid, SIGCONT);
    paused = -1;
    uint64_t t0 = now_ms();
    switch_mode(ac);
    cr_log_info("switched after %llu ms", (unsigned long long)(now_ms() - t0));
    pthread_join(lt, NULL);
    cr_log_info("late write answered %ld after %llu ms", late.status,
                (unsigned long long)(now_ms() - t0));
    cr_assert(late.status < 200 || late.status >= 300,
              "the deposed leader acknowledged a late write (HTTP %ld)", late.status);
    int status = 0;
    uint64_t end = now_ms() + 30000;
    while (waitpid(rep[old].pid, &status, WNOHANG) != rep[old].pid && now_ms() < end)
        usleep(20000);
    cr_assert(now_ms() < end, "the deposed leader did not step down");
    cr_assert(log_says(old, "einsora: stopped: "),
              "the deposed leader stopped without its sentence");
    spawn(old);
    quiesce();
    verify("after the paused leader resumed");
    {
        /* Its late submission never landed: the fence refused it. */
        Client *c = NULL;
        cr_assert_eq(client_new(urls, admin, &c, NULL), 0);
        json_t *reqs = list_requests(c), *v;
        size_t i;
        json_array_foreach(reqs, i, v) cr_assert(
                strcmp(json_string_value(json_object_get(v, "user")), "late") || late.status == 201,
                "a request of the late write exists: %lld",
                (long long)json_integer_value(json_object_get(v, "id")));
        json_decref(reqs);
        client_free(c);
    }
    atomic_store(&pause_clients, false);

    /* PostgreSQL restarts under load: the leader survives or steps down cleanly. */
    usleep(200000);
    cr_log_info("restarting PostgreSQL");
    cr_assert_eq(pg_test_restart(&pg), 0);
    respawn_exited();
    wait_leader(0, 30000);
    switch_mode(ac);
    quiesce();
    respawn_exited();
    verify("after PostgreSQL restarted");

    atomic_store(&stop_clients, true);
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(t[i], NULL);
        free(args[i].token);
    }
    cr_log_info("%u kills, 1 pause, 1 PostgreSQL restart, %u submissions", kills,
                atomic_load(&submissions));
    client_free(ac);
    /* A clean stop: each replica ends on SIGTERM (a leader hands its lease back). */
    for (int i = 0; i < REPLICAS; i++) {
        cr_log_info("stopping replica %d", i);
        kill(rep[i].pid, SIGTERM);
        uint64_t until = now_ms() + 20000;
        while (waitpid(rep[i].pid, NULL, WNOHANG) != rep[i].pid && now_ms() < until)
            usleep(20000);
        cr_assert(now_ms() < until, "replica %d did not stop on SIGTERM within 20 s", i);
        rep[i].pid = 0;
    }
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    free(late.token);
    free(args);
    free(admin);
    for (size_t i = 0; i <= MAX_REQS; i++)
        json_decref(known[i].placement);
}

/* Two replicas on a fresh database; returns the leader's index once one leads. */
int start_two(void) {
    cr_assert_eq(pg_test_start(&pg), 0); /* finds the server main() started */
    cr_assert_eq(pg_test_new_db(&pg, conninfo, sizeof(conninfo)), 0);
    strcpy(dir, "/tmp/einsora-rep-XXXXXX");
    cr_assert(mkdtemp(dir));
    for (int i = 0; i < 2; i++) {
        rep[i].port = free_port();
        snprintf(rep[i].log, sizeof(rep[i].log), "%s/replica%d.log", dir, i);
    }
    spawn(0);
    int l = wait_leader(0, 30000);
    spawn(1);
    return l;
}

int replicas_pg_ctl(const char *action) {
    return pg_test_pg_ctl(&pg, action);
}

void remove_dir(void) {
    kill_replicas();
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    (void)!system(cmd);
}

Test(replicas, r16_a_standby_redirects_to_the_leader_and_says_it_stands_by, .fini = remove_dir) {
    int l = start_two(), sb = 1 - l;
    admin = token("root", "admin");
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", rep[sb].port);
    /* Wait (deadline) until the standby answers as one and has seen the leader's epoch (it
     * then knows where the leader is; before, it answers 503). */
    uint64_t end = now_ms() + 30000;
    char *role = NULL;
    long long epoch = 0;
    while (now_ms() < end &&
           (!(role = role_of(sb, &epoch)) || strcmp(role, "standby") || epoch < 1)) {
        free(role);
        role = NULL;
        usleep(20000);
    }
    cr_assert(role, "the standby never answered /readyz as one");
    free(role);
    /* A client that knows only the standby follows its 307 to the leader. */
    Client *c = NULL;
    cr_assert_eq(client_new(url, admin, &c, NULL), 0);
    json_t *j = NULL;
    cr_assert_eq(call(c, "GET", "/v1/requests", NULL, NULL, &j), 200, "%s", last_err.message);
    json_decref(j);
    cr_assert_eq(call(c, "POST", "/v1/requests",
                      "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", NULL, &j),
                 201);
    json_decref(j);
    client_free(c);
    free(admin);
}

Test(replicas, r16_cli_takes_server_repeated_and_moves_past_a_dead_one, .fini = remove_dir) {
    int l = start_two();
    admin = token("root", "admin");
    char dead[64], live[64];
    snprintf(dead, sizeof(dead), "http://127.0.0.1:%u", free_port());
    snprintf(live, sizeof(live), "http://127.0.0.1:%u", rep[l].port);
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "requests", "--server", dead, "--server", live, "--token",
                         admin, "--json", NULL);
    cr_assert_eq(rc, 0, "einsora requests with a dead and a live server: %s", err);
    cr_assert(strstr(out, "\"requests\""), "%s", out);
    free(out);
    free(err);
    free(admin);
}

/* While PostgreSQL is away, a change whose token the store cannot check never reached the
 * store: 503 not_committed (sent again at once, key or no key), not unavailable (outcome
 * unknown); a read is unavailable. */
Test(replicas, r16_a_change_whose_token_cannot_be_checked_is_not_committed, .fini = remove_dir) {
    int l = start_two();
    char *fresh = token("fresh", "user"); /* never checked: no memo of it stands in */
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", rep[l].port);
    cr_assert_eq(replicas_pg_ctl("stop"), 0);
    Client *c = NULL;
    cr_assert_eq(client_new(url, fresh, &c, NULL), 0);
    json_t *j = NULL;
    long st = call(c, "POST", "/v1/requests",
                   "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", NULL, &j);
    const char *code = json_string_value(json_object_get(j, "code"));
    cr_expect_eq(st, 503);
    cr_expect_str_eq(code ? code : "", "not_committed");
    json_decref(j);
    j = NULL;
    st = call(c, "GET", "/v1/requests", NULL, NULL, &j);
    code = json_string_value(json_object_get(j, "code"));
    cr_expect_eq(st, 503);
    cr_expect_str_eq(code ? code : "", "unavailable");
    json_decref(j);
    client_free(c);
    cr_assert_eq(replicas_pg_ctl("start"), 0);
    free(fresh);
}

int main(int argc, char *argv[]) {
    if (pg_test_start(&pg) < 0)
        return 1;
    struct criterion_test_set *tests = criterion_initialize();
    int result = 0;
    if (criterion_handle_args(argc, argv, true))
        result = !criterion_run_all_tests(tests);
    criterion_finalize(tests);
    pg_test_stop(&pg);
    return result;
}

/* R16: while PostgreSQL does not answer, the leader commits nothing; its /readyz says so (503),
 * so that a load balancer sends no change there meanwhile, and says ready again once it
 * answers. (A lease long enough that it keeps leading through the outage.) */
Test(replicas, r16_a_leader_whose_postgresql_is_away_is_not_ready, .fini = remove_dir) {
    lease_ms = "20000";
    int l = start_two();
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", rep[l].port);
    Client *c = NULL;
    cr_assert_eq(client_new(url, NULL, &c, NULL), 0);
    long st = 0;
    json_t *j = NULL;
    cr_assert_eq(call(c, "GET", "/readyz", NULL, NULL, NULL), 200);
    cr_assert_eq(replicas_pg_ctl("stop"), 0);
    /* Its next renewal (every third of the lease) finds PostgreSQL away. */
    for (int i = 0; i < 600 && st != 503; i++) {
        json_decref(j);
        j = NULL;
        st = call(c, "GET", "/readyz", NULL, NULL, &j);
        if (st != 503)
            usleep(50 * 1000);
    }
    cr_expect_eq(st, 503);
    const char *msg = json_string_value(json_object_get(j, "message"));
    cr_expect(msg && strstr(msg, "PostgreSQL does not answer"), "%s", msg);
    json_decref(j);
    cr_assert_eq(replicas_pg_ctl("start"), 0);
    for (int i = 0; i < 600 && st != 200; i++) {
        st = call(c, "GET", "/readyz", NULL, NULL, NULL);
        if (st != 200)
            usleep(50 * 1000);
    }
    cr_expect_eq(st, 200, "ready again once PostgreSQL answers");
    client_free(c);
    lease_ms = LEASE_MS;
}
