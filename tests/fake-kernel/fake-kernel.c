/* fake-kernel.c: a fixture sysfs tree plus a helper process acting as the kernel on writes. */
#include "fake-kernel-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FK_MAX_FIFOS 256

/* ---- the helper process ---- */

typedef struct Fifo {
    char path[PATH_MAX];
    int fd;
    char buf[256];
    size_t len;
} Fifo;

typedef struct Helper {
    FakeKernel *k;
    Fifo fifos[FK_MAX_FIFOS];
    size_t n;
    int ino; /* inotify on every driver_override: the kernel normalises what is written */
    struct {
        int wd;
        char bdf[16];
    } watches[FK_MAX_FIFOS];
    size_t n_watches;
    struct { /* a "late unbind" not applied yet (bdf "" when none) */
        char bdf[16];
        char drv[64];
        long long due_ms; /* applied then, or after the next write taken */
    } late;
} Helper;

#define LATE_UNBIND_MS 100

static long long mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void drain_overrides(Helper *h);

static void hlog(const FakeKernel *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void hlog(const FakeKernel *k, const char *fmt, ...) {
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/.fake-kernel/log", k->root);
    FILE *f = fopen(p, "ae");
    if (!f)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

/* Is there a control line "<a> <b>" (b may be NULL), returning the rest of the line? */
static bool control_has(const FakeKernel *k, const char *prefix, char *rest, size_t size) {
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/.fake-kernel/control", k->root);
    char *text = fk_readfile(p, NULL);
    bool found = false;
    for (char *save = NULL, *line = text ? strtok_r(text, "\n", &save) : NULL; line && !found;
         line = strtok_r(NULL, "\n", &save))
        if (strncmp(line, prefix, strlen(prefix)) == 0 &&
            (line[strlen(prefix)] == '\0' || line[strlen(prefix)] == ' ')) {
            found = true;
            if (rest)
                snprintf(rest, size, "%s", line[strlen(prefix)] ? line + strlen(prefix) + 1 : "");
        }
    free(text);
    return found;
}

static bool fifo_hangs(const FakeKernel *k, const char *path) {
    char line[PATH_MAX + 8];
    size_t skip = strlen(k->sysfs) + 1;
    snprintf(line, sizeof(line), "hang %s", strlen(path) > skip ? path + skip : path);
    return control_has(k, line, NULL, 0);
}

/* Close every FIFO the control file now says hangs, so the next writer blocks in open(2). */
static void apply_hangs(Helper *h) {
    for (size_t i = 0; i < h->n; i++)
        if (h->fifos[i].fd >= 0 && fifo_hangs(h->k, h->fifos[i].path)) {
            close(h->fifos[i].fd);
            h->fifos[i].fd = -1;
        }
}

static void fifo_open(Helper *h, Fifo *f) {
    f->len = 0;
    f->fd = fifo_hangs(h->k, f->path) ? -1 : open(f->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
}

static void add_fifo(Helper *h, const char *path) {
    for (size_t i = 0; i < h->n; i++)
        if (strcmp(h->fifos[i].path, path) == 0)
            return;
    if (h->n == FK_MAX_FIFOS)
        return;
    Fifo *f = &h->fifos[h->n++];
    snprintf(f->path, sizeof(f->path), "%s", path);
    fifo_open(h, f);
}

static void scan_fifos(Helper *h) {
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/.fake-kernel/load", h->k->root);
    add_fifo(h, p);
    snprintf(p, sizeof(p), "%s/.fake-kernel/poke", h->k->root);
    add_fifo(h, p);
    snprintf(p, sizeof(p), "%s/bus/pci/drivers_probe", h->k->sysfs);
    add_fifo(h, p);
    static const char *const dirs[] = {"bus/pci/drivers", "bus/pci/devices"};
    for (size_t i = 0; i < 2; i++) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s/%s", h->k->sysfs, dirs[i]);
        DIR *d = opendir(dir);
        for (struct dirent *de; d && (de = readdir(d));) {
            if (de->d_name[0] == '.')
                continue;
            static const char *const files[] = {"bind", "unbind", "new_id", "reset"};
            for (size_t j = 0; j < 4; j++) {
                snprintf(p, sizeof(p), "%s/%s/%s", dir, de->d_name, files[j]);
                struct stat st;
                if (lstat(p, &st) == 0 && S_ISFIFO(st.st_mode))
                    add_fifo(h, p);
            }
        }
        if (d)
            closedir(d);
    }
}

static void unbind_link(const FakeKernel *k, const char *bdf) {
    char drv[64], p[PATH_MAX];
    fk_current_driver(k, bdf, drv, sizeof(drv));
    if (!drv[0])
        return;
    fk_dev_path(k, bdf, "driver", p, sizeof(p));
    unlink(p);
    snprintf(p, sizeof(p), "%s/bus/pci/drivers/%s/%s", k->sysfs, drv, bdf);
    unlink(p);
}

static unsigned read_hex(const FakeKernel *k, const char *bdf, const char *attr) {
    char p[PATH_MAX];
    fk_dev_path(k, bdf, attr, p, sizeof(p));
    char *s = fk_readfile(p, NULL);
    unsigned v = s ? (unsigned)strtoul(s, NULL, 16) : 0;
    free(s);
    return v;
}

/* The fake's own id table: which loaded driver claims a device when no override is set. */
static const char *native_driver(const FakeKernel *k, const char *bdf) {
    unsigned vendor = read_hex(k, bdf, "vendor"), cls = read_hex(k, bdf, "class");
    if (cls >> 16 == 0x03)
        return vendor == 0x10de ? "nvidia" : vendor == 0x1002 ? "amdgpu" : NULL;
    switch (cls >> 8) {
    case 0x0403:
        return "snd_hda_intel";
    case 0x0c03:
        return "xhci_hcd";
    case 0x0c80:
        return "ucsi_ccg";
    case 0x0200:
        return "ixgbe";
    case 0x0108:
        return "nvme";
    case 0x0604:
        return "pcieport";
    }
    return NULL;
}

static bool driver_loaded(const FakeKernel *k, const char *drv) {
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/bus/pci/drivers/%s", k->sysfs, drv);
    return access(p, F_OK) == 0;
}

/* The kernel keeps driver_override as a string; a write of only white space clears it. */
static void read_override(const FakeKernel *k, const char *bdf, char *buf, size_t size) {
    char p[PATH_MAX];
    fk_dev_path(k, bdf, "driver_override", p, sizeof(p));
    char *s = fk_readfile(p, NULL);
    char *t = s ? s : "";
    while (*t == ' ' || *t == '\t' || *t == '\n')
        t++;
    size_t n = strcspn(t, "\n");
    snprintf(buf, size, "%.*s", (int)n, t);
    if (strcmp(buf, "(null)") == 0)
        buf[0] = '\0';
    char shown[80];
    snprintf(shown, sizeof(shown), "%s\n", buf[0] ? buf : "(null)");
    if (!s || strcmp(s, shown) != 0)
        fk_writef(p, "%s", shown);
    free(s);
}

static bool device_exists(const FakeKernel *k, const char *bdf) {
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/bus/pci/devices/%s", k->sysfs, bdf);
    return access(p, F_OK) == 0;
}

static void remove_device(const FakeKernel *k, const char *bdf) {
    char cmd[PATH_MAX * 2 + 64], real[PATH_MAX], p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/bus/pci/devices/%s", k->sysfs, bdf);
    unbind_link(k, bdf);
    if (!realpath(p, real))
        return;
    unlink(p);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", real);
    if (system(cmd) != 0)
        hlog(k, "could not remove %s", real);
    hlog(k, "%s removed (fell off the bus)", bdf);
}

static void probe(const FakeKernel *k, const char *bdf, const char *only) {
    char drv[64], ovr[64];
    fk_current_driver(k, bdf, drv, sizeof(drv));
    read_override(k, bdf, ovr, sizeof(ovr));
    if (drv[0])
        return;
    const char *want = ovr[0] ? ovr : native_driver(k, bdf);
    if (!want || (only && strcmp(only, want) != 0) || !driver_loaded(k, want))
        return;
    fk_bind_link(k, bdf, want);
    hlog(k, "%s bound to %s", bdf, want);
}

static void reset_device(const FakeKernel *k, const char *bdf) {
    char key[64], how[256] = "ok", p[PATH_MAX];
    snprintf(key, sizeof(key), "reset %s", bdf);
    control_has(k, key, how, sizeof(how));
    hlog(k, "%s reset (%s)", bdf, how);
    snprintf(p, sizeof(p), "%s/kmsg", k->dev);
    if (strcmp(how, "fail") == 0) {
        fk_dev_path(k, bdf, "vendor", p, sizeof(p));
        fk_writef(p, "0xffff\n");
        fk_dev_path(k, bdf, "device", p, sizeof(p));
        fk_writef(p, "0xffff\n");
        fk_dev_path(k, bdf, "config", p, sizeof(p));
        FILE *f = fopen(p, "we");
        if (f) {
            unsigned char ff[64];
            memset(ff, 0xff, sizeof(ff));
            fwrite(ff, 1, sizeof(ff), f);
            fclose(f);
        }
        snprintf(p, sizeof(p), "%s/kmsg", k->dev);
        FILE *km = fopen(p, "ae");
        if (km) {
            fprintf(km, "3,1201,912345678,-;vfio-pci %s: not ready 65535ms after FLR; giving up\n",
                    bdf);
            fclose(km);
        }
    } else if (strcmp(how, "degraded") == 0) {
        fk_dev_path(k, bdf, "current_link_speed", p, sizeof(p));
        fk_writef(p, "2.5 GT/s PCIe\n");
        fk_dev_path(k, bdf, "current_link_width", p, sizeof(p));
        fk_writef(p, "8\n");
    } else if (strcmp(how, "d3cold") == 0) {
        fk_dev_path(k, bdf, "power_state", p, sizeof(p));
        fk_writef(p, "D3cold\n");
    } else if (strncmp(how, "kmsg:", 5) == 0) {
        FILE *km = fopen(p, "ae");
        if (km) {
            fprintf(km, "4,1202,912345679,-;%s\n", how + 5);
            fclose(km);
        }
    }
}

static void handle(Helper *h, const char *path, char *msg) {
    FakeKernel *k = h->k;
    msg[strcspn(msg, "\n")] = '\0';
    const char *base = strrchr(path, '/') + 1;
    char dirname_buf[PATH_MAX];
    snprintf(dirname_buf, sizeof(dirname_buf), "%s", path);
    *strrchr(dirname_buf, '/') = '\0';
    const char *parent = strrchr(dirname_buf, '/') + 1;
    hlog(k, "write %s <- %s", path + strlen(k->root), msg);

    if (strcmp(base, "poke") == 0) {
        /* fake_kernel_control waits for this answer: the new control lines are in force, and
         * every driver_override written before the poke reads back as the kernel shows it. */
        apply_hangs(h);
        drain_overrides(h);
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/.fake-kernel/ack", k->root);
        int fd = open(p, O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            ssize_t unused = write(fd, "1", 1);
            (void)unused;
            close(fd);
        }
        return;
    }
    if (strcmp(base, "load") == 0) {
        fk_load_driver(k, msg);
        scan_fifos(h);
        return;
    }
    const char *bdf = strcmp(base, "reset") == 0 ? parent : msg;
    char key[128];
    snprintf(key, sizeof(key), "enodev %s", bdf);
    if (control_has(k, key, NULL, 0) && device_exists(k, bdf)) {
        remove_device(k, bdf);
        return;
    }
    if (!device_exists(k, bdf))
        return;
    if (strcmp(base, "new_id") == 0) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/.fake-kernel/new_id-used", k->root);
        fk_writef(p, "%s <- %s\n", parent, msg);
    } else if (strcmp(base, "unbind") == 0) {
        char drv[64];
        snprintf(key, sizeof(key), "ebusy unbind %s", bdf);
        fk_current_driver(k, bdf, drv, sizeof(drv));
        if (control_has(k, key, NULL, 0) || strcmp(drv, parent) != 0)
            return;
        snprintf(key, sizeof(key), "late unbind %s", bdf);
        if (control_has(k, key, NULL, 0) && !h->late.bdf[0]) {
            snprintf(h->late.bdf, sizeof(h->late.bdf), "%s", bdf);
            snprintf(h->late.drv, sizeof(h->late.drv), "%s", parent);
            h->late.due_ms = mono_ms() + LATE_UNBIND_MS;
            return;
        }
        unbind_link(k, bdf);
        hlog(k, "%s unbound from %s", bdf, parent);
    } else if (strcmp(base, "drivers_probe") == 0) {
        snprintf(key, sizeof(key), "ebusy probe %s", bdf);
        if (!control_has(k, key, NULL, 0))
            probe(k, bdf, NULL);
    } else if (strcmp(base, "bind") == 0)
        probe(k, bdf, parent);
    else if (strcmp(base, "reset") == 0)
        reset_device(k, bdf);
}

static void watch_overrides(Helper *h) {
    h->ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/bus/pci/devices", h->k->sysfs);
    DIR *d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d)) && h->n_watches < FK_MAX_FIFOS;) {
        if (de->d_name[0] == '.')
            continue;
        char p[PATH_MAX];
        fk_dev_path(h->k, de->d_name, "driver_override", p, sizeof(p));
        int wd = inotify_add_watch(h->ino, p, IN_CLOSE_WRITE);
        if (wd < 0)
            continue;
        h->watches[h->n_watches].wd = wd;
        snprintf(h->watches[h->n_watches++].bdf, 16, "%s", de->d_name);
    }
    if (d)
        closedir(d);
}

