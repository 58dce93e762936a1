/* fileio.c: whole-file and small-attribute reads and writes. */
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"
#include "strutil.h"

int read_full_file(const char *path, size_t max, char **ret, size_t *ret_len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return -ENOMEM;
    }
    for (;;) {
        if (len + 1 >= cap) {
            if (cap > max) {
                free(buf);
                close(fd);
                return -EFBIG;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                close(fd);
                return -ENOMEM;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int r = -errno;
            free(buf);
            close(fd);
            return r;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len > max) {
            free(buf);
            close(fd);
            return -EFBIG;
        }
    }
    close(fd);
    buf[len] = '\0';
    *ret = buf;
    if (ret_len)
        *ret_len = len;
    return 0;
}

int read_one_line(const char *path, char **ret) {
    char *buf = NULL;
    int r = read_full_file(path, 64 * 1024, &buf, NULL);
    if (r < 0)
        return r;
    char *nl = strchr(buf, '\n');
    if (nl)
        *nl = '\0';
    strip_trailing(buf);
    *ret = buf;
    return 0;
}

int write_string_file(const char *path, const char *s) {
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -errno;
    size_t n = strlen(s);
    ssize_t w = write(fd, s, n);
    int r = w < 0 ? -errno : ((size_t)w == n ? 0 : -EIO);
    if (close(fd) < 0 && r == 0)
        r = -errno;
    return r;
}
