/* inventory.c: nodes and devices, and the free-device indexes (users and sites: users.c).
 *
 * Every mutation validates first and changes nothing on error; after a change it re-files
 * the node in the free indexes (node_refresh) and offers freed capacity to the queue. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched-internal.h"
#include "util/strutil.h"

/* ---- intrusive lists (three kinds of element share the helpers through an accessor) ---- */

typedef Link *(*LinkOf)(Sched *s, uint32_t id);

static Link *pool_link_of(Sched *s, uint32_t id) {
    return &s->nodes[id >> POOL_SHIFT].pools[id & ((1u << POOL_SHIFT) - 1)].link;
}
static Link *dev_link_of(Sched *s, uint32_t id) {
    return &dev_of(s, id)->link;
}
static Link *cpu_link_of(Sched *s, uint32_t id) {
    return &s->nodes[id].cpu_link;
}

static void list_push(Sched *s, LinkOf of, uint32_t *head, uint32_t id) {
    Link *l = of(s, id);
    l->prev = NIL;
    l->next = *head;
    if (*head != NIL)
        of(s, *head)->prev = id;
    *head = id;
}

static void list_del(Sched *s, LinkOf of, uint32_t *head, uint32_t id) {
    Link *l = of(s, id);
    if (l->prev != NIL)
        of(s, l->prev)->next = l->next;
    else
        *head = l->next;
    if (l->next != NIL)
        of(s, l->next)->prev = l->prev;
    l->prev = l->next = NIL;
}

int node_lookup(const Sched *s, const char *name, uint32_t *ret, Error *err) {
    if (!name || !strmap_get(&s->node_map, name, ret))
        return error_set(err, -ENOENT, "no node named '%s'", strempty(name));
    return 0;
}

/* ---- free indexes ---- */

static bool device_free_in_pool(const Sched *s, const Node *n, const Device *d, int cls,
                                Binding b) {
    if (d->cls != cls || d->binding != b || d->mig_enabled || d->n_allocs ||
        !device_takes_new_work(n, d))
        return false;
    /* Consumer cards reach VFIO users only after a passed reset check (R9). */
    return !(b == BINDING_VFIO && s->cat->classes[cls].consumer && !d->reset_verified);
}

bool node_device_free(const Sched *s, const Node *n, unsigned di, int cls, Binding b) {
    return device_free_in_pool(s, n, &n->devices[di], cls, b);
}

unsigned node_pool_free(const Sched *s, const Node *n, int cls, Binding b) {
    unsigned k = 0;
    for (unsigned i = 0; i < n->n_devices; i++)
        k += device_free_in_pool(s, n, &n->devices[i], cls, b);
    return k;
}

static void device_refile(Sched *s, uint32_t ni, unsigned di) {
    Node *n = &s->nodes[ni];
    Device *d = &n->devices[di];
    uint32_t gid = ni << DEV_SHIFT | di;
    int want = 0;
    if (n->alive && d->cls >= 0 && device_takes_new_work(n, d) && n->platform == PLATFORM_LINUX) {
        if (d->mig_enabled && d->mig_layout != 0xff && s->cat->classes[d->cls].n_mig_profiles)
            want = 1;
        else if (!d->mig_enabled && d->use == USE_TIME_SLICE && d->n_allocs < n->ts_replicas)
            want = 2;
    }
    uint32_t user = want == 2 ? s->reqs[dev_allocs_const(d)[0]].user : NIL;
    if (d->listed == want && (want != 1 || d->listed_layout == d->mig_layout) &&
        (want != 2 || d->listed_user == user))
        return;
    if (d->listed == 1)
        list_del(s, dev_link_of, &s->mig[d->cls].heads[d->listed_layout], gid);
    else if (d->listed == 2)
        list_del(s, dev_link_of, &s->users[d->listed_user].ts_head, gid);
    d->listed = (int8_t)want;
    if (want == 1) {
        d->listed_layout = d->mig_layout;
        list_push(s, dev_link_of, &s->mig[d->cls].heads[d->mig_layout], gid);
    } else if (want == 2) {
        d->listed_user = user;
        list_push(s, dev_link_of, &s->users[user].ts_head, gid);
    }
}

/* Add (sign 1) or take away (UINT32_MAX) node n's pools of class c (every class: c < 0) in
 * the window counts, where the node is in its class's window. */
