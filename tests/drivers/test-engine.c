/* test-engine.c: the container driver against a real Podman service (podman-fixture.h),
 * through both its libpod API and its Docker-compatible API: exactly the allocated device
 * nodes and variables inside the container (R17, R12), and the failure paths (image missing,
 * runtime missing, no CDI entry, killed from outside, engine gone, a stop that hangs). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "drivers/engine.h"
#include "podman-fixture.h"

static PodmanFixture pm;
static bool usable;
static char why[160];

static void setup(void) {
    usable = podman_fixture_usable(why, sizeof(why));
    if (usable)
        podman_fixture_start(&pm);
}

static void teardown(void) {
    if (usable)
        podman_fixture_stop(&pm);
}

TestSuite(engine, .init = setup, .fini = teardown, .timeout = 300);

#define NEED_PODMAN()                                                                              \
    do {                                                                                           \
        if (!usable)                                                                               \
            cr_skip_test("no Podman service: %s", why);                                            \
    } while (0)

static Driver *open_driver_of(int dialect, const char *node) {
    EngineConfig c;
    engine_config_init(&c);
    c.node = node;
    c.socket = pm.socket;
    c.dialect = dialect;
    c.cdi_dirs = "/etc/cdi:/var/run/cdi";
    c.dev_root = pm.dev;
    Driver *d = NULL;
    char product[128];
    Error err = {0};
    cr_assert_eq(engine_driver_new(&c, &d, product, sizeof(product), &err), 0, "%s",
                 error_message(&err));
    cr_assert(strstr(product, "Podman"), "the dialect detection names Podman: %s", product);
    return d;
}

static Driver *open_driver(int dialect) {
    return open_driver_of(dialect, NULL);
}

/* Poll (generous deadline) until the workload is no longer starting or running. */
static WorkloadState wait_end(Driver *d, const char *id) {
    WorkloadState st = {0};
    Error err = {0};
    for (int i = 0; i < 1200; i++) {
        cr_assert_eq(d->ops->status(d, id, &st, &err), 0, "%s", error_message(&err));
        if (st.status != WORKLOAD_RUNNING && st.status != WORKLOAD_STARTING)
            return st;
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    cr_assert_fail("workload %s did not end", id);
    return st;
}

static WorkloadState wait_running(Driver *d, const char *id) {
    WorkloadState st = {0};
    Error err = {0};
    for (int i = 0; i < 1200; i++) {
        cr_assert_eq(d->ops->status(d, id, &st, &err), 0, "%s", error_message(&err));
        if (st.status != WORKLOAD_STARTING)
            return st;
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    return st;
}

static char *logs_of(Driver *d, const char *id) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    Error err = {0};
    cr_assert_eq(d->ops->logs(d, id, false, f, &err), 0, "%s", error_message(&err));
    fclose(f);
    return buf;
}

/* The names under /dev and the environment, one per line, as the container prints them. */
static const char *const probe_cmd[] = {"sh", "-c", "ls /dev /dev/dri 2>/dev/null; env", NULL};

static bool has_line(const char *text, const char *line) {
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)); p += n)
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == 0))
            return true;
    return false;
}

static char *run_probe(Driver *d, const char *id, const WorkloadGpu *gpus, size_t n) {
    WorkloadSpec s = {.id = id,
                      .kind = "container",
                      .image = PODMAN_IMAGE,
                      .command = probe_cmd,
                      .env = (const char *const[]){"EINSORA_TEST=1", NULL},
                      .gpus = gpus,
                      .n_gpus = n};
    Error err = {0};
    cr_assert_eq(d->ops->start(d, &s, &err), 0, "%s", error_message(&err));
    WorkloadState st = wait_end(d, id);
    cr_assert_eq(st.status, WORKLOAD_EXITED, "%s: %s", workload_status_to_string(st.status),
                 st.message);
    cr_assert_eq(st.exit_code, 0);
    return logs_of(d, id);
}

