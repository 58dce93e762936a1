/* requests-yaml.h: a list of requests (and when they end) as YAML, for `einsora plan`.
 * The format is documented at the top of requests-yaml.c and in
 * tests/fixtures/plan/requests.yaml. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/sched.h"
#include "util/error.h"

#define REQUESTS_MAX_BYTES (16u << 20)
#define REQUEST_NO_RELEASE UINT64_MAX

typedef struct RequestEntry {
    RequestSpec spec;    /* strings owned by the RequestsFile; spec.submitted is `at` */
    uint64_t release_at; /* REQUEST_NO_RELEASE: runs to the end of the plan */
    unsigned line;
    bool guest_given; /* for a kind that has none: said, as the API says it */
} RequestEntry;

typedef struct RequestsFile {
    char *file;
    RequestEntry *entries;
    size_t n_entries;
} RequestsFile;

int requests_parse_yaml(const char *text, size_t len, const char *filename, RequestsFile **ret,
                        Error *err);
int requests_load_file(const char *path, RequestsFile **ret, Error *err);
void requests_file_free(RequestsFile *rf);
