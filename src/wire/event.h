/* event.h: an entry of the change feed (GET /v1/events, long polls, watches) as the server
 * writes it and the CLI reads it: the envelope (seq, time, actor, type, object, user) around
 * the event's own fields ("data", a JSON object whose fields depend on the type). One encoder,
 * one strict decoder. Pure; fuzzed by fuzz/fuzz-wire-event.c. */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "util/error.h"

#include "wire/json-text.h"

/* The texts and data are borrowed: from the server's event, or from the decoded JSON. */
typedef struct WireEvent {
    uint64_t seq; /* 1.. */
    int64_t time_ms;
    const char *actor, *type, *object;
    const char *user;      /* whose object it is; NULL for fleet events */
    json_t *data;          /* a JSON object (what the decoder gives) */
    const char *data_text; /* or its compact text, when set (what the server keeps) */
} WireEvent;

/* The encoder: the event as text or as a tree (JsonText), its data spliced in as it is kept. */
void wire_event_write(const WireEvent *e, JsonText *w);
json_t *wire_event_to_json(const WireEvent *e);

/* Strict: the fields wire_event_to_json writes. The result points into j, valid while j is. */
int wire_event_from_json(json_t *j, WireEvent *ret, Error *err);
