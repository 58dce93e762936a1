/* bench-inproc.h: the real server in process for benchmarks (handlers, writer, store; no
 * HTTP): a fresh store with an admin token in a temporary folder, and calls through the API's
 * dispatcher. Benchmarks exit on any failure, so these do too. */
#pragma once

#include <jansson.h>

#include "server/api.h"

/* Make a temporary folder (on tmpfs where there is one) with a store at dir/state.db that
 * knows `token` as root's admin token; its paths in dir and path. */
void bench_store_with_admin(const char *token, char dir[64], char path[128]);
/* One call with `authorization` ("Bearer ..."); returns the status, *ret the answer as the
 * text the server sends (a tree answer dumped as send_answer() dumps it; may be NULL): what a
 * call costs the server, without parsing its answer. */
int bench_call_text(Server *s, const char *authorization, const char *method, const char *path,
                    const char *body, char **ret_text);
/* The same with the answer parsed (may be NULL). */
int bench_call(Server *s, const char *authorization, const char *method, const char *path,
               const char *body, json_t **ret);
/* Register a CPU-only container node of datacenter site dc1 (cpus cores, owned by owner);
 * exits on failure. */
void bench_add_cpu_node(Server *s, const char *authorization, const char *name, const char *owner,
                        unsigned cpus);
/* CLOCK_MONOTONIC in seconds. */
double bench_seconds(void);
/* Remove the folder of bench_store_with_admin(); 0 when gone. */
int bench_store_remove(const char *dir);
