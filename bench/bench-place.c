/* bench-place.c: placement throughput and latency on a simulated fleet of 10,000 nodes /
 * 80,000 GPUs (H100 and H200 with MIG, A100, consumer cards, Macs, CPU-only nodes) over
 * 1,000,000 requests with releases; the same figures for a naive first-fit baseline run on
 * the same fleet and request stream in the same process, and a memory floor (the same stream
 * with only an id index and the records any engine must touch). Not a test: it prints figures.
 *
 *   bench-place [--digest] [--no-walk-memos] [--ours-only] [--lookahead both|on|off] [REQUESTS]
 *       (default 1000000 requests; EINSORA_BENCH_SEED picks the stream)
 *
 * Ours runs twice on fresh fleets: once with each operation on its own, as the server applies
 * an API call ("einsora"), and once as a caller that knows its stream announces each id
 * SCHED_ANNOUNCE_AHEAD operations ahead (sched_announce(); "einsora+la"). --lookahead on or
 * off keeps one of the two. Both must decide the same: with --digest a difference fails.
 *
 * --digest also prints a hash of every decision (submit answers and later placements by the
 * queue), so that a change meant only to make the engine faster can show it decides the same,
 * and one of the placements alone (without what a waiting request is told of its wait), so
 * that a change to how waits are explained can show it places the same. The hashes come from
 * extra runs after the timed ones, so that hashing is not timed.
 * --no-walk-memos runs every queue walk in full (sched_set_walk_memos()): what the memos save,
 * and the same digest. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "config/catalog-yaml.h"
#include "core/sched.h"
#include "core/strmap.h"
#include "util/macro.h"

#define N_NODES 10000
#define N_USERS 1000

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ull;
}
static unsigned pick(unsigned n) {
    return (unsigned)(next() % n);
}

static uint64_t clock_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(void) {
    return clock_ns(CLOCK_MONOTONIC);
}

/* The stream ahead of op i, fetched as non-temporal data. The stream is 200 MB read once:
 * loaded as ordinary data it would pass through the last-level cache the engine's records
 * live in and push them out, a cost of this program's input that a server, reading requests
 * into buffers it reuses, does not have. Every run below reads its stream through this. */
#define STREAM_AHEAD 16
static inline void stream_prefetch(const void *ops, size_t op_size, size_t i, size_t n_ops) {
    if (i + STREAM_AHEAD < n_ops)
        for (size_t b = 0; b < op_size; b += 64)
            __builtin_prefetch((const char *)ops + (i + STREAM_AHEAD) * op_size + b, 0, 0);
}

/* ---- the fleet ---- */

typedef struct NodeKind {
    const char *site, *cls, *mode; /* mode NULL: lab per-GPU binding */
    unsigned nodes, gpus;
    bool mig, mac;
} NodeKind;

static const NodeKind fleet[] = {
        {"dc-a", "nvidia-h100-80gb", "container", 2500, 8, false, false},
        {"dc-a", "nvidia-h100-80gb", "vm-passthrough", 1200, 8, false, false},
        {"dc-b", "nvidia-h200-141gb", "container", 1000, 8, true, false},
        {"dc-b", "nvidia-a100-80gb", "container", 2000, 8, false, false},
        {"dc-c", "nvidia-a100-80gb", "vm-passthrough", 1000, 8, false, false},
        {"dc-c", "nvidia-l40s", "container", 650, 16, false, false},
        {"lab", "nvidia-rtx-4090", NULL, 1000, 8, false, false},
        {"lab", NULL, NULL, 300, 0, false, true},          /* Macs */
        {"dc-c", NULL, "container", 350, 0, false, false}, /* CPU-only */
};

static char user_names[N_USERS][16];

