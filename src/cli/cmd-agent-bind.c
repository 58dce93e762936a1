/* cmd-agent-bind.c: `einsora agent bind|reset-check|switch|recover`: moving GPUs between the
 * host driver and vfio-pci (R7, R3/R4 on one node) and the reset-cycle check (R9). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/bind.h"
#include "agent/pci-sysfs.h"
#include "agent/records.h"
#include "agent/reset-check.h"
#include "output.h"
#include "util/cleanup.h"
#include "util/macro.h"
#include "suggest.h"
#include "verbs.h"

static void bind_usage(FILE *f) {
    fputs("usage: einsora agent bind GPU --to vfio|host [--dry-run] [COMMON]\n"
          "       einsora agent switch --to vfio|host [--dry-run] [COMMON]\n"
          "       einsora agent reset-check GPU [--cycles N] [--settle-ms MS] [--kmsg FILE] "
          "[COMMON]\n"
          "       einsora agent recover [--clear-quarantine GPU] [COMMON]\n\n"
          "bind         move a GPU and the functions of its IOMMU group (audio, USB, UCSI) to\n"
          "             vfio-pci (for VMs) or back to the host driver (for containers)\n"
          "switch       move every GPU of this machine to one mode; refused while any GPU is in "
          "use\n"
          "reset-check  reset a GPU on vfio-pci N times (default 3) and check it comes back;\n"
          "             a failing GPU is quarantined\n"
          "recover      finish or roll back a move an earlier agent left half-done\n\n"
          "  --to vfio|host            the driver to move to: vfio-pci (VMs) or the host's\n"
          "  --dry-run                 print the plan, change nothing\n"
          "  --cycles N                reset-check: resets to try (default 3)\n"
          "  --settle-ms MS            reset-check: wait after each reset\n"
          "  --kmsg FILE               reset-check: kernel log to scan for errors\n"
          "  --clear-quarantine GPU    recover: let a quarantined GPU be used again\n\n"
          "GPU is a PCI address like 0000:01:00.0. COMMON options:\n"
          "  --sysfs-root DIR  sysfs (default /sys)      --proc-root DIR  procfs (default /proc)\n"
          "  --dev-root DIR    device files (default /dev)\n"
          "  --state-dir DIR   journal, records, quarantine (default " AGENT_STATE_DIR_DEFAULT
          ");\n"
          "                    one agent command at a time works on it, a second is refused\n"
          "  --timeout SEC     limit for each kernel write (default 10)\n"
          "  --modprobe PROG   program that loads vfio-pci (default modprobe)\n"
          "  --json            machine-readable output      -h, --help  this text\n",
          f);
}

typedef struct Args {
    const char *sub, *gpu, *to, *sysfs, *proc, *dev, *clear;
    ResetCheckOptions rc;
    bool json;
} Args;

static int parse_args(int argc, char **argv, Args *a) {
    static const struct option options[] = {
            {"to", required_argument, NULL, 't'},
            {"dry-run", no_argument, NULL, 'n'},
            {"sysfs-root", required_argument, NULL, 'S'},
            {"proc-root", required_argument, NULL, 'P'},
            {"dev-root", required_argument, NULL, 'D'},
            {"state-dir", required_argument, NULL, 's'},
            {"timeout", required_argument, NULL, 'T'},
            {"modprobe", required_argument, NULL, 'm'},
            {"cycles", required_argument, NULL, 'c'},
            {"settle-ms", required_argument, NULL, 'w'},
            {"kmsg", required_argument, NULL, 'k'},
            {"clear-quarantine", required_argument, NULL, 'C'},
            {"json", no_argument, NULL, 'j'},
            {"help", no_argument, NULL, 'h'},
            {},
    };
    reset_check_options_init(&a->rc);
    a->sub = argv[0];
    optind = 1;
    int c;
    while ((c = cli_getopt(argc, argv, "h", options)) >= 0) {
        char *end = NULL;
        switch (c) {
        case 't':
            a->to = optarg;
            break;
        case 'n':
            a->rc.bind.dry_run = true;
            break;
        case 'S':
            a->sysfs = optarg;
            break;
        case 'P':
            a->proc = optarg;
            break;
        case 'D':
            a->dev = optarg;
            break;
        case 's':
            a->rc.bind.state_dir = optarg;
            break;
        case 'T': {
            double sec = strtod(optarg, &end);
            if (end == optarg || *end || !(sec > 0 && sec <= 3600))
                return fail(EXIT_USAGE,
                            "agent %s: --timeout takes seconds between 0.001 and 3600, not '%s'",
                            a->sub, optarg);
            a->rc.bind.timeout_ms = (int)(sec * 1000 + 0.5) ? (int)(sec * 1000 + 0.5) : 1;
            break;
        }
        case 'm':
            a->rc.bind.modprobe = optarg;
            break;
        case 'c': {
            unsigned long v = strtoul(optarg, &end, 10);
            if (end == optarg || *end || v < 1 || v > 100)
                return fail(EXIT_USAGE, "agent %s: --cycles takes a number from 1 to 100, not '%s'",
                            a->sub, optarg);
            a->rc.cycles = (unsigned)v;
            break;
        }
        case 'w': {
            unsigned long v = strtoul(optarg, &end, 10);
            if (end == optarg || *end || v > 60000)
                return fail(EXIT_USAGE,
                            "agent %s: --settle-ms takes milliseconds up to 60000, not '%s'",
                            a->sub, optarg);
            a->rc.settle_ms = (int)v;
            break;
        }
        case 'k':
            a->rc.kmsg_path = optarg;
            break;
        case 'C':
            a->clear = optarg;
            break;
        case 'j':
            a->json = true;
            break;
        case 'h':
            bind_usage(stdout);
            return EXIT_OK;
        default:
            bind_usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind < argc)
        a->gpu = argv[optind++];
    if (optind < argc)
        return fail(EXIT_USAGE, "agent %s: unexpected argument '%s'", a->sub, argv[optind]);
    if (a->gpu && !pci_bdf_is_valid(a->gpu) && !STREQ(a->sub, "switch") &&
        !STREQ(a->sub, "recover"))
        return fail(EXIT_USAGE, "agent %s: '%s' is not a PCI address like 0000:01:00.0", a->sub,
                    a->gpu);
    if (a->clear && !pci_bdf_is_valid(a->clear))
        return fail(EXIT_USAGE,
                    "agent %s: --clear-quarantine takes a PCI address like 0000:01:00.0, not '%s'",
                    a->sub, a->clear);
    if (host_paths_init(&a->rc.bind.paths, a->sysfs, a->proc, a->dev) < 0)
        return fail(EXIT_USAGE, "agent %s: a root folder path is too long", a->sub);
    struct stat st; /* without its device nodes no holder of the GPU would be seen (R7) */
    if (a->dev && stat(a->dev, &st) < 0)
        return fail(EXIT_USAGE, "agent %s: --dev-root %s: no such directory", a->sub, a->dev);
    if (a->dev && !S_ISDIR(st.st_mode))
        return fail(EXIT_USAGE, "agent %s: --dev-root %s is not a directory", a->sub, a->dev);
    return -1; /* go on */
}

