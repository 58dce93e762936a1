/* cmd-up.c: `einsora up [--listen ADDR] [--state FILE] [--demo]`: the README's main job. One
 * command starts the control plane (embedded SQLite) and an agent on this machine, makes an
 * admin token for the local user, prints where everything is and the capacity found, and runs
 * until interrupted. --demo adds agents on the repository's fixture machines (HGX H100, H200
 * with MIG, RTX 4090, MI300X, a CPU-only box, a Mac) so that a newcomer without GPUs can place
 * work and watch fallback and mode switches happen.
 *
 * Each part is its own process (`einsora serve`, `einsora agent run`), exactly as in a real
 * deployment; this verb only starts them, hands out tokens and stops them cleanly. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"
#include "config.h"
#include "engine-local.h"
#include "output.h"
#include "remote.h"
#include "server/server.h"
#include "wire/api-address.h"
#include "wire/decode.h"
#include "store/token-admin.h"
#include "token-secret.h"
#include "util/datadir.h"
#include "util/fileio.h"
#include "util/macro.h"
#include "util/sha256.h"
#include "util/strutil.h"
#include "suggest.h"
#include "verbs.h"

#define UP_MAX_AGENTS 8

typedef struct DemoMachine {
    const char *name, *fixture, *site, *site_kind, *mode, *caps, *apple;
} DemoMachine;

/* The demo fleet: one machine per kind the SPEC covers (R1, R3, R9, R10, R11, R12). */
static const DemoMachine demo_machines[] = {
        {"dc1-h100", "hgx-h100-8gpu", "dc1", "datacenter", "container", "kata", NULL},
        {"dc1-h200", "h200-mig", "dc1", "datacenter", "container", "kata,mig_in_kata", NULL},
        {"lab-4090", "rtx4090-clean-group", "lab", "lab", NULL, NULL, NULL},
        {"lab-mi300x", "amd-mi300x", "lab", "lab", NULL, NULL, NULL},
        {"lab-cpu", "no-accelerator", "lab", "lab", NULL, NULL, NULL},
        {"mac-m2", "no-accelerator", "home", "solo", NULL, NULL, "mac-m2-max-64gb.txt"},
};

typedef struct Child {
    char name[64];
    pid_t pid;
} Child;

static void up_usage(FILE *f) {
    fputs("usage: einsora up [--listen ADDR:PORT] [--state FILE] [--demo] [--heartbeat S]\n"
          "                  [--no-local] [--fixtures DIR] [--nvml-lib PATH]\n\n"
          "Start the control plane and an agent on this machine, make an admin token for you,\n"
          "print the URL, the token's file and the capacity found, and run until Ctrl-C.\n\n"
          "  --listen ADDR:PORT  where the API listens (default " SERVER_DEFAULT_LISTEN ")\n"
          "  --state FILE        state file (default ~/.local/state/einsora/state.db); its\n"
          "                      folder holds the token, port and agents' files: one up each\n"
          "  --demo              also start agents on the source tree's fixture machines\n"
          "  --heartbeat S       agents' heartbeat in seconds (default 2)\n"
          "  --no-local          no agent for this machine (demo fleet only)\n"
          "  --fixtures DIR      fixture machines (default: the installed demo machines, or\n"
          "                      the source tree's tests/fixtures/machines)\n"
          "  --nvml-lib PATH     the fake NVML for fixtures (default: the one built next to "
          "einsora)\n"
          "  -h, --help          show this help\n",
          f);
}

static int mkdir_p(const char *path, mode_t mode) {
    char buf[PATH_MAX];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, mode) < 0 && errno != EEXIST)
                return -errno;
            *p = '/';
        }
    return mkdir(buf, mode) < 0 && errno != EEXIST ? -errno : 0;
}

/* A token in a 0600 file: reused when the file holds one the state knows, else made anew. */
static int ensure_token(const char *state, const char *file, const char *user, const char *role,
                        const char *nodes, char secret[TOKEN_SECRET_SIZE], Error *err) {
    char hash[SHA256_DIGEST_SIZE * 2 + 1];
    _cleanup_free_ char *old = NULL;
    int r;
    if (read_one_line(file, &old) >= 0 && strlen(old) < 80) {
        sha256_hex(old, strlen(old), hash);
        if ((r = token_admin_knows(state, hash, user, role, err)) < 0)
            return r;
        if (r > 0) {
            strcpy(secret, old);
            return 0;
        }
    }
    if (token_secret_new(secret, hash) < 0)
        return error_set(err, -EIO, "cannot get random bytes for a token");
    if ((r = token_admin_create(state, hash, user, role, nodes, 0, err)) < 0)
        return r;
    FILE *f = NULL;
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || fchmod(fd, 0600) < 0 || !(f = fdopen(fd, "w")) ||
        fprintf(f, "%s\n", secret) < 0 || fclose(f) != 0) {
        if (fd >= 0 && !f)
            close(fd);
        return error_set(err, -EIO, "cannot write the token file %s", file);
    }
    return 0;
}

