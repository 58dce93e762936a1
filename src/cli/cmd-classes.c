/* cmd-classes.c: `einsora classes`: the GPU classes the server offers. */
#include <stdio.h>

#include "listing.h"
#include "output.h"
#include "remote.h"
#include "util/strutil.h"
#include "util/table.h"
#include "verbs.h"

/* The strings of array `arr` joined by commas into buf (NULL when there are none). */
static const char *join_strings(json_t *arr, char *buf, size_t size) {
    size_t i, len = 0;
    json_t *v;
    buf[0] = 0;
    json_array_foreach(arr, i, v) {
        if (json_is_string(v) && len < size)
            len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? "," : "",
                                    json_string_value(v));
    }
    return buf[0] ? buf : NULL;
}

static void print_classes(const ListOpts *l, json_t *list) {
    bool wide = l->format == LIST_WIDE;
    Table *t = wide ? table_new("CLASS", "VENDOR", "MEMORY", "CONTAINER_RESOURCE", "VM_DEVICE_NAME",
                                "FLAGS", "PCI_IDS", "SLICE_OF", "MIG_PROFILES", "NODE_SELECTOR",
                                "NVML_NAMES", "APPLE_MEMORY", NULL)
                    : table_new("CLASS", "VENDOR", "MEMORY", "CONTAINER_RESOURCE", "VM_DEVICE_NAME",
                                "FLAGS", NULL);
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c) {
        char mem[32], pci[256], profiles[256], nvml[256], apple[32];
        StrBuf flags = {0};
        if (json_is_true(json_object_get(c, "internal_only")))
            strbuf_puts(&flags, "internal-only ");
        if (json_is_true(json_object_get(c, "owner_only")))
            strbuf_puts(&flags, "owner-only ");
        if (json_is_true(json_object_get(c, "consumer")))
            strbuf_puts(&flags, "consumer ");
        const char *fl = strbuf_cstr(&flags);
        fl = fl && fl[0] ? strip_trailing(flags.data) : NULL;
        /* The plain table reads only its own columns' cells, the first ones. */
        table_add_row(
                t, json_str(c, "name"), json_str(c, "vendor"),
                json_int_str(c, "memory_gb", mem, sizeof(mem)), json_str(c, "container_resource"),
                json_str(c, "vm_device_name"), fl,
                join_strings(json_object_get(json_object_get(c, "match"), "pci"), pci, sizeof(pci)),
                json_str(json_object_get(c, "mig"), "parent"),
                join_strings(json_object_get(c, "mig_profiles"), profiles, sizeof(profiles)),
                json_str(c, "node_selector"),
                join_strings(json_object_get(json_object_get(c, "match"), "nvml"), nvml,
                             sizeof(nvml)),
                json_int_str(json_object_get(c, "match"), "apple_memory_gb", apple, sizeof(apple)));
        strbuf_done(&flags);
    }
    list_print_table(l, t);
}

int verb_classes(int argc, char **argv) {
    static const struct option extra[] = {LIST_FORMAT_OPTIONS, {}};
    RemoteOpts o = {0};
    ListOpts l = {0};
    int r = remote_getopt(
            argc, argv, extra, list_only_option, &l, &o,
            "usage: einsora classes [-o FORMAT] [--no-headers]\n\n"
            "List the server's GPU classes (-o wide adds how devices match them: PCI\n"
            "ids, NVML names, Apple memory tier; the card a MIG slice class is cut\n"
            "from, the MIG profiles and the node_selector; -o name: "
            "class/NAME).\n" LIST_FORMAT_HELP);
    if (r >= 0)
        return r;
    if (optind < argc)
        return fail(EXIT_USAGE, "classes: unexpected argument '%s'", argv[optind]);
    list_finish(&l, &o);
    json_t *j = NULL;
    if ((r = remote_call(&o, "GET", "/v1/classes", NULL, NULL, &j)) != EXIT_OK)
        return r;
    if (list_print_untabled(&l, j, "classes", "class", "name", &r))
        return r;
    print_classes(&l, json_object_get(j, "classes"));
    json_decref(j);
    return EXIT_OK;
}
