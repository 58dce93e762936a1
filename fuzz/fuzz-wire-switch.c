/* fuzz-wire-switch.c: libFuzzer target for the mode switch's strict decoder (wire/switch.h),
 * what the CLI and the Kubernetes sync read from a node's JSON and the server from its store.
 * Whatever decodes must encode and decode again to the same switch; a refusal says why. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/switch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!j)
        return 0;
    NodeSwitch sw, again;
    Error err = {0};
    if (wire_switch_from_json(j, &sw, &err) == 0) {
        json_t *out = wire_switch_to_json(&sw);
        Error e2 = {0};
        if (!out || wire_switch_from_json(out, &again, &e2) < 0)
            abort(); /* what we accept, we can write back and read again */
        if (strcmp(sw.mode, again.mode) != 0 || sw.drain != again.drain || sw.gpu != again.gpu ||
            sw.step != again.step || sw.was_cordoned != again.was_cordoned ||
            sw.started_ms != again.started_ms || sw.updated_ms != again.updated_ms ||
            strcmp(sw.message, again.message) != 0 || sw.n_tasks != again.n_tasks ||
            memcmp(sw.tasks, again.tasks, sw.n_tasks * sizeof(sw.tasks[0])) ||
            memcmp(sw.task_ok, again.task_ok, sw.n_tasks * sizeof(sw.task_ok[0])) ||
            memcmp(sw.task_done, again.task_done, sw.n_tasks * sizeof(sw.task_done[0])))
            abort();
        json_decref(out);
    } else if (!err.message[0])
        abort();
    json_decref(j);
    return 0;
}
