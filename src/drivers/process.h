/* process.h: the native-process driver (driver.h): a workload that runs as a process on the
 * node rather than in a container - a Mac's MLX or llama.cpp server (R10, R14; the agent builds
 * its argv with mac-plan.h), or a CPU llama.cpp endpoint where the site configures it.
 *
 * Design (the simplest one that survives an agent restart and knows every exit code):
 *   agent --fork--> intermediate --fork--> wrapper (setsid: leads its own session and process
 *   group; ignores SIGTERM) --fork+exec--> server.
 * The intermediate exits at once, so the wrapper is never the agent's child (no zombie, no
 * SIGCHLD handling in the agent) and lives on when the agent restarts. The wrapper only waits
 * for the server and writes its exit code (128+signal when killed) to <id>.exit; it uses only
 * async-signal-safe calls, everything being prepared before the first fork. In <dir>:
 *   <id>.pid   "WRAPPER_PID START_TICKS PORT": the wrapper's pid is the process group; its start
 *              time (field 22 of /proc/PID/stat on Linux; 0 elsewhere, where kill(pid, 0) is
 *              taken as enough) tells a reused pid from ours;
 *   <id>.exit  the exit code, once the server ended;
 *   <id>.log   the server's stdout and stderr.
 * The pid file exists from start to stop: a second start of the same id is -EEXIST (never two),
 * and list() is the set of pid files (an agent restarted adopts them). Status: exit file ->
 * exited; wrapper alive -> running; otherwise failed (killed from outside before it could say).
 * Stop: SIGTERM to the process group, SIGKILL to it after the grace period, then the files go. */
#pragma once

#include "drivers/driver.h"
#include "util/error.h"

typedef struct ProcessConfig {
    const char *dir; /* where pid, exit and log files live (created 0700 when missing) */
} ProcessConfig;

/* spec->command[0] is the server binary (a path, or a name looked up in $PATH); spec->env is
 * added to the agent's environment; spec->ports[0], when given, is reported as host_port. */
int process_driver_new(const ProcessConfig *cfg, Driver **ret, Error *err);
