/* inventory-json.h: the machine inventory as JSON, the shape the control plane consumes.
 *
 * {
 *   "cpu": {"class": "cpu", "logical_cores": 2, "model": "..."|null, "memory_bytes": N},
 *   "iommu_enabled": true,
 *   "nvml": {"loaded": true, "status": "NVML answered for 8 GPUs" | "<why NVML data is absent>"},
 *   "apple": null | "<how the Mac GPU was found>",
 *   "accelerators": [ {
 *     "vendor": "nvidia"|"amd"|"intel"|"apple"|"unknown",
 *     "pci_address": "0000:3b:00.0" | null (Apple),
 *     "vendor_id": "10de", "device_id": "2330", "subsystem": "10de:16c1", "pci_class": "0x030200",
 *     "model": "...", "pci_name": "..."|null, "nvml_name": "..."|null, "uuid": "..."|null,
 *     "class": "nvidia-h100-80gb" | "unclassified", "consumer": false,
 *     "memory": {"total_bytes": N, "used_bytes": N, "source": "nvml"|"amdgpu"|"apple"} | null,
 *     "gtt": {"total_bytes": N, "used_bytes": N} | null,            (AMD)
 *     "numa_node": 0 | null,
 *     "link": {"speed_gts": 32.0|null, "width": 16|null, "max_speed_gts": .., "max_width": ..},
 *     "driver": "nvidia"|null, "driver_override": "vfio-pci"|null,
 *     "iommu_group": 12 | null,
 *     "iommu_group_members": [{"pci_address", "vendor_id", "device_id", "pci_class", "kind",
 *                              "driver"}],   (the other members)
 *     "boot_vga": true|false|null, "reset_methods": ["flr", "bus"] | null (attribute absent),
 *     "mig": {"current": true, "pending": true,
 *             "instances": [{"gpu_instance_id", "profile_id", "profile": "1g.18gb",
 *                            "start", "size", "class": "<slice class>"|"unclassified"}]} | null,
 *     "nvidia_minor": 0 | null,
 *     "device_files": ["/dev/nvidia0", ...],
 *     "holders": [{"pid": 4242, "comm": "python3", "device_file": "/dev/nvidia0"}],
 *     "nvml_compute_pids": [4242],
 *     "apple": {"unified_memory_bytes", "wired_limit_bytes", "headroom_bytes"} (Apple only),
 *     "error": null | "what could not be read or parsed"
 *   } ]
 * }
 * Numbers that are unknown are null, never 0 or -1. */
#pragma once

#include <jansson.h>

#include "agent/discover.h"

json_t *machine_inventory_to_json(const MachineInventory *inv);
