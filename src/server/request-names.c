/* request-names.c: unknown class names in a request are bad input, with the nearest names. */
#include "server/request-names.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/catalog-closest.h"
#include "util/macro.h"
#include "util/strutil.h"

static bool name_known(const Catalog *cat, const char *name) {
    return STREQ(name, "cpu") || catalog_find_index(cat, name) >= 0;
}

static json_t *unknown_name(const Catalog *cat, const char *field, const char *name) {
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
    char msg[512];
    snprintf(msg, sizeof(msg),
             "%s '%.64s' is not a class of the catalog%s%s%s; nothing was stored.", field, name,
             vgpu ? ": " CATALOG_VGPU_REFUSAL : "", n ? ". Closest: " : "", list);
    return json_pack("{s:s, s:s, s:s, s:s, s:o}", "code",
                     vgpu ? "vgpu_not_supported" : "unknown_class", "message", msg, "field", field,
                     "name", name, "closest", closest);
}

int request_names_check(const Catalog *cat, const ApiRequest *r, json_t **ret) {
    if (r->cls[0] && !name_known(cat, r->cls)) {
        *ret = unknown_name(cat, "class", r->cls);
        return -EINVAL;
    }
    for (size_t i = 0; i < r->n_fallback; i++)
        if (!name_known(cat, r->fallback[i])) {
            *ret = unknown_name(cat, "fallback", r->fallback[i]);
            return -EINVAL;
        }
    return 0;
}
