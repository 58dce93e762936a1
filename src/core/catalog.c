/* catalog.c: GPU classes (R8): validation, MIG slice classes, and device matching. */
#include "catalog.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"
#include "util/strutil.h"

static const char *const vendor_names[_VENDOR_MAX] = {
        [VENDOR_NVIDIA] = "nvidia", [VENDOR_AMD] = "amd", [VENDOR_INTEL] = "intel",
        [VENDOR_APPLE] = "apple",   [VENDOR_CPU] = "cpu",
};

const char *vendor_to_string(Vendor v) {
    return (int)v >= 0 && v < _VENDOR_MAX ? vendor_names[v] : "invalid";
}

Vendor vendor_from_string(const char *s) {
    for (int v = 0; s && v < _VENDOR_MAX; v++)
        if (strcmp(vendor_names[v], s) == 0)
            return (Vendor)v;
    return _VENDOR_INVALID;
}

uint16_t vendor_pci_id(Vendor v) {
    switch (v) {
    case VENDOR_NVIDIA:
        return 0x10de;
    case VENDOR_AMD:
        return 0x1002;
    case VENDOR_INTEL:
        return 0x8086;
    default:
        return 0;
    }
}

Catalog *catalog_new(void) {
    return calloc(1, sizeof(Catalog));
}

void gpu_class_done(GpuClass *cls) {
    if (!cls)
        return;
    free(cls->name);
    for (size_t i = 0; i < cls->n_nvml_names; i++)
        free(cls->nvml_names[i]);
    free(cls->container_resource);
    free(cls->node_selector);
    free(cls->vm_device_name);
    free(cls->vm_device_name_derived);
    for (size_t i = 0; i < cls->n_mig_profiles; i++)
        free(cls->mig_profiles[i]);
    free(cls->mig_parent);
    free(cls->mig_profile);
    *cls = (GpuClass){0};
}

void catalog_free(Catalog *c) {
    if (!c)
        return;
    for (size_t i = 0; i < c->n_classes; i++)
        gpu_class_done(&c->classes[i]);
    free(c->classes);
    free(c);
}

int catalog_find_index(const Catalog *c, const char *name) {
    for (size_t i = 0; name && i < c->n_classes; i++)
        if (strcmp(c->classes[i].name, name) == 0)
            return (int)i;
    return -1;
}

const GpuClass *catalog_find(const Catalog *c, const char *name) {
    int i = catalog_find_index(c, name);
    return i < 0 ? NULL : &c->classes[i];
}

bool gpu_class_is_card(const GpuClass *c) {
    return !c->mig_parent && c->vendor != VENDOR_APPLE && c->vendor != VENDOR_CPU;
}

int catalog_add(Catalog *c, GpuClass *cls, Error *err) {
    if (!cls->name)
        return error_set(err, -EINVAL, "a class needs a name");
    if (catalog_find(c, cls->name))
        return error_set(err, -EEXIST, "class '%s' is defined twice", cls->name);
    if (c->n_classes == c->cap_classes) {
        size_t cap = c->cap_classes ? c->cap_classes * 2 : 32;
        GpuClass *n = realloc(c->classes, cap * sizeof(*n));
        if (!n)
            return error_set(err, -ENOMEM, "out of memory");
        c->classes = n;
        c->cap_classes = cap;
    }
    c->classes[c->n_classes++] = *cls;
    *cls = (GpuClass){0};
    return 0;
}

static bool class_name_is_valid(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 63 || !isalnum((unsigned char)s[0]))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!(islower(ch) || isdigit(ch) || ch == '-' || ch == '.'))
            return false;
    }
    return true;
}

static bool label_char(unsigned char ch) {
    return isalnum(ch) || ch == '-' || ch == '_' || ch == '.';
}

bool resource_name_is_valid(const char *s) {
    if (isempty(s) || strlen(s) > 253)
        return false;
    const char *slash = strchr(s, '/');
    if (!slash || slash == s || !slash[1] || strchr(slash + 1, '/'))
        return false;
    for (const char *p = s; *p; p++)
        if (p != slash && !label_char((unsigned char)*p))
            return false;
    return true;
}

bool node_selector_is_valid(const char *s) {
    if (isempty(s) || strlen(s) > 316)
        return false;
    const char *eq = strchr(s, '=');
    if (!eq || eq == s || strchr(eq + 1, '='))
        return false;
    for (const char *p = s; p < eq; p++)
        if (!label_char((unsigned char)*p) && *p != '/')
            return false;
    for (const char *p = eq + 1; *p; p++)
        if (!label_char((unsigned char)*p))
            return false;
    return true;
}

