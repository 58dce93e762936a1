/* cmd-events.c: `einsora events [--after N] [--follow]`: the change feed; --follow keeps
 * long-polling from the last cursor (resumable: pass --after the last seq seen). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "output.h"
#include "remote.h"
#include "util/strutil.h"
#include "verbs.h"

typedef struct EvArgs {
    uint64_t after;
    bool follow;
} EvArgs;

static int on_extra(int c, const char *arg, void *userdata) {
    EvArgs *a = userdata;
    if (c == 'f')
        a->follow = true;
    else if (parse_uint64(arg, UINT64_MAX, &a->after) < 0)
        return fail(EXIT_USAGE, "events: --after takes an event number");
    return 0;
}

static void print_event(json_t *e, bool json) {
    if (json) {
        char *s = json_dumps(e, JSON_COMPACT);
        if (s)
            puts(s);
        free(s);
        return;
    }
    time_t t = (time_t)(json_integer_value(json_object_get(e, "time_ms")) / 1000);
    char when[32];
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    json_t *data = json_object_get(e, "data");
    const char *reason = json_str(data, "reason");
    printf("%-8lld %s %-18s %-10s by %s%s%s\n", (long long)json_integer_value(json_object_get(e, "seq")),
           when, json_str(e, "type"), json_str(e, "object"), json_str(e, "actor"),
           reason && reason[0] ? ": " : "", reason ? reason : "");
}

int verb_events(int argc, char **argv) {
    static const struct option extra[] = {
            {"after", required_argument, NULL, 'a'},
            {"follow", no_argument, NULL, 'f'},
            {},
    };
    RemoteOpts o = {0};
    EvArgs a = {0};
    int r = remote_getopt(argc, argv, extra, on_extra, &a, &o,
                          "usage: einsora events [--after N] [--follow] [--json]\n\n"
                          "Print the change feed (your requests' events; admins see all). --json\n"
                          "prints one JSON object per line. --follow waits for new events.\n\n");
    if (r >= 0)
        return r;
    if (optind < argc)
        return fail(EXIT_USAGE, "events: unexpected argument '%s'", argv[optind]);
    Client *cl = NULL;
    if ((r = remote_open(&o, &cl)) != EXIT_OK)
        return r;
    uint64_t cursor = a.after;
    do {
        char path[128];
        snprintf(path, sizeof(path), "/v1/events?after=%llu%s", (unsigned long long)cursor,
                 a.follow ? "&wait=30" : "");
        json_t *j = NULL;
        if ((r = remote_call_on(cl, "GET", path, NULL, NULL, &j)) != EXIT_OK)
            break;
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(j, "events"), i, e) print_event(e, o.json);
        fflush(stdout);
        cursor = (uint64_t)json_integer_value(json_object_get(j, "next"));
        json_decref(j);
    } while (a.follow);
    client_free(cl);
    return r;
}
