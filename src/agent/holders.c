/* holders.c: device files of a PCI function and the processes holding them. */
#include "holders.h"

#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent/procfd.h"
#include "util/fileio.h"
#include "util/macro.h"
#include "util/strutil.h"

static int push_path(char ***v, size_t *n, char *s) {
    if (!s)
        return -ENOMEM;
    char **nv = realloc(*v, (*n + 1) * sizeof(char *));
    if (!nv) {
        free(s);
        return -ENOMEM;
    }
    nv[(*n)++] = s;
    *v = nv;
    return 0;
}

/* The minor number from "Device Minor: 0" in the nvidia driver's per-GPU information file. */
static int nvidia_minor(const HostPaths *p, const char *bdf) {
    _cleanup_free_ char *path = strprintf("%s/driver/nvidia/gpus/%s/information", p->proc, bdf);
    _cleanup_free_ char *text = NULL;
    size_t len;
    if (!path || read_full_file(path, 64 * 1024, &text, &len) < 0)
        return -ENOENT;
    const char *m = strstr(text, "Device Minor:");
    if (!m)
        return -ENOENT;
    m += strlen("Device Minor:");
    while (*m == ' ' || *m == '\t')
        m++;
    char *end;
    long v = strtol(m, &end, 10);
    return end == m || v < 0 || v > 255 ? -ENOENT : (int)v;
}

