/* procfd.c: map /proc/PID/fd links to accelerator device nodes. */
#include "procfd.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/fileio.h"
#include "util/macro.h"
#include "util/strutil.h"

/* Decimal suffix of at most 6 digits filling the rest of the string. */
static int parse_small_num(const char *s, unsigned *ret) {
    if (!*s || strlen(s) > 6)
        return -ENOENT;
    unsigned v = 0;
    for (; *s; s++) {
        if (!isdigit((unsigned char)*s))
            return -ENOENT;
        v = v * 10 + (unsigned)(*s - '0');
    }
    *ret = v;
    return 0;
}

static int devnode_parse_under(const char *dev_root, const char *path, DevNode *ret) {
    size_t root_len = strlen(dev_root);
    while (root_len > 1 && dev_root[root_len - 1] == '/')
        root_len--;
    if (strncmp(path, dev_root, root_len) != 0 || path[root_len] != '/')
        return -ENOENT;
    char rest[64];
    const char *r = path + root_len + 1;
    size_t n = strlen(r);
    static const char deleted[] = " (deleted)";
    if (n >= sizeof(deleted) - 1 && STREQ(r + n - (sizeof(deleted) - 1), deleted))
        n -= sizeof(deleted) - 1;
    if (n >= sizeof(rest))
        return -ENOENT;
    memcpy(rest, r, n);
    rest[n] = '\0';

    static const struct {
        const char *prefix;
        DevNodeKind kind;
    } table[] = {
            {"nvidia", DEVNODE_NVIDIA},
            {"dri/renderD", DEVNODE_DRI_RENDER},
            {"dri/card", DEVNODE_DRI_CARD},
            {"vfio/", DEVNODE_VFIO},
    };
    if (STREQ(rest, "kfd")) {
        *ret = (DevNode){DEVNODE_KFD, 0};
        return 0;
    }
    for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
        size_t pl = strlen(table[i].prefix);
        unsigned num;
        if (strncmp(rest, table[i].prefix, pl) == 0 && parse_small_num(rest + pl, &num) == 0) {
            *ret = (DevNode){table[i].kind, num};
            return 0;
        }
    }
    return -ENOENT;
}

int devnode_parse(const char *dev_root, const char *path, DevNode *ret) {
    if (!dev_root || !path)
        return -ENOENT;
    /* A process names its device nodes as it sees them: /dev/nvidia0, whatever folder the
     * agent reads that /dev through (an agent in a container with the host's /dev mounted at
     * /host/dev, say). Either name is a holder: missing one would let a GPU in use be rebound
     * (R7). */
    int r = devnode_parse_under(dev_root, path, ret);
    if (r < 0 && !STREQ(dev_root, "/dev"))
        r = devnode_parse_under("/dev", path, ret);
    return r;
}

int devnode_format(const char *dev_root, const DevNode *node, char *buf, size_t size) {
    int n;
    switch (node->kind) {
    case DEVNODE_NVIDIA:
        n = snprintf(buf, size, "%s/nvidia%u", dev_root, node->num);
        break;
    case DEVNODE_DRI_CARD:
        n = snprintf(buf, size, "%s/dri/card%u", dev_root, node->num);
        break;
    case DEVNODE_DRI_RENDER:
        n = snprintf(buf, size, "%s/dri/renderD%u", dev_root, node->num);
        break;
    case DEVNODE_KFD:
        n = snprintf(buf, size, "%s/kfd", dev_root);
        break;
    case DEVNODE_VFIO:
        n = snprintf(buf, size, "%s/vfio/%u", dev_root, node->num);
        break;
    default:
        return -EINVAL;
    }
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static int holder_cmp(const void *a, const void *b) {
    const FdHolder *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    if (x->node.kind != y->node.kind)
        return x->node.kind < y->node.kind ? -1 : 1;
    return x->node.num < y->node.num ? -1 : x->node.num > y->node.num;
}

int procfd_walk(const char *proc_root, ProcFdMatchFn match, ProcFdVisitFn visit, void *userdata) {
    DIR *pd = opendir(proc_root);
    if (!pd)
        return -errno;
    int r = 0;
    for (struct dirent *de; r >= 0 && (de = readdir(pd));) {
        /* pid_max is at most 2^22: a longer name is not a process. */
        if (!string_is_digits(de->d_name) || strlen(de->d_name) > 10)
            continue;
        char fddir[PATH_MAX];
        if ((size_t)snprintf(fddir, sizeof(fddir), "%s/%s/fd", proc_root, de->d_name) >=
            sizeof(fddir))
            continue;
        DIR *fd = opendir(fddir);
        if (!fd)
            continue; /* gone, or not ours to inspect */
        _cleanup_free_ char *comm = NULL;
        for (struct dirent *fe; r >= 0 && (fe = readdir(fd));) {
            if (!string_is_digits(fe->d_name))
                continue;
            char link[PATH_MAX], target[PATH_MAX];
            if ((size_t)snprintf(link, sizeof(link), "%s/%s", fddir, fe->d_name) >= sizeof(link))
                continue;
            ssize_t len = readlink(link, target, sizeof(target) - 1);
            if (len < 0)
                continue;
            target[len] = '\0';
            if (!match(target, link, userdata))
                continue;
            if (!comm) {
                _cleanup_free_ char *cpath = strprintf("%s/%s/comm", proc_root, de->d_name);
                if (!cpath || read_attr_line(cpath, &comm) < 0)
                    comm = strdup("");
                if (!comm) {
                    r = -ENOMEM;
                    break;
                }
            }
            r = visit(&(ProcFdLink){.pid = atoi(de->d_name), .comm = comm, .target = target},
                      userdata);
        }
        closedir(fd);
    }
    closedir(pd);
    return r < 0 ? r : 0;
}

typedef struct ScanState {
    const char *dev_root;
    FdHolder *v;
    size_t n, cap;
} ScanState;

static bool scan_match(const char *target, const char *fd_path, void *userdata) {
    (void)fd_path;
    const ScanState *st = userdata;
    DevNode node;
    return devnode_parse(st->dev_root, target, &node) >= 0;
}

static int scan_visit(const ProcFdLink *link, void *userdata) {
    ScanState *st = userdata;
    DevNode node;
    if (devnode_parse(st->dev_root, link->target, &node) < 0)
        return 0;
    if (st->n == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 16;
        FdHolder *nv = realloc(st->v, cap * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        st->v = nv;
        st->cap = cap;
    }
    FdHolder *h = &st->v[st->n++];
    *h = (FdHolder){.pid = link->pid, .node = node};
    snprintf(h->comm, sizeof(h->comm), "%s", link->comm);
    return 0;
}

int procfd_scan(const char *proc_root, const char *dev_root, FdHolder **ret, size_t *ret_n) {
    ScanState st = {.dev_root = dev_root};
    int r = procfd_walk(proc_root, scan_match, scan_visit, &st);
    if (r < 0) {
        free(st.v);
        return r;
    }
    FdHolder *v = st.v;
    size_t n = st.n;
    if (n) {
        qsort(v, n, sizeof(*v), holder_cmp);
        size_t w = 1;
        for (size_t i = 1; i < n; i++)
            if (holder_cmp(&v[i], &v[w - 1]) != 0)
                v[w++] = v[i];
        n = w;
    }
    *ret = v;
    *ret_n = n;
    return 0;
}
