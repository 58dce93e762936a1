/* discover.c: build the machine inventory from sysfs, NVML, amdgpu, /proc and Apple sources. */
#include "discover.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/amd.h"
#include "agent/apple.h"
#include "agent/nvml.h"
#include "agent/pci-parse.h"
#include "agent/pci-sysfs.h"
#include "util/fileio.h"
#include "util/macro.h"
#include "util/strutil.h"

/* Append one sentence to a's error text. Allocation failure loses the sentence, not the device. */
static void add_error(Accelerator *a, const char *fmt, ...) _printf_(2, 3);
static void add_error(Accelerator *a, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    /* It quotes what sysfs or NVML held, which may be any bytes: the report is JSON. */
    utf8_make_valid(string_mask_control(buf));
    char *s = strprintf("%s%s%s", strempty(a->error), a->error ? " " : "", buf);
    if (s) {
        free(a->error);
        a->error = s;
    }
}

/* add_error() for what the control plane places by (see Accelerator.fault). */
#define add_fault(a, ...)                                                                          \
    do {                                                                                           \
        add_error((a), __VA_ARGS__);                                                               \
        (a)->fault = true;                                                                         \
    } while (0)

/* Build a path; a path longer than PATH_MAX comes out truncated and then simply fails to open. */
static void path_printf(char buf[static PATH_MAX], const char *fmt, ...) _printf_(2, 3);
static void path_printf(char buf[static PATH_MAX], const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, PATH_MAX, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= PATH_MAX)
        buf[0] = '\0';
}

/* ---- CPU (R11) ---- */

