/* kernel-write.h: one write to a kernel attribute, done in a child process with a timeout.
 *
 * Some driver callbacks never return (the nvidia driver's unbind waits for every handle to
 * close), and a thread stuck in such a write cannot be cancelled. A child process can be
 * abandoned instead: the agent keeps running, reports the hang, and quarantines the GPU. */
#pragma once

#include "util/error.h"

/* Write value to path (O_WRONLY|O_TRUNC, never O_CREAT) in a child process. Waits at most
 * timeout_ms. Returns 0, the write's own -errno (e.g. -EBUSY, -ENODEV, with a sentence
 * naming the file), or -ETIMEDOUT when the write did not return in time: the child is then
 * killed (a child stuck in the kernel stays a zombie until the kernel lets go; it is reaped
 * by kernel_write_reap()). */
int kernel_write(const char *path, const char *value, int timeout_ms, Error *err);

/* Reap children of earlier timed-out writes that have since ended; returns how many remain. */
int kernel_write_reap(void);
