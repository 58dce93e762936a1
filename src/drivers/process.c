/* process.c: the native-process driver (process.h): fork, a waiting wrapper, pid files. */
#include "drivers/process.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/fileio.h"
#include "util/macro.h"
#include "util/strutil.h"

extern char **environ;

typedef struct Proc {
    Driver base;
    char *dir;
} Proc;

static Proc *proc_of(Driver *d) {
    return (Proc *)d;
}

static char *file_of(Proc *p, const char *id, const char *ext) {
    return strprintf("%s/%s.%s", p->dir, id, ext);
}

static void sleep_ms(unsigned ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* The start time of pid in clock ticks after boot (Linux), 0 where unknown; -ESRCH when the
 * process is gone or only a zombie (a wrapper reparented to an init that does not reap). */
static int start_ticks(pid_t pid, uint64_t *ret) {
#ifdef __linux__
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    _cleanup_free_ char *text = NULL;
    if (read_full_file(path, 4096, &text, NULL) < 0)
        return -ESRCH;
    /* The command name (field 2) may hold spaces and parentheses: count from the last ')'. */
    const char *s = strrchr(text, ')');
    if (!s || s[1] != ' ' || s[2] == 'Z' || s[2] == 'X')
        return -ESRCH;
    s += 2;
    for (int field = 3; field < 22; field++) {
        s = strchr(s, ' ');
        if (!s)
            return -EIO;
        s++;
    }
    *ret = strtoull(s, NULL, 10);
    return 0;
#else
    if (kill(pid, 0) < 0 && errno == ESRCH)
        return -ESRCH;
    *ret = 0;
    return 0;
#endif
}

typedef struct PidFile {
    pid_t pid;
    uint64_t start;
    unsigned port;
} PidFile;

static int read_pid_file(Proc *p, const char *id, PidFile *ret) {
    _cleanup_free_ char *path = file_of(p, id, "pid"), *text = NULL;
    if (!path)
        return -ENOMEM;
    int r = read_full_file(path, 256, &text, NULL);
    if (r < 0)
        return r;
    long long pid;
    unsigned long long start;
    unsigned port;
    if (sscanf(text, "%lld %llu %u", &pid, &start, &port) != 3 || pid <= 1 || pid > INT_MAX ||
        port > 65535)
        return -EBADMSG;
    *ret = (PidFile){.pid = (pid_t)pid, .start = start, .port = port};
    return 0;
}

/* Whether the wrapper the pid file names still runs (and is ours, not a reused pid). */
static bool wrapper_alive(const PidFile *pf) {
    uint64_t t;
    if (start_ticks(pf->pid, &t) < 0)
        return false;
    return pf->start == 0 || t == pf->start;
}

/* argv[0] as a path to execute: as given when it holds a '/', else the first match in $PATH. */
static char *find_binary(const char *name) {
    if (strchr(name, '/'))
        return access(name, X_OK) == 0 ? strdup(name) : NULL;
    const char *path = getenv("PATH");
    for (const char *d = path ? path : "/usr/bin:/bin"; *d;) {
        const char *e = strchr(d, ':'); /* (strchrnul is not on macOS) */
        if (!e)
            e = d + strlen(d);
        _cleanup_free_ char *c = strprintf("%.*s/%s", (int)(e - d), e > d ? d : ".", name);
        if (c && access(c, X_OK) == 0)
            return TAKE_PTR(c);
        d = *e ? e + 1 : e;
    }
    return NULL;
}

/* The agent's environment with spec's KEY=VALUE items over it, less the agent's own EINSORA_
 * settings: its node token above all, which a workload must never hold (a process shares the
 * agent's user; only the placement's own items reach it). */
static char **merge_env(const char *const *add) {
    size_t n = 0, k = 0, m = 0;
    while (environ[n])
        n++;
    while (add && add[m])
        m++;
    char **v = calloc(n + m + 1, sizeof(char *));
    if (!v)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(environ[i], '=');
        if (strncmp(environ[i], "EINSORA_", 8) == 0)
            continue;
        bool overridden = false;
        for (size_t j = 0; eq && j < m; j++)
            overridden |= !strncmp(add[j], environ[i], (size_t)(eq - environ[i]) + 1);
        if (!overridden)
            v[k++] = environ[i];
    }
    for (size_t j = 0; j < m; j++)
        v[k++] = (char *)add[j];
    return v;
}