static void window_count(Sched *s, const Node *n, int c, uint32_t sign) {
    Site *st = &s->sites[n->site];
    for (unsigned k = 0; k < n->n_pools; k++)
        if (n->pools[k].in_window && (c < 0 || n->pools[k].pool / 2 == c)) {
            int pool = n->pools[k].pool;
            unsigned t = n->pools[k].total;
            st->window_free[pool][t] += sign;
            if (st->window_free[pool][t])
                st->window_bits[pool] |= 1u << t;
            else
                st->window_bits[pool] &= ~(1u << t);
        }
}

/* Count node ni in the window counts exactly while it is schedulable and unreserved. */
static void window_sync(Sched *s, uint32_t ni) {
    Node *n = &s->nodes[ni];
    bool want = n->alive && node_schedulable(n) && n->reserved_by == NIL;
    if (want != n->window_counted)
        window_count(s, n, -1, want ? 1u : UINT32_MAX);
    n->window_counted = want;
}

/* Node ni entered (or left) the window of class c: the first RESERVE_FULL_SCAN of its list. */
static void window_set(Sched *s, uint32_t ni, int c, bool in) {
    Node *n = &s->nodes[ni];
    if (n->window_counted)
        window_count(s, n, c, UINT32_MAX);
    for (unsigned k = 0; k < n->n_pools; k++)
        if (n->pools[k].pool / 2 == c)
            n->pools[k].in_window = in;
    if (n->window_counted)
        window_count(s, n, c, 1u);
}

/* The diagnosis cell of node n's pool k (see DiagCell). */
static DiagCell *cell_of(Sched *s, const Node *n, unsigned k) {
    return &s->class_cells[n->pools[k].pool / 2][n->pools[k].class_pos];
}

uint8_t node_mig_gpus(const Node *n, int c) {
    uint8_t k = 0;
    for (unsigned i = 0; i < n->n_devices; i++)
        k += n->devices[i].cls == c && n->devices[i].mig_enabled;
    return k;
}

/* Write node n's cell for class c from its pools (after it moved, or joined the list). */
static void cell_fill(Sched *s, const Node *n, int c) {
    for (unsigned k = 0; k < n->n_pools; k++) {
        const PoolLink *pl = &n->pools[k];
        if (pl->pool / 2 != c)
            continue;
        DiagCell *cell = cell_of(s, n, k);
        int b = pl->pool % 2;
        cell->free[b] = pl->free;
        cell->reset[b] = pl->reset;
        cell->blocked[b] = pl->blocked;
        cell->total[b] = pl->total;
        cell->mig = node_mig_gpus(n, c);
        cell->kata = n->kata;
        cell->owner = n->owner;
        cell->site = n->site;
    }
}

void node_refresh(Sched *s, uint32_t ni) {
    /* Only a full refresh can follow a change of a device's class, binding or MIG mode. */
    Node *n = &s->nodes[ni];
    for (unsigned k = 0; k < n->n_pools; k++) /* Kata may have changed */
        cell_of(s, n, k)->kata = n->kata;
    if (n->window_counted) /* its totals may change below */
        window_count(s, n, -1, UINT32_MAX);
    n->window_counted = false;
    for (unsigned k = 0; k < n->n_pools; k++) {
        if (n->gpus_counted)
            s->pool_gpus[n->pools[k].pool] -= n->pools[k].total;
        n->pools[k].total = 0;
    }
    for (unsigned i = 0; i < n->n_devices; i++) {
        const Device *d = &n->devices[i];
        for (unsigned k = 0; k < n->n_pools && d->cls >= 0 && !d->mig_enabled; k++)
            if (n->pools[k].pool == d->cls * 2 + (int)d->binding) {
                n->pools[k].total++;
                break;
            }
    }
    n->gpus_counted = n->alive;
    for (unsigned k = 0; k < n->n_pools; k++) {
        if (n->gpus_counted)
            s->pool_gpus[n->pools[k].pool] += n->pools[k].total;
        DiagCell *cell = cell_of(s, n, k);
        cell->total[n->pools[k].pool % 2] = n->pools[k].total;
        cell->mig = node_mig_gpus(n, n->pools[k].pool / 2);
    }
    node_refresh_devices(s, ni, UINT32_MAX);
    window_sync(s, ni);
}

