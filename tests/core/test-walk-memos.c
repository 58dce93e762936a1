/* test-walk-memos.c: what only makes the core faster changes no decision: the queue walks'
 * memos (WalkMemo: skip a walk that would pass the same waiters over again) and ids announced
 * ahead (sched_announce()). Two Scheds take the same seeded random operations (submit, some
 * with an older submit time, cancel and release, cordon, remove and re-add nodes, advance the
 * clock); one runs every walk in full (sched_set_walk_memos(false)), or the other is told of
 * ids ahead. Every answer and every later placement must be the same, and the memos are
 * checked against the FIFOs after every mutation (sched_check). The fleet mixes host and vfio
 * GPUs, VMs, lab machines, gangs, shares, fallbacks and trust changes. EINSORA_MEMO_OPS sets
 * the count. The memos of walks that stopped at their miss limit have tests of their own
 * (test-indexes.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "core-fixture.h"

TestSuite(walk_memos, .init = fx_setup, .fini = fx_teardown);

#define H100 "nvidia-h100-80gb"
#define RTX "nvidia-rtx-4090"
#define MAX_IDS 4096

static const char *const users[] = {"ops", "amy", "bob", "staff", "eve", "ann"};
static const char *const sites[] = {"dc", "dc2", "lab"};

/* Both Scheds: [0] the fixture's (memos, invariants checked), [1] without memos, or with them
 * while [0] is told of ids ahead. */
static Sched *both[2];
static bool announce;

/* Everything each Sched's queue placed, in order: FNV-1a over ids and placements. */
typedef struct Placed {
    uint64_t hash;
    size_t n;
} Placed;
static Placed placed[2];

static void hash_bytes(Placed *p, const void *data, size_t n) {
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++)
        p->hash = (p->hash ^ b[i]) * 0x100000001b3ull;
}

static void hash_decision(Placed *p, const char *id, const Decision *d) {
    hash_bytes(p, id, strlen(id) + 1);
    hash_bytes(p, &d->kind, sizeof(d->kind));
    if (d->kind != DECISION_PLACED)
        return;
    hash_bytes(p, d->placement.node, strlen(d->placement.node) + 1);
    hash_bytes(p, &d->placement.method, sizeof(d->placement.method));
    hash_bytes(p, &d->placement.fallback_index, sizeof(d->placement.fallback_index));
    hash_bytes(p, d->placement.devices, d->placement.n_devices * sizeof(unsigned));
}

static void on_placed(void *userdata, const char *id, const Decision *d) {
    Placed *p = userdata;
    hash_decision(p, id, d);
    p->n++;
}

static char ids[MAX_IDS][16];
static size_t n_ids;
static unsigned next_id;

/* Node k of 12: four of ops at each datacenter site (container or VM mode), four lab
 * machines of a user; eight GPUs, the first `host` of them bound to the host driver. */
static void add_node(unsigned k) {
    char name[16];
    snprintf(name, sizeof(name), "n%u", k);
    DeviceSpec devs[8];
    unsigned host = fx_pick(9);
    bool lab = k >= 8;
    for (unsigned i = 0; i < 8; i++)
        devs[i] = (DeviceSpec){.class_name = lab ? RTX : H100,
                               .binding = i < host ? BINDING_HOST : BINDING_VFIO,
                               .reset_verified = true};
    SchedLabel label = {SCHED_MODE_LABEL, fx_pick(3) ? "container" : "vm-passthrough"};
    NodeSpec spec = {.name = name,
                     .site = sites[k / 4],
                     .owner = lab ? users[1 + k % 4] : "ops",
                     .platform = PLATFORM_LINUX,
                     .labels = lab ? NULL : &label,
                     .n_labels = lab ? 0 : 1,
                     .kata = fx_pick(4) != 0,
                     .cpu_cores = 64,
                     .devices = devs,
                     .n_devices = 8};
    for (int i = 0; i < 2; i++) {
        Error err = {0};
        int r = sched_add_node(both[i], &spec, 0, &err);
        cr_assert(r == 0 || r == -EEXIST, "%s", err.message);
    }
}