static int validate_mig_profiles(const GpuClass *cls, Error *err) {
    if (cls->n_mig_profiles == 0)
        return 0;
    if (cls->vendor != VENDOR_NVIDIA)
        return error_set(err, -EINVAL,
                         "class '%s': MIG profiles are listed, but only NVIDIA cards have MIG",
                         cls->name);
    if (cls->consumer)
        return error_set(err, -EINVAL,
                         "class '%s': MIG profiles are listed, but consumer cards have no MIG (R9)",
                         cls->name);
    const MigCardRow *row = mig_card_row_for_memory(cls->memory_gb);
    for (size_t i = 0; i < cls->n_mig_profiles; i++) {
        MigShape shape = mig_profile_shape(cls->memory_gb, cls->mig_profiles[i]);
        if (shape == _MIG_SHAPE_INVALID && row)
            return error_set(err, -EINVAL,
                             "class '%s': MIG profile '%s' does not fit a %u GB card; its profiles "
                             "are %s, %s, %s, %s, %s and %s",
                             cls->name, cls->mig_profiles[i], cls->memory_gb, row->profiles[0],
                             row->profiles[1], row->profiles[2], row->profiles[3], row->profiles[4],
                             row->profiles[5]);
        /* A card outside the SPEC's table (R2c: "and similar, as NVML reports"). */
        if (shape == _MIG_SHAPE_INVALID)
            return error_set(err, -EINVAL,
                             "class '%s': MIG profile '%s' does not fit a %u GB card: a profile is "
                             "Ng.Mgb, N compute slices (1, 2, 3, 4 or 7) and M the memory of the "
                             "slots they take (an eighth of the card each: 1, or 2 for a 1g with "
                             "double memory; 2 for a 2g, 4 for a 3g or 4g, all 8 for a 7g)",
                             cls->name, cls->mig_profiles[i], cls->memory_gb);
        for (size_t j = 0; j < i; j++) {
            if (strcmp(cls->mig_profiles[i], cls->mig_profiles[j]) == 0)
                return error_set(err, -EINVAL, "class '%s': MIG profile '%s' is listed twice",
                                 cls->name, cls->mig_profiles[i]);
            if (mig_profile_shape(cls->memory_gb, cls->mig_profiles[j]) == shape)
                return error_set(err, -EINVAL,
                                 "class '%s': MIG profiles '%s' and '%s' are one shape of slice "
                                 "on a %u GB card: list one",
                                 cls->name, cls->mig_profiles[j], cls->mig_profiles[i],
                                 cls->memory_gb);
        }
    }
    return 0;
}

