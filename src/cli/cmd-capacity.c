/* cmd-capacity.c: `einsora capacity`: units per class, mode and site (R6), and what each
 * datacenter node advertises. */
#include <stdio.h>
#include <string.h>

#include "listing.h"
#include "output.h"
#include "remote.h"
#include "util/macro.h"
#include "util/table.h"
#include "verbs.h"

typedef struct CapArgs {
    const char *cls, *site;
    bool all;
    ListOpts list;
} CapArgs;

static int on_extra(int c, const char *arg, void *userdata) {
    CapArgs *a = userdata;
    int r;
    if (list_option(&a->list, c, arg, &r))
        return r;
    if (c == 'c')
        a->cls = arg;
    else if (c == 's')
        a->site = arg;
    else if (c == 'a')
        a->all = true;
    return 0;
}

/* -o name: class/NAME once for each class with units (--all: every class), though the
 * answer has a row per class, mode and site. Frees j. */
static int print_class_names(const CapArgs *a, json_t *j) {
    json_t *seen = json_object();
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(j, "classes"), i, row) {
        const char *cls = json_str(row, "class");
        if (!cls || json_object_get(seen, cls) ||
            (!a->all && json_integer_value(json_object_get(row, "total")) == 0))
            continue;
        json_object_set_new(seen, cls, json_true());
        printf("class/%s\n", cls);
    }
    json_decref(seen);
    json_decref(j);
    return EXIT_OK;
}

/* The class object `name` of the catalog answer, or NULL. */
static json_t *find_class(json_t *classes, const char *name) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(classes, "classes"), i, c) {
        const char *n = json_str(c, "name");
        if (n && name && strcmp(n, name) == 0)
            return c;
    }
    return NULL;
}

/* The card class a MIG slice class is cut from, or NULL. */
static const char *mig_parent(json_t *classes, const char *name) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(classes, "classes"), i, c) {
        const char *n = json_str(c, "name");
        if (n && name && strcmp(n, name) == 0)
            return json_str(json_object_get(c, "mig"), "parent");
    }
    return NULL;
}

