/* fuzz-wire-switch.c: libFuzzer target for the mode switch's strict decoder (wire/switch.h),
 * what the CLI and the Kubernetes sync read from a node's JSON and the server from its store. */
#include "wire/switch.h"
#include "wire-round-trip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int decode(json_t *j, void *ret, Error *err) {
    return wire_switch_from_json(j, ret, err);
}

static json_t *encode(const void *sw) {
    return wire_switch_to_json(sw);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    NodeSwitch first = {0}, again = {0};
    wire_round_trip(data, size, decode, encode, &first, &again);
    return 0;
}
