/* cmd-agent-run.c: `einsora agent run`: the node agent joined to a control plane. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent-run.h"
#include "agent/bind.h"
#include "agent/workloads.h"
#include "output.h"
#include "remote.h"
#include "wire/node.h"
#include "util/macro.h"
#include "util/fileio.h"
#include "util/strutil.h"
#include "suggest.h"
#include "verbs.h"

static void run_usage(FILE *f) {
    fputs("usage: einsora agent run --server URL [--token-file F] [OPTIONS]\n\n"
          "Join this machine to a control plane: register the node, push its inventory (again\n"
          "when it changes), heartbeat, rebind GPUs and run reset-cycle checks when asked, and\n"
          "start/stop the workloads placed here (containers through the engine's socket, VMs\n"
          "through libvirt, Mac and cpu endpoints as processes; a placement whose driver is not\n"
          "configured is recorded only).\n\n"
          "  --server URL        control plane (default $EINSORA_SERVER); repeat it, or separate\n"
          "                      URLs with commas, for the replicas of one control plane; an\n"
          "                      https one signed by a private CA: $EINSORA_CACERT=CA.pem\n"
          "  --token-file F      file holding this node's agent token (default: the token in\n"
          "                      $EINSORA_TOKEN); never on the command line, where ps shows it\n"
          "  --name N            node name (default: the host name)\n"
          "  --site S            site name (default home)\n"
          "  --site-kind K       solo | lab | datacenter (default lab)\n"
          "  --owner U           the machine's owner (default $USER)\n"
          "  --mode M            datacenter: container | vm-passthrough (default: from bindings)\n"
          "  --capabilities C    comma-separated, e.g. kata,mig_in_kata\n"
          "  --heartbeat S       seconds between heartbeats (default 5)\n"
          "  --state-dir DIR     records, journal (default " AGENT_STATE_DIR_DEFAULT "); held\n"
          "                      while the agent runs: other agent commands on it are refused\n"
          "  --sysfs-root DIR  --proc-root DIR  --dev-root DIR   (default /sys, /proc, /dev)\n"
          "  --nvml-lib PATH     the NVML library to load (default: the system's)\n"
          "  --no-nvml           do not use NVML (sysfs only)\n"
          "  --apple-fixture F   describe a Mac from F (tests, demo)\n"
          "  --apple-headroom-gb N  a Mac's GPU memory kept for its owner, 0 or more (default\n"
          "                      min(8, RAM/4)); the rest is offered (R10)\n"
          "  --catalog FILE      catalog of GPU classes (default: the shipped one)\n"
          "  --simulate          record rebinds and reset checks in the state folder instead of\n"
          "                      writing to the kernel (fixture machines, demos)\n"
          "  --engine-socket P   Docker or Podman socket for container workloads (none: recorded "
          "only)\n"
          "  --engine-api A      auto | docker | libpod (default auto: from GET /version)\n"
          "  --cdi-dirs D        where CDI specs are read (default /etc/cdi:/var/run/cdi)\n"
          "  --vm-uri URI        libvirt connection for passthrough VMs, e.g. qemu:///system "
          "(none: recorded only)\n"
          "  --vm-domain-type T  libvirt domain type (default kvm; test for libvirt's test "
          "driver)\n"
          "  --vm-image-dir DIR  the disk images a VM request may name by file name (default: "
          "the folder\n"
          "                      of --images vm=/DISK); a request never gives a path\n"
          "  --images MAP        the site's default images: "
          "notebook=IMG,endpoint=IMG,container=IMG,vm=/DISK\n"
          "                      (endpoint-llama.cpp=IMG, endpoint-vllm=IMG: an endpoint's by "
          "runtime, R14)\n"
          "  --runtimes MAP      engine runtime names: kata=kata-runtime[,runc=runc]\n"
          "  --stop-grace S      seconds a workload has to stop before it is killed (default 10)\n"
          "  --mlx-server PATH   the MLX server binary (mlx_lm.server): Mac endpoints run it as a "
          "process\n"
          "  --llama-server PATH the llama.cpp server binary (llama-server) for process endpoints\n"
          "  --cpu-endpoints M   container | process (llama-server; default container)\n"
          "  --address HOST      host name users reach this node by, in notebook/endpoint URLs\n"
          "                      (default: the node name)\n"
          "  -q, --quiet         no log lines\n"
          "  -h, --help          show this help\n",
          f);
}

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig) {
    (void)sig;
    stop_flag = 1;
}

int agent_run_verb(int argc, char **argv) {
    enum {
        O_SERVER = 0x200,
        O_TOKEN,
        O_NAME,
        O_SITE,
        O_KIND,
        O_OWNER,
        O_MODE,
        O_CAPS,
        O_HB,
        O_STATE,
        O_SYS,
        O_PROC,
        O_DEV,
        O_NVML,
        O_NO_NVML,
        O_APPLE,
        O_HEADROOM,
        O_CATALOG,
        O_SIM,
        O_ENGINE,
        O_ENGINE_API,
        O_CDI,
        O_IMAGES,
        O_RUNTIMES,
        O_GRACE,
        O_VM_URI,
        O_VM_TYPE,
        O_ADDRESS,
        O_MLX,
        O_LLAMA,
        O_CPU_ENDPOINTS,
        O_VM_IMAGE_DIR
    };
    static const struct option options[] = {
            {"server", required_argument, NULL, O_SERVER},
            {"token-file", required_argument, NULL, O_TOKEN},
            {"name", required_argument, NULL, O_NAME},
            {"site", required_argument, NULL, O_SITE},
            {"site-kind", required_argument, NULL, O_KIND},
            {"owner", required_argument, NULL, O_OWNER},
            {"mode", required_argument, NULL, O_MODE},
            {"capabilities", required_argument, NULL, O_CAPS},
            {"heartbeat", required_argument, NULL, O_HB},
            {"state-dir", required_argument, NULL, O_STATE},
            {"sysfs-root", required_argument, NULL, O_SYS},
            {"proc-root", required_argument, NULL, O_PROC},
            {"dev-root", required_argument, NULL, O_DEV},
            {"nvml-lib", required_argument, NULL, O_NVML},
            {"no-nvml", no_argument, NULL, O_NO_NVML},
            {"apple-fixture", required_argument, NULL, O_APPLE},
            {"apple-headroom-gb", required_argument, NULL, O_HEADROOM},
            {"catalog", required_argument, NULL, O_CATALOG},
            {"simulate", no_argument, NULL, O_SIM},
            {"engine-socket", required_argument, NULL, O_ENGINE},
            {"engine-api", required_argument, NULL, O_ENGINE_API},
            {"cdi-dirs", required_argument, NULL, O_CDI},
            {"images", required_argument, NULL, O_IMAGES},
            {"runtimes", required_argument, NULL, O_RUNTIMES},
            {"stop-grace", required_argument, NULL, O_GRACE},
            {"vm-uri", required_argument, NULL, O_VM_URI},
            {"vm-domain-type", required_argument, NULL, O_VM_TYPE},
            {"vm-image-dir", required_argument, NULL, O_VM_IMAGE_DIR},
            {"address", required_argument, NULL, O_ADDRESS},
            {"mlx-server", required_argument, NULL, O_MLX},
            {"llama-server", required_argument, NULL, O_LLAMA},
            {"cpu-endpoints", required_argument, NULL, O_CPU_ENDPOINTS},
            {"quiet", no_argument, NULL, 'q'},
            {"help", no_argument, NULL, 'h'},
            {},
    };
    /* A control plane with its own CA, as every other verb reaches it (remote.c). */
    const char *ca = getenv("EINSORA_CACERT");
    AgentConfig cfg = {.server = getenv("EINSORA_SERVER"),
                       .ca_file = ca && ca[0] ? ca : NULL,
                       .token = getenv("EINSORA_TOKEN"),
                       .id = {.owner = getenv("USER")},
                       .log = stderr,
                       .stop = &stop_flag};
    AgentWorkloadConfig wl = {0};
    engine_config_init(&wl.engine);
    char host[65] = "";
    bool server_given = false;
    const char *token_file = NULL;
    _cleanup_free_ char *file_token = NULL;
    uint64_t hb, grace;
    Error merr = {0};
    int c;
    while ((c = cli_getopt(argc, argv, "qh", options)) >= 0) {
        switch (c) {
        case O_SERVER:
            /* Repeated: the replicas (not added to $EINSORA_SERVER, replacing it). */
            cfg.server = remote_add_server(server_given ? cfg.server : NULL, optarg);
            server_given = true;
            break;
        case O_TOKEN:
            token_file = optarg;
            break;
        case O_NAME:
            cfg.id.name = optarg;
            break;
        case O_SITE:
            cfg.id.site = optarg;
            break;
        case O_KIND:
            cfg.id.site_kind = optarg;
            break;
        case O_OWNER:
            cfg.id.owner = optarg;
            break;
        case O_MODE:
            cfg.id.mode = optarg;
            break;
        case O_CAPS:
            cfg.id.capabilities = optarg;
            break;
        case O_STATE:
            cfg.state_dir = optarg;
            break;
        case O_SYS:
            cfg.discover.sysfs_root = optarg;
            break;
        case O_PROC:
            cfg.discover.proc_root = optarg;
            break;
        case O_DEV:
            cfg.dev_root = cfg.discover.dev_root = optarg;
            break;
        case O_NVML:
            cfg.discover.nvml_lib = optarg;
            break;
        case O_NO_NVML:
            cfg.discover.no_nvml = true;
            break;
        case O_APPLE:
            cfg.discover.apple_fixture = optarg;
            break;
        case O_HEADROOM:
            if (!agent_parse_headroom(optarg, &cfg.discover.apple_headroom_gb))
                return fail(EXIT_USAGE,
                            "agent run: --apple-headroom-gb needs a number of GB, 0 or more, not "
                            "'%s'",
                            optarg);
            cfg.discover.apple_headroom_set = true;
            break;
        case O_CATALOG:
            cfg.catalog_path = optarg;
            break;
        case O_SIM:
            cfg.simulate = true;
            break;
        case 'q':
            cfg.log = NULL;
            break;
        case O_ENGINE:
            wl.engine.socket = optarg;
            break;
        case O_CDI:
            wl.engine.cdi_dirs = optarg;
            break;
        case O_VM_URI:
            wl.vm.uri = optarg;
            break;
        case O_VM_TYPE:
            wl.vm.domain_type = optarg;
            break;
        case O_VM_IMAGE_DIR:
            if (optarg[0] != '/')
                return fail(EXIT_USAGE, "agent run: --vm-image-dir takes an absolute folder");
            wl.vm_image_dir = optarg;
            break;
        case O_ADDRESS:
            wl.address = optarg;
            break;
        case O_MLX:
            wl.mlx_server = optarg;
            break;
        case O_LLAMA:
            wl.llama_server = optarg;
            break;
        case O_CPU_ENDPOINTS:
            if (STRNEQ(optarg, "container") && STRNEQ(optarg, "process"))
                return fail(EXIT_USAGE, "agent run: --cpu-endpoints is container or process");
            wl.cpu_endpoints_as_process = STREQ(optarg, "process");
            break;
        case O_ENGINE_API:
            if (STREQ(optarg, "auto"))
                wl.engine.dialect = -1;
            else if ((wl.engine.dialect = engine_dialect_from_string(optarg)) < 0)
                return fail(EXIT_USAGE, "agent run: --engine-api is auto, docker or libpod");
            break;
        case O_IMAGES:
        case O_RUNTIMES:
            if (agent_map_check(optarg, c == O_IMAGES ? "--images" : "--runtimes",
                                c == O_IMAGES ? agent_image_keys : agent_runtime_keys, &merr) < 0)
                return fail_error(EXIT_USAGE, &merr);
            *(c == O_IMAGES ? &wl.images : &wl.runtimes) = optarg;
            break;
        case O_GRACE:
            if (parse_uint64(optarg, 3600, &grace) < 0)
                return fail(EXIT_USAGE,
                            "agent run: --stop-grace takes whole seconds from 0 to 3600, not '%s'",
                            optarg);
            wl.stop_grace_s = (unsigned)grace;
            break;
        case O_HB:
            if (parse_uint64(optarg, 3600, &hb) < 0 || hb == 0)
                return fail(EXIT_USAGE,
                            "agent run: --heartbeat takes whole seconds from 1 to 3600, not '%s'",
                            optarg);
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
    if (token_file) {
        int r = read_one_line(token_file, &file_token);
        if (r < 0 || isempty(file_token))
            return fail(EXIT_USAGE, "agent run: cannot read a token from %s", token_file);
        warn_if_others_can_read(token_file, "token file");
        cfg.token = file_token;
    }
    if (!cfg.server || isempty(cfg.token))
        return fail(
                EXIT_USAGE,
                "agent run: --server and a token are required (--token-file F or $EINSORA_TOKEN)");
    if (!cfg.id.name) {
        if (gethostname(host, sizeof(host) - 1) < 0 || !host[0])
            return fail(EXIT_USAGE, "agent run: cannot read the host name; give --name");
        for (char *p = host; *p; p++)
            *p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p == '.' ? '-' : *p);
        cfg.id.name = host;
    }
    if (!wire_name_is_valid(cfg.id.name))
        return fail(EXIT_USAGE, "agent run: '%s' is not a valid node name (a-z, 0-9, . _ -)",
                    cfg.id.name);
    if (!cfg.id.owner || !wire_name_is_valid(cfg.id.owner))
        return fail(EXIT_USAGE,
                    "agent run: give the machine's owner with --owner (a valid user name)");
    if (cfg.id.site_kind && STRNEQ(cfg.id.site_kind, "solo") && STRNEQ(cfg.id.site_kind, "lab") &&
        STRNEQ(cfg.id.site_kind, "datacenter"))
        return fail(EXIT_USAGE, "agent run: --site-kind is solo, lab or datacenter");
    if (cfg.id.capabilities && cli_check_capabilities("agent run", cfg.id.capabilities) != 0)
        return EXIT_USAGE;
    if (cfg.id.mode && STRNEQ(cfg.id.mode, "container") && STRNEQ(cfg.id.mode, "vm-passthrough"))
        return fail(EXIT_USAGE,
                    "agent run: --mode is container or vm-passthrough (vGPU is not offered, R2d)");
    if (cfg.id.mode && (!cfg.id.site_kind || STRNEQ(cfg.id.site_kind, "datacenter")))
        return fail(EXIT_USAGE,
                    "agent run: --mode is for a datacenter node (--site-kind datacenter, R3); a "
                    "lab or solo machine switches per GPU (R7)");
    if (wl.cpu_endpoints_as_process && isempty(wl.llama_server))
        return fail(EXIT_USAGE,
                    "agent run: --cpu-endpoints process needs the binary: --llama-server PATH");

    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    wl.engine.dev_root = cfg.dev_root;
    if (!wl.address)
        wl.address = cfg.id.name;
    wl.engine.node = cfg.id.name; /* its containers are labelled with it */
    cfg.workloads = &wl;
    Error err = {0};
    if (agent_run(&cfg, &err) < 0)
        return fail_error(EXIT_FAIL, &err);
    return EXIT_OK;
}
