/* apple.c: Apple Silicon GPU memory arithmetic (portable) and the macOS sysctl read. */
#include "apple.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/fileio.h"
#include "util/macro.h"
#include "util/strutil.h"

#ifdef __APPLE__
#include <objc/message.h>
#include <objc/runtime.h>
#include <sys/types.h>
#include <sys/sysctl.h>

/* Metal's C entry point (returns a retained id<MTLDevice>); declared here so that this file
 * stays plain C: the one Objective-C call goes through objc_msgSend. */
extern void *MTLCreateSystemDefaultDevice(void);
#endif

int apple_gpu_memory(const AppleHost *host, double headroom_gb, AppleGpuMemory *ret, Error *err) {
    if (!host->memsize_bytes)
        return error_set(err, -EINVAL, "the Mac reports no memory size (hw.memsize is 0)");
    uint64_t limit;
    if (host->wired_limit_mb) {
        if (host->wired_limit_mb > UINT64_MAX / MIB)
            return error_set(err, -EINVAL, "iogpu.wired_limit_mb %llu is out of range",
                             (unsigned long long)host->wired_limit_mb);
        limit = host->wired_limit_mb * MIB;
    } else if (host->metal_working_set_bytes)
        limit = host->metal_working_set_bytes;
    else
        limit = apple_default_wired_limit(host->memsize_bytes);
    if (limit > host->memsize_bytes)
        return error_set(
                err, -EINVAL, "the GPU wired limit (%llu MB) is above the Mac's memory (%llu MB)",
                (unsigned long long)(limit / MIB), (unsigned long long)(host->memsize_bytes / MIB));
    uint64_t headroom;
    if (headroom_gb >= 0) {
        if (headroom_gb > 1 << 20)
            return error_set(err, -EINVAL, "a headroom of %g GB is out of range", headroom_gb);
        headroom = (uint64_t)(headroom_gb * (double)GIB);
    } else
        headroom = apple_default_headroom(host->memsize_bytes);
    *ret = (AppleGpuMemory){
            .unified_bytes = host->memsize_bytes,
            .limit_bytes = limit,
            .headroom_bytes = headroom,
            .usable_bytes = limit > headroom ? limit - headroom : 0,
            .unified_gb = (unsigned)MIN(host->memsize_bytes / GIB, (uint64_t)UINT32_MAX),
    };
    return 0;
}

const GpuClass *apple_match_class(const Catalog *c, const AppleGpuMemory *m) {
    return c ? catalog_match_apple(c, m->unified_gb) : NULL;
}

int apple_parse_fixture(const char *text, const char *filename, AppleHost *ret, Error *err) {
    AppleHost h = {0};
    bool have_memsize = false;
    unsigned seen = 0; /* bit k: known[k] was read */
    unsigned line_no = 0;
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        line_no++;
        char buf[256];
        if (len >= sizeof(buf))
            return error_set_at(err, -EINVAL, filename, line_no, 1, "line too long");
        memcpy(buf, line, len);
        buf[len] = '\0';
        line = nl ? nl + 1 : NULL;
        strip_trailing(buf);
        char *p = buf;
        while (isspace((unsigned char)*p))
            p++;
        if (!*p || *p == '#')
            continue;
        char *colon = strchr(p, ':');
        if (!colon)
            return error_set_at(err, -EINVAL, filename, line_no, 1, "expected 'key: value'");
        *colon = '\0';
        char *v = colon + 1;
        while (isspace((unsigned char)*v))
            v++;
        static const char *const known[] = {"chip", "hw.memsize", "iogpu.wired_limit_mb",
                                            "metal.recommended_max_working_set_size"};
        size_t which = ARRAY_SIZE(known);
        for (size_t k = 0; k < ARRAY_SIZE(known); k++)
            if (STREQ(p, known[k]))
                which = k;
        if (which == ARRAY_SIZE(known)) /* before its value: 'colour: blue' is an unknown key */
            return error_set_at(err, -EINVAL, filename, line_no, 1, "unknown key '%s'", p);
        if (seen & (1u << which)) /* which of two would count is anyone's guess */
            return error_set_at(err, -EINVAL, filename, line_no, 1, "key '%s' appears twice", p);
        seen |= 1u << which;
        uint64_t num = 0;
        bool numeric = !STREQ(p, "chip");
        if (numeric && parse_uint64(v, UINT64_MAX, &num) < 0)
            return error_set_at(err, -EINVAL, filename, line_no, (unsigned)(v - buf) + 1,
                                "'%s' is not a number", v);
        if (STREQ(p, "hw.memsize"))
            h.memsize_bytes = num, have_memsize = true;
        else if (STREQ(p, "iogpu.wired_limit_mb"))
            h.wired_limit_mb = num;
        else if (STREQ(p, "metal.recommended_max_working_set_size"))
            h.metal_working_set_bytes = num;
        else if (STREQ(p, "chip"))
            snprintf(h.chip, sizeof(h.chip), "%s", v);
        else
            return error_set_at(err, -EINVAL, filename, line_no, 1, "unknown key '%s'", p);
    }
    if (!have_memsize || !h.memsize_bytes)
        return error_set(err, -EINVAL, "%s: hw.memsize is missing or 0", filename);
    *ret = h;
    return 0;
}

int apple_load_fixture(const char *path, AppleHost *ret, Error *err) {
    _cleanup_free_ char *text = NULL;
    int r = read_full_file(path, 64 * 1024, &text, NULL);
    if (r < 0)
        return error_set(err, r, "cannot read the Mac fixture %s: %s", path, strerror(-r));
    return apple_parse_fixture(text, path, ret, err);
}

#ifdef __APPLE__
static int sysctl_u64(const char *name, uint64_t *ret) {
    uint64_t v = 0;
    size_t len = sizeof(v);
    if (sysctlbyname(name, &v, &len, NULL, 0) < 0)
        return -errno;
    /* Some sysctls are 32-bit (iogpu.wired_limit_mb is an int on some releases). */
    *ret = len == sizeof(uint32_t) ? (uint64_t)(uint32_t)v : v;
    return 0;
}

int apple_read_host(AppleHost *ret, Error *err) {
    AppleHost h = {0};
    int r = sysctl_u64("hw.memsize", &h.memsize_bytes);
    if (r < 0)
        return error_set(err, r, "cannot read hw.memsize: %s", strerror(-r));
    /* Absent before macOS 14 (the key was debug.iogpu.wired_limit): 0 means the default. */
    if (sysctl_u64("iogpu.wired_limit_mb", &h.wired_limit_mb) < 0)
        h.wired_limit_mb = 0;
    size_t len = sizeof(h.chip) - 1;
    if (sysctlbyname("machdep.cpu.brand_string", h.chip, &len, NULL, 0) < 0)
        h.chip[0] = '\0';
    /* MTLDevice.recommendedMaxWorkingSetSize: what Metal itself lets one process keep
     * resident, the best figure for the default limit. 0 (no Metal device) keeps the rule. */
    void *dev = MTLCreateSystemDefaultDevice();
    if (dev) {
        uint64_t (*get_u64)(void *, SEL) = (uint64_t(*)(void *, SEL))objc_msgSend;
        void (*send)(void *, SEL) = (void (*)(void *, SEL))objc_msgSend;
        h.metal_working_set_bytes = get_u64(dev, sel_registerName("recommendedMaxWorkingSetSize"));
        send(dev, sel_registerName("release"));
    }
    *ret = h;
    return 0;
}
#else
int apple_read_host(AppleHost *ret, Error *err) {
    return error_set(err, -EOPNOTSUPP, "apple Silicon GPUs are only read on macOS");
}
#endif
