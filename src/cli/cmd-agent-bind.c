/* cmd-agent-bind.c: `einsora agent bind|reset-check|switch|recover` (being written: binding issue). */
#include "output.h"
#include "verbs.h"

int agent_bind_verb(int argc, char **argv) {
    return fail(EXIT_FAIL, "agent %s: not built yet", argc > 0 ? argv[0] : "bind");
}
