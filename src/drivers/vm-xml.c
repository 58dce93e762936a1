/* vm-xml.c: domain XML for a passthrough VM (vm-xml.h). */
#include "drivers/vm-xml.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/macro.h"
#include "util/strutil.h"

int vm_pci_address_parse(const char *bdf, unsigned *domain, unsigned *bus, unsigned *slot,
                         unsigned *function) {
    char tail;
    if (!bdf || strlen(bdf) != 12 ||
        sscanf(bdf, "%4x:%2x:%2x.%1x%c", domain, bus, slot, function, &tail) != 4 || *slot > 0x1f ||
        *function > 7 || bdf[4] != ':' || bdf[7] != ':' || bdf[10] != '.')
        return -EINVAL;
    return 0;
}

/* Escape the five XML specials of an attribute or text. */
static void xml_text(StrBuf *b, const char *s) {
    for (; *s; s++)
        switch (*s) {
        case '<':
            strbuf_puts(b, "&lt;");
            break;
        case '>':
            strbuf_puts(b, "&gt;");
            break;
        case '&':
            strbuf_puts(b, "&amp;");
            break;
        case '\'':
            strbuf_puts(b, "&apos;");
            break;
        case '"':
            strbuf_puts(b, "&quot;");
            break;
        default:
            strbuf_append(b, s, 1);
        }
}

static int hostdev(StrBuf *b, const char *bdf, Error *err) {
    unsigned d, bus, slot, fn;
    if (vm_pci_address_parse(bdf, &d, &bus, &slot, &fn) < 0)
        return error_set(err, -EINVAL, "'%.32s' is not a PCI address (dddd:bb:ss.f)", bdf);
    strbuf_printf(b,
                  "    <hostdev mode='subsystem' type='pci' managed='no'>\n"
                  "      <source>\n"
                  "        <address domain='0x%04x' bus='0x%02x' slot='0x%02x' function='0x%x'/>\n"
                  "      </source>\n"
                  "    </hostdev>\n",
                  d, bus, slot, fn);
    return 0;
}

int vm_domain_xml(const WorkloadSpec *spec, const char *type, char **ret, Error *err) {
    if (!driver_id_is_valid(spec->id))
        return error_set(err, -EINVAL, "'%.32s' is not a request id", strempty(spec->id));
    if (isempty(spec->image) || spec->image[0] != '/')
        return error_set(err, -EINVAL, "a VM needs its disk image as an absolute path, not '%.64s'",
                         strempty(spec->image));
    unsigned mem = spec->memory_mb ? spec->memory_mb : VM_MEMORY_DEFAULT_MB;
    unsigned cpus = spec->vcpus ? spec->vcpus : VM_VCPUS_DEFAULT;
    StrBuf b = {0};
    strbuf_printf(&b, "<domain type='%s'>\n  <name>" DRIVER_NAME_PREFIX "%s</name>\n", type,
                  spec->id);
    if (spec->created) /* digits: nothing to escape */
        strbuf_printf(&b,
                      "  <description>" DRIVER_LABEL "=%s " DRIVER_LABEL_CREATED
                      "=%s</description>\n",
                      spec->id, spec->created);
    else
        strbuf_printf(&b, "  <description>" DRIVER_LABEL "=%s</description>\n", spec->id);
    strbuf_printf(&b, "  <memory unit='MiB'>%u</memory>\n  <vcpu>%u</vcpu>\n", mem, cpus);
    strbuf_puts(&b, "  <os>\n    <type arch='x86_64'>hvm</type>\n  </os>\n"
                    "  <features>\n    <acpi/>\n  </features>\n"
                    "  <on_poweroff>destroy</on_poweroff>\n  <on_crash>destroy</on_crash>\n"
                    "  <devices>\n    <disk type='file' device='disk'>\n      <source file='");
    xml_text(&b, spec->image);
    strbuf_puts(&b, "'/>\n      <target dev='vda' bus='virtio'/>\n    </disk>\n");
    int r = 0;
    for (size_t i = 0; r >= 0 && i < spec->n_gpus; i++) {
        const WorkloadGpu *g = &spec->gpus[i];
        r = hostdev(&b, strempty(g->pci), err);
        for (size_t k = 0; r >= 0 && k < g->n_group; k++)
            r = hostdev(&b, g->group[k], err);
    }
    strbuf_puts(&b, "  </devices>\n</domain>\n");
    const char *text = strbuf_cstr(&b);
    if (r >= 0 && !text)
        r = error_set(err, -ENOMEM, "out of memory");
    if (r < 0) {
        strbuf_done(&b);
        return r;
    }
    char *copy = strdup(text);
    strbuf_done(&b);
    if (!copy)
        return error_set(err, -ENOMEM, "out of memory");
    *ret = copy;
    return 0;
}