static void build_fleet(Sched *s, unsigned *ret_gpus) {
    const char *sites[] = {"dc-a", "dc-b", "dc-c"};
    for (int i = 0; i < 3; i++)
        sched_add_site(s, sites[i], SITE_DATACENTER, NULL);
    sched_add_site(s, "lab", SITE_LAB, NULL);
    for (int u = 0; u < N_USERS; u++) {
        snprintf(user_names[u], sizeof(user_names[u]), "user%d", u);
        if (u < 100 || u >= 400) /* 700 of 1000 users are trusted tenants of the datacenters */
            for (int i = 0; i < 3; i++)
                sched_site_trust(s, sites[i], user_names[u], true, NULL);
    }
    unsigned k = 0, gpus = 0;
    for (size_t f = 0; f < sizeof(fleet) / sizeof(fleet[0]); f++)
        for (unsigned i = 0; i < fleet[f].nodes; i++, k++) {
            char name[32];
            snprintf(name, sizeof(name), "node-%05u", k);
            DeviceSpec devs[SCHED_NODE_MAX_DEVICES];
            for (unsigned g = 0; g < fleet[f].gpus; g++)
                devs[g] = (DeviceSpec){.class_name = fleet[f].cls,
                                       .binding = g < 4 ? BINDING_HOST : BINDING_VFIO,
                                       .mig_enabled = fleet[f].mig,
                                       .reset_verified = true};
            SchedLabel label = {SCHED_MODE_LABEL, fleet[f].mode};
            NodeSpec spec = {.name = name,
                             .site = fleet[f].site,
                             .owner = fleet[f].site[0] == 'l' ? user_names[100 + k % 900] : "ops",
                             .platform = fleet[f].mac ? PLATFORM_MACOS : PLATFORM_LINUX,
                             .labels = fleet[f].mode ? &label : NULL,
                             .n_labels = fleet[f].mode ? 1 : 0,
                             .kata = true,
                             .mig_in_kata = fleet[f].mig,
                             .cpu_cores = 64,
                             .apple_unified_memory_gb = fleet[f].mac ? 64 : 0,
                             .apple_usable_memory_gb = fleet[f].mac ? 48 : 0,
                             .devices = devs,
                             .n_devices = fleet[f].gpus};
            Error err = {0};
            if (sched_add_node(s, &spec, 0, &err) < 0) {
                fprintf(stderr, "bench-place: %s\n", err.message);
                exit(1);
            }
            gpus += fleet[f].gpus + fleet[f].mac;
        }
    *ret_gpus = gpus;
}

/* ---- the request stream ---- */

typedef struct Op {
    bool release;
    uint32_t target; /* release: index of an earlier submit */
    RequestSpec spec;
    char id[16];
} Op;

static const char *const whole[] = {"nvidia-h100-80gb", "nvidia-a100-80gb", "nvidia-l40s",
                                    "nvidia-rtx-4090"};
static const char *const slices[] = {
        "nvidia-h200-141gb-mig-1g.18gb", "nvidia-h200-141gb-mig-2g.35gb",
        "nvidia-h200-141gb-mig-3g.71gb", "nvidia-h200-141gb-mig-1g.35gb",
        "nvidia-h200-141gb-mig-7g.141gb"};
static const char *const to_cpu[] = {"cpu"};

static void make_spec(Op *op, uint32_t i) {
    snprintf(op->id, sizeof(op->id), "r%u", i);
    RequestSpec *r = &op->spec;
    unsigned u = pick(N_USERS);
    *r = (RequestSpec){.id = op->id, .user = user_names[u], .submitted = i, .count = 1};
    unsigned k = pick(100);
    if (k < 45) { /* whole GPUs to containers, some gangs */
        r->kind = pick(2) ? WORKLOAD_CONTAINER : WORKLOAD_NOTEBOOK;
        r->class_name = whole[pick(4)];
        unsigned g = pick(20);
        r->count = g == 0 ? 8 : g == 1 ? 4 : g < 4 ? 2 : 1;
    } else if (k < 60) {
        r->kind = WORKLOAD_VM;
        r->class_name = whole[pick(2)];
    } else if (k < 75) {
        r->kind = WORKLOAD_ENDPOINT;
        r->class_name = slices[pick(5)];
    } else if (k < 80) {
        r->kind = WORKLOAD_NOTEBOOK;
        r->class_name = "nvidia-h100-80gb";
        r->share = true;
        r->user = user_names[pick(100)];
    } else if (k < 85) {
        r->kind = WORKLOAD_ENDPOINT;
        r->class_name = "apple-silicon-64gb";
        r->memory_gb = 8 + pick(16);
        r->user = user_names[100 + pick(900)];
        r->fallback = to_cpu;
        r->n_fallback = 1;
        r->wait_s = 30;
    } else {
        r->kind = pick(2) ? WORKLOAD_ENDPOINT : WORKLOAD_CONTAINER;
        r->class_name = "cpu";
        r->count = 1 + pick(8);
    }
}

