/* reset-check.c: N reset cycles of a GPU on vfio-pci and the checks after each (R9). */
#include "reset-check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/group.h"
#include "agent/kernel-write.h"
#include "agent/records.h"
#include "util/macro.h"
#include "util/strutil.h"

const char *reset_verdict_to_string(ResetVerdict v) {
    return v == RESET_PASS ? "pass" : v == RESET_DEGRADED ? "degraded" : "fail";
}

void reset_check_options_init(ResetCheckOptions *o) {
    *o = (ResetCheckOptions){.cycles = 3, .settle_ms = 100};
    bind_options_init(&o->bind);
}

ResetVerdict reset_classify_kmsg_line(const char *line) {
    static const char *const fail[] = {
            "not ready",           "Unable to change power state", "fallen off the bus",
            "Uncorrected (Fatal)", "Uncorrected (Non-Fatal)",      "Uncorrectable"};
    static const char *const degraded[] = {"timed out waiting for pending transaction"};
    for (size_t i = 0; i < ARRAY_SIZE(fail); i++)
        if (string_contains_nocase(line, fail[i]))
            return RESET_FAIL;
    for (size_t i = 0; i < ARRAY_SIZE(degraded); i++)
        if (string_contains_nocase(line, degraded[i]))
            return RESET_DEGRADED;
    return RESET_PASS;
}

static void add_reason(ResetCheckResult *res, ResetVerdict v, const char *fmt, ...) _printf_(3, 4);
static void add_reason(ResetCheckResult *res, ResetVerdict v, const char *fmt, ...) {
    if (v > res->verdict)
        res->verdict = v;
    if (res->n_reasons == RESET_MAX_REASONS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->reasons[res->n_reasons++], sizeof(res->reasons[0]), fmt, ap);
    va_end(ap);
}

typedef struct Link {
    double speed; /* GT/s, 0 when unknown */
    unsigned width;
    char power[16];
} Link;

static void read_link(const HostPaths *p, const char *bdf, Link *l) {
    *l = (Link){0};
    _cleanup_free_ char *speed = NULL, *width = NULL, *power = NULL;
    if (pci_read_attr(p, bdf, "current_link_speed", &speed) >= 0)
        l->speed = strtod(speed, NULL);
    if (pci_read_attr(p, bdf, "current_link_width", &width) >= 0)
        l->width = (unsigned)strtoul(width, NULL, 10);
    if (pci_read_attr(p, bdf, "power_state", &power) >= 0)
        snprintf(l->power, sizeof(l->power), "%s", power);
}

static void format_link(const Link *l, char *buf, size_t size) {
    snprintf(buf, size, "%.1f GT/s x%u, %s", l->speed, l->width,
             l->power[0] ? l->power : "power state unknown");
}

/* The device as seen after one reset. */
static void check_device(const ResetCheckOptions *o, const char *bdf, const Link *before,
                         unsigned cycle, ResetCheckResult *res) {
    const HostPaths *p = &o->bind.paths;
    uint32_t vendor = 0xffff, device = 0xffff;
    (void)pci_read_hex_attr(p, bdf, "vendor", &vendor);
    (void)pci_read_hex_attr(p, bdf, "device", &device);
    if (vendor == 0xffff || device == 0xffff) {
        add_reason(res, RESET_FAIL,
                   "after reset %u the card reads as vendor 0x%04x device 0x%04x: it did not come "
                   "back",
                   cycle, vendor, device);
        return;
    }
    char path[PATH_MAX];
    unsigned char cfg[4] = {0xff, 0xff, 0xff, 0xff};
    ssize_t n = -1;
    if (pci_attr_path(p, bdf, "config", path, sizeof(path)) >= 0) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            n = read(fd, cfg, sizeof(cfg));
            close(fd);
        }
    }
    if (n != (ssize_t)sizeof(cfg) || (cfg[0] == 0xff && cfg[1] == 0xff))
        add_reason(res, RESET_FAIL, "after reset %u the card's configuration space cannot be read",
                   cycle);
    Link now;
    read_link(p, bdf, &now);
    /* vfio-pci idles an unused device in D3hot; coming back to where it was is fine. */
    if (now.power[0] && STRNEQ(now.power, "D0") && STRNEQ(now.power, before->power))
        add_reason(res, RESET_FAIL, "after reset %u the card is in power state %s instead of D0",
                   cycle, now.power);
    if (now.speed < before->speed || now.width < before->width) {
        add_reason(res, RESET_DEGRADED,
                   "after reset %u the PCIe link fell from %.1f GT/s x%u to %.1f GT/s x%u", cycle,
                   before->speed, before->width, now.speed, now.width);
    }
}

/* New kernel-log text since fd's position: lines about the GPU's slot of a known failure kind. */
static void check_kmsg(int fd, const char *bdf, ResetCheckResult *res) {
    if (fd < 0)
        return;
    StrBuf b = {0};
    char chunk[8192];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n > 0) {
            strbuf_append(&b, chunk, (size_t)n);
            /* /dev/kmsg returns one record per read, without a newline guarantee between them. */
            if (chunk[n - 1] != '\n')
                strbuf_append(&b, "\n", 1);
            continue;
        }
        if (n < 0 && errno == EPIPE)
            continue; /* /dev/kmsg: records were overwritten; carry on from the next */
        break;
    }
    const char *text = strbuf_cstr(&b);
    char slot[11];
    snprintf(slot, sizeof(slot), "%.10s",
             bdf); /* "0000:01:00": NVRM names the slot, not the function */
    for (const char *l = text; l && *l;) {
        const char *eol = strchr(l, '\n');
        size_t len = eol ? (size_t)(eol - l) : strlen(l);
        char line[512];
        snprintf(line, sizeof(line), "%.*s", (int)MIN(len, sizeof(line) - 1), l);
        const char *msg = strchr(line, ';');
        msg = msg ? msg + 1 : line;
        ResetVerdict v = strstr(msg, slot) ? reset_classify_kmsg_line(msg) : RESET_PASS;
        if (v != RESET_PASS)
            add_reason(res, v, "the kernel logged: %s", msg);
        l = eol ? eol + 1 : NULL;
    }
    strbuf_done(&b);
}

