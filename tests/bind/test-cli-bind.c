/* test-cli-bind.c: `einsora agent bind|switch|recover|reset-check` against the fake kernel. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "helpers.h"
#include "util/fileio.h"

#define GPU "0000:01:00.0"

/* Run `einsora agent SUB ...` with the fixture's roots; returns the exit status. */
#define AGENT(f, out, err, ...)                                                                    \
    run_einsora(out, err, "agent", __VA_ARGS__, "--sysfs-root", (f)->k.sysfs, "--proc-root",       \
                (f)->k.proc, "--dev-root", (f)->k.dev, "--state-dir", (f)->state, "--modprobe",    \
                (f)->modprobe, "--timeout", "2", NULL)

Test(cli_bind, r7_cli_bind_to_vfio_and_back_with_json) {
    BindFixture f;
    FakeDevice devs[4];
    fixture_setup(&f, devs, fixture_one_gpu(devs), false);
    char *out, *err;
    cr_assert_eq(AGENT(&f, &out, &err, "bind", GPU, "--to", "vfio", "--json"), 0, "%s", err);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    cr_assert(j, "%s", out);
    cr_expect_str_eq(json_string_value(json_object_get(j, "to")), "vfio");
    json_t *fns = json_object_get(j, "functions");
    cr_expect_eq(json_array_size(fns), 2);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(fns, 0), "driver")),
                     "vfio-pci");
    json_decref(j);
    free(out);
    free(err);
    cr_assert_eq(AGENT(&f, &out, &err, "bind", GPU, "--to", "host"), 0, "%s", err);
    cr_expect(strstr(out, "moved to its host driver") != NULL, "%s", out);
    cr_expect(strstr(out, "vfio-pci       -> nvidia") != NULL, "%s", out);
    free(out);
    free(err);
    fixture_teardown(&f);
}

Test(cli_bind, r7_cli_refusal_prints_one_sentence_and_changes_nothing) {
    BindFixture f;
    FakeDevice devs[4];
    fixture_setup(&f, devs, fixture_one_gpu(devs), false);
    cr_assert_eq(fake_kernel_add_holder(&f.k, 4242, "nvidia-smi", "nvidia0"), 0);
    char *before = fake_kernel_snapshot(&f.k);
    char *out, *err;
    cr_expect_eq(AGENT(&f, &out, &err, "bind", GPU, "--to", "vfio"), 1);
    cr_expect_str_eq(out, "");
    cr_expect(strncmp(err, "einsora: GPU " GPU " is in use: nvidia-smi (pid 4242)", 45) == 0, "%s",
              err);
    cr_expect(strchr(err, '\n') == err + strlen(err) - 1, "one line: %s", err);
    char *after = fake_kernel_snapshot(&f.k);
    cr_expect_str_eq(after, before);
    free(out);
    free(err);
    free(before);
    free(after);
    fixture_teardown(&f);
}

Test(cli_bind, r7_cli_dry_run_and_usage_errors) {
    BindFixture f;
    FakeDevice devs[4];
    fixture_setup(&f, devs, fixture_one_gpu(devs), false);
    char *before = fake_kernel_snapshot(&f.k);
    char *out, *err;
    cr_expect_eq(AGENT(&f, &out, &err, "bind", GPU, "--to", "vfio", "--dry-run"), 0, "%s", err);
    cr_expect(strstr(out, "Dry run, nothing was changed") != NULL, "%s", out);
    free(out);
    free(err);
    cr_expect_eq(AGENT(&f, &out, &err, "bind", GPU, "--to", "sideways"), 2);
    cr_expect(strstr(err, "--to vfio or --to host") != NULL, "%s", err);
    free(out);
    free(err);
    cr_expect_eq(AGENT(&f, &out, &err, "bind", "--to", "vfio"), 2);
    free(out);
    free(err);
    /* A GPU that is not a PCI address is a usage error, before any state folder is made. */
    cr_expect_eq(AGENT(&f, &out, &err, "bind", "zzzz", "--to", "vfio"), 2);
    cr_expect(strstr(err, "'zzzz' is not a PCI address like 0000:01:00.0"), "%s", err);
    free(out);
    free(err);
    cr_expect_eq(AGENT(&f, &out, &err, "recover", "--clear-quarantine", "01:00.0"), 2);
    free(out);
    free(err);
    cr_expect_eq(
            run_einsora(&out, &err, "agent", "bind", GPU, "--to", "vfio", "--timeout", "-1", NULL),
            2);
    free(out);
    free(err);
    char *after = fake_kernel_snapshot(&f.k);
    cr_expect_str_eq(after, before);
    free(before);
    free(after);
    fixture_teardown(&f);
}

Test(cli_bind, r3_cli_switch_recover_and_reset_check) {
    BindFixture f;
    FakeDevice devs[6];
    char bdfs[6][16];
    fixture_setup(&f, devs, fake_node_devices(devs, 2, bdfs), false);
    char *out, *err;
    cr_assert_eq(AGENT(&f, &out, &err, "switch", "--to", "vfio"), 0, "%s", err);
    cr_expect(strstr(out, "2 GPUs of this machine are on vfio-pci") != NULL, "%s", out);
    free(out);
    free(err);
    cr_assert_eq(AGENT(&f, &out, &err, "recover"), 0, "%s", err);
    cr_expect(strstr(out, "Nothing to recover") != NULL, "%s", out);
    free(out);
    free(err);
    cr_assert_eq(AGENT(&f, &out, &err, "reset-check", GPU, "--cycles", "2", "--settle-ms", "5",
                       "--json"),
                 0, "%s", err);
    json_t *j = json_loads(out, 0, NULL);
    cr_assert(j, "%s", out);
    cr_expect_str_eq(json_string_value(json_object_get(j, "verdict")), "pass");
    cr_expect_eq(json_integer_value(json_object_get(j, "cycles")), 2);
    json_decref(j);
    free(out);
    free(err);
    cr_assert_eq(fake_kernel_control(&f.k, "reset " GPU " fail"), 0);
    cr_expect_eq(AGENT(&f, &out, &err, "reset-check", GPU, "--settle-ms", "5"), 1);
    cr_expect(strstr(out, "check fail") != NULL && strstr(out, "quarantined") != NULL, "%s", out);
    free(out);
    free(err);
    cr_expect_eq(AGENT(&f, &out, &err, "recover", "--clear-quarantine", GPU), 0, "%s", err);
    cr_expect(strstr(out, "no longer quarantined") != NULL, "%s", out);
    free(out);
    free(err);
    fixture_teardown(&f);
}