void node_set_reserved(Sched *s, uint32_t ni, uint32_t by) {
    Node *n = &s->nodes[ni];
    if ((n->reserved_by == NIL) != (by == NIL)) {
        uint32_t(*unres)[SCHED_NODE_MAX_DEVICES + 1] = s->sites[n->site].pool_unreserved;
        for (unsigned k = 0; k < n->n_pools; k++)
            if (n->pools[k].free)
                unres[n->pools[k].pool][n->pools[k].free] += by == NIL ? 1u : UINT32_MAX;
    }
    /* Count the reservation under its gang's class (maybe_reserve caps that count). */
    if (n->reserved_by != NIL)
        s->gang_share[n->reserved_choice].reserved--;
    n->reserved_by = by;
    if (by != NIL) {
        n->reserved_choice = s->reqs[by].choice;
        n->reserved_seq = s->reqs[by].seq;
        s->gang_share[n->reserved_choice].reserved++;
        s->held_seq_max = MAX(s->held_seq_max, n->reserved_seq);
    }
    uint32_t(*open_ct)[SCHED_NODE_MAX_DEVICES + 1] = s->sites[n->site].pool_open;
    for (unsigned k = 0; k < n->n_pools; k++) {
        PoolLink *pl = &n->pools[k];
        bool held = by != NIL && n->reserved_choice == pl->pool / 2;
        if (pl->free && held != pl->held)
            open_ct[pl->pool][pl->free] += held ? UINT32_MAX : 1u;
        pl->held = held;
    }
    window_sync(s, ni);
}

/* Sets how device d counts in its node's pools (Device.tally) and adds it to the counts. */
static void device_tally(Sched *s, const Node *n, Device *d, unsigned di, uint8_t n_free[],
                         uint16_t n_mask[], uint8_t n_blocked[], uint8_t n_reset[]) {
    /* A MIG-on GPU that takes no new work: a slice that waits may wait for it (R18), which
     * the fast diagnosis cannot see from the slice lists. */
    bool mb = n->alive && d->cls >= 0 && d->mig_enabled && !device_takes_new_work(n, d);
    if (mb != d->mig_blocked) {
        if (d->cls >= 0)
            s->class_mig_blocked[d->cls] += mb ? 1u : (uint32_t)-1;
        d->mig_blocked = mb;
    }
    d->tally = 0;
    if (!n->alive || d->cls < 0 || d->mig_enabled || d->n_allocs)
        return;
    int pool = d->cls * 2 + (int)d->binding;
    for (unsigned k = 0; k < n->n_pools; k++)
        if (n->pools[k].pool == pool) {
            d->tally_pool = (uint8_t)k;
            if (device_free_in_pool(s, n, d, d->cls, d->binding)) {
                d->tally = 1;
                n_free[k]++;
                n_mask[k] |= (uint16_t)(1u << di);
            } else {
                bool reset = device_takes_new_work(n, d); /* so only its reset check holds it */
                d->tally = reset ? 3 : 2;
                n_blocked[k]++;
                n_reset[k] += reset;
            }
            return;
        }
}

