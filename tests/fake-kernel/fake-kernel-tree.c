/* fake-kernel-tree.c: the fake kernel's fixture tree (sysfs, procfs and dev under a temporary
 * root): made from a device list, read back as a sorted snapshot, removed. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake-kernel-internal.h"

int fk_writef(const char *path, const char *fmt, ...) {
    FILE *f = fopen(path, "we");
    if (!f)
        return -errno;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    return fclose(f) == 0 ? 0 : -errno;
}

int fk_mkdir_p(const char *path) {
    char buf[PATH_MAX];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *s = buf + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                return -errno;
            *s = '/';
        }
    return mkdir(buf, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

char *fk_readfile(const char *path, size_t *len) {
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (n + got + 1 > cap) {
            cap = (n + got + 1) * 2;
            buf = realloc(buf, cap);
        }
        memcpy(buf + n, chunk, got);
        n += got;
    }
    fclose(f);
    if (!buf)
        buf = calloc(1, 1);
    else
        buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

void fk_dev_path(const FakeKernel *k, const char *bdf, const char *attr, char *buf, size_t size) {
    snprintf(buf, size, "%s/bus/pci/devices/%s/%s", k->sysfs, bdf, attr);
}

static void mkfifo_at(const char *dir, const char *name) {
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    mkfifo(p, 0600);
}

int fk_load_driver(const FakeKernel *k, const char *name) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/bus/pci/drivers/%s", k->sysfs, name);
    int r = fk_mkdir_p(dir);
    if (r < 0)
        return r;
    mkfifo_at(dir, "bind");
    mkfifo_at(dir, "unbind");
    mkfifo_at(dir, "new_id");
    return 0;
}

void fk_bind_link(const FakeKernel *k, const char *bdf, const char *driver) {
    char link[PATH_MAX], target[PATH_MAX], back[PATH_MAX], dev[PATH_MAX];
    fk_dev_path(k, bdf, "driver", link, sizeof(link));
    snprintf(target, sizeof(target), "%s/bus/pci/drivers/%s", k->sysfs, driver);
    snprintf(back, sizeof(back), "%s/bus/pci/drivers/%s/%s", k->sysfs, driver, bdf);
    snprintf(dev, sizeof(dev), "%s/bus/pci/devices/%s", k->sysfs, bdf);
    char real[PATH_MAX];
    if (!realpath(dev, real))
        return;
    symlink(target, link);
    symlink(real, back);
}

int fake_kernel_create(FakeKernel *k, const FakeDevice *devs, size_t n,
                       const char *const *drivers) {
    *k = (FakeKernel){.helper = -1};
    snprintf(k->root, sizeof(k->root), "/tmp/fake-kernel-XXXXXX");
    if (!mkdtemp(k->root))
        return -errno;
    snprintf(k->sysfs, sizeof(k->sysfs), "%s/sys", k->root);
    snprintf(k->proc, sizeof(k->proc), "%s/proc", k->root);
    snprintf(k->dev, sizeof(k->dev), "%s/dev", k->root);
    char p[PATH_MAX], q[PATH_MAX];
    snprintf(p, sizeof(p), "%s/bus/pci/devices", k->sysfs);
    fk_mkdir_p(p);
    snprintf(p, sizeof(p), "%s/kernel/iommu_groups", k->sysfs);
    fk_mkdir_p(p);
    snprintf(p, sizeof(p), "%s/.fake-kernel", k->root);
    fk_mkdir_p(p);
    mkfifo_at(p, "load");
    mkfifo_at(p, "poke");
    mkfifo_at(p, "ack");
    snprintf(q, sizeof(q), "%s/control", p);
    fk_writef(q, "%s", "");
    fk_mkdir_p(k->proc);
    fk_mkdir_p(k->dev);
    snprintf(p, sizeof(p), "%s/kmsg", k->dev);
    fk_writef(p, "%s", "");
    snprintf(p, sizeof(p), "%s/bus/pci", k->sysfs);
    mkfifo_at(p, "drivers_probe");
    for (size_t i = 0; drivers && drivers[i]; i++)
        fk_load_driver(k, drivers[i]);

    for (size_t i = 0; i < n; i++) {
        const FakeDevice *d = &devs[i];
        char dir[PATH_MAX];
        if (d->parent) {
            snprintf(q, sizeof(q), "%s/bus/pci/devices/%s", k->sysfs, d->parent);
            char real[PATH_MAX];
            if (!realpath(q, real))
                return -ENOENT;
            snprintf(dir, sizeof(dir), "%s/%s", real, d->bdf);
        } else
            snprintf(dir, sizeof(dir), "%s/devices/pci0000:00/%s", k->sysfs, d->bdf);
        int r = fk_mkdir_p(dir);
        if (r < 0)
            return r;
        snprintf(p, sizeof(p), "%s/bus/pci/devices/%s", k->sysfs, d->bdf);
        symlink(dir, p);
#define ATTR(name, ...)                                                                            \
    do {                                                                                           \
        snprintf(p, sizeof(p), "%s/%s", dir, name);                                                \
        fk_writef(p, __VA_ARGS__);                                                                 \
    } while (0)
        ATTR("vendor", "0x%04x\n", d->vendor);
        ATTR("device", "0x%04x\n", d->device);
        ATTR("class", "0x%06x\n", d->class_code);
        ATTR("driver_override", "(null)\n");
        ATTR("reset_method", "flr bus\n");
        ATTR("power_state", "D0\n");
        ATTR("current_link_speed", "16.0 GT/s PCIe\n");
        ATTR("current_link_width", "16\n");
        ATTR("max_link_speed", "16.0 GT/s PCIe\n");
        ATTR("max_link_width", "16\n");
        if ((d->class_code >> 16) == 0x03)
            ATTR("boot_vga", "%d\n", d->boot_vga ? 1 : 0);
#undef ATTR
        unsigned char config[64] = {(unsigned char)d->vendor, (unsigned char)(d->vendor >> 8),
                                    (unsigned char)d->device, (unsigned char)(d->device >> 8)};
        snprintf(p, sizeof(p), "%s/config", dir);
        FILE *f = fopen(p, "we");
        if (f) {
            fwrite(config, 1, sizeof(config), f);
            fclose(f);
        }
        mkfifo_at(dir, "reset");
        if (d->iommu_group >= 0) {
            snprintf(q, sizeof(q), "%s/kernel/iommu_groups/%d/devices", k->sysfs, d->iommu_group);
            fk_mkdir_p(q);
            snprintf(q, sizeof(q), "%s/kernel/iommu_groups/%d/devices/%s", k->sysfs, d->iommu_group,
                     d->bdf);
            symlink(dir, q);
            snprintf(q, sizeof(q), "%s/kernel/iommu_groups/%d", k->sysfs, d->iommu_group);
            snprintf(p, sizeof(p), "%s/iommu_group", dir);
            symlink(q, p);
        }
        if (d->driver) {
            fk_load_driver(k, d->driver);
            fk_bind_link(k, d->bdf, d->driver);
        }
        if (d->nvidia_minor >= 0 && d->vendor == 0x10de && (d->class_code >> 16) == 0x03) {
            snprintf(q, sizeof(q), "%s/driver/nvidia/gpus/%s", k->proc, d->bdf);
            fk_mkdir_p(q);
            snprintf(p, sizeof(p), "%s/information", q);
            fk_writef(p,
                      "Model: \t\t NVIDIA GeForce RTX 4090\nIRQ:   \t\t 130\nDevice Minor: \t "
                      "%d\nBus "
                      "Location: \t %s\n",
                      d->nvidia_minor, d->bdf);
        }
    }
    return 0;
}

void fk_current_driver(const FakeKernel *k, const char *bdf, char *buf, size_t size) {
    char p[PATH_MAX], t[PATH_MAX];
    fk_dev_path(k, bdf, "driver", p, sizeof(p));
    ssize_t n = readlink(p, t, sizeof(t) - 1);
    buf[0] = '\0';
    if (n > 0) {
        t[n] = '\0';
        snprintf(buf, size, "%s", strrchr(t, '/') + 1);
    }
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

void fake_kernel_destroy(FakeKernel *k) {
    fake_kernel_stop(k);
    if (k->root[0])
        nftw(k->root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    k->root[0] = '\0';
}

/* ---- snapshot ---- */