/* Async-signal-safe: write "CODE\n" to path.tmp and rename it over path. */
static void write_exit_file(const char *tmp, const char *path, int code) {
    char buf[16];
    size_t n = sizeof(buf);
    buf[--n] = '\n';
    unsigned u = (unsigned)code;
    do
        buf[--n] = (char)('0' + u % 10);
    while ((u /= 10) && n > 0);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    ssize_t w = write(fd, buf + n, sizeof(buf) - n);
    (void)fsync(fd);
    close(fd);
    if (w == (ssize_t)(sizeof(buf) - n))
        (void)rename(tmp, path);
}

typedef struct Launch {
    const char *bin, *exit_path, *exit_tmp;
    char *const *argv, *const *envp;
    int log_fd, pipe_fd;
    int go_fd; /* the agent writes one byte once the pid file is there; EOF: it died first */
    int max_fd;
} Launch;

/* The wrapper (in the child of the intermediate; async-signal-safe calls only). */
_Noreturn static void run_wrapper(const Launch *l) {
    (void)setsid();
    struct sigaction ign = {.sa_handler = SIG_IGN}, dfl = {.sa_handler = SIG_DFL};
    (void)sigaction(SIGTERM, &ign, NULL);
    (void)sigaction(SIGINT, &ign, NULL);
    (void)sigaction(SIGHUP, &ign, NULL);
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0)
        (void)dup2(devnull, STDIN_FILENO);
    (void)dup2(l->log_fd, STDOUT_FILENO);
    (void)dup2(l->log_fd, STDERR_FILENO);
    /* Keep none of the agent's sockets and files open for the server's lifetime (the go pipe's
     * write end included: the agent's death must reach the read below as an end of file). */
    for (int fd = 3; fd < l->max_fd; fd++)
        if (fd != l->pipe_fd && fd != l->go_fd)
            (void)close(fd);
    /* Start nothing until the agent has recorded us: an agent killed before its pid file is
     * written would not know of a server running, and its next life would start the request
     * again (R17: never twice). */
    char go = 0;
    ssize_t got;
    while ((got = read(l->go_fd, &go, 1)) < 0 && errno == EINTR)
        ;
    if (got != 1)
        _exit(0);
    (void)close(l->go_fd);
    pid_t pid = fork();
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        (void)sigprocmask(SIG_SETMASK, &none, NULL);
        (void)sigaction(SIGTERM, &dfl, NULL);
        (void)sigaction(SIGINT, &dfl, NULL);
        (void)sigaction(SIGHUP, &dfl, NULL);
        (void)sigaction(SIGPIPE, &dfl, NULL); /* the agent (libcurl) may ignore it */
        execve(l->bin, l->argv, l->envp);
        static const char msg[] = "einsora: cannot execute the server binary\n";
        (void)write(STDERR_FILENO, msg, sizeof(msg) - 1);
        _exit(127);
    }
    /* Tell the agent the server is forked (the pipe closes as we exit on failure too). */
    (void)close(l->pipe_fd);
    int status = 0, code = 127;
    if (pid > 0) {
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        code = WIFEXITED(status)     ? WEXITSTATUS(status)
               : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                     : 127;
    }
    write_exit_file(l->exit_tmp, l->exit_path, code);
    _exit(0);
}

static int remove_files(Proc *p, const char *id) {
    static const char *const exts[] = {"pid", "exit", "exit.tmp", "log"};
    for (size_t i = 0; i < ARRAY_SIZE(exts); i++) {
        _cleanup_free_ char *f = file_of(p, id, exts[i]);
        if (!f)
            return -ENOMEM;
        if (unlink(f) < 0 && errno != ENOENT)
            return -errno;
    }
    return 0;
}

