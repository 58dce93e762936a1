/* mac-plan.c: server argv and the macOS VM limit (mac-plan.h). */
#include "drivers/mac-plan.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/macro.h"

int mac_server_argv(const MacServerSpec *spec, const char *argv[MAC_SERVER_ARGV_MAX], char buf[16],
                    Error *err) {
    if (!spec->runtime)
        return error_set(err, -EINVAL, "an endpoint on a Mac names its runtime (mlx or llama.cpp)");
    if (STREQ(spec->runtime, "vllm"))
        return error_set(
                err, -EOPNOTSUPP,
                "vLLM does not run on a Mac: an endpoint there runs MLX or llama.cpp (R10, R14)");
    if (!spec->model || !spec->model[0] || spec->model[0] == '-')
        return error_set(err, -EINVAL,
                         "an endpoint needs a model (a path or a repository name, not an option)");
    if (spec->port == 0 || spec->port > 65535)
        return error_set(err, -EINVAL, "an endpoint's port is 1 to 65535, not %u", spec->port);
    snprintf(buf, 16, "%u", spec->port);
    size_t n = 0;
    if (STREQ(spec->runtime, "mlx")) {
        if (!spec->on_gpu)
            return error_set(err, -EOPNOTSUPP,
                             "MLX runs on the Mac's GPU; a CPU endpoint runs llama.cpp (R11)");
        const char *a[] = {"mlx_lm.server", "--model", spec->model, "--host",
                           "127.0.0.1",     "--port",  buf,         NULL};
        for (; a[n]; n++)
            argv[n] = a[n];
    } else if (STREQ(spec->runtime, "llama.cpp")) {
        const char *a[] = {"llama-server",
                           "--model",
                           spec->model,
                           "--host",
                           "127.0.0.1",
                           "--port",
                           buf,
                           "--n-gpu-layers",
                           spec->on_gpu ? "999" : "0",
                           NULL};
        for (; a[n]; n++)
            argv[n] = a[n];
    } else
        return error_set(err, -EINVAL, "unknown endpoint runtime '%.32s' (mlx, llama.cpp)",
                         spec->runtime);
    argv[n] = NULL;
    return 0;
}

int mac_vm_slot_take(MacVmSlots *s, Error *err) {
    if (s->running >= MAC_VM_LIMIT)
        return error_set(
                err, -EBUSY,
                "this Mac already runs %u macOS VMs, the most Apple's Virtualization framework "
                "allows: no capacity for another",
                s->running);
    s->running++;
    return 0;
}

void mac_vm_slot_release(MacVmSlots *s) {
    if (s->running)
        s->running--;
}

bool mac_vz_error_is_no_capacity(const char *domain, long code) {
    return domain && STREQ(domain, "VZErrorDomain") && code == MAC_VZ_ERROR_VM_LIMIT_EXCEEDED;
}
