/* strmap.h: an open-addressing hash map from strings to uint32 values (ids, node names).
 *
 * Keys are borrowed: the caller keeps each key alive while it is in the map (the Sched's
 * objects own their names). Deletion uses backward shifting, so lookups stay short. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct StrMapSlot {
    const char *key;
    uint32_t hash;
    uint32_t value;
} StrMapSlot;

typedef struct StrMap {
    StrMapSlot *slots;
    size_t n, cap; /* cap is 0 or a power of two */
} StrMap;

/* Backward-shift deletion (here and in the request-id index): when slot `hole` of a probe run
 * empties, the entry at slot j (home slot `home`) stays where it is if its home lies
 * cyclically in (hole, j]; otherwise it moves into the hole. */
static inline bool probe_entry_stays(size_t hole, size_t j, size_t home) {
    return hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
}

uint32_t strmap_hash(const char *s);
/* The same for the first n bytes of s, when the caller knows the length already. */
uint32_t strmap_hash_len(const char *s, size_t n);
/* Returns true and sets *ret when the key is present. */
bool strmap_get(const StrMap *m, const char *key, uint32_t *ret);
/* Insert or replace. -ENOMEM on allocation failure; replacing the value of a present key
 * allocates nothing and cannot fail. */
int strmap_put(StrMap *m, const char *key, uint32_t value);
bool strmap_remove(StrMap *m, const char *key);
/* The same with the key's strmap_hash() already known (a caller that looks a key up, then
 * inserts or later removes it, hashes it once). */
bool strmap_get_hashed(const StrMap *m, const char *key, uint32_t hash, uint32_t *ret);
int strmap_put_hashed(StrMap *m, const char *key, uint32_t hash, uint32_t value);
bool strmap_remove_hashed(StrMap *m, const char *key, uint32_t hash);
void strmap_done(StrMap *m);
