/* test-ptrmap.c: the server's owning string -> pointer map against a plain array model, and
 * the walk-and-remove pattern its callers use (events.c, history.c). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "server/ptrmap.h"

#define KEYS 300

static size_t live(const PtrMap *m) {
    size_t n = 0;
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i] && m->keys[i] != PTRMAP_TOMB)
            n++;
    return n;
}

Test(ptrmap, random_puts_and_removes_match_a_model) {
    PtrMap m = {0};
    void *model[KEYS] = {0};
    unsigned seed = 20261201;
    printf("ptrmap seed %u\n", seed);
    srand(seed);
    for (int step = 0; step < 200000; step++) {
        int k = rand() % KEYS;
        char key[16];
        snprintf(key, sizeof(key), "user-%d", k);
        if (rand() % 3) {
            void *v = (void *)(uintptr_t)(step + 1);
            cr_assert_eq(ptrmap_put(&m, key, v), 0);
            model[k] = v;
        } else {
            cr_assert_eq(ptrmap_remove(&m, key), model[k], "step %d key %s", step, key);
            model[k] = NULL;
        }
        if (step % 997 == 0) {
            size_t n = 0;
            for (int j = 0; j < KEYS; j++) {
                snprintf(key, sizeof(key), "user-%d", j);
                cr_assert_eq(ptrmap_get(&m, key), model[j], "step %d key %s", step, key);
                n += model[j] != NULL;
            }
            cr_assert_eq(m.n, n);
            cr_assert_eq(live(&m), n);
        }
    }
    ptrmap_done(&m);
    cr_assert_eq(m.cap, 0);
}

Test(ptrmap, a_walk_may_remove_the_entry_it_is_at) {
    PtrMap m = {0};
    for (int k = 0; k < 100; k++) {
        char key[16];
        snprintf(key, sizeof(key), "k%d", k);
        cr_assert_eq(ptrmap_put(&m, key, (void *)(uintptr_t)(k + 1)), 0);
    }
    size_t seen = 0;
    for (size_t i = 0; i < m.cap; i++) {
        if (!m.keys[i] || m.keys[i] == PTRMAP_TOMB)
            continue;
        seen++;
        uintptr_t v = (uintptr_t)m.values[i];
        if (v % 2) /* the key passed is the map's own copy, as events.c does */
            cr_assert_eq((uintptr_t)ptrmap_remove(&m, m.keys[i]), v);
    }
    cr_assert_eq(seen, 100, "every entry is visited once");
    cr_assert_eq(m.n, 50);
    cr_assert_eq(live(&m), 50);
    cr_assert_null(ptrmap_get(&m, "k0"));
    cr_assert_eq((uintptr_t)ptrmap_get(&m, "k1"), 2);
    ptrmap_done(&m);
}
