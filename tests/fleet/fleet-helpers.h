/* fleet-helpers.h: a fleet on loopback for the end-to-end tests: the real `einsora serve` and
 * one `einsora agent run` process per fixture machine (HGX H100, H200 with MIG, RTX 4090,
 * MI300X, a CPU-only box, a Mac), each with its own state folder, heartbeating every second. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "srv-helpers.h"

enum { A_H100, A_H200, A_4090, A_MI300X, A_CPU, A_MAC, FLEET_AGENTS };

typedef struct FleetAgent {
    const char *name;
    char state_dir[160];
    char *token;
    pid_t pid;
} FleetAgent;

typedef struct Fleet {
    TestServer ts;
    unsigned port;
    FleetAgent agents[FLEET_AGENTS];
} Fleet;

/* Start the server and every agent; wait until all six nodes are registered. */
void fleet_start(Fleet *f);
void fleet_stop(Fleet *f);

/* Start `einsora agent run` (owner root, heartbeat 1 s, log in state_dir/agent.log) with extra
 * options (NULL-terminated; may be NULL); nvml_fixture sets $EINSORA_FAKE_NVML. */
pid_t fleet_spawn_agent(const char *url, const char *token, const char *name, const char *state_dir,
                        const char *const *extra, const char *nvml_fixture);
/* The same for the 8-GPU H100 fixture machine (simulated binding, the fake NVML) as a
 * container-mode node of datacenter site dc1; heartbeat NULL keeps 1 s. */
pid_t fleet_spawn_h100_agent(const char *url, const char *token, const char *name,
                             const char *state_dir, const char *heartbeat);
/* The node's last heartbeat (agent.last_seen_ms, server clock), 0 while none or unregistered. */
json_int_t fleet_last_seen_ms(TestServer *ts, const char *node);
/* Wait (generous deadline) until the node's agent record shows heartbeat interval
 * `interval_s`, which only a heartbeat sets (an agent's start pushes its node first, which
 * also marks it seen): an agent started with a new interval has beaten once. Returns the
 * node's last_seen_ms then. */
json_int_t fleet_await_heartbeat(TestServer *ts, const char *node, int interval_s);
/* (Re)start one agent process on its existing state folder. */
void fleet_agent_start(Fleet *f, int i);
/* SIGKILL (hard) or SIGTERM one agent and wait for it. */
void fleet_agent_kill(Fleet *f, int i, bool hard);
/* Restart the server on the same port and state (after ts_kill), so the agents find it again. */
void fleet_server_restart(Fleet *f);

/* "<agent i's state folder>/<name>" (caller frees). */
char *fleet_agent_file(Fleet *f, int i, const char *name);

/* Admin call with a JSON body given as text (NULL: none); returns the status. */
long fleet_call(Fleet *f, const char *method, const char *path, const char *body, json_t **ret);

/* Poll until pred(f, arg) holds or timeout_ms passes; returns whether it held. */
typedef bool (*FleetPred)(Fleet *f, const void *arg);
bool fleet_wait(Fleet *f, FleetPred pred, const void *arg, int timeout_ms);

/* Submit a request as the admin's user; returns its id. body: RequestInput JSON text. */
long fleet_submit(Fleet *f, const char *token, const char *body);
/* The request's state string into buf (as the admin sees it). */
const char *fleet_request_state(Fleet *f, long id, char *buf, size_t size);
bool fleet_request_is(Fleet *f, long id, const char *state);
/* A string field of the node (GET /v1/nodes/NAME), or of its "switch" when in_switch. */
bool fleet_node_field_is(Fleet *f, const char *node, bool in_switch, const char *key,
                         const char *value);
/* Whether the event feed holds an event of this type (and object, when not NULL). */
bool fleet_has_event(Fleet *f, const char *type, const char *object);
/* GET /v1/debug/invariants is ok (R15, R16). */
void fleet_assert_invariants(Fleet *f);

/* For a libmicrohttpd answer callback of a stand-in control plane that ignores bodies: true
 * while the request's headers or body are still arriving (the callback answers MHD_YES then),
 * false once it is complete and should be answered. */
bool fleet_double_request_pending(void **con_cls, void *cls, size_t *upload_size);
