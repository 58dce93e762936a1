/* helpers.c: shared test utilities. */
#include "helpers.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/fileio.h"

char *write_temp_file(const char *text) {
    char *path = strdup("/tmp/einsora-test-XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0, "mkstemp failed");
    size_t n = strlen(text);
    cr_assert(write(fd, text, n) == (ssize_t)n);
    close(fd);
    return path;
}

char *slurp(const char *path) {
    char *buf = NULL;
    int r = read_full_file(path, 64u << 20, &buf, NULL);
    cr_assert(r >= 0, "cannot read %s: %s", path, strerror(-r));
    return buf;
}

int remove_temp_tree(const char *dir) {
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        execlp("rm", "rm", "-rf", "--", dir, (char *)NULL);
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

int run_einsora(char **ret_out, char **ret_err, const char *arg0, ...) {
    const char *argv[64] = {EINSORA_BIN};
    size_t n = 1;
    va_list ap;
    va_start(ap, arg0);
    for (const char *a = arg0; a && n < 63; a = va_arg(ap, const char *))
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;

    char out_path[] = "/tmp/einsora-out-XXXXXX", err_path[] = "/tmp/einsora-err-XXXXXX";
    int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
    cr_assert(out_fd >= 0 && err_fd >= 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        dup2(out_fd, 1);
        dup2(err_fd, 2);
        execv(EINSORA_BIN, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    close(out_fd);
    close(err_fd);
    char *out = slurp(out_path), *err = slurp(err_path);
    unlink(out_path);
    unlink(err_path);
    if (ret_out)
        *ret_out = out;
    else
        free(out);
    if (ret_err)
        *ret_err = err;
    else
        free(err);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
