/* test-process.c: the native-process driver (R10, R14, R17) with a shell script standing in for
 * the MLX / llama.cpp server: start, running, logs, exit code, stop (SIGTERM, then SIGKILL
 * after the grace period), an agent restart adopting the process and never starting it twice,
 * a missing binary refused with a sentence. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "drivers/process.h"
#include "util/fileio.h"
#include "util/macro.h"
#include "util/strutil.h"

static char tmp[64];
static char *dir, *script;

static void rm_tree(void) {
    _cleanup_free_ char *cmd = strprintf("rm -rf '%s'", tmp);
    cr_assert(system(cmd) == 0);
}

/* The stand-in server: prints its arguments and EINSORA_MODEL, then does what MODE says. */
static const char server_sh[] = "#!/bin/sh\n"
                                "echo \"server args: $*\"\n"
                                "echo \"model: $EINSORA_MODEL\"\n"
                                "case \"$MODE\" in\n"
                                "exit3) exit 3 ;;\n"
                                "stubborn) trap 'echo term >\"$MARK\"' TERM\n"
                                "          : >\"$MARK.ready\" ;;\n"
                                "esac\n"
                                "while :; do sleep 0.05; done\n";

static void setup(void) {
    snprintf(tmp, sizeof(tmp), "/tmp/einsora-proc-XXXXXX");
    cr_assert(mkdtemp(tmp));
    dir = strprintf("%s/processes", tmp);
    script = strprintf("%s/fake-server", tmp);
    FILE *f = fopen(script, "w");
    cr_assert(f);
    fputs(server_sh, f);
    fclose(f);
    cr_assert(chmod(script, 0755) == 0);
}

static void teardown(void) {
    rm_tree();
    free(dir);
    free(script);
}

static Driver *new_driver(void) {
    Driver *d = NULL;
    Error err = {0};
    ProcessConfig c = {.dir = dir};
    cr_assert_eq(process_driver_new(&c, &d, &err), 0, "%s", error_message(&err));
    return d;
}

static void start(Driver *d, const char *id, const char *mode, const char *mark) {
    _cleanup_free_ char *m = strprintf("MODE=%s", mode), *k = strprintf("MARK=%s", strempty(mark));
    const char *argv[] = {script, "--model", "/models/q4.gguf", "--port", "18080", NULL};
    const char *env[] = {m, k, "EINSORA_MODEL=/models/q4.gguf", NULL};
    unsigned port = 18080;
    WorkloadSpec s = {.id = id,
                      .kind = "endpoint",
                      .command = argv,
                      .env = env,
                      .ports = &port,
                      .n_ports = 1};
    Error err = {0};
    cr_assert_eq(d->ops->start(d, &s, &err), 0, "%s", error_message(&err));
}

static WorkloadState status_of(Driver *d, const char *id) {
    WorkloadState st;
    Error err = {0};
    cr_assert_eq(d->ops->status(d, id, &st, &err), 0, "%s", error_message(&err));
    return st;
}

/* Poll (generous deadline) until the workload is in state want. */
static WorkloadState wait_for(Driver *d, const char *id, WorkloadStatus want) {
    for (int i = 0; i < 600; i++) {
        WorkloadState st = status_of(d, id);
        if (st.status == want)
            return st;
        usleep(50000);
    }
    cr_assert_fail("request %s never became %s", id, workload_status_to_string(want));
    return (WorkloadState){0};
}

static char *logs_of(Driver *d, const char *id, bool follow) {
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    Error err = {0};
    cr_assert_eq(d->ops->logs(d, id, follow, out, &err), 0, "%s", error_message(&err));
    fclose(out);
    return text;
}

/* Whether any live (not zombie) process is in process group pgid: /proc, as zombies still
 * answer kill() until an init reaps them, and this container's init may not. */
static bool group_runs(pid_t pgid) {
    DIR *d = opendir("/proc");
    cr_assert(d);
    bool found = false;
    for (struct dirent *e; !found && (e = readdir(d));) {
        _cleanup_free_ char *path = strprintf("/proc/%s/stat", e->d_name), *text = NULL;
        if (!string_is_digits(e->d_name) || read_full_file(path, 4096, &text, NULL) < 0)
            continue;
        const char *s = strrchr(text, ')');
        char state;
        int ppid, pgrp;
        if (s && sscanf(s + 1, " %c %d %d", &state, &ppid, &pgrp) == 3 && pgrp == pgid &&
            state != 'Z')
            found = true;
    }
    closedir(d);
    return found;
}

static pid_t pid_of(const char *id) {
    _cleanup_free_ char *path = strprintf("%s/%s.pid", dir, id), *text = NULL;
    cr_assert_eq(read_full_file(path, 256, &text, NULL), 0);
    return (pid_t)atoi(text);
}

TestSuite(process_driver, .init = setup, .fini = teardown, .timeout = 120);

