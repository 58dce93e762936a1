/* inventory-yaml.c: the YAML inventory format (sites, trust, nodes, devices).
 *
 *   version: 1
 *   sites:
 *     - name: dc1
 *       kind: datacenter            # solo | lab | datacenter
 *       trusted: [staff, carol]     # trusted tenants of the site (optional)
 *   nodes:
 *     - name: gpu-a
 *       site: dc1
 *       owner: ops                  # the machine's owner; a datacenter's operator
 *       platform: linux             # linux (default) | macos
 *       labels:                     # datacenter GPU nodes need the mode label (R3)
 *         nvidia.com/gpu.workload.config: container   # or vm-passthrough
 *       kata: true                  # can run Kata containers (optional)
 *       mig_in_kata: false          # MIG-backed vGPU for Kata (R2c, optional)
 *       cordoned: false
 *       cpu_cores: 64
 *       time_slice_replicas: 4
 *       devices:
 *         - class: nvidia-h100-80gb # a card class of the catalog; omit: unclassified (R8)
 *           count: 8                # N identical devices (default 1)
 *           binding: host           # solo/lab only: host | vfio (R7)
 *           mig: false              # MIG mode on
 *           reset_verified: true    # consumer cards: passed the reset check (R9)
 *           address: 0000:17:00.0
 *     - name: mac-1
 *       site: lab
 *       owner: amy
 *       platform: macos
 *       apple_unified_memory_gb: 64 # picks the apple class (R10)
 *       apple_usable_memory_gb: 48  # the agent's report: wired limit minus headroom
 *
 * Unknown keys are errors, so a typo never silently changes a plan. */
#include "inventory-yaml.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/fileio.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "yaml-util.h"

#define MAX_SITES 1024
#define MAX_NODES 100000

static int strdup_into(YamlCtx *y, yaml_node_t *v, const char *key, const char **ret) {
    char *s = NULL;
    int r = yaml_get_string(y, v, key, &s);
    if (r >= 0)
        *ret = s;
    return r;
}

static int add_trusted(YamlCtx *y, yaml_node_t *item, void *userdata) {
    InventorySite *site = userdata;
    char **nt = realloc(site->trusted, (site->n_trusted + 1) * sizeof(char *));
    if (!nt)
        return error_set(y->err, -ENOMEM, "out of memory");
    site->trusted = nt;
    site->trusted[site->n_trusted] = NULL;
    int r = yaml_get_string(y, item, "trusted", &site->trusted[site->n_trusted]);
    if (r >= 0)
        site->n_trusted++;
    return r;
}

static int site_pair(YamlCtx *y, yaml_node_t *k, const char *key, yaml_node_t *v, void *userdata) {
    InventorySite *site = userdata;
    if (STREQ(key, "name"))
        return yaml_get_string(y, v, key, &site->name);
    if (STREQ(key, "kind")) {
        const char *s;
        int r = yaml_expect_scalar(y, v, key, &s);
        if (r < 0)
            return r;
        site->kind = site_kind_from_string(s);
        if (site->kind < 0)
            return YAML_FAIL_AT(y, v, -EINVAL,
                                "unknown site kind '%s' (known: solo, lab, datacenter)", s);
        return 0;
    }
    if (STREQ(key, "trusted"))
        return yaml_for_each_item(y, v, key, add_trusted, site);
    return YAML_FAIL_AT(y, k, -EINVAL, "unknown key '%s' in a site (known: name, kind, trusted)",
                        key);
}

typedef struct DevCtx {
    DeviceSpec d;
    unsigned count;
} DevCtx;

static int device_pair(YamlCtx *y, yaml_node_t *k, const char *key, yaml_node_t *v,
                       void *userdata) {
    DevCtx *dc = userdata;
    if (STREQ(key, "class"))
        return strdup_into(y, v, key, &dc->d.class_name);
    if (STREQ(key, "address"))
        return strdup_into(y, v, key, &dc->d.address);
    if (STREQ(key, "count"))
        return yaml_get_uint(y, v, key, SCHED_NODE_MAX_DEVICES, &dc->count);
    if (STREQ(key, "memory_gb"))
        return yaml_get_uint(y, v, key, 1u << 20, &dc->d.memory_gb);
    if (STREQ(key, "mig"))
        return yaml_get_bool(y, v, key, &dc->d.mig_enabled);
    if (STREQ(key, "reset_verified"))
        return yaml_get_bool(y, v, key, &dc->d.reset_verified);
    if (STREQ(key, "binding")) {
        const char *s;
        int r = yaml_expect_scalar(y, v, key, &s);
        if (r < 0)
            return r;
        dc->d.binding = binding_from_string(s);
        if (dc->d.binding < 0)
            return YAML_FAIL_AT(y, v, -EINVAL, "unknown binding '%s' (known: host, vfio)", s);
        return 0;
    }
    return YAML_FAIL_AT(
            y, k, -EINVAL,
            "unknown key '%s' in a device (known: class, count, address, memory_gb, binding, mig, "
            "reset_verified)",
            key);
}

