/* fuzz-wire-placement.c: libFuzzer target for the stored placement's strict decoder
 * (wire/placement.h). Whatever decodes must encode and decode again to the same placement. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/placement.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static Catalog *catalog(void) {
    static Catalog *c;
    if (!c) {
        c = catalog_new();
        const char *names[] = {"nvidia-a100-80gb", "nvidia-h100-80gb", "cpu", "apple-m2-max"};
        for (size_t i = 0; c && i < sizeof(names) / sizeof(names[0]); i++) {
            GpuClass g = {.name = strdup(names[i])};
            if (catalog_add(c, &g, NULL) < 0)
                abort();
        }
    }
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!j)
        return 0;
    Placement p, again;
    char node[SCHED_ID_MAX], node2[SCHED_ID_MAX];
    Error err = {0};
    if (wire_placement_from_json(catalog(), j, &p, node, &err) == 0) {
        json_t *out = wire_placement_to_json(&p, NULL);
        Error e2 = {0};
        if (!out || wire_placement_from_json(catalog(), out, &again, node2, &e2) < 0)
            abort(); /* what we accept, we can write back and read again */
        if (strcmp(p.node, again.node) != 0 || p.class_index != again.class_index ||
            p.method != again.method || p.n_devices != again.n_devices ||
            memcmp(p.devices, again.devices, sizeof(p.devices[0]) * p.n_devices) ||
            p.fallback_index != again.fallback_index || p.cpu_cores != again.cpu_cores)
            abort();
        json_decref(out);
    } else if (!err.message[0])
        abort(); /* a refusal always says why */
    json_decref(j);
    return 0;
}
