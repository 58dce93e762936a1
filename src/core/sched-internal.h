/* sched-internal.h: the Sched's data layout, shared by the core's placement modules only.
 *
 * Indices, not pointers: nodes, requests and users live in growable arrays and refer to each
 * other by uint32 index (NIL = none), so growing an array never leaves a dangling pointer.
 * Free-device indexes (whole-GPU pools bucketed by free count, MIG lists by slot layout,
 * open time slices, cpu buckets) are intrusive doubly-linked lists kept in step with every
 * change by node_refresh(); sched_check() recomputes them from scratch and compares. */
#pragma once

#include <stddef.h>
#include <string.h>

#include "core/sched.h"
#include "core/strmap.h"

#define NIL UINT32_MAX
#define DEV_SHIFT 4 /* a device's global id is node << DEV_SHIFT | index */
#define CPU_BUCKETS 65
#define CHOICE_CPU (-2)    /* a request for cpu */
#define CHOICE_MEMORY (-3) /* a request by memory need: smallest class that fits */
/* An alternative a rule keeps from ever taking its request (R13, R18): never tried. */
#define CHOICE_NEVER (-4)
/* How many nodes of a class a reservation looks at when every one is full: a bound, so a
 * gang's reservation on a busy fleet costs O(1) too. */
#define RESERVE_FULL_SCAN 128

typedef struct Link {
    uint32_t prev, next;
} Link;

/* Per first-choice FIFO key: its waiting GPUs, those of its waiting gangs, and the nodes its
 * gangs reserve; they cap a class's gang reservations at the gangs' share (queue.c). */
typedef struct GangShare {
    uint32_t wait_gpus, gang_gpus, reserved;
} GangShare;

/* How many waiters in a row that do not fit a walk looks at in one FIFO before it stops:
 * attempts there are O(1), but a long queue of gangs must not make a release O(queue). The
 * rest are reconsidered at the next change of that node. */
#define WALK_MISS_LIMIT 64

/* Which waiters of a FIFO a memo's walk met: every one (`full` false: it reached the FIFO's
 * end), or the first WALK_MISS_LIMIT, the last of them submitted at `last` (the FIFO is in
 * submit order). */
typedef struct WalkReach {
    bool full;
    uint64_t last;
} WalkReach;

/* Per first-choice FIFO key: what the last queue walk of it that tried nobody learnt, so that
 * the next walks on nodes with no more room skip it (queue.c: walk_fifo_list()). After a
 * one-GPU release most walks meet only gangs in a FIFO's first WALK_MISS_LIMIT waiters, pass
 * them all and stop; a walk with no more room would pass the same waiters while they stay. */
typedef struct WalkMemo {
    /* The room of the walk that passed everyone it met over for their count (0: no memo). */
    uint32_t room;
    /* Set when that walk also passed some over because the binding they would use on its node
     * had too few free GPUs (queue.c: surely_misses()), none of them a gang still to reserve
     * a node: the memo then holds only for a node where each of those verdicts stands, one of
     * the same site and owner (a waiter's binding follows its relation to the node) with no
     * more free GPUs per binding than `free`. After a one-GPU release most walks pass a
     * stranger's containers (they need a vfio-bound GPU) and VMs that way, and without it
     * would pass the same waiters again at every release on such a node. */
    bool by_binding;
    uint8_t free[2]; /* free GPUs of the class per binding on the memo's node (by_binding) */
    uint32_t site, owner;
    /* The waiters it met. A waiter that joins where a walk meets it (anywhere, when the
     * memo's walk reached the FIFO's end; ahead of the last one met, when it stopped at its
     * miss limit) clears the memo, unless the walk met every waiter and would have passed
     * this one too. One that leaves from among the waiters of a walk that stopped at its
     * miss limit brings one more waiter within a walk's reach, the one after the last met:
     * the memo stands, reaching it, if a walk would pass it over too, and is cleared
     * otherwise; a waiter's fallbacks opening clears it. Waiters joining or leaving behind
     * that limit leave the memo in force: most of a long FIFO's traffic is there. */
    WalkReach reach;
    /* The last waiter the walk met, read only while reach.full. reach.last is its submit time,
     * kept as a copy: every join and leave of the FIFO tests the reach, and reading it from
     * this waiter's Req would read a line (the third) that nothing else there needs. */
    uint32_t last_met;
} WalkMemo;

typedef struct Site {
    char *name;
    SiteKind kind;
    uint8_t *trusted; /* indexed by user id */
    size_t n_trusted_cap;
    /* Whole-GPU pools of this site: index cls * 2 + binding; heads[pool][free]. Per site,
     * because trust is per site: a stranger's search skips the host pools of sites that do
     * not trust them instead of walking past every node there. */
    uint32_t (*pool_heads)[SCHED_NODE_MAX_DEVICES + 1];
    /* Per pool and bucket: the listed nodes no gang has reserved, so that a gang looking for
     * a node to reserve skips the buckets where every node is taken instead of walking them. */
    uint32_t (*pool_unreserved)[SCHED_NODE_MAX_DEVICES + 1];
    /* Per pool and bucket: the listed nodes no gang of the pool's class holds (PoolLink.held
     * clear), so that a search for a request newer than every reserving gang skips a bucket
     * where every node is closed to it instead of walking past each one. */
    uint32_t (*pool_open)[SCHED_NODE_MAX_DEVICES + 1];
    /* Per pool: bit k set while bucket k lists a node, so that a search finds the next
     * non-empty bucket with one bit scan instead of reading every head. */
    uint32_t *pool_buckets;
    /* Per pool and GPU total: this site's schedulable, unreserved nodes among the first
     * RESERVE_FULL_SCAN of the class's list, where a gang on a full fleet looks for a node to
     * reserve; when none could hold it, the look is skipped. */
    uint32_t (*window_free)[SCHED_NODE_MAX_DEVICES + 1];
    /* Per pool: bit t set while window_free[pool][t] is not zero, so that a gang asks "is
     * there a node of at least its size" with one shift instead of reading every count. */
    uint32_t *window_bits;
} Site;

