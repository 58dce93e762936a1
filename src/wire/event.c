/* event.c: the event envelope's shape (event.h). */
#include "wire/event.h"

#include <errno.h>
#include <string.h>

#include "util/macro.h"
#include "wire/decode.h"

void wire_event_write(const WireEvent *e, JsonText *w) {
    json_text_open(w, '{');
    json_text_member_int(w, "seq", (int64_t)e->seq);
    json_text_member_int(w, "time_ms", e->time_ms);
    json_text_member_string(w, "actor", e->actor);
    json_text_member_string(w, "type", e->type);
    json_text_member_string(w, "object", e->object);
    json_text_key(w, "data");
    if (e->data_text)
        json_text_raw(w, e->data_text);
    else
        json_text_value(w, e->data ? json_incref(e->data) : json_object());
    if (e->user)
        json_text_member_string(w, "user", e->user);
    json_text_close(w, '}');
}

json_t *wire_event_to_json(const WireEvent *e) {
    JsonText w = {.to_tree = true};
    wire_event_write(e, &w);
    return json_text_take_tree(&w);
}

static int decode_seq(json_t *v, void *obj, Error *err) {
    if (!json_is_integer(v) || json_integer_value(v) < 1)
        return error_set(err, -EINVAL, "field 'seq' must be a positive integer");
    ((WireEvent *)obj)->seq = (uint64_t)json_integer_value(v);
    return 0;
}

static int decode_time(json_t *v, void *obj, Error *err) {
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return error_set(err, -EINVAL, "field 'time_ms' must be an integer from 0");
    ((WireEvent *)obj)->time_ms = json_integer_value(v);
    return 0;
}

static int decode_data(json_t *v, void *obj, Error *err) {
    if (!json_is_object(v))
        return error_set(err, -EINVAL, "field 'data' must be a JSON object");
    ((WireEvent *)obj)->data = v;
    return 0;
}

/* The texts stay in the JSON (an event's object or reason has no fixed bound). */
#define BORROWED_TEXT(m)                                                                           \
    static int decode_##m(json_t *v, void *obj, Error *err) {                                      \
        if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))           \
            return error_set(err, -EINVAL, "field '" #m "' must be a text without NUL bytes");     \
        ((WireEvent *)obj)->m = json_string_value(v);                                              \
        return 0;                                                                                  \
    }
BORROWED_TEXT(actor)
BORROWED_TEXT(type)
BORROWED_TEXT(object)
BORROWED_TEXT(user)

#define REQUIRED_CUSTOM(key, fn)                                                                   \
    { .name = key, .type = WIRE_CUSTOM, .required = true, .decode = fn }
static const WireField event_fields[] = {
        REQUIRED_CUSTOM("seq", decode_seq),       REQUIRED_CUSTOM("time_ms", decode_time),
        REQUIRED_CUSTOM("actor", decode_actor),   REQUIRED_CUSTOM("type", decode_type),
        REQUIRED_CUSTOM("object", decode_object), WIRE_F_CUSTOM("user", decode_user),
        REQUIRED_CUSTOM("data", decode_data),
};

int wire_event_from_json(json_t *j, WireEvent *ret, Error *err) {
    WireEvent e = {0};
    int r = wire_decode(j, "an event", event_fields, ARRAY_SIZE(event_fields), &e, err);
    if (r < 0)
        return r;
    if (!e.type[0])
        return error_set(err, -EINVAL, "field 'type' must not be empty");
    *ret = e;
    return 0;
}
