/* ptrmap.c: owned keys in a dense slot array (insertion order), found through a StrMap. */
#include "ptrmap.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

char ptrmap_tomb[1];

/* Make room for one more slot: squeeze out the removed ones, and double when that frees too
 * few (fewer than half), so puts stay amortised O(1). Moved keys get their new slot. */
static int make_room(PtrMap *m) {
    size_t cap = !m->cap ? 16 : (m->n + 1) * 2 > m->cap ? m->cap * 2 : m->cap;
    if (cap != m->cap) {
        char **keys = realloc(m->keys, cap * sizeof(char *));
        if (!keys)
            return -ENOMEM;
        m->keys = keys;
        void **values = realloc(m->values, cap * sizeof(void *));
        if (!values)
            return -ENOMEM;
        m->values = values;
    }
    size_t j = 0;
    for (size_t i = 0; i < m->used; i++) {
        if (m->keys[i] == PTRMAP_TOMB)
            continue;
        if (i != j) {
            m->keys[j] = m->keys[i];
            m->values[j] = m->values[i];
            /* replaces the value of a present key: allocates nothing, cannot fail */
            (void)strmap_put(&m->index, m->keys[j], (uint32_t)j);
        }
        j++;
    }
    for (size_t i = j; i < cap; i++) {
        m->keys[i] = NULL;
        m->values[i] = NULL;
    }
    m->used = j;
    m->cap = cap;
    return 0;
}

int ptrmap_put(PtrMap *m, const char *key, void *value) {
    uint32_t i;
    if (strmap_get(&m->index, key, &i)) {
        m->values[i] = value;
        return 0;
    }
    if (m->used == m->cap && make_room(m) < 0)
        return -ENOMEM;
    char *k = strdup(key);
    if (!k || strmap_put(&m->index, k, (uint32_t)m->used) < 0) {
        free(k);
        return -ENOMEM;
    }
    m->keys[m->used] = k;
    m->values[m->used] = value;
    m->used++;
    m->n++;
    return 0;
}

void *ptrmap_get(const PtrMap *m, const char *key) {
    uint32_t i;
    return strmap_get(&m->index, key, &i) ? m->values[i] : NULL;
}

void *ptrmap_remove(PtrMap *m, const char *key) {
    uint32_t i;
    if (!strmap_get(&m->index, key, &i))
        return NULL;
    void *v = m->values[i];
    char *k = m->keys[i]; /* may be `key` itself: the index compares it, so free it last */
    (void)strmap_remove(&m->index, k);
    free(k);
    m->keys[i] = PTRMAP_TOMB;
    m->values[i] = NULL;
    m->n--;
    while (m->used > 0 && m->keys[m->used - 1] == PTRMAP_TOMB)
        m->keys[--m->used] = NULL;
    return v;
}

void ptrmap_done(PtrMap *m) {
    for (size_t i = 0; i < m->used; i++)
        if (m->keys[i] != PTRMAP_TOMB)
            free(m->keys[i]);
    free(m->keys);
    free(m->values);
    strmap_done(&m->index);
    *m = (PtrMap){0};
}
