/* nvml-fixture.c: parser of the fake NVML's fixture format (see nvml-fixture.h). */
#include "nvml-fixture.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail_at(char *msg, size_t size, unsigned line, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static int fail_at(char *msg, size_t size, unsigned line, const char *fmt, ...) {
    if (msg && size) {
        int n = snprintf(msg, size, "line %u: ", line);
        va_list ap;
        va_start(ap, fmt);
        if (n >= 0 && (size_t)n < size)
            vsnprintf(msg + n, size - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

/* Next white-space separated word of *p into buf; 0 when there is none or it does not fit. */
static int word(const char **p, char *buf, size_t size) {
    const char *s = *p;
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = 0;
    while (s[n] && s[n] != ' ' && s[n] != '\t')
        n++;
    if (!n || n >= size)
        return 0;
    memcpy(buf, s, n);
    buf[n] = '\0';
    *p = s + n;
    return 1;
}

static int number(const char **p, unsigned long long max, unsigned long long *ret) {
    char buf[32];
    if (!word(p, buf, sizeof(buf)))
        return 0;
    char *end = NULL;
    errno = 0;
    int base = buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X') ? 16 : 10;
    if (buf[0] == '-' || buf[0] == '+')
        return 0;
    unsigned long long v = strtoull(buf, &end, base);
    if (errno || !end || *end || v > max)
        return 0;
    *ret = v;
    return 1;
}

/* The rest of the line with leading blanks removed, into buf. */
static int rest(const char *p, char *buf, size_t size) {
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strlen(p);
    if (!n || n >= size)
        return 0;
    memcpy(buf, p, n + 1);
    return 1;
}

static int parse_line(FakeNvml *f, const char *line, unsigned no, char *msg, size_t size) {
    char kw[32];
    const char *p = line;
    if (!word(&p, kw, sizeof(kw)))
        return 0; /* blank */
    if (kw[0] == '#')
        return 0;
    FakeGpu *g = f->n_gpus ? &f->gpus[f->n_gpus - 1] : NULL;
    unsigned long long a, b, c, d, e;
    if (!strcmp(kw, "init")) {
        if (!number(&p, 1000, &a))
            return fail_at(msg, size, no, "init needs a return code");
        f->init_code = (int)a;
    } else if (!strcmp(kw, "fail")) {
        FakeFail *fl;
        if (g ? g->n_fails >= FAKE_NVML_MAX_FAILS : f->n_fails >= FAKE_NVML_MAX_FAILS)
            return fail_at(msg, size, no, "too many fail lines");
        fl = g ? &g->fails[g->n_fails] : &f->fails[f->n_fails];
        if (!word(&p, fl->function, sizeof(fl->function)) || !number(&p, 1000, &a))
            return fail_at(msg, size, no, "fail needs FUNCTION CODE");
        fl->code = (int)a;
        if (g)
            g->n_fails++;
        else
            f->n_fails++;
    } else if (!strcmp(kw, "gpu")) {
        if (f->n_gpus >= FAKE_NVML_MAX_GPUS)
            return fail_at(msg, size, no, "too many GPUs");
        g = &f->gpus[f->n_gpus];
        *g = (FakeGpu){.minor = -1, .mig_current = -1, .mig_pending = -1};
        if (!word(&p, g->bus_id, sizeof(g->bus_id)) || !number(&p, 0xffffffffull, &a))
            return fail_at(msg, size, no, "gpu needs BUSID PCIID");
        g->pci_id = (unsigned)a;
        f->n_gpus++;
    } else if (!g)
        return fail_at(msg, size, no, "'%s' before any gpu line", kw);
    else if (!strcmp(kw, "name")) {
        if (!rest(p, g->name, sizeof(g->name)))
            return fail_at(msg, size, no, "name needs text");
    } else if (!strcmp(kw, "uuid")) {
        if (!rest(p, g->uuid, sizeof(g->uuid)))
            return fail_at(msg, size, no, "uuid needs text");
    } else if (!strcmp(kw, "memory")) {
        if (!number(&p, ~0ull, &a) || !number(&p, ~0ull, &b) || b > a)
            return fail_at(msg, size, no, "memory needs TOTAL USED with USED <= TOTAL");
        g->mem_total = a, g->mem_used = b;
    } else if (!strcmp(kw, "minor")) {
        if (!number(&p, 255, &a))
            return fail_at(msg, size, no, "minor needs a number up to 255");
        g->minor = (int)a;
    } else if (!strcmp(kw, "mig")) {
        if (!number(&p, 1, &a) || !number(&p, 1, &b))
            return fail_at(msg, size, no, "mig needs CURRENT PENDING (0 or 1)");
        g->mig_current = (int)a, g->mig_pending = (int)b;
    } else if (!strcmp(kw, "profile")) {
        if (g->n_profiles >= FAKE_NVML_MAX_PROFILES)
            return fail_at(msg, size, no, "too many profiles");
        FakeProfile *pr = &g->profiles[g->n_profiles];
        if (!number(&p, 16, &a) || !number(&p, 1000, &b) || !number(&p, 8, &c) ||
            !number(&p, 8, &d) || !number(&p, 1ull << 32, &e) ||
            !rest(p, pr->name, sizeof(pr->name)))
            return fail_at(msg, size, no, "profile needs INDEX ID SLICES COUNT MEMORY_MB NAME");
        pr->index = (unsigned)a, pr->id = (unsigned)b, pr->slices = (unsigned)c,
        pr->count = (unsigned)d;
        pr->memory_mb = e;
        g->n_profiles++;
    } else if (!strcmp(kw, "instance")) {
        if (g->n_instances >= FAKE_NVML_MAX_INSTANCES)
            return fail_at(msg, size, no, "too many instances");
        if (!number(&p, 1000, &a) || !number(&p, 1000, &b) || !number(&p, 7, &c) ||
            !number(&p, 8, &d))
            return fail_at(msg, size, no, "instance needs GI_ID PROFILE_ID START SIZE");
        g->instances[g->n_instances++] =
                (FakeInstance){(unsigned)a, (unsigned)b, (unsigned)c, (unsigned)d, NULL, 1, ""};
    } else if (!strcmp(kw, "process")) {
        if (g->n_processes >= FAKE_NVML_MAX_PROCESSES)
            return fail_at(msg, size, no, "too many processes");
        if (!number(&p, 0x7fffffff, &a) || !number(&p, ~0ull, &b) || !number(&p, 1000, &c) ||
            !number(&p, 1000, &d))
            return fail_at(msg, size, no, "process needs PID USED GI CI");
        g->processes[g->n_processes++] = (FakeProcess){(unsigned)a, (unsigned)c, (unsigned)d, b};
    } else
        return fail_at(msg, size, no, "unknown statement '%s'", kw);
    char extra[8];
    if (strcmp(kw, "name") && strcmp(kw, "uuid") && strcmp(kw, "profile") &&
        word(&p, extra, sizeof(extra)))
        return fail_at(msg, size, no, "unexpected text after '%s'", kw);
    return 0;
}

int fake_nvml_parse(const char *text, size_t len, FakeNvml *ret, char *msg, size_t msg_size) {
    memset(ret, 0, sizeof(*ret));
    unsigned no = 0;
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && text[j] != '\n')
            j++;
        no++;
        char line[512];
        if (j - i >= sizeof(line))
            return fail_at(msg, msg_size, no, "line too long");
        memcpy(line, text + i, j - i);
        line[j - i] = '\0';
        if (memchr(line, '\0', j - i))
            return fail_at(msg, msg_size, no, "NUL byte");
        size_t n = j - i;
        while (n && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
            line[--n] = '\0';
        int r = parse_line(ret, line, no, msg, msg_size);
        if (r < 0)
            return r;
        i = j + 1;
    }
    return 0;
}

int fake_nvml_fail_code(const FakeNvml *f, const FakeGpu *gpu, const char *function) {
    if (gpu)
        for (size_t i = 0; i < gpu->n_fails; i++)
            if (!strcmp(gpu->fails[i].function, function))
                return gpu->fails[i].code;
    for (size_t i = 0; i < f->n_fails; i++)
        if (!strcmp(f->fails[i].function, function))
            return f->fails[i].code;
    return 0;
}
