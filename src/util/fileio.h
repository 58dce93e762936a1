/* fileio.h: whole-file and small-attribute reads, the way sysfs and config files are read, and
 * the fsync'd writes that state files need to survive a crash. */
#pragma once

#include <stddef.h>

/* Read a whole file (at most max bytes, else -EFBIG) into a NUL-terminated buffer. */
int read_full_file(const char *path, size_t max, char **ret, size_t *ret_len);

/* Read a one-line attribute (sysfs style) relative to dirfd-less path, trailing newline
 * stripped. Returns -errno. */
int read_one_line(const char *path, char **ret);

/* Write a string to a file (no O_CREAT), as sysfs attributes are written. */
int write_string_file(const char *path, const char *s);

/* Write all of s with a single write() (so that an append is wholly there or torn at the end)
 * and fsync fd. Does not close fd. -errno; -EIO for a short write. */
int write_string_fd_sync(int fd, const char *s);

/* Replace path's content with s so that a crash leaves the old or the new content, never a
 * mix: write "<path>.tmp", fsync it, rename it over path, fsync the folder. -ENAMETOOLONG when
 * "<path>.tmp" does not fit PATH_MAX; other failures -errno, with the temporary file removed. */
int write_string_file_atomic(const char *path, const char *s);

/* What write_string_file_atomic_as() makes durable before it returns. Either way the file
 * never holds a mix of the old and the new content while the machine stays up. */
typedef enum WriteSync {
    /* Nothing: a crashed process leaves the new content, a power loss may leave either (or,
     * on a filesystem without a journal, an empty or torn file). */
    WRITE_SYNC_NONE = 0,
    /* The new content is whole on disk, but after a power loss the name may still give the
     * old one until the folder is synced (fsync_parent_dir). */
    WRITE_SYNC_CONTENT = 1,
    WRITE_SYNC_ALL = 3, /* content and name: write_string_file_atomic() */
} WriteSync;
int write_string_file_atomic_as(const char *path, const char *s, WriteSync sync);

/* fsync the folder that holds path: the renames into it done so far are durable. -errno. */
int fsync_parent_dir(const char *path);
