/* strmap.c: string -> uint32 open-addressing map (linear probing, backward-shift delete). */
#include "strmap.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Inlined into every entry point: a lookup by name runs for every request (its user, its
 * class), and the calls from strmap_get() to strmap_hash() to strmap_hash_len() cost as much
 * as hashing a short name. */
static inline __attribute__((always_inline)) uint32_t hash_bytes(const char *s, size_t n) {
    /* Eight bytes a step (ids and names are short, and this runs for every request twice or
     * more), then murmur3's final mix so that ids differing in one digit spread over the
     * table. */
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    const unsigned char *p = (const unsigned char *)s;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t v;
        memcpy(&v, p, sizeof(v));
        h = (h ^ v) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    /* The last n < 8 bytes as one little-endian word (byte i at bit 8i), read four, two and
     * one at a time rather than byte by byte: ids and names end in such a tail. */
    uint64_t tail = 0;
    unsigned shift = 0;
    if (n & 4) {
        uint32_t v;
        memcpy(&v, p, sizeof(v));
        tail = le32toh(v);
        p += 4, shift = 32;
    }
    if (n & 2) {
        uint16_t v;
        memcpy(&v, p, sizeof(v));
        tail |= (uint64_t)le16toh(v) << shift;
        p += 2, shift += 16;
    }
    if (n & 1)
        tail |= (uint64_t)*p << shift;
    h = (h ^ tail) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return (uint32_t)h;
}

uint32_t strmap_hash(const char *s) {
    /* strlen() first: reading a word past the terminator could leave the string's
     * allocation. */
    return hash_bytes(s, strlen(s));
}

uint32_t strmap_hash_len(const char *s, size_t n) {
    return hash_bytes(s, n);
}

static size_t find_slot(const StrMap *m, const char *key, uint32_t h, bool *found) {
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        const StrMapSlot *sl = &m->slots[i];
        if (!sl->key) {
            *found = false;
            return i;
        }
        if (sl->hash == h && strcmp(sl->key, key) == 0) {
            *found = true;
            return i;
        }
    }
}

static inline bool get_hashed(const StrMap *m, const char *key, uint32_t h, uint32_t *ret) {
    if (!m->cap || !key)
        return false;
    bool found;
    size_t i = find_slot(m, key, h, &found);
    if (found && ret)
        *ret = m->slots[i].value;
    return found;
}

bool strmap_get(const StrMap *m, const char *key, uint32_t *ret) {
    return key && get_hashed(m, key, hash_bytes(key, strlen(key)), ret);
}

bool strmap_get_hashed(const StrMap *m, const char *key, uint32_t h, uint32_t *ret) {
    return get_hashed(m, key, h, ret);
}

static int grow(StrMap *m) {
    size_t ncap = m->cap ? m->cap * 2 : 16;
    StrMapSlot *ns = calloc(ncap, sizeof(*ns));
    if (!ns)
        return -ENOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        StrMapSlot *sl = &m->slots[i];
        if (!sl->key)
            continue;
        size_t j = sl->hash & (ncap - 1);
        while (ns[j].key)
            j = (j + 1) & (ncap - 1);
        ns[j] = *sl;
    }
    free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return 0;
}

int strmap_put(StrMap *m, const char *key, uint32_t value) {
    return strmap_put_hashed(m, key, strmap_hash(key), value);
}

int strmap_put_hashed(StrMap *m, const char *key, uint32_t h, uint32_t value) {
    bool found = false;
    size_t i = m->cap ? find_slot(m, key, h, &found) : 0;
    if (!found && (m->n + 1) * 4 > m->cap * 3) {
        int r = grow(m);
        if (r < 0)
            return r;
        i = find_slot(m, key, h, &found);
    }
    if (!found)
        m->n++;
    m->slots[i] = (StrMapSlot){key, h, value};
    return 0;
}

bool strmap_remove(StrMap *m, const char *key) {
    return strmap_remove_hashed(m, key, strmap_hash(key));
}

bool strmap_remove_hashed(StrMap *m, const char *key, uint32_t h) {
    if (!m->cap)
        return false;
    bool found;
    size_t i = find_slot(m, key, h, &found);
    if (!found)
        return false;
    size_t mask = m->cap - 1;
    /* Backward shift: move later entries of the probe run into the hole when their home slot
     * does not lie strictly between the hole and them. */
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!m->slots[j].key)
            break;
        if (probe_entry_stays(i, j, m->slots[j].hash & mask))
            continue;
        m->slots[i] = m->slots[j];
        i = j;
    }
    m->slots[i] = (StrMapSlot){0};
    m->n--;
    return true;
}

void strmap_done(StrMap *m) {
    free(m->slots);
    *m = (StrMap){0};
}
