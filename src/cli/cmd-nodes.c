/* cmd-nodes.c: `einsora nodes`: every registered node with its GPUs' states. */
#include <stdio.h>
#include <string.h>

#include "listing.h"
#include "output.h"
#include "remote.h"
#include "util/macro.h"
#include "util/table.h"
#include "verbs.h"
#include "watch.h"

/* Counts a GPU (a device, or a Mac's GPU) under its state; one no class matches is only
 * shown, never placed (R8), whatever the state says. */
static void count_gpu(json_t *d, const char *const *states, size_t n_states, size_t *counts) {
    if (json_is_true(json_object_get(d, "unclassified"))) {
        counts[n_states - 1]++;
        return;
    }
    const char *st = json_str(d, "state");
    for (size_t k = 0; st && k < n_states - 1; k++)
        if (STREQ(st, states[k]))
            counts[k]++;
}

/* "3 free, 1 allocated" style summary of a node's GPUs. */
static void device_summary(json_t *node, char *buf, size_t size) {
    static const char *const states[] = {"free", "allocated", "cordoned", "quarantined",
                                         "unclassified"};
    size_t counts[ARRAY_SIZE(states)] = {0};
    size_t i;
    json_t *d, *mac = json_object_get(node, "apple_gpu");
    json_array_foreach(json_object_get(node, "devices"), i, d)
            count_gpu(d, states, ARRAY_SIZE(states), counts);
    if (mac)
        count_gpu(mac, states, ARRAY_SIZE(states), counts);
    size_t len = 0;
    buf[0] = 0;
    for (size_t k = 0; k < ARRAY_SIZE(states); k++)
        if (counts[k] && len < size)
            len += (size_t)snprintf(buf + len, size - len, "%s%zu %s", len ? ", " : "", counts[k],
                                    states[k]);
}

static void nodes_print_table(const ListOpts *l, json_t *list) {
    Table *t =
            table_new("NODE", "SITE", "KIND", "PLATFORM", "OWNER", "MODE", "GPUS", "STATE", NULL);
    size_t i;
    json_t *n;
    json_array_foreach(list, i, n) {
        char gpus[16], states[128];
        snprintf(gpus, sizeof(gpus), "%zu",
                 json_array_size(json_object_get(n, "devices")) +
                         !!json_object_get(n, "apple_gpu"));
        device_summary(n, states, sizeof(states));
        const char *mode = json_str(n, "mode");
        /* A node's own state first (unreachable: missed heartbeats, its allocations kept),
         * then its GPUs'. */
        char state[160];
        const char *node_state = json_is_true(json_object_get(n, "unreachable")) ? "unreachable"
                                 : json_is_true(json_object_get(n, "cordoned"))  ? "cordoned"
                                                                                 : NULL;
        snprintf(state, sizeof(state), "%s%s%s", strempty(node_state),
                 node_state && states[0] ? ": " : "", states);
        table_add_row(t, json_str(n, "name"), json_str(n, "site"), json_str(n, "site_kind"),
                      json_str(n, "platform"), json_str(n, "owner"), mode ? mode : "per-gpu", gpus,
                      state[0] ? state : NULL);
    }
    list_print_table(l, t);
}

static int fetch_nodes(Client *cl, void *userdata, json_t **ret) {
    return remote_call_on(cl, "GET", "/v1/nodes", NULL, NULL, ret);
}

static void show_nodes(json_t *doc, void *userdata) {
    const ListOpts *l = userdata;
    int r;
    if (!list_print_untabled(l, json_incref(doc), "nodes", "node", "name", &r)) {
        json_decref(doc);
        nodes_print_table(l, json_object_get(doc, "nodes"));
    }
}

int verb_nodes(int argc, char **argv) {
    /* Nodes come in one answer (a fleet is not paged): --limit is not offered. */
    static const struct option extra[] = {LIST_FORMAT_OPTIONS, LIST_WATCH_OPTION, {}};
    RemoteOpts o = {0};
    ListOpts l = {0};
    int r = remote_getopt(
            argc, argv, extra, list_only_option, &l, &o,
            "usage: einsora nodes [-o FORMAT] [--no-headers] [--watch]\n\n"
            "List the registered nodes (-o name: node/NAME).\n" LIST_FORMAT_HELP LIST_WATCH_HELP);
    if (r >= 0)
        return r;
    if (optind < argc)
        return fail(EXIT_USAGE, "nodes: unexpected argument '%s'", argv[optind]);
    list_finish(&l, &o);
    if (l.watch)
        return list_watch(&o, &(ListView){fetch_nodes, show_nodes, &l});
    json_t *j = NULL;
    if ((r = remote_call(&o, "GET", "/v1/nodes", NULL, NULL, &j)) != EXIT_OK)
        return r;
    show_nodes(j, &l);
    json_decref(j);
    return EXIT_OK;
}
