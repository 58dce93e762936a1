/* main.c: the einsora executable: global options and dispatch to one verb per file. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "remote.h"
#include "util/cleanup.h"
#include "wire/api-address.h"
#include "suggest.h"
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
        {"up", verb_up,
         "start a control plane and a local agent (--demo: a fleet of fixture machines)"},
        {"token", verb_token, "create an API token (on the server host)"},
        {"classes", verb_classes, "list the server's GPU classes"},
        {"nodes", verb_nodes, "list registered nodes"},
        {"node", verb_node, "show, cordon, uncordon or register a node"},
        {"capacity", verb_capacity, "capacity per GPU class, mode and site"},
        {"requests", verb_requests, "list placement requests"},
        {"request", verb_request, "create, show, cancel or release a placement request"},
        {"events", verb_events, "print or follow the change feed"},
        {"tenant", verb_tenant, "grant, withdraw or list tenants' trust (admins)"},
        {"run", verb_run,
         "submit a workload and follow it until it ends (Ctrl-C: cancel with --rm)"},
        {"logs", verb_logs, "show a container workload's output on the node that runs it"},
        {"stop", verb_stop, "end a workload: release it, or cancel it while it waits"},
        {"k8s", verb_k8s, "the datacenter: sync with a Kubernetes cluster, KubeVirt config"},
        {"config", verb_config,
         "use-context, get-contexts, current-context: where the CLI connects"},
        {"login", verb_login, "check a server and token file and save them as the current context"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: einsora [--version] [--help] [--server URL] [--token T] [--context C] "
               "[--json] VERB [ARGS]\n\n"
               "Einsora GPU: find, classify and place GPUs for VMs, containers, notebooks and "
               "endpoints.\n\nVerbs:\n");
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        fprintf(f, "  %-12s %s\n", verbs[i].name, verbs[i].summary);
    fprintf(f, "  %-12s %s\n", "version", "print this einsora's version");
    fprintf(f, "  %-12s %s\n", "help", "help VERB: a verb's options (as VERB --help)");
    fprintf(f, "\nOptions:\n  --version    print this einsora's version\n"
               "  -h, --help   show this overview\n"
               "  --server, --token, --context, --json   an API verb's own options, also taken "
               "before it\n");
    fprintf(f, "\nRun 'einsora VERB --help' (or 'einsora help VERB') for a verb's options.\n"
               "Exit codes: 0 ok, 1 failed or refused, 2 usage (also when the server finds the\n"
               "arguments wrong), 3 server unreachable, 4 not allowed, 5 not found, 6 timed out,\n"
               "130 interrupted (Ctrl-C) during a wait.\n");
}

static const Verb *find_verb(const char *name) {
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        if (strcmp(name, verbs[i].name) == 0)
            return &verbs[i];
    return NULL;
}

static int unknown_verb(const char *name) {
    const char *names[sizeof(verbs) / sizeof(verbs[0]) + 2] = {"help", "version"};
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        names[i + 2] = verbs[i].name;
    const char *near = suggest_nearest(name, names, sizeof(names) / sizeof(names[0]));
    if (near)
        fprintf(stderr, "einsora: unknown verb '%s'; did you mean `%s`?\n", name, near);
    else
        fprintf(stderr, "einsora: unknown verb '%s' (`einsora help` lists them)\n", name);
    return EXIT_USAGE;
}

/* `einsora version` and --version: the CLI's version (the server's: GET /healthz). */
static int version(int argc, char **argv) {
    if (argc > 2 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
        printf("usage: einsora version [-o json]\n\nPrint this einsora's version (the server's "
               "is in GET /healthz).\n"
               "  -o, --output json   one JSON object: {\"version\": ..., \"api\": ...}\n"
               "      --json          the same as -o json\n"
               "  -h, --help          show this help\n");
        return EXIT_OK;
    }
    bool json = false;
    int i = 2;
    if (argc > 2 && strcmp(argv[2], "--json") == 0)
        json = true, i = 3;
    else if (argc > 3 && (strcmp(argv[2], "-o") == 0 || strcmp(argv[2], "--output") == 0)) {
        if (strcmp(argv[3], "json") != 0) {
            fprintf(stderr, "einsora: version: -o takes json, not '%s'\n", argv[3]);
            return EXIT_USAGE;
        }
        json = true, i = 4;
    }
    if (argc > i) {
        fprintf(stderr, "einsora: version: unexpected argument '%s'\n", argv[i]);
        return EXIT_USAGE;
    }
    if (json)
        printf("{\"version\": \"%s\", \"api\": \"%s\"}\n", EINSORA_VERSION, WIRE_API_VERSION);
    else
        printf("einsora %s\n", EINSORA_VERSION);
    return EXIT_OK;
}

/* The number of argv words from argv[1] on that are options every API verb takes (--server
 * URL, --token T, --context C, --json, and their --opt=value forms), as kubectl accepts them
 * before its verb. */
static int leading_remote_options(int argc, char **argv) {
    static const struct option remote[] = {REMOTE_OPTIONS, {0}}; /* the verbs' own table */
    int i = 1;
    while (i < argc && strncmp(argv[i], "--", 2) == 0) {
        const char *a = argv[i] + 2;
        const struct option *o = remote;
        size_t n = 0;
        for (; o->name; o++) {
            n = strlen(o->name);
            if (strncmp(a, o->name, n) == 0 && (a[n] == '\0' || (a[n] == '=' && o->has_arg)))
                break;
        }
        bool takes = o->name && o->has_arg == required_argument && a[n] == '\0';
        if (!o->name || (takes && i + 1 >= argc))
            break;
        i += takes ? 2 : 1;
    }
    return i - 1;
}

int main(int argc, char **argv) {
    /* `einsora --server URL nodes`: the options go after the verb's own words (before a `--`
     * that ends them), where the verb's parser reads them. */
    int lead = leading_remote_options(argc, argv);
    _cleanup_free_ char **moved = NULL;
    if (lead && 1 + lead < argc) {
        moved = calloc((size_t)argc + 1, sizeof(char *));
        if (!moved)
            return EXIT_FAIL;
        int end = 1 + lead; /* the verb's words run from end to the first "--" */
        while (end < argc && strcmp(argv[end], "--") != 0)
            end++;
        int k = 0;
        moved[k++] = argv[0];
        for (int i = 1 + lead; i < end; i++)
            moved[k++] = argv[i];
        for (int i = 1; i <= lead; i++)
            moved[k++] = argv[i];
        for (int i = end; i < argc; i++)
            moved[k++] = argv[i];
        argv = moved;
    }
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        (strcmp(argv[1], "help") == 0 &&
         (argc == 2 || strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0 ||
          strcmp(argv[2], "help") == 0))) {
        usage(stdout);
        return EXIT_OK;
    }
    if (strcmp(argv[1], "help") == 0) {
        /* `einsora help VERB [SUB]` is `einsora VERB [SUB] --help`. */
        if (strcmp(argv[2], "version") == 0)
            return version(3, (char *[]){argv[0], "version", "--help", NULL});
        const Verb *v = find_verb(argv[2]);
        if (!v)
            return unknown_verb(argv[2]);
        char *args[4] = {argv[2], argc > 3 ? argv[3] : "--help", "--help", NULL};
        optind = 0;
        return v->run(argc > 3 ? 3 : 2, args);
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0)
        return version(argc, argv);
    const Verb *v = find_verb(argv[1]);
    if (v) {
        optind = 0; /* each verb parses its own options */
        return v->run(argc - 1, argv + 1);
    }
    return unknown_verb(argv[1]);
}