/* A node a user owns, with what the loops over a user's machines test first: a lab user's
 * own machine is looked at by every search, reservation and diagnosis of theirs, mostly for a
 * class it does not have, and its own lines are cache misses that then find nothing. */
typedef struct OwnedNode {
    uint32_t node, site;
    uint64_t classes; /* bit c: a device of the node is of class c (c < 64; fixed at its add) */
} OwnedNode;

/* Whether an owned node may have a device of class c (always true for c past the mask). */
static inline bool owned_may_have(const OwnedNode *o, int c) {
    return c < 0 || c >= 64 || (o->classes >> c & 1);
}

typedef struct User {
    char *name;
    OwnedNode *owned; /* nodes this user owns (for Apple and owner-only classes) */
    size_t n_owned, cap_owned;
    uint32_t ts_head; /* this user's time-sliced GPUs with room (R2e: only they may join) */
    /* The whole-GPU pools of the nodes this user owns, by free GPUs as a site's pools
     * (Site.pool_buckets): per pool, SCHED_NODE_MAX_DEVICES + 1 rows of own_words words, a bit
     * per position in `owned` set in the row of that node's free count. A search for an
     * owner's request in a site that does not trust them reads every node the owner has
     * otherwise: a cache miss per node and per decision, for the owner of a whole fleet. By
     * position, so that the first node of a row that fits is the one the scan of `owned` in
     * order picks, without a look at the rest of the row. Built by the first such search of a
     * user who owns more than Sched.own_lists_min nodes (user_own_lists()), NULL before and
     * after own_lists_drop() (`owned` outgrew the rows or was reordered): most owners never
     * ask (an operator's account that owns a datacenter), or own a machine or two, and keeping
     * rows for them would cost every placement and release on their nodes. */
    uint64_t **own_bits;                               /* per pool; NULL: none listed yet */
    uint32_t (*own_count)[SCHED_NODE_MAX_DEVICES + 1]; /* per pool and row: bits set */
    uint32_t *own_buckets; /* per pool: bit f when row f has a node; NULL: no rows built */
    size_t own_words;
} User;

/* Owners of more nodes than this get pool rows (User.own_bits) once they search them
 * (Sched.own_lists_min, sched_set_own_lists_min()). */
#define OWN_LISTS_MIN 16

/* How a device is used now; decides who may join it. */
typedef enum DevUse {
    USE_NONE,
    USE_EXCLUSIVE, /* whole GPU: passthrough or container */
    USE_TIME_SLICE,
    USE_MIG,
    USE_APPLE,
} DevUse;

#define DEV_INLINE_ALLOCS 2

/* 64 bytes, and the devices of a Node start on a cache line (asserted below), so that every
 * device read by a placement, its end or a refresh is one line, not one or two. Hence the
 * one-byte binding and use. */
typedef struct Device {
    char *address;
    char *quarantine_reason;
    /* The requests placed on it (dev_allocs()): inline up to DEV_INLINE_ALLOCS, since a whole
     * GPU holds one, so that a placement and its end touch no separate allocation; beyond that
     * on the heap (cap_allocs > 0), kept once grown. */
    union {
        uint32_t inl[DEV_INLINE_ALLOCS];
        uint32_t *heap;
    } al;
    int cls; /* whole-card class, -1 unclassified */
    unsigned memory_gb;
    /* Membership of a MIG layout list or the open time-slice list of its class. */
    Link link;
    uint32_t listed_user;          /* the time-slice list's user */
    uint16_t n_allocs, cap_allocs; /* cap_allocs 0: inline */
    uint8_t binding;               /* Binding */
    /* mig_reported: MIG mode as the node reports it. mig_enabled: the GPU serves MIG slices,
     * not whole-GPU work -- only while its host driver holds it: a GPU on vfio-pci goes whole
     * to a VM or a Kata container (which may use MIG inside), so MIG mode on it counts for
     * nothing here (device_sync_mig()). */
    bool mig_reported, mig_enabled, reset_verified, cordoned, quarantined;
    uint8_t mig_layout;   /* slots used: this device's slices, and mig_reserved */
    uint8_t mig_reserved; /* slots of MIG instances in use by processes Einsora did not start */
    uint8_t use;          /* DevUse */
    int8_t listed;        /* 0 none, 1 MIG list, 2 time-slice list */
    uint8_t listed_layout;
    /* How the device counts in its node's pool tallies (node_refresh_devices): its pool's
     * slot and 0 not counted, 1 free, 2 blocked, 3 blocked only by its reset check. */
    uint8_t tally_pool, tally;
    bool mig_blocked; /* counted in class_mig_blocked: MIG on, taking no new work */
    /* Bit s: MIG shape s may be offered here, as NVML reports the GPU's profiles (R2c); all
     * set when the agent did not report them. */
    uint8_t mig_offered;
} __attribute__((aligned(64))) Device;

