/* watch.h: --watch on the list verbs: draw the list, then redraw it whenever it changes,
 * woken by the event feed's long-poll rather than a timed poll. */
#pragma once

#include <jansson.h>

#include "client/client.h"
#include "remote.h"

typedef struct ListView {
    /* GET the list (every page) on cl: EXIT_OK and *ret, or an exit code after saying why. */
    int (*fetch)(Client *cl, void *userdata, json_t **ret);
    /* Print doc (kept by the caller) as the verb's -o format. */
    void (*show)(json_t *doc, void *userdata);
    void *userdata;
} ListView;

/* From now on Ctrl-C (and SIGTERM) ends the process with exit 0: the normal end of a watch
 * or a follow, whose output is flushed as it goes. */
void watch_exit_on_interrupt(void);

/* Draw v once, then wait on GET /v1/events?wait=... from the feed's head and redraw (on a
 * terminal: the screen cleared first, like watch(1); otherwise after a blank line) each time
 * the fetched list differs from the last one drawn. A long-poll that ends without events
 * also refetches, so a change that publishes no event the caller may see (a node's
 * heartbeat) shows within one wait. Ends on Ctrl-C with exit 0, or with the exit code of a
 * failed call. */
int list_watch(const RemoteOpts *o, const ListView *v);
