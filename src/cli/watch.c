/* watch.c: --watch on the list verbs, driven by the event feed's long-poll. */
#include "watch.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "feed-wait.h"
#include "output.h"
#include "verbs.h"

/* How long one long-poll waits (the server's maximum is 60 s). */
#define WATCH_WAIT_S 30

/* Ctrl-C ends a watch as its normal end: exit 0. The list on screen is complete (each draw
 * is flushed), and a curl transfer cannot be interrupted from a handler, so leave at once. */
static void on_interrupt(int sig) {
    (void)sig;
    if (isatty(STDOUT_FILENO))
        (void)!write(STDOUT_FILENO, "\n", 1);
    _exit(EXIT_OK);
}

/* The feed's head: the cursor after the last event the caller may see now (every page). */
static int feed_head(Client *cl, uint64_t *ret) {
    FeedWait w;
    long status = 0;
    Error err = {0};
    int r = feed_wait_start(&w, cl, "", "", &status, &err);
    if (r < 0)
        return feed_wait_fail(r, status, &err);
    *ret = w.cursor;
    return EXIT_OK;
}

static void draw(const ListView *v, json_t *doc, bool tty, bool first) {
    if (tty)
        fputs("\033[H\033[2J", stdout);
    else if (!first)
        putchar('\n');
    v->show(doc, v->userdata);
    fflush(stdout);
}

void watch_exit_on_interrupt(void) {
    struct sigaction sa = {.sa_handler = on_interrupt};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int list_watch(const RemoteOpts *o, const ListView *v) {
    watch_exit_on_interrupt();
    bool tty = isatty(STDOUT_FILENO);
    Client *cl = NULL;
    int r = remote_open(o, &cl);
    if (r != EXIT_OK)
        return r;
    /* The head first, then the list: a change between the two still wakes the first wait. */
    uint64_t cursor = 0;
    json_t *shown = NULL;
    if ((r = feed_head(cl, &cursor)) != EXIT_OK ||
        (r = v->fetch(cl, v->userdata, &shown)) != EXIT_OK)
        goto out;
    draw(v, shown, tty, true);
    for (;;) {
        char path[96];
        snprintf(path, sizeof(path), "/v1/events?after=%llu&wait=%d&limit=10000",
                 (unsigned long long)cursor, WATCH_WAIT_S);
        long status = 0;
        json_t *j = NULL;
        Error err = {0};
        if (client_call(cl, "GET", path, NULL, NULL, &status, &j, &err) < 0) {
            r = fail_error(EXIT_UNREACHABLE, &err);
            break;
        }
        json_t *next = json_object_get(j, "next");
        if (status == 410 || !json_is_integer(next)) {
            /* Retention dropped what came after our cursor (or an odd answer): start again
             * from the head; the refetch below shows whatever changed meanwhile. */
            json_decref(j);
            if (status != 410 && (status < 200 || status >= 300)) {
                r = fail(remote_exit_code(status), "events: the server answered HTTP %ld", status);
                break;
            }
            if ((r = feed_head(cl, &cursor)) != EXIT_OK)
                break;
        } else {
            cursor = (uint64_t)json_integer_value(next);
            json_decref(j);
        }
        json_t *now = NULL;
        if ((r = v->fetch(cl, v->userdata, &now)) != EXIT_OK)
            break;
        if (json_equal(now, shown)) {
            json_decref(now);
            continue;
        }
        json_decref(shown);
        shown = now;
        draw(v, shown, tty, false);
    }
out:
    json_decref(shown);
    client_free(cl);
    return r;
}
