/* cmd-request.c: `einsora request create|show|cancel|release`. create --wait follows the
 * request until it is placed (or refused), woken by the event feed, showing why it waits. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "feed-wait.h"
#include "output.h"
#include "suggest.h"
#include "remote.h"
#include "request-flags.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "verbs.h"
#include "wait-progress.h"
#include "wire/request.h"

static const char usage[] =
        "usage: einsora request create --kind KIND (--class CLASS | --memory GB) [--count N]\n"
        "                              [--class CLASS --memory GB]\n"
        "                              [--guest-os linux|macos] [--share] [--runtime R]\n"
        "                              [--model M] [--image IMAGE] [--env KEY=VALUE]...\n"
        "                              [--port N]... [--fallback A,B,...] [--wait-s S]\n"
        "                              [--key KEY] [--wait] [--wait-for-nodes]\n"
        "                              [--timeout DURATION] [-- CMD...]\n"
        "       einsora request show|cancel|release ID\n\n"
        "create prints the request's id and state; with --wait it waits until the request is\n"
        "placed, showing why it waits: on a terminal one status line redrawn in place (state,\n"
        "queue position, time until the fallback opens, reason), otherwise one line per\n"
        "change. Exit 1 when refused, or with --wait when it was cancelled while it waited;\n"
        "with --timeout, 6 when it is still pending (--json prints it as it "
        "is).\n" REQUEST_FLAG_HELP
        "  --key KEY         Idempotency-Key: submitting again with the same key returns the\n"
        "                    same request (default: a random key, reused when the CLI retries\n"
        "                    a lost answer)\n"
        "  --wait            wait until the request is placed or refused\n"
        "  --timeout D       with --wait (implied): give up waiting after D (90s, 15m, 2h) with\n"
        "                    exit code 6; the request stays queued until cancelled\n\n";

/* How long --wait waits out a control plane that does not answer (a restart) before it
 * gives up, saying the request stays queued. */
#define REQUEST_AWAY_MAX_MS 120000

typedef struct CreateArgs {
    json_t *body;
    const char *key;
    bool wait;
    int bad;
    int64_t timeout_ms; /* --timeout: 0 waits as long as it takes */
} CreateArgs;

static int on_extra(int c, const char *arg, void *userdata) {
    CreateArgs *a = userdata;
    int r = request_flag(c, arg, a->body, "request");
    if (r != 1)
        return r;
    switch (c) {
    case 'K':
        a->key = arg;
        break;
    case 'w':
        a->wait = true;
        break;
    case 'T':
        if (parse_duration_ms(arg, INT64_C(366) * 24 * 3600 * 1000, &a->timeout_ms) < 0 ||
            a->timeout_ms == 0)
            return fail(EXIT_USAGE, "request: --timeout takes a duration such as 90s, 15m or 2h");
        a->wait = true;
        break;
    }
    return 0;
}

/* Ctrl-C during --wait: say the request stays queued and how to cancel it, rather than
 * leaving the user to guess whether the interrupt withdrew it. */
static volatile sig_atomic_t interrupted;

/* The longest one long-poll of a wait lasts off a terminal (the server's limit is 60 s). */
#define REQUEST_WAIT_POLL_S 30

static void on_interrupt(int sig) {
    interrupted = sig;
}

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* On a terminal: redraw the one status line in place (the fallback's countdown moves every
 * second). The server's fallback_at_ms is wall-clock time, hence the realtime clock. */
static void redraw_progress(json_t *q) {
    struct winsize ws = {0};
    size_t width = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 ? ws.ws_col : 0;
    char line[1024];
    printf("\r\033[K%s", wait_progress_line(q, wall_ms(), width, line, sizeof(line)));
    fflush(stdout);
}

