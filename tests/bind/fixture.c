/* fixture.c: fake-kernel machines for the bind tests. */
#include "fixture.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

void fixture_setup(BindFixture *f, const FakeDevice *devs, size_t n, bool without_vfio) {
    static const char *const with[] = {"nvidia",   "snd_hda_intel", "xhci_hcd",
                                       "ucsi_ccg", "pcieport",      "ixgbe",
                                       "amdgpu",   "vfio-pci",      NULL};
    static const char *const without[] = {"nvidia",   "snd_hda_intel", "xhci_hcd", "ucsi_ccg",
                                          "pcieport", "ixgbe",         "amdgpu",   NULL};
    cr_assert_eq(fake_kernel_create(&f->k, devs, n, without_vfio ? without : with), 0);
    cr_assert_eq(fake_kernel_start(&f->k), 0);
    bind_options_init(&f->o);
    cr_assert_eq(host_paths_init(&f->o.paths, f->k.sysfs, f->k.proc, f->k.dev), 0);
    cr_assert_lt((size_t)snprintf(f->state, sizeof(f->state), "%s/state", f->k.root),
                 sizeof(f->state));
    f->o.state_dir = f->state;
    /* Generous: the fake kernel is a helper process that a loaded 2-core machine may not
     * schedule for a while; only the tests that simulate a hang use a short timeout. */
    f->o.timeout_ms = 5000;
    f->modprobe = fake_kernel_modprobe(&f->k);
    f->o.modprobe = f->modprobe;
}

void fixture_teardown(BindFixture *f) {
    fake_kernel_destroy(&f->k);
    free(f->modprobe);
    f->modprobe = NULL;
}

size_t fixture_one_gpu(FakeDevice *devs) {
    devs[0] = (FakeDevice){"0000:00:01.0", 0x8086, 0x1bb0, 0x060400, "pcieport", 100,
                           NULL,           false,  -1};
    devs[1] = (FakeDevice){"0000:01:00.0", 0x10de, 0x2684, 0x030000, "nvidia", 1,
                           "0000:00:01.0", false,  0};
    devs[2] = (FakeDevice){"0000:01:00.1", 0x10de, 0x22ba, 0x040300, "snd_hda_intel", 1,
                           "0000:00:01.0", false,  -1};
    return 3;
}

const char *fixture_driver(const BindFixture *f, const char *bdf) {
    static char buf[4][64];
    static int next;
    char *b = buf[next++ % 4];
    fake_kernel_driver(&f->k, bdf, b, 64);
    return b;
}

const char *fixture_path(const BindFixture *f, const char *rel) {
    static char buf[PATH_MAX];
    cr_assert_lt((size_t)snprintf(buf, sizeof(buf), "%s/%s", f->k.root, rel), sizeof(buf));
    return buf;
}
