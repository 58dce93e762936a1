/* cmd-node.c: `einsora node show|cordon|uncordon|remove NAME` and `node register FILE`. */
#include <stdio.h>
#include <string.h>

#include "output.h"
#include "suggest.h"
#include "remote.h"
#include "util/fileio.h"
#include "util/macro.h"
#include "util/table.h"
#include "verbs.h"
#include "wire/switch.h"

static const char usage[] =
        "usage: einsora node show NAME [--json]\n"
        "       einsora node cordon NAME [--reason TEXT]\n"
        "       einsora node uncordon NAME\n"
        "       einsora node unquarantine NAME GPU   (GPU: index or PCI address)\n"
        "       einsora node register FILE   (a JSON node description, as POST /v1/nodes)\n"
        "       einsora node remove NAME\n"
        "       einsora node mode NODE container|vm-passthrough [--drain wait|evict] [--gpu ID]\n"
        "                         [--wait] [--timeout DURATION]\n\n"
        "show prints a node, its devices (with their PCI vendor:device ids) and its agent;\n"
        "cordon stops new placements there (--reason says why, shown with the cordon);\n"
        "uncordon lifts it; unquarantine lifts a GPU's quarantine (a failed\n"
        "reset check, R9: a consumer GPU on vfio-pci is checked again before a VM gets it);\n"
        "register adds a node by hand; remove takes a machine out of the fleet (refused\n"
        "while it runs workloads: cordon it and let them end first; stop its agent first, or\n"
        "its next push registers it again); mode switches it\n"
        "(details: `einsora node mode --help`):\n"
        "  --reason TEXT    cordon: why, shown with the cordon and in its event\n"
        "  --drain wait|evict  let running workloads end, or stop them, before switching\n"
        "  --gpu ID         switch one GPU of a lab machine (index or PCI address)\n"
        "  --wait           follow the switch until it is done\n"
        "  --timeout D      with --wait (implied): stop following after D with exit code 6\n";

/* The fleet's view: the agent, and the mode switch in progress or the last one. */
static void print_node_fleet(json_t *n) {
    json_t *agent = json_object_get(n, "agent"), *sw = json_object_get(n, "switch");
    NodeSwitch d;
    Error err = {0};
    if (agent)
        printf("agent     heartbeat every %llds, %s\n",
               (long long)json_integer_value(json_object_get(agent, "heartbeat_s")),
               json_is_true(json_object_get(n, "unreachable")) ? "UNREACHABLE (missed heartbeats; "
                                                                 "allocations kept)"
                                                               : "reporting");
    if (sw && wire_switch_from_json(sw, &d, &err) < 0)
        printf("switch    (the server's answer does not read: %s)\n", error_message(&err));
    else if (sw)
        printf("switch    to %s (drain %s): %s - %s\n", d.mode, drain_mode_to_string(d.drain),
               switch_step_to_string(d.step), d.message);
    if (agent || sw)
        printf("\n");
}