static int add_device(YamlCtx *y, yaml_node_t *item, void *userdata) {
    NodeSpec *spec = userdata;
    DevCtx dc = {.count = 1};
    int r = yaml_for_each_pair(y, item, "a device", device_pair, &dc);
    if (r >= 0 && spec->n_devices + dc.count > SCHED_NODE_MAX_DEVICES)
        r = YAML_FAIL_AT(y, item, -E2BIG, "a node has at most %d devices", SCHED_NODE_MAX_DEVICES);
    if (r < 0) {
        free((char *)dc.d.class_name);
        free((char *)dc.d.address);
        return r;
    }
    DeviceSpec *devs = (DeviceSpec *)spec->devices;
    for (unsigned i = 0; i < dc.count; i++) {
        devs[spec->n_devices] = dc.d;
        /* Each copy owns its strings. */
        devs[spec->n_devices].class_name = i ? strdup_or_null(dc.d.class_name) : dc.d.class_name;
        devs[spec->n_devices].address = i ? NULL : dc.d.address;
        spec->n_devices++;
        if (i && dc.d.class_name && !devs[spec->n_devices - 1].class_name)
            return error_set(y->err, -ENOMEM, "out of memory");
    }
    return 0;
}

static int label_pair(YamlCtx *y, yaml_node_t *k, const char *key, yaml_node_t *v, void *userdata) {
    NodeSpec *spec = userdata;
    if (spec->n_labels >= SCHED_MAX_LABELS)
        return YAML_FAIL_AT(y, k, -E2BIG, "a node has at most %d labels", SCHED_MAX_LABELS);
    SchedLabel *labels = (SchedLabel *)spec->labels;
    char *kk = strdup(key), *vv = NULL;
    if (!kk)
        return error_set(y->err, -ENOMEM, "out of memory");
    int r = yaml_get_string(y, v, key, &vv);
    if (r < 0) {
        free(kk);
        return r;
    }
    labels[spec->n_labels++] = (SchedLabel){kk, vv};
    return 0;
}

static int node_pair(YamlCtx *y, yaml_node_t *k, const char *key, yaml_node_t *v, void *userdata) {
    NodeSpec *spec = userdata;
    if (STREQ(key, "name"))
        return strdup_into(y, v, key, &spec->name);
    if (STREQ(key, "site"))
        return strdup_into(y, v, key, &spec->site);
    if (STREQ(key, "owner"))
        return strdup_into(y, v, key, &spec->owner);
    if (STREQ(key, "platform")) {
        const char *s;
        int r = yaml_expect_scalar(y, v, key, &s);
        if (r < 0)
            return r;
        spec->platform = platform_from_string(s);
        if (spec->platform < 0)
            return YAML_FAIL_AT(y, v, -EINVAL, "unknown platform '%s' (known: linux, macos)", s);
        return 0;
    }
    if (STREQ(key, "labels"))
        return yaml_for_each_pair(y, v, "'labels'", label_pair, spec);
    if (STREQ(key, "kata"))
        return yaml_get_bool(y, v, key, &spec->kata);
    if (STREQ(key, "mig_in_kata"))
        return yaml_get_bool(y, v, key, &spec->mig_in_kata);
    if (STREQ(key, "cordoned"))
        return yaml_get_bool(y, v, key, &spec->cordoned);
    if (STREQ(key, "cpu_cores"))
        return yaml_get_uint0(y, v, key, 1u << 20, &spec->cpu_cores);
    if (STREQ(key, "time_slice_replicas"))
        return yaml_get_uint(y, v, key, 64, &spec->time_slice_replicas);
    if (STREQ(key, "apple_unified_memory_gb"))
        return yaml_get_uint(y, v, key, 1u << 20, &spec->apple_unified_memory_gb);
    if (STREQ(key, "apple_usable_memory_gb")) {
        spec->apple_usable_known = true; /* 0: the headroom leaves nothing to offer (R10) */
        return yaml_get_uint0(y, v, key, 1u << 20, &spec->apple_usable_memory_gb);
    }
    if (STREQ(key, "devices")) {
        if (v->type != YAML_SEQUENCE_NODE)
            return YAML_FAIL_AT(y, v, -EINVAL, "'devices' must be a list of devices");
        return yaml_for_each_item(y, v, key, add_device, spec);
    }
    return YAML_FAIL_AT(
            y, k, -EINVAL,
            "unknown key '%s' in a node (known: name, site, owner, platform, labels, kata, "
            "mig_in_kata, cordoned, cpu_cores, time_slice_replicas, apple_unified_memory_gb, "
            "apple_usable_memory_gb, devices)",
            key);
}

