/* ptrmap.h: a string -> pointer map that owns its keys and can be walked, for the server's
 * indexes. The hashing is core/strmap's (the one hash table of the project); this layer adds
 * key ownership, pointer values and a dense slot array a caller can iterate over. */
#pragma once

#include <stddef.h>

#include "core/strmap.h"

typedef struct PtrMap {
    char **keys;   /* [0, used): a key or PTRMAP_TOMB (removed); [used, cap): NULL */
    void **values; /* values[i] belongs to keys[i] */
    size_t n, cap; /* n: keys present; cap: length of keys and values */
    size_t used;
    StrMap index; /* key -> its slot in keys/values; borrows the keys */
} PtrMap;

/* The map copies the key. -ENOMEM on allocation failure; replaces an existing value. */
int ptrmap_put(PtrMap *m, const char *key, void *value);
void *ptrmap_get(const PtrMap *m, const char *key);
/* Returns the removed value, or NULL. Slots do not move: a walk may remove the entry it is at. */
void *ptrmap_remove(PtrMap *m, const char *key);
/* Free the keys and tables (not the values). */
void ptrmap_done(PtrMap *m);
/* Iterate: for (size_t i = 0; i < m->cap; i++) if (m->keys[i] && m->keys[i] != PTRMAP_TOMB) */
extern char ptrmap_tomb[];
#define PTRMAP_TOMB ptrmap_tomb