static int print_node(json_t *n) {
    printf("node      %s\nsite      %s (%s)\nplatform  %s\nowner     %s\nmode      %s\n"
           "cordoned  %s%s%s\n\n",
           json_str(n, "name"), json_str(n, "site"), json_str(n, "site_kind"),
           json_str(n, "platform"), json_str(n, "owner"),
           json_str(n, "mode") ? json_str(n, "mode") : "per-gpu",
           json_is_true(json_object_get(n, "cordoned")) ? "yes" : "no",
           json_str(n, "cordon_reason") ? ": " : "", strempty(json_str(n, "cordon_reason")));
    print_node_fleet(n);
    Table *t = table_new("#", "PCI", "ID", "CLASS", "MEMORY", "BINDING", "MIG", "STATE",
                         "ALLOCATIONS", NULL);
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(n, "devices"), i, d) {
        char idx[24], mem[24], allocs[24], state[48];
        snprintf(idx, sizeof(idx), "%zu", i);
        const char *cls = json_str(d, "class");
        /* Allocated and cordoned (a per-GPU switch drains it): both are said. */
        snprintf(state, sizeof(state), "%s%s", strempty(json_str(d, "state")),
                 json_is_true(json_object_get(d, "cordoned")) &&
                                 STRNEQ(strempty(json_str(d, "state")), "cordoned")
                         ? ", cordoned"
                         : "");
        table_add_row(t, idx, json_str(d, "pci"), json_str(d, "pci_id"),
                      cls && cls[0] ? cls : "(unclassified)",
                      json_int_str(d, "memory_gb", mem, sizeof(mem)), json_str(d, "binding"),
                      json_is_true(json_object_get(d, "mig_enabled")) ? "on" : "off",
                      json_str(d, "quarantined") ? "quarantined" : state,
                      json_int_str(d, "allocations", allocs, sizeof(allocs)));
    }
    json_t *mac = json_object_get(n, "apple_gpu");
    if (mac) { /* R10: one GPU per Mac, its memory out of the unified pool */
        char mem[48], allocs[24];
        snprintf(mem, sizeof(mem), "%lld of %lld GB",
                 (long long)json_integer_value(json_object_get(mac, "used_memory_gb")),
                 (long long)json_integer_value(json_object_get(mac, "usable_memory_gb")));
        table_add_row(t, "0", "-", "apple",
                      json_str(mac, "class") ? json_str(mac, "class") : "(unclassified)", mem, "-",
                      "-", json_str(mac, "state"),
                      json_int_str(mac, "allocations", allocs, sizeof(allocs)));
    }
    table_print(t, stdout);
    table_free(t);
    if (mac && json_str(mac, "quarantined"))
        printf("\nQuarantined: #0 %s\n", json_str(mac, "quarantined"));
    if (mac && json_is_true(json_object_get(mac, "unclassified")))
        printf("\nUnclassified (R8: shown, never placed): #0 the Mac's GPU with %lld GB of "
               "unified memory; no catalog class has that memory tier (apple_memory_gb)\n",
               (long long)json_integer_value(json_object_get(n, "apple_unified_memory_gb")));
    /* R9: a quarantined GPU's reason is shown, not only its state. */
    json_array_foreach(json_object_get(n, "devices"), i, d) {
        if (json_str(d, "quarantined"))
            printf("\nQuarantined: #%zu %s: %s\n", i, strempty(json_str(d, "pci")),
                   json_str(d, "quarantined"));
    }
    /* Unclassified devices are easy to miss in the table: say which, and what to do. */
    size_t unclassified = 0;
    json_array_foreach(json_object_get(n, "devices"), i, d) {
        const char *cls = json_str(d, "class");
        if (cls && cls[0])
            continue;
        if (!unclassified++)
            printf("\nUnclassified (R8: shown, never placed; add their PCI ids to the catalog "
                   "to offer them):\n");
        const char *id = json_str(d, "pci_id");
        printf("  #%zu %s%s%s%s\n", i, strempty(json_str(d, "pci")), id ? " (" : "", strempty(id),
               id ? ")" : "");
    }
    return EXIT_OK;
}

static int on_reason(int c, const char *arg, void *userdata) {
    if (c != 'r')
        return EXIT_USAGE;
    if (!*arg)
        return fail(EXIT_USAGE, "node cordon: --reason takes a sentence");
    *(const char **)userdata = arg;
    return 0;
}