static void check_only_gpu(const char *out, int mine) {
    char own[16], other[16];
    snprintf(own, sizeof(own), "nvidia%d", mine);
    snprintf(other, sizeof(other), "nvidia%d", !mine);
    cr_assert(has_line(out, own), "the allocated node %s is inside:\n%s", own, out);
    cr_assert(has_line(out, "nvidiactl"), "the spec's common node is inside:\n%s", out);
    cr_assert(!has_line(out, other), "the other GPU's node %s is not inside:\n%s", other, out);
    cr_assert(!has_line(out, "kfd"), "no AMD node inside:\n%s", out);
    cr_assert(has_line(out, "NVIDIA_VISIBLE_DEVICES=void"), "the spec's variable is set:\n%s", out);
    cr_assert(has_line(out, "EINSORA_TEST=1"), "the workload's own variable is set:\n%s", out);
}

static void two_containers_each_own_gpu(int dialect) {
    Driver *d = open_driver(dialect);
    for (int g = 0; g < 2; g++) {
        WorkloadGpu gpu = {
                .vendor = "nvidia", .uuid = pm.uuid[g], .pci = g ? "0000:3c:00.0" : "0000:3b:00.0"};
        char id[16];
        snprintf(id, sizeof(id), "%d", 100 + g + 10 * dialect);
        char *out = run_probe(d, id, &gpu, 1);
        check_only_gpu(out, g);
        free(out);
        Error err = {0};
        cr_assert_eq(d->ops->stop(d, id, 1, &err), 0, "%s", error_message(&err));
    }
    driver_free(d);
}

Test(engine, r17_libpod_cdi_names_give_each_container_only_its_gpu) {
    NEED_PODMAN();
    two_containers_each_own_gpu(ENGINE_LIBPOD);
}

Test(engine, r17_docker_api_explicit_devices_give_each_container_only_its_gpu) {
    NEED_PODMAN();
    two_containers_each_own_gpu(ENGINE_DOCKER);
}

Test(engine, r12_amd_container_gets_kfd_its_render_node_and_rocm_visibility) {
    NEED_PODMAN();
    for (int dialect = 0; dialect < 2; dialect++) {
        Driver *d = open_driver(dialect);
        char node[160], id[16];
        snprintf(node, sizeof(node), "%s/dri/renderD129", pm.dev);
        snprintf(id, sizeof(id), "%d", 200 + dialect);
        WorkloadGpu gpu = {.vendor = "amd", .pci = "0000:c1:00.0", .render_node = node};
        char *out = run_probe(d, id, &gpu, 1);
        cr_assert(has_line(out, "kfd"), "%s", out);
        cr_assert(has_line(out, "renderD129"), "%s", out);
        cr_assert(!has_line(out, "renderD128"), "the other card's node is not inside:\n%s", out);
        cr_assert(!has_line(out, "nvidia0") && !has_line(out, "nvidiactl"), "%s", out);
        cr_assert(has_line(out, "ROCR_VISIBLE_DEVICES=0"), "%s", out);
        free(out);
        Error err = {0};
        cr_assert_eq(d->ops->stop(d, id, 1, &err), 0, "%s", error_message(&err));
        driver_free(d);
    }
}

static void expect_start_fails(Driver *d, const WorkloadSpec *s, int code, const char *words) {
    Error err = {0};
    cr_assert_eq(d->ops->start(d, s, &err), code, "start: %s", error_message(&err));
    cr_assert(strstr(err.message, words), "the sentence says '%s': %s", words, err.message);
    WorkloadState st;
    cr_assert_eq(d->ops->status(d, s->id, &st, &err), 0);
    cr_assert_eq(st.status, WORKLOAD_ABSENT, "nothing is left on the engine");
}

Test(engine, r17_image_missing_fails_with_a_clear_sentence_and_leaves_nothing) {
    NEED_PODMAN();
    for (int dialect = 0; dialect < 2; dialect++) {
        Driver *d = open_driver(dialect);
        WorkloadSpec s = {.id = "300", .kind = "notebook", .image = "localhost/no-such-image:1"};
        expect_start_fails(d, &s, -ENOENT, "is not on the engine");
        driver_free(d);
    }
}

Test(engine, r17_runtime_missing_fails_with_a_clear_sentence_and_leaves_nothing) {
    NEED_PODMAN();
    for (int dialect = 0; dialect < 2; dialect++) {
        Driver *d = open_driver(dialect);
        WorkloadSpec s = {.id = "301",
                          .kind = "container",
                          .image = PODMAN_IMAGE,
                          .command = probe_cmd,
                          .oci_runtime = "kata"};
        expect_start_fails(d, &s, -EOPNOTSUPP, "does not run OCI runtime kata");
        driver_free(d);
    }
}

