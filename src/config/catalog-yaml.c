/* catalog-yaml.c: the YAML form of the catalog (R8): schema checks with positions. */
#include "catalog-yaml.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#include "config.h"
#include "util/datadir.h"
#include "util/fileio.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "yaml-util.h"

/* The shared YAML context first, so that helper callbacks can reach the loader. */
typedef struct Loader {
    YamlCtx y;
    const PciIds *ids;
} Loader;

#define FAIL_AT(L, node, code, ...) YAML_FAIL_AT(&(L)->y, node, code, __VA_ARGS__)

static int add_pci_id(YamlCtx *y, yaml_node_t *item, void *userdata) {
    Loader *L = (Loader *)y;
    GpuClass *cls = userdata;
    const char *s = NULL;
    int r = yaml_expect_scalar(&L->y, item, "match.pci", &s);
    if (r < 0)
        return r;
    char v[8], d[8];
    const char *colon = strchr(s, ':');
    PciId id;
    if (!colon || colon - s > 6 || strlen(colon + 1) > 6)
        goto bad;
    memcpy(v, s, (size_t)(colon - s));
    v[colon - s] = '\0';
    strcpy(d, colon + 1);
    if (parse_hex16(v, &id.vendor) < 0 || parse_hex16(d, &id.device) < 0)
        goto bad;
    if (cls->n_pci >= CLASS_MAX_PCI_IDS)
        return FAIL_AT(L, item, -E2BIG, "a class may list at most %d PCI ids", CLASS_MAX_PCI_IDS);
    cls->pci[cls->n_pci++] = id;
    return 0;
bad:
    return FAIL_AT(L, item, -EINVAL,
                   "bad PCI id '%s': expected VENDOR:DEVICE in hex, like 10de:2330", s);
}

static int add_nvml_name(YamlCtx *y, yaml_node_t *item, void *userdata) {
    Loader *L = (Loader *)y;
    GpuClass *cls = userdata;
    if (cls->n_nvml_names >= CLASS_MAX_NVML_NAMES)
        return FAIL_AT(L, item, -E2BIG, "a class may list at most %d NVML names",
                       CLASS_MAX_NVML_NAMES);
    char *s = NULL;
    int r = yaml_get_string(&L->y, item, "match.nvml", &s);
    if (r < 0)
        return r;
    cls->nvml_names[cls->n_nvml_names++] = s;
    return 0;
}

static int add_mig_profile(YamlCtx *y, yaml_node_t *item, void *userdata) {
    Loader *L = (Loader *)y;
    GpuClass *cls = userdata;
    if (cls->n_mig_profiles >= _MIG_SHAPE_MAX)
        return FAIL_AT(L, item, -E2BIG, "a card has at most %d MIG profiles", _MIG_SHAPE_MAX);
    char *s = NULL;
    int r = yaml_get_string(&L->y, item, "mig_profiles", &s);
    if (r < 0)
        return r;
    if (mig_profile_memory_gb(s) == 0) {
        r = FAIL_AT(L, item, -EINVAL, "bad MIG profile '%s': expected a name like 1g.10gb", s);
        free(s);
        return r;
    }
    cls->mig_profiles[cls->n_mig_profiles++] = s;
    return 0;
}

static int match_pair(YamlCtx *y, yaml_node_t *k, const char *key, yaml_node_t *v, void *userdata) {
    Loader *L = (Loader *)y;
    GpuClass *cls = userdata;
    if (STREQ(key, "pci"))
        return yaml_for_each_item(&L->y, v, "match.pci", add_pci_id, cls);
    if (STREQ(key, "nvml"))
        return yaml_for_each_item(&L->y, v, "match.nvml", add_nvml_name, cls);
    if (STREQ(key, "apple_memory_gb"))
        return yaml_get_uint(&L->y, v, "match.apple_memory_gb", 1u << 20, &cls->apple_memory_gb);
    return FAIL_AT(L, k, -EINVAL, "unknown key 'match.%s' (known: pci, nvml, apple_memory_gb)",
                   key);
}

static int mig_pair(YamlCtx *y, yaml_node_t *k, const char *key, yaml_node_t *v, void *userdata) {
    Loader *L = (Loader *)y;
    GpuClass *cls = userdata;
    if (STREQ(key, "parent"))
        return yaml_get_string(&L->y, v, "mig.parent", &cls->mig_parent);
    if (STREQ(key, "profile")) {
        int r = yaml_get_string(&L->y, v, "mig.profile", &cls->mig_profile);
        if (r >= 0 && mig_profile_memory_gb(cls->mig_profile) == 0)
            return FAIL_AT(L, v, -EINVAL, "bad MIG profile '%s': expected a name like 1g.10gb",
                           cls->mig_profile);
        return r;
    }
    return FAIL_AT(L, k, -EINVAL, "unknown key 'mig.%s' (known: parent, profile)", key);
}