static json_t *functions_json(const BindFunction *fns, size_t n) {
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr,
                              json_pack("{s:s, s:s?, s:s?, s:s?}", "bdf", fns[i].bdf, "before",
                                        fns[i].before[0] ? fns[i].before : NULL, "driver",
                                        fns[i].after[0] ? fns[i].after : NULL, "driver_override",
                                        fns[i].override[0] ? fns[i].override : NULL));
    return arr;
}

static void print_functions(const BindFunction *fns, size_t n) {
    for (size_t i = 0; i < n; i++)
        printf("  %s  %-14s -> %s%s%s\n", fns[i].bdf, fns[i].before[0] ? fns[i].before : "(none)",
               fns[i].after[0] ? fns[i].after : "(no driver)",
               fns[i].override[0] ? "   driver_override=" : "", fns[i].override);
}

static json_t *bind_result_json(const BindResult *r) {
    json_t *plan = json_array();
    _cleanup_free_ char *copy = strdup(r->plan);
    for (char *save = NULL, *l = copy ? strtok_r(copy, "\n", &save) : NULL; l;
         l = strtok_r(NULL, "\n", &save))
        json_array_append_new(plan, json_string(l));
    return json_pack("{s:s, s:s, s:b, s:b, s:i, s:o, s:o, s:s}", "gpu", r->gpu, "to",
                     bind_target_to_string(r->to), "dry_run", r->dry_run, "changed", r->changed,
                     "iommu_group", r->iommu_group, "functions", functions_json(r->fns, r->n_fns),
                     "plan", plan, "recovered", recover_action_to_string(r->recovered));
}