int cpu_parse_cpuinfo(const char *text, unsigned *ret_cores, char **ret_model) {
    unsigned cores = 0;
    _cleanup_free_ char *model = NULL;
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len >= 9 && strncmp(line, "processor", 9) == 0 &&
            (line[9] == ' ' || line[9] == '\t' || line[9] == ':'))
            cores++;
        else if (!model && len > 10 && strncmp(line, "model name", 10) == 0) {
            const char *c = memchr(line, ':', len);
            if (c) {
                c++;
                while (c < line + len && isspace((unsigned char)*c))
                    c++;
                model = strndup(c, (size_t)(line + len - c));
                if (!model)
                    return -ENOMEM;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    if (!cores)
        return -EINVAL;
    *ret_cores = cores;
    *ret_model = TAKE_PTR(model);
    return 0;
}

int cpu_parse_meminfo(const char *text, uint64_t *ret_bytes) {
    const char *p = strstr(text, "MemTotal:");
    if (!p || (p != text && p[-1] != '\n'))
        return -EINVAL;
    p += strlen("MemTotal:");
    while (*p == ' ' || *p == '\t')
        p++;
    uint64_t kb = 0;
    if (!isdigit((unsigned char)*p))
        return -EINVAL;
    for (; isdigit((unsigned char)*p); p++) {
        if (kb > UINT64_MAX / 10240)
            return -ERANGE;
        kb = kb * 10 + (uint64_t)(*p - '0');
    }
    if (strncmp(p, " kB", 3) != 0)
        return -EINVAL;
    *ret_bytes = kb * 1024;
    return 0;
}

static int read_cpu(const HostPaths *p, bool real_proc, CpuInventory *cpu, Error *err) {
    char path[PATH_MAX];
    _cleanup_free_ char *text = NULL;
    path_printf(path, "%s/cpuinfo", p->proc);
    int r = read_attr_file(path, 16u << 20, &text, NULL);
    if (r >= 0)
        r = cpu_parse_cpuinfo(text, &cpu->logical_cores, &cpu->model);
    if (r == -ENOMEM)
        return error_set(err, r, "out of memory");
    if (r < 0) {
        long n = real_proc ? sysconf(_SC_NPROCESSORS_ONLN) : -1;
        if (n <= 0)
            return error_set(err, -EINVAL,
                             "cannot count CPUs: %s is missing or has no 'processor' lines", path);
        cpu->logical_cores = (unsigned)n;
    }
    free(text);
    text = NULL;
    path_printf(path, "%s/meminfo", p->proc);
    r = read_attr_file(path, 1u << 20, &text, NULL);
    if (r >= 0)
        r = cpu_parse_meminfo(text, &cpu->memory_bytes);
    if (r < 0) {
        long pages = real_proc ? sysconf(_SC_PHYS_PAGES) : -1, size = sysconf(_SC_PAGESIZE);
        if (pages <= 0 || size <= 0)
            return error_set(err, -EINVAL,
                             "cannot read the memory size: %s is missing or has no line "
                             "'MemTotal: N kB'",
                             path);
        cpu->memory_bytes = (uint64_t)pages * (uint64_t)size;
    }
    return 0;
}

/* ---- PCI sysfs ---- */

/* Read an attribute; -ENOENT stays silent (older kernels lack some), other failures are
 * recorded on the device. Returns the text or NULL. */
static char *attr_or_note(const HostPaths *p, Accelerator *a, const char *attr) {
    char *s = NULL;
    int r = pci_read_attr(p, a->bdf, attr, &s);
    if (r < 0 && r != -ENOENT)
        add_error(a, "cannot read %s: %s.", attr, strerror(-r));
    return r < 0 ? NULL : s;
}

static void read_id(const HostPaths *p, Accelerator *a, const char *attr, uint16_t *ret) {
    _cleanup_free_ char *s = attr_or_note(p, a, attr);
    if (s && pci_parse_id(s, ret) < 0)
        add_error(a, "sysfs %s reads '%.40s', not a PCI id like 0x10de.", attr, s);
}

/* The device id, which classes the GPU (R8): every PCI function has one, so a missing file
 * is a broken tree, not an older kernel, and no id read is a fault. */
static void read_device_id(const HostPaths *p, Accelerator *a) {
    _cleanup_free_ char *s = NULL;
    int r = pci_read_attr(p, a->bdf, "device", &s);
    if (r < 0)
        add_fault(a, "cannot read sysfs device: %s.", strerror(-r));
    else if (pci_parse_id(s, &a->device_id) < 0)
        add_fault(a, "sysfs device reads '%.40s', not a PCI id like 0x2335.", s);
}

static void read_link(const HostPaths *p, Accelerator *a, const char *attr, unsigned *ret,
                      int (*parse)(const char *, unsigned *), const char *example) {
    _cleanup_free_ char *s = attr_or_note(p, a, attr);
    if (s && parse(s, ret) < 0)
        add_error(a, "sysfs %s reads '%.40s', not a %s.", attr, s, example);
}

static int read_group(const HostPaths *p, Accelerator *a) {
    int r = pci_iommu_group(p, a->bdf, &a->iommu_group);
    if (r == -ENOENT) {
        a->iommu_group = -1;
        return 0;
    }
    if (r < 0) {
        a->iommu_group = -1;
        add_error(a, "its iommu_group link cannot be read: %s.", strerror(-r));
        return r == -ENOMEM ? r : 0;
    }
    char **members = NULL;
    size_t n = 0;
    r = pci_iommu_group_members(p, a->iommu_group, &members, &n);
    if (r < 0) {
        add_error(a, "IOMMU group %d's members cannot be listed: %s.", a->iommu_group,
                  strerror(-r));
        return r == -ENOMEM ? r : 0;
    }
    a->group = calloc(n ? n : 1, sizeof(GroupPeer));
    if (!a->group) {
        strv_free(members, n);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        if (STREQ(members[i], a->bdf))
            continue;
        GroupPeer *m = &a->group[a->n_group++];
        snprintf(m->bdf, sizeof(m->bdf), "%s", members[i]);
        _cleanup_free_ char *v = NULL, *d = NULL, *c = NULL;
        if (pci_read_attr(p, m->bdf, "vendor", &v) >= 0)
            (void)pci_parse_id(v, &m->vendor_id);
        if (pci_read_attr(p, m->bdf, "device", &d) >= 0)
            (void)pci_parse_id(d, &m->device_id);
        if (pci_read_attr(p, m->bdf, "class", &c) >= 0 && pci_parse_class(c, &m->class_code) < 0)
            add_error(a, "group member %s has a malformed class '%.40s'.", m->bdf, c);
        m->kind = pci_class_kind(m->class_code);
        (void)pci_driver_name(p, m->bdf, &m->driver);
    }
    strv_free(members, n);
    return 0;
}

static int add_device_node(Accelerator *a, DevNode node) {
    for (size_t i = 0; i < a->n_device_files; i++)
        if (a->device_nodes[i].kind == node.kind && a->device_nodes[i].num == node.num)
            return 0;
    DevNode *nn = realloc(a->device_nodes, (a->n_device_files + 1) * sizeof(DevNode));
    if (!nn)
        return -ENOMEM;
    a->device_nodes = nn;
    a->device_nodes[a->n_device_files++] = node;
    return 0;
}

static int devnode_cmp(const void *x, const void *y) {
    const DevNode *a = x, *b = y;
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    return a->num < b->num ? -1 : a->num > b->num;
}

/* Sort the nodes (readdir order is arbitrary) and write their paths. */
static int format_device_files(Accelerator *a, const HostPaths *p) {
    if (!a->n_device_files)
        return 0;
    qsort(a->device_nodes, a->n_device_files, sizeof(DevNode), devnode_cmp);
    a->device_files = calloc(a->n_device_files, sizeof(char *));
    if (!a->device_files)
        return -ENOMEM;
    for (size_t i = 0; i < a->n_device_files; i++) {
        char path[PATH_MAX];
        int r = devnode_format(p->dev, &a->device_nodes[i], path, sizeof(path));
        if (r < 0)
            path[0] = '\0';
        if (!(a->device_files[i] = strdup(path)))
            return -ENOMEM;
    }
    return 0;
}

/* "Device Minor: 0" in <proc>/driver/nvidia/gpus/<bdf>/information (the NVIDIA driver's own
 * record), used when NVML is absent. */
static int nvidia_minor_from_proc(const HostPaths *p, const char *bdf) {
    char path[PATH_MAX];
    _cleanup_free_ char *text = NULL;
    path_printf(path, "%s/driver/nvidia/gpus/%s/information", p->proc, bdf);
    if (read_attr_file(path, 64 * 1024, &text, NULL) < 0)
        return -1;
    const char *m = strstr(text, "Device Minor:");
    if (!m)
        return -1;
    m += strlen("Device Minor:");
    while (*m == ' ' || *m == '\t')
        m++;
    int v = 0, digits = 0;
    for (; isdigit((unsigned char)*m) && digits < 5; m++, digits++)
        v = v * 10 + (*m - '0');
    return digits ? v : -1;
}

/* The device files a container needs for this accelerator (R1, R12). */
static int collect_device_nodes(const HostPaths *p, Accelerator *a) {
    int r = 0;
    if (a->driver && STREQ(a->driver, "nvidia") && a->nvidia_minor >= 0)
        r = add_device_node(a, (DevNode){DEVNODE_NVIDIA, (unsigned)a->nvidia_minor});
    char dir[PATH_MAX];
    if (r >= 0 && pci_attr_path(p, a->bdf, "drm", dir, sizeof(dir)) >= 0) {
        DIR *d = opendir(dir);
        for (struct dirent *de; d && r >= 0 && (de = readdir(d));) {
            char full[PATH_MAX];
            path_printf(full, "%s/dri/%s", p->dev, de->d_name);
            DevNode node;
            if (devnode_parse(p->dev, full, &node) >= 0)
                r = add_device_node(a, node);
        }
        if (d)
            closedir(d);
    }
    if (r >= 0 && a->driver && STREQ(a->driver, "amdgpu")) {
        /* R12: a ROCm container needs the GPU's render node beside /dev/kfd; without one the
         * GPU cannot be handed to a container, and offering it would place work that fails. */
        bool render = false;
        for (size_t i = 0; i < a->n_device_files; i++)
            render = render || a->device_nodes[i].kind == DEVNODE_DRI_RENDER;
        if (!render)
            add_fault(a, "amdgpu has no render node under its drm folder (no renderD*): ROCm "
                         "containers cannot use it.");
        r = add_device_node(a, (DevNode){DEVNODE_KFD, 0});
    }
    if (r >= 0 && a->driver && STREQ(a->driver, "vfio-pci") && a->iommu_group >= 0)
        r = add_device_node(a, (DevNode){DEVNODE_VFIO, (unsigned)a->iommu_group});
    return r < 0 ? r : format_device_files(a, p);
}

static Vendor vendor_of(uint16_t id) {
    switch (id) {
    case 0x10de:
        return VENDOR_NVIDIA;
    case 0x1002:
        return VENDOR_AMD;
    default:
        return VENDOR_INTEL;
    }
}

/* Decide whether bdf is an accelerator. Only a readable vendor or class that proves the device
 * is not ours excludes it: a device with malformed ids is kept, with an error, never dropped. */
static int probe_pci(const HostPaths *p, const char *bdf, Accelerator *a, bool *ret_keep) {
    *a = (Accelerator){.numa_node = -1,
                       .iommu_group = -1,
                       .boot_vga = -1,
                       .mig_current = -1,
                       .mig_pending = -1,
                       .nvidia_minor = -1};
    snprintf(a->bdf, sizeof(a->bdf), "%s", bdf);
    _cleanup_free_ char *v = NULL, *c = NULL;
    int rv = pci_read_attr(p, bdf, "vendor", &v), rc = pci_read_attr(p, bdf, "class", &c);
    if (rv == -ENOMEM || rc == -ENOMEM)
        return -ENOMEM;
    bool vendor_ok = rv >= 0 && pci_parse_id(v, &a->vendor_id) >= 0;
    bool class_ok = rc >= 0 && pci_parse_class(c, &a->class_code) >= 0;
    if ((vendor_ok && !pci_vendor_is_accelerator(a->vendor_id)) ||
        (class_ok && !pci_class_is_accelerator(a->class_code))) {
        *ret_keep = false;
        return 0;
    }
    *ret_keep = true;
    if (rv < 0)
        add_fault(a, "cannot read sysfs vendor: %s.", strerror(-rv));
    else if (!vendor_ok)
        add_fault(a, "sysfs vendor reads '%.40s', not a PCI id like 0x10de.", v);
    if (rc < 0)
        add_fault(a, "cannot read sysfs class: %s.", strerror(-rc));
    else if (!class_ok)
        add_fault(a, "sysfs class reads '%.40s', not a PCI class like 0x030200.", c);
    a->vendor = vendor_ok ? vendor_of(a->vendor_id) : _VENDOR_INVALID;
    return 0;
}

static int read_pci(const HostPaths *p, Accelerator *a) {
    read_device_id(p, a);
    read_id(p, a, "subsystem_vendor", &a->subsystem_vendor_id);
    read_id(p, a, "subsystem_device", &a->subsystem_device_id);
    _cleanup_free_ char *numa = attr_or_note(p, a, "numa_node");
    if (numa && pci_parse_numa_node(numa, &a->numa_node) < 0)
        add_error(a, "sysfs numa_node reads '%.40s', not a node number.", numa);
    read_link(p, a, "current_link_speed", &a->link_speed_mts, pci_parse_link_speed,
              "speed like '16.0 GT/s PCIe'");
    read_link(p, a, "max_link_speed", &a->max_link_speed_mts, pci_parse_link_speed,
              "speed like '16.0 GT/s PCIe'");
    read_link(p, a, "current_link_width", &a->link_width, pci_parse_link_width, "lane count");
    read_link(p, a, "max_link_width", &a->max_link_width, pci_parse_link_width, "lane count");
    int r = pci_driver_name(p, a->bdf, &a->driver);
    if (r == -ENOMEM)
        return r;
    if (r < 0 && r != -ENOENT) /* -ENOENT: no driver bound */
        add_fault(a, "sysfs driver link cannot be read (%s).", strerror(-r));
    _cleanup_free_ char *ovr = attr_or_note(p, a, "driver_override");
    if (ovr && (r = pci_parse_driver_override(ovr, &a->driver_override)) < 0) {
        if (r == -ENOMEM)
            return r;
        add_fault(a, "sysfs driver_override reads '%.40s', not a driver name.", ovr);
    }
    _cleanup_free_ char *bv = attr_or_note(p, a, "boot_vga");
    bool b;
    if (bv && pci_parse_bool01(bv, &b) >= 0)
        a->boot_vga = b;
    else if (bv)
        add_error(a, "sysfs boot_vga reads '%.40s', not 0 or 1.", bv);
    _cleanup_free_ char *rm = attr_or_note(p, a, "reset_method");
    if (rm) {
        r = pci_parse_reset_methods(rm, &a->reset_methods, &a->n_reset_methods);
        if (r == -ENOMEM)
            return r;
        if (r < 0)
            add_error(a, "sysfs reset_method reads '%.40s', not a list of methods.", rm);
        else
            a->has_reset_method = true;
    }
    return read_group(p, a);
}

static int read_amd(const HostPaths *p, Accelerator *a) {
    AmdInfo info;
    int r = amd_read_info(p, a->bdf, &info);
    if (r < 0)
        return r;
    if (info.vram_total) {
        a->memory_total_bytes = info.vram_total;
        a->memory_used_bytes = info.vram_used;
        a->memory_source = "amdgpu";
    }
    a->gtt_total_bytes = info.gtt_total;
    a->gtt_used_bytes = info.gtt_used;
    if (info.error)
        add_fault(a, "%s", info.error);
    if (info.product_name && !a->model)
        a->model = TAKE_PTR(info.product_name);
    amd_info_done(&info);
    return 0;
}

/* ---- NVML merge ---- */

static int merge_nvml(Accelerator *a, NvmlGpu *g) {
    if (g->name[0] && !(a->nvml_name = strdup(g->name)))
        return -ENOMEM;
    if (g->uuid[0] && !(a->uuid = strdup(g->uuid)))
        return -ENOMEM;
    if (g->has_memory) {
        a->memory_total_bytes = g->memory_total;
        a->memory_used_bytes = g->memory_used;
        a->memory_source = "nvml";
    }
    if (g->minor >= 0)
        a->nvidia_minor = g->minor;
    a->mig_current = g->mig_current;
    a->mig_pending = g->mig_pending;
    if (g->error)
        add_fault(a, "%s", g->error);
    if (g->n_pids) {
        a->nvml_pids = TAKE_PTR(g->pids);
        a->n_nvml_pids = g->n_pids;
    }
    if (g->n_mig && !(a->mig = calloc(g->n_mig, sizeof(MigInstance))))
        return -ENOMEM;
    for (size_t i = 0; i < g->n_mig; i++) {
        MigInstance *m = &a->mig[a->n_mig++];
        *m = (MigInstance){.gpu_instance_id = g->mig[i].gpu_instance_id,
                           .profile_id = g->mig[i].profile_id,
                           .start = g->mig[i].start,
                           .size = g->mig[i].size,
                           .busy = g->mig[i].busy};
        if (!(m->profile = strdup(g->mig[i].profile)))
            return -ENOMEM;
    }
    if (g->n_profiles && !(a->mig_profiles = calloc(g->n_profiles, sizeof(char *))))
        return -ENOMEM;
    for (size_t i = 0; i < g->n_profiles; i++)
        if (!(a->mig_profiles[a->n_mig_profiles++] = strdup(g->profiles[i])))
            return -ENOMEM;
    return 0;
}

/* ---- classification ---- */

static int classify(Accelerator *a, const DiscoverOptions *o) {
    const GpuClass *cls = NULL;
    if (o->catalog && a->vendor != _VENDOR_INVALID && a->device_id)
        cls = catalog_match_pci(o->catalog, a->vendor_id, a->device_id);
    if (!cls && o->catalog && a->nvml_name)
        cls = catalog_match_nvml(o->catalog, a->nvml_name);
    if (cls) {
        if (!(a->class_name = strdup(cls->name)))
            return -ENOMEM;
        a->consumer = cls->consumer;
        int card = catalog_find_index(o->catalog, cls->name);
        for (size_t i = 0; i < a->n_mig; i++) {
            const GpuClass *slice = catalog_find_mig_slice(o->catalog, card, a->mig[i].profile);
            if (slice && !(a->mig[i].slice_class = strdup(slice->name)))
                return -ENOMEM;
        }
    }
    const char *pci_name = o->pci_ids && a->device_id
                                   ? pci_ids_device_name(o->pci_ids, a->vendor_id, a->device_id)
                                   : NULL;
    if (pci_name && !(a->pci_name = strdup(pci_name)))
        return -ENOMEM;
    if (a->nvml_name) {
        free(a->model);
        a->model = strdup(a->nvml_name);
    } else if (!a->model)
        a->model = a->pci_name ? strdup(a->pci_name)
                               : strprintf("unknown device %04x:%04x", a->vendor_id, a->device_id);
    return a->model ? 0 : -ENOMEM;
}

/* ---- holders ---- */

static int attach_holders(MachineInventory *inv, const HostPaths *p) {
    FdHolder *h = NULL;
    size_t n = 0;
    int r = procfd_scan(p->proc, p->dev, &h, &n);
    if (r < 0)
        return r == -ENOMEM ? r : 0; /* no /proc to read: no holders known */
    for (size_t ai = 0; r >= 0 && ai < inv->n_accelerators; ai++) {
        Accelerator *a = &inv->accelerators[ai];
        for (size_t i = 0; r >= 0 && i < n; i++)
            for (size_t k = 0; k < a->n_device_files; k++) {
                if (a->device_nodes[k].kind != h[i].node.kind ||
                    a->device_nodes[k].num != h[i].node.num)
                    continue;
                DeviceHolder *nh = realloc(a->holders, (a->n_holders + 1) * sizeof(*nh));
                if (!nh) {
                    r = -ENOMEM;
                    break;
                }
                a->holders = nh;
                DeviceHolder *d = &a->holders[a->n_holders++];
                *d = (DeviceHolder){.pid = h[i].pid,
                                    .comm = strdup(h[i].comm),
                                    .path = strdup(a->device_files[k])};
                if (!d->comm || !d->path)
                    r = -ENOMEM;
                break;
            }
    }
    free(h);
    return r;
}

/* ---- Apple ---- */

static int discover_apple(MachineInventory *inv, const DiscoverOptions *o, Error *err) {
    AppleHost host;
    int r;
    if (o->apple_fixture)
        r = apple_load_fixture(o->apple_fixture, &host, err);
    else {
#ifdef __APPLE__
        r = apple_read_host(&host, err);
#else
        return 0;
#endif
    }
    if (r < 0)
        return r;
    AppleGpuMemory mem;
    if ((r = apple_gpu_memory(&host, o->apple_headroom_set ? o->apple_headroom_gb : -1, &mem,
                              err)) < 0)
        return r;
    Accelerator *na = realloc(inv->accelerators, (inv->n_accelerators + 1) * sizeof(Accelerator));
    if (!na)
        return error_set(err, -ENOMEM, "out of memory");
    inv->accelerators = na;
    Accelerator *a = &inv->accelerators[inv->n_accelerators++];
    *a = (Accelerator){.vendor = VENDOR_APPLE,
                       .numa_node = -1,
                       .iommu_group = -1,
                       .boot_vga = -1,
                       .mig_current = -1,
                       .mig_pending = -1,
                       .nvidia_minor = -1,
                       .memory_total_bytes = mem.usable_bytes,
                       .memory_source = "apple",
                       .unified_memory_bytes = mem.unified_bytes,
                       .wired_limit_bytes = mem.limit_bytes,
                       .headroom_bytes = mem.headroom_bytes};
    const GpuClass *cls = apple_match_class(o->catalog, &mem);
    a->model = strprintf("%s GPU", host.chip[0] ? host.chip : "Apple Silicon");
    a->class_name = cls ? strdup(cls->name) : NULL;
    inv->apple_status = strprintf("%s: %u GB unified memory, GPU wired limit %llu MB (%s), owner "
                                  "headroom %llu MB",
                                  o->apple_fixture ? "from fixture" : "from sysctl", mem.unified_gb,
                                  (unsigned long long)(mem.limit_bytes / MIB),
                                  host.wired_limit_mb            ? "iogpu.wired_limit_mb"
                                  : host.metal_working_set_bytes ? "Metal's recommended working set"
                                                                 : "system default",
                                  (unsigned long long)(mem.headroom_bytes / MIB));
    if (!a->model || (cls && !a->class_name) || !inv->apple_status)
        return error_set(err, -ENOMEM, "out of memory");
    return 0;
}

/* ---- top level ---- */

const char *accelerator_class_name(const Accelerator *a) {
    return a->class_name ? a->class_name : "unclassified";
}

static int discover_pci(MachineInventory *inv, const HostPaths *p, const DiscoverOptions *o,
                        NvmlReport *nv, Error *err) {
    char **bdfs = NULL;
    size_t n = 0;
    int r = pci_list_devices(p, &bdfs, &n);
    /* On Linux, a root given that is not there is a typo, not a machine without GPUs:
     * reported as one would take every GPU of the node out of the fleet. (A Mac has no /sys;
     * a Mac described by a fixture is read with a root that is not there.) */
    struct stat st;
    if (r == -ENOENT && o->sysfs_root && !o->apple_fixture &&
        (stat(p->sysfs, &st) < 0 || !S_ISDIR(st.st_mode)))
        return error_set(err, -ENOENT, "--sysfs-root %s: no such directory", p->sysfs);
    /* A root given is a Linux sysfs tree, which always has the PCI bus: without it the root
     * is the wrong folder (the machine's, not its sys/), or the tree is being changed under
     * the agent, and "no GPUs" would take the node's GPUs out of the fleet. */
    if (r == -ENOENT && o->sysfs_root && !o->apple_fixture)
        return error_set(err, -ENOENT,
                         "--sysfs-root %s has no bus/pci/devices: give the sysfs tree (the "
                         "folder mounted at /sys)",
                         p->sysfs);
    if (r == -ENOENT)
        return 0; /* no PCI bus (a Mac, a container without /sys): nothing to list */
    if (r < 0)
        return error_set(err, r, "cannot list PCI devices under %s/bus/pci/devices: %s", p->sysfs,
                         strerror(-r));
    inv->accelerators = calloc(n ? n : 1, sizeof(Accelerator));
    if (!inv->accelerators)
        r = -ENOMEM;
    for (size_t i = 0; r >= 0 && i < n; i++) {
        Accelerator *a = &inv->accelerators[inv->n_accelerators];
        bool keep = false;
        r = probe_pci(p, bdfs[i], a, &keep);
        if (r < 0 || !keep) {
            free(a->error);
            continue;
        }
        inv->n_accelerators++;
        r = read_pci(p, a);
        if (r >= 0 && a->vendor == VENDOR_AMD)
            r = read_amd(p, a);
        bool merged = false;
        for (size_t k = 0; r >= 0 && nv && k < nv->n_gpus; k++)
            if (STREQ(nv->gpus[k].bdf, a->bdf)) {
                /* Two NVML GPUs at one address: neither report can be told to be this GPU's. */
                if (merged)
                    add_fault(a, "NVML reports two GPUs at this address (indexes %zu and more).",
                              k);
                else
                    r = merge_nvml(a, &nv->gpus[k]);
                merged = true;
                nv->gpus[k].bdf[0] = '\0'; /* merged: its errors now live on the accelerator */
                free(nv->gpus[k].error);
                nv->gpus[k].error = NULL;
            }
        if (r >= 0 && a->vendor == VENDOR_NVIDIA && a->driver && STREQ(a->driver, "nvidia")) {
            /* The driver's own "Device Minor" is what bind checks holders against: the two
             * must agree, and a disagreement is said, with the driver's number kept. */
            int proc_minor = nvidia_minor_from_proc(p, a->bdf);
            if (proc_minor >= 0 && a->nvidia_minor >= 0 && proc_minor != a->nvidia_minor)
                add_error(a, "NVML says minor %d, the driver's information file %d: %d is used",
                          a->nvidia_minor, proc_minor, proc_minor);
            if (proc_minor >= 0 || a->nvidia_minor < 0)
                a->nvidia_minor = proc_minor;
        }
        if (r >= 0)
            r = collect_device_nodes(p, a);
        if (r >= 0)
            r = classify(a, o);
    }
    strv_free(bdfs, n);
    if (r < 0)
        return error_set(err, r, "out of memory while reading PCI devices");
    /* A GPU NVML reports but sysfs does not show: report it, saying so. */
    for (size_t k = 0; nv && k < nv->n_gpus; k++) {
        NvmlGpu *g = &nv->gpus[k];
        if (!g->bdf[0] && g->error) {
            /* NVML could not even say where this GPU is: tell it with NVML's status. */
            char *s = strprintf("%s; GPU index %zu: %s", inv->nvml_status, k, g->error);
            if (!s)
                return error_set(err, -ENOMEM, "out of memory");
            free(inv->nvml_status);
            inv->nvml_status = s;
        }
        if (!g->bdf[0])
            continue;
        Accelerator *na =
                realloc(inv->accelerators, (inv->n_accelerators + 1) * sizeof(Accelerator));
        if (!na)
            return error_set(err, -ENOMEM, "out of memory");
        inv->accelerators = na;
        Accelerator *a = &inv->accelerators[inv->n_accelerators++];
        *a = (Accelerator){.vendor = VENDOR_NVIDIA,
                           .vendor_id = g->vendor_id,
                           .device_id = g->device_id,
                           .numa_node = -1,
                           .iommu_group = -1,
                           .boot_vga = -1,
                           .nvidia_minor = -1};
        snprintf(a->bdf, sizeof(a->bdf), "%s", g->bdf);
        add_fault(a, "NVML reports this GPU but %s/bus/pci/devices does not list it.", p->sysfs);
        if (merge_nvml(a, g) < 0 || classify(a, o) < 0)
            return error_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

int machine_discover(const DiscoverOptions *o, MachineInventory **ret, Error *err) {
    HostPaths p;
    if (host_paths_init(&p, o->sysfs_root, o->proc_root, o->dev_root) < 0)
        return error_set(err, -ENAMETOOLONG, "a root directory path is too long");
    /* Without its device nodes the agent would see no holder of any GPU (R7) and no AMD
     * render node: a --dev-root that is not there is a mistake, not a machine without them. */
    struct stat st;
    if (o->dev_root && stat(p.dev, &st) < 0)
        return error_set(err, -ENOENT, "--dev-root %s: no such directory", p.dev);
    if (o->dev_root && !S_ISDIR(st.st_mode))
        return error_set(err, -ENOTDIR, "--dev-root %s is not a directory", p.dev);
    _cleanup_(machine_inventory_freep) MachineInventory *inv = calloc(1, sizeof(*inv));
    if (!inv)
        return error_set(err, -ENOMEM, "out of memory");
    int r = read_cpu(&p, !o->proc_root || STREQ(o->proc_root, "/proc"), &inv->cpu, err);
    if (r < 0)
        return r;
    char groups[PATH_MAX];
    path_printf(groups, "%s/kernel/iommu_groups", p.sysfs);
    DIR *d = opendir(groups);
    for (struct dirent *de; d && (de = readdir(d));)
        if (isdigit((unsigned char)de->d_name[0])) {
            inv->iommu_enabled = true;
            break;
        }
    if (d)
        closedir(d);

    NvmlReport *nv = NULL;
    if (o->no_nvml)
        inv->nvml_status = strdup("NVML data is absent: NVML was not loaded (--no-nvml)");
    else {
        Error nerr = {0};
        if (nvml_probe(o->nvml_lib, &nv, &nerr) < 0)
            inv->nvml_status = strdup(error_message(&nerr));
        else {
            inv->nvml_loaded = true;
            inv->nvml_status = strdup(nv->status);
        }
    }
    r = inv->nvml_status ? discover_pci(inv, &p, o, nv, err)
                         : error_set(err, -ENOMEM, "out of memory");
    nvml_report_free(nv);
    if (r < 0)
        return r;
    bool any_nodes = false;
    for (size_t i = 0; i < inv->n_accelerators; i++)
        any_nodes = any_nodes || inv->accelerators[i].n_device_files;
    if (any_nodes && !o->no_holders && (r = attach_holders(inv, &p)) < 0)
        return error_set(err, r, "out of memory while scanning %s for device holders", p.proc);
    if ((r = discover_apple(inv, o, err)) < 0)
        return r;
    *ret = TAKE_PTR(inv);
    return 0;
}

static void accelerator_done(Accelerator *a) {
    free(a->model);
    free(a->pci_name);
    free(a->nvml_name);
    free(a->uuid);
    free(a->class_name);
    for (size_t i = 0; i < a->n_group; i++)
        free(a->group[i].driver);
    free(a->group);
    free(a->driver);
    free(a->driver_override);
    strv_free(a->reset_methods, a->n_reset_methods);
    for (size_t i = 0; i < a->n_mig; i++) {
        free(a->mig[i].profile);
        free(a->mig[i].slice_class);
    }
    free(a->mig);
    strv_free(a->mig_profiles, a->n_mig_profiles);
    strv_free(a->device_files, a->n_device_files);
    free(a->device_nodes);
    for (size_t i = 0; i < a->n_holders; i++) {
        free(a->holders[i].comm);
        free(a->holders[i].path);
    }
    free(a->holders);
    free(a->nvml_pids);
    free(a->error);
}

void machine_inventory_free(MachineInventory *inv) {
    if (!inv)
        return;
    for (size_t i = 0; i < inv->n_accelerators; i++)
        accelerator_done(&inv->accelerators[i]);
    free(inv->accelerators);
    free(inv->cpu.model);
    free(inv->nvml_status);
    free(inv->apple_status);
    free(inv);
}
