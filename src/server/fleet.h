/* fleet.h: the fleet's records inside the server: work queued for agents and mode switches
 * (R3, R4, R7), shared by fleet.c, fleet-switch.c and api-fleet.c only.
 *
 * Everything here lives under the server's state lock and changes only on the writer
 * thread; each change is written to the store's `fleet` table in the current transaction,
 * so a switch or a queued task survives a crash of the server and resumes where it was. */
#pragma once

#include "server-internal.h"
#include "wire/task.h" /* Task: work for one node's agent */

/* The steps of a mode switch (R4), in order. */
typedef enum SwitchStep {
    SW_CORDON,
    SW_DRAIN,
    SW_REBIND,
    SW_VERIFY,
    SW_UNCORDON,
    SW_DONE,
    SW_FAILED,
    _SW_STEP_MAX,
    _SW_STEP_INVALID = -1,
} SwitchStep;
const char *switch_step_to_string(SwitchStep s);
SwitchStep switch_step_from_string(const char *s);

typedef enum DrainMode { DRAIN_NONE, DRAIN_WAIT, DRAIN_EVICT, _DRAIN_MAX, _DRAIN_INVALID = -1 } DrainMode;
const char *drain_mode_to_string(DrainMode d);
DrainMode drain_mode_from_string(const char *s);

struct NodeSwitch {
    char mode[24];    /* target: "container" | "vm-passthrough" */
    DrainMode drain;
    int gpu;          /* -1: every GPU of the node; else one device (lab, R7) */
    SwitchStep step;
    bool was_cordoned; /* restore at the end */
    int64_t started_ms, updated_ms;
    char message[384];
    uint64_t tasks[SPEC_MAX_DEVICES]; /* the bind tasks of the rebind step */
    bool task_ok[SPEC_MAX_DEVICES];
    bool task_done[SPEC_MAX_DEVICES];
    size_t n_tasks;
};

static inline bool switch_active(const NodeSwitch *sw) {
    return sw && sw->step < SW_DONE;
}

/* fleet.c */
Task *fleet_task_add(Server *s, const char *node, TaskKind kind, unsigned dev, const char *gpu,
                     const char *target);
Task *fleet_task_find(Server *s, uint64_t id);
void fleet_task_finish(Server *s, Task *t);
bool fleet_task_open_for(Server *s, const char *node, TaskKind kind, unsigned dev);
int fleet_save_agent(Server *s, const Node *n);
/* The node's agent reported (heartbeat_s 0: keep the interval): reachable again. */
void fleet_agent_seen(Server *s, Node *n, unsigned heartbeat_s);
int fleet_save_switch(Server *s, const Node *n);
/* Placed or active requests on a node (dev < 0: any device; else those using dev, cpu work
 * excluded). Returns how many; ids written up to max. */
size_t fleet_node_workloads(Server *s, const char *node, int dev, Req **ret, size_t max);
/* "12 (alice, notebook), 15 (bob, vm)" */
void fleet_describe_workloads(Req **reqs, size_t n, char *buf, size_t size);

/* fleet-switch.c */
/* Start a switch (checks done by the caller); advances it as far as it can go now. */
void fleet_switch_start(Server *s, Node *n, NodeSwitch *sw);
/* Advance a switch as far as it can go now; true when it changed. */
bool fleet_switch_advance(Server *s, Node *n);
/* A bind task of the node's switch finished. */
void fleet_switch_task_done(Server *s, Node *n, uint64_t task_id, bool ok, const char *message);
json_t *fleet_switch_json(const NodeSwitch *sw);
int fleet_switch_from_json(json_t *j, NodeSwitch *ret);
/* Re-apply the core state a switch holds (device cordon) after a restart or node replace. */
/* A datacenter sync's progress report on its relabel task: the switch's message. */
void fleet_switch_task_progress(Server *s, Node *n, uint64_t task_id, const char *message);
void fleet_switch_reapply(Server *s, Node *n);