static int class_pair(YamlCtx *y, yaml_node_t *k, const char *key, yaml_node_t *v, void *userdata) {
    Loader *L = (Loader *)y;
    GpuClass *cls = userdata;
    if (STREQ(key, "name"))
        return yaml_get_string(&L->y, v, key, &cls->name);
    if (STREQ(key, "vendor")) {
        const char *s = NULL;
        int r = yaml_expect_scalar(&L->y, v, key, &s);
        if (r < 0)
            return r;
        cls->vendor = vendor_from_string(s);
        if (cls->vendor < 0)
            return FAIL_AT(L, v, -EINVAL,
                           "unknown vendor '%s' (known: nvidia, amd, intel, apple, cpu)", s);
        return 0;
    }
    if (STREQ(key, "match"))
        return yaml_for_each_pair(&L->y, v, "'match'", match_pair, cls);
    if (STREQ(key, "memory_gb"))
        return yaml_get_uint(&L->y, v, key, 1u << 20, &cls->memory_gb);
    if (STREQ(key, "container_resource"))
        return yaml_get_string(&L->y, v, key, &cls->container_resource);
    if (STREQ(key, "node_selector"))
        return yaml_get_string(&L->y, v, key, &cls->node_selector);
    if (STREQ(key, "vm_device_name")) {
        cls->vm_device_name_source = VM_NAME_CATALOG;
        return yaml_get_string(&L->y, v, key, &cls->vm_device_name);
    }
    if (STREQ(key, "mig_profiles"))
        return yaml_for_each_item(&L->y, v, key, add_mig_profile, cls);
    if (STREQ(key, "mig"))
        return yaml_for_each_pair(&L->y, v, "'mig'", mig_pair, cls);
    if (STREQ(key, "internal_only"))
        return yaml_get_bool(&L->y, v, key, &cls->internal_only);
    if (STREQ(key, "owner_only"))
        return yaml_get_bool(&L->y, v, key, &cls->owner_only);
    if (STREQ(key, "consumer"))
        return yaml_get_bool(&L->y, v, key, &cls->consumer);
    if (STREQ(key, "vgpu") || string_contains_nocase(key, "vgpu"))
        return FAIL_AT(L, k, -EOPNOTSUPP, "class '%s': %s", strempty(cls->name),
                       CATALOG_VGPU_REFUSAL);
    return FAIL_AT(L, k, -EINVAL,
                   "unknown key '%s' (known: name, vendor, match, memory_gb, container_resource, "
                   "node_selector, vm_device_name, mig_profiles, mig, internal_only, owner_only, "
                   "consumer)",
                   key);
}

static int derive_vm_name(Loader *L, GpuClass *cls) {
    if (cls->vendor != VENDOR_NVIDIA || cls->mig_parent || cls->n_pci == 0)
        return 0;
    const char *pci_name = pci_ids_device_name(L->ids, cls->pci[0].vendor, cls->pci[0].device);
    if (cls->vm_device_name) {
        /* Stated in the catalog: the derivation only checks it (R6). */
        if (!pci_name)
            return 0;
        char *derived = vm_device_name_derive(pci_name, cls->pci[0].device);
        if (!derived)
            return error_set(L->y.err, -ENOMEM, "out of memory");
        if (STREQ(derived, cls->vm_device_name))
            free(derived);
        else
            cls->vm_device_name_derived = derived;
        return 0;
    }
    cls->vm_device_name = vm_device_name_derive(pci_name, cls->pci[0].device);
    cls->vm_device_name_source = pci_name ? VM_NAME_PCI_IDS : VM_NAME_RAW_ID;
    return cls->vm_device_name ? 0 : error_set(L->y.err, -ENOMEM, "out of memory");
}

typedef struct ClassMarks {
    yaml_node_t *nodes[CATALOG_MAX_CLASSES];
} ClassMarks;

