/* fileio.h: whole-file and small-attribute reads, the way sysfs and config files are read, and
 * the fsync'd writes that state files need to survive a crash. */
#pragma once

#include <stddef.h>

/* Read a whole file (at most max bytes, else -EFBIG) into a NUL-terminated buffer. */
int read_full_file(const char *path, size_t max, char **ret, size_t *ret_len);

/* Read a one-line attribute (sysfs style) relative to dirfd-less path, trailing newline
 * stripped. Returns -errno. */
int read_one_line(const char *path, char **ret);

/* The same for a host attribute (sysfs, procfs): a regular file only, -EINVAL for anything
 * else, so that a FIFO or device in a fixture tree or a bad root never blocks the reader (a
 * file a user names, a token or config, may well be a pipe: read_full_file()). */
int read_attr_file(const char *path, size_t max, char **ret, size_t *ret_len);
int read_attr_line(const char *path, char **ret);

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

/* Replace the content of a file of newline-ended lines that need not survive a power loss,
 * in place: one pwrite() at offset 0 of s followed by newlines up to the file's old size (a
 * blank line means nothing to a reader of lines), so a crashed process leaves the old or the
 * new lines, never a mix, and the file keeps its inode. A rename over the file would do the
 * same, but ext4 then writes the new content out at once (auto_da_alloc): a disk write, and on
 * a virtual machine an exit to the hypervisor, for every change of a file nobody syncs. Past
 * WRITE_IN_PLACE_MAX bytes (old or new; a write that large may be cut between pages) it is
 * write_string_file_atomic_as(path, s, WRITE_SYNC_NONE), which also trims the file. -errno. */
#define WRITE_IN_PLACE_MAX 4096
int write_lines_file_in_place(const char *path, const char *s);

/* fsync the folder that holds path: the renames into it done so far are durable. -errno. */
int fsync_parent_dir(const char *path);
