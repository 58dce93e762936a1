/* fleet.h: strict parsing of the bodies the fleet's endpoints take: an agent's heartbeat,
 * an agent's task result, and a mode switch (R3, R4, R7). Pure (no I/O); fuzzed by
 * fuzz/fuzz-fleet-bodies.c. An empty body is an empty object. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define FLEET_HEARTBEAT_MAX_S 3600

typedef struct FleetHeartbeat {
    unsigned interval_s; /* 0: keep the interval the agent gave before */
    bool has_running;    /* "running" was sent: reconcile against it */
    uint64_t *running;   /* request ids the agent runs, sorted (malloc'ed; fleet_heartbeat_done);
                          * as many as the body holds: no fixed cap per node */
    size_t n_running;
} FleetHeartbeat;

/* The body of POST /v1/requests/{id}/end, as an agent or the datacenter sync sends it: the
 * engine's sentence made valid UTF-8 and cut on a character boundary to what the server keeps
 * (a longer one would be refused, and the request would never end). exit_code only when the
 * workload did not fail. NULL when memory ran out. */
#define WORKLOAD_END_MESSAGE_MAX 239
typedef struct json_t json_t;
json_t *fleet_workload_end_body(bool failed, int exit_code, const char *message);

int fleet_heartbeat_parse(const char *text, size_t len, FleetHeartbeat *ret, Error *err);
void fleet_heartbeat_done(FleetHeartbeat *h);
bool fleet_heartbeat_runs(const FleetHeartbeat *h, uint64_t id);

typedef struct FleetTaskResult {
    bool ok;
    bool progress;  /* not a result: the task is under way, message says where (datacenter sync) */
    bool unchanged; /* a failure that changed nothing on the node (a switch refused at once) */
    char message[512];
    char verdict[16]; /* "" (none), "pass", "degraded", "fail" */
} FleetTaskResult;

int fleet_task_result_parse(const char *text, size_t len, FleetTaskResult *ret, Error *err);

typedef struct FleetModeRequest {
    char mode[24]; /* "container" | "vm-passthrough" */
    char drain[8]; /* "none" | "wait" | "evict" */
    char gpu[64];  /* "" = the whole node; else an index or PCI address */
} FleetModeRequest;

/* Refuses vm-vgpu naming the alternatives (R2d), unknown modes and drains. */
int fleet_mode_parse(const char *text, size_t len, FleetModeRequest *ret, Error *err);
