/* cmd-run.c: `einsora run --kind K --class C [request flags] [--rm] [-- CMD...]`: submit a
 * workload, wait for its placement (showing why it waits and its place in the queue), then
 * follow it until it runs and until it ends. Ctrl-C while it waits cancels it with --rm, and
 * otherwise says how to cancel it: never a silent pending request left behind. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "output.h"
#include "remote.h"
#include "request-flags.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "verbs.h"

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

typedef struct RunArgs {
    json_t *body;
    bool rm, detach;
} RunArgs;

static int on_extra(int c, const char *arg, void *userdata) {
    RunArgs *a = userdata;
    int r = request_flag(c, arg, a->body, "run");
    if (r != 1)
        return r;
    switch (c) {
    case 'r':
        a->rm = true;
        break;
    case 'd':
        a->detach = true;
        break;
    default:
        return EXIT_USAGE;
    }
    return 0;
}

static const char usage[] =
        "usage: einsora run --kind KIND (--class CLASS | --memory GB) [--count N]\n"
        "                   [--image IMAGE] [--env KEY=VALUE]... [--port N]... [--model M]\n"
        "                   [--fallback A,B,...] [--wait-s S] [--rm] [--detach] [-- CMD...]\n\n"
        "Submit a workload and follow it: the reason and queue position while it waits, then\n"
        "running, then how it ended (exit code, or the engine's sentence). It takes every flag\n"
        "of `request create` that describes the request.\n"
        "Exit 0 when it ended with code 0 (or runs, with --detach), 130 on Ctrl-C while it\n"
        "waits (with --rm its request is cancelled), 1 otherwise.\n\n" REQUEST_FLAG_HELP
        "  --rm              Ctrl-C while it waits cancels the request (without: it stays\n"
        "                    queued and the CLI says how to cancel it)\n"
        "  --detach          return once it runs instead of following it to its end\n";

/* Sleep up to one second, waking on Ctrl-C. */
static void nap(void) {
    for (int i = 0; i < 10 && !interrupted; i++)
        nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
}

static int follow(RemoteOpts *o, Client *cl, json_t *q, RunArgs *a) {
    char path[64], last[600] = "";
    long long id = (long long)json_integer_value(json_object_get(q, "id"));
    snprintf(path, sizeof(path), "/v1/requests/%lld", id);
    int r = EXIT_OK;
    json_incref(q);
    for (;;) {
        const char *st = strempty(json_str(q, "state")), *why = json_str(q, "reason");
        char line[600];
        json_t *pos = json_object_get(q, "queue_position");
        snprintf(line, sizeof(line), "request %lld: %s%s%s", id, st, why ? " - " : "",
                 strempty(why));
        if (json_is_integer(pos))
            snprintf(line + strlen(line), sizeof(line) - strlen(line), " (queue position %lld)",
                     (long long)json_integer_value(pos));
        /* A notebook's or an endpoint's address: what the user came for. */
        const char *url = json_str(json_object_get(q, "placement"), "url");
        if (url && STREQ(st, "active"))
            snprintf(line + strlen(line), sizeof(line) - strlen(line), " at %s", url);
        if (!o->json && STRNEQ(line, last)) {
            printf("%s\n", line);
            fflush(stdout);
            snprintf(last, sizeof(last), "%s", line);
        }
        if (STREQ(st, "ended") || STREQ(st, "refused") || STREQ(st, "released") ||
            STREQ(st, "cancelled")) {
            r = STREQ(st, "ended") && why && STREQ(why, "exited with code 0") ? EXIT_OK : EXIT_FAIL;
            break;
        }
        if (a->detach && STREQ(st, "active"))
            break;
        if (interrupted) {
            if (STREQ(st, "pending") && a->rm) {
                char cancel[80];
                snprintf(cancel, sizeof(cancel), "%s/cancel", path);
                json_t *ans = NULL;
                if (remote_call_on(cl, "POST", cancel, NULL, NULL, &ans) == EXIT_OK)
                    fprintf(stderr, "einsora: interrupted: request %lld cancelled\n", id);
                json_decref(ans);
            } else
                fprintf(stderr,
                        "einsora: interrupted: request %lld is still %s; `einsora stop "
                        "%lld` ends it\n",
                        id, st, id);
            r = EXIT_INTERRUPTED; /* as every wait's Ctrl-C (cli.md) */
            break;
        }
        nap();
        json_decref(q);
        q = NULL;
        if ((r = remote_call_on(cl, "GET", path, NULL, NULL, &q)) != EXIT_OK)
            return r;
    }
    if (o->json)
        print_json(json_incref(q));
    json_decref(q);
    return r;
}

int verb_run(int argc, char **argv) {
    static const struct option extra[] = {REQUEST_FLAG_OPTIONS,
                                          {"rm", no_argument, NULL, 'r'},
                                          {"detach", no_argument, NULL, 'd'},
                                          {}};
    RunArgs a = {.body = json_object()};
    RemoteOpts o = {0};
    int r = remote_getopt(argc, argv, extra, on_extra, &a, &o, usage);
    if (r >= 0) {
        json_decref(a.body);
        return r;
    }
    if (optind < argc)
        request_set_command(argv + optind, argc - optind, a.body);
    if ((r = request_flags_check(a.body, "run")) != 0) {
        json_decref(a.body);
        return r;
    }
    struct sigaction sa = {.sa_handler = on_sigint};
    sigaction(SIGINT, &sa, NULL);
    Client *cl = NULL;
    json_t *q = NULL;
    if ((r = remote_open(&o, &cl)) == EXIT_OK &&
        (r = remote_call_on(cl, "POST", "/v1/requests", a.body, NULL, &q)) == EXIT_OK)
        r = follow(&o, cl, q, &a);
    json_decref(q);
    json_decref(a.body);
    client_free(cl);
    return r;
}