void node_refresh_devices(Sched *s, uint32_t ni, uint32_t changed) {
    Node *n = &s->nodes[ni];
    uint8_t n_free[SCHED_NODE_MAX_DEVICES] = {0}, n_blocked[SCHED_NODE_MAX_DEVICES] = {0},
            n_reset[SCHED_NODE_MAX_DEVICES] = {0};
    uint16_t n_mask[SCHED_NODE_MAX_DEVICES] = {0};
    uint32_t all = n->n_devices >= 32 ? UINT32_MAX : (1u << n->n_devices) - 1;
    /* The pools whose counts may move (bit k: pool k): a pool no changed device counts in,
     * before or after, keeps its counts, cell and bucket, so the loop below skips it rather
     * than rewrite each one (a placement changes one pool of a node's, a refresh all). */
    uint32_t pools = (1u << n->n_pools) - 1;
    if ((changed & all) == all || !n->alive) {
        /* One pass over the devices counts every pool's free and blocked GPUs (the same
         * counts as node_pool_free and the blocked count would take a pass per pool). */
        for (unsigned i = 0; i < n->n_devices; i++)
            device_tally(s, n, &n->devices[i], i, n_free, n_mask, n_blocked, n_reset);
    } else {
        /* Only the changed devices moved (a placement or its end): take each one's old
         * tally out of the node's counts and its new one in. */
        pools = 0;
        for (unsigned k = 0; k < n->n_pools; k++) {
            n_free[k] = n->pools[k].free;
            n_mask[k] = n->pools[k].free_mask;
            n_blocked[k] = n->pools[k].blocked;
            n_reset[k] = n->pools[k].reset;
        }
        for (uint32_t bits = changed & all; bits; bits &= bits - 1) {
            unsigned di = (unsigned)__builtin_ctz(bits);
            Device *d = &n->devices[di];
            unsigned k = d->tally_pool;
            if (d->tally)
                pools |= 1u << k;
            n_free[k] -= d->tally == 1;
            if (d->tally == 1)
                n_mask[k] &= (uint16_t) ~(1u << di);
            n_blocked[k] -= d->tally >= 2;
            n_reset[k] -= d->tally == 3;
            device_tally(s, n, d, di, n_free, n_mask, n_blocked, n_reset);
            if (d->tally)
                pools |= 1u << d->tally_pool;
        }
    }
    for (uint32_t bits = pools; bits; bits &= bits - 1) {
        unsigned k = (unsigned)__builtin_ctz(bits);
        PoolLink *pl = &n->pools[k];
        int cls = pl->pool / 2;
        unsigned bl = n_blocked[k];
        s->class_blocked[cls] += bl - pl->blocked;
        pl->blocked = (uint8_t)bl;
        pl->reset = n_reset[k];
        pl->free_mask = n_mask[k];
        unsigned f = n_free[k];
        DiagCell *cell = cell_of(s, n, k);
        cell->free[pl->pool % 2] = (uint8_t)f;
        cell->reset[pl->pool % 2] = pl->reset;
        cell->blocked[pl->pool % 2] = pl->blocked;
        if (f == pl->free)
            continue;
        uint32_t id = ni << POOL_SHIFT | k;
        uint32_t(*heads)[SCHED_NODE_MAX_DEVICES + 1] = s->sites[n->site].pool_heads;
        uint32_t(*unres)[SCHED_NODE_MAX_DEVICES + 1] = s->sites[n->site].pool_unreserved;
        uint32_t(*open_ct)[SCHED_NODE_MAX_DEVICES + 1] = s->sites[n->site].pool_open;
        bool free_to_reserve = n->reserved_by == NIL;
        uint32_t *buckets = &s->sites[n->site].pool_buckets[pl->pool];
        User *u = &s->users[n->owner];
        if (pl->free) {
            list_del(s, pool_link_of, &heads[pl->pool][pl->free], id);
            unres[pl->pool][pl->free] -= free_to_reserve;
            open_ct[pl->pool][pl->free] -= !pl->held;
            if (heads[pl->pool][pl->free] == NIL)
                *buckets &= ~(1u << pl->free);
            if (u->own_buckets)
                own_rows_del(s, u, pl, ni);
        }
        pl->free = (uint8_t)f;
        if (f) {
            list_push(s, pool_link_of, &heads[pl->pool][f], id);
            unres[pl->pool][f] += free_to_reserve;
            open_ct[pl->pool][f] += !pl->held;
            *buckets |= 1u << f;
            if (u->own_buckets)
                own_rows_add(s, u, pl, ni);
        }
    }
    /* The changed devices, in index order (a placement changes one to a few of a node's). */
    for (uint32_t bits = changed & ((1u << n->n_devices) - 1); bits; bits &= bits - 1)
        device_refile(s, ni, (unsigned)__builtin_ctz(bits));
    int b = -1;
    if (n->alive && node_schedulable(n) && n->cpu_cores > n->cpu_used)
        b = (int)MIN(n->cpu_cores - n->cpu_used, (unsigned)CPU_BUCKETS - 1);
    if (b != n->cpu_bucket) {
        if (n->cpu_bucket >= 0)
            list_del(s, cpu_link_of, &s->cpu_heads[n->cpu_bucket], ni);
        n->cpu_bucket = b;
        if (b >= 0)
            list_push(s, cpu_link_of, &s->cpu_heads[b], ni);
    }
}

/* ---- nodes ---- */

static int parse_mode(const NodeSpec *spec, bool datacenter, NodeMode *ret, Error *err) {
    const char *v = NULL;
    for (size_t i = 0; i < spec->n_labels; i++)
        if (spec->labels[i].key && STREQ(spec->labels[i].key, SCHED_MODE_LABEL))
            v = spec->labels[i].value;
    *ret = NODE_MODE_NONE;
    if (!datacenter)
        return 0;
    bool has_gpu = false;
    for (size_t i = 0; i < spec->n_devices; i++)
        has_gpu = true;
    if (!v) {
        if (!has_gpu)
            return 0;
        return error_set(err, -EINVAL,
                         "node '%s': label %s is missing; set it to container or vm-passthrough "
                         "(R3)",
                         spec->name, SCHED_MODE_LABEL);
    }
    NodeMode m = node_mode_from_string(v);
    if (m == NODE_MODE_VM_VGPU)
        return error_set(err, -EOPNOTSUPP, "node '%s': mode vm-vgpu: %s", spec->name,
                         CATALOG_VGPU_REFUSAL);
    if (m != NODE_MODE_CONTAINER && m != NODE_MODE_VM_PASSTHROUGH)
        return error_set(err, -EINVAL,
                         "node '%s': label %s has unknown value '%s'; use container or "
                         "vm-passthrough (R3)",
                         spec->name, SCHED_MODE_LABEL, strempty(v));
    *ret = m;
    return 0;
}