static char *snap_buf;
static size_t snap_len, snap_cap;
static size_t snap_skip;

static void snap_put(const char *s, size_t n) {
    if (snap_len + n + 1 > snap_cap) {
        snap_cap = (snap_len + n + 1) * 2;
        snap_buf = realloc(snap_buf, snap_cap);
    }
    memcpy(snap_buf + snap_len, s, n);
    snap_len += n;
    snap_buf[snap_len] = '\0';
}

static int snap_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)ftw;
    char line[PATH_MAX + 64];
    int n = snprintf(line, sizeof(line), "%s ", path + snap_skip);
    snap_put(line, (size_t)n);
    if (flag == FTW_SL) {
        char t[PATH_MAX];
        ssize_t l = readlink(path, t, sizeof(t) - 1);
        t[l < 0 ? 0 : l] = '\0';
        snap_put("-> ", 3);
        snap_put(t, strlen(t));
    } else if (S_ISFIFO(st->st_mode))
        snap_put("fifo", 4);
    else if (S_ISREG(st->st_mode)) {
        size_t len;
        char *c = fk_readfile(path, &len);
        for (size_t i = 0; c && i < len; i++) {
            char hex[4];
            snprintf(hex, sizeof(hex), "%02x", (unsigned char)c[i]);
            snap_put(hex, 2);
        }
        free(c);
    } else
        snap_put("dir", 3);
    snap_put("\n", 1);
    return 0;
}

