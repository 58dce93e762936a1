/* sched.c: creating and freeing a Sched, and its global switches. */
#include <stdlib.h>
#include <string.h>

#include "sched-internal.h"

static int by_memory_cmp(const void *a, const void *b, void *cat) {
    const Catalog *c = cat;
    unsigned x = c->classes[*(const int *)a].memory_gb, y = c->classes[*(const int *)b].memory_gb;
    if (x != y)
        return x < y ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

Sched *sched_new(const Catalog *catalog) {
    if (!catalog)
        return NULL;
    Sched *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    size_t nc = catalog->n_classes;
    s->cat = catalog;
    s->free_node = s->free_req = s->q_head = s->q_tail = NIL;
    s->cpu_class = -1;
    s->own_lists_min = OWN_LISTS_MIN;
    s->xq_head = s->xq_tail = s->dq_head = s->dq_tail = NIL;
    s->min_deadline = UINT64_MAX;
    s->units_per_second = 1;
    memset(s->ahead.ri, 0xff, sizeof(s->ahead.ri)); /* NIL: nothing announced yet */
    s->mig = malloc(MAX(nc, 1) * sizeof(*s->mig));
    s->cq_head = malloc((nc + 2) * sizeof(uint32_t));
    s->cq_tail = malloc((nc + 2) * sizeof(uint32_t));
    s->gang_share = calloc(nc + 2, sizeof(GangShare));
    s->walk_memo = calloc(nc + 2, sizeof(WalkMemo));
    s->by_memory = malloc(MAX(nc, 1) * sizeof(int));
    s->mig_rank = calloc(_MIG_SHAPE_MAX, sizeof(*s->mig_rank));
    s->slices_of = calloc(MAX(nc, 1), sizeof(int *));
    s->class_nodes = calloc(MAX(nc, 1), sizeof(uint32_t));
    s->class_blocked = calloc(MAX(nc, 1), sizeof(uint32_t));
    s->class_mig_blocked = calloc(MAX(nc, 1), sizeof(uint32_t));
    s->pool_gpus = calloc(MAX(nc, 1) * _BINDING_MAX, sizeof(uint32_t));
    s->class_list = calloc(MAX(nc, 1), sizeof(uint32_t *));
    s->class_cells = calloc(MAX(nc, 1), sizeof(DiagCell *));
    s->class_list_cap = calloc(MAX(nc, 1), sizeof(uint32_t));
    s->class_name_len = calloc(MAX(nc, 1), sizeof(size_t));
    if (!s->class_name_len || !s->class_list || !s->class_cells || !s->class_list_cap ||
        !s->class_nodes || !s->class_blocked || !s->class_mig_blocked || !s->pool_gpus || !s->mig ||
        !s->cq_head || !s->cq_tail || !s->gang_share || !s->walk_memo || !s->by_memory ||
        !s->mig_rank || !s->slices_of) {
        sched_free(s);
        return NULL;
    }
    memset(s->mig, 0xff, nc * sizeof(*s->mig));
    memset(s->cq_head, 0xff, (nc + 2) * sizeof(uint32_t));
    memset(s->cq_tail, 0xff, (nc + 2) * sizeof(uint32_t));
    for (size_t c = 0; c < nc; c++) {
        size_t k = 0;
        s->slices_of[c] = malloc((nc + 1) * sizeof(int));
        if (!s->slices_of[c]) {
            sched_free(s);
            return NULL;
        }
        for (size_t j = 0; j < nc; j++)
            if (catalog->classes[j].mig_parent_index == (int)c)
                s->slices_of[c][k++] = (int)j;
        s->slices_of[c][k] = -1;
    }
    memset(s->cpu_heads, 0xff, sizeof(s->cpu_heads));
    for (size_t i = 0; i < nc; i++) {
        if (catalog->classes[i].vendor == VENDOR_CPU) {
            if (s->cpu_class < 0)
                s->cpu_class = (int)i;
        } else
            s->by_memory[s->n_by_memory++] = (int)i;
    }
    for (size_t i = 0; i < nc; i++)
        s->class_name_len[i] = strlen(catalog->classes[i].name);
    for (size_t i = 0; i < nc; i++)
        if (strmap_put(&s->class_map, catalog->classes[i].name, (uint32_t)i) < 0) {
            sched_free(s);
            return NULL;
        }
    qsort_r(s->by_memory, s->n_by_memory, sizeof(int), by_memory_cmp, (void *)catalog);
    mig_prefs_build(s);
    for (int sh = 0; sh < _MIG_SHAPE_MAX; sh++)
        if (!s->mig_pref[sh]) {
            sched_free(s);
            return NULL;
        }
    return s;
}

void sched_free(Sched *s) {
    if (!s)
        return;
    for (size_t i = 0; i < s->n_sites; i++) {
        free(s->sites[i].name);
        free(s->sites[i].trusted);
        free(s->sites[i].pool_heads);
        free(s->sites[i].pool_unreserved);
        free(s->sites[i].pool_open);
        free(s->sites[i].window_free);
        free(s->sites[i].window_bits);
        free(s->sites[i].pool_buckets);
    }
    free(s->feas);
    for (size_t c = 0; s->slices_of && c < s->cat->n_classes; c++)
        free(s->slices_of[c]);
    free(s->slices_of);
    free(s->mig_rank);
    for (size_t c = 0; s->class_list && c < s->cat->n_classes; c++)
        free(s->class_list[c]);
    for (size_t c = 0; s->class_cells && c < s->cat->n_classes; c++)
        free(s->class_cells[c]);
    free(s->class_list);
    free(s->class_cells);
    free(s->class_list_cap);
    free(s->class_name_len);
    free(s->fen);
    free(s->class_nodes);
    free(s->class_blocked);
    free(s->class_mig_blocked);
    free(s->pool_gpus);
    free(s->cq_head);
    free(s->cq_tail);
    free(s->gang_share);
    free(s->walk_memo);
    free(s->sites);
    for (size_t i = 0; i < s->n_users; i++) {
        free(s->users[i].name);
        free(s->users[i].owned);
        own_lists_drop(s, &s->users[i]);
    }
    free(s->users);
    for (size_t i = 0; i < s->n_nodes; i++) {
        Node *n = &s->nodes[i];
        if (!n->alive)
            continue;
        free(n->name);
        for (size_t j = 0; j < n->n_labels; j++) {
            free(n->label_keys[j]);
            free(n->label_values[j]);
        }
        free(n->label_keys);
        free(n->label_values);
        for (unsigned j = 0; j < n->n_devices; j++) {
            free(n->devices[j].address);
            free(n->devices[j].quarantine_reason);
            if (n->devices[j].cap_allocs)
                free(n->devices[j].al.heap);
        }
    }
    free(s->nodes);
    free(s->order);
    free(s->owned_pos);
    for (size_t i = 0; i < s->n_reqs; i++)
        if (s->reqs[i].used && s->reqs[i].id_len >= REQ_ID_INLINE)
            free(s->reqs[i].idb.heap_id);
    free(s->reqs_raw);
    strmap_done(&s->site_map);
    strmap_done(&s->user_map);
    strmap_done(&s->node_map);
    reqmap_done(&s->req_map);
    strmap_done(&s->class_map);
    free(s->mig);
    free(s->by_memory);
    for (int sh = 0; sh < _MIG_SHAPE_MAX; sh++)
        free(s->mig_pref[sh]);
    free(s);
}

const Catalog *sched_catalog(const Sched *s) {
    return s->cat;
}

void sched_set_time_scale(Sched *s, uint64_t units_per_second) {
    s->units_per_second = units_per_second ? units_per_second : 1;
}

void sched_set_check_invariants(Sched *s, bool on) {
    s->check = on;
}

bool sched_checks_invariants(const Sched *s) {
    return s->check;
}

void sched_set_own_lists_min(Sched *s, unsigned n) {
    s->own_lists_min = n;
}

void sched_set_walk_memos(Sched *s, bool on) {
    s->no_walk_memos = !on;
}

void sched_set_on_placed(Sched *s, SchedPlacedFn fn, void *userdata) {
    s->on_placed = fn;
    s->on_placed_data = userdata;
}
