/* workload-end.h: the bodies an agent sends about a workload placed on its node (R17): when it
 * runs, where it answers (activate's optional URL); when it has ended on its own or could not
 * start (POST /v1/requests/{id}/end), its exit code, whether it failed (did not run: image or
 * runtime missing, engine refused) and the engine's sentence. Strict and pure; fuzzed by
 * fuzz/fuzz-workload-end.c. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"
#include "wire/fleet.h"

typedef struct WorkloadEnd {
    bool has_exit_code;
    int exit_code; /* 0..255 */
    bool failed;
    char message[WORKLOAD_END_MESSAGE_MAX + 1]; /* the engine's sentence, or "" */
} WorkloadEnd;

int workload_end_parse(const char *text, size_t len, WorkloadEnd *ret, Error *err);

/* The request's reason line: "exited with code N", "failed: SENTENCE", ... */
void workload_end_reason(const WorkloadEnd *e, char *buf, size_t size);

/* The body of POST /v1/requests/{id}/activate: empty, or {"url": "http(s)://…"} where the
 * notebook or the endpoint's OpenAI-compatible API answers. url: "" when none. */
#define WORKLOAD_URL_MAX 200
int workload_activate_parse(const char *text, size_t len, char url[WORKLOAD_URL_MAX], Error *err);

/* The body of POST /v1/nodes/{name}/activate, several of those at once:
 * {"requests": [{"id": "12", "url": "http(s)://…"}, ...]}, 1 to WORKLOAD_ACTIVATE_BATCH_MAX
 * items, each id (a positive decimal string) once. */
#define WORKLOAD_ACTIVATE_BATCH_MAX 64
typedef struct WorkloadActivation {
    uint64_t id;
    char url[WORKLOAD_URL_MAX]; /* "" when none */
} WorkloadActivation;
typedef struct WorkloadActivations {
    size_t n;
    WorkloadActivation items[WORKLOAD_ACTIVATE_BATCH_MAX];
} WorkloadActivations;
int workload_activate_batch_parse(const char *text, size_t len, WorkloadActivations *ret,
                                  Error *err);
