/* fuzz-api-request.c: libFuzzer target for the API's strict JSON parsers (request and node
 * bodies). The first byte picks the parser; whatever parses must survive a round trip. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/node.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    Error err = {0};
    if (data[0] & 1) {
        ApiNode *n = malloc(sizeof(*n)), *again = malloc(sizeof(*again));
        if (api_node_parse(text, len, n, &err) == 0) {
            Error e1 = {0};
            if (api_node_check_sent(n, &e1) < 0 && !e1.message[0])
                abort(); /* a refusal always says why */
            json_t *j = api_node_to_json(n);
            Error e2 = {0};
            if (!j || api_node_from_json(j, again, &e2) < 0)
                abort(); /* what we accept, we can write back and read again */
            json_decref(j);
        } else if (!err.message[0])
            abort(); /* a refusal always says why */
        free(n);
        free(again);
    } else {
        ApiRequest r, again;
        if (api_request_parse(text, len, &r, &err) == 0) {
            json_t *j = api_request_to_json(&r);
            Error e2 = {0};
            if (!j || api_request_from_json(j, &again, &e2) < 0 ||
                memcmp(&r, &again, sizeof(r)) != 0)
                abort();
            /* The text the store keeps is the tree's text, byte for byte (json-text.h). */
            JsonText w = {0};
            api_request_write(&r, &w);
            char *written = json_text_take(&w), *dumped = json_dumps(j, JSON_COMPACT);
            if (!written || !dumped || strcmp(written, dumped) != 0)
                abort();
            free(written);
            free(dumped);
            json_decref(j);
            Error e3 = {0};
            if (api_request_check_new(&r, &e3) < 0 && !e3.message[0])
                abort(); /* a new request's refusal says why too */
        } else if (!err.message[0])
            abort();
    }
    return 0;
}
