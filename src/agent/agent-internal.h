/* agent-internal.h: what the agent's loop (agent-run.c) shares with the modules that do its
 * work for it (agent-tasks.c): the agent's state and its helpers. Not a public interface. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/agent-run.h"
#include "agent/bind.h"
#include "agent/confirm.h"
#include "agent/inventory-cache.h"
#include "agent/work-watch.h"
#include "agent/workloads.h"
#include "client/client.h"
#include "core/catalog.h"
#include "util/error.h"

typedef struct Agent {
    const AgentConfig *cfg;
    Client *cl;
    Catalog *catalog;
    char *pushed;  /* the node description last accepted by the control plane */
    bool push_due; /* discover and push again at the next turn */
    unsigned turns;
    bool lost;    /* the control plane did not answer last time: log once, not every turn */
    bool stopped; /* this turn stopped a workload: its GPU may still be let go of */
    BindOptions bind;
    Driver *drivers[3]; /* container engine, libvirt, processes: once they answered (workloads.h) */
    bool lost_driver[3]; /* a driver did not answer last time: log once */
    /* The driver's state file may name workloads of ours: its driver is configured, or the
     * file was there at the start (a driver configured before). Otherwise a stop need not
     * read it to learn that the driver does not run the workload. */
    bool slot_may_list[3];
    WorkWatch watch;          /* the long-poll of this node's work (work-watch.h) */
    bool watch_failing;       /* its last poll failed: log once, not every retry */
    ConfirmPool confirms;     /* the connections that confirm started workloads side by side */
    InventoryCache inventory; /* the last discovery, for workload starts */
    bool confirm_due;         /* a confirmation went unanswered: look at the work again next turn */
    unsigned running_writes;  /* rewrites of "running": a text read before is current while equal */
} Agent;

/* One line on the agent's log ("agent NAME: ..."), if it has one. */
void agent_logf(const Agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Files of the agent's state directory: the path, the text (NULL if absent), and the
 * replacement of the "<key> <value>" line of key (value NULL: removed). */
char *agent_state_file(const Agent *a, const char *name);
char *agent_read_state(const Agent *a, const char *name);
int agent_state_set_line(const Agent *a, const char *name, const char *key, const char *value,
                         Error *err);
/* One call to the control plane, noting a lost or returning control plane in the log. */
int agent_call(Agent *a, const char *method, const char *path, json_t *body, long *ret_status,
               json_t **ret_json);
int64_t agent_mono_ms(void);

/* agent-tasks.c: do one queued task (bind, reset check) and report its result. */
void agent_do_task(Agent *a, json_t *j);