/* Runs one call on both Scheds (as `s`, with an `err`) and requires the same return. */
#define BOTH(call)                                                                                 \
    do {                                                                                           \
        int r_[2];                                                                                 \
        for (int i_ = 0; i_ < 2; i_++) {                                                           \
            Sched *s = both[i_];                                                                   \
            Error err = {0};                                                                       \
            r_[i_] = (call);                                                                       \
            (void)err;                                                                             \
        }                                                                                          \
        cr_assert_eq(r_[0], r_[1], "op %u: %s returned %d and %d", op, #call, r_[0], r_[1]);       \
    } while (0)

static void submit(unsigned op, uint64_t now) {
    static const unsigned counts[] = {1, 1, 2, 4, 8, 8, 8};
    static const char *const fb[] = {RTX, "cpu"};
    char id[16];
    snprintf(id, sizeof(id), "q%u", next_id++);
    unsigned c = fx_pick(10), k = fx_pick(10);
    RequestSpec spec = {.id = id,
                        .user = users[fx_pick(ARRAY_SIZE(users))],
                        .kind = k < 2   ? WORKLOAD_VM
                                : k < 3 ? WORKLOAD_NOTEBOOK
                                        : WORKLOAD_CONTAINER,
                        .class_name = c < 7   ? H100
                                      : c < 9 ? RTX
                                              : "cpu",
                        .count = counts[fx_pick(ARRAY_SIZE(counts))],
                        .share = fx_pick(16) == 0,
                        .wait_for_nodes = fx_pick(10) == 0,
                        /* now and then an older submission, which goes ahead in its FIFO */
                        .submitted = fx_pick(8) == 0 && now > 5 ? now - 1 - fx_pick(5) : now};
    if (fx_pick(40) == 0) {
        spec.fallback = fb;
        spec.n_fallback = 1 + fx_pick(2);
        spec.wait_s = fx_pick(10);
    }
    Decision d[2];
    for (int i = 0; i < 2; i++) {
        Error err = {0};
        cr_assert_eq(sched_submit(both[i], &spec, now, &d[i], &err), 0, "op %u: %s", op,
                     err.message);
    }
    Placed a = {0}, b = {0};
    hash_decision(&a, id, &d[0]);
    hash_decision(&b, id, &d[1]);
    cr_assert_eq(a.hash, b.hash, "op %u: request %s decided differently: '%s' vs '%s'", op, id,
                 d[0].message, d[1].message);
    cr_assert_eq(d[0].queue_position, d[1].queue_position, "op %u", op);
    if (d[0].kind != DECISION_REFUSED && n_ids < MAX_IDS)
        snprintf(ids[n_ids++], sizeof(ids[0]), "%s", id);
}

static void release_one(unsigned op, uint64_t now) {
    if (!n_ids)
        return;
    size_t k = fx_pick((unsigned)n_ids);
    BOTH(sched_release(s, ids[k], now, &err));
    memcpy(ids[k], ids[--n_ids], sizeof(ids[0]));
}

static void node_op(unsigned op, uint64_t now) {
    char name[16];
    /* Every random choice before the calls: BOTH() evaluates its call once per Sched. */
    unsigned k = fx_pick(12), dev = fx_pick(8), what = fx_pick(6), a = fx_pick(2), b = fx_pick(3);
    snprintf(name, sizeof(name), "n%u", k);
    switch (what) {
    case 0:
        BOTH(sched_remove_node(s, name, &err));
        break;
    case 1:
        add_node(k);
        break;
    case 2:
        BOTH(sched_node_set_cordoned(s, name, a, now, &err));
        break;
    case 3:
        BOTH(sched_device_set_binding(s, name, dev, (Binding)a, now, &err));
        break;
    case 4:
        BOTH(sched_device_set_quarantine(s, name, dev, b == 0 ? "bad" : NULL, now, &err));
        break;
    default:
        BOTH(sched_device_set_cordoned(s, name, dev, b == 0, now, &err));
    }
}

/* Tell both[0] of ids ahead as a stream's caller would, and out of turn: one that the next
 * submit uses, one a later submit will, a waiting or placed one (which a release may or may not
 * pick), one gone or never there. */
static void announce_some(void) {
    char id[16];
    snprintf(id, sizeof(id), "q%u", next_id);
    sched_announce(both[0], id);
    snprintf(id, sizeof(id), "q%u", next_id + fx_pick(SCHED_ANNOUNCE_AHEAD));
    sched_announce(both[0], id);
    if (n_ids)
        sched_announce(both[0], ids[fx_pick((unsigned)n_ids)]);
    snprintf(id, sizeof(id), "q%u", fx_pick(next_id + 1));
    sched_announce(both[0], id);
}

/* both[0] is the fixture's Sched; both[1] set up by the caller. */
static void run_both(void) {
    const char *e = getenv("EINSORA_MEMO_OPS");
    unsigned ops = e ? (unsigned)strtoul(e, NULL, 10) : 15000;
    fx_seed(0x3e3a9b1c5d7f2461ull);
    both[0] = fx;
    sched_set_own_lists_min(both[1], 0); /* as the fixture's */
    for (int i = 0; i < 2; i++) {
        sched_set_on_placed(both[i], on_placed, &placed[i]);
        for (size_t k = 0; k < ARRAY_SIZE(sites); k++) {
            Error err = {0};
            cr_assert_eq(
                    sched_add_site(both[i], sites[k], k < 2 ? SITE_DATACENTER : SITE_LAB, &err), 0,
                    "%s", err.message);
        }
    }
    for (unsigned k = 0; k < 12; k++)
        add_node(k);
    uint64_t now = 0;
    size_t waiting_max = 0;
    for (unsigned op = 0; op < ops; op++) {
        if (announce)
            announce_some();
        unsigned what = fx_pick(100);
        if (what < 44)
            submit(op, now);
        else if (what < 80)
            release_one(op, now);
        else if (what < 86)
            node_op(op, now);
        else if (what < 90) {
            const char *site = sites[fx_pick(2)], *user = users[1 + fx_pick(5)];
            bool on = fx_pick(2);
            BOTH(sched_site_trust(s, site, user, on, &err));
        } else {
            now += 1 + fx_pick(3);
            BOTH(sched_tick(s, now));
        }
        cr_assert_eq(placed[0].n, placed[1].n, "op %u: the queue placed %zu and %zu", op,
                     placed[0].n, placed[1].n);
        cr_assert_eq(placed[0].hash, placed[1].hash,
                     "op %u: the queue placed other requests or elsewhere", op);
        cr_assert_eq(sched_waiting_count(both[0]), sched_waiting_count(both[1]), "op %u", op);
        waiting_max = MAX(waiting_max, sched_waiting_count(both[0]));
    }
    Error err = {0};
    cr_assert_eq(sched_check(both[0], &err), 0, "%s", err.message);
    /* The run made FIFOs longer than a walk's miss limit, and the queue placed waiters. */
    cr_assert_gt(waiting_max, 200, "only %zu waiters at most", waiting_max);
    cr_assert_gt(placed[0].n, ops / 50, "the queue placed only %zu", placed[0].n);
    sched_free(both[1]);
}

Test(walk_memos, r13_queue_walk_memos_change_no_decision, .timeout = 600) {
    both[1] = sched_new(fx_cat);
    cr_assert_not_null(both[1]);
    sched_set_walk_memos(both[1], false);
    run_both();
}

Test(walk_memos, r15_ids_announced_ahead_change_no_decision, .timeout = 600) {
    both[1] = sched_new(fx_cat);
    cr_assert_not_null(both[1]);
    announce = true;
    run_both();
}

/* An announcement is only a hint: none at all, an empty or over-long id, ids announced on an
 * empty Sched and then many more times than the lookahead keeps, the same id over and over,
 * one released in between: nothing changes, and the operations that follow work as ever. */
Test(walk_memos, r16_any_announcement_leaves_every_request_as_it_was) {
    char long_id[SCHED_ID_MAX * 2];
    memset(long_id, 'x', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    sched_announce(fx, NULL);
    sched_announce(fx, "");
    sched_announce(fx, long_id);
    sched_announce(fx, "a"); /* no request yet: the id index is still unallocated */
    fx_site("lab", SITE_LAB);
    fx_gpu_node(.name = "n1", .site = "lab", .owner = "amy", .cls = RTX, .gpus = 2);
    Decision d = fx_req(.id = "a", .user = "amy", .kind = WORKLOAD_CONTAINER, .class_name = RTX,
                        .count = 2);
    cr_assert_eq(d.kind, DECISION_PLACED, "%s", d.message);
    d = fx_req(.id = "b", .user = "amy", .kind = WORKLOAD_CONTAINER, .class_name = RTX, .count = 1);
    cr_assert_eq(d.kind, DECISION_WAITING, "%s", d.message);
    for (unsigned i = 0; i < 5 * SCHED_ANNOUNCE_AHEAD; i++)
        sched_announce(fx, i % 3 == 0 ? "a" : i % 3 == 1 ? "b" : long_id);
    cr_assert_eq(sched_request_count(fx), 2);
    cr_assert_eq(sched_waiting_count(fx), 1);
    fx_release("a"); /* b takes its place */
    for (unsigned i = 0; i < 2 * SCHED_ANNOUNCE_AHEAD; i++)
        sched_announce(fx, "a"); /* gone: its stale index entries are never read */
    Placement p;
    cr_assert_eq(sched_request_placement(fx, "b", &p), 0);
    cr_assert_eq(sched_request_placement(fx, "a", &p), -ENOENT);
    Error err = {0};
    cr_assert_eq(sched_check(fx, &err), 0, "%s", err.message);
}