/* Run `einsora ARGS` as a child; env: "KEY", "VALUE" pairs to set (NULL-terminated), so that
 * secrets such as tokens never show on a command line (ps). */
static pid_t spawn(char *const argv[], const char *const *env, bool quiet_stdout) {
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    if (quiet_stdout) { /* the server's "listening on" line: up prints its own summary */
        int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (fd >= 0)
            dup2(fd, STDOUT_FILENO);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (size_t i = 0; env && env[i] && env[i + 1]; i += 2)
        setenv(env[i], env[i + 1], 1);
    execv("/proc/self/exe", argv);
    _exit(127);
}

static void stop_children(Child *c, size_t n) {
    /* Agents first (they report to the server), then the server; each stops cleanly. */
    for (size_t i = n; i-- > 0;)
        if (c[i].pid > 0)
            kill(c[i].pid, SIGTERM);
    for (size_t i = n; i-- > 0;)
        if (c[i].pid > 0) {
            (void)waitpid(c[i].pid, NULL, 0);
            c[i].pid = 0;
        }
}

static void print_capacity(Client *cl) {
    long status = 0;
    json_t *j = NULL;
    if (client_call(cl, "GET", "/v1/capacity", NULL, NULL, &status, &j, NULL) < 0 ||
        status != 200) {
        json_decref(j);
        return;
    }
    printf("capacity found:\n");
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(j, "classes"), i, row) {
        if (!json_is_null(json_object_get(row, "site")) ||
            !json_integer_value(json_object_get(row, "total")))
            continue;
        printf("  %-34s %-9s total %3lld  free %3lld\n",
               json_string_value(json_object_get(row, "class")),
               json_string_value(json_object_get(row, "mode")),
               (long long)json_integer_value(json_object_get(row, "total")),
               (long long)json_integer_value(json_object_get(row, "free")));
    }
    if (json_integer_value(json_object_get(j, "unclassified")))
        printf("  (%lld unclassified %s, shown in `einsora node show NODE`)\n",
               (long long)json_integer_value(json_object_get(j, "unclassified")),
               plural(json_integer_value(json_object_get(j, "unclassified")), "device", "devices"));
    json_decref(j);
}

/* Wait until n agents report (a node counts once its agent has sent a heartbeat, not when
 * its first push registered it) and their first work is done (reset checks of consumer
 * cards, R9), at most ~20 s, so the capacity shown is settled. */
static size_t wait_nodes(Client *cl, size_t n) {
    size_t have = 0;
    for (int i = 0; i < 200; i++) {
        long status = 0;
        json_t *j = NULL, *node;
        size_t k, busy = 0;
        if (client_call(cl, "GET", "/v1/nodes", NULL, NULL, &status, &j, NULL) < 0 ||
            status != 200) {
            json_decref(j);
            j = NULL;
        }
        have = 0;
        json_array_foreach(json_object_get(j, "nodes"), k, node) {
            busy += json_array_size(json_object_get(node, "tasks"));
            have += json_object_get(node, "agent") &&
                    !json_is_true(json_object_get(node, "unreachable"));
        }
        json_decref(j);
        if (have >= n && !busy)
            break;
        nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
    }
    return have;
}

static const char *local_user(void) {
    const char *u = getenv("USER");
    if (!u || !wire_name_is_valid(u)) {
        struct passwd *pw = getpwuid(getuid());
        u = pw ? pw->pw_name : NULL;
    }
    return u && wire_name_is_valid(u) ? u : "owner";
}

typedef struct UpOpts {
    const char *listen, *state, *fixtures, *nvml_lib;
    bool demo, no_local;
    unsigned heartbeat_s;
} UpOpts;

