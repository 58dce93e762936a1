/* cmd-agent.c: `einsora agent SUB ...`: dispatch to the agent's sub-verbs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"
#include "suggest.h"
#include "verbs.h"

bool agent_parse_headroom(const char *arg, double *ret) {
    char *end = NULL;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || !end || *end || end == arg || !(v >= 0) || v > 1e6)
        return false;
    *ret = v;
    return true;
}

static void agent_usage(FILE *f) {
    fputs("usage: einsora agent SUB [OPTIONS]\n\n"
          "  run          join a control plane: register, heartbeat, do the work it queues\n"
          "  discover     list every accelerator on this machine (sysfs, NVML, AMD, Apple)\n"
          "  bind         move a GPU between the host driver and vfio-pci (R7)\n"
          "  reset-check  run the reset-cycle check on a consumer GPU (R9)\n"
          "  switch       move every GPU of this machine to one mode (R3)\n"
          "  recover      finish or roll back a switch an earlier agent left half-done\n\n"
          "  -h, --help   show this help\n\n"
          "Run 'einsora agent SUB --help' for a sub-verb's options.\n",
          f);
}

int verb_agent(int argc, char **argv) {
    if (argc < 2) {
        agent_usage(stderr);
        return EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
        agent_usage(stdout);
        return EXIT_OK;
    }
    cli_set_parent_verb("agent");
    if (strcmp(sub, "run") == 0)
        return agent_run_verb(argc - 1, argv + 1);
    if (strcmp(sub, "discover") == 0)
        return agent_discover_verb(argc - 1, argv + 1);
    if (strcmp(sub, "bind") == 0 || strcmp(sub, "reset-check") == 0 || strcmp(sub, "switch") == 0 ||
        strcmp(sub, "recover") == 0)
        return agent_bind_verb(argc - 1, argv + 1);
    /* A mistyped sub-verb gets the nearest one, as a mistyped verb does. */
    static const char *const subs[] = {"run",         "discover", "bind",
                                       "reset-check", "switch",   "recover"};
    return cli_unknown_sub("agent", sub, subs, ARRAY_SIZE(subs));
}