static int refuse_if_busy(const ResetCheckOptions *o, const GpuGroup *g, Error *err) {
    _cleanup_free_ char *driver = NULL;
    if (pci_driver_name(&o->bind.paths, g->gpu, &driver) < 0 || STRNEQ(driver, "vfio-pci"))
        return error_set(err, -EPERM,
                         "GPU %s is on %s, not vfio-pci; the reset check runs on a GPU given to "
                         "VMs (run 'einsora agent bind %s --to vfio' first)",
                         g->gpu, driver ? driver : "no driver", g->gpu);
    char **ids = NULL;
    size_t n_ids = 0;
    int r = agent_records_for_gpu(o->bind.state_dir, g->gpu, &ids, &n_ids, err);
    if (r < 0)
        return r;
    if (n_ids) {
        r = error_set(err, -EBUSY,
                      "GPU %s is running workload %s (as the agent's records show); the reset "
                      "check waits until it stops",
                      g->gpu, ids[0]);
        strv_free(ids, n_ids);
        return r;
    }
    char **paths = NULL;
    size_t n_paths = 0;
    if (gpu_device_files(&o->bind.paths, g->gpu, g->iommu_group, &paths, &n_paths) < 0)
        return error_set(err, -ENOMEM, "out of memory");
    Holder *h = NULL;
    size_t n_h = 0;
    HoldersFn fn = o->bind.holders ? o->bind.holders : holders_scan_proc;
    r = n_paths ? fn(&o->bind.paths, paths, n_paths, &h, &n_h, o->bind.holders_userdata, err) : 0;
    strv_free(paths, n_paths);
    if (r >= 0 && n_h) {
        _cleanup_free_ char *who = holders_describe(h, n_h);
        r = error_set(err, -EBUSY, "GPU %s is in use: %s; the reset check waits until it is free",
                      g->gpu, strempty(who));
    }
    free(h);
    return r;
}

int gpu_reset_check(const ResetCheckOptions *o, const char *bdf, ResetCheckResult *ret,
                    Error *err) {
    if (o->cycles == 0 || o->cycles > 100 || o->settle_ms < 0)
        return error_set(err, -EINVAL, "the reset check needs between 1 and 100 cycles");
    GpuGroup g;
    int r = gpu_group_load(&o->bind.paths, bdf, &g, err);
    if (r < 0)
        return r;
    if ((r = refuse_if_busy(o, &g, err)) < 0)
        return r;
    if (!o->bind.dry_run && (r = agent_state_dir_ensure(o->bind.state_dir, err)) < 0)
        return r;

    ResetCheckResult res = {.verdict = RESET_PASS};
    snprintf(res.gpu, sizeof(res.gpu), "%s", bdf);
    _cleanup_free_ char *methods = NULL;
    char reset_path[PATH_MAX];
    r = pci_read_attr(&o->bind.paths, bdf, "reset_method", &methods);
    snprintf(res.reset_method, sizeof(res.reset_method), "%s", r >= 0 ? methods : "");
    if (pci_attr_path(&o->bind.paths, bdf, "reset", reset_path, sizeof(reset_path)) < 0 ||
        access(reset_path, F_OK) < 0 || (r >= 0 && isempty(methods)))
        add_reason(&res, RESET_FAIL,
                   "the card offers no reset method, so a VM on it could not be restarted cleanly");

    Link before, after;
    read_link(&o->bind.paths, bdf, &before);
    format_link(&before, res.link_before, sizeof(res.link_before));
    char kmsg[PATH_MAX];
    snprintf(kmsg, sizeof(kmsg), "%s", o->kmsg_path ? o->kmsg_path : "");
    if (!o->kmsg_path &&
        (size_t)snprintf(kmsg, sizeof(kmsg), "%s/kmsg", o->bind.paths.dev) >= sizeof(kmsg))
        return error_set(err, -ENAMETOOLONG, "the device root %s is too long", o->bind.paths.dev);
    int kfd = open(kmsg, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (kfd >= 0)
        (void)lseek(kfd, 0, SEEK_END); /* only what the resets cause */

    for (unsigned c = 1; c <= o->cycles && res.verdict != RESET_FAIL && !o->bind.dry_run; c++) {
        Error werr = {0};
        r = kernel_write(reset_path, "1", o->bind.timeout_ms, &werr);
        res.cycles_run = c;
        if (r < 0) {
            add_reason(&res, RESET_FAIL, "reset %u %s: %s", c,
                       r == -ETIMEDOUT ? "hung" : "was refused", error_message(&werr));
            break;
        }
        usleep((useconds_t)o->settle_ms * 1000);
        check_device(o, bdf, &before, c, &res);
    }
    check_kmsg(kfd, bdf, &res);
    if (kfd >= 0)
        close(kfd);
    read_link(&o->bind.paths, bdf, &after);
    format_link(&after, res.link_after, sizeof(res.link_after));

    if (res.verdict == RESET_FAIL && !o->bind.dry_run) {
        _cleanup_free_ char *reason = strprintf("reset-cycle check failed: %s", res.reasons[0]);
        if ((r = agent_quarantine_set(o->bind.state_dir, bdf, reason ? reason : res.reasons[0],
                                      err)) < 0)
            return r;
        res.quarantined = true;
    }
    *ret = res;
    return 0;
}
