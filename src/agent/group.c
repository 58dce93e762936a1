/* group.c: a GPU's IOMMU group, classified into its own functions, bridges and foreign devices. */
#include "group.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/macro.h"

bool pci_is_gpu(uint32_t vendor, uint32_t class_code) {
    return (vendor == 0x10de || vendor == 0x1002) && (class_code >> 16) == 0x03;
}

const char *pci_class_describe(uint32_t class_code) {
    static const struct {
        uint32_t cls; /* 0xCCSS */
        const char *name;
    } names[] = {
            {0x0100, "a SCSI storage controller"},
            {0x0104, "a RAID controller"},
            {0x0106, "a SATA controller"},
            {0x0108, "an NVMe controller"},
            {0x0200, "an Ethernet controller"},
            {0x0207, "an InfiniBand controller"},
            {0x0280, "a network controller"},
            {0x0300, "a VGA controller"},
            {0x0302, "a 3D controller"},
            {0x0380, "a display controller"},
            {0x0403, "an audio device"},
            {0x0600, "a host bridge"},
            {0x0601, "an ISA bridge"},
            {0x0604, "a PCI bridge"},
            {0x0c03, "a USB controller"},
            {0x0c05, "an SMBus controller"},
            {0x0c80, "a serial bus controller"},
            {0x0d80, "a wireless controller"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        if (names[i].cls == class_code >> 8)
            return names[i].name;
    return "a PCI device";
}

const char *pci_default_host_driver(uint32_t vendor, uint32_t class_code) {
    uint32_t cls = class_code >> 8;
    if ((cls >> 8) == 0x03)
        return vendor == 0x10de ? "nvidia" : vendor == 0x1002 ? "amdgpu" : "";
    if (cls == 0x0403)
        return "snd_hda_intel";
    if (cls == 0x0c03 && (class_code & 0xff) == 0x30)
        return "xhci_hcd";
    if (cls == 0x0c80 && vendor == 0x10de)
        return "ucsi_ccg";
    return "";
}

static bool same_slot(const char *a, const char *b) {
    return strncmp(a, b, 10) == 0; /* "dddd:bb:dd" */
}

/* A name attribute ("(null)" and a missing file read as none). */
static void read_name(const HostPaths *p, const char *bdf, const char *attr, char *out,
                      size_t size) {
    char *s = NULL;
    out[0] = '\0';
    if (pci_read_attr(p, bdf, attr, &s) >= 0 && !STREQ(s, "(null)"))
        snprintf(out, size, "%s", s);
    free(s);
}

static int load_member(const HostPaths *p, const char *gpu, const char *bdf, GroupMember *m,
                       Error *err) {
    *m = (GroupMember){0};
    snprintf(m->bdf, sizeof(m->bdf), "%s", bdf);
    if (pci_read_hex_attr(p, bdf, "vendor", &m->vendor) < 0 ||
        pci_read_hex_attr(p, bdf, "device", &m->device) < 0 ||
        pci_read_hex_attr(p, bdf, "class", &m->class_code) < 0)
        return error_set(err, -ENODEV, "PCI device %s cannot be read (it may have been removed)",
                         bdf);
    /* A driver link that leads nowhere (or to itself) is a broken tree: nothing is moved on
     * what cannot be read, before any write. */
    char *drv = NULL;
    int r = pci_driver_name(p, bdf, &drv);
    if (r < 0 && r != -ENOENT)
        return error_set(err, r, "PCI device %s: its driver link cannot be read (%s)", bdf,
                         strerror(-r));
    snprintf(m->driver, sizeof(m->driver), "%s", strempty(drv));
    free(drv);
    read_name(p, bdf, "driver_override", m->override, sizeof(m->override));
    if ((m->class_code >> 16) == 0x06)
        m->kind = GROUP_MEMBER_BRIDGE;
    else if (same_slot(bdf, gpu))
        m->kind = GROUP_MEMBER_GPU_FUNCTION;
    else
        m->kind = GROUP_MEMBER_FOREIGN;
    return 0;
}

/* Whether the kernel made any IOMMU group (the IOMMU is on). */
static bool iommu_groups_exist(const HostPaths *p) {
    char dir[PATH_MAX];
    int n = snprintf(dir, sizeof(dir), "%s/kernel/iommu_groups", p->sysfs);
    DIR *d = n > 0 && (size_t)n < sizeof(dir) ? opendir(dir) : NULL;
    bool any = false;
    for (struct dirent *de; d && !any && (de = readdir(d));)
        any = de->d_name[0] != '.';
    if (d)
        closedir(d);
    return any;
}

int gpu_group_load(const HostPaths *p, const char *bdf, GpuGroup *ret, Error *err) {
    if (!pci_bdf_is_valid(bdf))
        return error_set(err, -EINVAL, "'%s' is not a PCI address like 0000:01:00.0", bdf);
    GpuGroup g = {.iommu_group = -1};
    snprintf(g.gpu, sizeof(g.gpu), "%s", bdf);
    uint32_t vendor, cls;
    char dev_dir[PATH_MAX];
    if (pci_attr_path(p, bdf, NULL, dev_dir, sizeof(dev_dir)) < 0 || access(dev_dir, F_OK) < 0)
        return error_set(err, -ENODEV, "there is no PCI device %s on this machine", bdf);
    /* The device is there and its sysfs entry cannot be read: say which attribute, not that
     * the device is missing. */
    static const char *const ids[] = {"vendor", "class"};
    for (size_t i = 0; i < 2; i++) {
        int r = pci_read_hex_attr(p, bdf, ids[i], i ? &cls : &vendor);
        if (r < 0)
            return error_set(err, r == -ENOENT ? -ENODEV : -EIO,
                             "cannot read sysfs %s of PCI device %s: %s", ids[i], bdf,
                             r == -EINVAL ? "not a 0x... number" : strerror(-r));
    }
    if (!pci_is_gpu(vendor, cls))
        return error_set(err, -EINVAL, "%s is %s, not an NVIDIA or AMD GPU", bdf,
                         pci_class_describe(cls));
    char *boot = NULL;
    if (pci_read_attr(p, bdf, "boot_vga", &boot) >= 0)
        g.boot_vga = STREQ(boot, "1");
    free(boot);

    char **bdfs = NULL;
    size_t n = 0;
    int r = pci_iommu_group(p, bdf, &g.iommu_group);
    if (r >= 0)
        r = pci_iommu_group_members(p, g.iommu_group, &bdfs, &n);
    else if (r == -ENOENT && iommu_groups_exist(p))
        return error_set(err, -EIO,
                         "%s has no iommu_group link though this machine has IOMMU groups: its "
                         "sysfs entry is incomplete; nothing was moved",
                         bdf);
    else if (r == -ENOENT) {
        /* IOMMU off: only the GPU's own slot functions would move (to the host driver). */
        g.iommu_group = -1;
        char **all;
        size_t n_all;
        r = pci_list_devices(p, &all, &n_all);
        if (r >= 0) {
            bdfs = calloc(n_all ? n_all : 1, sizeof(char *));
            for (size_t i = 0; bdfs && i < n_all; i++)
                if (same_slot(all[i], bdf))
                    bdfs[n++] = TAKE_PTR(all[i]);
            strv_free(all, n_all);
            r = bdfs ? 0 : -ENOMEM;
        }
    }
    if (r < 0)
        return error_set(err, r, "could not read the IOMMU group of %s: %s", bdf, strerror(-r));
    if (n > ARRAY_SIZE(g.members)) {
        strv_free(bdfs, n);
        return error_set(
                err, -E2BIG,
                "the IOMMU group of %s has %zu devices; a GPU's group this large is not moved", bdf,
                n);
    }
    for (size_t i = 0; i < n && r >= 0; i++)
        r = load_member(p, bdf, bdfs[i], &g.members[g.n_members++], err);
    strv_free(bdfs, n);
    if (r < 0)
        return r;
    *ret = g;
    return 0;
}

const GroupMember *gpu_group_foreign(const GpuGroup *g) {
    for (size_t i = 0; i < g->n_members; i++)
        if (g->members[i].kind == GROUP_MEMBER_FOREIGN)
            return &g->members[i];
    return NULL;
}

size_t gpu_group_functions(const GpuGroup *g, const GroupMember **ret, size_t max) {
    size_t n = 0;
    for (size_t i = 0; i < g->n_members && n < max; i++)
        if (g->members[i].kind == GROUP_MEMBER_GPU_FUNCTION)
            ret[n++] = &g->members[i];
    return n;
}
