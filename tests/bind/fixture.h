/* fixture.h: a fake-kernel machine plus binding options pointed at it, for the bind tests. */
#pragma once

#include <limits.h>

#include "agent/bind.h"
#include "fake-kernel.h"

typedef struct BindFixture {
    FakeKernel k;
    BindOptions o;
    char state[PATH_MAX];
    char *modprobe;
} BindFixture;

/* Drivers loaded in every fixture (vfio-pci too unless without_vfio). */
void fixture_setup(BindFixture *f, const FakeDevice *devs, size_t n, bool without_vfio);
void fixture_teardown(BindFixture *f);

/* One RTX 4090 at 0000:01:00.0 with its audio (.1), alone in IOMMU group 1 behind a bridge in
 * group 100; extra devices may be appended by the caller. Returns the count. */
size_t fixture_one_gpu(FakeDevice *devs);

/* "<root>/<rel>" in a static buffer (valid until the next call). */
const char *fixture_path(const BindFixture *f, const char *rel);

/* The fake's driver of bdf as a new string ("" when none). */
const char *fixture_driver(const BindFixture *f, const char *bdf);
