/* fuzz-requests.c: libFuzzer target for the YAML request parser; accepted requests are
 * submitted to a small fixed world and the invariants checked after each. */
#include <stdint.h>
#include <stdlib.h>

#include "config/requests-yaml.h"
#include "fuzz-plan-world.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void world(Sched *s) {
    DeviceSpec gpus[2] = {{.class_name = "h100"}, {.class_name = "h100", .mig_enabled = true}};
    DeviceSpec rtx[1] = {{.class_name = "rtx", .binding = BINDING_VFIO, .reset_verified = true}};
    SchedLabel label = {SCHED_MODE_LABEL, "container"};
    NodeSpec nodes[3] = {
            {.name = "dc",
             .site = "dc",
             .owner = "ops",
             .labels = &label,
             .n_labels = 1,
             .kata = true,
             .mig_in_kata = true,
             .cpu_cores = 16,
             .devices = gpus,
             .n_devices = 2},
            {.name = "box",
             .site = "lab",
             .owner = "amy",
             .kata = true,
             .cpu_cores = 8,
             .devices = rtx,
             .n_devices = 1},
            {.name = "mac",
             .site = "lab",
             .owner = "amy",
             .platform = PLATFORM_MACOS,
             .cpu_cores = 8,
             .apple_unified_memory_gb = 64,
             .apple_usable_memory_gb = 48},
    };
    if (sched_add_site(s, "dc", SITE_DATACENTER, NULL) < 0 ||
        sched_add_site(s, "lab", SITE_LAB, NULL) < 0)
        abort();
    for (int i = 0; i < 3; i++)
        if (sched_add_node(s, &nodes[i], 0, NULL) < 0)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    RequestsFile *rf = NULL;
    Error err = {0};
    if (requests_parse_yaml((const char *)data, size, "fuzz.yaml", &rf, &err) < 0) {
        if (rf || !err.message[0])
            abort();
        return 0;
    }
    Sched *s = sched_new(fuzz_world_catalog());
    if (!s)
        abort();
    world(s);
    sched_set_check_invariants(s, true); /* aborts on a violation */
    for (size_t i = 0; i < rf->n_entries && i < 256; i++) {
        Decision d;
        if (sched_submit(s, &rf->entries[i].spec, rf->entries[i].spec.submitted, &d, NULL) < 0)
            abort();
        if (rf->entries[i].release_at != REQUEST_NO_RELEASE)
            sched_tick(s, rf->entries[i].release_at);
    }
    for (size_t i = 0; i < rf->n_entries && i < 256; i++)
        sched_release(s, rf->entries[i].spec.id, 0, NULL);
    sched_free(s);
    requests_file_free(rf);
    return 0;
}