/* Normalise every driver_override written since we last looked, as the kernel's store does. */
static void drain_overrides(Helper *h) {
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n;
    while ((n = read(h->ino, buf, sizeof(buf))) > 0)
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            for (size_t i = 0; i < h->n_watches; i++)
                if (h->watches[i].wd == ev->wd && device_exists(h->k, h->watches[i].bdf)) {
                    char ovr[64];
                    read_override(h->k, h->watches[i].bdf, ovr, sizeof(ovr));
                }
            p += sizeof(struct inotify_event) + ev->len;
        }
}

/* A PCI address is 12 characters, "0000:01:00.0": is buf a run of several, back to back? */
static bool is_bdf_run(const char *buf, size_t len) {
    if (len <= 12 || len % 12 != 0)
        return false;
    for (size_t i = 0; i < len; i += 12)
        if (buf[i + 4] != ':' || buf[i + 7] != ':' || buf[i + 10] != '.')
            return false;
    return true;
}

/* The kernel sees one store per write(); a FIFO may join two writers' bytes when the second
 * (say, a recovering agent repeating what its killed predecessor's writer child still wrote)
 * comes before the helper read the first one's end: split them again. */
static void handle_writes(Helper *h, const char *path, char *msg) {
    size_t len = strcspn(msg, "\n");
    if (!is_bdf_run(msg, len)) {
        handle(h, path, msg);
        return;
    }
    for (size_t i = 0; i < len; i += 12) {
        char one[13];
        memcpy(one, msg + i, 12);
        one[12] = '\0';
        handle(h, path, one);
    }
}