_Static_assert(sizeof(Device) == 64, "a device is one cache line");

/* Whether device d may hold a slice of MIG shape `shape` (R2c: a profile NVML reports). */
static inline bool device_offers_mig(const Device *d, MigShape shape) {
    return (d->mig_offered >> shape) & 1u;
}

/* After its reported MIG mode or its binding changed: whether the device serves MIG slices. */
static inline void device_sync_mig(Device *d) {
    d->mig_enabled = d->mig_reported && d->binding == BINDING_HOST;
}

/* A node's place in one whole-GPU pool (class x binding), bucketed by free devices. */
typedef struct PoolLink {
    int pool;
    uint8_t free;       /* 0: not listed */
    uint8_t blocked;    /* idle GPUs that take no work (cordoned, quarantined, reset pending) */
    uint8_t reset;      /* of those, the ones only waiting for their reset check (R9); lets a
                         * diagnosis read a node's counts here instead of walking its devices */
    uint8_t total;      /* GPUs of the pool's class and binding outside MIG mode, busy or not: the
                         * most it could ever hold (node_refresh() sets it; a reservation reads it) */
    bool in_window;     /* the node is among the first RESERVE_FULL_SCAN of its class's list */
    bool held;          /* a waiting gang of this pool's class reserved the node (a copy of
                         * Node.reserved_*, in the record a pool walk reads anyway, so that a
                         * search passing the node need not read the node's own line) */
    uint16_t free_mask; /* the free GPUs counted in `free` (bit i: device i), so that a
                         * placement picks them without reading every device's line */
    uint32_t class_pos; /* the node's position in its class's list (and cells) */
    Link link;
} PoolLink;

/* What a waiting request's diagnosis reads of one node for one whole-GPU class: the idle
 * GPUs per binding as the node's pools count them, and who the node is. Kept beside the
 * class's node list (Sched.class_cells, same positions) by node_refresh(), so that the scan
 * of up to 128 nodes per waiting decision reads small adjacent records, not the nodes. */
typedef struct DiagCell {
    uint8_t free[_BINDING_MAX], reset[_BINDING_MAX], blocked[_BINDING_MAX];
    /* Every GPU of the class per binding, busy or not (PoolLink.total), and those in MIG mode:
     * a node short of GPUs in the binding a request needs waits for a mode switch there, not
     * for capacity, however many of them are taken (R18). */
    uint8_t total[_BINDING_MAX], mig;
    bool kata;
    uint32_t owner, site;
} DiagCell;

/* Node names shorter than this are also kept inside the Node (Node.name_inline). */
#define NODE_NAME_INLINE 32

/* Field order matters: a search reads the first 64 bytes of every node it looks at and the
 * pool links right after them, a placement and its end those and the devices they change;
 * the rest (labels, Mac and time-slice settings) is read rarely. Aligned to a cache line
 * (Sched.nodes is allocated so) to keep each group on as few lines as possible. */
typedef struct Node {
    /* The reserving gang's arrival seq and class (while reserved_by is set), copied here so
     * that a search passing a reserved node need not read the gang's request. */
    uint64_t reserved_seq;
    uint32_t site;
    Platform platform;
    uint32_t owner;
    unsigned n_devices;
    unsigned n_pools;
    unsigned cpu_cores, cpu_used;
    Link cpu_link;
    int cpu_bucket;       /* -1: not listed */
    uint32_t reserved_by; /* the waiting gang that reserved this node (queue.c), or NIL */
    int reserved_choice;
    bool alive;
    bool kata, mig_in_kata, cordoned, unreachable;
    bool window_counted; /* counted in its site's window_free (schedulable, unreserved) */
    /* End of the first cache line. */
    PoolLink pools[SCHED_NODE_MAX_DEVICES];
    /* The distinct classes of its devices in device order (node_device_classes()), for the
     * queue walk after every release, which would otherwise read every device's line. */
    uint8_t n_dev_classes;
    /* Bit i: device i is time-sliced (use USE_TIME_SLICE), so that a queue walk asking whether
     * a node with no free GPU of a class may still take a time slice (queue.c: node_room())
     * reads this line, which it reads for dev_classes anyway, instead of every device's. */
    uint16_t ts_devices;
    int dev_classes[SCHED_NODE_MAX_DEVICES];
    unsigned n_allocs; /* requests placed on this node */
    uint8_t name_len;  /* strlen(name) (< SCHED_ID_MAX): a decision's sentence copies the name */
    /* A copy of `name` when it is shorter than NODE_NAME_INLINE (node_name()), on the line
     * of n_allocs, which every placement and its end write: a placed decision names its node,
     * and reading the separate allocation of `name` there was a cache miss of its own. */
    char name_inline[NODE_NAME_INLINE];
    NodeMode mode;
    unsigned ts_replicas;
    /* Written by every placement and its end, so on the line of n_allocs too. */
    unsigned apple_used_gb, macos_vms;
    unsigned apple_usable_gb, apple_unified_gb;
    char *name; /* owned; the key of Sched.node_map */
    char **label_keys, **label_values;
    size_t n_labels;
    bool gpus_counted; /* its pools' totals are in Sched.pool_gpus (while alive) */
    Device devices[SCHED_NODE_MAX_DEVICES];
} __attribute__((aligned(64))) Node;

