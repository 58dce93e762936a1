/* amd.c: amdgpu sysfs attributes (memory and product name). */
#include "amd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"
#include "util/strutil.h"

static void add_error(AmdInfo *info, const char *attr, const char *text, const char *why) {
    char *s = strprintf("%s%s%s reads '%.40s', %s.", strempty(info->error), info->error ? " " : "",
                        attr, text, why);
    if (s) {
        free(info->error);
        info->error = s;
    }
}

static int read_bytes(const HostPaths *p, const char *bdf, const char *attr, uint64_t *ret,
                      AmdInfo *info) {
    _cleanup_free_ char *s = NULL;
    int r = pci_read_attr(p, bdf, attr, &s);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r == -ENOMEM ? r : 0;
    /* A PiB: far above any GPU's memory, and far below what would turn negative as JSON's
     * signed integer (2^64 - 1 read as -1). */
    if (parse_uint64(s, (uint64_t)1 << 50, ret) < 0)
        add_error(info, attr, s, "not a byte count");
    return 0;
}

int amd_read_info(const HostPaths *p, const char *bdf, AmdInfo *ret) {
    AmdInfo info = {0};
    int r = 0;
    r = r < 0 ? r : read_bytes(p, bdf, "mem_info_vram_total", &info.vram_total, &info);
    r = r < 0 ? r : read_bytes(p, bdf, "mem_info_vram_used", &info.vram_used, &info);
    r = r < 0 ? r : read_bytes(p, bdf, "mem_info_gtt_total", &info.gtt_total, &info);
    r = r < 0 ? r : read_bytes(p, bdf, "mem_info_gtt_used", &info.gtt_used, &info);
    if (r >= 0 && info.vram_used > info.vram_total) {
        char used[32];
        snprintf(used, sizeof(used), "%llu", (unsigned long long)info.vram_used);
        add_error(&info, "mem_info_vram_used", used, "more than mem_info_vram_total");
        info.vram_used = 0;
    }
    if (r >= 0) {
        _cleanup_free_ char *name = NULL;
        if (pci_read_attr(p, bdf, "product_name", &name) >= 0 && name[0])
            info.product_name = TAKE_PTR(name);
    }
    if (r < 0) {
        amd_info_done(&info);
        return r;
    }
    *ret = info;
    return 0;
}

void amd_info_done(AmdInfo *info) {
    if (!info)
        return;
    free(info->product_name);
    free(info->error);
    *info = (AmdInfo){0};
}
