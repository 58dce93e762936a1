/* mac-plan.h: the pure parts of the Mac backends (R10, R14), built and tested everywhere; the
 * endpoint servers run through the process driver (process.h); Apple's Virtualization
 * framework for macOS VMs is macOS-only and not written yet.
 *
 * - Endpoint servers: the argv of an OpenAI-compatible server for the placement's runtime:
 *   MLX (`mlx_lm.server`) or llama.cpp (`llama-server`, all layers on Metal, or none on CPU).
 *   vLLM never runs on a Mac (R10): asking for it is refused.
 * - macOS VMs: at most 2 per Mac (the framework's limit). The accounting refuses a third as
 *   no capacity, and the framework's own "virtual machine limit exceeded" error, should the
 *   count be off (a VM started outside Einsora), is treated the same way. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

#define MAC_VM_LIMIT 2
/* VZErrorDomain's VZErrorVirtualMachineLimitExceeded. */
#define MAC_VZ_ERROR_VM_LIMIT_EXCEEDED 6

typedef struct MacServerSpec {
    const char *runtime; /* "mlx" | "llama.cpp" (| "vllm": refused) */
    const char *model;   /* a model path or repository name */
    unsigned port;       /* 1..65535, bound on 127.0.0.1 */
    bool on_gpu;         /* llama.cpp: Metal (all layers) or CPU only */
} MacServerSpec;

#define MAC_SERVER_ARGV_MAX 16

/* Fill argv (NULL-terminated, pointing into spec and buf) for the server. */
int mac_server_argv(const MacServerSpec *spec, const char *argv[MAC_SERVER_ARGV_MAX], char buf[16],
                    Error *err);

typedef struct MacVmSlots {
    unsigned running;
} MacVmSlots;

/* Take a slot for one more macOS VM; -EBUSY with a sentence when two run. */
int mac_vm_slot_take(MacVmSlots *s, Error *err);
void mac_vm_slot_release(MacVmSlots *s);
/* What a start error of the framework means: true for "too many VMs" (no capacity, not a fault). */
bool mac_vz_error_is_no_capacity(const char *domain, long code);
