/* test-reset.c: the reset-cycle check of consumer GPUs on vfio-pci through the fake kernel (R9). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/records.h"
#include "agent/reset-check.h"
#include "fixture.h"

#define GPU "0000:01:00.0"

/* A fixture with the GPU already on vfio-pci, and reset-check options pointed at it. */
static void setup_on_vfio(BindFixture *f, ResetCheckOptions *rc) {
    FakeDevice devs[4];
    fixture_setup(f, devs, fixture_one_gpu(devs), false);
    BindResult res;
    Error err = {0};
    cr_assert_eq(gpu_bind(&f->o, GPU, BIND_TO_VFIO, &res, &err), 0, "%s", error_message(&err));
    reset_check_options_init(rc);
    rc->bind = f->o;
    rc->settle_ms = 30;
}

static void run_check(ResetCheckOptions *rc, ResetCheckResult *res) {
    Error err = {0};
    cr_assert_eq(gpu_reset_check(rc, GPU, res, &err), 0, "%s", error_message(&err));
}

Test(reset, r9_healthy_card_passes_three_cycles) {
    BindFixture f;
    ResetCheckOptions rc;
    setup_on_vfio(&f, &rc);
    ResetCheckResult res;
    run_check(&rc, &res);
    cr_expect_eq(res.verdict, RESET_PASS, "%s", res.n_reasons ? res.reasons[0] : "");
    cr_expect_eq(res.cycles_run, 3);
    cr_expect_str_eq(res.reset_method, "flr bus");
    cr_expect(!res.quarantined);
    char *q = NULL;
    cr_expect_eq(agent_quarantine_get(f.state, GPU, &q), -ENOENT);
    /* The fake kernel saw three resets of the GPU. */
    FILE *fp = fopen(fixture_path(&f, ".fake-kernel/log"), "r");
    cr_assert(fp);
    char line[512];
    int resets = 0;
    while (fgets(line, sizeof(line), fp))
        resets += strstr(line, GPU " reset (ok)") != NULL;
    fclose(fp);
    cr_expect_eq(resets, 3);
    fixture_teardown(&f);
}

Test(reset, r9_card_that_vanishes_fails_and_is_quarantined) {
    BindFixture f;
    ResetCheckOptions rc;
    setup_on_vfio(&f, &rc);
    cr_assert_eq(fake_kernel_control(&f.k, "reset " GPU " fail"), 0);
    ResetCheckResult res;
    run_check(&rc, &res);
    cr_expect_eq(res.verdict, RESET_FAIL);
    cr_expect_eq(res.cycles_run, 1, "no more resets once the card is gone");
    bool saw_ffff = false, saw_log = false;
    for (size_t i = 0; i < res.n_reasons; i++) {
        saw_ffff = saw_ffff || strstr(res.reasons[i], "0xffff") != NULL;
        saw_log = saw_log || strstr(res.reasons[i], "not ready 65535ms after FLR") != NULL;
    }
    cr_expect(saw_ffff && saw_log);
    cr_expect(res.quarantined);
    char *q = NULL;
    cr_assert_eq(agent_quarantine_get(f.state, GPU, &q), 0);
    cr_expect(strstr(q, "reset-cycle check failed") != NULL, "%s", q);
    free(q);
    /* A quarantined GPU is not moved again until someone clears it. */
    BindResult br;
    Error err = {0};
    cr_expect_eq(gpu_bind(&f.o, GPU, BIND_TO_HOST, &br, &err), -EPERM);
    cr_expect(strstr(error_message(&err), "quarantined") != NULL);
    fixture_teardown(&f);
}

Test(reset, r9_slower_link_after_reset_is_degraded_not_quarantined) {
    BindFixture f;
    ResetCheckOptions rc;
    setup_on_vfio(&f, &rc);
    cr_assert_eq(fake_kernel_control(&f.k, "reset " GPU " degraded"), 0);
    ResetCheckResult res;
    run_check(&rc, &res);
    cr_expect_eq(res.verdict, RESET_DEGRADED);
    cr_expect(res.n_reasons > 0 && strstr(res.reasons[0], "16.0 GT/s x16 to 2.5 GT/s x8") != NULL,
              "%s", res.reasons[0]);
    cr_expect(!res.quarantined);
    fixture_teardown(&f);
}

Test(reset, r9_power_state_lost_after_reset_fails) {
    BindFixture f;
    ResetCheckOptions rc;
    setup_on_vfio(&f, &rc);
    cr_assert_eq(fake_kernel_control(&f.k, "reset " GPU " d3cold"), 0);
    ResetCheckResult res;
    run_check(&rc, &res);
    cr_expect_eq(res.verdict, RESET_FAIL);
    cr_expect(strstr(res.reasons[0], "D3cold instead of D0") != NULL, "%s", res.reasons[0]);
    fixture_teardown(&f);
}