_Static_assert(offsetof(Node, devices) % 64 == 0, "each device of a node is one cache line");
_Static_assert(SCHED_NODE_MAX_DEVICES <= 16, "a node's device masks are 16 bits");
_Static_assert(offsetof(Node, n_allocs) / 64 ==
                               (offsetof(Node, name_inline) + NODE_NAME_INLINE - 1) / 64 &&
                       offsetof(Node, n_allocs) / 64 == offsetof(Node, macos_vms) / 64,
               "what a placement writes of a node past its pools, and the inline name a placed "
               "decision reads, share one line");

/* The node's name, from the line a placement has just written when it is short. Valid until
 * the next mutation of the Sched (the nodes array may move). */
static inline const char *node_name(const Node *n) {
    return n->name_len < NODE_NAME_INLINE ? n->name_inline : n->name;
}
_Static_assert(offsetof(Node, window_counted) < 64,
               "the fields every search reads of a node fit one cache line");

/* Ids shorter than this live in the Req itself, which a lookup reads anyway, so that a
 * lookup touches no other memory and a request costs no allocation for its id (the server's
 * ids are decimal numbers of at most 20 digits). */
#define REQ_ID_INLINE 24

/* Field order matters: the first 64 bytes hold what an id lookup and a queue walk's skip test
 * read (a walk passes up to 64 waiters of a FIFO per release, and a release finds its request
 * by id), so that each of those touches one cache line of the request, not two or three.
 * Aligned to a cache line (Sched.reqs is allocated so), or every other request's first 64
 * bytes would straddle two lines. */
typedef struct Req {
    union {
        char inline_id[REQ_ID_INLINE]; /* id_len < REQ_ID_INLINE */
        char *heap_id; /* else: owned once registered, borrowed from the spec before */
    } idb;
    uint8_t id_len; /* strlen of the id (< SCHED_ID_MAX) */
    bool used;
    bool placed;
    bool expired; /* the first choice's wait ran out: alternatives count (R13) */
    bool share;
    bool wait_for_nodes; /* R18: keep waiting even when no node could ever run it */
    uint32_t id_hash;    /* strmap_hash(id): hashed once, when submitted */
    uint32_t user;
    WorkloadKind kind;
    unsigned count;
    Link cq;                /* the FIFO of its first choice (class, cpu or memory need) */
    int choice;             /* class index, CHOICE_CPU or CHOICE_MEMORY */
    uint32_t reserved_node; /* a waiting gang's reserved node, or NIL */
    /* End of the first cache line. */
    /* Placement: place_find() writes node .. mem, and attempt() copies exactly the range
     * [node, fb_index) between a Req and its scratch, so keep these fields together. They
     * and `q` (a dropped request's free-list link) share the second line, so that a release
     * (lookup, undo, drop) touches two lines of the request, not four. */
    uint32_t node;
    int pcls;
    Method method;
    ContainerRuntime crt;
    EndpointRuntime ert;
    uint8_t n_dev;
    uint8_t devs[SCHED_NODE_MAX_DEVICES];
    uint8_t mig_start, mig_slots;
    unsigned cores, mem;
    int fb_index;
    Link q; /* the global FIFO */
    /* End of the second cache line. */
    GuestOs guest;
    unsigned memory_gb;
    EndpointRuntime runtime;
    int fb[SCHED_MAX_FALLBACKS];
    unsigned n_fb;
    uint64_t submitted, deadline, seq;
    Link xq; /* the FIFO of requests whose fallbacks are open (R13) */
    Link dq; /* waiting requests whose fallback deadline is still ahead */
    int qkey;
    bool in_xq, in_dq;
    bool gguf; /* an endpoint's model is GGUF weights (R14: llama.cpp on a Mac, not MLX) */
    SchedReason reason;
    const char *fb_names[SCHED_MAX_FALLBACKS];
} __attribute__((aligned(64))) Req;

/* The queue walks' skip test and the id lookup read only the first line (see above). */
_Static_assert(offsetof(Req, reserved_node) + sizeof(uint32_t) <= 64,
               "the hot fields of a Req fit one cache line");
/* A release reads and writes only the first two (see above). */
_Static_assert(offsetof(Req, node) == 64 && offsetof(Req, q) + sizeof(Link) <= 128,
               "a placement and the free-list link fit the second cache line of a Req");

/* For a helper whose only effect is __builtin_prefetch(): GCC judges such a function pure (to
 * it a prefetch has no side effect) and deletes a call whose result is unused unless the call
 * was inlined first, which a static function with a loop of them is not (GCC 12, -O2/-O3:
 * lookahead.c's stages vanished from the binary without this). */
#define PREFETCHER static inline __attribute__((always_inline))

static inline const char *req_id(const Req *r) {
    return r->id_len < REQ_ID_INLINE ? r->idb.inline_id : r->idb.heap_id;
}

/* The request-id index (reqmap.c): open addressing over {hash, request index} slots, compared
 * against the id kept in the Req. Eight bytes a slot, and no pointer to chase to a separately
 * allocated key. */
typedef struct ReqMapSlot {
    uint32_t hash, ri; /* ri NIL: empty */
} ReqMapSlot;

typedef struct ReqMap {
    ReqMapSlot *slots;
    size_t n, cap; /* cap is 0 or a power of two */
} ReqMap;

/* lookahead.c: the ids announced last (sched_announce()), by announcement number mod the ring
 * size: each id's hash, then the request its slot named when that was looked at (NIL: none,
 * or not yet). */
