/* cmd-catalog.c: `einsora catalog check FILE` and `einsora catalog show [--json]`. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "config/catalog-json.h"
#include "config/catalog-yaml.h"
#include "output.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "util/table.h"
#include "suggest.h"
#include "verbs.h"

static void catalog_usage(FILE *f) {
    fputs("usage: einsora catalog check FILE [--pci-ids FILE] [--json]\n"
          "       einsora catalog show [--catalog FILE] [--pci-ids FILE] [--json]\n\n"
          "check  validate a catalog file; exit 0 when valid, 1 with FILE:LINE:COL and a reason\n"
          "show   print the classes of a catalog (default: the shipped catalog, or\n"
          "       $EINSORA_CATALOG) as an aligned table, or JSON with --json\n\n"
          "  --catalog FILE   catalog to show\n"
          "  --pci-ids FILE   pci.ids database for vm_device_name (default " EINSORA_PCI_IDS ")\n"
          "  --json           machine-readable output\n"
          "  -h, --help       this text\n",
          f);
}

/* Load pci.ids when it is there; without it vm_device_name falls back to raw ids, and we say
 * so rather than fail, since only that column depends on it. */
static PciIds *load_pci_ids_or_warn(const char *path) {
    PciIds *ids = NULL;
    Error err = {0};
    if (pci_ids_load(path, &ids, &err) < 0) {
        fprintf(stderr, "einsora: warning: %s; vm_device_name falls back to raw device ids\n",
                error_message(&err));
        return NULL;
    }
    return ids;
}

/* R9: a class whose PCI ids pci.ids names as GeForce cards, not marked consumer: it would
 * skip the reset cycle check before passthrough (and may claim MIG profiles such a card does
 * not have). The operator decides; the check says what it sees. */
static void warn_consumer_unmarked(const Catalog *cat, const PciIds *ids) {
    for (size_t i = 0; i < cat->n_classes; i++) {
        const GpuClass *c = &cat->classes[i];
        if (c->consumer || c->vendor != VENDOR_NVIDIA || c->mig_parent)
            continue;
        /* The card's name, by pci.ids or as NVML names it. */
        const char *geforce = NULL;
        for (size_t k = 0; ids && k < c->n_pci && !geforce; k++) {
            const char *name = pci_ids_device_name(ids, c->pci[k].vendor, c->pci[k].device);
            geforce = name && strstr(name, "GeForce") ? name : NULL;
        }
        for (size_t k = 0; k < c->n_nvml_names && !geforce; k++)
            geforce = strstr(c->nvml_names[k], "GeForce") ? c->nvml_names[k] : NULL;
        if (geforce)
            fprintf(stderr,
                    "einsora: warning: class %s matches %s, a GeForce card, but is not marked "
                    "consumer: true; it skips the reset check before passthrough (R9)%s\n",
                    c->name, geforce, c->n_mig_profiles ? ", and GeForce cards have no MIG" : "");
    }
}

/* R6: a vm_device_name stated in the catalog that this host's pci.ids would spell otherwise.
 * The catalog wins (it names what the device plugin advertises); say so, since the plugin
 * derives the name from the pci.ids in its own image. */
static void warn_vm_name_mismatches(const Catalog *cat) {
    for (size_t i = 0; i < cat->n_classes; i++) {
        const GpuClass *c = &cat->classes[i];
        if (c->vm_device_name_derived)
            fprintf(stderr,
                    "einsora: warning: class %s: vm_device_name %s (catalog) differs from %s "
                    "derived "
                    "from this host's pci.ids; the catalog's is used, check it against the "
                    "resources "
                    "the nodes' device plugin advertises\n",
                    c->name, c->vm_device_name, c->vm_device_name_derived);
    }
}

static char *format_match(const GpuClass *c) {
    StrBuf b = {0};
    for (size_t i = 0; i < c->n_pci; i++)
        strbuf_printf(&b, "%s%04x:%04x", b.len ? "," : "", c->pci[i].vendor, c->pci[i].device);
    for (size_t i = 0; i < c->n_nvml_names; i++) /* NVML's name, when the PCI id is unknown */
        strbuf_printf(&b, "%snvml '%s'", b.len ? "," : "", c->nvml_names[i]);
    if (c->apple_memory_gb)
        strbuf_printf(&b, "%sunified>=%uGB", b.len ? "," : "", c->apple_memory_gb);
    if (c->mig_parent)
        strbuf_printf(&b, "%sMIG %s of %s", b.len ? "," : "", c->mig_profile, c->mig_parent);
    if (c->vendor == VENDOR_CPU)
        strbuf_puts(&b, "every machine");
    if (!strbuf_cstr(&b))
        return NULL;
    return b.data;
}

static char *format_flags(const GpuClass *c) {
    StrBuf b = {0};
    if (c->consumer)
        strbuf_puts(&b, "consumer ");
    if (c->internal_only)
        strbuf_puts(&b, "internal-only ");
    if (c->owner_only)
        strbuf_puts(&b, "owner-only ");
    if (c->n_mig_profiles)
        strbuf_printf(&b, "mig:%zu ", c->n_mig_profiles);
    if (b.len == 0)
        strbuf_puts(&b, "-");
    if (!strbuf_cstr(&b))
        return NULL;
    return strip_trailing(b.data);
}

