/* kubevirt.c: the KubeVirt CR's permittedHostDevices, made from the catalog. */
#include "kubevirt.h"

#include <stdio.h>

json_t *k8s_permitted_host_devices(const Catalog *cat) {
    json_t *list = json_array();
    for (size_t i = 0; i < cat->n_classes; i++) {
        const GpuClass *c = &cat->classes[i];
        if (c->vendor != VENDOR_NVIDIA || c->mig_parent || !c->vm_device_name)
            continue;
        for (size_t k = 0; k < c->n_pci; k++) {
            char sel[16];
            snprintf(sel, sizeof(sel), "%04X:%04X", c->pci[k].vendor, c->pci[k].device);
            json_array_append_new(list, json_pack("{s:s, s:s, s:b}", "pciVendorSelector", sel,
                                                  "resourceName", c->vm_device_name,
                                                  "externalResourceProvider", 1));
        }
    }
    return json_pack("{s:o}", "pciHostDevices", list);
}

json_t *k8s_kubevirt_patch(const Catalog *cat) {
    return json_pack("{s:{s:{s:o}}}", "spec", "configuration", "permittedHostDevices",
                     k8s_permitted_host_devices(cat));
}
