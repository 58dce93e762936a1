/* workload-end.h: the body an agent sends when a workload placed on its node has ended on its
 * own or could not start (POST /v1/requests/{id}/end, R17): its exit code, whether it failed
 * (did not run: image or runtime missing, engine refused) and the engine's sentence. Strict
 * and pure; fuzzed by fuzz/fuzz-fleet-bodies.c's sibling fuzz-workload-end.c. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

typedef struct WorkloadEnd {
    bool has_exit_code;
    int exit_code;      /* 0..255 */
    bool failed;
    char message[240];  /* the engine's sentence, or "" */
} WorkloadEnd;

int workload_end_parse(const char *text, size_t len, WorkloadEnd *ret, Error *err);

/* The request's reason line: "exited with code N", "failed: SENTENCE", ... */
void workload_end_reason(const WorkloadEnd *e, char *buf, size_t size);
