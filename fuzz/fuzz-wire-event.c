/* fuzz-wire-event.c: libFuzzer target for the event envelope's strict decoder (wire/event.h),
 * what `einsora events` reads from the feed. Whatever decodes must encode and decode again to
 * the same event; a refusal says why. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/event.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same_text(const char *a, const char *b) {
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!j)
        return 0;
    WireEvent e, again;
    Error err = {0};
    if (wire_event_from_json(j, &e, &err) == 0) {
        json_t *out = wire_event_to_json(&e);
        Error e2 = {0};
        if (!out || wire_event_from_json(out, &again, &e2) < 0)
            abort(); /* what we accept, we can write back and read again */
        if (e.seq != again.seq || e.time_ms != again.time_ms || !same_text(e.actor, again.actor) ||
            !same_text(e.type, again.type) || !same_text(e.object, again.object) ||
            !same_text(e.user, again.user) || !json_equal(e.data, again.data))
            abort();
        json_decref(out);
    } else if (!err.message[0])
        abort();
    json_decref(j);
    return 0;
}