static int check_devices(const Sched *s, const NodeSpec *spec, Error *err) {
    if (spec->n_devices > SCHED_NODE_MAX_DEVICES)
        return error_set(err, -E2BIG, "node '%s': %zu devices; at most %d per node", spec->name,
                         spec->n_devices, SCHED_NODE_MAX_DEVICES);
    if (spec->platform == PLATFORM_MACOS && spec->n_devices)
        return error_set(err, -EINVAL,
                         "node '%s': a Mac's GPU is given by apple_unified_memory_gb, not as a "
                         "device list",
                         spec->name);
    for (size_t i = 0; i < spec->n_devices; i++) {
        const DeviceSpec *d = &spec->devices[i];
        if ((int)d->binding < 0 || d->binding >= _BINDING_MAX)
            return error_set(err, -EINVAL, "node '%s' device %zu: binding must be host or vfio",
                             spec->name, i);
        /* An unclassified device, or one whose class lists no MIG profiles, with MIG on is
         * still registered and shown (R8: never silently dropped); no slice of it is offered,
         * since the catalog names none. */
        if (!d->class_name)
            continue;
        const GpuClass *c = catalog_find(s->cat, d->class_name);
        if (!c)
            return error_set(err, -ENOENT,
                             "node '%s' device %zu: no class named '%s' in the catalog", spec->name,
                             i, d->class_name);
        if (!gpu_class_is_card(c))
            return error_set(err, -EINVAL,
                             "node '%s' device %zu: '%s' is not a card class (MIG slices, Apple "
                             "and cpu classes are not devices)",
                             spec->name, i, d->class_name);
    }
    return 0;
}

/* The MIG shapes a device may be offered in (Device.mig_offered): those of its class's profiles
 * that its agent reports NVML has (R2c), or all of them when it reports none. */
static uint8_t device_spec_mig_offered(const Catalog *cat, const GpuClass *c,
                                       const DeviceSpec *ds) {
    if (!ds->mig_profiles_reported)
        return 0xff;
    uint8_t offered = 0;
    for (size_t i = 0; c && i < ds->n_mig_profiles; i++) {
        const GpuClass *slice =
                catalog_find_mig_slice(cat, (int)(c - cat->classes), ds->mig_profiles[i]);
        if (slice && slice->mig_shape != _MIG_SHAPE_INVALID)
            offered |= (uint8_t)(1u << slice->mig_shape);
    }
    return offered;
}

static int node_slot(Sched *s, uint32_t *ret) {
    if (s->free_node != NIL) {
        *ret = s->free_node;
        s->free_node = s->nodes[*ret].cpu_link.next;
        s->owned_pos[*ret] = UINT32_MAX; /* not owned yet (user_disown() after a failed add) */
        return 0;
    }
    if (s->n_nodes == s->cap_nodes) {
        size_t nc = s->cap_nodes ? s->cap_nodes * 2 : 16;
        if (nc > (NIL >> POOL_SHIFT))
            return -E2BIG;
        /* Not realloc(): nodes are aligned to cache lines (see Node). */
        Node *nn = aligned_alloc(_Alignof(Node), nc * sizeof(*nn));
        if (!nn)
            return -ENOMEM;
        if (s->n_nodes)
            memcpy(nn, s->nodes, s->n_nodes * sizeof(*nn));
        free(s->nodes);
        s->nodes = nn;
        uint32_t *no = realloc(s->order, nc * sizeof(*no));
        if (!no)
            return -ENOMEM;
        s->order = no;
        uint32_t *op = realloc(s->owned_pos, nc * sizeof(*op));
        if (!op)
            return -ENOMEM;
        s->owned_pos = op;
        s->cap_nodes = nc;
    }
    s->owned_pos[s->n_nodes] = UINT32_MAX;
    *ret = (uint32_t)s->n_nodes++;
    return 0;
}

static void node_done(Node *n) {
    free(n->name);
    for (size_t i = 0; i < n->n_labels; i++) {
        free(n->label_keys[i]);
        free(n->label_values[i]);
    }
    free(n->label_keys);
    free(n->label_values);
    for (unsigned i = 0; i < n->n_devices; i++) {
        free(n->devices[i].address);
        free(n->devices[i].quarantine_reason);
        if (n->devices[i].cap_allocs)
            free(n->devices[i].al.heap);
    }
}