int verb_capacity(int argc, char **argv) {
    static const struct option extra[] = {
            {"class", required_argument, NULL, 'c'},
            {"site", required_argument, NULL, 's'},
            {"all", no_argument, NULL, 'a'},
            LIST_FORMAT_OPTIONS,
            {},
    };
    RemoteOpts o = {0};
    CapArgs a = {0};
    int r = remote_getopt(
            argc, argv, extra, on_extra, &a, &o,
            "usage: einsora capacity [--class NAME] [--site NAME] [--all] [-o FORMAT]\n"
            "                        [--no-headers]\n\n"
            "Capacity per GPU class, mode and site: total, allocated, free, cordoned,\n"
            "quarantined (R6). -o wide adds each row's catalog vendor and memory;\n"
            "-o name prints class/NAME once per class with units. Below the table: what\n"
            "each datacenter node advertises (Kubernetes resources) and the devices no class\n"
            "matches; --no-headers prints the rows alone, for scripts.\n"
            "  --class NAME     only this GPU class (and the nodes that have it)\n"
            "  --site NAME      only this site\n"
            "  --all            also the classes without units\n" LIST_FORMAT_HELP);
    if (r >= 0)
        return r;
    if (optind < argc)
        return fail(EXIT_USAGE, "capacity: unexpected argument '%s'", argv[optind]);
    char path[300] = "/v1/capacity";
    _cleanup_free_ char *q_cls = a.cls ? client_escape(a.cls) : NULL,
                        *q_site = a.site ? client_escape(a.site) : NULL;
    if ((a.cls && !q_cls) || (a.site && !q_site))
        return fail(EXIT_FAIL, "out of memory");
    if (q_cls || q_site)
        snprintf(path, sizeof(path), "/v1/capacity?%s%.130s%s%s%.130s", q_cls ? "class=" : "",
                 q_cls ? q_cls : "", q_cls && q_site ? "&" : "", q_site ? "site=" : "",
                 q_site ? q_site : "");
    list_finish(&a.list, &o);
    json_t *j = NULL;
    if ((r = remote_call(&o, "GET", path, NULL, NULL, &j)) != EXIT_OK)
        return r;
    if (a.list.format == LIST_NAME)
        return print_class_names(&a, j);
    if (list_print_untabled(&a.list, j, "classes", "class", "class", &r))
        return r;
    /* MIG slice classes are cut from the same GPUs: their totals are alternatives, not a sum
     * (7 + 4 + 3 + 2 + 1 + 1 slices on one H200 are not 18 slices). The catalog names each
     * slice class's card. */
    json_t *classes = NULL;
    (void)remote_call(&o, "GET", "/v1/classes", NULL, NULL, &classes);
    bool any_mig = false, wide = a.list.format == LIST_WIDE;
    Table *t = wide ? table_new("CLASS", "SITE", "MODE", "RESOURCE", "TOTAL", "ALLOCATED", "FREE",
                                "CORDONED", "QUARANTINED", "SLICE OF", "VENDOR", "MEMORY", NULL)
                    : table_new("CLASS", "SITE", "MODE", "RESOURCE", "TOTAL", "ALLOCATED", "FREE",
                                "CORDONED", "QUARANTINED", "SLICE OF", NULL);
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(j, "classes"), i, row) {
        char v[5][24];
        /* A class asked for by name is shown even without units (R8: zero capacity). */
        if (!a.all && !a.cls && json_integer_value(json_object_get(row, "total")) == 0)
            continue;
        const char *site = json_str(row, "site");
        const char *parent = mig_parent(classes, json_str(row, "class"));
        any_mig = any_mig || parent;
        char mem[24];
        json_t *cls = find_class(classes, json_str(row, "class"));
        table_add_row(t, json_str(row, "class"), site ? site : "(all)", json_str(row, "mode"),
                      json_str(row, "resource"), json_int_str(row, "total", v[0], 24),
                      json_int_str(row, "allocated", v[1], 24), json_int_str(row, "free", v[2], 24),
                      json_int_str(row, "cordoned", v[3], 24),
                      json_int_str(row, "quarantined", v[4], 24), parent, json_str(cls, "vendor"),
                      cls ? json_int_str(cls, "memory_gb", mem, sizeof(mem)) : NULL);
    }
    list_print_table(&a.list, t);
    json_decref(classes);
    if (a.list.no_headers) { /* rows for a script: none of the notes and tables after them */
        json_decref(j);
        return EXIT_OK;
    }
    if (any_mig)
        puts("\nMIG slice classes are alternatives: each TOTAL is how many slices of that size\n"
             "the GPUs of the SLICE OF class could be cut into; taking one size leaves less of\n"
             "the others. They do not add up.");
    json_t *nodes = json_object_get(j, "nodes");
    if (json_array_size(nodes)) {
        puts("\nDatacenter nodes advertise:");
        Table *nt = table_new("NODE", "SITE", "MODE", "RESOURCE", "COUNT", NULL);
        json_t *n;
        json_array_foreach(nodes, i, n) {
            const char *key;
            json_t *v;
            json_object_foreach(json_object_get(n, "resources"), key, v) {
                char cnt[24];
                snprintf(cnt, sizeof(cnt), "%lld", (long long)json_integer_value(v));
                table_add_row(nt, json_str(n, "node"), json_str(n, "site"), json_str(n, "mode"),
                              key, cnt);
            }
        }
        list_print_table(&a.list, nt);
        json_array_foreach(nodes, i, n) if (json_str(n, "note"))
                printf("note: node %s %s\n", json_str(n, "node"), json_str(n, "note"));
    }
    json_int_t unclassified = json_integer_value(json_object_get(j, "unclassified"));
    if (unclassified)
        printf("\n%lld %s no class (R8): see 'einsora node show NODE'.\n", (long long)unclassified,
               plural((long long)unclassified, "device matches", "devices match"));
    json_decref(j);
    return EXIT_OK;
}
