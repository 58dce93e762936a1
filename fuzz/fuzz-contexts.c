/* fuzz-contexts.c: libFuzzer target for the CLI's configuration file (src/config/contexts.c).
 * Whatever it accepts formats back to text that parses to the same contexts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/contexts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    CliConfig *c = NULL;
    if (cli_config_parse((const char *)data, size, &c, NULL) < 0)
        return 0;
    char *text = cli_config_format(c);
    CliConfig *again = NULL;
    if (!text || cli_config_parse(text, strlen(text), &again, NULL) < 0)
        abort(); /* what we write we must read back */
    if (again->n_contexts != c->n_contexts)
        abort();
    for (size_t i = 0; i < c->n_contexts; i++) {
        char *a = cli_context_servers(&c->contexts[i]),
             *b = cli_context_servers(&again->contexts[i]);
        if (!a || !b || strcmp(a, b) != 0 ||
            strcmp(c->contexts[i].name, again->contexts[i].name) != 0)
            abort();
        free(a);
        free(b);
    }
    free(text);
    cli_config_free(again);
    cli_config_free(c);
    return 0;
}
