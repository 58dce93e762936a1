/* users.c: the users and sites of the fleet, who trusts whom (R2), and the machines each
 * user owns (User.owned, and the pool rows a search for an owner's request reads). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched-internal.h"
#include "util/strutil.h"

/* Room for one more of n items of `size` bytes at *items (capacity *cap, doubling from
 * `first`); -ENOMEM leaves them as they were. */
static int reserve_one(void **items, size_t n, size_t *cap, size_t size, size_t first) {
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : first;
    void *p = reallocarray(*items, nc, size);
    if (!p)
        return -ENOMEM;
    *items = p;
    *cap = nc;
    return 0;
}

int sched_user_lookup(const Sched *s, const char *name) {
    uint32_t v;
    return strmap_get(&s->user_map, name, &v) ? (int)v : -1;
}

int sched_user_intern(Sched *s, const char *name, uint32_t *ret) {
    return sched_user_intern_hashed(s, name, strmap_hash(name), ret);
}

int sched_user_intern_hashed(Sched *s, const char *name, uint32_t hash, uint32_t *ret) {
    uint32_t v;
    if (strmap_get_hashed(&s->user_map, name, hash, &v)) {
        *ret = v;
        return 0;
    }
    if (reserve_one((void **)&s->users, s->n_users, &s->cap_users, sizeof(User), 64) < 0)
        return -ENOMEM;
    User *u = &s->users[s->n_users];
    *u = (User){.name = strdup(name), .ts_head = NIL};
    if (!u->name)
        return -ENOMEM;
    if (strmap_put_hashed(&s->user_map, u->name, hash, (uint32_t)s->n_users) < 0) {
        free(u->name);
        return -ENOMEM;
    }
    *ret = (uint32_t)s->n_users++;
    return 0;
}

int sched_add_site(Sched *s, const char *name, SiteKind kind, Error *err) {
    if (!sched_name_ok(name))
        return error_set(err, -EINVAL, "a site needs a name of 1-%d characters", SCHED_ID_MAX - 1);
    if ((int)kind < 0 || kind >= _SITE_KIND_MAX)
        return error_set(err, -EINVAL, "site '%s': kind must be solo, lab or datacenter", name);
    if (strmap_get(&s->site_map, name, NULL))
        return error_set(err, -EEXIST, "site '%s' already exists", name);
    if (s->n_sites == s->cap_sites) {
        size_t nc = s->cap_sites ? s->cap_sites * 2 : 8;
        Site *ns = realloc(s->sites, nc * sizeof(*ns));
        if (!ns)
            return error_set(err, -ENOMEM, "out of memory");
        s->sites = ns;
        s->cap_sites = nc;
    }
    Site *st = &s->sites[s->n_sites];
    *st = (Site){.name = strdup(name), .kind = kind};
    if (!st->name || site_alloc_pools(s, st) < 0 ||
        strmap_put(&s->site_map, st->name, (uint32_t)s->n_sites) < 0) {
        free(st->name);
        free(st->pool_heads);
        free(st->pool_unreserved);
        free(st->pool_open);
        free(st->window_free);
        free(st->window_bits);
        free(st->pool_buckets);
        return error_set(err, -ENOMEM, "out of memory");
    }
    s->n_sites++;
    return 0;
}

int site_alloc_pools(Sched *s, Site *st) {
    size_t n = MAX(s->cat->n_classes, 1) * 2;
    st->pool_heads = malloc(n * sizeof(*st->pool_heads));
    st->pool_unreserved = calloc(n, sizeof(*st->pool_unreserved));
    st->pool_open = calloc(n, sizeof(*st->pool_open));
    st->window_free = calloc(n, sizeof(*st->window_free));
    st->window_bits = calloc(n, sizeof(*st->window_bits));
    st->pool_buckets = calloc(n, sizeof(*st->pool_buckets));
    if (!st->pool_heads || !st->pool_unreserved || !st->pool_open || !st->window_free ||
        !st->window_bits || !st->pool_buckets)
        return -ENOMEM;
    memset(st->pool_heads, 0xff, n * sizeof(*st->pool_heads));
    return 0;
}

int sched_site_trust(Sched *s, const char *site, const char *user, bool trusted, Error *err) {
    uint32_t si, ui;
    if (!site || !strmap_get(&s->site_map, site, &si))
        return error_set(err, -ENOENT, "no site named '%s'", strempty(site));
    if (!sched_name_ok(user))
        return error_set(err, -EINVAL, "a trusted tenant needs a user name");
    if (sched_user_intern(s, user, &ui) < 0)
        return error_set(err, -ENOMEM, "out of memory");
    Site *st = &s->sites[si];
    if (ui >= st->n_trusted_cap) {
        size_t nc = MAX((size_t)ui + 1, st->n_trusted_cap * 2);
        uint8_t *nt = realloc(st->trusted, nc);
        if (!nt)
            return error_set(err, -ENOMEM, "out of memory");
        memset(nt + st->n_trusted_cap, 0, nc - st->n_trusted_cap);
        st->trusted = nt;
        st->n_trusted_cap = nc;
    }
    if (st->trusted[ui] != trusted)
        walk_memos_drop(s); /* the binding ui's work takes at this site changed */
    st->trusted[ui] = trusted;
    return 0;
}