int gpu_class_validate(const GpuClass *cls, Error *err) {
    if (isempty(cls->name))
        return error_set(err, -EINVAL, "a class needs a name");
    if (string_contains_nocase(cls->name, "vgpu"))
        return error_set(err, -EOPNOTSUPP, "class '%s': %s", cls->name, CATALOG_VGPU_REFUSAL);
    if (!class_name_is_valid(cls->name))
        return error_set(err, -EINVAL,
                         "class name '%s' is not valid: use 1-63 lower-case letters, digits, '-' "
                         "and '.', starting with a letter or digit",
                         cls->name);
    if ((int)cls->vendor < 0 || cls->vendor >= _VENDOR_MAX)
        return error_set(err, -EINVAL, "class '%s': vendor is missing or unknown", cls->name);
    if (cls->container_resource && !resource_name_is_valid(cls->container_resource))
        return error_set(err, -EINVAL,
                         "class '%s': container_resource '%s' is not a resource name like "
                         "nvidia.com/gpu",
                         cls->name, cls->container_resource);
    if (cls->node_selector && !node_selector_is_valid(cls->node_selector))
        return error_set(err, -EINVAL,
                         "class '%s': node_selector '%s' is not KEY=VALUE like "
                         "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3",
                         cls->name, cls->node_selector);
    if (cls->vm_device_name && !resource_name_is_valid(cls->vm_device_name))
        return error_set(err, -EINVAL, "class '%s': vm_device_name '%s' is not a resource name",
                         cls->name, cls->vm_device_name);
    bool slice = cls->mig_parent || cls->mig_profile;

    switch (cls->vendor) {
    case VENDOR_CPU:
        if (cls->n_pci || cls->n_nvml_names || cls->apple_memory_gb || cls->n_mig_profiles || slice)
            return error_set(err, -EINVAL,
                             "class '%s': a cpu class matches every machine and takes no match "
                             "rule or MIG profiles",
                             cls->name);
        return 0;
    case VENDOR_APPLE:
        if (cls->apple_memory_gb == 0)
            return error_set(err, -EINVAL,
                             "class '%s': an apple class needs match.apple_memory_gb (its unified "
                             "memory tier)",
                             cls->name);
        if (cls->n_pci || cls->n_nvml_names || cls->n_mig_profiles || slice)
            return error_set(err, -EINVAL,
                             "class '%s': apple classes match by unified memory only; Metal has no "
                             "partitioning (R10)",
                             cls->name);
        if (!cls->owner_only)
            return error_set(
                    err, -EINVAL,
                    "class '%s': apple classes are offered to the machine's owner only; set "
                    "owner_only: true (R10)",
                    cls->name);
        return 0;
    case VENDOR_NVIDIA:
    case VENDOR_AMD:
    case VENDOR_INTEL:
        break;
    default:
        return error_set(err, -EINVAL, "class '%s': vendor is missing or unknown", cls->name);
    }

    if (cls->apple_memory_gb)
        return error_set(err, -EINVAL,
                         "class '%s': match.apple_memory_gb is for apple classes only", cls->name);
    if (slice) {
        if (!cls->mig_parent || !cls->mig_profile)
            return error_set(err, -EINVAL,
                             "class '%s': a MIG slice class needs mig.parent and mig.profile",
                             cls->name);
        if (cls->vendor != VENDOR_NVIDIA)
            return error_set(err, -EINVAL, "class '%s': only NVIDIA cards have MIG slices",
                             cls->name);
        if (cls->n_mig_profiles)
            return error_set(err, -EINVAL,
                             "class '%s': a MIG slice cannot itself list MIG profiles", cls->name);
    } else {
        if (cls->n_pci == 0 && cls->n_nvml_names == 0)
            return error_set(err, -EINVAL,
                             "class '%s': missing required field 'match' (pci ids or nvml names)",
                             cls->name);
        if (cls->memory_gb == 0)
            return error_set(err, -EINVAL, "class '%s': missing required field 'memory_gb'",
                             cls->name);
    }
    if (!cls->container_resource)
        return error_set(err, -EINVAL, "class '%s': missing required field 'container_resource'",
                         cls->name);
    if (!cls->node_selector)
        return error_set(err, -EINVAL, "class '%s': missing required field 'node_selector'",
                         cls->name);
    for (size_t i = 0; i < cls->n_pci; i++)
        if (cls->pci[i].vendor != vendor_pci_id(cls->vendor))
            return error_set(err, -EINVAL,
                             "class '%s': PCI id %04x:%04x does not belong to vendor %s (%04x)",
                             cls->name, cls->pci[i].vendor, cls->pci[i].device,
                             vendor_to_string(cls->vendor), vendor_pci_id(cls->vendor));
    return validate_mig_profiles(cls, err);
}

static int add_mig_slice_classes(Catalog *c, size_t card, Error *err) {
    size_t n_profiles = c->classes[card].n_mig_profiles;
    for (size_t p = 0; p < n_profiles; p++) {
        /* Re-read the card each time: catalog_add may move the array. */
        const GpuClass *parent = &c->classes[card];
        const char *profile = parent->mig_profiles[p];
        _cleanup_free_ char *name = strprintf("%s-mig-%s", parent->name, profile);
        if (!name)
            return error_set(err, -ENOMEM, "out of memory");
        const GpuClass *have = catalog_find(c, name);
        if (have && have->mig_parent && STREQ(have->mig_parent, parent->name) &&
            have->mig_profile && STREQ(have->mig_profile, profile))
            continue; /* the file lists this slice class itself */
        if (have)
            return error_set(err, -EINVAL,
                             "class '%s' takes the name of class '%s''s MIG %s slices, and is "
                             "not that slice (mig: {parent: %s, profile: %s})",
                             name, parent->name, profile, parent->name, profile);
        GpuClass s = {
                .name = TAKE_PTR(name),
                .vendor = VENDOR_NVIDIA,
                .memory_gb = mig_profile_memory_gb(profile),
                .container_resource = strprintf("nvidia.com/mig-%s", profile),
                .node_selector = strdup_or_null(parent->node_selector),
                .internal_only = parent->internal_only,
                .owner_only = parent->owner_only,
                .mig_parent = strdup(parent->name),
                .mig_profile = strdup(profile),
                .derived = true,
        };
        if (!s.container_resource || !s.node_selector || !s.mig_parent || !s.mig_profile) {
            gpu_class_done(&s);
            return error_set(err, -ENOMEM, "out of memory");
        }
        int r = catalog_add(c, &s, err);
        if (r < 0) {
            gpu_class_done(&s);
            return r;
        }
    }
    return 0;
}

