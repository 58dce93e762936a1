/* cmd-agent-discover.c: `einsora agent discover`: list every accelerator of this machine. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/discover.h"
#include "agent/inventory-json.h"
#include "config.h"
#include "config/catalog-yaml.h"
#include "output.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "util/table.h"
#include "suggest.h"
#include "verbs.h"

static void discover_usage(FILE *f) {
    fputs("usage: einsora agent discover [OPTIONS]\n\n"
          "List every accelerator of this machine (NVIDIA, AMD, Intel, Apple) and the CPU, with\n"
          "the catalog class of each (or \"unclassified\").\n\n"
          "  --json                  machine-readable output (the control plane's format)\n"
          "  --sysfs-root DIR        read sysfs here instead of /sys\n"
          "  --proc-root DIR         read proc here instead of /proc\n"
          "  --dev-root DIR          device files live here instead of /dev\n"
          "  --nvml-lib PATH         NVML library to load (default libnvidia-ml.so.1)\n"
          "  --no-nvml               do not load NVML\n"
          "  --catalog FILE          catalog of GPU classes (default: the shipped one)\n"
          "  --pci-ids FILE          pci.ids database (default " EINSORA_PCI_IDS ")\n"
          "  --apple-fixture FILE    describe a Mac from FILE (hw.memsize, iogpu.wired_limit_mb)\n"
          "  --apple-headroom-gb N   GPU memory kept for a Mac's owner, 0 or more (default\n"
          "                          min(8, RAM/4))\n"
          "  --no-holders            do not scan /proc for processes holding device files\n"
          "  -h, --help              this text\n",
          f);
}

static char *fmt_bytes(uint64_t b) {
    if (!b)
        return NULL;
    return strprintf("%.1f GiB", (double)b / (double)(1ull << 30));
}

/* "16.0GT/s x16 (max 32.0GT/s x16)"; "?" for what the kernel does not report. */
static void fmt_speed_width(char *buf, size_t size, unsigned mts, unsigned width) {
    char speed[16] = "?", lanes[16] = "?";
    if (mts)
        snprintf(speed, sizeof(speed), "%.1fGT/s", mts / 1000.0);
    if (width)
        snprintf(lanes, sizeof(lanes), "%u", width);
    snprintf(buf, size, "%s x%s", speed, lanes);
}

static char *fmt_link(const Accelerator *a) {
    if (a->vendor == VENDOR_APPLE || (!a->link_speed_mts && !a->max_link_speed_mts))
        return NULL;
    char cur[32], max[32];
    fmt_speed_width(cur, sizeof(cur), a->link_speed_mts, a->link_width);
    fmt_speed_width(max, sizeof(max), a->max_link_speed_mts, a->max_link_width);
    return strprintf("%s (max %s)", cur, max);
}

static char *fmt_mig(const Accelerator *a) {
    if (a->mig_current < 0)
        return NULL;
    return strprintf("%s%s, %zu inst", a->mig_current ? "on" : "off",
                     a->mig_pending != a->mig_current
                             ? (a->mig_pending ? " (pending on)" : " (pending off)")
                             : "",
                     a->n_mig);
}

