/* fuzz-server-urls.c: libFuzzer target for the client's list of server URLs ("url1,url2",
 * EINSORA_SERVER or --server repeated): a client or a sentence, never a crash or a leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char buf[4096];
    if (size >= sizeof(buf))
        return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    Client *c = NULL;
    Error err = {0};
    int r = client_new(buf, "token", &c, &err);
    if (r < 0 && (c || !err.message[0]))
        abort(); /* a failure writes nothing and says why */
    if (r >= 0 && !c)
        abort();
    client_free(c);
    return 0;
}