/* Class j against the classes before it: a device matches one class, by the first rule that
 * hits, so a PCI id, an NVML name or an Apple tier listed twice would leave the later class
 * matching nothing without a word (R8). And the names every view already gives a meaning. */
static int check_class_unambiguous(const Catalog *c, size_t j, Error *err) {
    const GpuClass *b = &c->classes[j];
    if (STREQ(b->name, "unclassified"))
        return error_set(err, -EINVAL,
                         "class 'unclassified': the name is what every view shows for a device "
                         "no class matches (R8); choose another");
    if (STREQ(b->name, "cpu") != (b->vendor == VENDOR_CPU))
        return error_set(err, -EINVAL,
                         "class '%s': the cpu class is named cpu and has vendor cpu, every "
                         "machine's CPU (R11)",
                         b->name);
    for (size_t i = 0; i < j; i++) {
        const GpuClass *a = &c->classes[i];
        for (size_t k = 0; k < b->n_pci; k++)
            for (size_t m = 0; m < a->n_pci; m++)
                if (a->pci[m].vendor == b->pci[k].vendor && a->pci[m].device == b->pci[k].device)
                    return error_set(err, -EINVAL,
                                     "class '%s': PCI id %04x:%04x is class '%s''s already: a "
                                     "device matches one class (R8)",
                                     b->name, b->pci[k].vendor, b->pci[k].device, a->name);
        for (size_t k = 0; k < b->n_nvml_names; k++)
            for (size_t m = 0; m < a->n_nvml_names; m++)
                if (STREQ(a->nvml_names[m], b->nvml_names[k]))
                    return error_set(err, -EINVAL,
                                     "class '%s': NVML name '%s' is class '%s''s already: a device "
                                     "matches one class (R8)",
                                     b->name, b->nvml_names[k], a->name);
        if (a->vendor == VENDOR_APPLE && b->vendor == VENDOR_APPLE &&
            a->apple_memory_gb == b->apple_memory_gb)
            return error_set(err, -EINVAL,
                             "class '%s': Apple tier %u GB is class '%s''s already: a Mac matches "
                             "one class (R10)",
                             b->name, b->apple_memory_gb, a->name);
    }
    return 0;
}

/* R11: every machine offers cpu; a catalog that leaves the class out still counts it. */
static int add_cpu_class_if_missing(Catalog *c, Error *err) {
    if (catalog_find(c, "cpu"))
        return 0;
    GpuClass cpu = {.name = strdup("cpu"),
                    .vendor = VENDOR_CPU,
                    .mig_parent_index = -1,
                    .mig_shape = _MIG_SHAPE_INVALID,
                    .derived = true};
    if (!cpu.name)
        return error_set(err, -ENOMEM, "out of memory");
    int r = catalog_add(c, &cpu, err);
    if (r < 0)
        gpu_class_done(&cpu);
    return r;
}

int catalog_finalize(Catalog *c, size_t *ret_bad_index, Error *err) {
    size_t n_file = c->n_classes;
    for (size_t i = 0; i < n_file; i++) {
        int r = gpu_class_validate(&c->classes[i], err);
        if (r >= 0)
            r = check_class_unambiguous(c, i, err);
        if (r < 0) {
            if (ret_bad_index)
                *ret_bad_index = i;
            return r;
        }
        c->classes[i].mig_parent_index = -1;
        c->classes[i].mig_shape = _MIG_SHAPE_INVALID;
    }
    for (size_t i = 0; i < n_file; i++) {
        GpuClass *cls = &c->classes[i];
        if (!cls->mig_parent)
            continue;
        int pi = catalog_find_index(c, cls->mig_parent);
        const GpuClass *parent = pi < 0 ? NULL : &c->classes[pi];
        bool listed = false;
        for (size_t k = 0; parent && k < parent->n_mig_profiles; k++)
            listed = listed || strcmp(parent->mig_profiles[k], cls->mig_profile) == 0;
        if (!parent || parent->mig_parent || !listed) {
            if (ret_bad_index)
                *ret_bad_index = i;
            return error_set(
                    err, -EINVAL,
                    "class '%s': mig.parent '%s' is not a card class that lists MIG profile "
                    "'%s'",
                    cls->name, cls->mig_parent, cls->mig_profile);
        }
        cls->mig_parent_index = pi;
        cls->mig_shape = mig_profile_shape(parent->memory_gb, cls->mig_profile);
        if (cls->memory_gb == 0)
            cls->memory_gb = mig_profile_memory_gb(cls->mig_profile);
        free(cls->vm_device_name); /* a MIG slice is never passed through */
        cls->vm_device_name = NULL;
        cls->vm_device_name_source = VM_NAME_NONE;
    }
    for (size_t i = 0; i < n_file; i++) {
        if (c->classes[i].n_mig_profiles == 0)
            continue;
        int r = add_mig_slice_classes(c, i, err);
        if (r < 0) {
            if (ret_bad_index)
                *ret_bad_index = i;
            return r;
        }
    }
    size_t n_slices_end = c->n_classes;
    int r = add_cpu_class_if_missing(c, err);
    if (r < 0)
        return r;
    for (size_t i = n_file; i < n_slices_end; i++) {
        GpuClass *cls = &c->classes[i];
        cls->mig_parent_index = catalog_find_index(c, cls->mig_parent);
        cls->mig_shape =
                mig_profile_shape(c->classes[cls->mig_parent_index].memory_gb, cls->mig_profile);
    }
    if (ret_bad_index)
        *ret_bad_index = (size_t)-1;
    return 0;
}