static void node_spec_done(NodeSpec *spec) {
    free((char *)spec->name);
    free((char *)spec->site);
    free((char *)spec->owner);
    for (size_t i = 0; i < spec->n_labels; i++) {
        free((char *)spec->labels[i].key);
        free((char *)spec->labels[i].value);
    }
    free((SchedLabel *)spec->labels);
    for (size_t i = 0; i < spec->n_devices; i++) {
        free((char *)spec->devices[i].class_name);
        free((char *)spec->devices[i].address);
    }
    free((DeviceSpec *)spec->devices);
}

static int load_sites(YamlCtx *y, yaml_node_t *seq, InventoryFile *inv) {
    if (seq->type != YAML_SEQUENCE_NODE)
        return YAML_FAIL_AT(y, seq, -EINVAL, "'sites' must be a list of sites");
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
         it++) {
        yaml_node_t *n = yaml_document_get_node(y->doc, *it);
        if (inv->n_sites >= MAX_SITES)
            return YAML_FAIL_AT(y, n, -E2BIG, "too many sites (at most %d)", MAX_SITES);
        InventorySite *ns = realloc(inv->sites, (inv->n_sites + 1) * sizeof(*ns));
        if (!ns)
            return error_set(y->err, -ENOMEM, "out of memory");
        inv->sites = ns;
        InventorySite *site = &inv->sites[inv->n_sites++];
        *site = (InventorySite){.kind = _SITE_KIND_INVALID,
                                .line = (unsigned)n->start_mark.line + 1};
        int r = yaml_for_each_pair(y, n, "a site", site_pair, site);
        if (r >= 0 && !site->name)
            r = YAML_FAIL_AT(y, n, -EINVAL, "a site needs a 'name'");
        if (r >= 0 && site->kind < 0)
            r = YAML_FAIL_AT(y, n, -EINVAL, "site '%s' needs a 'kind' (solo, lab or datacenter)",
                             site->name);
        if (r < 0)
            return r;
    }
    return 0;
}

static int load_nodes(YamlCtx *y, yaml_node_t *seq, InventoryFile *inv) {
    if (seq->type != YAML_SEQUENCE_NODE)
        return YAML_FAIL_AT(y, seq, -EINVAL, "'nodes' must be a list of nodes");
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
         it++) {
        yaml_node_t *n = yaml_document_get_node(y->doc, *it);
        if (inv->n_nodes >= MAX_NODES)
            return YAML_FAIL_AT(y, n, -E2BIG, "too many nodes (at most %d)", MAX_NODES);
        InventoryNode *nn = realloc(inv->nodes, (inv->n_nodes + 1) * sizeof(*nn));
        if (!nn)
            return error_set(y->err, -ENOMEM, "out of memory");
        inv->nodes = nn;
        InventoryNode *node = &inv->nodes[inv->n_nodes++];
        *node = (InventoryNode){.line = (unsigned)n->start_mark.line + 1};
        node->spec.devices = calloc(SCHED_NODE_MAX_DEVICES, sizeof(DeviceSpec));
        node->spec.labels = calloc(SCHED_MAX_LABELS, sizeof(SchedLabel));
        if (!node->spec.devices || !node->spec.labels)
            return error_set(y->err, -ENOMEM, "out of memory");
        int r = yaml_for_each_pair(y, n, "a node", node_pair, &node->spec);
        if (r >= 0 && !node->spec.name)
            r = YAML_FAIL_AT(y, n, -EINVAL, "a node needs a 'name'");
        if (r >= 0 && !node->spec.site)
            r = YAML_FAIL_AT(y, n, -EINVAL, "node '%s' needs a 'site'", node->spec.name);
        if (r >= 0 && !node->spec.owner)
            r = YAML_FAIL_AT(y, n, -EINVAL, "node '%s' needs an 'owner'", node->spec.name);
        /* As the API refuses it (R10): usable GPU memory is part of the unified memory. */
        if (r >= 0 && node->spec.apple_usable_memory_gb > node->spec.apple_unified_memory_gb)
            r = YAML_FAIL_AT(y, n, -EINVAL,
                             "node '%s': apple_usable_memory_gb (%u) is more than "
                             "apple_unified_memory_gb (%u): usable GPU memory is part of the "
                             "Mac's memory (R10)",
                             node->spec.name, node->spec.apple_usable_memory_gb,
                             node->spec.apple_unified_memory_gb);
        if (r < 0)
            return r;
    }
    return 0;
}

