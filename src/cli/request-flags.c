/* request-flags.c: the flags that describe a request, shared by `request create` and `run`. */
#include "request-flags.h"

#include <stdio.h>
#include <string.h>

#include "output.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "verbs.h"
#include "wire/request.h"

/* A numeric flag: refused naming the flag, what it takes and what was given ("--count takes a
 * whole number from 1 to 64, not '-3'"). The ranges are the API's (wire/request.h), so no value
 * passes here that the server refuses. */
static int number_flag(const char *verb, const char *flag, const char *what, const char *arg,
                       uint64_t min, uint64_t max, json_t *body, const char *member) {
    uint64_t v;
    if (parse_uint64(arg, max, &v) < 0 || v < min)
        return fail(EXIT_USAGE, "%s: %s takes %s from %llu to %llu, not '%s'", verb, flag, what,
                    (unsigned long long)min, (unsigned long long)max, arg);
    json_object_set_new(body, member, json_integer((json_int_t)v));
    return 0;
}

/* Each entry a class: an empty one ("cpu,,cpu", a trailing comma, or "") is a mistake to say,
 * never dropped (which would leave a shorter list, or none). */
static int fallback_flag(const char *verb, const char *arg, json_t *body) {
    json_t *list = json_array();
    for (const char *t = arg;; t++) {
        size_t n = strcspn(t, ",");
        if (n == 0) {
            json_decref(list);
            return fail(EXIT_USAGE,
                        "%s: --fallback takes class names separated by commas, with no empty "
                        "one, not '%s'",
                        verb, arg);
        }
        json_array_append_new(list, json_stringn(t, n));
        t += n;
        if (!*t)
            break;
    }
    json_object_set_new(body, "fallback", list);
    return 0;
}

/* Appends to the body's list `member`, made at the first. */
static void list_add(json_t *body, const char *member, json_t *v) {
    json_t *list = json_object_get(body, member);
    if (!list) {
        list = json_array();
        json_object_set_new(body, member, list);
    }
    json_array_append_new(list, v);
}

int request_flag(int c, const char *arg, json_t *body, const char *verb) {
    static const struct {
        int c;
        const char *member;
    } strings[] = {{RF_KIND, "kind"},       {RF_CLASS, "class"}, {RF_GUEST_OS, "guest_os"},
                   {RF_RUNTIME, "runtime"}, {RF_MODEL, "model"}, {RF_IMAGE, "image"}};
    for (size_t i = 0; i < ARRAY_SIZE(strings); i++)
        if (strings[i].c == c) {
            json_object_set_new(body, strings[i].member, json_string(arg));
            return 0;
        }
    switch (c) {
    case RF_COUNT:
        return number_flag(verb, "--count", "a whole number", arg, 1, SPEC_MAX_COUNT, body,
                           "count");
    case RF_MEMORY:
        return number_flag(verb, "--memory", "whole GB", arg, 1, 1u << 20, body, "memory_gb");
    case RF_WAIT_S:
        return number_flag(verb, "--wait-s", "whole seconds", arg, 0, SPEC_MAX_WAIT_S, body,
                           "wait_s");
    case RF_SHARE:
        json_object_set_new(body, "share", json_true());
        return 0;
    case RF_WAIT_FOR_NODES:
        json_object_set_new(body, "wait_for_nodes", json_true());
        return 0;
    case RF_FALLBACK:
        return fallback_flag(verb, arg, body);
    case RF_ENV: {
        const char *eq = strchr(arg, '=');
        if (!eq || eq == arg)
            return fail(EXIT_USAGE, "%s: --env takes KEY=VALUE, not '%s'", verb, arg);
        list_add(body, "env", json_string(arg));
        return 0;
    }
    case RF_PORT: {
        uint64_t v;
        if (parse_uint64(arg, 65535, &v) < 0 || v < 1)
            return fail(EXIT_USAGE, "%s: --port takes a port from 1 to 65535, not '%s'", verb, arg);
        list_add(body, "ports", json_integer((json_int_t)v));
        return 0;
    }
    }
    return 1;
}

int request_flags_check(json_t *body, const char *verb) {
    const char *cls = json_string_value(json_object_get(body, "class"));
    if (!json_object_get(body, "kind"))
        return fail(EXIT_USAGE, "%s: --kind is required (vm, container, notebook or endpoint)",
                    verb);
    if (!cls && !json_object_get(body, "memory_gb"))
        return fail(EXIT_USAGE, "%s: --class CLASS or --memory GB is required", verb);
    json_int_t count = json_integer_value(json_object_get(body, "count"));
    if (count > SCHED_NODE_MAX_DEVICES && !(cls && STREQ(cls, "cpu")))
        return fail(EXIT_USAGE,
                    "%s: --count takes 1 to %d GPUs (up to %d only with --class cpu, where it "
                    "counts cores), not %lld",
                    verb, SCHED_NODE_MAX_DEVICES, SPEC_MAX_COUNT, (long long)count);
    return 0;
}

int request_command_length(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (STREQ(argv[i], "--"))
            return argc - i - 1;
    return -1;
}

void request_set_command(char **args, int n, json_t *body) {
    json_t *cmd = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(cmd, json_string(args[i]));
    json_object_set_new(body, "command", cmd);
}