#define LOOKAHEAD_RING 16
typedef struct Lookahead {
    uint32_t hash[LOOKAHEAD_RING];
    uint32_t ri[LOOKAHEAD_RING];
    uint32_t n; /* announcements so far (wraps) */
} Lookahead;

typedef struct MigPool {
    uint32_t heads[256]; /* devices (global id) by layout */
} MigPool;

/* Preference order of (layout, start) pairs for one MIG shape. */
typedef struct MigChoice {
    uint8_t layout, start;
} MigChoice;

struct Sched {
    const Catalog *cat;
    bool check;
    unsigned own_lists_min; /* owners of more nodes get pool rows (User.own_bits) */
    bool no_walk_memos;     /* sched_set_walk_memos(false): every walk in full */
    /* queue.c: nodes whose gang reservation ended because the gang was placed elsewhere (or
     * on an alternative): the waiters it held back are offered the node once the walk or tick
     * that placed the gang is done. Past UNHELD_MAX, every node is walked. */
#define UNHELD_MAX 16
    uint32_t unheld[UNHELD_MAX];
    unsigned n_unheld;
    bool unheld_overflow;
    SchedPlacedFn on_placed;
    void *on_placed_data;

    Site *sites;
    size_t n_sites, cap_sites;
    StrMap site_map;

    User *users;
    size_t n_users, cap_users;
    StrMap user_map;

    Node *nodes;
    size_t n_nodes, cap_nodes; /* slots, including dead ones */
    /* Per node slot: its index in its owner's `owned` (the order those searches break ties in). */
    uint32_t *owned_pos;
    uint32_t *order; /* live nodes in insertion order */
    size_t n_order;
    uint32_t free_node; /* head of dead slots (reuse), chained through cpu_link.next */
    StrMap node_map;

    Req *reqs;      /* aligned to a cache line inside reqs_raw (reqs_grow()) */
    void *reqs_raw; /* the allocation */
    size_t n_reqs, cap_reqs;
    uint32_t free_req;
    size_t n_live_reqs;
    ReqMap req_map;
    Lookahead ahead;
    uint64_t next_seq;

    /* Waiting queue: FIFO by (submitted, seq). */
    uint32_t q_head, q_tail;
    size_t n_waiting;

    /* Per first choice FIFOs: index class, then CPU (n_classes), then memory (n_classes+1). */
    uint32_t *cq_head, *cq_tail;
    uint32_t xq_head, xq_tail;
    uint32_t dq_head, dq_tail;
    uint64_t min_deadline;     /* no fallback deadline before this among waiting requests */
    uint64_t units_per_second; /* of every `now` and `submitted` (1: seconds, 1000: ms) */
    /* feasible.c: per card class (then cpu at n_classes) the most any node could ever hold,
     * recomputed lazily when fleet_gen moved (a node joined, left, or changed capabilities). */
    uint64_t fleet_gen, feas_gen;
    struct FeasCap *feas;
    MigPool *mig; /* per class (only card classes with MIG profiles use theirs) */
    uint16_t (*mig_rank)[256][MIG_SLOTS]; /* per shape: position of (layout, start) in mig_pref */
    int **slices_of;                      /* per card class: its MIG slice classes, -1 terminated */
    uint32_t cpu_heads[CPU_BUCKETS];
    int cpu_class;  /* the catalog's cpu class or -1 */
    int *by_memory; /* non-cpu, non-MIG-slice... classes sorted by memory, for memory needs */
    size_t n_by_memory;
    MigChoice *mig_pref[_MIG_SHAPE_MAX];
    size_t n_mig_pref[_MIG_SHAPE_MAX];
    /* Per shape and slot layout: mig_count_placeable() and the starts mig_can_place() allows
     * (bit per start), precomputed because both sit in the queue walks' inner loops. */
    uint8_t mig_fits[_MIG_SHAPE_MAX][256];
    uint8_t mig_starts[_MIG_SHAPE_MAX][256];
    /* Per class: nodes that have it, and idle GPUs that take no work; they let a waiting
     * request's reason be found without a scan in the common case. */
    StrMap class_map;       /* class name -> index (the catalog's own lookup is a linear scan) */
    size_t *class_name_len; /* per class: strlen of its name, for decisions' sentences */
    uint32_t *class_nodes;
    uint32_t *class_blocked;
    uint32_t *class_mig_blocked; /* per card class: MIG-on GPUs cordoned, quarantined or off */
    /* Per pool (class * 2 + binding): the GPUs of live nodes outside MIG mode, busy or not. A
     * class with none in one binding leaves a waiting request's reason to a look at the nodes,
     * since "every unit is taken" would hide that the mode is what keeps it (R18). */
    uint32_t *pool_gpus;
    uint32_t **class_list;  /* per card class: the nodes that have it */
    DiagCell **class_cells; /* per card class: one cell per node of class_list, same order */
    uint32_t *class_list_cap;
    /* Queue positions: a Fenwick tree over arrival seq of the waiting requests. */
    uint32_t *fen;
    size_t fen_size; /* a power of two; seqs are in [seq_base, seq_base + fen_size) */
    uint64_t seq_base;
    GangShare *gang_share; /* per FIFO key, like cq_head */
    WalkMemo *walk_memo;   /* per FIFO key, like cq_head */
    /* No reservation was ever made by a request of a later arrival seq than this, so that a
     * search for a newer request knows every held node is closed to it (reserved_against())
     * from PoolLink.held alone. Only grows: a bound, not the exact maximum. */
    uint64_t held_seq_max;
};

