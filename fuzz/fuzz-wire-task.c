/* fuzz-wire-task.c: libFuzzer target for the task's strict decoder (wire/task.h), what the
 * agent reads from the network in a heartbeat answer. The id a refusal keeps (to report the
 * task failed) is the task's own id on success. */
#include "wire/task.h"
#include "wire-round-trip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int decode(json_t *j, void *ret, Error *err) {
    uint64_t id = 0;
    int r = wire_task_from_json(j, ret, &id, err);
    if (r == 0 && id != ((Task *)ret)->id)
        abort();
    return r;
}

static json_t *encode(const void *t) {
    return wire_task_to_json(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Task first = {0}, again = {0};
    wire_round_trip(data, size, decode, encode, &first, &again);
    return 0;
}