static int parse(int argc, char **argv, UpOpts *o) {
    static const struct option options[] = {
            {"listen", required_argument, NULL, 'l'},
            {"state", required_argument, NULL, 's'},
            {"demo", no_argument, NULL, 'd'},
            {"heartbeat", required_argument, NULL, 'b'},
            {"fixtures", required_argument, NULL, 'f'},
            {"nvml-lib", required_argument, NULL, 'n'},
            {"no-local", no_argument, NULL, 'L'},
            {"help", no_argument, NULL, 'h'},
            {},
    };
    int c;
    uint64_t v;
    while ((c = cli_getopt(argc, argv, "h", options)) >= 0) {
        switch (c) {
        case 'l':
            o->listen = optarg;
            break;
        case 's':
            o->state = optarg;
            break;
        case 'd':
            o->demo = true;
            break;
        case 'f':
            o->fixtures = optarg;
            break;
        case 'n':
            o->nvml_lib = optarg;
            break;
        case 'L':
            o->no_local = true;
            break;
        case 'b':
            if (parse_uint64(optarg, 3600, &v) < 0 || v == 0)
                return fail(EXIT_USAGE,
                            "up: --heartbeat takes whole seconds from 1 to 3600, not '%s'", optarg);
            o->heartbeat_s = (unsigned)v;
            break;
        case 'h':
            up_usage(stdout);
            return EXIT_OK;
        default:
            up_usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind < argc)
        return fail(EXIT_USAGE, "up: unexpected argument '%s'", argv[optind]);
    /* Checked before anything is created: a state file and a token for an address nobody
     * can listen on would be left behind. */
    struct sockaddr_storage sa;
    socklen_t sa_len;
    Error err = {0};
    if (server_listen_address(o->listen, &sa, &sa_len, &err) < 0)
        return fail(EXIT_USAGE, "up: --listen: %s", error_message(&err));
    return -1;
}

/* One `einsora up` per folder: its token file, port file and agents' state folders are the
 * folder's, not the state file's, and a second one (another state file there, or a start that
 * fails) would replace the first one's token, whose secret is stored nowhere else. The lock
 * is held until this process ends (closed on exec: the children do not hold it). */
static int lock_folder(const char *dir) {
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof(path), "%s/up.lock", dir) >= sizeof(path))
        return fail(EXIT_FAIL, "up: the state folder's path is too long");
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return fail(EXIT_FAIL, "up: cannot open %s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        close(fd);
        if (e == EWOULDBLOCK)
            return fail(EXIT_FAIL,
                        "up: another `einsora up` keeps its token, port and agents in %s; stop "
                        "it first, or give --state a file in another folder",
                        dir);
        return fail(EXIT_FAIL, "up: cannot lock %s: %s", path, strerror(e));
    }
    return -1; /* held: the descriptor stays open for the life of this process */
}

