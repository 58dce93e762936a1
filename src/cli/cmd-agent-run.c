/* cmd-agent-run.c: `einsora agent run`: the node agent joined to a control plane. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent-run.h"
#include "agent/bind.h"
#include "output.h"
#include "remote.h"
#include "server/spec.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "verbs.h"

static void run_usage(FILE *f) {
    fputs("usage: einsora agent run --server URL --token T [OPTIONS]\n\n"
          "Join this machine to a control plane: register the node, push its inventory (again\n"
          "when it changes), heartbeat, rebind GPUs and run reset-cycle checks when asked, and\n"
          "start/stop the workloads placed here (recorded only until runtime drivers exist).\n\n"
          "  --server URL        control plane (default $EINSORA_SERVER); repeat it, or separate\n"
          "                      URLs with commas, for the replicas of one control plane\n"
          "  --token T           this node's agent token (default $EINSORA_TOKEN)\n"
          "  --name N            node name (default: the host name)\n"
          "  --site S            site name (default home)\n"
          "  --site-kind K       solo | lab | datacenter (default lab)\n"
          "  --owner U           the machine's owner (default $USER)\n"
          "  --mode M            datacenter: container | vm-passthrough (default: from bindings)\n"
          "  --capabilities C    comma-separated, e.g. kata,mig_in_kata\n"
          "  --heartbeat S       seconds between heartbeats (default 5)\n"
          "  --state-dir DIR     records, journal (default " AGENT_STATE_DIR_DEFAULT ")\n"
          "  --sysfs-root DIR  --proc-root DIR  --dev-root DIR   (default /sys, /proc, /dev)\n"
          "  --nvml-lib PATH | --no-nvml\n"
          "  --apple-fixture F   describe a Mac from F (tests, demo)\n"
          "  --catalog FILE      catalog of GPU classes (default: the shipped one)\n"
          "  --simulate          record rebinds and reset checks in the state folder instead of\n"
          "                      writing to the kernel (fixture machines, demos)\n"
          "  -q, --quiet         no log lines\n",
          f);
}

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig) {
    (void)sig;
    stop_flag = 1;
}

int agent_run_verb(int argc, char **argv) {
    enum { O_SERVER = 0x200, O_TOKEN, O_NAME, O_SITE, O_KIND, O_OWNER, O_MODE, O_CAPS, O_HB, O_STATE,
           O_SYS, O_PROC, O_DEV, O_NVML, O_NO_NVML, O_APPLE, O_CATALOG, O_SIM };
    static const struct option options[] = {
            {"server", required_argument, NULL, O_SERVER},   {"token", required_argument, NULL, O_TOKEN},
            {"name", required_argument, NULL, O_NAME},       {"site", required_argument, NULL, O_SITE},
            {"site-kind", required_argument, NULL, O_KIND},  {"owner", required_argument, NULL, O_OWNER},
            {"mode", required_argument, NULL, O_MODE},       {"capabilities", required_argument, NULL, O_CAPS},
            {"heartbeat", required_argument, NULL, O_HB},    {"state-dir", required_argument, NULL, O_STATE},
            {"sysfs-root", required_argument, NULL, O_SYS},  {"proc-root", required_argument, NULL, O_PROC},
            {"dev-root", required_argument, NULL, O_DEV},    {"nvml-lib", required_argument, NULL, O_NVML},
            {"no-nvml", no_argument, NULL, O_NO_NVML},       {"apple-fixture", required_argument, NULL, O_APPLE},
            {"catalog", required_argument, NULL, O_CATALOG}, {"simulate", no_argument, NULL, O_SIM},
            {"quiet", no_argument, NULL, 'q'},               {"help", no_argument, NULL, 'h'},
            {},
    };
    AgentConfig cfg = {.server = getenv("EINSORA_SERVER"), .token = getenv("EINSORA_TOKEN"),
                       .id = {.owner = getenv("USER")}, .log = stderr, .stop = &stop_flag};
    char host[65] = "";
    bool server_given = false;
    uint64_t hb;
    int c;
    while ((c = getopt_long(argc, argv, "qh", options, NULL)) >= 0) {
        switch (c) {
        case O_SERVER:
            /* Repeated: the replicas (not added to $EINSORA_SERVER, replacing it). */
            cfg.server = remote_add_server(server_given ? cfg.server : NULL, optarg);
            server_given = true;
            break;
        case O_TOKEN: cfg.token = optarg; break;
        case O_NAME: cfg.id.name = optarg; break;
        case O_SITE: cfg.id.site = optarg; break;
        case O_KIND: cfg.id.site_kind = optarg; break;
        case O_OWNER: cfg.id.owner = optarg; break;
        case O_MODE: cfg.id.mode = optarg; break;
        case O_CAPS: cfg.id.capabilities = optarg; break;
        case O_STATE: cfg.state_dir = optarg; break;
        case O_SYS: cfg.discover.sysfs_root = optarg; break;
        case O_PROC: cfg.discover.proc_root = optarg; break;
        case O_DEV: cfg.dev_root = cfg.discover.dev_root = optarg; break;
        case O_NVML: cfg.discover.nvml_lib = optarg; break;
        case O_NO_NVML: cfg.discover.no_nvml = true; break;
        case O_APPLE: cfg.discover.apple_fixture = optarg; break;
        case O_CATALOG: cfg.catalog_path = optarg; break;
        case O_SIM: cfg.simulate = true; break;
        case 'q': cfg.log = NULL; break;
        case O_HB:
            if (parse_uint64(optarg, 3600, &hb) < 0 || hb == 0)
                return fail(EXIT_USAGE, "agent run: --heartbeat takes seconds from 1 to 3600");
            cfg.heartbeat_s = (unsigned)hb;
            break;
        case 'h':
            run_usage(stdout);
            return EXIT_OK;
        default:
            run_usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind < argc)
        return fail(EXIT_USAGE, "agent run: unexpected argument '%s'", argv[optind]);
    if (!cfg.server || !cfg.token)
        return fail(EXIT_USAGE, "agent run: --server and --token are required (or $EINSORA_SERVER, $EINSORA_TOKEN)");
    if (!cfg.id.name) {
        if (gethostname(host, sizeof(host) - 1) < 0 || !host[0])
            return fail(EXIT_USAGE, "agent run: cannot read the host name; give --name");
        for (char *p = host; *p; p++)
            *p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p == '.' ? '-' : *p);
        cfg.id.name = host;
    }
    if (!spec_name_is_valid(cfg.id.name))
        return fail(EXIT_USAGE, "agent run: '%s' is not a valid node name (a-z, 0-9, . _ -)", cfg.id.name);
    if (!cfg.id.owner || !spec_name_is_valid(cfg.id.owner))
        return fail(EXIT_USAGE, "agent run: give the machine's owner with --owner (a valid user name)");
    if (cfg.id.site_kind && STRNEQ(cfg.id.site_kind, "solo") && STRNEQ(cfg.id.site_kind, "lab") &&
        STRNEQ(cfg.id.site_kind, "datacenter"))
        return fail(EXIT_USAGE, "agent run: --site-kind is solo, lab or datacenter");
    if (cfg.id.mode && STRNEQ(cfg.id.mode, "container") && STRNEQ(cfg.id.mode, "vm-passthrough"))
        return fail(EXIT_USAGE, "agent run: --mode is container or vm-passthrough (vGPU is not offered, R2d)");

    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    Error err = {0};
    if (agent_run(&cfg, &err) < 0)
        return fail_error(EXIT_FAIL, &err);
    return EXIT_OK;
}
