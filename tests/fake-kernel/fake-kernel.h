/* fake-kernel.h: a fixture sysfs tree that reacts to writes the way the kernel does, for the
 * binding tests and benchmark.
 *
 * Layout under a fresh temporary root:
 *   sys/devices/pci0000:00/[<bridge>/]<bdf>/   vendor device class driver_override (regular files)
 *        reset (FIFO) reset_method config power_state current_link_{speed,width} boot_vga
 *        driver -> sys/bus/pci/drivers/<name>    iommu_group -> sys/kernel/iommu_groups/<n>
 *   sys/bus/pci/devices/<bdf> -> the device folder
 *   sys/bus/pci/drivers/<name>/{bind,unbind,new_id} (FIFOs) and <bdf> links
 *   sys/bus/pci/drivers_probe (FIFO)           sys/kernel/iommu_groups/<n>/devices/<bdf>
 *   proc/driver/nvidia/gpus/<bdf>/information  proc/<pid>/{comm,fd/<n>} (holders)
 *   dev/kmsg (regular file the fake appends kernel-log lines to)
 *   .fake-kernel/{control,log,load,new_id-used}
 *
 * A helper process (fake_kernel_start) reads the FIFOs and moves `driver` links: unbind drops
 * the link, drivers_probe binds the device to its driver_override (normalised to the kernel's
 * "(null)" when cleared) or else to its native driver when that driver is loaded, bind binds
 * if allowed, reset leaves the device as it was unless told otherwise, new_id is recorded as a
 * violation. Writing to `.fake-kernel/load` (what the fake modprobe does) loads a driver.
 *
 * How the fake answers errors, and why this way: a FIFO cannot hand an errno back to its
 * writer (the write has completed when the data sits in the pipe). So the fake models each
 * kernel answer by its effect, which production code must check anyway (real unbind returns
 * success even when it achieved nothing, drivers_probe succeeds when no driver binds):
 *   "ebusy unbind|probe <bdf>"  the write is taken and nothing moves (the kernel said no)
 *   "late unbind <bdf>"         the unbind takes effect after the next write the helper takes,
 *                               or LATE_UNBIND_MS later if none comes: a driver whose remove
 *                               finishes after the write returned (what a caller must wait for)
 *   "enodev <bdf>"              at the next write about bdf the device disappears (fell off
 *                               the bus): later opens of its files fail with ENOENT
 *   "hang <path under sys>"     the helper never opens that FIFO, so the writer blocks in
 *                               open(2) for ever, as a writer blocks in a hung driver callback
 *   "reset <bdf> ok|fail|degraded|d3cold|kmsg:<text>"  how the device comes back from a reset
 * Control lines may be added at any time; the helper reads them at every event. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct FakeDevice {
    const char *bdf;
    uint16_t vendor, device;
    uint32_t class_code;
    const char *driver; /* NULL: unbound */
    int iommu_group;    /* -1: no IOMMU */
    const char *parent; /* the bridge it sits behind, NULL for the root bus */
    bool boot_vga;
    int nvidia_minor; /* >= 0 writes proc/driver/nvidia/gpus/<bdf>/information */
} FakeDevice;

typedef struct FakeKernel {
    char root[PATH_MAX];
    char sysfs[PATH_MAX], proc[PATH_MAX], dev[PATH_MAX];
    pid_t helper;
} FakeKernel;

/* Build the tree; drivers are the loaded drivers (NULL-terminated). Returns 0 or -errno. */
int fake_kernel_create(FakeKernel *k, const FakeDevice *devs, size_t n, const char *const *drivers);
int fake_kernel_start(FakeKernel *k);
void fake_kernel_stop(FakeKernel *k);
/* Stop, remove the tree. */
void fake_kernel_destroy(FakeKernel *k);

/* Append one control line (see above). */
int fake_kernel_control(FakeKernel *k, const char *line);

/* Wait until the helper has handled everything written so far (control lines, driver_override
 * normalisation). No-op when the helper is not running. */
int fake_kernel_sync(const FakeKernel *k);

/* A process holding a device file: proc/<pid>/comm and proc/<pid>/fd/3 -> <dev>/<dev_rel>. */
int fake_kernel_add_holder(FakeKernel *k, int pid, const char *comm, const char *dev_rel);

/* Every path under sys/ with its link target or file content (FIFOs as "fifo"), sorted: two
 * equal snapshots mean byte-for-byte the same tree. Caller frees. */
char *fake_kernel_snapshot(const FakeKernel *k);

/* A fake modprobe program for BindOptions.modprobe (a script in the root); caller frees. */
char *fake_kernel_modprobe(const FakeKernel *k);

/* The driver the kernel shows for bdf into buf ("" when none). */
void fake_kernel_driver(const FakeKernel *k, const char *bdf, char *buf, size_t size);

/* A node of n GPUs (RTX 4090 ids, nvidia + snd_hda_intel, each pair alone in its IOMMU group
 * behind its own root-port bridge), GPU i at 0000:(i+1):00.0. devs must hold 3*n entries;
 * returns how many it filled (bridges included). */
size_t fake_node_devices(FakeDevice *devs, size_t n_gpus, char (*bdfs)[16]);