int verb_up(int argc, char **argv) {
    UpOpts o = {.listen = SERVER_DEFAULT_LISTEN, .heartbeat_s = 2, .fixtures = demo_fixtures_dir()};
    int r = parse(argc, argv, &o);
    if (r >= 0)
        return r;
    char state_buf[PATH_MAX], dir[2048], path[PATH_MAX];
    if (!o.state) {
        const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
        if (xdg && xdg[0])
            snprintf(state_buf, sizeof(state_buf), "%s/einsora/state.db", xdg);
        else
            snprintf(state_buf, sizeof(state_buf), "%s/.local/state/einsora/state.db",
                     home ? home : ".");
        o.state = state_buf;
    }
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s", o.state);
    snprintf(dir, sizeof(dir), "%s", dirname(tmp));
    if ((r = mkdir_p(dir, 0700)) < 0)
        return fail(EXIT_FAIL, "up: cannot create %s: %s", dir, strerror(-r));
    if ((r = lock_folder(dir)) >= 0)
        return r;
    if (o.demo && (!o.fixtures || access(o.fixtures, R_OK) < 0))
        return fail(EXIT_FAIL,
                    "up: --demo needs the fixture machines (installed under "
                    "<datadir>/einsora/demo/machines, or a source tree's "
                    "tests/fixtures/machines; %s%s; give --fixtures DIR)",
                    o.fixtures ? "there is no " : "neither was found", strempty(o.fixtures));
    if (!o.nvml_lib) {
        /* The fake NVML built next to this einsora (tests/agent in the build tree). */
        static char lib[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", lib, sizeof(lib) - 64);
        if (n > 0) {
            lib[n] = 0;
            size_t len = strlen(dirname(lib));
            snprintf(lib + len, 64, "/../../tests/agent/libnvidia-ml.so.1");
            if (access(lib, R_OK) < 0)
                snprintf(lib + len, 64, "/../../tests/agent/libnvidia-ml.so");
            if (access(lib, R_OK) == 0)
                o.nvml_lib = lib;
        }
        /* Said, not silently left out: docs/fleet.md's demo has MIG slices (R2c), which only
         * the fake NVML's answers give the H200 fixture. */
        if (!o.nvml_lib && o.demo)
            fprintf(stderr,
                    "einsora: up --demo: no fake NVML next to this einsora (a build tree's "
                    "tests/agent/libnvidia-ml.so): the demo's GPUs are read without NVML, so "
                    "the H200 shows no MIG slices; give --nvml-lib PATH for them\n");
    }

    const char *user = local_user();
    char token[TOKEN_SECRET_SIZE], tokfile[PATH_MAX + 16];
    Error err = {0};
    snprintf(tokfile, sizeof(tokfile), "%s/token", dir);
    /* The local user owns this control plane and every machine it starts: admin role. */
    if ((r = ensure_token(o.state, tokfile, user, "admin", NULL, token, &err)) < 0)
        return fail_error(EXIT_FAIL, &err);

    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, NULL);

    Child kids[UP_MAX_AGENTS + 2] = {0};
    size_t n_kids = 0;
    char portfile[PATH_MAX + 16];
    snprintf(portfile, sizeof(portfile), "%s/port", dir);
    unlink(portfile);
    {
        char *args[] = {"einsora",        "serve",   "--listen",
                        (char *)o.listen, "--state", (char *)o.state,
                        "--port-file",    portfile,  NULL};
        snprintf(kids[0].name, sizeof(kids[0].name), "control plane");
        kids[n_kids++].pid = spawn(args, NULL, true);
    }
    _cleanup_free_ char *port = NULL;
    for (int i = 0; i < 300 && !port; i++) {
        if (read_one_line(portfile, &port) >= 0)
            break;
        if (waitpid(kids[0].pid, NULL, WNOHANG) == kids[0].pid) {
            kids[0].pid = 0;
            return fail(EXIT_FAIL, "up: the control plane did not start (see above)");
        }
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    if (!port) {
        stop_children(kids, n_kids);
        return fail(EXIT_FAIL, "up: the control plane did not start listening");
    }
    char host[64] = "127.0.0.1", url[128];
    const char *colon = strrchr(o.listen, ':');
    if (colon && colon > o.listen && (size_t)(colon - o.listen) < sizeof(host) &&
        strncmp(o.listen, "0.0.0.0", 7) != 0)
        snprintf(host, sizeof(host), "%.*s", (int)(colon - o.listen), o.listen);
    snprintf(url, sizeof(url), "http://%s:%s", host, port);

    /* The agents: this machine, then the demo fleet. */
    DemoMachine local = {"local", NULL, "home", "solo", NULL, NULL, NULL};
    const DemoMachine *list[UP_MAX_AGENTS];
    size_t n_list = 0;
    if (!o.no_local)
        list[n_list++] = &local;
    for (size_t i = 0; o.demo && i < ARRAY_SIZE(demo_machines); i++)
        list[n_list++] = &demo_machines[i];
    char hb[16];
    snprintf(hb, sizeof(hb), "%u", o.heartbeat_s);
    for (size_t i = 0; i < n_list; i++) {
        const DemoMachine *m = list[i];
        char adir[PATH_MAX], afile[PATH_MAX + 8], atok[TOKEN_SECRET_SIZE], sys[PATH_MAX],
                proc[PATH_MAX], nvml[PATH_MAX], apple[PATH_MAX];
        snprintf(adir, sizeof(adir), "%s/agents/%s", dir, m->name);
        snprintf(afile, sizeof(afile), "%s/token", adir);
        if (mkdir_p(adir, 0700) < 0 ||
            ensure_token(o.state, afile, m->name, "node", m->name, atok, &err) < 0) {
            fprintf(stderr, "einsora: up: agent %s not started: %s\n", m->name,
                    error_message(&err));
            continue;
        }
        char *args[40] = {"einsora",
                          "agent",
                          "run",
                          "--server",
                          url,
                          "--name",
                          (char *)m->name,
                          "--site",
                          (char *)m->site,
                          "--site-kind",
                          (char *)m->site_kind,
                          "--owner",
                          (char *)user,
                          "--heartbeat",
                          hb,
                          "--state-dir",
                          adir};
        size_t k = 17;
        const char *env[] = {"EINSORA_TOKEN", atok, NULL, NULL, NULL};
        if (m->fixture) {
            snprintf(sys, sizeof(sys), "%s/%s/sys", o.fixtures, m->fixture);
            snprintf(proc, sizeof(proc), "%s/%s/proc", o.fixtures, m->fixture);
            snprintf(nvml, sizeof(nvml), "%s/%s/nvml.txt", o.fixtures, m->fixture);
            args[k++] = "--sysfs-root", args[k++] = sys, args[k++] = "--proc-root",
            args[k++] = proc;
            args[k++] = "--simulate"; /* fixture trees are read-only */
            if (o.nvml_lib && access(nvml, R_OK) == 0) {
                args[k++] = "--nvml-lib", args[k++] = (char *)o.nvml_lib;
                env[2] = "EINSORA_FAKE_NVML", env[3] = nvml;
            } else
                args[k++] = "--no-nvml";
        }
        /* This machine's agent gets a real container driver when an engine socket is here. */
        const char *engine = m->fixture ? NULL : cli_local_engine_socket();
        if (engine)
            args[k++] = "--engine-socket", args[k++] = (char *)engine;
        if (m->mode)
            args[k++] = "--mode", args[k++] = (char *)m->mode;
        if (m->caps)
            args[k++] = "--capabilities", args[k++] = (char *)m->caps;
        if (m->apple) {
            snprintf(apple, sizeof(apple), "%s/%s", o.fixtures, m->apple);
            args[k++] = "--apple-fixture", args[k++] = apple;
        }
        args[k] = NULL;
        snprintf(kids[n_kids].name, sizeof(kids[n_kids].name), "agent %s", m->name);
        kids[n_kids++].pid = spawn(args, env, false);
    }

    Client *cl = NULL;
    if (client_new(url, token, &cl, &err) < 0) {
        stop_children(kids, n_kids);
        return fail_error(EXIT_FAIL, &err);
    }
    size_t have = wait_nodes(cl, n_kids - 1);
    printf("einsora is up\n");
    printf("  control plane  %s   (state %s)\n", url, o.state);
    printf("  your token     %s   (user %s, mode 0600)\n", tokfile, user);
    printf("  agents         %zu of %zu %s reporting\n", have, n_kids - 1,
           plural((long long)(n_kids - 1), "node", "nodes"));
    if (!o.no_local) {
        const char *engine = cli_local_engine_socket();
        if (engine)
            printf("  containers     the local agent starts them through the engine at %s\n",
                   engine);
        else
            printf("  containers     recorded only: no Docker or Podman socket (looked at %s)\n",
                   CLI_ENGINE_SOCKETS_LOOKED_AT);
    }
    print_capacity(cl);
    /* The CLI finds this fleet without exports: a context named "local", made current. */
    bool saved = remote_save_context("local", url, tokfile) == EXIT_OK;
    if (saved)
        printf("\nIn another terminal (context \"local\" is current):\n");
    else
        printf("\nIn another terminal:\n"
               "  export EINSORA_SERVER=%s EINSORA_TOKEN=$(cat %s)\n",
               url, tokfile);
    printf("  einsora nodes; einsora capacity   (docs/fleet.md shows what to try next)\n"
           "Press Ctrl-C to stop.\n");
    fflush(stdout);
    client_free(cl);
    snprintf(path, sizeof(path), "%s", url);

    int rc = EXIT_OK;
    for (;;) {
        int sig = sigwaitinfo(&mask, NULL);
        if (sig == SIGINT || sig == SIGTERM)
            break;
        if (sig != SIGCHLD)
            continue;
        pid_t pid;
        int status;
        bool server_gone = false;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
            for (size_t i = 0; i < n_kids; i++)
                if (kids[i].pid == pid) {
                    kids[i].pid = 0;
                    fprintf(stderr, "einsora: up: %s exited (%s %d)\n", kids[i].name,
                            WIFEXITED(status) ? "status" : "signal",
                            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
                    server_gone = server_gone || i == 0;
                }
        if (server_gone) {
            rc = EXIT_FAIL;
            break;
        }
    }
    printf("stopping...\n");
    fflush(stdout);
    stop_children(kids, n_kids);
    printf("stopped\n");
    return rc;
}