/* Submits, with releases of earlier requests mixed in so that the fleet stays ~85% busy. */
static Op *make_stream(unsigned n_requests, unsigned gpus, size_t *ret_n) {
    Op *ops = calloc((size_t)n_requests * 2, sizeof(Op));
    uint32_t *live = calloc(n_requests, sizeof(uint32_t));
    if (!ops || !live)
        exit(1);
    size_t n = 0, n_live = 0;
    size_t target = (size_t)gpus * 85 / 100;
    for (uint32_t i = 0; i < n_requests; i++) {
        while (n_live > target || (n_live && pick(3) == 0)) {
            size_t j = pick((unsigned)n_live);
            /* What a release names comes with it, as the id in a server's URL does: reading
             * it from the random earlier submit would time the stream's own cache miss. */
            const Op *t = &ops[live[j]];
            ops[n] = (Op){.release = true, .target = live[j]};
            memcpy(ops[n].id, t->id, sizeof(ops[n].id));
            ops[n].spec = (RequestSpec){.id = ops[n].id,
                                        .class_name = t->spec.class_name,
                                        .submitted = t->spec.submitted};
            n++;
            live[j] = live[--n_live];
            if (n_live < target / 2)
                break;
        }
        ops[n].release = false;
        make_spec(&ops[n], i);
        live[n_live++] = (uint32_t)n;
        ops[n].target = (uint32_t)n;
        n++;
    }
    free(live);
    *ret_n = n;
    return ops;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Rate per window of WINDOW requests (the submits and the releases between them), so that a
 * rate falling with history shows apart from one falling while the fleet fills up. */
#define WINDOW 100000
#define MAX_WINDOWS 64

typedef struct Window {
    double per_sec;
    double ops_per_sec;       /* submits and releases: the same work per op in every window */
    size_t releases, waiting; /* waiting: queue length at the window's end */
} Window;

typedef struct Result {
    double secs, per_sec, submit_per_sec, p50_us, p99_us, max_us;
    /* The same rate over the CPU time the run got: on a machine shared with other work the
     * wall-clock rate counts the time others held the CPU; this one does not (cache sharing
     * still counts). */
    double per_cpu_sec;
    Window windows[MAX_WINDOWS];
    size_t n_windows;
    size_t placed, waiting, refused, whole_free_nodes;
    size_t reset_pending; /* idle passthrough GPUs that no reset check gave back (R9) */
} Result;

static void percentiles(uint32_t *lat, size_t n, Result *res) {
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += lat[i];
    res->submit_per_sec = n / (sum / 1e9);
    qsort(lat, n, sizeof(uint32_t), cmp_u32);
    res->p50_us = lat[n / 2] / 1000.0;
    res->p99_us = lat[n * 99 / 100] / 1000.0;
    res->max_us = lat[n - 1] / 1000.0;
}

/* ---- decision digests (FNV-1a 64) ---- */

static bool want_digest, no_walk_memos, ours_only;
/* Set during the untimed runs that hash every decision: hashing each decision's sentence byte
 * by byte costs a fifth of a timed run, which is the benchmark's work, not the engine's. */
static bool digesting;
static bool run_plain = true, run_lookahead = true;
/* digest: every answer in full. placement_digest: the same without what a waiting request is
 * told of its wait (reason, sentence, queue position), so that a change to how a wait is
 * explained can show that it placed every request the same. */
#define FNV_BASIS 0xcbf29ce484222325ull
static uint64_t digest = FNV_BASIS, placement_digest = FNV_BASIS;

static void fnv(uint64_t *h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        *h = (*h ^ b[i]) * 0x100000001b3ull;
}

static void digest_bytes(const void *p, size_t n) {
    fnv(&digest, p, n);
    fnv(&placement_digest, p, n);
}

static void digest_u64(uint64_t v) {
    digest_bytes(&v, sizeof(v));
}

static void digest_str(const char *str) {
    if (str)
        digest_bytes(str, strlen(str) + 1);
    else
        digest_u64(UINT64_MAX);
}

/* What a request is told of its wait (or of its placement's reason): the full digest only. */
static void digest_told(const Decision *d) {
    uint64_t reason = d->reason, position = d->queue_position;
    fnv(&digest, &reason, sizeof(reason));
    fnv(&digest, d->message, strlen(d->message) + 1);
    fnv(&digest, &position, sizeof(position));
}

static void digest_decision(const char *id, const Decision *d) {
    digest_str(id);
    digest_u64(d->kind);
    digest_told(d);
    if (d->kind != DECISION_PLACED)
        return;
    const Placement *p = &d->placement;
    digest_str(p->node);
    digest_str(p->class_name);
    uint64_t f[] = {(uint64_t)p->class_index,
                    p->method,
                    p->container_runtime,
                    p->endpoint_runtime,
                    p->n_devices,
                    p->mig_start,
                    p->mig_slots,
                    p->cpu_cores,
                    p->memory_gb,
                    (uint64_t)p->fallback_index};
    digest_bytes(f, sizeof(f));
    for (unsigned i = 0; i < p->n_devices && i < SCHED_NODE_MAX_DEVICES; i++)
        digest_u64(p->devices[i]);
}

/* Every run has a placement callback, as the server does (it records what the queue placed),
 * so that the core builds the decision of each placement by the queue in the timed runs too. */
static size_t placed_by_queue;
static void on_placed(void *userdata, const char *request_id, const Decision *d) {
    (void)userdata;
    placed_by_queue++;
    if (!digesting)
        return;
    digest_u64(0xd1); /* a later placement by the queue, not a submit answer */
    digest_decision(request_id, d);
}

/* ---- ours ---- */

/* Releases a request the way the server does, with what its agent then reports: after a VM or
 * Kata use of a consumer card's passthrough GPU the agent runs the reset cycle check (R9) and
 * reports it passed, which gives the GPU back to the fleet. Without it the fleet would lose
 * that capacity release after release. Only consumer-card requests need the look. */
static void release_as_agent(Sched *s, const Op *op, uint64_t now) {
    /* The placement alone (no sentence): an agent needs only the node and devices. */
    Placement p;
    bool consumer = op->spec.class_name == whole[3] &&
                    sched_request_placement(s, op->spec.id, &p) == 0 && p.n_devices > 0;
    char node[32];
    unsigned devs[SCHED_NODE_MAX_DEVICES], n_devs = 0;
    if (consumer) { /* the placement's strings live until the next mutation: copy them first */
        snprintf(node, sizeof(node), "%s", p.node);
        for (unsigned i = 0; i < p.n_devices && i < SCHED_NODE_MAX_DEVICES; i++)
            devs[n_devs++] = p.devices[i];
    }
    sched_release(s, op->spec.id, now, NULL);
    for (unsigned i = 0; i < n_devs; i++) {
        DeviceInfo di;
        if (sched_device_info(s, node, devs[i], &di) == 0 && !di.reset_verified)
            sched_device_reset_result(s, node, devs[i], true, NULL, now, NULL);
    }
}

/* The figures of a window of `requests` submits and `releases` releases that took ns. */
static Window window_of(const Sched *s, size_t requests, size_t releases, uint64_t ns) {
    double secs = ns / 1e9;
    return (Window){requests / secs, (requests + releases) / secs, releases,
                    sched_waiting_count(s)};
}

/* Not inlined into main(), so that a profiler can tell the timed run from the set-up
 * (valgrind --tool=callgrind --toggle-collect=run_ours bench-place --ours-only). */
static __attribute__((noinline)) Result run_ours(Sched *s, Op *ops, size_t n_ops, uint32_t *lat,
                                                 bool lookahead) {
    Result res = {0};
    size_t k = 0, releases = 0;
    uint64_t t0 = now_ns(), window_start = t0, cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    for (size_t i = 0; i < n_ops; i++) {
        Op *op = &ops[i];
        stream_prefetch(ops, sizeof(Op), i, n_ops);
        if (lookahead && i + SCHED_ANNOUNCE_AHEAD < n_ops)
            sched_announce(s, ops[i + SCHED_ANNOUNCE_AHEAD].spec.id);
        if (op->release) {
            release_as_agent(s, op, op->spec.submitted + 1);
            releases++;
            continue;
        }
        if (k && k % WINDOW == 0 && res.n_windows < MAX_WINDOWS) {
            uint64_t t = now_ns();
            res.windows[res.n_windows++] = window_of(s, WINDOW, releases, t - window_start);
            window_start = t;
            releases = 0;
        }
        Decision d;
        uint64_t a = now_ns();
        sched_submit(s, &op->spec, op->spec.submitted, &d, NULL);
        uint64_t b = now_ns();
        lat[k++] = (uint32_t)MIN(b - a, UINT32_MAX);
        if (digesting)
            digest_decision(op->spec.id, &d);
        res.placed += d.kind == DECISION_PLACED;
        res.waiting += d.kind == DECISION_WAITING;
        res.refused += d.kind == DECISION_REFUSED;
        if ((i & 1023) == 0)
            sched_tick(s, op->spec.submitted);
    }
    uint64_t t1 = now_ns();
    size_t last = k - res.n_windows * WINDOW; /* the requests of the last, maybe partial, window */
    if (last && res.n_windows < MAX_WINDOWS)
        res.windows[res.n_windows++] = window_of(s, last, releases, t1 - window_start);
    res.secs = (t1 - t0) / 1e9;
    res.per_sec = k / res.secs;
    res.per_cpu_sec = k / ((clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0) / 1e9);
    percentiles(lat, k, &res);
    for (size_t i = 0; i < sched_node_count(s); i++) {
        NodeInfo ni;
        sched_node_info_at(s, i, &ni);
        bool all_free = ni.n_devices > 0;
        for (unsigned d = 0; d < ni.n_devices && all_free; d++) {
            DeviceInfo di;
            sched_device_info(s, ni.name, d, &di);
            all_free = di.n_allocations == 0;
        }
        for (unsigned d = 0; d < ni.n_devices; d++) {
            DeviceInfo di;
            sched_device_info(s, ni.name, d, &di);
            res.reset_pending +=
                    di.binding == BINDING_VFIO && di.n_allocations == 0 && !di.reset_verified;
        }
        res.whole_free_nodes += all_free;
    }
    return res;
}

/* ---- naive first-fit baseline: first node in order with enough free units of the class ---- */

typedef struct FfNode {
    int cls;
    uint8_t n, free;
    uint8_t mig_used; /* slots used on the node's MIG GPUs, flattened to a count */
    uint16_t cpu_free;
} FfNode;

typedef struct FfAlloc {
    int32_t node;
    uint8_t units;
    bool cpu;
} FfAlloc;

static Result run_first_fit(const Catalog *cat, Op *ops, size_t n_ops, uint32_t *lat) {
    FfNode *nodes = calloc(N_NODES, sizeof(FfNode));
    FfAlloc *allocs = calloc(n_ops, sizeof(FfAlloc));
    if (!nodes || !allocs)
        exit(1);
    size_t k = 0, m = 0;
    for (size_t f = 0; f < sizeof(fleet) / sizeof(fleet[0]); f++)
        for (unsigned i = 0; i < fleet[f].nodes; i++, m++) {
            nodes[m].cls = fleet[f].cls   ? catalog_find_index(cat, fleet[f].cls)
                           : fleet[f].mac ? -2
                                          : -1;
            nodes[m].n = nodes[m].free = (uint8_t)(fleet[f].mig   ? fleet[f].gpus * 7
                                                   : fleet[f].mac ? 1
                                                                  : fleet[f].gpus);
            nodes[m].cpu_free = 64;
        }
    Result res = {0};
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < n_ops; i++) {
        Op *op = &ops[i];
        stream_prefetch(ops, sizeof(Op), i, n_ops);
        if (op->release) {
            FfAlloc *a = &allocs[op->target];
            if (a->node >= 0 && a->units) {
                if (a->cpu)
                    nodes[a->node].cpu_free += a->units;
                else
                    nodes[a->node].free += a->units;
                a->units = 0;
            }
            continue;
        }
        uint64_t a = now_ns();
        int c = catalog_find_index(cat, op->spec.class_name);
        bool cpu = c >= 0 && cat->classes[c].vendor == VENDOR_CPU;
        int want = c;
        unsigned units = op->spec.count ? op->spec.count : 1;
        if (c >= 0 && cat->classes[c].mig_parent_index >= 0) {
            want = cat->classes[c].mig_parent_index;
            units = mig_shape_info(cat->classes[c].mig_shape)->mem_slots;
        }
        if (c >= 0 && cat->classes[c].vendor == VENDOR_APPLE)
            want = -2;
        allocs[i].node = -1;
        for (int32_t nd = 0; nd < N_NODES; nd++) {
            FfNode *fn = &nodes[nd];
            if (cpu ? fn->cpu_free >= units : (fn->cls == want && fn->free >= units)) {
                if (cpu)
                    fn->cpu_free = (uint16_t)(fn->cpu_free - units);
                else
                    fn->free = (uint8_t)(fn->free - units);
                allocs[i] = (FfAlloc){nd, (uint8_t)units, cpu};
                break;
            }
        }
        uint64_t b = now_ns();
        lat[k++] = (uint32_t)MIN(b - a, UINT32_MAX);
        res.placed += allocs[i].node >= 0;
        res.waiting += allocs[i].node < 0;
    }
    res.secs = (now_ns() - t0) / 1e9;
    res.per_sec = k / res.secs;
    percentiles(lat, k, &res);
    for (int nd = 0; nd < N_NODES; nd++)
        res.whole_free_nodes += nodes[nd].cls != -1 && nodes[nd].free == nodes[nd].n;
    free(nodes);
    free(allocs);
    return res;
}