Test(process_driver, r14_start_runs_logs_and_reports_its_port) {
    _cleanup_(driver_freep) Driver *d = new_driver();
    start(d, "41", "serve", NULL);
    WorkloadState st = wait_for(d, "41", WORKLOAD_RUNNING);
    cr_assert_eq(st.host_port, 18080);
    /* Its output reaches the log file in the agent's state folder. */
    for (int i = 0; i < 600; i++) {
        _cleanup_free_ char *l = logs_of(d, "41", false);
        if (strstr(l, "model: /models/q4.gguf"))
            break;
        cr_assert(i < 599, "the log never showed the server's output: %s", l);
        usleep(50000);
    }
    _cleanup_free_ char *l = logs_of(d, "41", false);
    cr_assert(strstr(l, "server args: --model /models/q4.gguf --port 18080"), "%s", l);
    _cleanup_free_ char *log_path = strprintf("%s/41.log", dir);
    cr_assert_eq(access(log_path, F_OK), 0);
    /* A new session: the wrapper leads its own process group, apart from the agent's. */
    pid_t pid = pid_of("41");
    cr_assert_eq(getpgid(pid), pid);
    cr_assert_eq(getsid(pid), pid);
    Error err = {0};
    cr_assert_eq(d->ops->stop(d, "41", 5, &err), 0, "%s", error_message(&err));
    cr_assert_eq(status_of(d, "41").status, WORKLOAD_ABSENT);
    cr_assert_neq(access(log_path, F_OK), 0, "stop leaves nothing behind");
}

Test(process_driver, r17_exit_code_is_reported) {
    _cleanup_(driver_freep) Driver *d = new_driver();
    start(d, "42", "exit3", NULL);
    WorkloadState st = wait_for(d, "42", WORKLOAD_EXITED);
    cr_assert_eq(st.exit_code, 3);
    cr_assert_str_eq(st.message, "exited with code 3");
    /* Following the logs of an ended process returns at once with all of them. */
    _cleanup_free_ char *l = logs_of(d, "42", true);
    cr_assert(strstr(l, "server args:"), "%s", l);
}

Test(process_driver, r17_stop_sends_sigterm_then_sigkill_after_grace) {
    _cleanup_(driver_freep) Driver *d = new_driver();
    _cleanup_free_ char *mark = strprintf("%s/got-term", tmp);
    _cleanup_free_ char *ready = strprintf("%s.ready", mark);
    start(d, "43", "stubborn", mark);
    wait_for(d, "43", WORKLOAD_RUNNING);
    /* Running is not yet trapping: stop only once the script says its trap is set, or a
     * slow machine delivers SIGTERM before the trap exists. */
    for (int i = 0; i < 600 && access(ready, F_OK) != 0; i++)
        usleep(50000);
    cr_assert_eq(access(ready, F_OK), 0, "the stubborn server never set its trap");
    pid_t pid = pid_of("43");
    Error err = {0};
    cr_assert_eq(d->ops->stop(d, "43", 1, &err), 0, "%s", error_message(&err));
    /* It was asked first (its trap ran), ignored it, and was killed: the group is gone. */
    cr_assert_eq(access(mark, F_OK), 0, "SIGTERM came first");
    cr_assert(!group_runs(pid), "nothing of its process group runs");
    cr_assert_eq(status_of(d, "43").status, WORKLOAD_ABSENT);
    /* A polite server ends at SIGTERM with 128+15: seen through the exit file before removal. */
    start(d, "44", "serve", NULL);
    wait_for(d, "44", WORKLOAD_RUNNING);
    cr_assert_eq(kill(-pid_of("44"), SIGTERM), 0);
    WorkloadState st = wait_for(d, "44", WORKLOAD_EXITED);
    cr_assert_eq(st.exit_code, 128 + SIGTERM);
    cr_assert_eq(d->ops->stop(d, "44", 1, &err), 0, "%s", error_message(&err));
}

Test(process_driver, r17_agent_restart_adopts_and_never_starts_twice) {
    Driver *d = new_driver();
    start(d, "45", "serve", NULL);
    wait_for(d, "45", WORKLOAD_RUNNING);
    pid_t pid = pid_of("45");
    driver_free(d); /* the agent goes away; the process does not */
    d = new_driver();
    char **ids = NULL;
    size_t n = 0;
    Error err = {0};
    cr_assert_eq(d->ops->list(d, &ids, &n, &err), 0, "%s", error_message(&err));
    cr_assert_eq(n, 1);
    cr_assert_str_eq(ids[0], "45");
    driver_ids_free(ids, n);
    cr_assert_eq(status_of(d, "45").status, WORKLOAD_RUNNING);
    /* Never twice: a second start is refused and the first process is the one that runs. */
    const char *argv[] = {script, NULL};
    WorkloadSpec s = {.id = "45", .kind = "endpoint", .command = argv};
    cr_assert_eq(d->ops->start(d, &s, &err), -EEXIST);
    cr_assert_eq(pid_of("45"), pid);
    cr_assert_eq(d->ops->stop(d, "45", 5, &err), 0, "%s", error_message(&err));
    driver_free(d);
}

/* R17: a wrapper killed from outside leaves its server running in its process group (it
 * would hold the port the next endpoint is given, serving the old model): the stop that frees
 * the allocation ends the group too. */
