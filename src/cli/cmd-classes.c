/* cmd-classes.c: `einsora classes`: the GPU classes the server offers. */
#include <stdio.h>

#include "output.h"
#include "remote.h"
#include "util/strutil.h"
#include "util/table.h"
#include "verbs.h"

int verb_classes(int argc, char **argv) {
    RemoteOpts o = {0};
    int r = remote_getopt(argc, argv, NULL, NULL, NULL, &o,
                          "usage: einsora classes [--json]\n\nList the server's GPU classes.\n\n");
    if (r >= 0)
        return r;
    if (optind < argc)
        return fail(EXIT_USAGE, "classes: unexpected argument '%s'", argv[optind]);
    json_t *j = NULL;
    if ((r = remote_call(&o, "GET", "/v1/classes", NULL, NULL, &j)) != EXIT_OK)
        return r;
    if (o.json)
        return print_json(j);
    Table *t = table_new("CLASS", "VENDOR", "MEMORY", "CONTAINER_RESOURCE", "VM_DEVICE_NAME", "FLAGS", NULL);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(j, "classes"), i, c) {
        char mem[32];
        StrBuf flags = {0};
        if (json_is_true(json_object_get(c, "internal_only")))
            strbuf_puts(&flags, "internal-only ");
        if (json_is_true(json_object_get(c, "owner_only")))
            strbuf_puts(&flags, "owner-only ");
        if (json_is_true(json_object_get(c, "consumer")))
            strbuf_puts(&flags, "consumer ");
        const char *fl = strbuf_cstr(&flags);
        table_add_row(t, json_str(c, "name"), json_str(c, "vendor"),
                      json_int_str(c, "memory_gb", mem, sizeof(mem)),
                      json_str(c, "container_resource"), json_str(c, "vm_device_name"),
                      fl && fl[0] ? strip_trailing(flags.data) : NULL);
        strbuf_done(&flags);
    }
    table_print(t, stdout);
    table_free(t);
    json_decref(j);
    return EXIT_OK;
}
