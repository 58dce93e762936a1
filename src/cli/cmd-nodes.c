/* cmd-nodes.c: `einsora nodes`: every registered node with its GPUs' states. */
#include <stdio.h>
#include <string.h>

#include "listing.h"
#include "output.h"
#include "remote.h"
#include "util/macro.h"
#include "util/table.h"
#include "verbs.h"

/* "3 free, 1 allocated" style summary of a node's devices. */
static void device_summary(json_t *node, char *buf, size_t size) {
    static const char *const states[] = {"free", "allocated", "cordoned", "quarantined"};
    size_t counts[ARRAY_SIZE(states)] = {0};
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(node, "devices"), i, d) {
        const char *st = json_str(d, "state");
        for (size_t k = 0; st && k < ARRAY_SIZE(states); k++)
            if (STREQ(st, states[k]))
                counts[k]++;
    }
    size_t len = 0;
    buf[0] = 0;
    for (size_t k = 0; k < ARRAY_SIZE(states); k++)
        if (counts[k] && len < size)
            len += (size_t)snprintf(buf + len, size - len, "%s%zu %s", len ? ", " : "", counts[k],
                                    states[k]);
}


static int nodes_print_table(const ListOpts *l, json_t *list) {
    Table *t = table_new("NODE", "SITE", "KIND", "PLATFORM", "OWNER", "MODE", "GPUS", "STATE", NULL);
    size_t i;
    json_t *n;
    json_array_foreach(list, i, n) {
        char gpus[16], states[128];
        snprintf(gpus, sizeof(gpus), "%zu", json_array_size(json_object_get(n, "devices")));
        device_summary(n, states, sizeof(states));
        const char *mode = json_str(n, "mode");
        table_add_row(t, json_str(n, "name"), json_str(n, "site"), json_str(n, "site_kind"),
                      json_str(n, "platform"), json_str(n, "owner"), mode ? mode : "per-gpu", gpus,
                      json_is_true(json_object_get(n, "cordoned")) ? "cordoned"
                                                                   : (states[0] ? states : NULL));
    }
    list_print_table(l, t);
    return EXIT_OK;
}

static int on_extra(int c, const char *arg, void *userdata) {
    int r;
    if (list_option(userdata, c, arg, &r))
        return r;
    return EXIT_USAGE;
}

int verb_nodes(int argc, char **argv) {
    /* Nodes come in one answer (a fleet is not paged): --limit is not offered. */
    static const struct option extra[] = {{"output", required_argument, NULL, 'o'},
                                          {"no-headers", no_argument, NULL, 0x111},
                                          {}};
    RemoteOpts o = {0};
    ListOpts l = {0};
    int r = remote_getopt(argc, argv, extra, on_extra, &l, &o,
                          "usage: einsora nodes [-o FORMAT] [--no-headers]\n\n"
                          "List the registered nodes.\n"
                          "  -o, --output FMT table (default), wide, json, yaml or name (node/NAME)\n"
                          "  --no-headers     print the table without its header line\n");
    if (r >= 0)
        return r;
    if (optind < argc)
        return fail(EXIT_USAGE, "nodes: unexpected argument '%s'", argv[optind]);
    json_t *j = NULL;
    if ((r = remote_call(&o, "GET", "/v1/nodes", NULL, NULL, &j)) != EXIT_OK)
        return r;
    list_finish(&l, &o);
    if (l.format == LIST_JSON || l.format == LIST_YAML)
        return list_print_document(&l, j);
    if (l.format == LIST_NAME) {
        size_t i;
        json_t *n;
        json_array_foreach(json_object_get(j, "nodes"), i, n) printf("node/%s\n", json_str(n, "name"));
        json_decref(j);
        return EXIT_OK;
    }
    r = nodes_print_table(&l, json_object_get(j, "nodes"));
    json_decref(j);
    return r;
}