static int load_classes(Loader *L, yaml_node_t *seq, Catalog *cat, ClassMarks *marks) {
    if (seq->type != YAML_SEQUENCE_NODE)
        return FAIL_AT(L, seq, -EINVAL, "'classes' must be a list of classes");
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
         it++) {
        yaml_node_t *n = yaml_document_get_node(L->y.doc, *it);
        if (cat->n_classes >= CATALOG_MAX_CLASSES)
            return FAIL_AT(L, n, -E2BIG, "too many classes (at most %d)", CATALOG_MAX_CLASSES);
        GpuClass cls = {.vendor = _VENDOR_INVALID};
        int r = yaml_for_each_pair(&L->y, n, "a class", class_pair, &cls);
        if (r >= 0 && !cls.name)
            r = FAIL_AT(L, n, -EINVAL, "missing required field 'name'");
        if (r >= 0 && cls.vendor < 0)
            r = FAIL_AT(L, n, -EINVAL, "class '%s': missing required field 'vendor'", cls.name);
        if (r >= 0)
            r = derive_vm_name(L, &cls);
        if (r >= 0) {
            marks->nodes[cat->n_classes] = n;
            r = catalog_add(cat, &cls, NULL);
            if (r == -EEXIST)
                r = FAIL_AT(L, n, -EEXIST, "duplicate class name '%s'", cls.name);
            else if (r < 0)
                r = error_set(L->y.err, r, "out of memory");
        }
        gpu_class_done(&cls);
        if (r < 0)
            return r;
    }
    return 0;
}

static int top_pair(YamlCtx *y, yaml_node_t *k, const char *key, yaml_node_t *v, void *userdata) {
    Loader *L = (Loader *)y;
    void **args = userdata;
    if (STREQ(key, "classes"))
        return load_classes(L, v, args[0], args[1]);
    if (STREQ(key, "version")) {
        unsigned ver;
        int r = yaml_get_uint(&L->y, v, key, 1000, &ver);
        if (r >= 0 && ver != 1)
            return FAIL_AT(L, v, -EINVAL,
                           "catalog version %u is not supported (this build reads 1)", ver);
        return r;
    }
    return FAIL_AT(L, k, -EINVAL, "unknown top-level key '%s' (known: version, classes)", key);
}

int catalog_parse_yaml(const char *text, size_t len, const char *filename, const PciIds *ids,
                       Catalog **ret, Error *err) {
    const char *file = filename ? filename : "<catalog>";
    if (len > CATALOG_MAX_BYTES)
        return error_set(err, -EFBIG, "%s: catalog is larger than %u bytes", file,
                         CATALOG_MAX_BYTES);
    yaml_document_t doc;
    int r = yaml_load_text(text, len, file, &doc, err);
    if (r < 0)
        return r;

    Loader L = {.y = {.doc = &doc, .file = file, .err = err}, .ids = ids};
    Catalog *cat = catalog_new();
    ClassMarks *marks = calloc(1, sizeof(*marks));
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!cat || !marks)
        r = error_set(err, -ENOMEM, "out of memory");
    else if (!root)
        r = error_set_at(err, -EINVAL, file, 1, 1, "the catalog is empty: expected 'classes:'");
    else {
        void *args[2] = {cat, marks};
        r = yaml_for_each_pair(&L.y, root, "the catalog", top_pair, args);
        if (r >= 0 && cat->n_classes == 0)
            r = FAIL_AT(&L, root, -EINVAL, "the catalog has no classes");
    }
    if (r >= 0) {
        size_t bad = (size_t)-1;
        Error local = {0};
        r = catalog_finalize(cat, &bad, &local);
        if (r < 0) {
            if (bad < cat->n_classes && marks->nodes[bad])
                FAIL_AT(&L, marks->nodes[bad], r, "%s", local.message);
            else
                error_set(err, r, "%s: %s", file, local.message);
        }
    }
    free(marks);
    yaml_document_delete(&doc);
    if (r < 0) {
        catalog_free(cat);
        return r;
    }
    *ret = cat;
    return 0;
}

int catalog_load_file(const char *path, const PciIds *ids, Catalog **ret, Error *err) {
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = read_full_file(path, CATALOG_MAX_BYTES, &text, &len);
    if (r == -EFBIG)
        return error_set(err, r, "%s: catalog is larger than %u bytes", path, CATALOG_MAX_BYTES);
    if (r < 0)
        return error_set(err, r, "cannot read catalog %s: %s", path, strerror(-r));
    return catalog_parse_yaml(text, len, path, ids, ret, err);
}

const char *catalog_default_path(void) {
    const char *env = getenv("EINSORA_CATALOG");
    if (!isempty(env))
        return env;
    /* Found at run time (util/datadir.c): installed, relocated, or the source tree. */
    static char path[PATH_MAX];
    const char *dir = data_dir();
    snprintf(path, sizeof(path), "%s/catalog.yaml", dir ? dir : EINSORA_DATADIR);
    return path;
}
