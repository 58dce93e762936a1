/* fleet.h: the fleet's records inside the server: work queued for agents and mode switches
 * (R3, R4, R7), shared by fleet.c, fleet-switch.c and api-fleet.c only.
 *
 * Everything here lives under the server's state lock and changes only on the writer
 * thread; each change is written to the store's `fleet` table in the current transaction,
 * so a switch or a queued task survives a crash of the server and resumes where it was. */
#pragma once

#include "server-internal.h"
#include "wire/switch.h" /* NodeSwitch: a mode switch */
#include "wire/task.h"   /* Task: work for one node's agent */

/* fleet.c */
/* Something changed on node n (a release, an agent's report, a switch's step): the next
 * fleet_tick() advances its switch and asks for the reset checks it needs (R9). */
void fleet_mark(Server *s, Node *n);
/* R3: how many NVIDIA GPUs of a datacenter node are on another driver than its mode says (its
 * agent reports the bindings its machine has: after a failed switch, some GPUs may have moved),
 * the first in *ret_first. 0 for other nodes and for a Kubernetes node (its GPUs follow its
 * label, the GPU Operator's). */
size_t fleet_gpus_off_mode(const Server *s, const ApiNode *spec, size_t *ret_first);
/* Whether GPU i is one of those (the node's answer marks it: off_mode). */
bool fleet_gpu_off_mode(const Server *s, const ApiNode *spec, size_t i);
/* Ends the reason of the cordon the control plane puts on a datacenter node whose agent
 * reports GPUs out of the node's mode (rebound by hand): lifted by itself once they are back. */
#define NODE_OFF_MODE_CORDON_MARK "Cordoned by the control plane until they are back in it (R3)."

Task *fleet_task_add(Server *s, const char *node, TaskKind kind, unsigned dev, const char *gpu,
                     const char *target);
/* The open task id of node, or NULL. */
Task *fleet_task_find(Server *s, const char *node, uint64_t id);
void fleet_task_finish(Server *s, Task *t);
bool fleet_task_open_for(Server *s, const char *node, TaskKind kind, unsigned dev);
/* Node's open tasks (a name with none: n 0), in id order. */
typedef struct TaskVec {
    Task **v;
    size_t n, cap;
} TaskVec;
TaskVec fleet_tasks_of(const Server *s, const char *node);
/* The member "tasks": node's open tasks, into an open object (its record, its work). */
void fleet_tasks_write(Server *s, const Node *n, JsonText *w);
int fleet_save_agent(Server *s, const Node *n);
/* The node's agent reported (heartbeat_s 0: keep the interval): reachable again. */
void fleet_agent_seen(Server *s, Node *n, unsigned heartbeat_s);
int fleet_save_switch(Server *s, const Node *n);
/* Node n leaves the fleet (DELETE /v1/nodes/NAME): its agent and switch records go, and it
 * leaves the fleet's queue; the caller frees it. */
void fleet_forget_node(Server *s, Node *n);
/* An event about GPU dev of node n (object "NODE/DEV"): data (taken) gets node, device, gpu. */
void fleet_gpu_event(Server *s, const Node *n, unsigned dev, const char *type, json_t *data);
/* Placed or active requests on a node (dev < 0: any device; else those using dev, cpu work
 * excluded). Returns how many; ids written up to max. */
size_t fleet_node_workloads(Server *s, const char *node, int dev, Req **ret, size_t max);
/* "12 (alice, notebook), 15 (bob, vm)"; without users "12 (notebook), 15 (vm)": for what every
 * user may read (a node's switch), where the users of other requests are not to be named. */
void fleet_describe_workloads(Req **reqs, size_t n, bool with_users, char *buf, size_t size);
/* An answer refusing because of these workloads lists them for scripts too, beside its
 * sentence: workloads: [{id, user, kind}]. */
void fleet_add_workloads(Op *op, Req **reqs, size_t n);

/* fleet-switch.c */
/* Start a switch (checks done by the caller); advances it as far as it can go now. */
void fleet_switch_start(Server *s, Node *n, NodeSwitch *sw);
/* Advance a switch as far as it can go now; true when it changed. */
bool fleet_switch_advance(Server *s, Node *n);
/* A bind task of the node's switch finished. */
/* unchanged: a failure that changed nothing on the node (the datacenter sync's refusal before
 * its cordon): the switch's own Einsora cordon is lifted again. */
void fleet_switch_task_done(Server *s, Node *n, uint64_t task_id, bool ok, bool unchanged,
                            const char *message);
/* Re-apply the core state a switch holds (device cordon) after a restart or node replace. */
/* A datacenter sync's progress report on its relabel task: the switch's message. */
void fleet_switch_task_progress(Server *s, Node *n, uint64_t task_id, const char *message);
void fleet_switch_reapply(Server *s, Node *n);