static int proc_start(Driver *d, const WorkloadSpec *spec, Error *err) {
    Proc *p = proc_of(d);
    if (!driver_id_is_valid(spec->id))
        return error_set(err, -EINVAL, "'%.40s' is not a request id", strempty(spec->id));
    if (!spec->command || !spec->command[0] || !spec->command[0][0])
        return error_set(err, -EINVAL, "a process workload needs its server's command line");
    _cleanup_free_ char *pid_path = file_of(p, spec->id, "pid"),
                        *exit_path = file_of(p, spec->id, "exit"),
                        *exit_tmp = file_of(p, spec->id, "exit.tmp"),
                        *log_path = file_of(p, spec->id, "log");
    if (!pid_path || !exit_path || !exit_tmp || !log_path)
        return error_set(err, -ENOMEM, "out of memory");
    if (access(pid_path, F_OK) == 0)
        return error_set(err, -EEXIST, "request %s already has its process here (%s)", spec->id,
                         pid_path);
    _cleanup_free_ char *bin = find_binary(spec->command[0]);
    if (!bin)
        return error_set(err, -ENOENT, "the server binary '%.200s' is not there or not executable",
                         spec->command[0]);
    _cleanup_free_ char **envp = merge_env(spec->env);
    if (!envp)
        return error_set(err, -ENOMEM, "out of memory");
    int r = remove_files(p, spec->id); /* a leftover exit or log of an earlier life */
    if (r < 0)
        return error_set(err, r, "cannot clear the old files of request %s in %s: %s", spec->id,
                         p->dir, strerror(-r));
    int log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (log_fd < 0)
        return error_set(err, -errno, "cannot open the log %s: %s", log_path, strerror(errno));
    int pfd[2], gfd[2];
    /* pipe() and FD_CLOEXEC, as macOS has no pipe2(); the agent starts nothing meanwhile. */
    if (pipe(pfd) < 0) {
        r = -errno;
        close(log_fd);
        return error_set(err, r, "cannot make a pipe: %s", strerror(-r));
    }
    if (pipe(gfd) < 0) {
        r = -errno;
        close(log_fd), close(pfd[0]), close(pfd[1]);
        return error_set(err, r, "cannot make a pipe: %s", strerror(-r));
    }
    (void)fcntl(pfd[0], F_SETFD, FD_CLOEXEC);
    (void)fcntl(pfd[1], F_SETFD, FD_CLOEXEC);
    (void)fcntl(gfd[0], F_SETFD, FD_CLOEXEC);
    (void)fcntl(gfd[1], F_SETFD, FD_CLOEXEC);
#ifdef F_SETNOSIGPIPE
    (void)fcntl(gfd[1], F_SETNOSIGPIPE, 1);
#endif
    long max_fd = sysconf(_SC_OPEN_MAX);
    Launch l = {.bin = bin,
                .exit_path = exit_path,
                .exit_tmp = exit_tmp,
                .argv = (char *const *)spec->command,
                .envp = envp,
                .log_fd = log_fd,
                .pipe_fd = pfd[1],
                .go_fd = gfd[0],
                .max_fd = max_fd > 0 && max_fd < 65536 ? (int)max_fd : 65536};
    pid_t mid = fork();
    if (mid == 0) {
        pid_t w = fork();
        if (w == 0)
            run_wrapper(&l);
        /* The wrapper's pid goes to the agent; int-sized, written whole. */
        int v = w;
        (void)!write(pfd[1], &v, sizeof(v));
        _exit(w > 0 ? 0 : 1);
    }
    r = mid < 0 ? -errno : 0;
    close(pfd[1]);
    close(gfd[0]);
    close(log_fd);
    int wpid = -1;
    if (mid > 0) {
        int status;
        while (waitpid(mid, &status, 0) < 0 && errno == EINTR)
            ;
        if (read(pfd[0], &wpid, sizeof(wpid)) != (ssize_t)sizeof(wpid))
            wpid = -1;
    }
    if (r < 0 || wpid <= 1) {
        close(pfd[0]);
        close(gfd[1]); /* a wrapper that runs reads the end of file and starts nothing */
        return error_set(err, r < 0 ? r : -ECHILD,
                         "cannot start the process of request %s: fork failed", spec->id);
    }
    uint64_t t = 0;
    if (start_ticks(wpid, &t) < 0)
        t = 0; /* already over: its exit file says so */
    char line[80];
    snprintf(line, sizeof(line), "%d %" PRIu64 " %u\n", wpid, t,
             spec->n_ports ? spec->ports[0] : 0);
    if ((r = write_string_file_atomic(pid_path, line)) < 0) {
        close(pfd[0]);
        close(gfd[1]); /* the wrapper starts nothing */
        (void)kill(-wpid, SIGKILL);
        (void)remove_files(p, spec->id);
        return error_set(err, r, "cannot write %s: %s (nothing was started)", pid_path,
                         strerror(-r));
    }
    /* Recorded: now the server may start. A wrapper already gone (killed from outside) must
     * not kill the agent by SIGPIPE: blocked for the write, a pending one taken back. */
    sigset_t pipe_set, old_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    (void)pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
    ssize_t w;
    while ((w = write(gfd[1], "g", 1)) < 0 && errno == EINTR)
        ;
    int write_errno = errno;
#ifdef __linux__ /* (macOS has no sigtimedwait(); F_SETNOSIGPIPE there, below) */
    if (w < 0 && write_errno == EPIPE)
        (void)sigtimedwait(&pipe_set, NULL, &(struct timespec){0, 0});
#else
    (void)write_errno;
#endif
    (void)pthread_sigmask(SIG_SETMASK, &old_set, NULL);
    close(gfd[1]);
    /* Wait until the wrapper closed its end: the server is forked, in the wrapper's own
     * session, by then. */
    char c;
    while (read(pfd[0], &c, 1) < 0 && errno == EINTR)
        ;
    close(pfd[0]);
    if (w != 1)
        return error_set(err, -EIO, "request %s: its wrapper could not be told to start", spec->id);
    return 0;
}

