/* fileio.h: whole-file and small-attribute reads, the way sysfs and config files are read. */
#pragma once

#include <stddef.h>

/* Read a whole file (at most max bytes, else -EFBIG) into a NUL-terminated buffer. */
int read_full_file(const char *path, size_t max, char **ret, size_t *ret_len);

/* Read a one-line attribute (sysfs style) relative to dirfd-less path, trailing newline
 * stripped. Returns -errno. */
int read_one_line(const char *path, char **ret);

/* Write a string to a file (no O_CREAT), as sysfs attributes are written. */
int write_string_file(const char *path, const char *s);
