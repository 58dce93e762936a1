/* amd.c: amdgpu sysfs attributes (memory and product name). */
#include "amd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"
#include "util/strutil.h"

static void add_error(AmdInfo *info, const char *attr, const char *text) {
    char *s = strprintf("%s%s%s reads '%.40s', not a byte count.", strempty(info->error),
                        info->error ? " " : "", attr, text);
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
    if (parse_uint64(s, UINT64_MAX, ret) < 0)
        add_error(info, attr, s);
    return 0;
}

int amd_read_info(const HostPaths *p, const char *bdf, AmdInfo *ret) {
    AmdInfo info = {0};
    int r = 0;
    r = r < 0 ? r : read_bytes(p, bdf, "mem_info_vram_total", &info.vram_total, &info);
    r = r < 0 ? r : read_bytes(p, bdf, "mem_info_vram_used", &info.vram_used, &info);
    r = r < 0 ? r : read_bytes(p, bdf, "mem_info_gtt_total", &info.gtt_total, &info);
    r = r < 0 ? r : read_bytes(p, bdf, "mem_info_gtt_used", &info.gtt_used, &info);
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