static int read_exit_code(Proc *p, const char *id, int *ret) {
    _cleanup_free_ char *path = file_of(p, id, "exit"), *text = NULL;
    if (!path)
        return -ENOMEM;
    int r = read_full_file(path, 64, &text, NULL);
    if (r < 0)
        return r;
    *ret = atoi(text);
    return 0;
}

static int proc_status(Driver *d, const char *id, WorkloadState *ret, Error *err) {
    Proc *p = proc_of(d);
    WorkloadState s = {0};
    PidFile pf;
    int r = driver_id_is_valid(id) ? read_pid_file(p, id, &pf) : -ENOENT;
    if (r == -ENOENT) {
        *ret = (WorkloadState){.status = WORKLOAD_ABSENT};
        return 0;
    }
    if (r < 0)
        return error_set(err, r, "the pid file of request %s in %s is unreadable: %s", id, p->dir,
                         strerror(-r));
    s.host_port = pf.port;
    if (read_exit_code(p, id, &s.exit_code) >= 0) {
        s.status = WORKLOAD_EXITED;
        snprintf(s.message, sizeof(s.message), "exited with code %d", s.exit_code);
    } else if (wrapper_alive(&pf))
        s.status = WORKLOAD_RUNNING;
    else {
        s.status = WORKLOAD_FAILED;
        snprintf(s.message, sizeof(s.message),
                 "its process %d is gone without an exit code (killed from outside?)", (int)pf.pid);
    }
    *ret = s;
    return 0;
}

/* Poll until the wrapper is gone; false when max_ms passed first. */
static bool wait_gone(const PidFile *pf, unsigned max_ms) {
    for (unsigned waited = 0;; waited += 50) {
        if (!wrapper_alive(pf))
            return true;
        if (waited >= max_ms)
            return false;
        sleep_ms(50);
    }
}

static int proc_stop(Driver *d, const char *id, unsigned grace_s, Error *err) {
    Proc *p = proc_of(d);
    if (!driver_id_is_valid(id))
        return 0;
    PidFile pf;
    int r = read_pid_file(p, id, &pf);
    if (r == -ENOENT)
        return 0;
    uint64_t ticks;
    if (r >= 0 && !wrapper_alive(&pf) && start_ticks(pf.pid, &ticks) == -ESRCH) {
        /* The wrapper was killed from outside, and the server it started may run on in its
         * process group, holding the port the next endpoint is given. The wrapper's pid is
         * gone or a zombie (not reused), so a group of that id is still ours. */
        (void)kill(-pf.pid, SIGKILL);
    } else if (r >= 0 && wrapper_alive(&pf)) {
        /* The wrapper ignores SIGTERM, and sees the server end, writes its code, and exits. */
        (void)kill(-pf.pid, SIGTERM);
        if (!wait_gone(&pf, grace_s * 1000)) {
            (void)kill(-pf.pid, SIGKILL);
            if (!wait_gone(&pf, 10000))
                return error_set(err, -ETIMEDOUT,
                                 "the process group %d of request %s outlived SIGKILL", (int)pf.pid,
                                 id);
        }
    }
    if ((r = remove_files(p, id)) < 0)
        return error_set(err, r, "cannot remove the files of request %s in %s: %s", id, p->dir,
                         strerror(-r));
    return 0;
}