unsigned node_device_classes(const Node *n, int out[SCHED_NODE_MAX_DEVICES]) {
    unsigned k = 0;
    for (unsigned i = 0; i < n->n_devices; i++) {
        int c = n->devices[i].cls;
        bool dup = c < 0;
        for (unsigned j = 0; j < k && !dup; j++)
            dup = out[j] == c;
        if (!dup)
            out[k++] = c;
    }
    return k;
}

static void node_add_pool(Node *n, int pool) {
    for (unsigned k = 0; k < n->n_pools; k++)
        if (n->pools[k].pool == pool)
            return;
    n->pools[n->n_pools++] =
            (PoolLink){.pool = pool,
                       .held = n->reserved_by != NIL && n->reserved_choice == pool / 2,
                       .link = {NIL, NIL}};
}

/* Node ni is at position pos of class c's list: its pools of c and its cell say so. */
static void node_set_class_pos(Sched *s, uint32_t ni, int c, uint32_t pos) {
    Node *n = &s->nodes[ni];
    for (unsigned k = 0; k < n->n_pools; k++)
        if (n->pools[k].pool / 2 == c)
            n->pools[k].class_pos = pos;
    cell_fill(s, n, c);
}

static int class_list_add(Sched *s, int c, uint32_t ni) {
    uint32_t k = s->class_nodes[c];
    if (k == s->class_list_cap[c]) {
        uint32_t nc = k ? k * 2 : 8;
        uint32_t *nl = realloc(s->class_list[c], nc * sizeof(uint32_t));
        if (!nl)
            return -ENOMEM;
        s->class_list[c] = nl;
        DiagCell *cells = realloc(s->class_cells[c], nc * sizeof(DiagCell));
        if (!cells)
            return -ENOMEM;
        s->class_cells[c] = cells;
        s->class_list_cap[c] = nc;
    }
    s->class_list[c][s->class_nodes[c]++] = ni;
    node_set_class_pos(s, ni, c, k);
    window_set(s, ni, c, k < RESERVE_FULL_SCAN);
    return 0;
}

static void class_list_del(Sched *s, int c, uint32_t ni) {
    for (uint32_t i = 0; i < s->class_nodes[c]; i++)
        if (s->class_list[c][i] == ni) {
            window_set(s, ni, c, false);
            s->class_list[c][i] = s->class_list[c][--s->class_nodes[c]];
            if (i < s->class_nodes[c]) { /* the last node moved into the hole */
                window_set(s, s->class_list[c][i], c, i < RESERVE_FULL_SCAN);
                node_set_class_pos(s, s->class_list[c][i], c, i);
            }
            return;
        }
}

/* Register node ni under each class it has (for reasons of waiting requests). */
static int node_index_classes(Sched *s, uint32_t ni) {
    Node *n = &s->nodes[ni];
    for (unsigned i = 0; i < n->n_devices; i++) {
        int c = n->devices[i].cls;
        bool dup = c < 0;
        for (unsigned j = 0; j < i && !dup; j++)
            dup = n->devices[j].cls == c;
        if (!dup && class_list_add(s, c, ni) < 0) {
            for (unsigned j = 0; j < i; j++)
                if (n->devices[j].cls >= 0)
                    class_list_del(s, n->devices[j].cls, ni);
            return -ENOMEM;
        }
    }
    return 0;
}

static void node_unindex_classes(Sched *s, uint32_t ni) {
    Node *n = &s->nodes[ni];
    for (unsigned i = 0; i < n->n_devices; i++) {
        int c = n->devices[i].cls;
        bool dup = c < 0;
        for (unsigned j = 0; j < i && !dup; j++)
            dup = n->devices[j].cls == c;
        if (!dup)
            class_list_del(s, c, ni);
    }
}

uint64_t node_class_bits(const Node *n) {
    uint64_t bits = 0;
    for (unsigned i = 0; i < n->n_dev_classes; i++)
        if (n->dev_classes[i] < 64)
            bits |= 1ull << n->dev_classes[i];
    return bits;
}

