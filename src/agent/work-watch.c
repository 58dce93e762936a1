/* work-watch.c: the agent's long-poll of its node's work (work-watch.h). */
#include "agent/work-watch.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/macro.h"
#include "util/strutil.h"

int work_watch_poll(WorkWatch *w, Client *cl, const char *node, unsigned wait_s, json_t **ret_work,
                    Error *err) {
    _cleanup_free_ char *name = client_escape(node);
    unsigned cap = w->workloads_run ? WORK_WATCH_EXIT_CHECK_S : WORK_WATCH_WAIT_MAX_S;
    _cleanup_free_ char *path = !name          ? NULL
                                : w->cursor[0] ? strprintf("/v1/nodes/%s/work?after=%s&wait=%u",
                                                           name, w->cursor, MIN(wait_s, cap))
                                               : strprintf("/v1/nodes/%s/work", name);
    if (!path)
        return error_set(err, -ENOMEM, "out of memory");
    long status = 0;
    json_t *ans = NULL;
    int r = client_call(cl, "GET", path, NULL, NULL, &status, &ans, err);
    if (r < 0)
        return r;
    const char *cursor = json_string_value(json_object_get(ans, "cursor"));
    if (client_route_unknown(status, ans) && !cursor) {
        json_decref(ans);
        w->unsupported = true;
        return error_set(err, -EOPNOTSUPP,
                         "the control plane has no work route: heartbeats carry the work");
    }
    if (status != 200 || !cursor || strlen(cursor) >= sizeof(w->cursor)) {
        r = status == 404 ? -ENOENT : -EIO;
        error_set(err, r, "GET %s: %ld %s", path, status,
                  ans ? strempty(json_string_value(json_object_get(ans, "message")))
                      : "(no JSON answer)");
        json_decref(ans);
        return r;
    }
    bool changed = !STREQ(cursor, w->cursor);
    snprintf(w->cursor, sizeof(w->cursor), "%s", cursor);
    if (!changed) {
        json_decref(ans);
        return 0;
    }
    *ret_work = ans;
    return 1;
}
