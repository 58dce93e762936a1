/* sentence.h: a decision's sentence, built by appending pieces into its fixed buffer.
 *
 * The pieces' copies are inlined into the caller, so that a literal's length is known when
 * compiling; the reason sentences and enum names come with their lengths. */
#pragma once

#include <string.h>

#include "core/sched.h"
#include "util/macro.h"

/* A piece of a sentence with its length, so that appending it needs no strlen(). */
typedef struct Text {
    const char *s;
    size_t n;
} Text;
#define TEXT(lit) ((Text){lit, sizeof(lit) - 1})

/* The sentence of a waiting or refusal reason, with its length. */
Text reason_text(SchedReason r);

/* A decision's sentence, built by appending (snprintf's format parsing cost a third of a
 * decision). Truncates exactly as snprintf into the same buffer would. The terminator is
 * written once, by msg_end(), not after every piece. */
typedef struct Msg {
    char *buf;
    size_t len, size;
} Msg;

/* Out of line: only a sentence longer than the buffer gets there. */
void msg_put_cut(Msg *m, const char *str, size_t n);

/* Inlined, and the common case (the piece fits) copies exactly n bytes, so that a literal's
 * copy has a length known when compiling: a few moves instead of a copy of any length. */
static inline __attribute__((always_inline)) void msg_putn(Msg *m, const char *str, size_t n) {
    if (__builtin_expect(n < m->size - m->len, 1)) {
        memcpy(m->buf + m->len, str, n);
        m->len += n;
    } else {
        msg_put_cut(m, str, n);
    }
}

static inline __attribute__((always_inline)) void msg_put(Msg *m, const char *str) {
    if (!str)
        str = "(null)"; /* what glibc's %s prints; no caller passes NULL */
    msg_putn(m, str, strlen(str));
}

static inline __attribute__((always_inline)) void msg_text(Msg *m, Text t) {
    msg_putn(m, t.s, t.n);
}

void msg_uint_digits(Msg *m, unsigned v);

/* Inlined with a one-digit case: a decision's GPU count, device and slots almost always are
 * one digit, and a copy of one byte is a single store. */
static inline __attribute__((always_inline)) void msg_uint(Msg *m, unsigned v) {
    if (v < 10) {
        char c = (char)('0' + v);
        msg_putn(m, &c, 1);
    } else {
        msg_uint_digits(m, v);
    }
}

static inline Msg msg_start(char *buf, size_t size) {
    return (Msg){buf, 0, size};
}

static inline void msg_end(Msg *m) {
    m->buf[m->len] = '\0';
}

/* The names sched-names.c gives these enums, as literals so that every placed decision
 * appends them without a strlen() and a copy of any length; the bench's digest and the tests
 * compare the sentences. Any other value takes the table's name. */
static inline void msg_method(Msg *m, Method v) {
    switch (v) {
    case METHOD_PASSTHROUGH:
        msg_put(m, "passthrough");
        return;
    case METHOD_CONTAINER:
        msg_put(m, "container");
        return;
    case METHOD_MIG:
        msg_put(m, "mig");
        return;
    case METHOD_TIME_SLICE:
        msg_put(m, "time-slice");
        return;
    case METHOD_APPLE_WHOLE:
        msg_put(m, "apple-whole");
        return;
    case METHOD_CPU:
        msg_put(m, "cpu");
        return;
    default:
        msg_put(m, method_to_string(v));
    }
}

static inline void msg_container_runtime(Msg *m, ContainerRuntime v) {
    if (v == CONTAINER_RUNTIME_RUNC)
        msg_put(m, "runc");
    else if (v == CONTAINER_RUNTIME_KATA)
        msg_put(m, "kata");
    else
        msg_put(m, container_runtime_to_string(v));
}

static inline void msg_endpoint_runtime(Msg *m, EndpointRuntime v) {
    if (v == ENDPOINT_RUNTIME_VLLM)
        msg_put(m, "vllm");
    else if (v == ENDPOINT_RUNTIME_MLX)
        msg_put(m, "mlx");
    else if (v == ENDPOINT_RUNTIME_LLAMA_CPP)
        msg_put(m, "llama.cpp");
    else
        msg_put(m, endpoint_runtime_to_string(v));
}
