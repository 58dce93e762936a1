/* request-names.c: unknown class names in a request are bad input, with the nearest names. */
#include "server/request-names.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/catalog-closest.h"
#include "util/macro.h"
#include "util/strutil.h"

bool class_name_known(const Catalog *cat, const char *name) {
    return STREQ(name, "cpu") || catalog_find_index(cat, name) >= 0;
}

json_t *class_name_unknown(const Catalog *cat, const char *field, const char *name,
                           const char *tail) {
    const char *near[CATALOG_CLOSEST_MAX];
    size_t n = catalog_closest(cat, name, near, CATALOG_CLOSEST_MAX);
    json_t *closest = json_array();
    char list[3 * 80] = "";
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(closest, json_string(near[i]));
        int k = snprintf(list + len, sizeof(list) - len, "%s%.64s", i ? ", " : "", near[i]);
        if (k > 0)
            len = MIN(len + (size_t)k, sizeof(list) - 1);
    }
    bool vgpu = string_contains_nocase(name, "vgpu");
    /* A slice of a card that has none: say why there is none (R9: a consumer card has no MIG;
     * R18: the true reason), not only which names are close. */
    char why[160] = "";
    const char *mig = strstr(name, "-mig-");
    if (!vgpu && mig) {
        char card[128];
        snprintf(card, sizeof(card), "%.*s", (int)MIN((size_t)(mig - name), sizeof(card) - 1),
                 name);
        const GpuClass *c = catalog_find(cat, card);
        if (c && c->mig_parent_index < 0 && !c->n_mig_profiles)
            snprintf(why, sizeof(why), ": %s offers no MIG slices%s", c->name,
                     c->consumer ? " (consumer cards have no MIG, R9)"
                                 : " (its catalog class lists no MIG profiles)");
    }
    char msg[512];
    snprintf(msg, sizeof(msg), "%s '%.64s' is not a class of the catalog%s%s%s%s%s", field, name,
             vgpu ? ": " CATALOG_VGPU_REFUSAL : "", why, n ? ". Closest: " : "", list, tail);
    return json_pack("{s:s, s:s, s:s, s:s, s:o}", "code",
                     vgpu ? "vgpu_not_supported" : "unknown_class", "message", msg, "field", field,
                     "name", name, "closest", closest);
}

int request_names_check(const Catalog *cat, const ApiRequest *r, json_t **ret) {
    if (r->cls[0] && !class_name_known(cat, r->cls)) {
        *ret = class_name_unknown(cat, "class", r->cls, "; nothing was stored.");
        return -EINVAL;
    }
    for (size_t i = 0; i < r->n_fallback; i++)
        if (!class_name_known(cat, r->fallback[i])) {
            *ret = class_name_unknown(cat, "fallback", r->fallback[i], "; nothing was stored.");
            return -EINVAL;
        }
    return 0;
}