static void print_recovered(RecoverAction a, const char *gpu) {
    if (a != RECOVER_NOTHING)
        printf("An earlier unfinished move of GPU %s was %s first.\n", gpu,
               a == RECOVER_COMPLETED     ? "completed"
               : a == RECOVER_ROLLED_BACK ? "rolled back"
                                          : "quarantined");
}

static void print_bind_result(const BindResult *r) {
    if (r->dry_run) {
        if (!r->plan[0])
            printf("Dry run: GPU %s is already on %s; nothing would change.\n", r->gpu,
                   r->to == BIND_TO_VFIO ? "vfio-pci" : "its host driver");
        else
            printf("Dry run, nothing was changed. Moving GPU %s to %s would write:\n%s", r->gpu,
                   r->to == BIND_TO_VFIO ? "vfio-pci" : "its host driver", r->plan);
        return;
    }
    print_recovered(r->recovered, r->recovered_gpu);
    printf("GPU %s %s %s (IOMMU group %d):\n", r->gpu, r->changed ? "moved to" : "was already on",
           r->to == BIND_TO_VFIO ? "vfio-pci" : "its host driver", r->iommu_group);
    print_functions(r->fns, r->n_fns);
}

/* One agent command at a time on a state folder (records.h): taken once the command line
 * is known to be right, so a usage error never makes the folder. A dry run writes nothing
 * and takes none. */
static int hold_state(const Args *a, int *ret_fd) {
    Error err = {0};
    if (agent_state_lock(a->rc.bind.state_dir, ret_fd, &err) < 0)
        return fail_error(EXIT_FAIL, &err);
    return EXIT_OK;
}

static int do_bind(Args *a) {
    BindTarget to;
    if (!a->gpu)
        return fail(EXIT_USAGE,
                    "agent bind: name the GPU, e.g. 'einsora agent bind 0000:01:00.0 --to vfio'");
    if (!a->to || bind_target_from_string(a->to, &to) < 0)
        return fail(EXIT_USAGE, "agent bind: say where the GPU goes: --to vfio or --to host");
    _cleanup_close_ int lock_fd = -1;
    int r = a->rc.bind.dry_run ? EXIT_OK : hold_state(a, &lock_fd);
    if (r != EXIT_OK)
        return r;
    BindResult res;
    Error err = {0};
    if (gpu_bind(&a->rc.bind, a->gpu, to, &res, &err) < 0)
        return fail_error(EXIT_FAIL, &err);
    if (a->json)
        return print_json(bind_result_json(&res));
    print_bind_result(&res);
    return EXIT_OK;
}

static int do_switch(Args *a) {
    BindTarget to;
    if (a->gpu)
        return fail(EXIT_USAGE,
                    "agent switch: moves every GPU; use 'einsora agent bind %s' for one", a->gpu);
    if (!a->to || bind_target_from_string(a->to, &to) < 0)
        return fail(EXIT_USAGE, "agent switch: say the mode: --to vfio or --to host");
    _cleanup_close_ int lock_fd = -1;
    int r = a->rc.bind.dry_run ? EXIT_OK : hold_state(a, &lock_fd);
    if (r != EXIT_OK)
        return r;
    SwitchResult *res = calloc(1, sizeof(SwitchResult));
    if (!res)
        return fail(EXIT_FAIL, "out of memory");
    Error err = {0};
    int ret = EXIT_OK;
    if (node_switch(&a->rc.bind, to, res, &err) < 0)
        ret = fail_error(EXIT_FAIL, &err);
    else if (a->json) {
        json_t *gpus = json_array(), *skipped = json_array();
        for (size_t i = 0; i < res->n_gpus; i++)
            json_array_append_new(gpus, bind_result_json(&res->gpus[i]));
        for (size_t i = 0; i < res->n_skipped; i++)
            json_array_append_new(skipped, json_string(res->skipped[i]));
        ret = print_json(json_pack("{s:s, s:o, s:o}", "to", bind_target_to_string(to), "gpus", gpus,
                                   "skipped_boot_vga", skipped));
    } else {
        printf("%s%zu %s of this machine %s %s.\n",
               a->rc.bind.dry_run ? "Dry run, nothing was changed: " : "", res->n_gpus,
               plural((long long)res->n_gpus, "GPU", "GPUs"),
               a->rc.bind.dry_run ? "would move to"
                                  : plural((long long)res->n_gpus, "is on", "are on"),
               to == BIND_TO_VFIO ? "vfio-pci" : "their host drivers");
        for (size_t i = 0; i < res->n_gpus; i++) {
            if (a->rc.bind.dry_run)
                printf("GPU %s:\n%s", res->gpus[i].gpu,
                       res->gpus[i].plan[0] ? res->gpus[i].plan : "  (already there)\n");
            else
                print_functions(res->gpus[i].fns, res->gpus[i].n_fns);
        }
        for (size_t i = 0; i < res->n_skipped; i++)
            printf("GPU %s stays with the host: it is the boot display device.\n", res->skipped[i]);
    }
    free(res);
    return ret;
}

