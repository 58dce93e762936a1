/* fuzz-wire-event.c: libFuzzer target for the event envelope's strict decoder (wire/event.h),
 * what `einsora events` reads from the feed. */
#include "wire/event.h"
#include "wire-round-trip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int decode(json_t *j, void *ret, Error *err) {
    return wire_event_from_json(j, ret, err);
}

static json_t *encode(const void *e) {
    return wire_event_to_json(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    WireEvent first = {0}, again = {0};
    wire_round_trip(data, size, decode, encode, &first, &again);
    return 0;
}
