/* inventory-json.c: machine_inventory_to_json(), the one definition of the inventory's JSON. */
#include "inventory-json.h"

#include <stdio.h>

#include "util/macro.h"
#include "util/strutil.h"

/* Text read from sysfs or NVML (a product name) may hold any bytes; a JSON string may not, and
 * a member left out would read as a field the agent does not know of. */
static json_t *str_or_null(const char *s) {
    if (!s)
        return json_null();
    json_t *j = json_string(s);
    if (j)
        return j;
    _cleanup_free_ char *c = strdup(s);
    return c ? json_string(utf8_make_valid(string_mask_control(c))) : NULL;
}

static json_t *int_or_null(long long v, bool known) {
    return known ? json_integer(v) : json_null();
}

static json_t *hex16(uint16_t v) {
    char b[8];
    snprintf(b, sizeof(b), "%04x", v);
    return json_string(b);
}

static json_t *gts_or_null(unsigned mts) {
    return mts ? json_real(mts / 1000.0) : json_null();
}

static json_t *accelerator_to_json(const Accelerator *a) {
    json_t *o = json_object();
    bool pci = a->vendor != VENDOR_APPLE;
    json_object_set_new(
            o, "vendor",
            json_string(a->vendor == _VENDOR_INVALID ? "unknown" : vendor_to_string(a->vendor)));
    json_object_set_new(o, "pci_address", pci ? json_string(a->bdf) : json_null());
    if (pci) {
        char sub[16], cls[16];
        snprintf(sub, sizeof(sub), "%04x:%04x", a->subsystem_vendor_id, a->subsystem_device_id);
        snprintf(cls, sizeof(cls), "0x%06x", a->class_code);
        json_object_set_new(o, "vendor_id", hex16(a->vendor_id));
        json_object_set_new(o, "device_id", hex16(a->device_id));
        json_object_set_new(o, "subsystem", json_string(sub));
        json_object_set_new(o, "pci_class", json_string(cls));
    }
    json_object_set_new(o, "model", str_or_null(a->model));
    json_object_set_new(o, "pci_name", str_or_null(a->pci_name));
    json_object_set_new(o, "nvml_name", str_or_null(a->nvml_name));
    json_object_set_new(o, "uuid", str_or_null(a->uuid));
    json_object_set_new(o, "class", json_string(accelerator_class_name(a)));
    json_object_set_new(o, "consumer", json_boolean(a->consumer));
    json_object_set_new(o, "memory",
                        a->memory_source ? json_pack("{s:I, s:I, s:s}", "total_bytes",
                                                     (json_int_t)a->memory_total_bytes,
                                                     "used_bytes", (json_int_t)a->memory_used_bytes,
                                                     "source", a->memory_source)
                                         : json_null());
    if (a->vendor == VENDOR_AMD)
        json_object_set_new(o, "gtt",
                            a->gtt_total_bytes
                                    ? json_pack("{s:I, s:I}", "total_bytes",
                                                (json_int_t)a->gtt_total_bytes, "used_bytes",
                                                (json_int_t)a->gtt_used_bytes)
                                    : json_null());
    json_object_set_new(o, "numa_node", int_or_null(a->numa_node, a->numa_node >= 0));
    if (pci) {
        json_t *link = json_object();
        json_object_set_new(link, "speed_gts", gts_or_null(a->link_speed_mts));
        json_object_set_new(link, "width", int_or_null(a->link_width, a->link_width > 0));
        json_object_set_new(link, "max_speed_gts", gts_or_null(a->max_link_speed_mts));
        json_object_set_new(link, "max_width",
                            int_or_null(a->max_link_width, a->max_link_width > 0));
        json_object_set_new(o, "link", link);
    }
    json_object_set_new(o, "driver", str_or_null(a->driver));
    json_object_set_new(o, "driver_override", str_or_null(a->driver_override));
    json_object_set_new(o, "iommu_group", int_or_null(a->iommu_group, a->iommu_group >= 0));
    json_t *members = json_array();
    for (size_t i = 0; i < a->n_group; i++) {
        const GroupPeer *m = &a->group[i];
        char cls[16];
        snprintf(cls, sizeof(cls), "0x%06x", m->class_code);
        json_array_append_new(members,
                              json_pack("{s:s, s:o, s:o, s:s, s:s, s:o}", "pci_address", m->bdf,
                                        "vendor_id", hex16(m->vendor_id), "device_id",
                                        hex16(m->device_id), "pci_class", cls, "kind", m->kind,
                                        "driver", str_or_null(m->driver)));
    }
    json_object_set_new(o, "iommu_group_members", members);
    json_object_set_new(o, "boot_vga", a->boot_vga < 0 ? json_null() : json_boolean(a->boot_vga));
    json_t *rm = a->has_reset_method ? json_array() : json_null();
    for (size_t i = 0; i < a->n_reset_methods; i++)
        json_array_append_new(rm, json_string(a->reset_methods[i]));
    json_object_set_new(o, "reset_methods", rm);
    if (a->mig_current >= 0) {
        json_t *inst = json_array();
        for (size_t i = 0; i < a->n_mig; i++) {
            const MigInstance *m = &a->mig[i];
            json_array_append_new(
                    inst, json_pack("{s:I, s:I, s:s, s:I, s:I, s:s}", "gpu_instance_id",
                                    (json_int_t)m->gpu_instance_id, "profile_id",
                                    (json_int_t)m->profile_id, "profile", m->profile, "start",
                                    (json_int_t)m->start, "size", (json_int_t)m->size, "class",
                                    m->slice_class ? m->slice_class : "unclassified"));
        }
        json_t *profiles = json_array();
        for (size_t i = 0; i < a->n_mig_profiles; i++)
            json_array_append_new(profiles, json_string(a->mig_profiles[i]));
        json_object_set_new(o, "mig",
                            json_pack("{s:b, s:b, s:o, s:o}", "current", a->mig_current == 1,
                                      "pending", a->mig_pending == 1, "instances", inst, "profiles",
                                      profiles));
    } else
        json_object_set_new(o, "mig", json_null());
    json_object_set_new(o, "nvidia_minor", int_or_null(a->nvidia_minor, a->nvidia_minor >= 0));
    json_t *files = json_array();
    for (size_t i = 0; i < a->n_device_files; i++)
        json_array_append_new(files, json_string(a->device_files[i]));
    json_object_set_new(o, "device_files", files);
    json_t *holders = json_array();
    for (size_t i = 0; i < a->n_holders; i++)
        json_array_append_new(holders,
                              json_pack("{s:i, s:s, s:s}", "pid", a->holders[i].pid, "comm",
                                        a->holders[i].comm, "device_file", a->holders[i].path));
    json_object_set_new(o, "holders", holders);
    json_t *pids = json_array();
    for (size_t i = 0; i < a->n_nvml_pids; i++)
        json_array_append_new(pids, json_integer(a->nvml_pids[i]));
    json_object_set_new(o, "nvml_compute_pids", pids);
    if (a->vendor == VENDOR_APPLE)
        json_object_set_new(o, "apple",
                            json_pack("{s:I, s:I, s:I}", "unified_memory_bytes",
                                      (json_int_t)a->unified_memory_bytes, "wired_limit_bytes",
                                      (json_int_t)a->wired_limit_bytes, "headroom_bytes",
                                      (json_int_t)a->headroom_bytes));
    json_object_set_new(o, "error", str_or_null(a->error));
    return o;
}

json_t *machine_inventory_to_json(const MachineInventory *inv) {
    json_t *root = json_object();
    json_object_set_new(root, "cpu",
                        json_pack("{s:s, s:I, s:o, s:I}", "class", "cpu", "logical_cores",
                                  (json_int_t)inv->cpu.logical_cores, "model",
                                  str_or_null(inv->cpu.model), "memory_bytes",
                                  (json_int_t)inv->cpu.memory_bytes));
    json_object_set_new(root, "iommu_enabled", json_boolean(inv->iommu_enabled));
    json_object_set_new(root, "nvml",
                        json_pack("{s:b, s:o}", "loaded", inv->nvml_loaded, "status",
                                  str_or_null(inv->nvml_status)));
    json_object_set_new(root, "apple", str_or_null(inv->apple_status));
    json_t *acc = json_array();
    for (size_t i = 0; i < inv->n_accelerators; i++)
        json_array_append_new(acc, accelerator_to_json(&inv->accelerators[i]));
    json_object_set_new(root, "accelerators", acc);
    return root;
}