static void print_details(const Accelerator *a) {
    const char *id = a->bdf[0] ? a->bdf : "apple";
    if (a->n_group) {
        printf("  %s iommu group %d also holds:", id, a->iommu_group);
        for (size_t i = 0; i < a->n_group; i++)
            printf(" %s (%s %04x:%04x, %s)", a->group[i].bdf, a->group[i].kind,
                   a->group[i].vendor_id, a->group[i].device_id,
                   a->group[i].driver ? a->group[i].driver : "no driver");
        putchar('\n');
    }
    if (a->driver_override)
        printf("  %s driver_override: %s\n", id, a->driver_override);
    if (a->has_reset_method) {
        printf("  %s reset methods:", id);
        for (size_t i = 0; i < a->n_reset_methods; i++)
            printf(" %s", a->reset_methods[i]);
        puts(a->n_reset_methods ? "" : " none");
    }
    for (size_t i = 0; i < a->n_mig; i++)
        printf("  %s MIG instance %u: %s at slots %u-%u (%s)\n", id, a->mig[i].gpu_instance_id,
               a->mig[i].profile, a->mig[i].start, a->mig[i].start + a->mig[i].size - 1,
               a->mig[i].slice_class ? a->mig[i].slice_class : "unclassified");
    if (a->n_device_files) {
        printf("  %s device files:", id);
        for (size_t i = 0; i < a->n_device_files; i++)
            printf(" %s", a->device_files[i]);
        putchar('\n');
    }
    if (a->n_nvml_pids) {
        printf("  %s NVML compute processes:", id);
        for (size_t i = 0; i < a->n_nvml_pids; i++)
            printf(" %u", a->nvml_pids[i]);
        putchar('\n');
    }
    if (a->gtt_total_bytes)
        printf("  %s GTT (system memory mapped for the GPU): %.1f GiB, %.1f GiB used\n", id,
               (double)a->gtt_total_bytes / (double)(1ull << 30),
               (double)a->gtt_used_bytes / (double)(1ull << 30));
    if (a->vendor == VENDOR_APPLE)
        printf("  apple unified memory %.1f GiB, GPU wired limit %.1f GiB, owner headroom %.1f "
               "GiB\n",
               (double)a->unified_memory_bytes / (double)(1ull << 30),
               (double)a->wired_limit_bytes / (double)(1ull << 30),
               (double)a->headroom_bytes / (double)(1ull << 30));
    if (a->vendor == VENDOR_APPLE && a->memory_total_bytes < (1ull << 30))
        printf("  %s offers no GPU memory: the wired limit less the owner's headroom is under "
               "1 GB, so the GPU is shown quarantined (R10); lower --apple-headroom-gb or raise "
               "iogpu.wired_limit_mb\n",
               id);
    for (size_t i = 0; i < a->n_holders; i++)
        printf("  %s held by pid %d (%s) via %s\n", id, a->holders[i].pid, a->holders[i].comm,
               a->holders[i].path);
    if (a->error)
        printf("  %s ERROR: %s\n", id, a->error);
}

static int print_table(const MachineInventory *inv) {
    _cleanup_free_ char *mem = fmt_bytes(inv->cpu.memory_bytes);
    printf("cpu: %u logical cores, %s memory%s%s\n", inv->cpu.logical_cores, mem ? mem : "unknown",
           inv->cpu.model ? ", " : "", strempty(inv->cpu.model));
    printf("iommu: %s\n", inv->iommu_enabled ? "enabled" : "off (no IOMMU groups)");
    printf("nvml: %s\n", inv->nvml_status);
    if (inv->apple_status)
        printf("apple: %s\n", inv->apple_status);
    if (!inv->n_accelerators) {
        puts("\nno accelerators found");
        return EXIT_OK;
    }
    putchar('\n');
    Table *t = table_new("ADDRESS", "VENDOR", "MODEL", "CLASS", "MEMORY", "NUMA", "LINK", "DRIVER",
                         "IOMMU", "BOOT_VGA", "MIG", "HOLDERS", NULL);
    if (!t)
        return fail(EXIT_FAIL, "out of memory");
    for (size_t i = 0; i < inv->n_accelerators; i++) {
        const Accelerator *a = &inv->accelerators[i];
        _cleanup_free_ char *amem = fmt_bytes(a->memory_total_bytes), *link = fmt_link(a),
                            *mig = fmt_mig(a);
        _cleanup_free_ char *numa = a->numa_node >= 0 ? strprintf("%d", a->numa_node) : NULL;
        _cleanup_free_ char *grp = a->iommu_group >= 0 ? strprintf("%d", a->iommu_group) : NULL;
        _cleanup_free_ char *holders = a->n_holders ? strprintf("%zu", a->n_holders) : NULL;
        _cleanup_free_ char *cls =
                strprintf("%s%s", accelerator_class_name(a), a->consumer ? " (consumer)" : "");
        table_add_row(t, a->bdf[0] ? a->bdf : "-",
                      a->vendor == _VENDOR_INVALID ? "unknown" : vendor_to_string(a->vendor),
                      a->model, cls, amem, numa, link, a->driver, grp,
                      a->boot_vga < 0 ? NULL
                      : a->boot_vga   ? "yes"
                                      : "no",
                      mig, holders);
    }
    table_print(t, stdout);
    table_free(t);
    for (size_t i = 0; i < inv->n_accelerators; i++)
        print_details(&inv->accelerators[i]);
    return EXIT_OK;
}

