/* vm-xml.h: the libvirt domain XML of a passthrough VM (R2a, R7): its name carries the request
 * id, memory and vCPUs come from the request, its disk is the workload's image, and every
 * function of each allocated GPU's IOMMU group (already bound to vfio-pci by the agent) is one
 * <hostdev mode='subsystem' type='pci' managed='no'>, so libvirt never rebinds anything
 * itself. Pure; every XML it writes is validated with virt-xml-validate in the tests. */
#pragma once

#include "drivers/driver.h"
#include "util/error.h"

#define VM_MEMORY_DEFAULT_MB 4096
#define VM_VCPUS_DEFAULT 2

/* type: the domain type ("kvm"; "test" for libvirt's test driver). ret: malloc'ed XML. */
int vm_domain_xml(const WorkloadSpec *spec, const char *type, char **ret, Error *err);

/* Split a PCI address "dddd:bb:ss.f" into its parts; -EINVAL when it is not one. */
int vm_pci_address_parse(const char *bdf, unsigned *domain, unsigned *bus, unsigned *slot,
                         unsigned *function);