const GpuClass *catalog_match_pci(const Catalog *c, uint16_t vendor, uint16_t device) {
    for (size_t i = 0; i < c->n_classes; i++) {
        const GpuClass *cls = &c->classes[i];
        for (size_t k = 0; k < cls->n_pci; k++)
            if (cls->pci[k].vendor == vendor && cls->pci[k].device == device)
                return cls;
    }
    return NULL;
}

const GpuClass *catalog_match_nvml(const Catalog *c, const char *nvml_name) {
    for (size_t i = 0; nvml_name && i < c->n_classes; i++) {
        const GpuClass *cls = &c->classes[i];
        for (size_t k = 0; k < cls->n_nvml_names; k++)
            if (strcmp(cls->nvml_names[k], nvml_name) == 0)
                return cls;
    }
    return NULL;
}

const GpuClass *catalog_match_apple(const Catalog *c, unsigned unified_memory_gb) {
    const GpuClass *best = NULL;
    for (size_t i = 0; i < c->n_classes; i++) {
        const GpuClass *cls = &c->classes[i];
        if (cls->vendor != VENDOR_APPLE || cls->apple_memory_gb > unified_memory_gb)
            continue;
        if (!best || cls->apple_memory_gb > best->apple_memory_gb)
            best = cls;
    }
    return best;
}

#define GIB_BYTES ((uint64_t)1 << 30)

uint64_t apple_default_wired_limit(uint64_t memsize_bytes) {
    if (memsize_bytes <= 36 * GIB_BYTES)
        return memsize_bytes / 3 * 2;
    return memsize_bytes / 4 * 3;
}

uint64_t apple_default_headroom(uint64_t memsize_bytes) {
    return MIN((uint64_t)APPLE_DEFAULT_HEADROOM_GB * GIB_BYTES, memsize_bytes / 4);
}

unsigned apple_default_usable_gb(unsigned unified_gb) {
    uint64_t mem = (uint64_t)unified_gb * GIB_BYTES, limit = apple_default_wired_limit(mem),
             headroom = apple_default_headroom(mem);
    return (unsigned)((limit > headroom ? limit - headroom : 0) / GIB_BYTES);
}

const GpuClass *catalog_find_mig_slice(const Catalog *c, int card_index, const char *profile) {
    for (size_t i = 0; profile && i < c->n_classes; i++) {
        const GpuClass *cls = &c->classes[i];
        if (cls->mig_parent_index == card_index && cls->mig_profile &&
            strcmp(cls->mig_profile, profile) == 0)
            return cls;
    }
    return NULL;
}

char *vm_device_name_derive(const char *pci_name, uint16_t device_id) {
    StrBuf b = {0};
    strbuf_puts(&b, "nvidia.com/");
    if (!pci_name) {
        strbuf_printf(&b, "%04x", device_id); /* as sysfs writes the id, and the plugin keeps it */
    } else {
        for (const char *p = pci_name; *p; p++) {
            unsigned char ch = (unsigned char)*p;
            char out;
            if (ch == '/' || ch == '.' || isspace(ch))
                out = '_';
            else if (isalnum(ch) || ch == '_')
                out = (char)toupper(ch);
            else
                continue;
            strbuf_append(&b, &out, 1);
        }
    }
    if (!strbuf_cstr(&b)) {
        strbuf_done(&b);
        return NULL;
    }
    return b.data;
}