/* ---- memory floor: what any engine keyed by request id must touch, and nothing else ---- */

/* Per submit: hash the id, insert {hash, record} into an open-addressing index, write the
 * request's record (id inline) and update one node's record; per release: find the record by
 * its id (hash, then compare), update its node, take it out of the index (backward shift).
 * Records have our sizes (a request 320 bytes, a node 1,536, both cache-line aligned) and the
 * records are reused, so the working set and its cache misses are those of the same stream.
 * No rule, no search, no queue, no message: what no engine on this machine and stream beats. */
#define FLOOR_REQ_BYTES 320
#define FLOOR_NODE_BYTES 1536

typedef struct FloorReq {
    char id[24];
    uint32_t node, next_free;
    uint8_t rest[FLOOR_REQ_BYTES - 32];
} __attribute__((aligned(64))) FloorReq;

typedef struct FloorNode {
    uint32_t free, n_allocs;
    uint8_t devices[FLOOR_NODE_BYTES - 8];
} __attribute__((aligned(64))) FloorNode;

typedef struct FloorSlot {
    uint32_t hash, ri; /* ri UINT32_MAX: empty */
} FloorSlot;

typedef struct Floor {
    FloorReq *reqs;
    FloorNode *nodes;
    FloorSlot *slots;
    uint32_t *rec_of; /* op index -> record */
    size_t cap, n;
    uint32_t free_rec, n_recs;
} Floor;

