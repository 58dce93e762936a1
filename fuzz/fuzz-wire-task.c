/* fuzz-wire-task.c: libFuzzer target for the task's strict decoder (wire/task.h), what the
 * agent reads from the network in a heartbeat answer. Whatever decodes must encode and decode
 * again to the same task; a refusal always says why. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/task.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!j)
        return 0;
    Task t = {0}, again = {0};
    uint64_t id = 0;
    Error err = {0};
    if (wire_task_from_json(j, &t, &id, &err) == 0) {
        json_t *out = wire_task_to_json(&t);
        Error e2 = {0};
        if (!out || id != t.id || wire_task_from_json(out, &again, NULL, &e2) < 0)
            abort(); /* what we accept, we can write back and read again */
        if (again.id != t.id || strcmp(again.node, t.node) != 0 || again.kind != t.kind ||
            again.dev != t.dev || strcmp(again.gpu, t.gpu) != 0 ||
            strcmp(again.target, t.target) != 0 || again.created_ms != t.created_ms)
            abort();
        json_decref(out);
    } else if (!err.message[0])
        abort();
    json_decref(j);
    return 0;
}
