/* catalog-closest.c: the class names nearest to an unknown one (edit distance). */
#include "core/catalog-closest.h"

#include <ctype.h>
#include <limits.h>
#include <string.h>

#include "util/macro.h"

#define NAME_MAX_CMP 128 /* longer inputs are compared by their first 128 characters */

/* Edit distance from a to b (insert, delete, substitute, case ignored). With `part`, any
 * prefix and suffix of b come free: the distance from a to the nearest substring of b. */
static unsigned edit_distance(const char *a, const char *b, int part) {
    size_t la = MIN(strlen(a), (size_t)NAME_MAX_CMP), lb = MIN(strlen(b), (size_t)NAME_MAX_CMP);
    unsigned row[NAME_MAX_CMP + 1];
    /* row[j]: distance from a[0..i) to b[0..j) (or to a substring of b ending at j). */
    for (size_t j = 0; j <= lb; j++)
        row[j] = part ? 0 : (unsigned)j;
    for (size_t i = 1; i <= la; i++) {
        unsigned diag = row[0];
        row[0] = (unsigned)i;
        for (size_t j = 1; j <= lb; j++) {
            unsigned up = row[j];
            unsigned sub =
                    diag + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            row[j] = MIN(MIN(up + 1, row[j - 1] + 1), sub);
            diag = up;
        }
    }
    if (!part)
        return row[lb];
    unsigned best = UINT_MAX;
    for (size_t j = 0; j <= lb; j++)
        best = MIN(best, row[j]);
    return best;
}

size_t catalog_closest(const Catalog *c, const char *name, const char **ret, size_t max) {
    if (!c || !name || !ret || !max)
        return 0;
    max = MIN(max, (size_t)CATALOG_CLOSEST_MAX);
    unsigned long score[CATALOG_CLOSEST_MAX];
    size_t n = 0;
    for (size_t i = 0; i < c->n_classes; i++) {
        const char *cand = c->classes[i].name;
        /* Near a part of the candidate (a typo, "h200"), or the candidate whole within the
         * name ("nvidia-h100-80gb-vgpu" names nvidia-h100-80gb, not ...-pcie), then closest
         * as a whole. */
        unsigned part = MIN(edit_distance(name, cand, 1), edit_distance(cand, name, 1));
        unsigned long sc = (unsigned long)part * 1024 + MIN(edit_distance(name, cand, 0), 1023u);
        /* Insert into the sorted top list; equal scores keep catalog order. */
        size_t k = n;
        while (k > 0 && score[k - 1] > sc)
            k--;
        if (k >= max)
            continue;
        size_t last = MIN(n, max - 1);
        for (size_t m = last; m > k; m--) {
            score[m] = score[m - 1];
            ret[m] = ret[m - 1];
        }
        score[k] = sc;
        ret[k] = cand;
        n = MIN(n + 1, max);
    }
    return n;
}
