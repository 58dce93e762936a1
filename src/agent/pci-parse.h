/* pci-parse.h: pure parsers for the text the kernel writes in PCI sysfs attributes.
 *
 * No I/O here: each function takes the attribute's text (trailing newline already stripped or
 * not) so that the fuzz targets and unit tests drive them directly. Every parser returns 0 or
 * -EINVAL and writes its result only on success. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "0x10de" (vendor, device, subsystem ids): exactly 4 hex digits after 0x. */
int pci_parse_id(const char *s, uint16_t *ret);

/* "0x030200" (class): exactly 6 hex digits after 0x; base class, subclass, prog-if. */
int pci_parse_class(const char *s, uint32_t *ret);

/* Display and processing-accelerator classes an accelerator can have (0x0300 VGA, 0x0302 3D,
 * 0x0380 other display, 0x1200 processing accelerator), tested on the 24-bit class code. */
bool pci_class_is_accelerator(uint32_t class_code);

/* Vendors whose accelerators we report: NVIDIA 0x10de, AMD 0x1002, Intel 0x8086. */
bool pci_vendor_is_accelerator(uint16_t vendor);

/* What an IOMMU group neighbour is, from its class: "gpu", "audio", "usb", "bridge",
 * "serial-bus" (e.g. the USB-C/UCSI function of a GeForce), "switch" (NVSwitch, 0x0680)
 * or "other". Static strings. */
const char *pci_class_kind(uint32_t class_code);

/* Link speed as the kernel writes it, in MT/s: the old format "8 GT/s", "2.5 GT/s", the new
 * one "16.0 GT/s PCIe", "2.5 GT/s PCIe". "Unknown" (link down, or a virtual function) gives
 * 0 and returns 0: it is a state, not an error. */
int pci_parse_link_speed(const char *s, unsigned *ret_mts);

/* Link width: a decimal lane count ("16"); "0" or a width the kernel reports as 255 (x255 on
 * a link it cannot read) give 0. */
int pci_parse_link_width(const char *s, unsigned *ret);

/* numa_node: "-1" (none) or a non-negative node number. */
int pci_parse_numa_node(const char *s, int *ret);

/* driver_override: "(null)" means none (*ret = NULL); an empty string too. Otherwise a copy
 * of the driver name. -EINVAL for names with white space or '/'. */
int pci_parse_driver_override(const char *s, char **ret);

/* reset_method: "flr bus" -> {"flr", "bus"}. An empty attribute means the device cannot be
 * reset (n = 0). Free with strv_free(). -EINVAL for names outside [a-z0-9_]. */
int pci_parse_reset_methods(const char *s, char ***ret, size_t *ret_n);

/* boot_vga: "0" or "1". */
int pci_parse_bool01(const char *s, bool *ret);

/* NVML's bus id "00000000:3B:00.0" (8-digit upper-case domain) or a 4-digit form, to sysfs
 * form "0000:3b:00.0". buf must hold 13 bytes. Domains above 0xffff are refused. */
int pci_bdf_from_nvml(const char *busid, char buf[static 13]);
