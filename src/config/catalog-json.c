/* catalog-json.c: GPU classes as JSON objects. */
#include "catalog-json.h"

#include <stdio.h>

const char *vm_name_source_to_string(VmNameSource s) {
    switch (s) {
    case VM_NAME_PCI_IDS:
        return "pci.ids";
    case VM_NAME_RAW_ID:
        return "raw-id";
    case VM_NAME_CATALOG:
        return "catalog";
    default:
        return "none";
    }
}

static json_t *string_or_null(const char *s) {
    return s ? json_string(s) : json_null();
}

json_t *gpu_class_to_json(const GpuClass *cls) {
    json_t *pci = json_array(), *nvml = json_array(), *mig = json_array();
    for (size_t i = 0; i < cls->n_pci; i++) {
        char id[16];
        snprintf(id, sizeof(id), "%04x:%04x", cls->pci[i].vendor, cls->pci[i].device);
        json_array_append_new(pci, json_string(id));
    }
    for (size_t i = 0; i < cls->n_nvml_names; i++)
        json_array_append_new(nvml, json_string(cls->nvml_names[i]));
    for (size_t i = 0; i < cls->n_mig_profiles; i++)
        json_array_append_new(mig, json_string(cls->mig_profiles[i]));
    json_t *match = json_pack("{s:o, s:o}", "pci", pci, "nvml", nvml);
    if (cls->apple_memory_gb)
        json_object_set_new(match, "apple_memory_gb", json_integer(cls->apple_memory_gb));
    json_t *o = json_pack("{s:s, s:s, s:o, s:I, s:o, s:o, s:o, s:s, s:o, s:b, s:b, s:b}", "name",
                          cls->name, "vendor", vendor_to_string(cls->vendor), "match", match,
                          "memory_gb", (json_int_t)cls->memory_gb, "container_resource",
                          string_or_null(cls->container_resource), "node_selector",
                          string_or_null(cls->node_selector), "vm_device_name",
                          string_or_null(cls->vm_device_name), "vm_device_name_source",
                          vm_name_source_to_string(cls->vm_device_name_source), "mig_profiles", mig,
                          "internal_only", cls->internal_only, "owner_only", cls->owner_only,
                          "consumer", cls->consumer);
    if (o && cls->vm_device_name_derived)
        json_object_set_new(o, "vm_device_name_derived", json_string(cls->vm_device_name_derived));
    if (o && cls->mig_parent)
        json_object_set_new(o, "mig",
                            json_pack("{s:s, s:s, s:b}", "parent", cls->mig_parent, "profile",
                                      cls->mig_profile, "derived", cls->derived));
    return o;
}

json_t *catalog_to_json(const Catalog *c) {
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < c->n_classes; i++)
        json_array_append_new(arr, gpu_class_to_json(&c->classes[i]));
    return json_pack("{s:o}", "classes", arr);
}