static int cmp_lines(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char *fake_kernel_snapshot(const FakeKernel *k) {
    (void)fake_kernel_sync(k);
    snap_buf = NULL;
    snap_len = snap_cap = 0;
    snap_skip = strlen(k->root);
    nftw(k->sysfs, snap_entry, 16, FTW_PHYS);
    /* nftw's order follows readdir: sort the lines so that equal trees compare equal. */
    size_t n = 0;
    for (size_t i = 0; i < snap_len; i++)
        n += snap_buf[i] == '\n';
    char **lines = calloc(n + 1, sizeof(char *));
    size_t m = 0;
    for (char *save = NULL, *l = strtok_r(snap_buf, "\n", &save); l;
         l = strtok_r(NULL, "\n", &save))
        lines[m++] = l;
    qsort(lines, m, sizeof(char *), cmp_lines);
    size_t total = 1;
    for (size_t i = 0; i < m; i++)
        total += strlen(lines[i]) + 1;
    char *out = malloc(total), *w = out;
    for (size_t i = 0; i < m; i++)
        w += sprintf(w, "%s\n", lines[i]);
    *w = '\0';
    free(lines);
    free(snap_buf);
    snap_buf = NULL;
    return out;
}

char *fake_kernel_modprobe(const FakeKernel *k) {
    char *path = NULL;
    if (asprintf(&path, "%s/.fake-kernel/modprobe", k->root) < 0)
        return NULL;
    fk_writef(path,
              "#!/bin/sh\n# fake modprobe: ask the fake kernel to load the module\nprintf '%%s' "
              "\"$1\" > '%s/.fake-kernel/load'\n",
              k->root);
    chmod(path, 0755);
    return path;
}

void fake_kernel_driver(const FakeKernel *k, const char *bdf, char *buf, size_t size) {
    fk_current_driver(k, bdf, buf, size);
}

size_t fake_node_devices(FakeDevice *devs, size_t n_gpus, char (*bdfs)[16]) {
    size_t n = 0;
    for (size_t i = 0; i < n_gpus; i++) {
        snprintf(bdfs[n], 16, "0000:00:%02zx.0", i + 1);
        devs[n] = (FakeDevice){bdfs[n],        0x8086, 0x1bb0, 0x060400, "pcieport",
                               (int)(100 + i), NULL,   false,  -1};
        const char *bridge = bdfs[n++];
        snprintf(bdfs[n], 16, "0000:%02zx:00.0", i + 1);
        devs[n] = (FakeDevice){bdfs[n],      0x10de, 0x2684, 0x030000, "nvidia",
                               (int)(i + 1), bridge, false,  (int)i};
        n++;
        snprintf(bdfs[n], 16, "0000:%02zx:00.1", i + 1);
        devs[n] = (FakeDevice){bdfs[n],      0x10de, 0x22ba, 0x040300, "snd_hda_intel",
                               (int)(i + 1), bridge, false,  -1};
        n++;
    }
    return n;
}
