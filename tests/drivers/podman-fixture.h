/* podman-fixture.h: a real Podman service for the driver tests, started by the test on a
 * private socket with its own storage, run root and config under a temp dir (runc, the
 * cgroupfs manager, raised container ulimits: what works on these machines). The image is
 * built locally (no registry): `podman import` of a rootfs made from busybox-static. Fake GPUs
 * are character devices the fixture creates (mknod) and describes in a CDI spec written the
 * way `nvidia-ctk cdi generate` would, in /var/run/cdi (the dir Podman 4 reads). */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#define PODMAN_IMAGE "localhost/einsora-test-busybox:1"
/* The same rootfs whose own command prints /dev and the environment, then exits 0. */
#define PODMAN_PROBE_IMAGE "localhost/einsora-test-probe:1"
/* The same rootfs whose own command sleeps (a long-running workload). */
#define PODMAN_SLEEPER_IMAGE "localhost/einsora-test-sleeper:1"
#define PODMAN_GPUS 8

typedef struct PodmanFixture {
    char dir[64]; /* everything of the fixture lives under it */
    char socket[128];
    char cdi_spec[128];         /* our spec file in /var/run/cdi */
    char uuid[PODMAN_GPUS][64]; /* the fake NVIDIA GPUs: GPU-…, as /dev/nvidia0..7 */
    char dev[96]; /* the fake device nodes' folder (nvidia0, nvidia1, nvidiactl, kfd, dri/) */
    pid_t service;
} PodmanFixture;

/* Whether the machine can run the fixture (root, podman, runc, busybox-static); when not,
 * why into buf. */
bool podman_fixture_usable(char *buf, size_t size);

/* Build the image, the devices and the CDI spec, start the service; waits until it answers. */
void podman_fixture_start(PodmanFixture *p);
/* Start only the service again (after podman_fixture_kill_service). */
void podman_fixture_start_service(PodmanFixture *p);
void podman_fixture_kill_service(PodmanFixture *p);
/* Remove every container, stop the service, remove the spec and the temp dir. */
void podman_fixture_stop(PodmanFixture *p);

/* Run the podman CLI on the fixture's storage; returns its exit status. */
int podman_fixture_cli(PodmanFixture *p, const char *args);