static int print_catalog_table(const Catalog *cat) {
    Table *t = table_new("CLASS", "VENDOR", "MEMORY", "MATCH", "CONTAINER_RESOURCE",
                         "NODE_SELECTOR", "VM_DEVICE_NAME", "FLAGS", NULL);
    if (!t)
        return fail(EXIT_FAIL, "out of memory");
    bool any_raw = false;
    for (size_t i = 0; i < cat->n_classes; i++) {
        const GpuClass *c = &cat->classes[i];
        char mem[32];
        snprintf(mem, sizeof(mem), "%uGB", c->memory_gb);
        _cleanup_free_ char *match = format_match(c);
        _cleanup_free_ char *flags = format_flags(c);
        _cleanup_free_ char *vm = c->vm_device_name && c->vm_device_name_source == VM_NAME_RAW_ID
                                          ? strprintf("%s *", c->vm_device_name)
                                          : strdup_or_null(c->vm_device_name);
        any_raw = any_raw || c->vm_device_name_source == VM_NAME_RAW_ID;
        table_add_row(t, c->name, vendor_to_string(c->vendor), c->memory_gb ? mem : NULL, match,
                      c->container_resource, c->node_selector, vm, flags);
    }
    table_print(t, stdout);
    table_free(t);
    if (any_raw)
        puts("\n* pci.ids has no name for this device: the name is the raw device id, as the "
             "KubeVirt GPU device plugin derives it");
    return EXIT_OK;
}

int verb_catalog(int argc, char **argv) {
    static const struct option options[] = {
            {"catalog", required_argument, NULL, 'c'},
            {"pci-ids", required_argument, NULL, 'p'},
            {"json", no_argument, NULL, 'j'},
            {"help", no_argument, NULL, 'h'},
            {},
    };
    const char *catalog_path = NULL, *pci_ids_path = EINSORA_PCI_IDS;
    bool json = false;
    int c;
    /* GNU getopt permutes, so options may come before or after the sub-command. */
    while ((c = cli_getopt(argc, argv, "h", options)) >= 0) {
        switch (c) {
        case 'c':
            catalog_path = optarg;
            break;
        case 'p':
            pci_ids_path = optarg;
            break;
        case 'j':
            json = true;
            break;
        case 'h':
            catalog_usage(stdout);
            return EXIT_OK;
        default:
            catalog_usage(stderr);
            return EXIT_USAGE;
        }
    }
    const char *sub = optind < argc ? argv[optind++] : NULL;
    const char *file = optind < argc ? argv[optind++] : NULL;
    if (optind < argc)
        return fail(EXIT_USAGE, "catalog: unexpected argument '%s'", argv[optind]);
    if (!sub) {
        catalog_usage(stderr);
        return EXIT_USAGE;
    }
    if (STREQ(sub, "check")) {
        if (!file)
            return fail(EXIT_USAGE, "catalog check: name the catalog FILE to check");
    } else if (STREQ(sub, "show")) {
        if (file)
            return fail(EXIT_USAGE, "catalog show: unexpected argument '%s' (use --catalog FILE)",
                        file);
        file = catalog_path ? catalog_path : catalog_default_path();
    } else {
        static const char *const subs[] = {"check", "show"};
        return cli_unknown_sub("catalog", sub, subs, ARRAY_SIZE(subs));
    }

    PciIds *ids = load_pci_ids_or_warn(pci_ids_path);
    Catalog *cat = NULL;
    Error err = {0};
    int r = catalog_load_file(file, ids, &cat, &err);
    if (r >= 0)
        warn_consumer_unmarked(cat, ids);
    pci_ids_free(ids);
    if (r < 0) {
        /* A script asked for JSON: the verdict comes on stdout as JSON too, not only as text
         * on stderr (the message starts with FILE:LINE:COL where the file has a place). */
        if (json && STREQ(sub, "check"))
            (void)print_json(
                    json_pack("{s:b, s:s, s:s}", "valid", 0, "file", file, "error", err.message));
        return fail_error(EXIT_FAIL, &err);
    }

    warn_vm_name_mismatches(cat);
    int ret;
    if (STREQ(sub, "check")) {
        size_t derived = 0;
        bool cpu_added = false;
        for (size_t i = 0; i < cat->n_classes; i++) {
            derived += cat->classes[i].derived && cat->classes[i].mig_parent;
            cpu_added = cpu_added || (cat->classes[i].derived && !cat->classes[i].mig_parent);
        }
        if (json)
            ret = print_json(json_pack("{s:b, s:s, s:I, s:I}", "valid", 1, "file", file, "classes",
                                       (json_int_t)cat->n_classes, "derived_mig_classes",
                                       (json_int_t)derived));
        else {
            printf("%s: valid, %zu class%s (%zu MIG slice class%s derived from mig_profiles%s)\n",
                   file, cat->n_classes, cat->n_classes == 1 ? "" : "es", derived,
                   derived == 1 ? "" : "es",
                   cpu_added ? "; cpu added: every machine offers it, R11" : "");
            ret = EXIT_OK;
        }
    } else
        ret = json ? print_json(catalog_to_json(cat)) : print_catalog_table(cat);
    catalog_free(cat);
    return ret;
}
