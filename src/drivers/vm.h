/* vm.h: the VM driver (driver.h) through libvirt's C API: define and start the domain of
 * vm-xml.h, stop it with an ACPI shutdown and destroy it when the grace period passes, report
 * a shut-off domain as exited and a crashed one as failed, list ours by name. The connection
 * URI comes from the agent config (qemu:///system by default; test:///default in tests). */
#pragma once

#include "drivers/driver.h"
#include "util/error.h"

#define VM_URI_DEFAULT "qemu:///system"

typedef struct VmConfig {
    const char *uri;         /* NULL: VM_URI_DEFAULT */
    const char *domain_type; /* NULL: "kvm" ("test" for the test driver) */
} VmConfig;

int vm_driver_new(const VmConfig *cfg, Driver **ret, Error *err);
