/* placement.h: where a request runs, as the server stores and answers it and `einsora plan
 * --json` prints it; and a capacity row (R6), as GET /v1/capacity and the plan print it.
 * One encoder each, so every reader sees the same fields. Pure. */
#pragma once

#include <jansson.h>

#include "core/catalog.h"
#include "core/sched.h"
#include "util/error.h"
#include "wire/json-text.h"

/* addresses[i]: the PCI address of device i, or NULL (the plan knows no addresses; a CPU or
 * Mac placement has none); addresses itself may be NULL. */
json_t *wire_placement_to_json(const Placement *p, const char *const *addresses);
/* The placement's one encoder (wire/json-text.h: its text or the tree above). */
void wire_placement_write(const Placement *p, const char *const *addresses, JsonText *w);

/* Strict: the fields wire_placement_to_json writes, the class known to cat. p->node points
 * into node_buf, p->class_name into cat. */
int wire_placement_from_json(const Catalog *cat, json_t *j, Placement *ret,
                             char node_buf[SCHED_ID_MAX], Error *err);

json_t *wire_capacity_row_to_json(const CapacityRow *r);
