/* cmd-capacity.c: `einsora capacity`: units per class, mode and site (R6), and what each
 * datacenter node advertises. */
#include <stdio.h>
#include <string.h>

#include "output.h"
#include "remote.h"
#include "util/macro.h"
#include "util/table.h"
#include "verbs.h"

typedef struct CapArgs {
    const char *cls, *site;
    bool all;
} CapArgs;

static int on_extra(int c, const char *arg, void *userdata) {
    CapArgs *a = userdata;
    if (c == 'c')
        a->cls = arg;
    else if (c == 's')
        a->site = arg;
    else if (c == 'a')
        a->all = true;
    return 0;
}

int verb_capacity(int argc, char **argv) {
    static const struct option extra[] = {
            {"class", required_argument, NULL, 'c'},
            {"site", required_argument, NULL, 's'},
            {"all", no_argument, NULL, 'a'},
            {},
    };
    RemoteOpts o = {0};
    CapArgs a = {0};
    int r = remote_getopt(argc, argv, extra, on_extra, &a, &o,
                          "usage: einsora capacity [--class NAME] [--site NAME] [--all] [--json]\n\n"
                          "Capacity per GPU class, mode and site: total, allocated, free, cordoned,\n"
                          "quarantined (R6). --all also shows classes without units.\n\n");
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
    json_t *j = NULL;
    if ((r = remote_call(&o, "GET", path, NULL, NULL, &j)) != EXIT_OK)
        return r;
    if (o.json)
        return print_json(j);
    Table *t = table_new("CLASS", "SITE", "MODE", "RESOURCE", "TOTAL", "ALLOCATED", "FREE",
                         "CORDONED", "QUARANTINED", NULL);
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(j, "classes"), i, row) {
        char v[5][24];
        if (!a.all && json_integer_value(json_object_get(row, "total")) == 0)
            continue;
        const char *site = json_str(row, "site");
        table_add_row(t, json_str(row, "class"), site ? site : "(all)", json_str(row, "mode"),
                      json_str(row, "resource"), json_int_str(row, "total", v[0], 24),
                      json_int_str(row, "allocated", v[1], 24), json_int_str(row, "free", v[2], 24),
                      json_int_str(row, "cordoned", v[3], 24),
                      json_int_str(row, "quarantined", v[4], 24));
    }
    table_print(t, stdout);
    table_free(t);
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
        table_print(nt, stdout);
        table_free(nt);
        json_array_foreach(nodes, i, n)
            if (json_str(n, "note"))
                printf("note: node %s %s\n", json_str(n, "node"), json_str(n, "note"));
    }
    json_int_t unclassified = json_integer_value(json_object_get(j, "unclassified"));
    if (unclassified)
        printf("\n%lld device(s) match no class (R8): see 'einsora nodes'.\n", (long long)unclassified);
    json_decref(j);
    return EXIT_OK;
}