static void floor_insert(Floor *f, uint32_t h, uint32_t ri) {
    size_t mask = f->cap - 1, i = h & mask;
    while (f->slots[i].ri != UINT32_MAX)
        i = (i + 1) & mask;
    f->slots[i] = (FloorSlot){h, ri};
}

static void floor_grow(Floor *f) {
    FloorSlot *old = f->slots;
    size_t old_cap = f->cap;
    f->cap = old_cap ? old_cap * 2 : 1024;
    f->slots = malloc(f->cap * sizeof(FloorSlot));
    if (!f->slots)
        exit(1);
    memset(f->slots, 0xff, f->cap * sizeof(FloorSlot));
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].ri != UINT32_MAX)
            floor_insert(f, old[i].hash, old[i].ri);
    free(old);
}

static void floor_submit(Floor *f, const Op *op, uint32_t op_index) {
    if ((f->n + 1) * 4 > f->cap * 3)
        floor_grow(f);
    uint32_t ri = f->free_rec != UINT32_MAX ? f->free_rec : f->n_recs++;
    FloorReq *r = &f->reqs[ri];
    if (f->free_rec == ri)
        f->free_rec = r->next_free;
    uint32_t h = strmap_hash(op->id);
    snprintf(r->id, sizeof(r->id), "%s", op->id);
    r->node = (h >> 7) % N_NODES; /* a node the stream does not choose: as random as ours */
    r->rest[0] = (uint8_t)op->spec.count;
    FloorNode *nd = &f->nodes[r->node];
    nd->free -= op->spec.count;
    nd->devices[(h & 15) * 64] += 1;
    nd->n_allocs++;
    floor_insert(f, h, ri);
    f->n++;
    f->rec_of[op_index] = ri;
}