/* Apply the late unbind, if any: only if the device is still on the driver it was told to leave. */
static void apply_late_unbind(Helper *h) {
    if (!h->late.bdf[0])
        return;
    char drv[64];
    fk_current_driver(h->k, h->late.bdf, drv, sizeof(drv));
    if (strcmp(drv, h->late.drv) == 0) {
        unbind_link(h->k, h->late.bdf);
        hlog(h->k, "%s unbound from %s (late)", h->late.bdf, h->late.drv);
    }
    h->late.bdf[0] = '\0';
}

_Noreturn static void helper_main(FakeKernel *k) {
    static Helper h;
    h.k = k;
    scan_fifos(&h);
    watch_overrides(&h);
    for (;;) {
        struct pollfd pfd[FK_MAX_FIFOS + 1];
        size_t map[FK_MAX_FIFOS + 1], n = 0;
        pfd[n] = (struct pollfd){.fd = h.ino, .events = POLLIN};
        map[n++] = SIZE_MAX;
        for (size_t i = 0; i < h.n; i++) {
            if (h.fifos[i].fd < 0 && !fifo_hangs(k, h.fifos[i].path))
                fifo_open(&h, &h.fifos[i]);
            if (h.fifos[i].fd >= 0) {
                pfd[n] = (struct pollfd){.fd = h.fifos[i].fd, .events = POLLIN};
                map[n++] = i;
            }
        }
        if (h.late.bdf[0] && mono_ms() >= h.late.due_ms)
            apply_late_unbind(&h);
        long long left = h.late.bdf[0] ? h.late.due_ms - mono_ms() : 50;
        int wait_ms = left < 0 ? 0 : left > 50 ? 50 : (int)left;
        if (poll(pfd, n, wait_ms) <= 0)
            continue;
        for (size_t j = 0; j < n; j++) {
            if (!pfd[j].revents)
                continue;
            if (map[j] == SIZE_MAX) {
                drain_overrides(&h);
                continue;
            }
            Fifo *f = &h.fifos[map[j]];
            ssize_t got = read(f->fd, f->buf + f->len, sizeof(f->buf) - 1 - f->len);
            if (got > 0) {
                f->len += (size_t)got;
                continue;
            }
            if (got < 0 && errno == EAGAIN)
                continue;
            /* EOF: the writer closed; one write is one message, as with a sysfs store. */
            close(f->fd);
            f->buf[f->len] = '\0';
            if (f->len > 0) {
                bool late_before = h.late.bdf[0] != '\0';
                handle_writes(&h, f->path, f->buf);
                if (late_before) /* the write after the unbind was taken first */
                    apply_late_unbind(&h);
            }
            fifo_open(&h, f);
        }
    }
}

