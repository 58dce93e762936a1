/* pciids.c: a compact, sorted index of pci.ids vendor and device names. */
#include "pciids.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/fileio.h"
#include "util/macro.h"

typedef struct PciIdsEntry {
    uint32_t key; /* vendor << 16 | device; device entries only */
    char *name;
} PciIdsEntry;

typedef struct PciIdsVendor {
    uint16_t vendor;
    char *name;
} PciIdsVendor;

struct PciIds {
    PciIdsEntry *devices;
    size_t n_devices, cap_devices;
    PciIdsVendor *vendors;
    size_t n_vendors, cap_vendors;
};

void pci_ids_free(PciIds *db) {
    if (!db)
        return;
    for (size_t i = 0; i < db->n_devices; i++)
        free(db->devices[i].name);
    for (size_t i = 0; i < db->n_vendors; i++)
        free(db->vendors[i].name);
    free(db->devices);
    free(db->vendors);
    free(db);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(PciIds *, pci_ids_free)

static int hex4(const char *p, uint16_t *ret) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (!isxdigit(ch))
            return -EINVAL;
        v = v * 16 + (unsigned)(isdigit(ch) ? ch - '0' : tolower(ch) - 'a' + 10);
    }
    *ret = (uint16_t)v;
    return 0;
}

/* "XXXX  Name": four hex digits, at least one space, then the name. */
static int split_id_line(const char *line, size_t len, uint16_t *ret_id, char **ret_name) {
    if (len < 6 || hex4(line, ret_id) < 0 || (line[4] != ' ' && line[4] != '\t'))
        return -EINVAL;
    size_t s = 4;
    while (s < len && (line[s] == ' ' || line[s] == '\t'))
        s++;
    size_t e = len;
    while (e > s && isspace((unsigned char)line[e - 1]))
        e--;
    if (e == s)
        return -EINVAL;
    char *name = strndup(line + s, e - s);
    if (!name)
        return -ENOMEM;
    *ret_name = name;
    return 0;
}

static int cmp_device(const void *a, const void *b) {
    uint32_t x = ((const PciIdsEntry *)a)->key, y = ((const PciIdsEntry *)b)->key;
    return x < y ? -1 : x > y;
}

static int cmp_vendor(const void *a, const void *b) {
    uint16_t x = ((const PciIdsVendor *)a)->vendor, y = ((const PciIdsVendor *)b)->vendor;
    return x < y ? -1 : x > y;
}

#define GROW(arr, n, cap)                                                                          \
    ({                                                                                             \
        int _r = 0;                                                                                \
        if ((n) == (cap)) {                                                                        \
            size_t _c = (cap) ? (cap)*2 : 1024;                                                    \
            void *_p = realloc((arr), _c * sizeof(*(arr)));                                        \
            if (_p) {                                                                              \
                (arr) = _p;                                                                        \
                (cap) = _c;                                                                        \
            } else                                                                                 \
                _r = -ENOMEM;                                                                      \
        }                                                                                          \
        _r;                                                                                        \
    })

int pci_ids_parse(const char *text, size_t len, PciIds **ret, Error *err) {
    _cleanup_(pci_ids_freep) PciIds *db = calloc(1, sizeof(*db));
    if (!db)
        return error_set(err, -ENOMEM, "out of memory");
    int vendor = -1; /* current vendor section, -1 outside (e.g. in the class list "C xx") */
    size_t pos = 0;
    while (pos < len) {
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - line) : len - pos;
        pos += n + (nl ? 1 : 0);
        if (n == 0 || line[0] == '#')
            continue;
        uint16_t id;
        char *name = NULL;
        if (line[0] != '\t') {
            /* A vendor line, or the start of the class section ("C 03  Display ..."). */
            if (split_id_line(line, n, &id, &name) < 0) {
                vendor = -1;
                continue;
            }
            if (GROW(db->vendors, db->n_vendors, db->cap_vendors) < 0) {
                free(name);
                return error_set(err, -ENOMEM, "out of memory");
            }
            db->vendors[db->n_vendors++] = (PciIdsVendor){id, name};
            vendor = id;
        } else if (vendor >= 0 && n > 1 && line[1] != '\t') {
            if (split_id_line(line + 1, n - 1, &id, &name) < 0)
                continue;
            if (GROW(db->devices, db->n_devices, db->cap_devices) < 0) {
                free(name);
                return error_set(err, -ENOMEM, "out of memory");
            }
            db->devices[db->n_devices++] = (PciIdsEntry){((uint32_t)vendor << 16) | id, name};
        }
    }
    if (db->n_devices)
        qsort(db->devices, db->n_devices, sizeof(*db->devices), cmp_device);
    if (db->n_vendors)
        qsort(db->vendors, db->n_vendors, sizeof(*db->vendors), cmp_vendor);
    *ret = TAKE_PTR(db);
    return 0;
}

int pci_ids_load(const char *path, PciIds **ret, Error *err) {
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = read_full_file(path, 64u << 20, &text, &len);
    if (r < 0)
        return error_set(err, r, "cannot read pci.ids database %s: %s", path, strerror(-r));
    return pci_ids_parse(text, len, ret, err);
}

const char *pci_ids_device_name(const PciIds *db, uint16_t vendor, uint16_t device) {
    if (!db || db->n_devices == 0)
        return NULL;
    PciIdsEntry key = {((uint32_t)vendor << 16) | device, NULL};
    const PciIdsEntry *e = bsearch(&key, db->devices, db->n_devices, sizeof(key), cmp_device);
    return e ? e->name : NULL;
}

const char *pci_ids_vendor_name(const PciIds *db, uint16_t vendor) {
    if (!db || db->n_vendors == 0)
        return NULL;
    PciIdsVendor key = {vendor, NULL};
    const PciIdsVendor *e = bsearch(&key, db->vendors, db->n_vendors, sizeof(key), cmp_vendor);
    return e ? e->name : NULL;
}

size_t pci_ids_count(const PciIds *db) {
    return db ? db->n_devices : 0;
}