Test(engine, r17_gpu_without_cdi_entry_is_said_clearly) {
    NEED_PODMAN();
    Driver *d = open_driver(ENGINE_LIBPOD);
    WorkloadGpu gpu = {.vendor = "nvidia",
                       .uuid = "GPU-00000000-0000-0000-0000-00000000dead",
                       .pci = "0000:3d:00.0"};
    WorkloadSpec s = {.id = "302",
                      .kind = "container",
                      .image = PODMAN_IMAGE,
                      .command = probe_cmd,
                      .gpus = &gpu,
                      .n_gpus = 1};
    expect_start_fails(d, &s, -ENOENT, "has no CDI entry");
    driver_free(d);
}

static const char *const sleeper[] = {"sleep", "1000", NULL};

Test(engine, r17_container_killed_from_outside_reports_its_exit) {
    NEED_PODMAN();
    Driver *d = open_driver(ENGINE_LIBPOD);
    WorkloadSpec s = {.id = "303", .kind = "notebook", .image = PODMAN_IMAGE, .command = sleeper};
    Error err = {0};
    cr_assert_eq(d->ops->start(d, &s, &err), 0, "%s", error_message(&err));
    cr_assert_eq(wait_running(d, "303").status, WORKLOAD_RUNNING);
    cr_assert_eq(podman_fixture_cli(&pm, "kill -s KILL einsora-303"), 0);
    WorkloadState st = wait_end(d, "303");
    cr_assert_eq(st.status, WORKLOAD_EXITED, "%s", st.message);
    cr_assert_eq(st.exit_code, 137);
    cr_assert_eq(d->ops->stop(d, "303", 1, &err), 0, "%s", error_message(&err));
    driver_free(d);
}

Test(engine, r17_a_workload_is_never_started_twice_and_the_engine_lists_it) {
    NEED_PODMAN();
    Driver *d = open_driver(ENGINE_DOCKER);
    WorkloadSpec s = {.id = "304", .kind = "notebook", .image = PODMAN_IMAGE, .command = sleeper};
    Error err = {0};
    cr_assert_eq(d->ops->start(d, &s, &err), 0, "%s", error_message(&err));
    Error e2 = {0};
    cr_assert_eq(d->ops->start(d, &s, &e2), -EEXIST, "%s", error_message(&e2));
    /* A second driver (an agent restarted) finds it by its label, through the other API too. */
    Driver *d2 = open_driver(ENGINE_LIBPOD);
    char **ids = NULL;
    size_t n = 0;
    cr_assert_eq(d2->ops->list(d2, &ids, &n, &err), 0, "%s", error_message(&err));
    cr_assert_eq(n, 1);
    cr_assert_str_eq(ids[0], "304");
    driver_ids_free(ids, n);
    cr_assert_eq(d2->ops->stop(d2, "304", 1, &err), 0, "%s", error_message(&err));
    WorkloadState st;
    cr_assert_eq(d->ops->status(d, "304", &st, &err), 0);
    cr_assert_eq(st.status, WORKLOAD_ABSENT);
    driver_free(d2);
    driver_free(d);
}

/* R17: on an engine two nodes' agents share, each lists (adopts, stops) only its own node's
 * containers; and a container that merely bears the name a placement's would have (made by
 * hand) never passes for the placed workload. */
