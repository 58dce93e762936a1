/* fake-kernel-internal.h: what the fake kernel's tree (fake-kernel-tree.c) and its helper
 * process (fake-kernel.c) share. */
#pragma once

#include <limits.h>
#include <stddef.h>

#include "fake-kernel.h"

/* Write a formatted file (created or truncated); -errno. */
int fk_writef(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* mkdir -p; -errno. */
int fk_mkdir_p(const char *path);
/* A whole file, NUL-terminated (its length in *len when len is not NULL), or NULL. */
char *fk_readfile(const char *path, size_t *len);
/* sysfs path of a device's attribute into buf. */
void fk_dev_path(const FakeKernel *k, const char *bdf, const char *attr, char *buf, size_t size);
/* A driver's directory with its bind, unbind and new_id files; -errno. */
int fk_load_driver(const FakeKernel *k, const char *name);
/* The device's driver link and the driver's link back to it. */
void fk_bind_link(const FakeKernel *k, const char *bdf, const char *driver);
/* The name of the driver the device is bound to ("" when none) into buf. */
void fk_current_driver(const FakeKernel *k, const char *bdf, char *buf, size_t size);
