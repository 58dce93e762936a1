/* reset-check.h: the reset-cycle check of a consumer GPU on vfio-pci (R9).
 *
 * Some consumer boards do not come back from a reset, so a VM that stops cannot be restarted
 * on them. With the card on vfio-pci and no VM using it, the check resets it N times through
 * the kernel's `reset` attribute (which uses the methods listed in `reset_method`, in order)
 * and after each reset re-reads: vendor/device not 0xffff, config space readable, power state
 * D0 (or the D3hot vfio-pci idles it in, if that is where it was), link speed and width not
 * below what they were, and no new kernel-log lines of the known failure kinds (read from the
 * kmsg file, <dev>/kmsg by default: /dev/kmsg on a real machine, records
 * "pri,seq,ts,flags;text").
 *
 *   fail:      the card vanished (0xffff), config space unreadable, left D0, a log line "not
 *              ready", "Unable to change power state", "fallen off the bus", an uncorrectable
 *              AER error; or it offers no reset at all. The GPU is quarantined with the reason.
 *   degraded:  link slower or narrower than before, or "timed out waiting for pending
 *              transaction" (the reset went ahead anyway). Offered, with the reason shown.
 *   pass:      none of these. */
#pragma once

#include "agent/bind.h"

typedef enum ResetVerdict {
    RESET_PASS,
    RESET_DEGRADED,
    RESET_FAIL,
} ResetVerdict;

const char *reset_verdict_to_string(ResetVerdict v);

typedef struct ResetCheckOptions {
    BindOptions bind;      /* roots, state folder, timeout per reset write */
    unsigned cycles;       /* default 3 */
    int settle_ms;         /* wait after each reset before re-reading; default 100 */
    const char *kmsg_path; /* NULL: <dev>/kmsg */
} ResetCheckOptions;

void reset_check_options_init(ResetCheckOptions *o);

#define RESET_MAX_REASONS 8

typedef struct ResetCheckResult {
    char gpu[16];
    ResetVerdict verdict;
    unsigned cycles_run;
    char reset_method[64];
    char link_before[64], link_after[64];
    char reasons[RESET_MAX_REASONS][256];
    size_t n_reasons;
    bool quarantined;
} ResetCheckResult;

/* Refused (-EPERM/-EBUSY, one sentence) when the GPU is not on vfio-pci or is in use. A fail
 * verdict is a successful check (returns 0) that quarantined the GPU. */
int gpu_reset_check(const ResetCheckOptions *o, const char *bdf, ResetCheckResult *ret, Error *err);

/* Classify one kernel-log line about the GPU: RESET_FAIL, RESET_DEGRADED, or RESET_PASS when
 * it is not a known failure kind. */
ResetVerdict reset_classify_kmsg_line(const char *line);
