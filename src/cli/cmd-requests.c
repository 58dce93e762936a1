/* cmd-requests.c: `einsora requests`: the caller's requests (an admin sees everyone's). */
#include <stdio.h>
#include <string.h>

#include "output.h"
#include "remote.h"
#include "util/macro.h"
#include "util/table.h"
#include "verbs.h"

typedef struct ListArgs {
    const char *state;
} ListArgs;

static int on_extra(int c, const char *arg, void *userdata) {
    ((ListArgs *)userdata)->state = arg;
    return 0;
}

int verb_requests(int argc, char **argv) {
    static const struct option extra[] = {{"state", required_argument, NULL, 's'}, {}};
    RemoteOpts o = {0};
    ListArgs a = {0};
    int r = remote_getopt(argc, argv, extra, on_extra, &a, &o,
                          "usage: einsora requests [--state STATE] [--json]\n\n"
                          "List your requests (admins: everyone's). STATE: pending, placed, active,\n"
                          "released, cancelled, refused.\n\n");
    if (r >= 0)
        return r;
    if (optind < argc)
        return fail(EXIT_USAGE, "requests: unexpected argument '%s'", argv[optind]);
    char path[128] = "/v1/requests";
    _cleanup_free_ char *q_state = a.state ? client_escape(a.state) : NULL;
    if (a.state && !q_state)
        return fail(EXIT_FAIL, "out of memory");
    if (q_state)
        snprintf(path, sizeof(path), "/v1/requests?state=%.96s", q_state);
    json_t *j = NULL;
    if ((r = remote_call(&o, "GET", path, NULL, NULL, &j)) != EXIT_OK)
        return r;
    if (o.json)
        return print_json(j);
    Table *t = table_new("ID", "USER", "STATE", "KIND", "CLASS", "COUNT", "NODE", "REASON", NULL);
    size_t i;
    json_t *q;
    json_array_foreach(json_object_get(j, "requests"), i, q) {
        char id[24], count[16];
        json_t *spec = json_object_get(q, "request"), *pl = json_object_get(q, "placement");
        const char *state = json_str(q, "state");
        bool live = state && (!strcmp(state, "placed") || !strcmp(state, "active"));
        /* The reason matters while a request waits or when it was refused. */
        bool why = state && (!strcmp(state, "pending") || !strcmp(state, "refused"));
        table_add_row(t, json_int_str(q, "id", id, sizeof(id)), json_str(q, "user"), state,
                      json_str(spec, "kind"),
                      pl && live ? json_str(pl, "class") : json_str(spec, "class"),
                      json_int_str(spec, "count", count, sizeof(count)),
                      live ? json_str(pl, "node") : NULL, why ? json_str(q, "reason") : NULL);
    }
    table_print(t, stdout);
    table_free(t);
    json_decref(j);
    return EXIT_OK;
}
