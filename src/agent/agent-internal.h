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

/* The workload drivers an agent may run: container engine, libvirt, processes. */
#define AGENT_SLOTS 3

typedef struct Agent {
    const AgentConfig *cfg;
    Client *cl;
    Catalog *catalog;
    char *pushed; /* the node description last accepted by the control plane */
    /* The control plane keeps the node as it was, refusing this agent's new description
     * while workloads run there (409): the node is registered, so it heartbeats and takes
     * its work meanwhile, its push tried again each turn. */
    bool kept_as_was;
    bool push_due; /* discover and push again at the next turn */
    unsigned turns;
    bool lost;    /* the control plane did not answer last time: log once, not every turn */
    bool denied;  /* it refused this agent's token (401): said once, with what to do */
    bool stopped; /* this turn stopped a workload: its GPU may still be let go of */
    BindOptions bind;
    Driver *drivers[AGENT_SLOTS];  /* container engine, libvirt, processes: once they answered */
    bool lost_driver[AGENT_SLOTS]; /* a driver did not answer last time: log once */
    /* The driver's state file may name workloads of ours: its driver is configured, or the
     * file was there at the start (a driver configured before). Otherwise a stop need not
     * read it to learn that the driver does not run the workload. */
    bool slot_may_list[AGENT_SLOTS];
    /* Workloads adopted from an engine that this agent has no record of starting (its state
     * folder lost, or a container made by hand with its labels): taken as ours only once the
     * control plane places their request here; never stopped as ours otherwise. */
    char **unvouched;
    size_t n_unvouched;
    /* The control plane's last refusal of an inventory push (a 409 while workloads run): the
     * push is tried again every turn, and the refusal logged once while it stays the same. */
    char *push_refusal;
    /* What the last push said of GPUs whose discovery failed (hold_faulty()): logged when it
     * changes, not at every discovery. */
    char *fault_note;
    WorkWatch watch;          /* the long-poll of this node's work (work-watch.h) */
    bool watch_failing;       /* its last poll failed: log once, not every retry */
    ConfirmPool confirms;     /* the connections that confirm started workloads side by side */
    InventoryCache inventory; /* the last discovery, for workload starts */
    bool confirm_due; /* look at the work again next turn: a confirmation went unanswered, or a
                       * start or stop waits for its engine to answer again */
    unsigned running_writes; /* rewrites of "running": a text read before is current while equal */
    /* Task results the control plane did not take (away, restarting): task id -> body, sent
     * again when the task comes back rather than doing the task twice. */
    json_t *unsent_results;
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
/* Log how a call went: the control plane lost or back (once each), an error answer. */
void agent_note_call(Agent *a, const char *method, const char *path, int r, long status, json_t *j,
                     const Error *err);

/* agent-workloads.c: the workloads placed here (R17). */
/* Which drivers' state files may list workloads of ours (at the start). */
void agent_slots_init(Agent *a);
/* Driver k ready (started, or adopted what it runs); false when it does not answer. */
bool agent_ensure_slot(Agent *a, int k);
/* Workloads that ended on their own: reported, their GPUs let go of. */
void agent_check_driven(Agent *a);
/* Whether a driver runs (or is to stop) workload id for this agent: it is in a driver's list. */
bool agent_workload_known(Agent *a, const char *id);
/* R2c/R17: for a MIG slice placement w, make its instance on its slots and put its MIG
 * device's UUID in ret_uuid (recorded, agent-mig.c); "" for other placements. */
int agent_mig_prepare(Agent *a, json_t *w, const char *id, const MachineInventory *inv,
                      char *ret_uuid, size_t uuid_size, Error *err);
/* Remove the recorded MIG instances whose workload is gone. */
void agent_mig_reap(Agent *a);
/* Stop what the work no longer places here, start what it newly places, confirm them. */
void agent_reconcile_workloads(Agent *a, json_t *work);
/* The answered confirmations (done: a list), logged; an unanswered one is due again. */
void agent_confirms_answered(Agent *a, Confirm *done);
void agent_take_confirms(Agent *a);
/* The ids of what runs here, for a heartbeat. */
json_t *agent_running_json(Agent *a);

/* agent-tasks.c: do one queued task (bind, reset check) and report its result. */
void agent_do_task(Agent *a, json_t *j);