int agent_discover_verb(int argc, char **argv) {
    enum {
        O_SYSFS = 256,
        O_PROC,
        O_DEV,
        O_NVML_LIB,
        O_NO_NVML,
        O_CATALOG,
        O_PCI_IDS,
        O_APPLE,
        O_HEADROOM,
        O_NO_HOLDERS
    };
    static const struct option options[] = {
            {"json", no_argument, NULL, 'j'},
            {"sysfs-root", required_argument, NULL, O_SYSFS},
            {"proc-root", required_argument, NULL, O_PROC},
            {"dev-root", required_argument, NULL, O_DEV},
            {"nvml-lib", required_argument, NULL, O_NVML_LIB},
            {"no-nvml", no_argument, NULL, O_NO_NVML},
            {"catalog", required_argument, NULL, O_CATALOG},
            {"pci-ids", required_argument, NULL, O_PCI_IDS},
            {"apple-fixture", required_argument, NULL, O_APPLE},
            {"apple-headroom-gb", required_argument, NULL, O_HEADROOM},
            {"no-holders", no_argument, NULL, O_NO_HOLDERS},
            {"help", no_argument, NULL, 'h'},
            {},
    };
    DiscoverOptions o = {0};
    const char *catalog_path = NULL, *pci_ids_path = EINSORA_PCI_IDS;
    bool json = false;
    int c;
    optind = 1;
    while ((c = cli_getopt(argc, argv, "h", options)) >= 0) {
        switch (c) {
        case 'j':
            json = true;
            break;
        case O_SYSFS:
            o.sysfs_root = optarg;
            break;
        case O_PROC:
            o.proc_root = optarg;
            break;
        case O_DEV:
            o.dev_root = optarg;
            break;
        case O_NVML_LIB:
            o.nvml_lib = optarg;
            break;
        case O_NO_NVML:
            o.no_nvml = true;
            break;
        case O_CATALOG:
            catalog_path = optarg;
            break;
        case O_PCI_IDS:
            pci_ids_path = optarg;
            break;
        case O_APPLE:
            o.apple_fixture = optarg;
            break;
        case O_HEADROOM:
            if (!agent_parse_headroom(optarg, &o.apple_headroom_gb))
                return fail(EXIT_USAGE,
                            "agent discover: --apple-headroom-gb needs a number of GB, 0 or more, "
                            "not '%s'",
                            optarg);
            o.apple_headroom_set = true;
            break;
        case O_NO_HOLDERS:
            o.no_holders = true;
            break;
        case 'h':
            discover_usage(stdout);
            return EXIT_OK;
        default:
            discover_usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind < argc)
        return fail(EXIT_USAGE, "agent discover: unexpected argument '%s'", argv[optind]);

    Error err = {0};
    PciIds *ids = NULL;
    if (pci_ids_load(pci_ids_path, &ids, &err) < 0) {
        fprintf(stderr, "einsora: warning: %s; devices are named by raw id\n", error_message(&err));
        error_clear(&err);
    }
    Catalog *cat = NULL;
    if (catalog_load_file(catalog_path ? catalog_path : catalog_default_path(), ids, &cat, &err) <
        0) {
        pci_ids_free(ids);
        return fail_error(EXIT_FAIL, &err);
    }
    o.catalog = cat;
    o.pci_ids = ids;
    MachineInventory *inv = NULL;
    int r = machine_discover(&o, &inv, &err);
    int ret;
    if (r < 0)
        ret = fail_error(EXIT_FAIL, &err);
    else
        ret = json ? print_json(machine_inventory_to_json(inv)) : print_table(inv);
    machine_inventory_free(inv);
    catalog_free(cat);
    pci_ids_free(ids);
    return ret;
}