static inline uint32_t *dev_allocs(Device *d) {
    return d->cap_allocs ? d->al.heap : d->al.inl;
}
static inline const uint32_t *dev_allocs_const(const Device *d) {
    return d->cap_allocs ? d->al.heap : d->al.inl;
}
static inline Device *dev_of(Sched *s, uint32_t gid) {
    return &s->nodes[gid >> DEV_SHIFT].devices[gid & ((1u << DEV_SHIFT) - 1)];
}
static inline const GpuClass *cls_of(const Sched *s, int c) {
    return c >= 0 ? &s->cat->classes[c] : NULL;
}

/* inventory.c */
int sched_user_intern(Sched *s, const char *name, uint32_t *ret);
/* The same with the name's strmap_hash() known (a submission measures the name anyway). */
int sched_user_intern_hashed(Sched *s, const char *name, uint32_t hash, uint32_t *ret);
int sched_user_lookup(const Sched *s, const char *name); /* -1 when unknown */
static inline bool site_trusts(const Site *st, uint32_t ui) {
    return ui < st->n_trusted_cap && st->trusted[ui];
}
/* The non-empty buckets of a pool's bit mask from bucket `from` up (bit k: bucket k). */
static inline uint32_t buckets_from(uint32_t buckets, unsigned from) {
    return from <= SCHED_NODE_MAX_DEVICES ? buckets >> from << from : 0;
}
static inline uint32_t pool_buckets_from(const Site *st, int pool, unsigned from) {
    return buckets_from(st->pool_buckets[pool], from);
}
/* The same for the nodes user u owns, when u has its rows (User.own_bits). */
static inline uint32_t own_buckets_from(const User *u, int pool, unsigned from) {
    return buckets_from(u->own_buckets[pool], from);
}
/* Build user ui's pool rows (User.own_bits) if it has none yet; -ENOMEM. */
int user_own_lists(Sched *s, uint32_t ui);
/* Free them (a search scans `owned` until they are built again). */
void own_lists_drop(Sched *s, User *u);
/* File (or take out) node ni's pool pl in its owner u's rows by free count (u has rows). */
void own_rows_add(Sched *s, User *u, const PoolLink *pl, uint32_t ni);
void own_rows_del(Sched *s, User *u, const PoolLink *pl, uint32_t ni);
/* Add node ni to the end of user ui's `owned` (-ENOMEM), or take it out (the last one takes
 * its place). */
int user_own(Sched *s, uint32_t ui, uint32_t ni);
void user_disown(Sched *s, uint32_t ui, uint32_t ni);
/* A user, site or node name: 1 to SCHED_ID_MAX - 1 characters. */
static inline bool sched_name_ok(const char *name) {
    return name && *name && strlen(name) < SCHED_ID_MAX;
}
/* A node's pool link id (the lists of Site.pool_heads): node << POOL_SHIFT | the pool's slot
 * in Node.pools. */
#define POOL_SHIFT 5
/* Whether a class may be used at a site by a user of this relation (R10 owner-only, R2
 * internal-only classes of a datacenter). */
static inline bool class_access_at(const Sched *s, uint32_t site, const GpuClass *g, Relation rel) {
    if (g->owner_only && rel != RELATION_OWNER)
        return false;
    return !(g->internal_only && rel == RELATION_STRANGER &&
             s->sites[site].kind == SITE_DATACENTER);
}
/* A node's record of a pool (class * 2 + binding), or NULL when it has none. */
static inline const PoolLink *pool_of(const Node *n, int pool) {
    for (unsigned k = 0; k < n->n_pools; k++)
        if (n->pools[k].pool == pool)
            return &n->pools[k];
    return NULL;
}
/* Free whole GPUs of a node's pool; 0 when it has none. */
static inline unsigned pool_free_of(const Node *n, int pool) {
    const PoolLink *pl = pool_of(n, pool);
    return pl ? pl->free : 0;
}
/* Inline: asked for every node a search or a diagnosis looks at. */
static inline Relation relation_at(const Sched *s, uint32_t owner, uint32_t site, uint32_t user) {
    if (owner == user)
        return RELATION_OWNER;
    return site_trusts(&s->sites[site], user) ? RELATION_TRUSTED : RELATION_STRANGER;
}
static inline Relation relation_of(const Sched *s, const Node *n, uint32_t user) {
    return relation_at(s, n->owner, n->site, user);
}
/* Whether waiting request r surely misses a node of this owner and site with these free
 * GPUs of its class per binding: it would not take a time slice there, and the binding it
 * would use (vfio for a VM or a stranger's work, R2) has fewer free GPUs than it needs. */
static inline bool binding_misses(const Sched *s, const Req *r, uint32_t owner, uint32_t site,
                                  unsigned host_free, unsigned vfio_free) {
    bool vm = r->kind == WORKLOAD_VM;
    if (r->expired || (r->share && !vm && r->count == 1))
        return false;
    bool vfio = vm || relation_at(s, owner, site, r->user) == RELATION_STRANGER;
    return (vfio ? vfio_free : host_free) < r->count;
}
/* A waiting gang that holds no node yet: a walk that passes it over tries to reserve one. */
static inline bool gang_to_reserve(const Req *r) {
    return r->count >= 2 && r->choice >= 0 && r->reserved_node == NIL;
}
/* Whether a walk with memo m's room (on m's node, for a memo by binding) passes waiter r
 * over: for its count, or for the binding it would use there (a gang only once it holds a
 * node). Every waiter a memo's walk met passed so; its memo holds while that stays true. */