/* Start `einsora agent run` on the fixture's state folder, its control plane unreachable (it
 * keeps trying); returns its pid once it holds the folder (its pid in the lock file). */
static pid_t start_agent_run(BindFixture *f, const char *token_file) {
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execl(EINSORA_BIN, EINSORA_BIN, "agent", "run", "--server", "http://127.0.0.1:9",
              "--token-file", token_file, "--owner", "ops", "--name", "n1", "--no-nvml",
              "--sysfs-root", f->k.sysfs, "--proc-root", f->k.proc, "--dev-root", f->k.dev,
              "--state-dir", f->state, (char *)NULL);
        _exit(127);
    }
    char want[32], lock[PATH_MAX];
    snprintf(want, sizeof(want), "%d\n", (int)pid);
    cr_assert_lt((size_t)snprintf(lock, sizeof(lock), "%s/lock", f->state), sizeof(lock));
    for (int i = 0; i < 600; i++) { /* a deadline, never a measure */
        char *text = NULL;
        if (read_full_file(lock, 64, &text, NULL) >= 0 && strcmp(text, want) == 0) {
            free(text);
            return pid;
        }
        free(text);
        cr_assert_eq(waitpid(pid, NULL, WNOHANG), 0, "agent run ended before it held the folder");
        usleep(50 * 1000);
    }
    kill(pid, SIGKILL);
    cr_assert_fail("agent run never held its state folder %s", f->state);
    return -1;
}

/* One agent command at a time on a state folder: while `agent run` works on it, `recover`
 * (which would roll back a move in flight), `bind`, `switch`, `reset-check` and a second
 * `agent run` are refused at once (exit 1), naming the holder's pid, and change nothing; a
 * dry run, which writes nothing, still answers. Once the holder ends, they work again. */
Test(cli_bind, r7_cli_one_agent_command_at_a_time_on_a_state_folder) {
    BindFixture f;
    FakeDevice devs[4];
    fixture_setup(&f, devs, fixture_one_gpu(devs), false);
    char tok[PATH_MAX];
    cr_assert_lt((size_t)snprintf(tok, sizeof(tok), "%s/token", f.k.root), sizeof(tok));
    FILE *t = fopen(tok, "w");
    cr_assert(t);
    fputs("ens_test\n", t);
    fclose(t);
    chmod(tok, 0600);
    pid_t agent = start_agent_run(&f, tok);
    char *before = fake_kernel_snapshot(&f.k);
    char holder[48];
    snprintf(holder, sizeof(holder), "(pid %d)", (int)agent);
    char *out, *err;
    static const char *const cmds[][4] = {{"recover"},
                                          {"recover", "--clear-quarantine", GPU},
                                          {"bind", GPU, "--to", "vfio"},
                                          {"switch", "--to", "vfio"},
                                          {"reset-check", GPU, "--settle-ms", "5"}};
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        const char *const *c = cmds[i];
        int rc = c[1] ? c[2] ? c[3] ? AGENT(&f, &out, &err, c[0], c[1], c[2], c[3])
                                    : AGENT(&f, &out, &err, c[0], c[1], c[2])
                             : AGENT(&f, &out, &err, c[0], c[1])
                      : AGENT(&f, &out, &err, c[0]);
        cr_expect_eq(rc, 1, "agent %s while agent run works: %s", c[0], err);
        cr_expect(strstr(err, "is in use by another einsora agent command") && strstr(err, holder),
                  "agent %s names the holder %s: %s", c[0], holder, err);
        free(out), free(err);
    }
    cr_expect_eq(AGENT(&f, &out, &err, "bind", GPU, "--to", "vfio", "--dry-run"), 0, "%s", err);
    free(out), free(err);
    cr_expect_eq(run_einsora(&out, &err, "agent", "run", "--server", "http://127.0.0.1:9",
                             "--token-file", tok, "--owner", "ops", "--name", "n1", "--no-nvml",
                             "--sysfs-root", f.k.sysfs, "--proc-root", f.k.proc, "--dev-root",
                             f.k.dev, "--state-dir", f.state, NULL),
                 1, "a second agent run: %s", err);
    cr_expect(strstr(err, holder), "%s", err);
    free(out), free(err);
    char *after = fake_kernel_snapshot(&f.k);
    cr_expect_str_eq(after, before, "nothing was changed");
    free(before), free(after);
    kill(agent, SIGTERM);
    cr_assert_eq(waitpid(agent, NULL, 0), agent);
    cr_expect_eq(AGENT(&f, &out, &err, "recover"), 0, "the holder ended: %s", err);
    free(out), free(err);
    cr_expect_eq(AGENT(&f, &out, &err, "bind", GPU, "--to", "vfio"), 0, "%s", err);
    free(out), free(err);
    fixture_teardown(&f);
}
