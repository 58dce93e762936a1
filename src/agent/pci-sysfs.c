/* pci-sysfs.c: PCI sysfs reads under a configurable root. */
#include "pci-sysfs.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fileio.h"
#include "util/macro.h"
#include "util/strutil.h"

/* A root as given, without trailing slashes ("/dev/" is "/dev", "/" stays): every path is
 * built as ROOT/..., and a holder's "/dev/nvidia0" must compare equal to what is built. */
static int copy_path(char *dst, const char *src) {
    size_t n = strlen(src);
    if (n >= PATH_MAX)
        return -ENAMETOOLONG;
    while (n > 1 && src[n - 1] == '/')
        n--;
    memcpy(dst, src, n);
    dst[n] = '\0';
    return 0;
}

int host_paths_init(HostPaths *p, const char *sysfs_root, const char *proc_root,
                    const char *dev_root) {
    int r = copy_path(p->sysfs, sysfs_root ? sysfs_root : "/sys");
    if (r >= 0)
        r = copy_path(p->proc, proc_root ? proc_root : "/proc");
    if (r >= 0)
        r = copy_path(p->dev, dev_root ? dev_root : "/dev");
    return r;
}

int pci_attr_path(const HostPaths *p, const char *bdf, const char *attr, char *buf, size_t size) {
    if (!pci_bdf_is_valid(bdf))
        return -EINVAL;
    int n = attr ? snprintf(buf, size, "%s/bus/pci/devices/%s/%s", p->sysfs, bdf, attr)
                 : snprintf(buf, size, "%s/bus/pci/devices/%s", p->sysfs, bdf);
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int pci_read_attr(const HostPaths *p, const char *bdf, const char *attr, char **ret) {
    char path[PATH_MAX];
    int r = pci_attr_path(p, bdf, attr, path, sizeof(path));
    return r < 0 ? r : read_attr_line(path, ret);
}

int pci_read_hex_attr(const HostPaths *p, const char *bdf, const char *attr, uint32_t *ret) {
    _cleanup_free_ char *s = NULL;
    int r = pci_read_attr(p, bdf, attr, &s);
    if (r < 0)
        return r;
    if (!string_has_prefix(s, "0x"))
        return -EINVAL;
    uint64_t v;
    r = parse_uint64(s, UINT32_MAX, &v);
    if (r < 0)
        return -EINVAL;
    *ret = (uint32_t)v;
    return 0;
}

static int link_basename(const char *path, char **ret) {
    char target[PATH_MAX];
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    if (n < 0)
        return -errno;
    target[n] = '\0';
    const char *base = strrchr(target, '/');
    base = base ? base + 1 : target;
    if (!*base)
        return -EINVAL;
    char *s = strdup(base);
    if (!s)
        return -ENOMEM;
    *ret = s;
    return 0;
}

int pci_driver_name(const HostPaths *p, const char *bdf, char **ret) {
    char path[PATH_MAX];
    int r = pci_attr_path(p, bdf, "driver", path, sizeof(path));
    if (r < 0)
        return r;
    /* The kernel's link always leads to the driver's folder: one that leads nowhere, or to
     * itself, is a broken tree, not a driver named after the link's last part. */
    struct stat st;
    if (lstat(path, &st) < 0)
        return -errno; /* -ENOENT: no driver bound */
    if (S_ISLNK(st.st_mode)) {
        if (stat(path, &st) < 0)
            return errno == ENOENT ? -ENOTDIR : -errno; /* dangling is broken, not unbound */
        if (!S_ISDIR(st.st_mode))
            return -ENOTDIR;
    }
    return link_basename(path, ret);
}

int pci_iommu_group(const HostPaths *p, const char *bdf, int *ret) {
    char path[PATH_MAX];
    int r = pci_attr_path(p, bdf, "iommu_group", path, sizeof(path));
    if (r < 0)
        return r;
    _cleanup_free_ char *base = NULL;
    r = link_basename(path, &base);
    if (r < 0)
        return r;
    uint64_t v;
    if (parse_uint64(base, INT32_MAX, &v) < 0)
        return -EINVAL;
    *ret = (int)v;
    return 0;
}

void strv_free(char **v, size_t n) {
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

int strv_push(char ***v, size_t *n, const char *s) {
    char **nv = realloc(*v, (*n + 1) * sizeof(char *));
    if (!nv)
        return -ENOMEM;
    *v = nv;
    if (!(nv[*n] = strdup(s)))
        return -ENOMEM;
    (*n)++;
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names of a directory's entries that are valid BDFs. */
static int list_bdfs(const char *dir, char ***ret, size_t *ret_n) {
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    char **v = NULL;
    size_t n = 0, cap = 0;
    int r = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (!pci_bdf_is_valid(de->d_name))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nv = realloc(v, cap * sizeof(char *));
            if (!nv) {
                r = -ENOMEM;
                break;
            }
            v = nv;
        }
        if (!(v[n] = strdup(de->d_name))) {
            r = -ENOMEM;
            break;
        }
        n++;
    }
    closedir(d);
    if (r < 0) {
        strv_free(v, n);
        return r;
    }
    if (n)
        qsort(v, n, sizeof(char *), cmp_str);
    *ret = v;
    *ret_n = n;
    return 0;
}

int pci_iommu_group_members(const HostPaths *p, int group, char ***ret, size_t *ret_n) {
    char dir[PATH_MAX];
    int n = snprintf(dir, sizeof(dir), "%s/kernel/iommu_groups/%d/devices", p->sysfs, group);
    if (n < 0 || (size_t)n >= sizeof(dir))
        return -ENAMETOOLONG;
    return list_bdfs(dir, ret, ret_n);
}

int pci_list_devices(const HostPaths *p, char ***ret, size_t *ret_n) {
    char dir[PATH_MAX];
    int n = snprintf(dir, sizeof(dir), "%s/bus/pci/devices", p->sysfs);
    if (n < 0 || (size_t)n >= sizeof(dir))
        return -ENAMETOOLONG;
    return list_bdfs(dir, ret, ret_n);
}