int gpu_device_files(const HostPaths *p, const char *bdf, int iommu_group, char ***ret,
                     size_t *ret_n) {
    char **v = NULL;
    size_t n = 0;
    int r = 0;
    int minor = nvidia_minor(p, bdf);
    _cleanup_free_ char *driver = NULL;
    (void)pci_driver_name(p, bdf, &driver);
    if (minor >= 0)
        r = push_path(&v, &n, strprintf("%s/nvidia%d", p->dev, minor));
    else if (driver && STREQ(driver, "nvidia"))
        /* Without the minor we cannot tell which /dev/nvidiaN is this GPU: any of them counts,
         * listed in /dev or not (a pattern, see holder_path_matches()). */
        r = push_path(&v, &n, strprintf("%s/nvidia" DEVICE_NUMBER_PATTERN, p->dev));
    /* ROCm's compute node is one for every AMD GPU of the machine: a process holding it may
     * run on this one (R7, R12), as discovery reports it. */
    if (r >= 0 && driver && STREQ(driver, "amdgpu"))
        r = push_path(&v, &n, strprintf("%s/kfd", p->dev));
    char drm[PATH_MAX];
    if (r >= 0 && pci_attr_path(p, bdf, "drm", drm, sizeof(drm)) >= 0) {
        DIR *d = opendir(drm);
        for (struct dirent *de; r >= 0 && d && (de = readdir(d));)
            if (string_has_prefix(de->d_name, "card") || string_has_prefix(de->d_name, "renderD"))
                r = push_path(&v, &n, strprintf("%s/dri/%s", p->dev, de->d_name));
        if (d)
            closedir(d);
    }
    /* The other functions a rebind moves with the GPU (R7): an HDMI audio function's sound
     * card (/dev/snd/<pcmC1D3p|controlC1|hwC1D0...>, as sysfs names them under
     * sound/cardN), a USB-C controller's buses (/dev/bus/usb/<bus>/<device>). */
    char sub[PATH_MAX];
    if (r >= 0 && pci_attr_path(p, bdf, "sound", sub, sizeof(sub)) >= 0) {
        DIR *d = opendir(sub);
        for (struct dirent *de; r >= 0 && d && (de = readdir(d));) {
            if (!string_has_prefix(de->d_name, "card"))
                continue;
            _cleanup_free_ char *card = strprintf("%s/%s", sub, de->d_name);
            DIR *c = card ? opendir(card) : NULL;
            for (struct dirent *ce; r >= 0 && c && (ce = readdir(c));)
                if (string_has_prefix(ce->d_name, "pcmC") ||
                    string_has_prefix(ce->d_name, "controlC") ||
                    string_has_prefix(ce->d_name, "hwC") || string_has_prefix(ce->d_name, "midiC"))
                    r = push_path(&v, &n, strprintf("%s/snd/%s", p->dev, ce->d_name));
            if (c)
                closedir(c);
        }
        if (d)
            closedir(d);
    }
    if (r >= 0 && pci_attr_path(p, bdf, NULL, sub, sizeof(sub)) >= 0) {
        DIR *d = opendir(sub);
        for (struct dirent *de; r >= 0 && d && (de = readdir(d));) {
            unsigned bus;
            char tail;
            if (sscanf(de->d_name, "usb%u%c", &bus, &tail) == 1 && bus > 0 && bus < 1000)
                r = push_path(&v, &n,
                              strprintf("%s/bus/usb/%03u/" DEVICE_NUMBER_PATTERN, p->dev, bus));
        }
        if (d)
            closedir(d);
    }
    if (r >= 0 && iommu_group >= 0)
        r = push_path(&v, &n, strprintf("%s/vfio/%d", p->dev, iommu_group));
    if (r < 0) {
        strv_free(v, n);
        return r;
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

/* Copy, cutting what does not fit (a comm or a path shown to a person). */
static void copy_cut(char *dst, size_t size, const char *src) {
    size_t l = strnlen(src, size - 1);
    memcpy(dst, src, l);
    dst[l] = '\0';
}

static int push_holder(Holder **v, size_t *n, int pid, const char *comm, const char *path) {
    Holder *nv = realloc(*v, (*n + 1) * sizeof(Holder));
    if (!nv)
        return -ENOMEM;
    *v = nv;
    Holder *h = &nv[(*n)++];
    *h = (Holder){.pid = pid};
    copy_cut(h->comm, sizeof(h->comm), comm);
    copy_cut(h->path, sizeof(h->path), path);
    return 0;
}

typedef struct ScanState {
    char *const *paths;
    size_t n_paths;
    /* The same paths as the processes that hold them name them, where the agent reads /dev
     * through another folder (--dev-root /host/dev: an agent in a container with the host's
     * /dev mounted there): /dev/... Made once per scan, not per fd link. */
    char **aliases;
    size_t n_aliases;
    dev_t *rdevs; /* the character devices among paths: an fd on one is held under any name */
    size_t n_rdevs;
    Holder *v;
    size_t n;
} ScanState;

/* Whether an fd's link target is device file `path`: the same path, also once the file was
 * deleted (" (deleted)": the handle is still open), and for a path ending in
 * DEVICE_NUMBER_PATTERN, that prefix followed by any number. */
static bool holder_path_matches(const char *target, const char *path) {
    static const char deleted[] = " (deleted)";
    size_t tl = strlen(target), pl = strlen(path), dl = sizeof(deleted) - 1;
    if (tl >= dl && STREQ(target + tl - dl, deleted))
        tl -= dl;
    size_t ql = sizeof(DEVICE_NUMBER_PATTERN) - 1;
    if (pl >= ql && STREQ(path + pl - ql, DEVICE_NUMBER_PATTERN)) {
        pl -= ql;
        if (tl <= pl || strncmp(target, path, pl) != 0)
            return false;
        for (size_t i = pl; i < tl; i++)
            if (target[i] < '0' || target[i] > '9')
                return false;
        return true;
    }
    return tl == pl && strncmp(target, path, pl) == 0;
}

static bool scan_match(const char *target, const char *fd_path, void *userdata) {
    const ScanState *st = userdata;
    for (size_t i = 0; i < st->n_paths; i++)
        if (holder_path_matches(target, st->paths[i]))
            return true;
    for (size_t i = 0; i < st->n_aliases; i++)
        if (holder_path_matches(target, st->aliases[i]))
            return true;
    /* A container given the device under another name (--device /dev/nvidia0:/dev/gpu) or a
     * node made with mknod elsewhere shows that name in its fd link: the device number tells. */
    struct stat sb;
    if (st->n_rdevs == 0 || stat(fd_path, &sb) < 0 || !S_ISCHR(sb.st_mode))
        return false;
    for (size_t i = 0; i < st->n_rdevs; i++)
        if (sb.st_rdev == st->rdevs[i])
            return true;
    return false;
}

static int push_rdev(dev_t **v, size_t *n, const char *path) {
    struct stat sb;
    if (stat(path, &sb) < 0 || !S_ISCHR(sb.st_mode))
        return 0; /* absent, or a fixture's regular file: matched by path only */
    dev_t *nv = realloc(*v, (*n + 1) * sizeof(dev_t));
    if (!nv)
        return -ENOMEM;
    nv[(*n)++] = sb.st_rdev;
    *v = nv;
    return 0;
}

/* The device numbers of those of paths that are character devices now; a path ending in
 * DEVICE_NUMBER_PATTERN (itself a glob) stands for every such file in /dev. */
static int collect_rdevs(char *const *paths, size_t n_paths, dev_t **ret, size_t *ret_n) {
    dev_t *v = NULL;
    size_t n = 0, ql = sizeof(DEVICE_NUMBER_PATTERN) - 1;
    int r = 0;
    for (size_t i = 0; r >= 0 && i < n_paths; i++) {
        size_t pl = strlen(paths[i]);
        if (pl < ql || !STREQ(paths[i] + pl - ql, DEVICE_NUMBER_PATTERN)) {
            r = push_rdev(&v, &n, paths[i]);
            continue;
        }
        glob_t g;
        int gr = glob(paths[i], GLOB_NOSORT, NULL, &g);
        if (gr == GLOB_NOSPACE)
            r = -ENOMEM;
        for (size_t j = 0; gr == 0 && r >= 0 && j < g.gl_pathc; j++)
            r = push_rdev(&v, &n, g.gl_pathv[j]);
        if (gr == 0)
            globfree(&g);
    }
    if (r < 0) {
        free(v);
        return r;
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

/* st->aliases: each of paths under dev_root (kept without a trailing slash, host_paths_init)
 * as /dev/...; none when dev_root is /dev. */
static int make_aliases(ScanState *st, const char *dev_root) {
    size_t dl = strlen(dev_root);
    if (STREQ(dev_root, "/dev"))
        return 0;
    st->aliases = calloc(st->n_paths ? st->n_paths : 1, sizeof(char *));
    if (!st->aliases)
        return -ENOMEM;
    for (size_t i = 0; i < st->n_paths; i++) {
        const char *path = st->paths[i];
        if (strncmp(path, dev_root, dl) != 0 || path[dl] != '/')
            continue;
        if (!(st->aliases[st->n_aliases] = strprintf("/dev%s", path + dl)))
            return -ENOMEM;
        st->n_aliases++;
    }
    return 0;
}

static int scan_visit(const ProcFdLink *link, void *userdata) {
    ScanState *st = userdata;
    return push_holder(&st->v, &st->n, link->pid, link->comm[0] ? link->comm : "?", link->target);
}

int holders_scan_proc(const HostPaths *p, char *const *paths, size_t n_paths, Holder **ret,
                      size_t *ret_n, void *userdata, Error *err) {
    ScanState st = {.paths = paths, .n_paths = n_paths};
    int r = collect_rdevs(paths, n_paths, &st.rdevs, &st.n_rdevs);
    if (r >= 0)
        r = make_aliases(&st, p->dev);
    if (r >= 0)
        r = procfd_walk(p->proc, scan_match, scan_visit, &st);
    free(st.rdevs);
    for (size_t i = 0; i < st.n_aliases; i++)
        free(st.aliases[i]);
    free(st.aliases);
    if (r < 0) {
        free(st.v);
        if (r == -ENOMEM)
            return error_set(err, r, "out of memory");
        return error_set(err, r, "could not list processes in %s: %s", p->proc, strerror(-r));
    }
    *ret = st.v;
    *ret_n = st.n;
    return 0;
}

char *holders_describe(const Holder *h, size_t n) {
    StrBuf b = {0};
    for (size_t i = 0; i < n && i < 5; i++)
        strbuf_printf(&b, "%s%s (pid %d) holds %s", i ? "; " : "", h[i].comm, h[i].pid, h[i].path);
    if (n > 5)
        strbuf_printf(&b, "; and %zu more", n - 5);
    if (!strbuf_cstr(&b))
        return NULL;
    return b.data;
}