Test(reset, r9_known_failure_in_kernel_log_fails) {
    BindFixture f;
    ResetCheckOptions rc;
    setup_on_vfio(&f, &rc);
    /* Old lines are not this check's business: only what the resets cause counts. */
    FILE *fp = fopen(fixture_path(&f, "dev/kmsg"), "a");
    fprintf(fp, "3,1,1,-;NVRM: GPU at PCI:0000:01:00: GPU has fallen off the bus.\n");
    fclose(fp);
    const char *aer = "reset " GPU " kmsg:pcieport 0000:00:01.0: AER: Uncorrected "
                      "(Fatal) error received: 0000:01:00.0";
    cr_assert_eq(fake_kernel_control(&f.k, aer), 0);
    ResetCheckResult res;
    run_check(&rc, &res);
    cr_expect_eq(res.verdict, RESET_FAIL);
    cr_expect_eq(res.n_reasons, 3, "one AER line per reset, the old line ignored");
    cr_expect(strstr(res.reasons[0], "Uncorrected (Fatal)") != NULL, "%s", res.reasons[0]);
    fixture_teardown(&f);
}

Test(reset, r9_pending_transaction_timeout_is_degraded) {
    BindFixture f;
    ResetCheckOptions rc;
    setup_on_vfio(&f, &rc);
    cr_assert_eq(fake_kernel_control(&f.k,
                                     "reset " GPU
                                     " kmsg:vfio-pci 0000:01:00.0: timed out waiting for pending "
                                     "transaction; performing function level reset anyway"),
                 0);
    ResetCheckResult res;
    run_check(&rc, &res);
    cr_expect_eq(res.verdict, RESET_DEGRADED);
    fixture_teardown(&f);
}

Test(reset, r9_hung_reset_fails) {
    BindFixture f;
    ResetCheckOptions rc;
    setup_on_vfio(&f, &rc);
    rc.bind.timeout_ms = 200;
    cr_assert_eq(fake_kernel_control(&f.k, "hang bus/pci/devices/" GPU "/reset"), 0);
    ResetCheckResult res;
    run_check(&rc, &res);
    cr_expect_eq(res.verdict, RESET_FAIL);
    cr_expect(strstr(res.reasons[0], "hung") != NULL, "%s", res.reasons[0]);
    cr_expect(res.quarantined);
    fixture_teardown(&f);
}

Test(reset, r9_check_refused_unless_on_vfio_and_idle) {
    BindFixture f;
    FakeDevice devs[4];
    fixture_setup(&f, devs, fixture_one_gpu(devs), false);
    ResetCheckOptions rc;
    reset_check_options_init(&rc);
    rc.bind = f.o;
    ResetCheckResult res;
    Error err = {0};
    cr_expect_eq(gpu_reset_check(&rc, GPU, &res, &err), -EPERM);
    cr_expect(strstr(error_message(&err), "not vfio-pci") != NULL, "%s", error_message(&err));
    BindResult br;
    cr_assert_eq(gpu_bind(&f.o, GPU, BIND_TO_VFIO, &br, &err), 0);
    cr_assert_eq(fake_kernel_add_holder(&f.k, 99, "qemu-system-x86", "vfio/1"), 0);
    error_clear(&err);
    cr_expect_eq(gpu_reset_check(&rc, GPU, &res, &err), -EBUSY);
    cr_expect(strstr(error_message(&err), "qemu-system-x86 (pid 99)") != NULL, "%s",
              error_message(&err));
    fixture_teardown(&f);
}

Test(reset, r9_kmsg_lines_classified) {
    cr_expect_eq(reset_classify_kmsg_line("pci 0000:01:00.0: not ready 1023ms after FLR; waiting"),
                 RESET_FAIL);
    cr_expect_eq(reset_classify_kmsg_line("vfio-pci 0000:01:00.0: Unable to change power state "
                                          "from D3cold to D0, device inaccessible"),
                 RESET_FAIL);
    cr_expect_eq(
            reset_classify_kmsg_line("NVRM: GPU at PCI:0000:01:00: GPU has fallen off the bus."),
            RESET_FAIL);
    cr_expect_eq(reset_classify_kmsg_line("vfio-pci 0000:01:00.0: timed out waiting for pending "
                                          "transaction; performing function level reset anyway"),
                 RESET_DEGRADED);
    cr_expect_eq(reset_classify_kmsg_line(
                         "pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0"),
                 RESET_PASS);
    cr_expect_eq(reset_classify_kmsg_line("vfio-pci 0000:01:00.0: enabling device (0000 -> 0003)"),
                 RESET_PASS);
}
