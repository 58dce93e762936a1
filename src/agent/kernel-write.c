/* kernel-write.c: kernel attribute writes in a child process, with a timeout. */
#include "kernel-write.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Children killed after a timeout that had not exited yet: reaped later, never waited for. */
#define MAX_ABANDONED 64
static pid_t abandoned[MAX_ABANDONED];

static void remember_abandoned(pid_t pid) {
    for (size_t i = 0; i < MAX_ABANDONED; i++)
        if (abandoned[i] == 0) {
            abandoned[i] = pid;
            return;
        }
}

int kernel_write_reap(void) {
    int left = 0;
    for (size_t i = 0; i < MAX_ABANDONED; i++) {
        if (abandoned[i] == 0)
            continue;
        if (waitpid(abandoned[i], NULL, WNOHANG) == abandoned[i])
            abandoned[i] = 0;
        else
            left++;
    }
    return left;
}

/* The child: one open+write, then its errno (0 on success) down the pipe. */
_Noreturn static void child_write(int report_fd, const char *path, const char *value) {
    int e = 0;
    signal(SIGPIPE, SIG_IGN);
    int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        e = errno;
    else {
        size_t len = strlen(value);
        ssize_t n = write(fd, value, len);
        if (n < 0)
            e = errno;
        else if ((size_t)n != len)
            e = EIO;
        if (close(fd) < 0 && e == 0 && errno != EINTR)
            e = errno;
    }
    ssize_t unused = write(report_fd, &e, sizeof(e));
    (void)unused;
    _exit(0);
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int kernel_write(const char *path, const char *value, int timeout_ms, Error *err) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return error_set(err, -errno, "could not create a pipe to write %s: %s", path,
                         strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        return error_set(err, -e, "could not start a process to write %s: %s", path, strerror(e));
    }
    if (pid == 0) {
        close(p[0]);
        child_write(p[1], path, value);
    }
    close(p[1]);

    int e = -1;
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        long long left = deadline - now_ms();
        if (left < 0)
            left = 0;
        struct pollfd pfd = {.fd = p[0], .events = POLLIN};
        int r = poll(&pfd, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r > 0) {
            ssize_t n = read(p[0], &e, sizeof(e));
            if (n != (ssize_t)sizeof(e))
                e = EIO; /* the child died without reporting */
        }
        break;
    }
    close(p[0]);

    if (e < 0) {
        /* Timed out: the write is still inside the kernel. Kill what can be killed and move on;
         * a process in uninterruptible sleep stays until the kernel returns. */
        kill(pid, SIGKILL);
        bool reaped = false;
        for (int i = 0; i < 100 && !reaped; i++) {
            reaped = waitpid(pid, NULL, WNOHANG) == pid;
            if (!reaped)
                usleep(1000);
        }
        if (!reaped)
            remember_abandoned(pid);
        return error_set(
                err, -ETIMEDOUT,
                "writing to %s did not return within %d ms (the kernel is stuck in that call)",
                path, timeout_ms);
    }
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    if (e != 0)
        return error_set(err, -e, "the kernel refused the write to %s: %s", path, strerror(e));
    return 0;
}
