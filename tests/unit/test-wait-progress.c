/* test-wait-progress.c: the status line `request create --wait` redraws on a terminal (R13:
 * the time until the fallback opens; the queue position and reason of a waiting request). A
 * pure function of the request and the time, so every case is exact. */
#include <criterion/criterion.h>
#include <string.h>

#include "cli/wait-progress.h"

static json_t *pending(void) {
    return json_pack("{s:I, s:s, s:I, s:s, s:I}", "id", (json_int_t)7, "state", "pending",
                     "queue_position", (json_int_t)2, "reason", "waiting for nvidia-h100-80gb",
                     "fallback_at_ms", (json_int_t)1000000);
}

Test(wait_progress, r13_wait_line_shows_state_position_countdown_and_reason) {
    json_t *q = pending();
    char buf[256];
    cr_expect_str_eq(wait_progress_line(q, 1000000 - 65000, 0, buf, sizeof(buf)),
                     "request 7: pending [queue position 2] fallback opens in 1m05s: waiting "
                     "for nvidia-h100-80gb");
    /* 300 ms before it opens is still "in 1s", never "in 0s". */
    cr_expect_str_eq(wait_progress_line(q, 1000000 - 300, 0, buf, sizeof(buf)),
                     "request 7: pending [queue position 2] fallback opens in 1s: waiting for "
                     "nvidia-h100-80gb");
    cr_expect_str_eq(wait_progress_line(q, 1000000, 0, buf, sizeof(buf)),
                     "request 7: pending [queue position 2] fallback open: waiting for "
                     "nvidia-h100-80gb");
    json_decref(q);
}

Test(wait_progress, r13_wait_line_without_fallback_or_position_leaves_them_out) {
    json_t *q = json_pack("{s:I, s:s}", "id", (json_int_t)3, "state", "pending");
    char buf[128];
    cr_expect_str_eq(wait_progress_line(q, 0, 0, buf, sizeof(buf)), "request 3: pending");
    json_decref(q);
}

Test(wait_progress, r13_wait_line_fits_the_terminal_without_splitting_a_character) {
    json_t *q = pending();
    char buf[256];
    wait_progress_line(q, 0, 40, buf, sizeof(buf));
    cr_expect_eq(strlen(buf), 39, "one column left free, so the line never wraps: '%s'", buf);
    cr_expect_str_eq(buf + 36, "...");
    json_object_set_new(q, "reason", json_string("é é é é é é é é é é é é é é é é é é"));
    for (size_t w = 20; w < 120; w++) {
        wait_progress_line(q, 0, w, buf, sizeof(buf));
        cr_assert_leq(strlen(buf), w - 1);
        size_t n = strlen(buf);
        if (n > 3 && strcmp(buf + n - 3, "...") == 0)
            cr_expect_neq((unsigned char)buf[n - 4], 0xc3, "a cut never leaves half of 'é' (w %zu)",
                          w);
    }
    json_decref(q);
}

Test(wait_progress, r13_durations_read_as_people_write_them) {
    char d[32];
    cr_expect_str_eq(wait_format_duration(-5, d, sizeof(d)), "0s");
    cr_expect_str_eq(wait_format_duration(59000, d, sizeof(d)), "59s");
    cr_expect_str_eq(wait_format_duration(60000, d, sizeof(d)), "1m00s");
    cr_expect_str_eq(wait_format_duration(3600000, d, sizeof(d)), "1h00m");
    cr_expect_str_eq(wait_format_duration(7322000, d, sizeof(d)), "2h02m");
}
