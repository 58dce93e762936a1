/* work-watch.h: the agent's long-poll of its node's work (GET /v1/nodes/{name}/work), so a
 * placement, a stop or a task reaches it within milliseconds rather than at its next
 * heartbeat (which then only says the agent is alive and what runs here).
 *
 * The cursor is the server's name for the work last seen (api-work.c): an answer comes as soon
 * as the work differs from it, and the same cursor resumes after a reconnect without missing
 * anything. A control plane without the route (older, 404/405) is remembered as such: the
 * agent then takes its work from each heartbeat's answer as before. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "client/client.h"
#include "util/error.h"

#define WORK_WATCH_WAIT_MAX_S 30
/* While workloads run, a wait ends after this long so the agent looks at them again: one that
 * exited on its own frees its GPUs within about this, not at the next heartbeat. */
#define WORK_WATCH_EXIT_CHECK_S 1

typedef struct WorkWatch {
    char cursor[24];    /* "" until the first answer */
    bool unsupported;   /* the control plane has no work route */
    bool workloads_run; /* the agent's drivers run workloads: waits are WORK_WATCH_EXIT_CHECK_S */
} WorkWatch;

/* Wait up to wait_s (capped at WORK_WATCH_WAIT_MAX_S, or WORK_WATCH_EXIT_CHECK_S while
 * workloads_run) for node's work to differ from the
 * cursor. Returns 1 with the work ({tasks, workloads, ...} as a heartbeat answers it) in
 * *ret_work when it changed (or on the first call), 0 when the wait ended with nothing new,
 * -EOPNOTSUPP (and sets unsupported) when the control plane has no such route, -ENOENT when it
 * does not know the node, another negative errno with a sentence when it cannot be reached or
 * answers an error. */
int work_watch_poll(WorkWatch *w, Client *cl, const char *node, unsigned wait_s, json_t **ret_work,
                    Error *err);