Test(engine, r17_another_nodes_or_a_hand_made_container_is_never_taken_for_ours) {
    NEED_PODMAN();
    Driver *a = open_driver_of(ENGINE_LIBPOD, "node-a"),
           *b = open_driver_of(ENGINE_DOCKER, "node-b");
    WorkloadSpec s = {.id = "305", .kind = "container", .image = PODMAN_IMAGE, .command = sleeper};
    Error err = {0};
    cr_assert_eq(a->ops->start(a, &s, &err), 0, "%s", error_message(&err));
    char **ids = NULL;
    size_t n = 0;
    cr_assert_eq(b->ops->list(b, &ids, &n, &err), 0, "%s", error_message(&err));
    cr_expect_eq(n, 0, "node-b does not list node-a's container");
    driver_ids_free(ids, n);
    cr_assert_eq(a->ops->list(a, &ids, &n, &err), 0, "%s", error_message(&err));
    cr_expect_eq(n, 1, "node-a does");
    driver_ids_free(ids, n);
    Error e2 = {0};
    cr_expect_eq(b->ops->start(b, &s, &e2), -ENOTUNIQ, "%s", e2.message);
    cr_expect(strstr(e2.message, "of node node-a"), "%s", e2.message);
    cr_assert_eq(a->ops->stop(a, "305", 1, &err), 0, "%s", error_message(&err));
    /* Made by hand under the name: refused, not adopted as running. */
    cr_assert_eq(podman_fixture_cli(&pm, "create --name einsora-306 " PODMAN_IMAGE " true"), 0);
    WorkloadSpec h = {.id = "306", .kind = "container", .image = PODMAN_IMAGE, .command = sleeper};
    Error e3 = {0};
    cr_expect_eq(a->ops->start(a, &h, &e3), -ENOTUNIQ, "%s", e3.message);
    cr_expect(strstr(e3.message, "not request 306's"), "%s", e3.message);
    /* Nor is its output shown as the request's. */
    FILE *f = fopen("/dev/null", "w");
    Error e4 = {0};
    cr_expect_eq(a->ops->logs(a, "306", false, f, &e4), -ENOTUNIQ, "%s", e4.message);
    cr_expect(strstr(e4.message, "not request 306's"), "%s", e4.message);
    fclose(f);
    cr_assert_eq(podman_fixture_cli(&pm, "rm -f einsora-306"), 0);
    driver_free(a);
    driver_free(b);
}

Test(engine, r17_a_stop_that_hangs_is_killed_after_the_grace_period) {
    NEED_PODMAN();
    Driver *d = open_driver(ENGINE_LIBPOD);
    /* PID 1 ignores SIGTERM (and a shell as PID 1 has no default handler): only a kill ends it. */
    static const char *const stubborn[] = {"sh", "-c", "trap '' TERM; while true; do sleep 1; done",
                                           NULL};
    WorkloadSpec s = {.id = "305", .kind = "container", .image = PODMAN_IMAGE, .command = stubborn};
    Error err = {0};
    cr_assert_eq(d->ops->start(d, &s, &err), 0, "%s", error_message(&err));
    cr_assert_eq(wait_running(d, "305").status, WORKLOAD_RUNNING);
    cr_assert_eq(d->ops->stop(d, "305", 1, &err), 0, "%s", error_message(&err));
    WorkloadState st;
    cr_assert_eq(d->ops->status(d, "305", &st, &err), 0);
    cr_assert_eq(st.status, WORKLOAD_ABSENT);
    driver_free(d);
}

Test(engine, r17_engine_socket_gone_mid_run_is_an_error_not_an_exit) {
    NEED_PODMAN();
    Driver *d = open_driver(ENGINE_LIBPOD);
    WorkloadSpec s = {.id = "306", .kind = "notebook", .image = PODMAN_IMAGE, .command = sleeper};
    Error err = {0};
    cr_assert_eq(d->ops->start(d, &s, &err), 0, "%s", error_message(&err));
    podman_fixture_kill_service(&pm);
    WorkloadState st = {.status = WORKLOAD_RUNNING};
    Error e2 = {0};
    cr_assert_lt(d->ops->status(d, "306", &st, &e2), 0,
                 "a dead engine is no answer about the workload");
    cr_assert(strstr(e2.message, pm.socket), "the sentence names the socket: %s", e2.message);
    /* The engine comes back: the container is still there (conmon kept it), running. */
    podman_fixture_start_service(&pm);
    cr_assert_eq(d->ops->status(d, "306", &st, &err), 0, "%s", error_message(&err));
    cr_assert_eq(st.status, WORKLOAD_RUNNING, "%s", workload_status_to_string(st.status));
    cr_assert_eq(d->ops->stop(d, "306", 1, &err), 0, "%s", error_message(&err));
    driver_free(d);
}

