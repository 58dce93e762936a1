/* switch.h: a node's mode switch (R3, R4, R7) as the server stores it and shows it in a
 * node's JSON ("switch"), and as the CLI (`node mode --wait`, `node show`) and the Kubernetes
 * sync read it. One encoder, one strict decoder. Pure. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/error.h"
#include "wire/node.h"

/* The steps of a mode switch (R4), in order. */
typedef enum SwitchStep {
    SW_CORDON,
    SW_DRAIN,
    SW_REBIND,
    SW_VERIFY,
    SW_UNCORDON,
    SW_DONE,
    SW_FAILED,
    _SW_STEP_MAX,
    _SW_STEP_INVALID = -1,
} SwitchStep;
const char *switch_step_to_string(SwitchStep s);
SwitchStep switch_step_from_string(const char *s);

typedef enum DrainMode {
    DRAIN_NONE,
    DRAIN_WAIT,
    DRAIN_EVICT,
    _DRAIN_MAX,
    _DRAIN_INVALID = -1
} DrainMode;
const char *drain_mode_to_string(DrainMode d);
DrainMode drain_mode_from_string(const char *s);

typedef struct NodeSwitch {
    char mode[24]; /* target: "container" | "vm-passthrough" */
    DrainMode drain;
    int gpu; /* -1: every GPU of the node; else one device (lab, R7) */
    SwitchStep step;
    bool was_cordoned; /* restore at the end */
    int64_t started_ms, updated_ms;
    char message[384];
    uint64_t tasks[SPEC_MAX_DEVICES]; /* the bind tasks of the rebind step */
    bool task_ok[SPEC_MAX_DEVICES];
    bool task_done[SPEC_MAX_DEVICES];
    size_t n_tasks;
    /* Not stored: the consumer GPUs this switch asked a reset check of before they leave
     * vfio-pci (a server restart asks once more). */
    uint64_t reset_asked;
    /* Not stored: the node's cordon is the one a failed switch before this one left (the way
     * back gives it back at its end, R4), not its operator's. */
    bool cordon_inherited;
} NodeSwitch;

static inline bool switch_active(const NodeSwitch *sw) {
    return sw && sw->step < SW_DONE;
}

json_t *wire_switch_to_json(const NodeSwitch *sw);

/* Strict: every field wire_switch_to_json writes. */
int wire_switch_from_json(json_t *j, NodeSwitch *ret, Error *err);