static void print_request(json_t *q) {
    json_mask_control(q);
    json_t *pl = json_object_get(q, "placement");
    char id[24];
    printf("request %s: %s", json_int_str(q, "id", id, sizeof(id)), json_str(q, "state"));
    const char *state = json_str(q, "state");
    if (pl && state && (STREQ(state, "placed") || STREQ(state, "active"))) {
        printf(" on %s (%s, %s", json_str(pl, "node"), json_str(pl, "class"),
               json_str(pl, "method"));
        const char *crt = json_str(pl, "container_runtime"),
                   *ert = json_str(pl, "endpoint_runtime");
        if (crt && STRNEQ(crt, "none"))
            printf(", %s", crt);
        if (ert && STRNEQ(ert, "none"))
            printf(", %s", ert);
        printf(")");
        json_t *fb = json_object_get(pl, "fallback_index");
        if (json_is_integer(fb) && json_integer_value(fb) >= 0) /* R13: not its first choice */
            printf(" by its fallback %lld, after the wait", (long long)json_integer_value(fb) + 1);
        if (json_str(pl, "url")) /* a notebook's or an endpoint's address */
            printf(" at %s", json_str(pl, "url"));
    } else if (json_str(q, "reason")) {
        /* A refusal's sentence starts with "refused (...)": do not say it twice. */
        const char *reason = json_str(q, "reason");
        size_t n = state ? strlen(state) : 0;
        if (n && !strncmp(reason, state, n))
            printf("%s", reason + n);
        else
            printf(": %s", reason);
    }
    json_t *pos = json_object_get(q, "queue_position"), *at = json_object_get(q, "fallback_at_ms");
    if (json_is_integer(pos))
        printf(" [queue position %lld]", (long long)json_integer_value(pos));
    if (json_is_integer(at) && state && STREQ(state, "pending")) { /* R13: when it opens */
        int64_t left = (int64_t)json_integer_value(at) - wall_ms();
        char d[32];
        if (left > 0)
            printf(" [fallback opens in %s]", wait_format_duration(left, d, sizeof(d)));
        else
            printf(" [fallback open]");
    }
    printf("\n");
}

/* 1 for a refusal, and with --wait for a request cancelled while it waited: it will never be
 * placed, which a script waiting for the placement must not read as done. */
static int exit_for(json_t *q, bool waited) {
    const char *st = json_str(q, "state");
    return st && (STREQ(st, "refused") || (waited && STREQ(st, "cancelled"))) ? EXIT_FAIL : EXIT_OK;
}

/* A create without --key still carries a key, made here, so that a retry after a lost answer
 * (a timeout, a dropped connection) is answered with the first placement, never a second. */
static int default_key(char buf[40]) {
    uint8_t rnd[16];
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        return -EIO;
    strcpy(buf, "cli-");
    for (size_t i = 0; i < sizeof(rnd); i++)
        snprintf(buf + 4 + 2 * i, 3, "%02x", rnd[i]);
    return 0;
}

