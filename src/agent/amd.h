/* amd.h: what the amdgpu driver tells about an AMD GPU in sysfs (R12). */
#pragma once

#include <stdint.h>

#include "agent/pci-sysfs.h"

typedef struct AmdInfo {
    uint64_t vram_total, vram_used; /* bytes; 0 when the attribute is absent */
    uint64_t gtt_total, gtt_used;   /* system memory mapped for the GPU: what an APU uses */
    char *product_name;             /* NULL when absent or empty (many consumer boards) */
    char *error;                    /* malformed attribute text, one sentence; NULL if none */
} AmdInfo;

/* Read mem_info_{vram,gtt}_{total,used} and product_name of an amdgpu-bound device. Absent
 * attributes (another driver, older kernels) leave fields zero; malformed ones fill error. */
int amd_read_info(const HostPaths *p, const char *bdf, AmdInfo *ret);
void amd_info_done(AmdInfo *info);