static inline bool walk_memo_passes(const Sched *s, const WalkMemo *m, const Req *r) {
    return (r->count > m->room && !r->expired) ||
           (m->by_binding && !gang_to_reserve(r) &&
            binding_misses(s, r, m->owner, m->site, m->free[0], m->free[1]));
}
/* Forget every queue walk memo (WalkMemo): what their verdicts rest on changed (a site's
 * trust, a gang's reservation gone with its node). */
static inline void walk_memos_drop(Sched *s) {
    for (size_t key = 0; key < s->cat->n_classes + 2; key++)
        s->walk_memo[key].room = 0;
}
int node_lookup(const Sched *s, const char *name, uint32_t *ret, Error *err);
/* -EBUSY naming up to 8 requests placed on node ni (gpus_only: those holding its GPUs): it
 * `what` (e.g. "cannot be removed") while workloads run there (R4). */
int node_busy_error(Sched *s, uint32_t ni, bool gpus_only, const char *what, Error *err);
/* Re-file a node and its devices in every free index after any change of its state. */
void node_refresh(Sched *s, uint32_t ni);
/* The GPUs of class c on node n in MIG mode (its diagnosis cell's count, DiagCell.mig). */
uint8_t node_mig_gpus(const Node *n, int c);
/* The same when only the devices in the bit mask `changed` (bit i: device i) changed their
 * own state: a device left alone would be re-filed where it already is, so it is skipped. */
void node_refresh_devices(Sched *s, uint32_t ni, uint32_t changed);
/* The distinct classes of n's devices in device order into out; returns how many. */
unsigned node_device_classes(const Node *n, int out[SCHED_NODE_MAX_DEVICES]);
/* Its dev_classes as the mask OwnedNode.classes keeps (bit c for c < 64). */
uint64_t node_class_bits(const Node *n);
/* Set or clear (NIL) the gang that reserved node ni, keeping the pools' unreserved counts. */
void node_set_reserved(Sched *s, uint32_t ni, uint32_t by);
/* Inline: both sit in the innermost loops of every search and refresh. */
static inline bool node_schedulable(const Node *n) {
    return n->alive && !n->cordoned && !n->unreachable;
}
static inline bool device_takes_new_work(const Node *n, const Device *d) {
    return node_schedulable(n) && !d->cordoned && !d->quarantined && d->cls >= 0;
}
/* Free whole GPUs of a class and binding on a node, as the pools count them. */
unsigned node_pool_free(const Sched *s, const Node *n, int cls, Binding b);
/* Whether device di of n is one of them (a free GPU of class cls through binding b). */
bool node_device_free(const Sched *s, const Node *n, unsigned di, int cls, Binding b);

/* place.c */
/* The lines a placement and its end write, most of them misses (a node's devices are read
 * seldom between its placements): all started at once, so that the misses overlap rather
 * than follow each other through the loop over the devices. r is placed on n. */
PREFETCHER void place_prefetch(const Node *n, const Req *r) {
    for (unsigned i = 0; i < r->n_dev; i++)
        __builtin_prefetch(&n->devices[r->devs[i]], 1);
    __builtin_prefetch(&n->n_allocs, 1);
}
typedef struct Want {
    const Req *r;
    int cls;       /* class index, or CHOICE_CPU */
    bool fallback; /* R13 strict sharing rule applies */
    bool backfill; /* honour other gangs' reservations */
    uint32_t only; /* NIL, or the one node to consider (capacity freed there) */
} Want;
/* Find a placement for w->r on class w->cls; writes only the placement fields of *out
 * (node up to, not including, fb_index) and reads the request from w->r. Returns true when
 * found. */
bool place_find(Sched *s, const Want *w, Req *out);
/* For a whole-GPU class c: true, with node ni's free GPUs of c per binding in
 * ret_free[BINDING_HOST] and ret_free[BINDING_VFIO]; false for MIG slices, Apple and the
 * FIFO keys past the classes (cpu, memory need). A queue walk reads them to skip the
 * waiters that place_find() restricted to ni would surely not place. */
bool place_whole_free(const Sched *s, uint32_t ni, int c, unsigned ret_free[2]);
/* Apply / undo a found or restored placement on the bookkeeping. */
int place_apply(Sched *s, uint32_t ri);
void place_undo(Sched *s, uint32_t ri);
bool device_only_user(const Sched *s, const Device *d, uint32_t user);
/* Whether a new MIG slice of `user` (under Kata or not) may join device d (R2c, R15). */
bool mig_joinable(const Sched *s, const Node *n, const Device *d, uint32_t user, bool kata);
/* The node an older waiting gang keeps for itself: the one nearest to fitting it. */
uint32_t place_reserve_node(Sched *s, const Req *r, int c);
/* Whether a restored placement collides with what is already placed. */
int place_check_conflicts(const Sched *s, const Req *r, Error *err);
/* Why r cannot be placed on class c right now (a waiting reason). */
SchedReason place_diagnose(const Sched *s, const Req *r, int c);
/* The same for a request by memory alone: the classes that hold it, weighed together. */
SchedReason place_diagnose_by_memory(const Sched *s, const Req *r);
/* Static checks of a request against a class: 0 or a refusal reason. */
SchedReason policy_refusal(const Sched *s, const Req *r, int c);
/* The same for c as one of r's alternatives (R13): an endpoint runtime r names is its first
 * choice's, and an alternative runs the one its placement calls for (R14). */
