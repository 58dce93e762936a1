/* main.c: the einsora executable: global options and dispatch to one verb per file. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "verbs.h"

typedef struct Verb {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} Verb;

static const Verb verbs[] = {
    {"catalog", verb_catalog, "check or show the catalog of GPU classes"},
    {"plan", verb_plan, "offline what-if: replay requests against an inventory"},
    {"agent", verb_agent, "the node agent: discover accelerators, bind GPUs, check resets"},
    {"serve", verb_serve, "run the control plane's HTTP API"},
    {"up", verb_up, "start a control plane and a local agent (--demo: a fleet of fixture machines)"},
    {"token", verb_token, "create an API token (on the server host)"},
    {"classes", verb_classes, "list the server's GPU classes"},
    {"nodes", verb_nodes, "list registered nodes"},
    {"node", verb_node, "show, cordon, uncordon or register a node"},
    {"capacity", verb_capacity, "capacity per GPU class, mode and site"},
    {"requests", verb_requests, "list placement requests"},
    {"request", verb_request, "create, show, cancel or release a placement request"},
    {"events", verb_events, "print or follow the change feed"},
    {"tenant", verb_tenant, "grant, withdraw or list tenants' trust (admins)"},
    {"run", verb_run, "submit a workload and follow it until it ends (Ctrl-C: cancel with --rm)"},
    {"logs", verb_logs, "show a container workload's output on the node that runs it"},
    {"stop", verb_stop, "end a workload: release it, or cancel it while it waits"},
    {"k8s", verb_k8s, "the datacenter: sync with a Kubernetes cluster, KubeVirt config"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: einsora [--version] [--help] VERB [ARGS]\n\n"
               "Einsora GPU: find, classify and place GPUs for VMs, containers, notebooks and "
               "endpoints.\n\nVerbs:\n");
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        fprintf(f, "  %-12s %s\n", verbs[i].name, verbs[i].summary);
    fprintf(f, "\nRun 'einsora VERB --help' for a verb's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("einsora %s\n", EINSORA_VERSION);
        return EXIT_OK;
    }
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        if (strcmp(argv[1], verbs[i].name) == 0) {
            optind = 0; /* each verb parses its own options */
            return verbs[i].run(argc - 1, argv + 1);
        }
    fprintf(stderr, "einsora: unknown verb '%s'\n\n", argv[1]);
    usage(stderr);
    return EXIT_USAGE;
}
