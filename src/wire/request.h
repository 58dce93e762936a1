/* request.h: a placement request as POST /v1/requests takes it, decoded straight into the
 * core's enums (strict: see decode.h), and encoded back for storage and answers. Pure; fuzzed
 * by fuzz/fuzz-api-request.c. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/sched.h"
#include "util/error.h"
#include "wire/decode.h"
#include "wire/json-text.h"

#define SPEC_MAX_FALLBACK 8
#define SPEC_MAX_PORTS 16
#define SPEC_MAX_COUNT 64
#define SPEC_NAME_MAX WIRE_NAME_MAX
#define SPEC_MAX_WAIT_S (30 * 24 * 3600)

/* The user is never in it: it comes from the token. */
typedef struct ApiRequest {
    WorkloadKind kind;
    char cls[SPEC_NAME_MAX]; /* GPU class or "cpu"; empty when memory_gb is given */
    unsigned count;          /* devices, a gang on one node */
    unsigned memory_gb;      /* memory need instead of a class (0 = none) */
    GuestOs guest_os;        /* vm only (GUEST_LINUX unless told) */
    bool share;              /* time-slicing among the user's own workloads (R2e) */
    bool wait_for_nodes;     /* R18: wait even if no node of the fleet could ever run it */
    char fallback[SPEC_MAX_FALLBACK][SPEC_NAME_MAX]; /* R13, in order */
    size_t n_fallback;
    unsigned wait_s;         /* how long to wait for the first choice before falling back */
    EndpointRuntime runtime; /* endpoints; ENDPOINT_RUNTIME_NONE = whatever fits (R14) */
    /* The workload itself (R17): "" = the site's default image for the kind, the image's own
     * command. command holds the JSON array text of the arguments. */
    char image[256];
    char command[1024];
    char env[1024];                 /* JSON array text of "KEY=VALUE" */
    char model[256];                /* endpoints: the model to serve */
    unsigned ports[SPEC_MAX_PORTS]; /* container ports to publish instead of the kind's own */
    size_t n_ports;
} ApiRequest;

int api_request_parse(const char *text, size_t len, ApiRequest *ret, Error *err);
int api_request_from_json(json_t *j, ApiRequest *ret, Error *err);
/* What a new request must also say rightly (a stored one is restored as it was taken): a VM's
 * image names one of the site's disk images, never a host path; a fallback list names each
 * class once, not the first choice, and cpu last (R13). */
int api_request_check_new(const ApiRequest *r, Error *err);
/* Whether an endpoint's model is a GGUF weights file (`.gguf`, any case): on a Mac it runs on
 * llama.cpp, MLX loading safetensors weights only (R14). */
bool api_request_model_is_gguf(const ApiRequest *r);
/* A VM disk image's name as a request gives it: a file name (letters, digits, . _ + -), not a
 * path, not hidden. */
bool vm_image_name_is_valid(const char *name);
/* The request's one encoder (wire/json-text.h: its text or its tree), members in the order a
 * client reads them. */
void api_request_write(const ApiRequest *r, JsonText *w);
/* api_request_write()'s compact text, or NULL when out of memory. */
char *api_request_text(const ApiRequest *r);
json_t *api_request_to_json(const ApiRequest *r);
