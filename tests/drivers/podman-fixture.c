/* podman-fixture.c: a real Podman service under a temp dir (podman-fixture.h). */
#include "podman-fixture.h"

#include <criterion/criterion.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

bool podman_fixture_usable(char *buf, size_t size) {
    const char *need[] = {"/usr/bin/podman", "/usr/sbin/runc", "/bin/busybox", NULL};
    if (geteuid() != 0) {
        snprintf(buf, size, "needs root (mknod, Podman's root mode)");
        return false;
    }
    for (size_t i = 0; need[i]; i++)
        if (access(need[i], X_OK) < 0 &&
            !(strstr(need[i], "runc") && access("/usr/bin/runc", X_OK) == 0)) {
            snprintf(buf, size, "%s is missing (./dev installs podman, runc, busybox-static)",
                     need[i]);
            return false;
        }
    return true;
}

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...) {
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int r = system(cmd);
    cr_assert(r == 0, "command failed (%d): %s", r, cmd);
}

static const char *podman_args(PodmanFixture *p, char *buf, size_t size) {
    snprintf(buf, size,
             "env CONTAINERS_CONF=%s/containers.conf podman --root %s/root --runroot %s/run "
             "--storage-driver vfs "
             "--cgroup-manager cgroupfs --events-backend file --tmpdir %s/tmp",
             p->dir, p->dir, p->dir, p->dir);
    return buf;
}

int podman_fixture_cli(PodmanFixture *p, const char *args) {
    char base[512], cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s %s >/dev/null 2>&1", podman_args(p, base, sizeof(base)), args);
    int r = system(cmd);
    return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

static void make_node(const char *dir, const char *name, unsigned major, unsigned minor) {
    char path[160];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    cr_assert(mknod(path, S_IFCHR | 0666, makedev(major, minor)) == 0, "mknod %s: %s", path,
              strerror(errno));
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    cr_assert(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

static size_t ignore_body(char *ptr, size_t size, size_t nmemb, void *userdata) {
    (void)ptr, (void)userdata;
    return size * nmemb;
}

static bool answers(const char *socket) {
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, socket);
    curl_easy_setopt(h, CURLOPT_URL, "http://d/_ping");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, ignore_body);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 5L);
    long status = 0;
    bool ok = curl_easy_perform(h) == CURLE_OK &&
              curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK && status == 200;
    curl_easy_cleanup(h);
    return ok;
}

void podman_fixture_start_service(PodmanFixture *p) {
    char base[512];
    podman_args(p, base, sizeof(base));
    unlink(p->socket);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        setpgid(0, 0);
        char cmd[1024], log[160];
        snprintf(log, sizeof(log), "%s/service.log", p->dir);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        snprintf(cmd, sizeof(cmd), "exec %s system service --time 0 unix://%s", base, p->socket);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    p->service = pid;
    /* Poll for the socket with a generous deadline (a loaded machine starts Podman slowly). */
    for (int i = 0; i < 1200 && !answers(p->socket); i++)
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    cr_assert(answers(p->socket), "the Podman service did not answer on %s (see %s/service.log)",
              p->socket, p->dir);
}

void podman_fixture_kill_service(PodmanFixture *p) {
    if (p->service <= 0)
        return;
    kill(-p->service, SIGTERM);
    waitpid(p->service, NULL, 0);
    p->service = 0;
}

void podman_fixture_start(PodmanFixture *p) {
    memset(p, 0, sizeof(*p));
    snprintf(p->dir, sizeof(p->dir), "/tmp/einsora-podman-XXXXXX");
    cr_assert(mkdtemp(p->dir), "mkdtemp");
    snprintf(p->socket, sizeof(p->socket), "%s/engine.sock", p->dir);
    snprintf(p->dev, sizeof(p->dev), "%s/dev", p->dir);
    /* A rootfs from busybox-static, imported as the image. */
    sh("set -e; d=%s/rootfs; mkdir -p $d/bin $d/dev $d/proc $d/sys $d/etc $d/tmp; cp /bin/busybox "
       "$d/bin/; "
       "for c in sh ls cat env echo sleep true false httpd; do ln -s busybox $d/bin/$c; done; "
       "mkdir -p %s/tmp %s/dri",
       p->dir, p->dir, p->dev);
    char conf[160];
    snprintf(conf, sizeof(conf), "%s/containers.conf", p->dir);
    write_text(conf, "[containers]\ndefault_ulimits = [\"nofile=1024:1024\", \"nproc=1024:1024\"]\n"
                     "[engine]\ncgroup_manager = \"cgroupfs\"\nruntime = \"runc\"\nevents_logger = "
                     "\"file\"\n");
    char base[512];
    sh("tar -C %s/rootfs -c . | %s import - %s >/dev/null 2>&1", p->dir,
       podman_args(p, base, sizeof(base)), PODMAN_IMAGE);
    sh("tar -C %s/rootfs -c . | %s import --change 'CMD [\"sh\",\"-c\",\"ls /dev /dev/dri; env\"]' "
       "- %s >/dev/null 2>&1",
       p->dir, base, PODMAN_PROBE_IMAGE);
    sh("tar -C %s/rootfs -c . | %s import --change 'CMD [\"sleep\",\"100000\"]' - %s >/dev/null "
       "2>&1",
       p->dir, base, PODMAN_SLEEPER_IMAGE);
    /* Fake GPUs: NVIDIA's majors (195), AMD's kfd and render nodes (226). */
    char name[32];
    for (int i = 0; i < PODMAN_GPUS; i++) {
        snprintf(name, sizeof(name), "nvidia%d", i);
        make_node(p->dev, name, 195, (unsigned)i);
        snprintf(p->uuid[i], sizeof(p->uuid[i]), "GPU-e1750000-%04x-4000-8000-%012d",
                 (unsigned)getpid() & 0xffff, i);
    }
    make_node(p->dev, "nvidiactl", 195, 255);
    make_node(p->dev, "kfd", 235, 0);
    make_node(p->dev, "dri/renderD128", 226, 128);
    make_node(p->dev, "dri/renderD129", 226, 129);
    /* The spec as nvidia-ctk writes it: one device per GPU, the control node common to all. */
    mkdir("/var/run/cdi", 0755);
    snprintf(p->cdi_spec, sizeof(p->cdi_spec), "/var/run/cdi/einsora-test-%d.yaml", (int)getpid());
    char spec[4096];
    int n = snprintf(spec, sizeof(spec), "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n");
    for (int i = 0; i < PODMAN_GPUS; i++)
        n += snprintf(spec + n, sizeof(spec) - (size_t)n,
                      "- name: %s\n  containerEdits:\n    deviceNodes:\n    - path: "
                      "/dev/nvidia%d\n      hostPath: %s/nvidia%d\n",
                      p->uuid[i], i, p->dev, i);
    snprintf(spec + n, sizeof(spec) - (size_t)n,
             "containerEdits:\n  env:\n  - NVIDIA_VISIBLE_DEVICES=void\n  deviceNodes:\n"
             "  - path: /dev/nvidiactl\n    hostPath: %s/nvidiactl\n",
             p->dev);
    write_text(p->cdi_spec, spec);
    podman_fixture_start_service(p);
}

void podman_fixture_stop(PodmanFixture *p) {
    if (!p->dir[0])
        return;
    (void)podman_fixture_cli(p, "rm -af -t 0");
    podman_fixture_kill_service(p);
    unlink(p->cdi_spec);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", p->dir);
    (void)system(cmd);
    p->dir[0] = 0;
}
