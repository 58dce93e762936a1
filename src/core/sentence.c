/* sentence.c: the pieces of decisions' sentences: the reason sentences, and the out-of-line
 * cases of appending (see sentence.h). */
#include "sentence.h"

Text reason_text(SchedReason r) {
    switch (r) {
    case SCHED_REASON_NO_CAPACITY:
        return TEXT("every unit that this user may use is taken; it waits for one to free");
    case SCHED_REASON_MODE_MISMATCH:
        return TEXT("the GPUs that could run it are in the other mode, free or not (for "
                    "containers where it needs VFIO: a VM, or a stranger's container under Kata; "
                    "for VMs where it needs a container; or MIG on where it needs MIG off); "
                    "placement never switches a node for one request (R3, R5, R7), an "
                    "operator's switch does (einsora node mode)");
    case SCHED_REASON_OWNER_ONLY:
        return TEXT("only the machine's owner may use it: an owner-only class, a Mac's GPU, or "
                    "native processes on a Mac (R10)");
    case SCHED_REASON_INTERNAL_ONLY:
        return TEXT("the class is for trusted tenants only in a datacenter (R9)");
    case SCHED_REASON_NO_KATA:
        return TEXT("a stranger's container runs under Kata, and no node that could take it offers "
                    "Kata (R2b)");
    case SCHED_REASON_NO_MIG_IN_KATA:
        return TEXT(
                "a stranger's MIG slice needs Kata with MIG-backed vGPU (mig_in_kata), which no "
                "node that could take it has (R2c)");
    case SCHED_REASON_MACOS_VM_LIMIT:
        return TEXT("every Mac already runs 2 macOS VMs, the licence's limit (R10)");
    case SCHED_REASON_RESET_CHECK:
        return TEXT(
                "the free consumer GPUs wait for their reset cycle check before passthrough (R9)");
    case SCHED_REASON_CORDONED:
        return TEXT("the GPUs with room are cordoned, quarantined or unreachable");
    case SCHED_REASON_QUEUED:
        return TEXT("room exists, but older requests come first (FIFO with backfill)");
    case SCHED_REASON_NO_NODE:
        return TEXT("no node has this class yet");
    case SCHED_REASON_TOO_LARGE:
        return TEXT("no node of the fleet has that many GPUs of the class (or cores, or Mac GPU "
                    "memory)");
    case SCHED_REASON_VGPU:
        return TEXT(CATALOG_VGPU_REFUSAL);
    case SCHED_REASON_UNKNOWN_CLASS:
        return TEXT("the catalog has no such class");
    case SCHED_REASON_LINUX_GUEST_GPU:
        return TEXT("Linux guests on a Mac get no GPU compute, nor do containers (they run in a "
                    "Linux VM there); ask for cpu, or run it as a native process such as an "
                    "endpoint (R1, R10)");
    case SCHED_REASON_MACOS_GUEST_NOT_MAC:
        return TEXT("macOS guests run on Macs only, with paravirtualized Metal (R10)");
    case SCHED_REASON_VM_MIG:
        return TEXT("a MIG slice in a VM would need MIG-backed vGPU, which is not supported (R2c, "
                    "R2d); "
                    "ask for "
                    "a whole GPU");
    case SCHED_REASON_VM_AMD:
        return TEXT("AMD and Intel GPUs go to containers only (R12)");
    case SCHED_REASON_BAD_COUNT:
        return TEXT(
                "the count does not fit: a gang is at most 16 GPUs of one node, and a MIG slice or "
                "a Mac's "
                "GPU is one unit");
    case SCHED_REASON_BAD_RUNTIME:
        return TEXT("that endpoint runtime cannot run there: vLLM on NVIDIA, MLX or llama.cpp on a "
                    "Mac, "
                    "llama.cpp on CPU (R14)");
    case SCHED_REASON_DUPLICATE:
        return TEXT("a request with this id already exists (R16)");
    default:
        return TEXT("the request is not valid");
    }
}

void msg_put_cut(Msg *m, const char *str, size_t n) {
    size_t room = m->size - 1 - m->len;
    n = MIN(n, room);
    memcpy(m->buf + m->len, str, n);
    m->len += n;
}

void msg_uint_digits(Msg *m, unsigned v) {
    char tmp[16];
    size_t i = sizeof(tmp);
    do
        tmp[--i] = (char)('0' + v % 10);
    while ((v /= 10) && i > 0);
    msg_putn(m, &tmp[i], sizeof(tmp) - i);
}
