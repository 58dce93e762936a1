/* fileio.c: whole-file and small-attribute reads and writes. */
#include "fileio.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "macro.h"
#include "strutil.h"

/* Reads all of fd (at most max bytes) into a NUL-terminated buffer. */
static int read_fd_full(int fd, size_t max, char **ret, size_t *ret_len) {
    size_t cap = 4096, len = 0;
    _cleanup_free_ char *buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    for (;;) {
        if (len + 1 >= cap) {
            if (cap > max)
                return -EFBIG;
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                return -ENOMEM;
            buf = nb;
            cap *= 2;
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len > max)
            return -EFBIG;
    }
    buf[len] = '\0';
    *ret = TAKE_PTR(buf);
    if (ret_len)
        *ret_len = len;
    return 0;
}

int read_full_file(const char *path, size_t max, char **ret, size_t *ret_len) {
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    return read_fd_full(fd, max, ret, ret_len);
}

/* Opens path (flags, plus non-blocking) when it is a regular file: a FIFO would wait for the
 * other side on open, which O_NONBLOCK avoids and a regular file ignores; anything that is not
 * a regular file is -EINVAL. The fd, with st filled, or -errno. */
static int open_regular(const char *path, int flags, mode_t mode, struct stat *st) {
    _cleanup_close_ int fd = open(path, flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, mode);
    if (fd < 0)
        return -errno;
    if (fstat(fd, st) < 0)
        return -errno;
    if (!S_ISREG(st->st_mode))
        return -EINVAL;
    return TAKE_FD(fd);
}

int read_attr_file(const char *path, size_t max, char **ret, size_t *ret_len) {
    struct stat st;
    _cleanup_close_ int fd = open_regular(path, O_RDONLY, 0, &st);
    if (fd < 0)
        return fd;
    return read_fd_full(fd, max, ret, ret_len);
}

/* The first line of buf, trailing white space stripped, as *ret (buf itself). */
static int first_line(char *buf, char **ret) {
    char *nl = strchr(buf, '\n');
    if (nl)
        *nl = '\0';
    strip_trailing(buf);
    *ret = buf;
    return 0;
}

int read_one_line(const char *path, char **ret) {
    char *buf = NULL;
    int r = read_full_file(path, 64 * 1024, &buf, NULL);
    if (r < 0)
        return r;
    assert(buf); /* set on success */
    return first_line(buf, ret);
}

int read_attr_line(const char *path, char **ret) {
    char *buf = NULL;
    int r = read_attr_file(path, 64 * 1024, &buf, NULL);
    if (r < 0)
        return r;
    assert(buf); /* set on success */
    return first_line(buf, ret);
}

/* s in one write (a sysfs attribute takes its value in one); a short write is -EIO. */
static int write_string_fd(int fd, const char *s) {
    size_t n = strlen(s);
    ssize_t w = write(fd, s, n);
    return w < 0 ? -errno : ((size_t)w == n ? 0 : -EIO);
}

int write_string_file(const char *path, const char *s) {
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -errno;
    int r = write_string_fd(fd, s);
    if (close(fd) < 0 && r == 0)
        r = -errno;
    return r;
}

int write_string_fd_sync(int fd, const char *s) {
    int r = write_string_fd(fd, s);
    if (r < 0)
        return r;
    return fsync(fd) < 0 ? -errno : 0;
}

int write_string_file_atomic_as(const char *path, const char *s, WriteSync sync) {
    char tmp[PATH_MAX];
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
        return -ENAMETOOLONG;
    _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int r = sync & WRITE_SYNC_CONTENT ? write_string_fd_sync(fd, s) : write_string_fd(fd, s);
    (void)close(TAKE_FD(fd)); /* closed before the rename */
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0) {
        unlink(tmp);
        return r;
    }
    /* The rename itself is durable only once the folder is synced; best effort. */
    if (sync == WRITE_SYNC_ALL)
        (void)fsync_parent_dir(path);
    return 0;
}

int write_lines_file_in_place(const char *path, const char *s) {
    size_t n = strlen(s);
    if (n > WRITE_IN_PLACE_MAX)
        return write_string_file_atomic_as(path, s, WRITE_SYNC_NONE);
    /* A FIFO put in the file's place is refused (ENXIO) rather than waited on. */
    struct stat st;
    _cleanup_close_ int fd = open_regular(path, O_WRONLY | O_CREAT, 0644, &st);
    if (fd < 0)
        return fd;
    if (st.st_size > WRITE_IN_PLACE_MAX) {
        (void)close(TAKE_FD(fd));
        return write_string_file_atomic_as(path, s, WRITE_SYNC_NONE);
    }
    char buf[WRITE_IN_PLACE_MAX];
    size_t len = MAX(n, (size_t)st.st_size);
    memcpy(buf, s, n);
    memset(buf + n, '\n', len - n);
    ssize_t w = len ? pwrite(fd, buf, len, 0) : 0;
    return w < 0 ? -errno : ((size_t)w == len ? 0 : -EIO);
}

int fsync_parent_dir(const char *path) {
    _cleanup_free_ char *dir = strdup(path);
    if (!dir)
        return -ENOMEM;
    _cleanup_close_ int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -errno;
    return fsync(dfd) < 0 ? -errno : 0;
}

int write_string_file_atomic(const char *path, const char *s) {
    return write_string_file_atomic_as(path, s, WRITE_SYNC_ALL);
}
