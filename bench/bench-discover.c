/* bench-discover.c: time machine_discover() on the 8-GPU HGX fixture (target: under
 * 50 ms per discovery). Baseline in the same run: a plain walk of the same tree that opens and
 * reads every file once (the raw cost of the I/O discovery cannot avoid), and discovery
 * without NVML (the cost of loading and querying the fake NVML library).
 * Usage: bench-discover [ITERATIONS] (default 300). */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/discover.h"
#include "config/catalog-yaml.h"

#define HGX TEST_FIXTURES "/machines/hgx-h100-8gpu"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct Stats {
    double mean, p50, p99;
} Stats;

static Stats stats(double *v, int n) {
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += v[i];
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return (Stats){sum / n, v[n / 2], v[(int)(n * 0.99) < n ? (int)(n * 0.99) : n - 1]};
}

/* Read every regular file under dir (following the bus/pci/devices links is not needed: the
 * real directories hold the same files). Returns the number of files read. */
static long walk(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    long n = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.')
            continue;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        struct stat st;
        if (lstat(path, &st) < 0)
            continue;
        if (S_ISDIR(st.st_mode))
            n += walk(path);
        else if (S_ISREG(st.st_mode)) {
            char buf[4096];
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd >= 0) {
                while (read(fd, buf, sizeof(buf)) > 0)
                    ;
                close(fd);
                n++;
            }
        }
    }
    closedir(d);
    return n;
}

static Stats run(const char *label, int iters, const DiscoverOptions *o, const char *walk_root) {
    double *t = calloc((size_t)iters, sizeof(double));
    long files = 0;
    for (int i = 0; i < iters; i++) {
        double t0 = now_ms();
        if (o) {
            MachineInventory *inv = NULL;
            Error err = {0};
            if (machine_discover(o, &inv, &err) < 0 || inv->n_accelerators != 8) {
                fprintf(stderr, "bench-discover: discovery failed: %s\n", error_message(&err));
                exit(1);
            }
            machine_inventory_free(inv);
        } else
            files = walk(walk_root);
        t[i] = now_ms() - t0;
    }
    Stats s = stats(t, iters);
    free(t);
    printf("%-34s mean %7.3f ms  p50 %7.3f ms  p99 %7.3f ms", label, s.mean, s.p50, s.p99);
    if (!o)
        printf("  (%ld files)", files);
    putchar('\n');
    return s;
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 300;
    if (iters <= 0)
        iters = 300;
    Catalog *cat = NULL;
    PciIds *ids = NULL;
    Error err = {0};
    if (catalog_load_file(TEST_DATA "/catalog.yaml", NULL, &cat, &err) < 0 ||
        pci_ids_load(TEST_FIXTURES "/machines/pci.ids", &ids, &err) < 0) {
        fprintf(stderr, "bench-discover: %s\n", error_message(&err));
        return 1;
    }
    setenv("EINSORA_FAKE_NVML", HGX "/nvml.txt", 1);
    DiscoverOptions with = {.sysfs_root = HGX "/sys",
                            .proc_root = HGX "/proc",
                            .nvml_lib = FAKE_NVML_LIB,
                            .catalog = cat,
                            .pci_ids = ids};
    DiscoverOptions without = with;
    without.no_nvml = true;
    printf("discovery of the 8-GPU HGX fixture, %d iterations (target: < 50 ms each)\n", iters);
    Stats base = run("baseline: walk + read every file", iters, NULL, HGX);
    Stats no_nvml = run("discover without NVML", iters, &without, NULL);
    Stats full = run("discover with (fake) NVML", iters, &with, NULL);
    printf("ratio to baseline (mean): without NVML %.2fx, with NVML %.2fx\n",
           no_nvml.mean / base.mean, full.mean / base.mean);
    printf("target < 50 ms per discovery: median %s, p99 %s (p99 is sensitive to other load on the "
           "machine)\n",
           full.p50 < 50 ? "met" : "NOT met", full.p99 < 50 ? "met" : "NOT met");
    catalog_free(cat);
    pci_ids_free(ids);
    return 0;
}
