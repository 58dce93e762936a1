/* cmd-tenant.c: `einsora tenant trust|untrust NAME` and `einsora tenant list`: an admin
 * grants or withdraws a tenant's trust (R9 internal-only classes, runc). */
#include <stdio.h>
#include <string.h>

#include "listing.h"
#include "output.h"
#include "suggest.h"
#include "remote.h"
#include "util/macro.h"
#include "verbs.h"

static const char usage[] =
        "usage: einsora tenant trust NAME | untrust NAME\n"
        "       einsora tenant list [-o FORMAT] [--no-headers]\n\n"
        "Trust is an admin's grant per tenant, decided at each placement from what is granted\n"
        "then: trust lets NAME use internal-only classes (R9) and run containers under runc;\n"
        "untrust withdraws it (requests already placed keep their GPUs); list shows the\n"
        "tenants granted trust (-o name: tenant/NAME).\n" LIST_FORMAT_HELP;

int verb_tenant(int argc, char **argv) {
    static const struct option extra[] = {LIST_FORMAT_OPTIONS, {}};
    RemoteOpts o = {0};
    ListOpts l = {0};
    int r = remote_getopt(argc, argv, extra, list_only_option, &l, &o, usage);
    if (r >= 0)
        return r;
    const char *sub = optind < argc ? argv[optind++] : NULL;
    const char *name = optind < argc ? argv[optind++] : NULL;
    bool list = sub && STREQ(sub, "list");
    if (sub && !list && STRNEQ(sub, "trust") && STRNEQ(sub, "untrust")) {
        static const char *const subs[] = {"list", "trust", "untrust"};
        return cli_unknown_sub("tenant", sub, subs, ARRAY_SIZE(subs));
    }
    if (!sub)
        return fail(EXIT_USAGE,
                    "tenant: missing what to do: list, trust or untrust (einsora tenant --help)");
    if (!list && !name)
        return fail(EXIT_USAGE, "tenant %s: missing the user name", sub);
    if (optind < argc || (list && name))
        return fail(EXIT_USAGE, "tenant %s: unexpected argument '%s'", sub,
                    list && name ? name : argv[optind]);
    if (!list && (l.format != LIST_TABLE || l.no_headers))
        return fail(EXIT_USAGE, "tenant %s: -o and --no-headers are for `tenant list`", sub);
    list_finish(&l, &o);
    json_t *j = NULL;
    if (list) {
        if ((r = remote_call(&o, "GET", "/v1/tenants/trusted", NULL, NULL, &j)) != EXIT_OK)
            return r;
        if (list_print_untabled(&l, j, "trusted", "tenant", NULL, &r))
            return r;
        Table *t = table_new("TENANT", NULL);
        size_t i;
        json_t *tn;
        json_array_foreach(json_object_get(j, "trusted"), i, tn)
                table_add_row(t, json_string_value(tn));
        list_print_table(&l, t);
        json_decref(j);
        return EXIT_OK;
    }
    _cleanup_free_ char *tenant = client_escape(name);
    if (!tenant)
        return fail(EXIT_FAIL, "out of memory");
    char path[256];
    snprintf(path, sizeof(path), "/v1/tenants/%.200s/trust", tenant);
    if ((r = remote_call(&o, STREQ(sub, "trust") ? "PUT" : "DELETE", path, NULL, NULL, &j)) !=
        EXIT_OK)
        return r;
    if (o.json)
        return print_json(j);
    printf("tenant %s: %s\n", name,
           json_is_true(json_object_get(j, "trusted")) ? "trusted" : "not trusted");
    json_decref(j);
    return EXIT_OK;
}
