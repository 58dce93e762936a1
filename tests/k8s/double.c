/* double.c: start, stop and talk to the Kubernetes API-server double. */
#include "double.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/fileio.h"

static void sleep_ms(long ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void k8s_double_start(K8sDouble *d, const char *fixture, double operator_delay_s) {
    *d = (K8sDouble){0};
    snprintf(d->dir, sizeof(d->dir), "/tmp/einsora-k8s-XXXXXX");
    cr_assert(mkdtemp(d->dir));
    char port_file[128], cluster[512], delay[32], log[128];
    snprintf(port_file, sizeof(port_file), "%s/port", d->dir);
    snprintf(log, sizeof(log), "%s/double.log", d->dir);
    snprintf(cluster, sizeof(cluster), "%s/k8s/%s", TEST_FIXTURES, fixture);
    snprintf(delay, sizeof(delay), "%g", operator_delay_s);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        if (!freopen(log, "w", stderr) || !freopen("/dev/null", "w", stdout))
            _exit(127);
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlives the test */
        execlp("python3", "python3", K8S_DOUBLE, "--cluster", cluster, "--token", K8S_DOUBLE_TOKEN,
               "--port-file", port_file, "--operator-delay", delay, (char *)NULL);
        _exit(127);
    }
    d->pid = pid;
    char *text = NULL;
    for (int i = 0; i < 600 && read_full_file(port_file, 64, &text, NULL) < 0; i++) /* up to 30 s */
        sleep_ms(50);
    cr_assert(text, "the API-server double did not start (see %s)", log);
    d->port = (unsigned)atoi(text);
    free(text);
    snprintf(d->server, sizeof(d->server), "http://127.0.0.1:%u", d->port);
    snprintf(d->kubeconfig, sizeof(d->kubeconfig), "%s/kubeconfig", d->dir);
    FILE *f = fopen(d->kubeconfig, "w");
    cr_assert(f);
    fprintf(f,
            "apiVersion: v1\nkind: Config\ncurrent-context: double\n"
            "clusters:\n- name: double\n  cluster:\n    server: %s\n"
            "users:\n- name: einsora-sync\n  user:\n    token: %s\n"
            "contexts:\n- name: double\n  context:\n    cluster: double\n    user: einsora-sync\n",
            d->server, K8S_DOUBLE_TOKEN);
    fclose(f);
}

void k8s_double_stop(K8sDouble *d) {
    if (d->pid > 0) {
        kill(d->pid, SIGTERM);
        waitpid(d->pid, NULL, 0);
        d->pid = 0;
    }
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->dir);
    if (d->dir[0] && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", d->dir);
}

K8sClient *k8s_double_client(const K8sDouble *d, const char *token) {
    KubeConfig cfg = {.server = (char *)d->server,
                      .token = (char *)(token ? token : K8S_DOUBLE_TOKEN)};
    K8sOptions opt = {.backoff_ms = 50};
    K8sClient *c = NULL;
    Error err = {0};
    cr_assert(k8s_client_new(&cfg, &opt, &c, &err) >= 0, "%s", err.message);
    return c;
}

void k8s_double_control(const K8sDouble *d, const char *what, const char *body) {
    K8sClient *c = k8s_double_client(d, NULL);
    char path[64];
    snprintf(path, sizeof(path), "/_double/%s", what);
    json_t *j = body ? json_loads(body, 0, NULL) : NULL;
    long status = 0;
    Error err = {0};
    cr_assert(k8s_request(c, "POST", path, NULL, j, &status, NULL, &err) >= 0, "%s", err.message);
    cr_assert_eq(status, 200, "control %s answered %ld", what, status);
    json_decref(j);
    k8s_client_free(c);
}

json_t *k8s_double_get(const K8sDouble *d, const char *path) {
    K8sClient *c = k8s_double_client(d, NULL);
    json_t *j = NULL;
    Error err = {0};
    if (k8s_get(c, path, &j, &err) < 0)
        j = NULL;
    k8s_client_free(c);
    return j;
}