static void floor_release(Floor *f, const Op *op) {
    uint32_t h = strmap_hash(op->id);
    size_t mask = f->cap - 1, i = h & mask;
    while (f->slots[i].ri != UINT32_MAX &&
           !(f->slots[i].hash == h && strcmp(f->reqs[f->slots[i].ri].id, op->id) == 0))
        i = (i + 1) & mask;
    if (f->slots[i].ri == UINT32_MAX)
        exit(1); /* every release names a live submit */
    FloorReq *r = &f->reqs[f->slots[i].ri];
    FloorNode *nd = &f->nodes[r->node];
    nd->free += r->rest[0];
    nd->devices[(h & 15) * 64] -= 1;
    nd->n_allocs--;
    r->next_free = f->free_rec;
    f->free_rec = f->slots[i].ri;
    for (size_t j = i;;) { /* backward shift, as the engine's maps do */
        j = (j + 1) & mask;
        if (f->slots[j].ri == UINT32_MAX)
            break;
        size_t home = f->slots[j].hash & mask;
        if (i <= j ? (home > i && home <= j) : (home > i || home <= j))
            continue;
        f->slots[i] = f->slots[j];
        i = j;
    }
    f->slots[i].ri = UINT32_MAX;
    f->n--;
}

static double run_floor(const Op *ops, size_t n_ops, size_t n_requests) {
    Floor f = {.free_rec = UINT32_MAX};
    f.reqs = aligned_alloc(64, n_requests * sizeof(FloorReq));
    f.nodes = aligned_alloc(64, N_NODES * sizeof(FloorNode));
    f.rec_of = calloc(n_ops, sizeof(uint32_t));
    if (!f.reqs || !f.nodes || !f.rec_of)
        exit(1);
    memset(f.nodes, 0, N_NODES * sizeof(FloorNode));
    floor_grow(&f);
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < n_ops; i++) {
        stream_prefetch(ops, sizeof(Op), i, n_ops);
        if (ops[i].release)
            floor_release(&f, &ops[i]);
        else
            floor_submit(&f, &ops[i], (uint32_t)i);
    }
    double secs = (now_ns() - t0) / 1e9;
    free(f.reqs);
    free(f.nodes);
    free(f.slots);
    free(f.rec_of);
    return n_requests / secs;
}