/* Copy from offset *pos of fd to out. */
static void copy_new(int fd, off_t *pos, FILE *out) {
    char buf[8192];
    ssize_t n;
    while ((n = pread(fd, buf, sizeof(buf), *pos)) > 0) {
        fwrite(buf, 1, (size_t)n, out);
        *pos += n;
    }
    fflush(out);
}

static int proc_logs(Driver *d, const char *id, bool follow, FILE *out, Error *err) {
    Proc *p = proc_of(d);
    _cleanup_free_ char *path = driver_id_is_valid(id) ? file_of(p, id, "log") : NULL;
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd < 0)
        return error_set(err, -ENOENT, "request %s has no process here", strempty(id));
    off_t pos = 0;
    copy_new(fd, &pos, out);
    for (WorkloadState st; follow;) {
        if (proc_status(d, id, &st, err) < 0 || st.status != WORKLOAD_RUNNING)
            break;
        sleep_ms(200);
        copy_new(fd, &pos, out);
    }
    copy_new(fd, &pos, out); /* what it wrote as it ended */
    close(fd);
    return 0;
}

static int proc_list(Driver *d, char ***ret_ids, size_t *ret_n, Error *err) {
    Proc *p = proc_of(d);
    DIR *dir = opendir(p->dir);
    if (!dir)
        return error_set(err, -errno, "cannot read %s: %s", p->dir, strerror(errno));
    size_t n = 0, cap = 8;
    char **ids = calloc(cap, sizeof(char *));
    for (struct dirent *e; ids && (e = readdir(dir));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || !STREQ(e->d_name + len - 4, ".pid"))
            continue;
        char id[DRIVER_ID_MAX];
        if (len - 4 >= sizeof(id))
            continue;
        snprintf(id, sizeof(id), "%.*s", (int)(len - 4), e->d_name);
        if (!driver_id_is_valid(id))
            continue;
        if (n + 1 >= cap) {
            char **bigger = realloc(ids, (cap *= 2) * sizeof(char *));
            if (!bigger) {
                driver_ids_free(ids, n);
                ids = NULL;
                break;
            }
            ids = bigger;
        }
        if (!(ids[n] = strdup(id))) {
            driver_ids_free(ids, n);
            ids = NULL;
            break;
        }
        n++;
    }
    closedir(dir);
    if (!ids)
        return error_set(err, -ENOMEM, "out of memory");
    *ret_ids = ids;
    *ret_n = n;
    return 0;
}

static void proc_free(Driver *d) {
    Proc *p = proc_of(d);
    free(p->dir);
    free(p);
}

static const DriverOps process_ops = {
        .name = "process",
        .start = proc_start,
        .stop = proc_stop,
        .status = proc_status,
        .logs = proc_logs,
        .list = proc_list,
        .free = proc_free,
};

int process_driver_new(const ProcessConfig *cfg, Driver **ret, Error *err) {
    if (isempty(cfg->dir))
        return error_set(err, -EINVAL,
                         "the process driver needs a folder for its pid and log files");
    if (mkdir(cfg->dir, 0700) < 0 && errno != EEXIST)
        return error_set(err, -errno, "cannot create %s: %s", cfg->dir, strerror(errno));
    Proc *p = calloc(1, sizeof(*p));
    if (!p || !(p->dir = strdup(cfg->dir))) {
        free(p);
        return error_set(err, -ENOMEM, "out of memory");
    }
    p->base.ops = &process_ops;
    *ret = &p->base;
    return 0;
}