static int create(RemoteOpts *o, CreateArgs *a) {
    Client *cl = NULL;
    json_t *q = NULL;
    char made[40];
    const char *key = a->key; /* the caller's key is left as given: made[] dies here */
    if (!key) {
        if (default_key(made) < 0)
            return fail(EXIT_FAIL, "cannot get random bytes for an Idempotency-Key");
        key = made;
    }
    int r = remote_open(o, &cl);
    if (r != EXIT_OK)
        return r;
    r = remote_call_on(cl, "POST", "/v1/requests", a->body, key, &q);
    /* The answer may have been lost after the server committed: the same key again is
     * answered with that request, never a second one. */
    for (int attempt = 1; r == EXIT_UNREACHABLE && attempt < 3; attempt++) {
        sleep(1);
        fprintf(stderr, "einsora: retrying with Idempotency-Key %s\n", key);
        r = remote_call_on(cl, "POST", "/v1/requests", a->body, key, &q);
    }
    if (r == EXIT_UNREACHABLE)
        fprintf(stderr, "einsora: to retry without placing twice, run again with --key %s\n", key);
    char last_reason[512] = "";
    int64_t deadline = a->timeout_ms ? cli_monotonic_ms() + a->timeout_ms : 0;
    if (a->wait) {
        /* No SA_RESTART; the feed's long-poll is told to give up (client_set_abort). */
        struct sigaction sa = {.sa_handler = on_interrupt};
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
    }
    /* A terminal gets one line redrawn in place; a pipe or file one line per change. */
    bool redraw = !o->json && isatty(STDOUT_FILENO), drawn = false, feeding = false;
    int64_t away_ms = 0; /* how long the server has not answered the wait */
    FeedWait feed;
    char id[24] = "";
    if (r == EXIT_OK)
        json_int_str(q, "id", id, sizeof(id));
    while (r == EXIT_OK && a->wait && STREQ(strempty(json_str(q, "state")), "pending")) {
        bool timed_out = deadline && cli_monotonic_ms() >= deadline;
        if (drawn && (interrupted || timed_out)) {
            putchar('\n'); /* keep the last status line, end it */
            drawn = false;
        }
        if (interrupted || timed_out) {
            if (o->json) /* a script gets the request as it is, its id first of all */
                (void)print_json(q);
            else
                json_decref(q);
            client_free(cl);
            return fail(interrupted ? EXIT_INTERRUPTED : EXIT_TIMEOUT,
                        "%srequest %s is still pending%s; it stays queued (cancel it with "
                        "`einsora request cancel %s`)",
                        interrupted ? "interrupted: " : "", id,
                        interrupted ? "" : " after --timeout", id);
        }
        /* One line per change of the reason or the queue position. */
        char now[512];
        snprintf(now, sizeof(now), "%lld %s",
                 (long long)json_integer_value(json_object_get(q, "queue_position")),
                 strempty(json_str(q, "reason")));
        if (redraw) {
            redraw_progress(q);
            drawn = true;
        } else if (!o->json && STRNEQ(last_reason, now)) {
            print_request(q);
            fflush(stdout);
            snprintf(last_reason, sizeof(last_reason), "%s", now);
        }
        /* Woken by the feed, not a timed poll: the request is read again only when an event
         * of it, or of another request (its queue position), came. A terminal still wakes
         * each second to move the fallback's countdown. */
        FeedNews news = FEED_MINE;
        long status = 0;
        Error err = {0};
        int fr;
        if (!feeding) {
            /* The head before the first read: a change in between wakes the first wait. */
            fr = feed_wait_start(&feed, cl, "request.", id, &status, &err);
            feeding = true;
        } else {
            client_set_abort(cl, &interrupted); /* Ctrl-C must not sit out a long-poll */
            fr = feed_wait_next(&feed,
                                feed_wait_seconds(cli_monotonic_ms(), deadline,
                                                  redraw ? 1 : REQUEST_WAIT_POLL_S),
                                &news, &status, &err);
            client_set_abort(cl, NULL);
        }
        if (fr < 0 && interrupted)
            continue;
        /* A restart of the control plane (a long-poll cut off, refused connections, the
         * drain's 503) is waited out, as the request outlives it (R16). */
        if (fr < 0 && feed_wait_out_away(fr, status, &err, &away_ms, REQUEST_AWAY_MAX_MS, "",
                                         "waiting for it to answer"))
            continue;
        if (fr < 0) {
            r = feed_wait_fail(fr, status, &err);
            break;
        }
        away_ms = 0;
        /* A quiet long-poll off a terminal (30 s) reads it once anyway: a change that
         * publishes no event, such as the fallback opening, still shows. */
        if (news == FEED_OTHER || (news == FEED_QUIET && redraw))
            continue;
        char path[64];
        snprintf(path, sizeof(path), "/v1/requests/%s", id);
        json_t *now_q = NULL;
        long st = 0;
        Error e = {0};
        int cr = client_call(cl, "GET", path, NULL, NULL, &st, &now_q, &e);
        if (cr >= 0 && st == 200 && json_is_object(now_q)) {
            json_decref(q);
            q = now_q;
            continue;
        }
        json_decref(now_q);
        /* The server going away between the feed and this read: waited out as above. */
        if (feed_wait_out_away(cr, st, &e, &away_ms, REQUEST_AWAY_MAX_MS, "",
                               "waiting for it to answer"))
            continue;
        json_decref(q); /* asked once more for the usual sentence and exit code */
        q = NULL;
        r = remote_call_on(cl, "GET", path, NULL, NULL, &q);
    }
    client_free(cl);
    if (drawn)
        putchar('\n');
    if (r == EXIT_UNREACHABLE && a->wait && id[0])
        fprintf(stderr,
                "einsora: request %s stays queued; see it with `einsora request show %s`, "
                "cancel it with `einsora request cancel %s`\n",
                id, id, id);
    if (r != EXIT_OK)
        return r;
    r = exit_for(q, a->wait);
    if (o->json)
        print_json(q);
    else {
        print_request(q);
        json_decref(q);
    }
    return r;
}