int sched_add_node(Sched *s, const NodeSpec *spec, uint64_t now, Error *err) {
    if (!spec || !sched_name_ok(spec->name))
        return error_set(err, -EINVAL, "a node needs a name of 1-%d characters", SCHED_ID_MAX - 1);
    if (strmap_get(&s->node_map, spec->name, NULL))
        return error_set(err, -EEXIST, "node '%s' already exists", spec->name);
    uint32_t si;
    if (!spec->site || !strmap_get(&s->site_map, spec->site, &si))
        return error_set(err, -ENOENT, "node '%s': no site named '%s'", spec->name,
                         strempty(spec->site));
    if (!sched_name_ok(spec->owner))
        return error_set(err, -EINVAL, "node '%s': the owner's user name is missing", spec->name);
    if ((int)spec->platform < 0 || spec->platform >= _PLATFORM_MAX)
        return error_set(err, -EINVAL, "node '%s': platform must be linux or macos", spec->name);
    if (spec->n_labels > SCHED_MAX_LABELS)
        return error_set(err, -E2BIG, "node '%s': at most %d labels", spec->name, SCHED_MAX_LABELS);
    for (size_t i = 0; i < spec->n_labels; i++)
        if (isempty(spec->labels[i].key) || !spec->labels[i].value)
            return error_set(err, -EINVAL, "node '%s': label %zu needs a key and a value",
                             spec->name, i);
    if (spec->platform == PLATFORM_MACOS && s->sites[si].kind == SITE_DATACENTER)
        return error_set(err, -EINVAL, "node '%s': Macs belong to solo and lab sites", spec->name);
    NodeMode mode;
    int r = parse_mode(spec, s->sites[si].kind == SITE_DATACENTER, &mode, err);
    if (r < 0)
        return r;
    r = check_devices(s, spec, err);
    if (r < 0)
        return r;

    uint32_t owner, ni;
    if (sched_user_intern(s, spec->owner, &owner) < 0 || node_slot(s, &ni) < 0)
        return error_set(err, -ENOMEM, "out of memory");
    Node *n = &s->nodes[ni];
    *n = (Node){
            .name = strdup(spec->name),
            .name_len = (uint8_t)strlen(spec->name), /* sched_name_ok() above bounds it */
            .alive = true,
            .site = si,
            .platform = spec->platform,
            .owner = owner,
            .mode = mode,
            .kata = spec->kata || spec->mig_in_kata,
            .mig_in_kata = spec->mig_in_kata,
            .cordoned = spec->cordoned,
            .cpu_cores = spec->cpu_cores,
            .ts_replicas = spec->time_slice_replicas ? spec->time_slice_replicas
                                                     : SCHED_DEFAULT_TIME_SLICE_REPLICAS,
            .apple_unified_gb = spec->apple_unified_memory_gb,
            .apple_usable_gb = spec->apple_usable_memory_gb || spec->apple_usable_known
                                       ? spec->apple_usable_memory_gb
                                       : apple_default_usable_gb(spec->apple_unified_memory_gb),
            .cpu_link = {NIL, NIL},
            .cpu_bucket = -1,
            .reserved_by = NIL,
    };
    bool oom = !n->name;
    if (n->name_len < NODE_NAME_INLINE)
        memcpy(n->name_inline, spec->name, n->name_len + 1u);
    if (spec->n_labels) {
        n->label_keys = calloc(SCHED_MAX_LABELS, sizeof(char *));
        n->label_values = calloc(SCHED_MAX_LABELS, sizeof(char *));
        oom = oom || !n->label_keys || !n->label_values;
        for (size_t i = 0; !oom && i < spec->n_labels; i++) {
            n->label_keys[i] = strdup(spec->labels[i].key);
            n->label_values[i] = strdup(spec->labels[i].value);
            n->n_labels++;
            oom = !n->label_keys[i] || !n->label_values[i];
        }
    }
    if (spec->platform == PLATFORM_MACOS && spec->apple_unified_memory_gb) {
        const GpuClass *c = catalog_match_apple(s->cat, spec->apple_unified_memory_gb);
        n->devices[0] = (Device){.cls = c ? (int)(c - s->cat->classes) : -1,
                                 .memory_gb = n->apple_usable_gb,
                                 .link = {NIL, NIL}};
        n->n_devices = 1;
        if (!n->apple_usable_gb) { /* shown in capacity as quarantined, with the reason */
            n->devices[0].quarantined = true;
            n->devices[0].quarantine_reason =
                    strdup("no GPU memory to offer: the GPU wired limit less the owner's "
                           "headroom is 0 GB (R10)");
            oom = oom || !n->devices[0].quarantine_reason;
        }
    }
    for (size_t i = 0; i < spec->n_devices; i++) {
        const DeviceSpec *ds = &spec->devices[i];
        const GpuClass *c = ds->class_name ? catalog_find(s->cat, ds->class_name) : NULL;
        Device *d = &n->devices[n->n_devices++];
        *d = (Device){
                .cls = c ? (int)(c - s->cat->classes) : -1,
                .address = strdup_or_null(ds->address),
                .memory_gb = ds->memory_gb ? ds->memory_gb : (c ? c->memory_gb : 0),
                .binding = mode == NODE_MODE_VM_PASSTHROUGH ? BINDING_VFIO
                           : mode == NODE_MODE_CONTAINER    ? BINDING_HOST
                                                            : ds->binding,
                .mig_reported = ds->mig_enabled,
                .reset_verified = ds->reset_verified,
                .link = {NIL, NIL},
                .mig_offered = device_spec_mig_offered(s->cat, c, ds),
        };
        device_sync_mig(d);
        oom = oom || (ds->address && !d->address);
        if (d->cls >= 0) {
            node_add_pool(n, d->cls * 2 + BINDING_HOST);
            node_add_pool(n, d->cls * 2 + BINDING_VFIO);
        }
    }
    n->n_dev_classes = (uint8_t)node_device_classes(n, n->dev_classes);
    if (oom || strmap_put(&s->node_map, n->name, ni) < 0 || user_own(s, owner, ni) < 0 ||
        node_index_classes(s, ni) < 0) {
        strmap_remove(&s->node_map, spec->name);
        user_disown(s, owner, ni);
        node_done(n);
        n->alive = false;
        n->cpu_link.next = s->free_node;
        s->free_node = ni;
        return error_set(err, -ENOMEM, "out of memory");
    }
    s->order[s->n_order++] = ni;
    s->fleet_gen++; /* what the fleet could ever hold changed (feasible.c) */
    node_changed(s, ni, now, true);
    return 0;
}