bool sched_site_is_trusted(const Sched *s, const char *site, const char *user) {
    uint32_t si;
    int ui = sched_user_lookup(s, user);
    return site && strmap_get(&s->site_map, site, &si) && ui >= 0 &&
           site_trusts(&s->sites[si], (uint32_t)ui);
}

bool sched_site_exists(const Sched *s, const char *site) {
    uint32_t si;
    return site && strmap_get(&s->site_map, site, &si);
}

Relation sched_relation(const Sched *s, const char *node, const char *user) {
    uint32_t ni;
    if (!node || !strmap_get(&s->node_map, node, &ni))
        return _RELATION_INVALID;
    int ui = sched_user_lookup(s, user);
    if (ui < 0)
        return RELATION_STRANGER;
    return relation_of(s, &s->nodes[ni], (uint32_t)ui);
}

/* ---- the machines each user owns ---- */

void own_lists_drop(Sched *s, User *u) {
    if (!u->own_buckets)
        return;
    for (size_t p = 0; p < MAX(s->cat->n_classes, 1) * 2; p++)
        free(u->own_bits[p]);
    free(u->own_bits);
    free(u->own_count);
    free(u->own_buckets);
    u->own_bits = NULL;
    u->own_count = NULL;
    u->own_buckets = NULL;
    u->own_words = 0;
}

/* File (or take out) node ni's pool pl in its owner u's rows by free count. A pool's rows are
 * made when its first node is filed; when they cannot be, u's rows are dropped: a search then
 * scans `owned`, which decides the same. */
void own_rows_add(Sched *s, User *u, const PoolLink *pl, uint32_t ni) {
    uint64_t **rows = &u->own_bits[pl->pool];
    if (!*rows && !(*rows = calloc((SCHED_NODE_MAX_DEVICES + 1) * u->own_words, sizeof(**rows)))) {
        own_lists_drop(s, u);
        return;
    }
    uint32_t pos = s->owned_pos[ni];
    (*rows)[pl->free * u->own_words + pos / 64] |= 1ull << (pos % 64);
    u->own_count[pl->pool][pl->free]++;
    u->own_buckets[pl->pool] |= 1u << pl->free;
}
void own_rows_del(Sched *s, User *u, const PoolLink *pl, uint32_t ni) {
    uint32_t pos = s->owned_pos[ni];
    u->own_bits[pl->pool][pl->free * u->own_words + pos / 64] &= ~(1ull << (pos % 64));
    if (--u->own_count[pl->pool][pl->free] == 0)
        u->own_buckets[pl->pool] &= ~(1u << pl->free);
}

int user_own_lists(Sched *s, uint32_t ui) {
    User *u = &s->users[ui];
    if (u->own_buckets)
        return 0;
    size_t n = MAX(s->cat->n_classes, 1) * 2;
    u->own_bits = calloc(n, sizeof(*u->own_bits));
    u->own_count = calloc(n, sizeof(*u->own_count));
    u->own_buckets = calloc(n, sizeof(*u->own_buckets));
    /* Room for twice the nodes owned now: user_own() drops the rows when `owned` outgrows
     * them, and the next search builds them again, so a growing fleet rebuilds them
     * log(nodes) times. */
    u->own_words = MAX((u->n_owned * 2 + 63) / 64, 1);
    if (!u->own_bits || !u->own_count || !u->own_buckets) {
        free(u->own_bits);
        free(u->own_count);
        u->own_bits = NULL;
        u->own_count = NULL;
        own_lists_drop(s, u);
        return -ENOMEM;
    }
    for (size_t i = 0; i < u->n_owned && u->own_buckets; i++) {
        uint32_t ni = u->owned[i].node;
        Node *nd = &s->nodes[ni];
        for (unsigned k = 0; k < nd->n_pools && u->own_buckets; k++)
            if (nd->pools[k].free)
                own_rows_add(s, u, &nd->pools[k], ni);
    }
    return u->own_buckets ? 0 : -ENOMEM;
}

int user_own(Sched *s, uint32_t ui, uint32_t ni) {
    User *u = &s->users[ui];
    if (reserve_one((void **)&u->owned, u->n_owned, &u->cap_owned, sizeof(OwnedNode), 4) < 0)
        return -ENOMEM;
    s->owned_pos[ni] = (uint32_t)u->n_owned;
    u->owned[u->n_owned++] = (OwnedNode){
            .node = ni, .site = s->nodes[ni].site, .classes = node_class_bits(&s->nodes[ni])};
    if (u->own_buckets && u->n_owned > u->own_words * 64)
        own_lists_drop(s, u); /* its position has no bit in the rows */
    return 0;
}

void user_disown(Sched *s, uint32_t ui, uint32_t ni) {
    User *u = &s->users[ui];
    uint32_t i = s->owned_pos[ni];
    if (i >= u->n_owned || u->owned[i].node != ni)
        return; /* user_own() failed for it */
    if (i + 1 < u->n_owned)
        own_lists_drop(s, u); /* the last node moves into the hole: rows by position go stale */
    u->owned[i] = u->owned[--u->n_owned];
    if (i < u->n_owned) /* the last one moved into the hole */
        s->owned_pos[u->owned[i].node] = i;
}