Test(engine, r17_logs_show_the_containers_output) {
    NEED_PODMAN();
    Driver *d = open_driver(ENGINE_DOCKER);
    static const char *const hello[] = {"sh", "-c",
                                        "echo hello from the notebook; echo to stderr >&2", NULL};
    WorkloadSpec s = {.id = "307", .kind = "notebook", .image = PODMAN_IMAGE, .command = hello};
    Error err = {0};
    cr_assert_eq(d->ops->start(d, &s, &err), 0, "%s", error_message(&err));
    wait_end(d, "307");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(d->ops->logs(d, "307", true, f, &err), 0, "%s", error_message(&err));
    fclose(f);
    cr_assert(has_line(buf, "hello from the notebook"), "%s", buf);
    cr_assert(has_line(buf, "to stderr"), "%s", buf);
    free(buf);
    cr_assert_eq(d->ops->stop(d, "307", 1, &err), 0);
    driver_free(d);
}

/* The request's own ports: exactly those published, and the state's host port is the first
 * one's (9999 sorts after 6006 in the engine's list, so the first listed is not it). */
static void publishes_exactly_the_given_ports(int dialect, const char *id) {
    Driver *d = open_driver(dialect);
    static const unsigned ports[] = {9999, 6006};
    WorkloadSpec s = {.id = id,
                      .kind = "notebook",
                      .image = PODMAN_IMAGE,
                      .command = sleeper,
                      .ports = ports,
                      .n_ports = 2};
    Error err = {0};
    cr_assert_eq(d->ops->start(d, &s, &err), 0, "%s", error_message(&err));
    WorkloadState st = wait_running(d, id);
    cr_assert_eq(st.status, WORKLOAD_RUNNING, "%s", st.message);
    cr_assert_gt(st.host_port, 0);
    char args[160];
    snprintf(args, sizeof(args), "port einsora-%s 9999/tcp | grep -q ':%u$'", id, st.host_port);
    cr_assert_eq(podman_fixture_cli(&pm, args), 0, "host port %u is the one of container port 9999",
                 st.host_port);
    snprintf(args, sizeof(args), "port einsora-%s | wc -l | grep -qx 2", id);
    cr_assert_eq(podman_fixture_cli(&pm, args), 0, "exactly the two ports are published");
    snprintf(args, sizeof(args), "port einsora-%s 8888/tcp 2>/dev/null | grep -q .", id);
    cr_assert_neq(podman_fixture_cli(&pm, args), 0, "not the kind's own 8888");
    cr_assert_eq(d->ops->stop(d, id, 1, &err), 0, "%s", error_message(&err));
    driver_free(d);
}

Test(engine, r17_the_requests_ports_are_published_and_the_first_is_the_url) {
    NEED_PODMAN();
    publishes_exactly_the_given_ports(ENGINE_LIBPOD, "308");
    publishes_exactly_the_given_ports(ENGINE_DOCKER, "309");
}

/* R17: a cpu placement's container is held to its cores, through either API: the engine's
 * own record of the container says the quota. */
Test(engine, r17_a_cpu_placements_container_is_held_to_its_cores) {
    NEED_PODMAN();
    for (int dialect = ENGINE_DOCKER; dialect <= ENGINE_LIBPOD; dialect++) {
        Driver *d = open_driver(dialect);
        char id[16], check[160];
        snprintf(id, sizeof(id), "%d", 320 + dialect);
        WorkloadSpec s = {
                .id = id, .kind = "container", .image = PODMAN_SLEEPER_IMAGE, .cpu_limit = 2};
        Error err = {0};
        cr_assert_eq(d->ops->start(d, &s, &err), 0, "%s", error_message(&err));
        cr_assert_eq(wait_running(d, id).status, WORKLOAD_RUNNING);
        snprintf(check, sizeof(check),
                 "container inspect --format '{{.HostConfig.CpuQuota}}/{{.HostConfig.CpuPeriod}}' "
                 "einsora-%s | grep -qx 200000/100000",
                 id);
        cr_expect_eq(podman_fixture_cli(&pm, check), 0, "%s: 2 cores of quota",
                     engine_dialect_to_string(dialect));
        cr_assert_eq(d->ops->stop(d, id, 1, &err), 0, "%s", error_message(&err));
        driver_free(d);
    }
}