SchedReason policy_refusal_alternative(const Sched *s, const Req *r, int c);
/* The runtimes for a placement of r on node n by method m. */
ContainerRuntime policy_container_runtime(const Sched *s, const Req *r, const Node *n, Method m);
EndpointRuntime policy_endpoint_runtime(const Req *r, int cls_vendor_or_cpu);
/* Check a placement of r (already in its fields) against every rule; used by restore and
 * the invariant checker. 0 or -EINVAL with a sentence. */
int policy_check_placement(const Sched *s, const Req *r, bool now_rules, Error *err);
void mig_prefs_build(Sched *s);

/* queue.c */
/* Offer capacity that grew on node ni to the waiting requests that could use it. */
void queue_walk_node(Sched *s, uint64_t now, uint32_t ni);
/* decision.c */
/* The name a request's choice c goes by: its class, "cpu" or the memory need's. */
const char *decision_choice_name(const Sched *s, int c);
/* A refusal (why, of `subject`: the request, or the part of it refused) into d, if any. */
void decision_refuse(Decision *d, SchedReason why, const char *subject);
/* A memory need refused at submit (R18): more than one unit of class `choice` holds
 * (SCHED_REASON_TOO_LARGE), or, without a class (choice < 0), more than any class holds
 * (TOO_LARGE) or than any class a node has (NO_NODE, never: as decision_refuse_never):
 * the sentence names the sizes. */
void decision_refuse_memory(Decision *d, SchedReason why, const Sched *s, unsigned memory_gb,
                            int choice, bool never);
/* The same for what no node of the fleet could ever run (R18), saying how to wait anyway;
 * a size says how large the largest node is (r: the refused request). */
void decision_refuse_never(Decision *d, SchedReason why, const char *subject, const Sched *s,
                           const Req *r);
/* What request ri is told now: placed where, or waiting why (fresh: found again, else the
 * reason found at submission) and, with_position, where in the queue. */
void decision_of(const Sched *s, uint32_t ri, bool with_position, bool fresh, Decision *d);
/* Why r waits, given what feasible_reason() said of it and of its first choice (R18). */
SchedReason decision_waiting_reason(const Sched *s, const Req *r, SchedReason never,
                                    SchedReason first_never);
/* Counts a waiting request of arrival seq in (delta 1) or out (-1) of the queue positions,
 * after the FIFO changed. */
void queue_positions_add(Sched *s, uint64_t seq, int32_t delta);
/* The index of the live request with this id: true and *ret, or false. */
bool req_lookup(const Sched *s, const char *id, uint32_t *ret);
/* inventory.c */
int site_alloc_pools(Sched *s, Site *st);
/* After a change on node ni: re-file it, offer grown capacity to the queue, check. */
void node_changed(Sched *s, uint32_t ni, uint64_t now, bool freed);
/* The same after a change of only the devices in the mask `changed` (their cordon,
 * quarantine or reset check: nothing a full refresh alone recomputes, like a class, binding
 * or MIG mode), so that only their pools and indexes are re-filed; UINT32_MAX: any change. */
void node_changed_devices(Sched *s, uint32_t ni, uint32_t changed, uint64_t now, bool freed);

/* reqmap.c */
/* The request whose id is the len bytes at id (hash: strmap_hash_len(id, len)), or NIL. */
uint32_t reqmap_find(const ReqMap *m, const Req *reqs, const char *id, size_t len, uint32_t hash);
/* Start loading the slot reqmap_find() for hash reads first. */
PREFETCHER void reqmap_prefetch(const ReqMap *m, uint32_t hash) {
    if (m->cap)
        __builtin_prefetch(&m->slots[hash & (m->cap - 1)]);
}
/* The request of the first slot of hash's run that holds hash, without comparing ids (a
 * guess, for lookahead.c's loads), or NIL. */
uint32_t reqmap_peek(const ReqMap *m, uint32_t hash);
/* Add request ri with the given id hash; the caller knows its id is not in the map yet. */
int reqmap_insert(ReqMap *m, uint32_t hash, uint32_t ri);
/* Remove request ri (its id hash given): by index, without comparing ids. */
void reqmap_remove(ReqMap *m, uint32_t hash, uint32_t ri);
void reqmap_done(ReqMap *m);

/* feasible.c */
/* R18: SCHED_REASON_NONE when some node of the fleet could ever run r (its first choice or an
 * alternative), else why not for its first choice. user: r's user, or NIL when unknown.
 * ret_first, when not NULL: why no node could ever run the first choice alone (NONE when one
 * could), written always. */
SchedReason feasible_reason(const Sched *s, const Req *r, uint32_t user, SchedReason *ret_first);
/* The most that one node which gets as far as the size check offers r of class c (GPUs of
 * the class, cores for cpu, usable GB on a Mac), for a TOO_LARGE sentence; 0 when no node
 * does, or for a slice or a memory need. Scans the class's nodes: refusals only. */
unsigned feasible_most(const Sched *s, const Req *r, int c);
/* Bring the per-class summary feasible_reason() answers most requests from up to date (it
 * scans nodes while the summary is stale). */
void feasible_prepare(Sched *s);