static long peak_rss_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static void print_result(const char *name, const Result *r) {
    printf("%-10s decisions %8.0f/s (submit path alone %8.0f/s; the first includes releases and "
           "queue walks)\n"
           "%-10s p50 %6.2f us  p99 %6.2f us  max %8.1f us  placed %zu  waiting %zu  refused %zu  "
           "whole-free GPU nodes at end %zu\n",
           name, r->per_sec, r->submit_per_sec, "", r->p50_us, r->p99_us, r->max_us, r->placed,
           r->waiting, r->refused, r->whole_free_nodes);
}

/* Every figure of ours beside the baselines' (ff: first-fit, floor_per_sec: the memory floor,
 * both on the same stream). la: ours with the stream's ids announced ahead, or NULL. */
static void compare(unsigned n_requests, const Result *ours_p, const Result *la, const Result *ff_p,
                    double floor_per_sec, long rss_before, long rss_ours) {
    const Result ours = *ours_p, ff = *ff_p;
    print_result("einsora", &ours);
    if (la)
        print_result("einsora+la", la);
    print_result("first-fit", &ff);
    printf("einsora: %.0f decisions per CPU second (the run's CPU time, not wall clock)\n",
           ours.per_cpu_sec);
    printf("einsora: idle passthrough GPUs still waiting for a reset check at end: %zu\n",
           ours.reset_pending);
    printf("peak RSS: %ld MiB (stream and latency buffers %ld MiB before the run)\n",
           rss_ours / 1024, rss_before / 1024);
    for (size_t w = 0; w < ours.n_windows; w++)
        printf("einsora requests %7zu-%7zu: %8.0f decisions/s incl. %6zu releases (%8.0f "
               "submits+releases/s); %zu waiting at the end\n",
               w * WINDOW, MIN((w + 1) * WINDOW, (size_t)n_requests), ours.windows[w].per_sec,
               ours.windows[w].releases, ours.windows[w].ops_per_sec, ours.windows[w].waiting);
    printf("ratio einsora/first-fit: throughput %.2fx, p99 %.2fx, whole-free GPU nodes %.2fx\n",
           ours.per_sec / ff.per_sec, ours.p99_us / ff.p99_us,
           ff.whole_free_nodes ? (double)ours.whole_free_nodes / ff.whole_free_nodes : 0.0);
    if (la)
        printf("ratio einsora+la/einsora: throughput %.2fx, p99 %.2fx (lookahead: each id "
               "announced %d operations ahead)\n",
               la->per_sec / ours.per_sec, la->p99_us / ours.p99_us, SCHED_ANNOUNCE_AHEAD);
    printf("memory floor (id index, request and node records only, same stream) %.0f/s; "
           "ratio einsora/floor %.2fx\n",
           floor_per_sec, ours.per_sec / floor_per_sec);
}

static Sched *new_fleet(const Catalog *cat, unsigned *ret_gpus) {
    Sched *s = sched_new(cat);
    if (!s)
        exit(1);
    sched_set_walk_memos(s, !no_walk_memos);
    sched_set_on_placed(s, on_placed, NULL);
    build_fleet(s, ret_gpus);
    return s;
}

/* One run of ours over the stream on the fleet s, which it then checks and frees: the
 * decisions' digests in ret_digests; false when an invariant broke. */
static bool run_on_fleet(Sched *s, Op *ops, size_t n_ops, uint32_t *lat, bool lookahead,
                         Result *ret, uint64_t ret_digests[2]) {
    digest = placement_digest = FNV_BASIS;
    *ret = run_ours(s, ops, n_ops, lat, lookahead);
    ret_digests[0] = digest;
    ret_digests[1] = placement_digest;
    Error cerr = {0};
    bool ok = sched_check(s, &cerr) >= 0;
    if (!ok)
        printf("INVARIANT VIOLATED after the run%s: %s\n", lookahead ? " with lookahead" : "",
               cerr.message);
    sched_free(s);
    return ok;
}

static void usage(FILE *f) {
    fprintf(f, "usage: bench-place [--digest] [--no-walk-memos] [--ours-only] "
               "[--lookahead both|on|off] [REQUESTS]\n");
}

