/* ptrmap.c: open addressing with linear probing and tombstones (FNV-1a hashing). */
#include "ptrmap.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

char ptrmap_tomb[1];

static uint64_t hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static size_t find(const PtrMap *m, const char *key) {
    size_t mask = m->cap - 1;
    for (size_t i = hash(key) & mask;; i = (i + 1) & mask) {
        if (!m->keys[i])
            return SIZE_MAX;
        if (m->keys[i] != PTRMAP_TOMB && strcmp(m->keys[i], key) == 0)
            return i;
    }
}

static int grow(PtrMap *m) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    char **keys = calloc(cap, sizeof(char *));
    void **values = calloc(cap, sizeof(void *));
    if (!keys || !values) {
        free(keys);
        free(values);
        return -ENOMEM;
    }
    size_t n = 0;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i] || m->keys[i] == PTRMAP_TOMB)
            continue;
        size_t j = hash(m->keys[i]) & (cap - 1);
        while (keys[j])
            j = (j + 1) & (cap - 1);
        keys[j] = m->keys[i];
        values[j] = m->values[i];
        n++;
    }
    free(m->keys);
    free(m->values);
    m->keys = keys;
    m->values = values;
    m->cap = cap;
    m->n = n;
    return 0;
}

int ptrmap_put(PtrMap *m, const char *key, void *value) {
    if (m->cap) {
        size_t i = find(m, key);
        if (i != SIZE_MAX) {
            m->values[i] = value;
            return 0;
        }
    }
    /* n counts tombstones too, so probing always ends at an empty slot. */
    if ((m->n + 1) * 2 > m->cap && grow(m) < 0)
        return -ENOMEM;
    char *k = strdup(key);
    if (!k)
        return -ENOMEM;
    size_t j = hash(key) & (m->cap - 1);
    while (m->keys[j] && m->keys[j] != PTRMAP_TOMB)
        j = (j + 1) & (m->cap - 1);
    if (!m->keys[j])
        m->n++;
    m->keys[j] = k;
    m->values[j] = value;
    return 0;
}

void *ptrmap_get(const PtrMap *m, const char *key) {
    if (!m->cap)
        return NULL;
    size_t i = find(m, key);
    return i == SIZE_MAX ? NULL : m->values[i];
}

void *ptrmap_remove(PtrMap *m, const char *key) {
    if (!m->cap)
        return NULL;
    size_t i = find(m, key);
    if (i == SIZE_MAX)
        return NULL;
    void *v = m->values[i];
    free(m->keys[i]);
    m->keys[i] = PTRMAP_TOMB;
    m->values[i] = NULL;
    return v;
}

void ptrmap_done(PtrMap *m) {
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i] != PTRMAP_TOMB)
            free(m->keys[i]);
    free(m->keys);
    free(m->values);
    *m = (PtrMap){0};
}