/* What the flags alone show wrong is a usage error (exit 2) before any call: the server would
 * refuse it too, naming API fields instead of flags, and an unreachable one would hide it. */
static int create_checked(RemoteOpts *o, CreateArgs *a) {
    int r = request_flags_check(a->body, "request create");
    return r ? r : create(o, a);
}

int verb_request(int argc, char **argv) {
    static const struct option extra[] = {
            REQUEST_FLAG_OPTIONS,
            {"key", required_argument, NULL, 'K'},
            {"wait", no_argument, NULL, 'w'},
            {"timeout", required_argument, NULL, 'T'},
            {},
    };
    RemoteOpts o = {0};
    CreateArgs a = {.body = json_object()};
    int n_cmd = request_command_length(argc, argv); /* before getopt moves the arguments */
    int r = remote_getopt(argc, argv, extra, on_extra, &a, &o, usage);
    if (r >= 0) {
        json_decref(a.body);
        return r;
    }
    const char *sub = optind < argc ? argv[optind++] : NULL;
    if (sub && STREQ(sub, "create")) {
        /* What follows "--" is the command; anything else is a mistake to say. */
        if (argc - optind > (n_cmd > 0 ? n_cmd : 0)) {
            json_decref(a.body);
            return fail(EXIT_USAGE, "request create: unexpected argument '%s'", argv[optind]);
        }
        if (n_cmd > 0)
            request_set_command(argv + argc - n_cmd, n_cmd, a.body);
        r = create_checked(&o, &a);
        json_decref(a.body);
        return r;
    }
    json_decref(a.body);
    const char *id = optind < argc ? argv[optind++] : NULL;
    static const char *const subs[] = {"create", "show", "cancel", "release"};
    if (sub && STRNEQ(sub, "show") && STRNEQ(sub, "cancel") && STRNEQ(sub, "release")) {
        return cli_unknown_sub("request", sub, subs, ARRAY_SIZE(subs));
    }
    if (!sub)
        return fail(EXIT_USAGE, "request: missing what to do: create, show, cancel or release "
                                "(einsora request --help)");
    if (!id)
        return fail(EXIT_USAGE, "request %s: missing the request ID", sub);
    if (optind < argc)
        return fail(EXIT_USAGE, "request %s: unexpected argument '%s'", sub, argv[optind]);
    uint64_t idv;
    if (parse_decimal_uint64(id, INT64_MAX, &idv) < 0 || idv == 0)
        return fail(EXIT_USAGE,
                    "request %s: '%.64s' is not a request id (a positive decimal number)", sub, id);
    char path[128];
    json_t *q = NULL;
    if (STREQ(sub, "show")) {
        snprintf(path, sizeof(path), "/v1/requests/%.64s", id);
        r = remote_call(&o, "GET", path, NULL, NULL, &q);
    } else {
        snprintf(path, sizeof(path), "/v1/requests/%.64s/%s", id, sub);
        r = remote_call(&o, "POST", path, NULL, NULL, &q);
    }
    if (r != EXIT_OK)
        return r;
    if (o.json)
        return print_json(q);
    print_request(q);
    json_decref(q);
    return EXIT_OK;
}