Test(process_driver, r17_a_server_orphaned_by_its_wrappers_death_is_stopped_with_it) {
    _cleanup_(driver_freep) Driver *d = new_driver();
    start(d, "47", "serve", NULL);
    wait_for(d, "47", WORKLOAD_RUNNING);
    pid_t pid = pid_of("47");
    cr_assert_eq(kill(pid, SIGKILL), 0);
    WorkloadState st = wait_for(d, "47", WORKLOAD_FAILED);
    cr_assert(strstr(st.message, "gone without an exit code"), "%s", st.message);
    cr_assert(group_runs(pid), "the server outlived its wrapper");
    Error err = {0};
    cr_assert_eq(d->ops->stop(d, "47", 1, &err), 0, "%s", error_message(&err));
    for (int i = 0; i < 200 && group_runs(pid); i++)
        usleep(50000);
    cr_assert(!group_runs(pid), "the orphaned server still runs");
}

Test(process_driver, r17_a_reused_pid_is_not_ours) {
    _cleanup_(driver_freep) Driver *d = new_driver();
    /* A pid file naming a live process (this test) with another start time: not running. */
    cr_assert_eq(mkdir(dir, 0700) < 0 ? errno : 0, EEXIST);
    _cleanup_free_ char *path = strprintf("%s/46.pid", dir),
                        *line = strprintf("%d 1 0\n", (int)getpid());
    cr_assert_eq(write_string_file_atomic(path, line), 0);
    WorkloadState st = status_of(d, "46");
    cr_assert_eq(st.status, WORKLOAD_FAILED);
    cr_assert(strstr(st.message, "gone without an exit code"), "%s", st.message);
    Error err = {0};
    cr_assert_eq(d->ops->stop(d, "46", 1, &err), 0, "%s", error_message(&err));
    cr_assert_eq(status_of(d, "46").status, WORKLOAD_ABSENT,
                 "its files are gone; this process was not signalled");
}

Test(process_driver, r14_missing_binary_fails_with_a_sentence_and_leaves_nothing) {
    _cleanup_(driver_freep) Driver *d = new_driver();
    const char *argv[] = {"/nonexistent/llama-server", "--port", "8080", NULL};
    WorkloadSpec s = {.id = "47", .kind = "endpoint", .command = argv};
    Error err = {0};
    cr_assert_eq(d->ops->start(d, &s, &err), -ENOENT);
    cr_assert(strstr(error_message(&err),
                     "'/nonexistent/llama-server' is not there or not executable"),
              "%s", error_message(&err));
    char **ids = NULL;
    size_t n = 0;
    cr_assert_eq(d->ops->list(d, &ids, &n, &err), 0);
    cr_assert_eq(n, 0);
    driver_ids_free(ids, n);
    cr_assert_eq(status_of(d, "47").status, WORKLOAD_ABSENT);
    /* No command at all, or a bad id: refused too. */
    s.command = NULL;
    cr_assert_eq(d->ops->start(d, &s, &err), -EINVAL);
    s = (WorkloadSpec){.id = "../x", .command = argv};
    cr_assert_eq(d->ops->start(d, &s, &err), -EINVAL);
}

/* R17 "never starts a workload twice": the server starts only once its pid file is written,
 * the agent's record of it; an agent killed before that left a server its next life did not
 * know of, and started the request again. Here the record cannot be written (its temporary
 * file's name is taken by a folder): the start fails saying nothing was started, and the
 * server never ran - its marker is not there once a later start of it has run. */
Test(process_driver, r17_a_server_starts_only_once_its_pid_file_is_written) {
    _cleanup_(driver_freep) Driver *d = new_driver();
    _cleanup_free_ char *blocker = strprintf("%s/77.pid.tmp", dir),
                        *mark = strprintf("%s/first", tmp), *ready = strprintf("%s.ready", mark),
                        *mark2 = strprintf("%s/second", tmp),
                        *ready2 = strprintf("%s.ready", mark2);
    cr_assert_eq(mkdir(blocker, 0700), 0);
    _cleanup_free_ char *m = strprintf("MARK=%s", mark);
    const char *argv[] = {script, "--port", "18081", NULL};
    const char *env[] = {"MODE=stubborn", m, NULL};
    WorkloadSpec s = {.id = "77", .kind = "endpoint", .command = argv, .env = env};
    Error err = {0};
    cr_assert_lt(d->ops->start(d, &s, &err), 0);
    cr_expect(strstr(error_message(&err), "nothing was started"), "%s", error_message(&err));
    cr_assert_eq(rmdir(blocker), 0);
    start(d, "77", "stubborn", mark2);
    for (int i = 0; i < 600 && access(ready2, F_OK) != 0; i++)
        usleep(50000);
    cr_assert_eq(access(ready2, F_OK), 0, "the second start never ran");
    cr_expect_neq(access(ready, F_OK), 0, "the first server ran without its pid file");
    cr_assert_eq(d->ops->stop(d, "77", 1, &err), 0, "%s", error_message(&err));
}
