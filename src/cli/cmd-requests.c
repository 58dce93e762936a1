/* cmd-requests.c: `einsora requests`: the caller's requests (an admin sees everyone's), every
 * page the server has (or --limit N), as a table, wide table, JSON, YAML or names. */
#include <stdio.h>
#include <string.h>

#include "listing.h"
#include "output.h"
#include "remote.h"
#include "util/macro.h"
#include "util/table.h"
#include "verbs.h"
#include "watch.h"

typedef struct ListArgs {
    const char *state;
    ListOpts list;
    const RemoteOpts *remote;
    char path[128];
} ListArgs;

static int on_extra(int c, const char *arg, void *userdata) {
    ListArgs *a = userdata;
    int r;
    if (list_option(&a->list, c, arg, &r))
        return r;
    a->state = arg;
    return 0;
}

static void print_requests(const ListOpts *l, json_t *list) {
    bool wide = l->format == LIST_WIDE;
    Table *t = wide ? table_new("ID", "USER", "STATE", "KIND", "CLASS", "COUNT", "NODE", "METHOD",
                                "DEVICES", "FALLBACK", "REASON", NULL)
                    : table_new("ID", "USER", "STATE", "KIND", "CLASS", "COUNT", "NODE", "REASON",
                                NULL);
    size_t i;
    json_t *q;
    json_array_foreach(list, i, q) {
        char id[24], count[16], devices[256] = "", fallback[256] = "";
        json_t *spec = json_object_get(q, "request"), *pl = json_object_get(q, "placement");
        const char *state = json_str(q, "state");
        bool live = state && (!strcmp(state, "placed") || !strcmp(state, "active"));
        /* The reason matters while a request waits, when it was refused, and how its workload
         * ended (failed or exited with its code: a batch job's outcome). */
        bool why = state && (!strcmp(state, "pending") || !strcmp(state, "refused") ||
                             !strcmp(state, "ended"));
        const char *cls = pl && live ? json_str(pl, "class") : json_str(spec, "class");
        const char *node = live ? json_str(pl, "node") : NULL;
        const char *reason = why ? json_str(q, "reason") : NULL;
        json_int_str(q, "id", id, sizeof(id));
        json_int_str(spec, "count", count, sizeof(count));
        if (!wide) {
            table_add_row(t, id, json_str(q, "user"), state, json_str(spec, "kind"), cls, count,
                          node, reason);
            continue;
        }
        size_t k;
        json_t *v;
        size_t len = 0;
        json_array_foreach(live ? json_object_get(pl, "devices") : NULL, k, v) {
            if (json_is_integer(v) && len < sizeof(devices))
                len += (size_t)snprintf(devices + len, sizeof(devices) - len, "%s%lld",
                                        len ? "," : "", (long long)json_integer_value(v));
        }
        len = 0;
        json_array_foreach(json_object_get(spec, "fallback"), k, v) {
            const char *f = json_is_string(v) ? json_string_value(v) : json_str(v, "class");
            if (f && len < sizeof(fallback))
                len += (size_t)snprintf(fallback + len, sizeof(fallback) - len, "%s%s",
                                        len ? "," : "", f);
        }
        table_add_row(t, id, json_str(q, "user"), state, json_str(spec, "kind"), cls, count, node,
                      live ? json_str(pl, "method") : NULL, devices[0] ? devices : NULL,
                      fallback[0] ? fallback : NULL, reason);
    }
    list_print_table(l, t);
}

static int fetch_requests(Client *cl, void *userdata, json_t **ret) {
    ListArgs *a = userdata;
    return list_fetch(a->remote, cl, a->path, "requests", &a->list, 0, ret);
}

static void show_requests(json_t *doc, void *userdata) {
    ListArgs *a = userdata;
    int r;
    if (!list_print_untabled(&a->list, json_incref(doc), "requests", "request", "id", &r)) {
        json_decref(doc);
        print_requests(&a->list, json_object_get(doc, "requests"));
    }
}

int verb_requests(int argc, char **argv) {
    static const struct option extra[] = {
            {"state", required_argument, NULL, 's'}, LIST_OPTIONS, LIST_WATCH_OPTION, {}};
    RemoteOpts o = {0};
    ListArgs a = {0};
    int r = remote_getopt(
            argc, argv, extra, on_extra, &a, &o,
            "usage: einsora requests [--state STATE] [-o FORMAT] [--no-headers] "
            "[--limit N] [--watch]\n\n"
            "List your requests (admins: everyone's), every page the server has.\n"
            "  --state STATE    only requests in STATE: pending, placed, active,\n"
            "                   ended, released, cancelled or refused\n" LIST_HELP LIST_WATCH_HELP);
    if (r >= 0)
        return r;
    if (optind < argc)
        return fail(EXIT_USAGE, "requests: unexpected argument '%s'", argv[optind]);
    list_finish(&a.list, &o);
    a.remote = &o;
    snprintf(a.path, sizeof(a.path), "/v1/requests");
    _cleanup_free_ char *q_state = a.state ? client_escape(a.state) : NULL;
    if (a.state && !q_state)
        return fail(EXIT_FAIL, "out of memory");
    if (q_state)
        snprintf(a.path, sizeof(a.path), "/v1/requests?state=%.96s", q_state);
    if (a.list.watch)
        return list_watch(&o, &(ListView){fetch_requests, show_requests, &a});
    json_t *j = NULL;
    if ((r = list_fetch(&o, NULL, a.path, "requests", &a.list, 0, &j)) != EXIT_OK)
        return r;
    show_requests(j, &a);
    json_decref(j);
    return EXIT_OK;
}
