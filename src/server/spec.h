/* spec.h: strict parsing of the JSON bodies clients send: a placement request and a node
 * description (what an admin posts, and what an agent's inventory push will send).
 *
 * Strict on purpose: wrong types, unknown fields, out-of-range numbers are refused with a
 * sentence naming the field, so that a typo never turns into a silent default. Pure (no
 * I/O); fuzzed by fuzz/fuzz-api-request.c. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

#define SPEC_MAX_FALLBACK 8
#define SPEC_MAX_PORTS 16
#define SPEC_MAX_COUNT 64
#define SPEC_MAX_DEVICES 64
#define SPEC_MAX_MIG 7
#define SPEC_MAX_CAPS 16
#define SPEC_NAME_MAX 64
#define SPEC_MAX_WAIT_S (30 * 24 * 3600)

typedef enum ApiKind { WORK_VM, WORK_CONTAINER, WORK_NOTEBOOK, WORK_ENDPOINT, _WORK_MAX } ApiKind;
const char *api_kind_to_string(ApiKind k);

/* A placement request, as POST /v1/requests takes it. The user is never in it: it comes
 * from the token. */
typedef struct ApiRequest {
    ApiKind kind;
    char cls[SPEC_NAME_MAX];     /* GPU class or "cpu"; empty when memory_gb is given */
    unsigned count;              /* devices, a gang on one node */
    unsigned memory_gb;          /* memory need instead of a class (0 = none) */
    char guest_os[16];           /* vm only: "linux" or "macos" */
    bool share;                  /* time-slicing among the user's own workloads (R2e) */
    bool wait_for_nodes;         /* R18: wait even if no node of the fleet could ever run it */
    char fallback[SPEC_MAX_FALLBACK][SPEC_NAME_MAX]; /* R13, in order */
    size_t n_fallback;
    unsigned wait_s; /* how long to wait for the first choice before falling back */
    char runtime[16]; /* endpoints: "vllm", "mlx", "llama.cpp"; "" = whatever fits (R14) */
    /* The workload itself (R17): "" = the site's default image for the kind, the image's own
     * command. command holds the JSON array text of the arguments. */
    char image[256];
    char command[1024];
    char env[1024];  /* JSON array text of "KEY=VALUE" */
    char model[256]; /* endpoints: the model to serve */
    unsigned ports[SPEC_MAX_PORTS]; /* container ports to publish instead of the kind's own */
    size_t n_ports;
} ApiRequest;

int api_request_parse(const char *text, size_t len, ApiRequest *ret, Error *err);
int api_request_from_json(json_t *j, ApiRequest *ret, Error *err);
json_t *api_request_to_json(const ApiRequest *r);

typedef struct ApiMigInstance {
    char profile[16]; /* e.g. "1g.10gb" */
    unsigned start;   /* first memory slot (0..7) */
} ApiMigInstance;

typedef struct ApiDevice {
    char pci[32];            /* PCI address, e.g. 0000:3b:00.0 ("" for Apple GPU / cpu) */
    char cls[SPEC_NAME_MAX]; /* catalog class name; "" = unclassified (shown, never placed) */
    char pci_id[10];         /* "10de:2335": PCI vendor:device, lower-case hex; "" unknown */
    unsigned memory_gb;
    char binding[16]; /* "host" (driver bound: containers) or "vfio" (passthrough) */
    bool mig_enabled;
    ApiMigInstance mig[SPEC_MAX_MIG]; /* existing MIG layout */
    size_t n_mig;
    bool reset_verified; /* consumer card passed the agent's reset cycle check (R9) */
    bool quarantined;
    char quarantine_reason[128];
} ApiDevice;

typedef struct ApiNode {
    char name[SPEC_NAME_MAX];
    char site[SPEC_NAME_MAX]; /* the site's name */
    char site_kind[16];       /* solo | lab | datacenter */
    char platform[16]; /* linux | macos */
    char owner[SPEC_NAME_MAX];
    char mode[24]; /* datacenter: container | vm-passthrough; "" elsewhere (per GPU, R7) */
    char device_resource[128]; /* a Kubernetes node's passthrough resource when it is not its class's
                                  vm_device_name (R6): capacity uses the node's own name */
    char caps[SPEC_MAX_CAPS][32];
    size_t n_caps;
    bool cordoned;
    unsigned cpus;
    unsigned time_slice_replicas;     /* 0: the core's default */
    unsigned apple_unified_memory_gb; /* Macs (R10) */
    unsigned apple_usable_memory_gb;  /* the agent's report: wired limit minus headroom */
    ApiDevice devices[SPEC_MAX_DEVICES];
    size_t n_devices;
} ApiNode;

int api_node_from_json(json_t *j, ApiNode *ret, Error *err);
int api_node_parse(const char *text, size_t len, ApiNode *ret, Error *err);
json_t *api_node_to_json(const ApiNode *n);
bool api_node_has_cap(const ApiNode *n, const char *cap);

/* A name for nodes and users: 1..63 of [a-z0-9._-], starting with a letter or digit. */
bool spec_name_is_valid(const char *s);
