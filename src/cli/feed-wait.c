/* feed-wait.c: --wait driven by the event feed's long-poll. */
#include "feed-wait.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "output.h"
#include "remote.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "wire/event.h"

/* One page of the feed after w->cursor; advances it. *ret NULL: a 410, the cursor was older
 * than what the server keeps, and now names the oldest it keeps (events may have been
 * missed). */
static int feed_page(FeedWait *w, const char *query, json_t **ret, long *ret_status, Error *err) {
    char path[128];
    snprintf(path, sizeof(path), "/v1/events?after=%llu&%s", (unsigned long long)w->cursor, query);
    long status = 0;
    json_t *j = NULL;
    int r = client_call(w->cl, "GET", path, NULL, NULL, &status, &j, err);
    if (r < 0)
        return r;
    if (ret_status)
        *ret_status = status;
    if (status == 410) {
        json_t *oldest = json_object_get(j, "oldest");
        bool moved = json_is_integer(oldest) && (uint64_t)json_integer_value(oldest) > w->cursor;
        if (moved)
            w->cursor = (uint64_t)json_integer_value(oldest);
        json_decref(j);
        *ret = NULL;
        return moved ? 0 : error_set(err, -EPROTO, "events: the server answered HTTP 410");
    }
    json_t *next = json_object_get(j, "next");
    if (status < 200 || status >= 300 || !json_is_integer(next)) {
        json_decref(j);
        return error_set(err, -EPROTO, "events: the server answered HTTP %ld", status);
    }
    if ((uint64_t)json_integer_value(next) > w->cursor)
        w->cursor = (uint64_t)json_integer_value(next);
    *ret = j;
    return 0;
}

int feed_wait_start(FeedWait *w, Client *cl, const char *type_prefix, const char *object,
                    long *ret_status, Error *err) {
    *w = (FeedWait){.cl = cl, .type_prefix = type_prefix, .object = object};
    for (;;) {
        uint64_t before = w->cursor;
        json_t *j = NULL;
        int r = feed_page(w, "limit=10000", &j, ret_status, err);
        if (r < 0)
            return r;
        if (!j) /* gone under us: page on from the oldest kept */
            continue;
        bool more = json_array_size(json_object_get(j, "events")) > 0 && w->cursor > before;
        json_decref(j);
        if (!more)
            return 0;
    }
}

int feed_wait_next(FeedWait *w, unsigned wait_s, FeedNews *ret, long *ret_status, Error *err) {
    char query[64];
    snprintf(query, sizeof(query), "wait=%u&limit=10000", wait_s > 60 ? 60 : wait_s);
    json_t *j = NULL;
    int r = feed_page(w, query, &j, ret_status, err);
    if (r < 0)
        return r;
    if (!j) { /* 410: what came after the cursor is gone; start again from the head */
        if ((r = feed_wait_start(w, w->cl, w->type_prefix, w->object, ret_status, err)) < 0)
            return r;
        *ret = FEED_MINE;
        return 0;
    }
    FeedNews news = FEED_QUIET;
    json_t *e;
    size_t i;
    json_array_foreach(json_object_get(j, "events"), i, e) {
        WireEvent ev;
        Error bad = {0};
        /* An entry that does not read is no news of ours (cmd-events.c says why it skips it). */
        const char *type = wire_event_from_json(e, &ev, &bad) >= 0 ? ev.type : NULL,
                   *object = type ? ev.object : NULL;
        if (!type || !string_has_prefix(type, w->type_prefix)) {
            if (news == FEED_QUIET)
                news = FEED_OTHER;
        } else if (object && STREQ(object, w->object)) {
            news = FEED_MINE;
            break;
        } else
            news = FEED_KIN;
    }
    json_decref(j);
    *ret = news;
    return 0;
}

unsigned feed_wait_seconds(int64_t now_ms, int64_t deadline_ms, unsigned max_s) {
    if (!deadline_ms)
        return max_s;
    if (deadline_ms <= now_ms)
        return 0;
    int64_t s = (deadline_ms - now_ms + 999) / 1000;
    return s < (int64_t)max_s ? (unsigned)s : max_s;
}

bool feed_wait_out_away(int r, long status, const Error *err, int64_t *away_ms, int64_t max_ms,
                        const char *who, const char *then) {
    if (!(r == -ECONNREFUSED || r == -EIO || status == 503) || *away_ms >= max_ms)
        return false;
    if (!*away_ms)
        fprintf(stderr, "einsora: %sthe server is away (%s); %s\n", who,
                r >= 0 || r == -EPROTO ? "restarting" : error_message(err), then);
    nanosleep(&(struct timespec){1, 0}, NULL);
    *away_ms += 1000;
    return true;
}

int feed_wait_fail(int r, long status, const Error *err) {
    return fail_error(r == -EPROTO ? remote_exit_code(status) : EXIT_UNREACHABLE, err);
}
