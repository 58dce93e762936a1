/* apple.h: Apple Silicon GPU memory (R10): portable arithmetic and class choice, plus the
 * macOS-only read of the host (compiled only on __APPLE__).
 *
 * Usable GPU memory = the GPU wired-memory limit minus a headroom kept for the owner. The
 * limit is iogpu.wired_limit_mb when set; 0 means the system default, for which we take
 * Metal's recommendedMaxWorkingSetSize when known and otherwise the observed default (see
 * apple_default_wired_limit() in core/catalog.h, which also gives the default headroom). */
#pragma once

#include <stdint.h>

#include "core/catalog.h"
#include "util/error.h"

#ifndef GIB
#define GIB ((uint64_t)1 << 30)
#endif
#ifndef MIB
#define MIB ((uint64_t)1 << 20)
#endif

typedef struct AppleHost {
    uint64_t memsize_bytes;           /* hw.memsize */
    uint64_t wired_limit_mb;          /* iogpu.wired_limit_mb; 0 = system default */
    uint64_t metal_working_set_bytes; /* MTLDevice.recommendedMaxWorkingSetSize; 0 unknown */
    char chip[64];                    /* machdep.cpu.brand_string, e.g. "Apple M2 Max" */
} AppleHost;

typedef struct AppleGpuMemory {
    uint64_t unified_bytes, limit_bytes, headroom_bytes, usable_bytes;
    unsigned unified_gb; /* unified memory in whole GB, what the catalog tiers use */
} AppleGpuMemory;

/* headroom_gb < 0 selects the default; 0 keeps none for the owner. -EINVAL when memsize is 0
 * or the limit exceeds it. */
int apple_gpu_memory(const AppleHost *host, double headroom_gb, AppleGpuMemory *ret, Error *err);

/* The catalog tier for this Mac (catalog_match_apple on unified GB), NULL if none fits. */
const GpuClass *apple_match_class(const Catalog *c, const AppleGpuMemory *m);

/* A fixture describing a Mac, "key: value" lines ('#' comments):
 *   hw.memsize: 68719476736
 *   iogpu.wired_limit_mb: 0
 *   metal.recommended_max_working_set_size: 51539607552   (optional)
 *   chip: Apple M2 Max                                     (optional)
 * Unknown keys and malformed numbers are errors with the line number. */
int apple_parse_fixture(const char *text, const char *filename, AppleHost *ret, Error *err);
int apple_load_fixture(const char *path, AppleHost *ret, Error *err);

/* Read the host (sysctl). -EOPNOTSUPP on anything but macOS. */
int apple_read_host(AppleHost *ret, Error *err);
