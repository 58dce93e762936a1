/* task.h: a piece of work for a node's agent (a GPU rebind, a reset-cycle check: R4, R7, R9)
 * as the server queues, stores and hands it out with a heartbeat answer, and as the agent
 * reads it. One encoder, one strict decoder. Pure; fuzzed by fuzz/fuzz-wire-task.c. */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "util/error.h"
#include "wire/decode.h"

typedef enum TaskKind {
    TASK_BIND,
    TASK_RESET_CHECK,
    _TASK_KIND_MAX,
    _TASK_KIND_INVALID = -1
} TaskKind;
const char *task_kind_to_string(TaskKind k);
TaskKind task_kind_from_string(const char *s);

/* The agent gets the pending tasks with every heartbeat answer and reports each result once;
 * a task asked again (agent restarted before reporting) is done again, which is safe:
 * binding an already bound GPU changes nothing. */
typedef struct Task {
    uint64_t id; /* 1.. */
    char node[WIRE_NAME_MAX];
    TaskKind kind;
    unsigned dev;   /* device index on the node */
    char gpu[32];   /* its PCI address; "" for a datacenter node's whole-node bind */
    char target[8]; /* bind: "vfio" | "host"; "" for other kinds */
    int64_t created_ms;
} Task;

json_t *wire_task_to_json(const Task *t);

/* Strict: the fields wire_task_to_json writes, a bind with its target. On a refusal after
 * the id was read, *ret_id holds it (so the agent can report that task as failed), else 0. */
int wire_task_from_json(json_t *j, Task *ret, uint64_t *ret_id, Error *err);