static int do_recover(Args *a) {
    Error err = {0};
    if (a->gpu)
        return fail(EXIT_USAGE, "agent recover: unexpected argument '%s'", a->gpu);
    /* Above all here: a recover beside a running bind would roll back its move in flight. */
    _cleanup_close_ int lock_fd = -1;
    int r = hold_state(a, &lock_fd);
    if (r != EXIT_OK)
        return r;
    if (a->clear) {
        if (agent_quarantine_clear(a->rc.bind.state_dir, a->clear, &err) < 0)
            return fail_error(EXIT_FAIL, &err);
        if (!a->json)
            printf("GPU %s is no longer quarantined.\n", a->clear);
    }
    RecoverResult res;
    if (gpu_recover(&a->rc.bind, &res, &err) < 0)
        return fail_error(EXIT_FAIL, &err);
    if (a->json)
        return print_json(json_pack(
                "{s:s, s:s?, s:o}", "action", recover_action_to_string(res.action), "gpu",
                res.gpu[0] ? res.gpu : NULL, "functions", functions_json(res.fns, res.n_fns)));
    if (res.action == RECOVER_NOTHING)
        printf("Nothing to recover: no move was left unfinished.\n");
    else {
        print_recovered(res.action, res.gpu);
        printf("The kernel now shows:\n");
        print_functions(res.fns, res.n_fns);
    }
    return EXIT_OK;
}

static int do_reset_check(Args *a) {
    if (!a->gpu)
        return fail(
                EXIT_USAGE,
                "agent reset-check: name the GPU, e.g. 'einsora agent reset-check 0000:01:00.0'");
    _cleanup_close_ int lock_fd = -1;
    int r = hold_state(a, &lock_fd);
    if (r != EXIT_OK)
        return r;
    ResetCheckResult res;
    Error err = {0};
    if (gpu_reset_check(&a->rc, a->gpu, &res, &err) < 0)
        return fail_error(EXIT_FAIL, &err);
    if (a->json) {
        json_t *reasons = json_array();
        for (size_t i = 0; i < res.n_reasons; i++)
            json_array_append_new(reasons, json_string(res.reasons[i]));
        print_json(json_pack("{s:s, s:s, s:i, s:s, s:s, s:s, s:o, s:b}", "gpu", res.gpu, "verdict",
                             reset_verdict_to_string(res.verdict), "cycles", (int)res.cycles_run,
                             "reset_method", res.reset_method, "link_before", res.link_before,
                             "link_after", res.link_after, "reasons", reasons, "quarantined",
                             res.quarantined));
    } else {
        printf("GPU %s: reset-cycle check %s after %u %s (reset methods: %s; link %s, now %s).\n",
               res.gpu, reset_verdict_to_string(res.verdict), res.cycles_run,
               plural(res.cycles_run, "reset", "resets"),
               res.reset_method[0] ? res.reset_method : "none", res.link_before, res.link_after);
        for (size_t i = 0; i < res.n_reasons; i++)
            printf("  - %s\n", res.reasons[i]);
        if (res.quarantined)
            printf("The GPU is quarantined and will not be offered for passthrough.\n");
    }
    return res.verdict == RESET_FAIL ? EXIT_FAIL : EXIT_OK;
}

int agent_bind_verb(int argc, char **argv) {
    Args a = {0};
    int r = parse_args(argc, argv, &a);
    if (r >= 0)
        return r;
    if (STREQ(a.sub, "bind"))
        return do_bind(&a);
    if (STREQ(a.sub, "switch"))
        return do_switch(&a);
    if (STREQ(a.sub, "recover"))
        return do_recover(&a);
    if (STREQ(a.sub, "reset-check"))
        return do_reset_check(&a);
    bind_usage(stderr);
    return EXIT_USAGE;
}
