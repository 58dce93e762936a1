/* node.h: a node description, as an admin posts it and an agent pushes its inventory
 * (docs/control-plane.md "Node description"), decoded straight into the core's enums (strict:
 * see decode.h) and encoded back. The agent builds one from its discovery, the server
 * stores and answers it. Pure; fuzzed by fuzz/fuzz-api-request.c. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/sched.h"
#include "util/error.h"
#include "wire/decode.h"
#include "wire/json-text.h"
#include "wire/request.h"

#define SPEC_MAX_DEVICES 64
#define SPEC_MAX_MIG 7
#define SPEC_MAX_MIG_PROFILES 6 /* one per MIG shape (core/mig.h) */
#define SPEC_MAX_CAPS 16

typedef struct ApiMigInstance {
    char profile[16]; /* e.g. "1g.10gb" */
    unsigned start;   /* first memory slot (0..7) */
    bool busy;        /* a process works in it (NVML): a foreign one's slots are never offered */
} ApiMigInstance;

typedef struct ApiDevice {
    char pci[16];            /* PCI address, e.g. 0000:3b:00.0 ("" for Apple GPU / cpu) */
    char cls[SPEC_NAME_MAX]; /* catalog class name; "" = unclassified (shown, never placed) */
    char pci_id[10];         /* "10de:2335": PCI vendor:device, lower-case hex; "" unknown */
    unsigned memory_gb;
    Binding binding; /* host (driver bound: containers) or vfio (passthrough) */
    bool mig_enabled;
    ApiMigInstance mig[SPEC_MAX_MIG]; /* existing MIG layout */
    size_t n_mig;
    /* The MIG profiles NVML offers on this GPU (R2c), e.g. "1g.18gb"; only these of its
     * class's are offered on it. Not given: not reported, and the class's all are. */
    bool mig_profiles_given;
    char mig_profiles[SPEC_MAX_MIG_PROFILES][16];
    size_t n_mig_profiles;
    bool reset_verified; /* consumer card passed the agent's reset cycle check (R9) */
    bool quarantined;
    char quarantine_reason[128];
} ApiDevice;

/* The memory slots (bit i: slot i) MIG instance m of d takes; 0 when it fits none. */
uint8_t api_mig_instance_slots(const ApiDevice *d, size_t m);
/* Whether a device of card_gb may list profile in 'mig_profiles' (what api_node_check_sent
 * takes): one of the card's row in the SPEC's table, or on a card outside it a well-formed
 * "Ng.Mgb" measured by its compute slices. No suffix ("+me"): those are not slice classes. */
bool api_mig_profile_fits(const char *profile, unsigned card_gb);

/* Ends the reason of the cordon the Kubernetes sync puts on a served node whose mode label is
 * missing or unknown (R3): the node's label is not its mode, so a switch to the mode it has is
 * not "already done" (it relabels the node). */
#define NODE_LABEL_CORDON_MARK "Cordoned by the datacenter sync until it is labeled (R3)."

typedef struct ApiNode {
    char name[SPEC_NAME_MAX];
    char site[SPEC_NAME_MAX]; /* the site's name */
    SiteKind site_kind;
    Platform platform;
    char owner[SPEC_NAME_MAX];
    NodeMode mode; /* datacenter: container | vm-passthrough; NODE_MODE_NONE elsewhere (per GPU, R7)
                    */
    char device_resource[128]; /* a Kubernetes node's passthrough resource when it is not its
                                  class's vm_device_name (R6): capacity uses the node's own name */
    char caps[SPEC_MAX_CAPS][32];
    size_t n_caps;
    bool cordoned;
    char cordon_reason[400]; /* why, when the cordon says (shown with it); "" while uncordoned */
    unsigned cpus;
    unsigned time_slice_replicas;     /* 0: the core's default */
    unsigned apple_unified_memory_gb; /* Macs (R10) */
    unsigned apple_usable_memory_gb;  /* the agent's report: wired limit minus headroom */
    bool apple_usable_given;          /* the field was there: 0 is a report (nothing to offer), not
                                         "unknown" (then usable is the unified memory) */
    ApiDevice devices[SPEC_MAX_DEVICES];
    size_t n_devices;
} ApiNode;

int api_node_from_json(json_t *j, ApiNode *ret, Error *err);
int api_node_parse(const char *text, size_t len, ApiNode *ret, Error *err);
/* The node's one encoder (wire/json-text.h): its tree, or its compact text without building
 * the tree, member for member the same. NULL when a string is not UTF-8 or memory ran out. */
void api_node_write(const ApiNode *n, JsonText *w);
/* The same with members a holder of the node adds (the server's view of it): device(w, i)
 * writes more members at the end of device i, node(w) at the end of the node. */
typedef struct ApiNodeExtras {
    void (*device)(JsonText *w, size_t i, void *userdata);
    void (*node)(JsonText *w, void *userdata);
    void *userdata;
} ApiNodeExtras;
void api_node_write_ext(const ApiNode *n, JsonText *w, const ApiNodeExtras *x);
json_t *api_node_to_json(const ApiNode *n);
char *api_node_text(const ApiNode *n);
bool api_node_has_cap(const ApiNode *n, const char *cap);

/* The checks that came in after nodes were first stored: every device's 'pci', when given, is
 * an address the agent would take (pci_bdf_is_valid), and a quarantine gives its reason (R9);
 * a Mac's usable GPU memory is at most its memory (R10). The server checks what a client sends, not
 * what its state file holds: a node stored before a check came in still loads. */
int api_node_check_sent(const ApiNode *n, Error *err);