int node_busy_error(Sched *s, uint32_t ni, bool gpus_only, const char *what, Error *err) {
    StrBuf b = {0};
    size_t k = 0;
    for (size_t i = 0; i < s->n_reqs; i++) {
        const Req *r = &s->reqs[i];
        if (!r->used || !r->placed || r->node != ni || (gpus_only && r->n_dev == 0))
            continue;
        if (k++ < 8)
            strbuf_printf(&b, "%s%s", k > 1 ? ", " : "", req_id(r));
    }
    if (k > 8)
        strbuf_printf(&b, " and %zu more", k - 8);
    int ret = error_set(err, -EBUSY,
                        "node '%s' %s: workloads still run there (%s); drain them first (R4)",
                        s->nodes[ni].name, what, strbuf_cstr(&b) ? b.data : "...");
    strbuf_done(&b);
    return ret;
}

int sched_remove_node(Sched *s, const char *node, Error *err) {
    uint32_t ni;
    int r = node_lookup(s, node, &ni, err);
    if (r < 0)
        return r;
    Node *n = &s->nodes[ni];
    if (n->n_allocs)
        return node_busy_error(s, ni, false, "cannot be replaced", err);
    n->alive = false;
    s->fleet_gen++;
    node_refresh(s, ni); /* unlists everything */
    node_unindex_classes(s, ni);
    strmap_remove(&s->node_map, n->name);
    user_disown(s, n->owner, ni);
    for (size_t i = 0; i < s->n_order; i++)
        if (s->order[i] == ni) {
            memmove(&s->order[i], &s->order[i + 1], (s->n_order - i - 1) * sizeof(uint32_t));
            s->n_order--;
            break;
        }
    if (n->reserved_by != NIL) { /* the gang reserves another node at its next walk */
        s->reqs[n->reserved_by].reserved_node = NIL;
        node_set_reserved(s, ni, NIL);
        walk_memos_drop(s); /* a walk that passed it over must try again */
    }
    node_done(n);
    *n = (Node){
            .alive = false, .cpu_bucket = -1, .cpu_link = {NIL, s->free_node}, .reserved_by = NIL};
    s->free_node = ni;
    if (s->check) {
        Error e = {0};
        if (sched_check(s, &e) < 0)
            abort();
    }
    return 0;
}

/* After a change on node ni: re-file it, offer freed capacity to the queue, check. */
void node_changed(Sched *s, uint32_t ni, uint64_t now, bool freed) {
    node_changed_devices(s, ni, UINT32_MAX, now, freed);
}

void node_changed_devices(Sched *s, uint32_t ni, uint32_t changed, uint64_t now, bool freed) {
    if (changed == UINT32_MAX)
        node_refresh(s, ni);
    else
        node_refresh_devices(s, ni, changed);
    if (freed && s->n_waiting)
        queue_walk_node(s, now, ni);
    if (s->check) {
        Error e = {0};
        if (sched_check(s, &e) < 0) {
            fprintf(stderr, "sched invariant violated: %s\n", e.message);
            abort();
        }
    }
}