int verb_node(int argc, char **argv) {
    if (argc >= 2 && STREQ(argv[1], "mode"))
        return node_mode_verb(argc - 1, argv + 1);
    RemoteOpts o = {0};
    const char *reason = NULL;
    static const struct option extra[] = {{"reason", required_argument, NULL, 'r'}, {0}};
    int r = remote_getopt(argc, argv, extra, on_reason, &reason, &o, usage);
    if (r >= 0)
        return r;
    const char *sub = optind < argc ? argv[optind++] : NULL;
    const char *arg = optind < argc ? argv[optind++] : NULL;
    static const char *const subs[] = {"show", "cordon",       "uncordon", "register",
                                       "mode", "unquarantine", "remove"};
    bool known = false;
    for (size_t i = 0; sub && i < ARRAY_SIZE(subs); i++)
        known = known || STREQ(sub, subs[i]);
    if (sub && !known) /* a typo is named before the arguments are counted */
        return cli_unknown_sub("node", sub, subs, ARRAY_SIZE(subs));
    const char *gpu = sub && STREQ(sub, "unquarantine") && optind < argc ? argv[optind++] : NULL;
    if (reason && sub && STRNEQ(sub, "cordon"))
        return fail(EXIT_USAGE, "node %s: --reason is for node cordon", sub);
    if (!sub)
        return fail(EXIT_USAGE, "node: missing what to do: show, cordon, uncordon, register, "
                                "remove, mode or unquarantine (einsora node --help)");
    if (!arg)
        return fail(EXIT_USAGE, "node %s: missing the node's %s", sub,
                    STREQ(sub, "register") ? "description file" : "name");
    if (STREQ(sub, "unquarantine") && !gpu)
        return fail(EXIT_USAGE, "node unquarantine: missing the GPU (its index or PCI address)");
    if (optind < argc)
        return fail(EXIT_USAGE, "node %s: unexpected argument '%s'", sub, argv[optind]);
    json_t *j = NULL, *body = NULL;
    char path[256];
    _cleanup_free_ char *name = client_escape(arg);
    if (!name)
        return fail(EXIT_FAIL, "out of memory");
    if (STREQ(sub, "show")) {
        snprintf(path, sizeof(path), "/v1/nodes/%.200s", name);
        r = remote_call(&o, "GET", path, NULL, NULL, &j);
    } else if (STREQ(sub, "cordon") || STREQ(sub, "uncordon")) {
        snprintf(path, sizeof(path), "/v1/nodes/%.200s/%s", name, sub);
        body = reason ? json_pack("{s:s}", "reason", reason) : NULL;
        r = reason && !body ? fail(EXIT_USAGE, "node cordon: --reason is not UTF-8 text")
                            : remote_call(&o, "POST", path, body, NULL, &j);
        json_decref(body);
    } else if (STREQ(sub, "unquarantine")) {
        snprintf(path, sizeof(path), "/v1/nodes/%.200s/unquarantine", name);
        body = json_pack("{s:s}", "gpu", gpu);
        r = body ? remote_call(&o, "POST", path, body, NULL, &j) : fail(EXIT_FAIL, "out of memory");
        json_decref(body);
    } else if (STREQ(sub, "remove")) {
        snprintf(path, sizeof(path), "/v1/nodes/%.200s", name);
        if ((r = remote_call(&o, "DELETE", path, NULL, NULL, &j)) != EXIT_OK)
            return r;
        if (o.json)
            return print_json(j);
        printf("node %s removed\n", arg);
        json_decref(j);
        return EXIT_OK;
    } else if (STREQ(sub, "register")) {
        json_error_t je;
        body = json_load_file(arg, JSON_REJECT_DUPLICATES, &je);
        if (!body)
            return je.line > 0 ? fail(EXIT_FAIL, "%s:%d:%d: %s", arg, je.line, je.column, je.text)
                               : fail(EXIT_FAIL, "%s: %s", arg, je.text); /* not opened */
        r = remote_call(&o, "POST", "/v1/nodes", body, NULL, &j);
        json_decref(body);
    } else
        return cli_unknown_sub("node", sub, subs, ARRAY_SIZE(subs));
    if (r != EXIT_OK)
        return r;
    if (o.json)
        return print_json(j);
    r = print_node(json_mask_control(j));
    json_decref(j);
    return r;
}
