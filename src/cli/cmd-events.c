/* cmd-events.c: `einsora events [--after N] [--follow]`: the change feed, every page to the end
 * (or --limit N); --follow keeps long-polling from the last cursor (resumable: pass --after the
 * cursor printed by -o json, or the last SEQ seen). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "feed-wait.h"
#include "listing.h"
#include "output.h"
#include "remote.h"
#include "util/strutil.h"
#include "verbs.h"
#include "watch.h"
#include "wire/event.h"

typedef struct EvArgs {
    uint64_t after;
    bool follow;
    ListOpts list;
} EvArgs;

static int on_extra(int c, const char *arg, void *userdata) {
    EvArgs *a = userdata;
    int r;
    if (list_option(&a->list, c, arg, &r))
        return r;
    if (c == 'f')
        a->follow = true;
    else if (parse_uint64(arg, UINT64_MAX, &a->after) < 0)
        return fail(EXIT_USAGE, "events: --after takes an event number, not '%s'", arg);
    return 0;
}

#define EVENT_ROW "%-8s %-20s %-18s %-10s %s\n"

static void print_event(const EvArgs *a, bool json_lines, json_t *e) {
    if (json_lines) {
        char *s = json_dumps(e, JSON_COMPACT);
        if (s)
            puts(s);
        free(s);
        return;
    }
    WireEvent ev;
    Error err = {0};
    json_mask_control(e);                         /* server text, printed on a terminal */
    if (wire_event_from_json(e, &ev, &err) < 0) { /* one unreadable entry does not end the feed */
        fprintf(stderr, "events: an event from the server does not read: %s\n",
                error_message(&err));
        return;
    }
    if (a->list.format == LIST_NAME) {
        printf("event/%llu\n", (unsigned long long)ev.seq);
        return;
    }
    time_t t = (time_t)(ev.time_ms / 1000);
    char when[32], seq[24], actor[256];
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    snprintf(seq, sizeof(seq), "%llu", (unsigned long long)ev.seq);
    const char *reason = json_str(ev.data, "reason");
    snprintf(actor, sizeof(actor), "%s%s%s", ev.actor, reason && reason[0] ? ": " : "",
             reason ? reason : "");
    printf(EVENT_ROW, seq, when, ev.type, ev.object, actor);
}

static const char usage[] =
        "usage: einsora events [--after N] [--follow|--watch] [-o FORMAT] [--no-headers]\n"
        "                      [--limit N]\n\n"
        "Print the change feed (your requests' events; admins see all), every page to the end;\n"
        "with --json, one JSON object per event and line (also with --follow).\n"
        "  --after N        start after event N (the cursor `next` of -o json, or a SEQ)\n"
        "  --follow         keep waiting for new events, printing each as it comes (Ctrl-C ends\n"
        "                   it with exit code 0)\n"
        "  --watch          the same as --follow (the feed only grows)\n" LIST_HELP;

#define FOLLOW_GAP_MAX_MS 120000

int verb_events(int argc, char **argv) {
    static const struct option extra[] = {
            {"after", required_argument, NULL, 'a'},
            {"follow", no_argument, NULL, 'f'},
            {"watch", no_argument, NULL, 'f'}, /* the feed only grows: watching is following */
            LIST_OPTIONS,
            {},
    };
    RemoteOpts o = {0};
    EvArgs a = {0};
    int r = remote_getopt(argc, argv, extra, on_extra, &a, &o, usage);
    if (r >= 0)
        return r;
    if (optind < argc)
        return fail(EXIT_USAGE, "events: unexpected argument '%s'", argv[optind]);
    bool json_lines = o.json; /* --json kept its meaning: JSON lines */
    bool document = !json_lines && (a.list.format == LIST_JSON || a.list.format == LIST_YAML);
    if (document && a.follow)
        return fail(EXIT_USAGE,
                    "events: -o json|yaml print one document; with --follow use --json");
    if (a.list.format == LIST_WIDE)
        a.list.format = LIST_TABLE; /* the table already shows every field */
    Client *cl = NULL;
    if ((r = remote_open(&o, &cl)) != EXIT_OK)
        return r;
    char path[128];
    /* First everything there is (page by page), then, with --follow, long polls. */
    json_t *doc = NULL;
    if ((r = list_fetch(&o, cl, "/v1/events", "events", &a.list, a.after, &doc)) != EXIT_OK) {
        client_free(cl);
        return r;
    }
    if (document) {
        client_free(cl);
        if (!json_object_get(doc, "next"))
            json_object_set_new(doc, "next", json_integer((json_int_t)a.after));
        return list_print_document(&a.list, doc);
    }
    if (!json_lines && a.list.format == LIST_TABLE && !a.list.no_headers)
        printf(EVENT_ROW, "SEQ", "TIME", "TYPE", "OBJECT", "BY");
    size_t i;
    json_t *e;
    /* --limit N stops after N events in all, followed ones too ("stop after N items"). */
    uint64_t printed = 0;
    json_array_foreach(json_object_get(doc, "events"), i, e) {
        print_event(&a, json_lines, e);
        printed++;
    }
    fflush(stdout);
    uint64_t cursor = a.after;
    if (json_is_integer(json_object_get(doc, "next")))
        cursor = (uint64_t)json_integer_value(json_object_get(doc, "next"));
    json_decref(doc);
    if (a.follow)
        watch_exit_on_interrupt();
    int64_t gap_ms = 0; /* how long the server has been away while following */
    while (a.follow && !(a.list.limit && printed >= a.list.limit)) {
        snprintf(path, sizeof(path), "/v1/events?after=%llu&wait=30", (unsigned long long)cursor);
        json_t *j = NULL;
        long status = 0;
        Error err = {0};
        int cr = client_call(cl, "GET", path, NULL, NULL, &status, &j, &err);
        /* A planned restart (503 while the server drains, a long-poll cut off by its exit,
         * then refused connections) is waited out, as a follow should outlive it, for up to
         * FOLLOW_GAP_MAX_MS, from the cursor. The first page was read, so a connection that
         * breaks now (-EIO) is the server going, not a wrong URL or certificate. */
        if (feed_wait_out_away(cr, status, &err, &gap_ms, FOLLOW_GAP_MAX_MS,
                               "events: ", "following on once it answers")) {
            json_decref(j);
            continue;
        }
        if (cr < 0 || status < 200 || status >= 300) {
            json_decref(j); /* asked once more for the usual sentence and exit code */
            if ((r = remote_call_on(cl, "GET", path, NULL, NULL, &j)) != EXIT_OK)
                break;
        }
        gap_ms = 0;
        json_array_foreach(json_object_get(j, "events"), i, e) {
            if (a.list.limit && printed >= a.list.limit)
                break;
            print_event(&a, json_lines, e);
            printed++;
        }
        fflush(stdout);
        cursor = (uint64_t)json_integer_value(json_object_get(j, "next"));
        json_decref(j);
    }
    client_free(cl);
    return r;
}
