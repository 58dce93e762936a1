/* kubevirt.h: KubeVirt's permittedHostDevices from the catalog: one pciHostDevices entry
 * per NVIDIA passthrough class's PCI id, named by its vm_device_name and served by the GPU
 * Operator's sandbox device plugin (externalResourceProvider). Pure. */
#pragma once

#include <jansson.h>

#include "core/catalog.h"

/* {"pciHostDevices": [{"pciVendorSelector": "10DE:2330", "resourceName": ...,
 * "externalResourceProvider": true}]} */
json_t *k8s_permitted_host_devices(const Catalog *cat);

/* The merge patch of the KubeVirt CR that sets them (the list is replaced whole). */
json_t *k8s_kubevirt_patch(const Catalog *cat);
