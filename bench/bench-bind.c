/* bench-bind.c: time of switching a fake 8-GPU node (8 GPUs + 8 audio functions) to vfio-pci
 * and back through the fake kernel (target: under 1 s), next to two baselines
 * measured in the same run: the same round trip on a 1-GPU node, and the dry-run planning
 * of the 8-GPU switch (all checks, no kernel writes). The journal is fsync'd at every step, so
 * the figure depends on the disk under the state folder: by default the fake kernel's temporary
 * folder; EINSORA_BENCH_STATE_DIR=DIR puts it elsewhere (e.g. the agent's real disk). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "agent/bind.h"
#include "fake-kernel.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median seconds of `runs` round trips (dry_run: `runs` plannings) on an n-GPU fake node. */
static double measure(size_t n_gpus, bool dry_run, int runs, const char *state_dir) {
    FakeDevice devs[3 * 8];
    char bdfs[3 * 8][16];
    FakeKernel k;
    static const char *const drivers[] = {"nvidia", "snd_hda_intel", "pcieport", "vfio-pci", NULL};
    if (fake_kernel_create(&k, devs, fake_node_devices(devs, n_gpus, bdfs), drivers) < 0 ||
        fake_kernel_start(&k) < 0) {
        fprintf(stderr, "bench-bind: cannot build the fake kernel\n");
        exit(1);
    }
    BindOptions o;
    bind_options_init(&o);
    char state[PATH_MAX + 8];
    snprintf(state, sizeof(state), "%s/state-%d", state_dir ? state_dir : k.root, (int)getpid());
    host_paths_init(&o.paths, k.sysfs, k.proc, k.dev);
    o.state_dir = state;
    o.timeout_ms = 5000;
    o.dry_run = dry_run;
    SwitchResult *res = calloc(1, sizeof(*res));
    double t[64];
    for (int i = 0; i < runs; i++) {
        Error err = {0};
        double t0 = now_s();
        if (node_switch(&o, BIND_TO_VFIO, res, &err) < 0 ||
            (!dry_run && node_switch(&o, BIND_TO_HOST, res, &err) < 0)) {
            fprintf(stderr, "bench-bind: %s\n", error_message(&err));
            exit(1);
        }
        t[i] = now_s() - t0;
    }
    free(res);
    fake_kernel_destroy(&k);
    if (state_dir) {
        char cmd[PATH_MAX + 32];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", state);
        if (system(cmd) != 0)
            fprintf(stderr, "bench-bind: could not remove %s\n", state);
    }
    qsort(t, (size_t)runs, sizeof(double), cmp_double);
    return t[runs / 2];
}

int main(void) {
    const int runs = 7;
    /* The journal is fsync'd at every step: measure once with it on tmpfs to show the disk's share.
     */
    const char *disk = getenv("EINSORA_BENCH_STATE_DIR");
    double plan8 = measure(8, true, runs, disk);
    double one = measure(1, false, runs, disk);
    double eight = measure(8, false, runs, disk);
    double eight_mem = measure(8, false, runs, "/dev/shm");
    printf("bench-bind: median of %d runs, fake kernel, journal in %s\n", runs,
           disk ? disk : "/tmp");
    printf("  dry-run plan, 8-GPU node (baseline)      %8.2f ms\n", plan8 * 1e3);
    printf("  round trip vfio and back, 1-GPU node     %8.2f ms\n", one * 1e3);
    printf("  round trip vfio and back, 8-GPU node     %8.2f ms   (%.1fx the 1-GPU node, %.1fx the "
           "dry-run plan)\n",
           eight * 1e3, eight / one, eight / plan8);
    printf("  same, journal on tmpfs (/dev/shm)        %8.2f ms   (fsync share %.0f%%)\n",
           eight_mem * 1e3, eight > eight_mem ? 100.0 * (eight - eight_mem) / eight : 0.0);
    printf("  target < 1000 ms: %s\n", eight < 1.0 ? "met" : "NOT met");
    return 0;
}