int main(int argc, char **argv) {
    unsigned n_requests = 1000000;
    for (int i = 1; i < argc; i++) {
        if (STREQ(argv[i], "--digest"))
            want_digest = true;
        else if (STREQ(argv[i], "--no-walk-memos"))
            no_walk_memos = true;
        else if (STREQ(argv[i], "--ours-only"))
            ours_only = true;
        else if (STREQ(argv[i], "--lookahead") && i + 1 < argc &&
                 (STREQ(argv[i + 1], "both") || STREQ(argv[i + 1], "on") ||
                  STREQ(argv[i + 1], "off"))) {
            i++;
            run_plain = !STREQ(argv[i], "on");
            run_lookahead = !STREQ(argv[i], "off");
        } else if (STREQ(argv[i], "--help") || STREQ(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] >= '1' && argv[i][0] <= '9')
            n_requests = (unsigned)strtoul(argv[i], NULL, 10);
        else {
            usage(stderr);
            return 2;
        }
    }
    const char *seed = getenv("EINSORA_BENCH_SEED");
    if (seed)
        rng = strtoull(seed, NULL, 10) | 1;
    Catalog *cat = NULL;
    Error err = {0};
    if (catalog_load_file(TEST_DATA "/catalog.yaml", NULL, &cat, &err) < 0) {
        fprintf(stderr, "bench-place: %s\n", err.message);
        return 1;
    }
    unsigned gpus = 0;
    uint64_t t0 = now_ns();
    Sched *s = new_fleet(cat, &gpus);
    printf("fleet: %zu nodes, %u GPUs (incl. Mac GPUs), built in %.2f s; RSS %ld MiB\n",
           sched_node_count(s), gpus, (now_ns() - t0) / 1e9, peak_rss_kb() / 1024);
    size_t n_ops;
    Op *ops = make_stream(n_requests, gpus, &n_ops);
    uint32_t *lat = calloc(n_requests, sizeof(uint32_t));
    printf("stream: %u requests, %zu releases\n", n_requests, n_ops - n_requests);
    long rss_before = peak_rss_kb();
    Result plain = {0}, la = {0}, ff = {0};
    double floor_per_sec = 0;
    uint64_t plain_digests[2], la_digests[2];
    bool ok = true;
    if (run_plain)
        ok &= run_on_fleet(s, ops, n_ops, lat, false, &plain, plain_digests);
    long rss_ours = peak_rss_kb();
    /* The baselines right after the first run, as before the lookahead run existed: a run's
     * rate depends on what ran before it in the process (first-fit's fell by half when it
     * came after two runs of ours). */
    if (!ours_only) {
        ff = run_first_fit(cat, ops, n_ops, lat);
        floor_per_sec = run_floor(ops, n_ops, n_requests);
    }
    if (run_lookahead)
        ok &= run_on_fleet(run_plain ? new_fleet(cat, &gpus) : s, ops, n_ops, lat, true, &la,
                           la_digests);
    /* The digests come from runs of their own, after the timed ones and not timed: the same
     * engine on the same stream from a fresh fleet decides the same, which is what a
     * difference between the two would show. */
    if (want_digest) {
        Result untimed;
        digesting = true;
        if (run_plain)
            ok &= run_on_fleet(new_fleet(cat, &gpus), ops, n_ops, lat, false, &untimed,
                               plain_digests);
        if (run_lookahead)
            ok &= run_on_fleet(new_fleet(cat, &gpus), ops, n_ops, lat, true, &untimed, la_digests);
        digesting = false;
    }
    const Result *first = run_plain ? &plain : &la;
    if (ours_only) { /* for profiling: the runs above and nothing else */
        if (run_plain)
            print_result("einsora", &plain);
        if (run_lookahead)
            print_result("einsora+la", &la);
    } else
        compare(n_requests, first, run_plain && run_lookahead ? &la : NULL, &ff, floor_per_sec,
                rss_before, rss_ours);
    if (want_digest) {
        const uint64_t *d = run_plain ? plain_digests : la_digests;
        printf("decision digest: %016llx (placements alone: %016llx)%s\n", (unsigned long long)d[0],
               (unsigned long long)d[1],
               run_plain && run_lookahead ? "; the same with lookahead" : "");
        if (run_plain && run_lookahead &&
            (plain_digests[0] != la_digests[0] || plain_digests[1] != la_digests[1])) {
            printf("DECISIONS DIFFER with lookahead: digest %016llx (placements alone: %016llx)\n",
                   (unsigned long long)la_digests[0], (unsigned long long)la_digests[1]);
            ok = false;
        }
    }
    free(lat);
    free(ops);
    catalog_free(cat);
    return ok ? 0 : 1;
}
