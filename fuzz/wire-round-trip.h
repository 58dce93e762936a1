/* wire-round-trip.h: the one check every wire decoder's fuzz target makes.
 *
 * What a decoder accepts, its encoder writes back and the decoder reads again, and the second
 * encoding is the first: comparing the encodings rather than the structs' fields keeps the
 * check true when a shape gains a field. A refusal always carries a sentence. */
#pragma once

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/error.h"

typedef int (*WireDecodeFn)(json_t *j, void *ret, Error *err);
typedef json_t *(*WireEncodeFn)(const void *obj);

/* first and again: two objects of the decoder's type, zeroed by the caller. */
static inline void wire_round_trip(const uint8_t *data, size_t size, WireDecodeFn decode,
                                   WireEncodeFn encode, void *first, void *again) {
    json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!j)
        return;
    Error err = {0};
    if (decode(j, first, &err) == 0) {
        json_t *out = encode(first);
        Error e2 = {0};
        if (!out || decode(out, again, &e2) < 0)
            abort(); /* what we accept, we can write back and read again */
        json_t *out2 = encode(again);
        if (!out2 || !json_equal(out, out2))
            abort();
        json_decref(out2);
        json_decref(out);
    } else if (!err.message[0])
        abort();
    json_decref(j);
}
