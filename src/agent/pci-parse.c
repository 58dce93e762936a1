/* pci-parse.c: pure parsers for PCI sysfs attribute text (no I/O; fuzzed). */
#include "pci-parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pci-sysfs.h"
#include "util/macro.h"

/* Copy s without trailing white space into a bounded buffer; -EINVAL when it does not fit. */
static int trimmed(const char *s, char *buf, size_t size) {
    if (!s)
        return -EINVAL;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    if (n >= size)
        return -EINVAL;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return 0;
}

static int parse_hex_digits(const char *s, size_t digits, uint32_t *ret) {
    char buf[16];
    if (trimmed(s, buf, sizeof(buf)) < 0)
        return -EINVAL;
    if (buf[0] != '0' || (buf[1] != 'x' && buf[1] != 'X') || strlen(buf + 2) != digits)
        return -EINVAL;
    uint32_t v = 0;
    for (const char *p = buf + 2; *p; p++) {
        int c = tolower((unsigned char)*p);
        if (isdigit(c))
            v = v * 16 + (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v = v * 16 + (uint32_t)(c - 'a' + 10);
        else
            return -EINVAL;
    }
    *ret = v;
    return 0;
}

int pci_parse_id(const char *s, uint16_t *ret) {
    uint32_t v;
    int r = parse_hex_digits(s, 4, &v);
    if (r < 0)
        return r;
    *ret = (uint16_t)v;
    return 0;
}

int pci_parse_class(const char *s, uint32_t *ret) {
    return parse_hex_digits(s, 6, ret);
}

bool pci_class_is_accelerator(uint32_t class_code) {
    switch (class_code >> 8) {
    case 0x0300:
    case 0x0302:
    case 0x0380:
    case 0x1200:
        return true;
    default:
        return false;
    }
}

bool pci_vendor_is_accelerator(uint16_t vendor) {
    return vendor == 0x10de || vendor == 0x1002 || vendor == 0x8086;
}

const char *pci_class_kind(uint32_t class_code) {
    uint32_t cls = class_code >> 8;
    if (pci_class_is_accelerator(class_code))
        return "gpu";
    switch (cls) {
    case 0x0403:
    case 0x0401:
        return "audio";
    case 0x0c03:
        return "usb";
    case 0x0c80:
        return "serial-bus";
    case 0x0680:
        return "switch";
    default:
        return (cls >> 8) == 0x06 ? "bridge" : "other";
    }
}

int pci_parse_link_speed(const char *s, unsigned *ret_mts) {
    char buf[64];
    if (trimmed(s, buf, sizeof(buf)) < 0)
        return -EINVAL;
    if (STREQ(buf, "Unknown") || STREQ(buf, "Unknown speed")) {
        *ret_mts = 0;
        return 0;
    }
    /* "<int>[.<digits>] GT/s[ PCIe]" */
    const char *p = buf;
    if (!isdigit((unsigned char)*p))
        return -EINVAL;
    unsigned long whole = 0;
    while (isdigit((unsigned char)*p)) {
        whole = whole * 10 + (unsigned long)(*p++ - '0');
        if (whole > 1000000)
            return -EINVAL;
    }
    unsigned frac = 0, scale = 100; /* thousandths */
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            return -EINVAL;
        for (; isdigit((unsigned char)*p); p++) {
            frac += (unsigned)(*p - '0') * scale;
            scale /= 10;
        }
    }
    if (!STREQ(p, " GT/s") && !STREQ(p, " GT/s PCIe"))
        return -EINVAL;
    *ret_mts = (unsigned)(whole * 1000 + frac);
    return 0;
}

int pci_parse_link_width(const char *s, unsigned *ret) {
    char buf[16];
    if (trimmed(s, buf, sizeof(buf)) < 0 || !buf[0])
        return -EINVAL;
    unsigned v = 0;
    for (const char *p = buf; *p; p++) {
        if (!isdigit((unsigned char)*p))
            return -EINVAL;
        v = v * 10 + (unsigned)(*p - '0');
        if (v > 255)
            return -EINVAL;
    }
    *ret = v == 255 ? 0 : v;
    return 0;
}

int pci_parse_numa_node(const char *s, int *ret) {
    char buf[16];
    if (trimmed(s, buf, sizeof(buf)) < 0 || !buf[0])
        return -EINVAL;
    if (STREQ(buf, "-1")) {
        *ret = -1;
        return 0;
    }
    int v = 0;
    for (const char *p = buf; *p; p++) {
        if (!isdigit((unsigned char)*p))
            return -EINVAL;
        v = v * 10 + (*p - '0');
        if (v > 65535)
            return -EINVAL;
    }
    *ret = v;
    return 0;
}

int pci_parse_driver_override(const char *s, char **ret) {
    char buf[256];
    if (trimmed(s, buf, sizeof(buf)) < 0)
        return -EINVAL;
    if (!buf[0] || STREQ(buf, "(null)")) {
        *ret = NULL;
        return 0;
    }
    for (const char *p = buf; *p; p++)
        if (isspace((unsigned char)*p) || *p == '/' || !isprint((unsigned char)*p))
            return -EINVAL;
    char *d = strdup(buf);
    if (!d)
        return -ENOMEM;
    *ret = d;
    return 0;
}

int pci_parse_reset_methods(const char *s, char ***ret, size_t *ret_n) {
    char buf[256];
    if (trimmed(s, buf, sizeof(buf)) < 0)
        return -EINVAL;
    char **v = NULL;
    size_t n = 0;
    int r = 0;
    for (char *save = NULL, *tok = strtok_r(buf, " ", &save); tok;
         tok = strtok_r(NULL, " ", &save)) {
        for (const char *p = tok; *p; p++)
            if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_')) {
                r = -EINVAL;
                goto fail;
            }
        char **nv = realloc(v, (n + 1) * sizeof(char *));
        if (!nv) {
            r = -ENOMEM;
            goto fail;
        }
        v = nv;
        if (!(v[n] = strdup(tok))) {
            r = -ENOMEM;
            goto fail;
        }
        n++;
    }
    *ret = v;
    *ret_n = n;
    return 0;
fail:
    strv_free(v, n);
    return r;
}

int pci_parse_bool01(const char *s, bool *ret) {
    char buf[8];
    if (trimmed(s, buf, sizeof(buf)) < 0)
        return -EINVAL;
    if (STREQ(buf, "0") || STREQ(buf, "1")) {
        *ret = buf[0] == '1';
        return 0;
    }
    return -EINVAL;
}

int pci_bdf_from_nvml(const char *busid, char buf[static 13]) {
    char tmp[32];
    if (trimmed(busid, tmp, sizeof(tmp)) < 0)
        return -EINVAL;
    const char *colon = strchr(tmp, ':');
    if (!colon)
        return -EINVAL;
    size_t dom_len = (size_t)(colon - tmp);
    if (dom_len != 4 && dom_len != 8)
        return -EINVAL;
    /* The domain's upper digits must be zero: sysfs writes a 4-digit domain. */
    for (size_t i = 0; i + 4 < dom_len; i++)
        if (tmp[i] != '0')
            return -EINVAL;
    if (strlen(colon + 1) != 7)
        return -EINVAL;
    char out[13];
    memcpy(out, tmp + dom_len - 4, 4);
    memcpy(out + 4, colon, 8);
    out[12] = '\0';
    for (char *p = out; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    if (!pci_bdf_is_valid(out))
        return -EINVAL;
    memcpy(buf, out, 13);
    return 0;
}