static int top_pair(YamlCtx *y, yaml_node_t *k, const char *key, yaml_node_t *v, void *userdata) {
    InventoryFile *inv = userdata;
    if (STREQ(key, "sites"))
        return load_sites(y, v, inv);
    if (STREQ(key, "nodes"))
        return load_nodes(y, v, inv);
    if (STREQ(key, "version")) {
        unsigned ver;
        int r = yaml_get_uint(y, v, key, 1000, &ver);
        if (r >= 0 && ver != 1)
            return YAML_FAIL_AT(y, v, -EINVAL,
                                "inventory version %u is not supported (this build reads 1)", ver);
        return r;
    }
    return YAML_FAIL_AT(y, k, -EINVAL, "unknown top-level key '%s' (known: version, sites, nodes)",
                        key);
}

void inventory_file_free(InventoryFile *inv) {
    if (!inv)
        return;
    for (size_t i = 0; i < inv->n_sites; i++) {
        free(inv->sites[i].name);
        for (size_t j = 0; j < inv->sites[i].n_trusted; j++)
            free(inv->sites[i].trusted[j]);
        free(inv->sites[i].trusted);
    }
    free(inv->sites);
    for (size_t i = 0; i < inv->n_nodes; i++)
        node_spec_done(&inv->nodes[i].spec);
    free(inv->nodes);
    free(inv->file);
    free(inv);
}

int inventory_parse_yaml(const char *text, size_t len, const char *filename, InventoryFile **ret,
                         Error *err) {
    const char *file = filename ? filename : "<inventory>";
    if (len > INVENTORY_MAX_BYTES)
        return error_set(err, -EFBIG, "%s: inventory is larger than %u bytes", file,
                         INVENTORY_MAX_BYTES);
    yaml_document_t doc;
    int r = yaml_load_text(text, len, file, &doc, err);
    if (r < 0)
        return r;
    YamlCtx y = {.doc = &doc, .file = file, .err = err};
    InventoryFile *inv = calloc(1, sizeof(*inv));
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!inv || !(inv->file = strdup(file)))
        r = error_set(err, -ENOMEM, "out of memory");
    else if (!root)
        r = error_set_at(err, -EINVAL, file, 1, 1,
                         "the inventory is empty: expected 'sites:' and 'nodes:'");
    else
        r = yaml_for_each_pair(&y, root, "the inventory", top_pair, inv);
    yaml_document_delete(&doc);
    if (r < 0) {
        inventory_file_free(inv);
        return r;
    }
    *ret = inv;
    return 0;
}

int inventory_load_file(const char *path, InventoryFile **ret, Error *err) {
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = read_full_file(path, INVENTORY_MAX_BYTES, &text, &len);
    if (r == -EFBIG)
        return error_set(err, r, "%s: inventory is larger than %u bytes", path,
                         INVENTORY_MAX_BYTES);
    if (r < 0)
        return error_set(err, r, "cannot read inventory %s: %s", path, strerror(-r));
    return inventory_parse_yaml(text, len, path, ret, err);
}

int inventory_apply(const InventoryFile *inv, Sched *s, uint64_t now, Error *err) {
    for (size_t i = 0; i < inv->n_sites; i++) {
        const InventorySite *site = &inv->sites[i];
        Error local = {0};
        int r = sched_add_site(s, site->name, site->kind, &local);
        for (size_t j = 0; r >= 0 && j < site->n_trusted; j++)
            r = sched_site_trust(s, site->name, site->trusted[j], true, &local);
        if (r < 0)
            return error_set(err, r, "%s:%u: %s", inv->file, site->line, local.message);
    }
    for (size_t i = 0; i < inv->n_nodes; i++) {
        Error local = {0};
        int r = sched_add_node(s, &inv->nodes[i].spec, now, &local);
        if (r < 0)
            return error_set(err, r, "%s:%u: %s", inv->file, inv->nodes[i].line, local.message);
    }
    return 0;
}