int fake_kernel_start(FakeKernel *k) {
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        /* A test that fails an assertion exits without teardown: the helper goes with it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1)
            _exit(0);
        helper_main(k);
    }
    k->helper = pid;
    return 0;
}

void fake_kernel_stop(FakeKernel *k) {
    if (k->helper > 0) {
        kill(k->helper, SIGKILL);
        waitpid(k->helper, NULL, 0);
        k->helper = -1;
    }
}

int fake_kernel_control(FakeKernel *k, const char *line) {
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/.fake-kernel/control", k->root);
    FILE *f = fopen(p, "ae");
    if (!f)
        return -errno;
    fprintf(f, "%s\n", line);
    if (fclose(f) != 0)
        return -errno;
    return fake_kernel_sync(k);
}

int fake_kernel_sync(const FakeKernel *k) {
    char p[PATH_MAX];
    if (k->helper <= 0)
        return 0;
    /* Poke the helper and wait for its answer, so the line is in force when we return. */
    snprintf(p, sizeof(p), "%s/.fake-kernel/poke", k->root);
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "1", 1) != 1)
        return -errno;
    close(fd);
    snprintf(p, sizeof(p), "%s/.fake-kernel/ack", k->root);
    fd = open(p, O_RDONLY | O_CLOEXEC);
    char c;
    if (fd < 0 || read(fd, &c, 1) != 1)
        return -EIO;
    close(fd);
    return 0;
}

int fake_kernel_add_holder(FakeKernel *k, int pid, const char *comm, const char *dev_rel) {
    char p[PATH_MAX], t[PATH_MAX];
    snprintf(p, sizeof(p), "%s/%d/fd", k->proc, pid);
    int r = fk_mkdir_p(p);
    if (r < 0)
        return r;
    snprintf(p, sizeof(p), "%s/%d/comm", k->proc, pid);
    fk_writef(p, "%s\n", comm);
    snprintf(p, sizeof(p), "%s/%d/fd/3", k->proc, pid);
    snprintf(t, sizeof(t), "%s/%s", k->dev, dev_rel);
    return symlink(t, p) < 0 ? -errno : 0;
}
