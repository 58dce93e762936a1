/* nvml-mig.h: making and removing the MIG instance a slice placement names (R2c), through NVML
 * loaded at run time. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "agent/nvml.h"
#include "util/error.h"

/* On GPU gpu_uuid, the GPU instance of profile (NVML's name, "1g.18gb") on memory slots
 * start..start+size-1 with one compute instance over all of it: the one there (unless a
 * process works in it and it is not `ours`: the caller's own, recorded), else made (an idle
 * instance in the way is removed first; one a process works in refuses). Its MIG device's
 * UUID ("MIG-...") goes to ret_uuid, whether it was made here to ret_made (may be NULL). One
 * made here and not finished is removed again. library NULL: NVML_DEFAULT_LIBRARY. */
int nvml_mig_make(const char *library, const char *gpu_uuid, const char *profile, unsigned start,
                  unsigned size, bool ours, char *ret_uuid, size_t uuid_size, bool *ret_made,
                  Error *err);
/* Remove the GPU instance that starts at slot start (its compute instances first), unless a
 * process works in it (-EBUSY). None there: 0. */
int nvml_mig_remove(const char *library, const char *gpu_uuid, unsigned start, Error *err);
