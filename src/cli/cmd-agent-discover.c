/* cmd-agent-discover.c: `einsora agent discover` (being written: discovery issue). */
#include "output.h"
#include "verbs.h"

int agent_discover_verb(int argc, char **argv) {
    return fail(EXIT_FAIL, "agent discover: not built yet");
}
