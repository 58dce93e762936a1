/* ptrmap.h: a string -> pointer hash map (open addressing), for the server's indexes. */
#pragma once

#include <stddef.h>

typedef struct PtrMap {
    char **keys;
    void **values;
    size_t n, cap; /* cap is 0 or a power of two */
} PtrMap;

/* The map copies the key. -ENOMEM on allocation failure; replaces an existing value. */
int ptrmap_put(PtrMap *m, const char *key, void *value);
void *ptrmap_get(const PtrMap *m, const char *key);
/* Returns the removed value, or NULL. */
void *ptrmap_remove(PtrMap *m, const char *key);
/* Free the keys and tables (not the values). */
void ptrmap_done(PtrMap *m);
/* Iterate: for (size_t i = 0; i < m->cap; i++) if (m->keys[i] && m->keys[i] != PTRMAP_TOMB) */
extern char ptrmap_tomb[];
#define PTRMAP_TOMB ptrmap_tomb
