/* test-fleet-spec.c: the fleet endpoints' body parsers: what they take, and that every kind of
 * bad input is refused with a sentence. */
#include <criterion/criterion.h>
#include <string.h>

#include "wire/fleet.h"

#define PARSE(fn, text, out, err) fn(text, strlen(text), out, err)

Test(fleet_spec, r4_mode_switch_takes_mode_drain_and_one_gpu) {
    FleetModeRequest m;
    Error err = {0};
    cr_assert_eq(PARSE(fleet_mode_parse,
                       "{\"mode\":\"vm-passthrough\",\"drain\":\"evict\",\"gpu\":\"0000:01:00.0\"}",
                       &m, &err),
                 0);
    cr_expect_str_eq(m.mode, "vm-passthrough");
    cr_expect_str_eq(m.drain, "evict");
    cr_expect_str_eq(m.gpu, "0000:01:00.0");
    cr_assert_eq(PARSE(fleet_mode_parse, "{\"mode\":\"container\"}", &m, &err), 0);
    cr_expect_str_eq(m.drain, "none", "no drain unless asked (R4)");
    cr_expect_str_eq(m.gpu, "");
}

Test(fleet_spec, r2d_switch_to_vgpu_is_refused_naming_the_alternatives) {
    FleetModeRequest m;
    Error err = {0};
    cr_assert_lt(PARSE(fleet_mode_parse, "{\"mode\":\"vm-vgpu\"}", &m, &err), 0);
    cr_expect(strstr(err.message, "vm-passthrough") && strstr(err.message, "container"), "%s",
              err.message);
}

Test(fleet_spec, bad_bodies_are_refused_with_a_sentence) {
    static const char *const modes[] = {"",
                                        "[]",
                                        "{}",
                                        "{\"mode\":1}",
                                        "{\"mode\":\"bare-metal\"}",
                                        "{\"mode\":\"container\",\"drain\":\"later\"}",
                                        "{\"mode\":\"container\",\"force\":true}",
                                        "{\"mode\":\"container\",\"gpu\":\"\"}",
                                        "{\"mode\":\"container\"",
                                        "{\"mode\":\"container\",\"mode\":\"container\"}"};
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        FleetModeRequest m;
        Error err = {0};
        if (!modes[i][0])
            continue; /* an empty body is an empty object: refused below for lack of a mode */
        cr_expect_lt(PARSE(fleet_mode_parse, modes[i], &m, &err), 0, "%s accepted", modes[i]);
        cr_expect(err.message[0], "%s: no sentence", modes[i]);
    }
    static const char *const beats[] = {"[1]",
                                        "{\"interval_s\":0}",
                                        "{\"interval_s\":3601}",
                                        "{\"interval_s\":\"2\"}",
                                        "{\"running\":\"12\"}",
                                        "{\"running\":[\"x\"]}",
                                        "{\"running\":[0]}",
                                        "{\"who\":\"me\"}"};
    for (size_t i = 0; i < sizeof(beats) / sizeof(beats[0]); i++) {
        FleetHeartbeat h;
        Error err = {0};
        cr_expect_lt(PARSE(fleet_heartbeat_parse, beats[i], &h, &err), 0, "%s accepted", beats[i]);
        cr_expect(err.message[0], "%s: no sentence", beats[i]);
    }
    static const char *const results[] = {"{}",
                                          "{\"ok\":1}",
                                          "{\"ok\":true,\"verdict\":\"maybe\"}",
                                          "{\"ok\":true,\"message\":5}",
                                          "{\"ok\":true,\"extra\":1}",
                                          "{\"ok\":true,\"progress\":\"yes\"}"};
    for (size_t i = 0; i < sizeof(results) / sizeof(results[0]); i++) {
        FleetTaskResult t;
        Error err = {0};
        cr_expect_lt(PARSE(fleet_task_result_parse, results[i], &t, &err), 0, "%s accepted",
                     results[i]);
        cr_expect(err.message[0], "%s: no sentence", results[i]);
    }
}

Test(fleet_spec, heartbeat_lists_what_the_agent_runs) {
    FleetHeartbeat h;
    Error err = {0};
    cr_assert_eq(
            PARSE(fleet_heartbeat_parse, "{\"interval_s\":2,\"running\":[\"12\",15]}", &h, &err),
            0);
    cr_expect_eq(h.interval_s, 2);
    cr_expect(h.has_running && fleet_heartbeat_runs(&h, 12) && fleet_heartbeat_runs(&h, 15));
    cr_expect(!fleet_heartbeat_runs(&h, 13));
    fleet_heartbeat_done(&h);
    cr_assert_eq(fleet_heartbeat_parse("", 0, &h, &err), 0);
    cr_expect(!h.has_running, "no list: nothing to reconcile");
    fleet_heartbeat_done(&h);
}

Test(fleet_spec, r4_a_task_progress_report_is_not_a_result) {
    FleetTaskResult t;
    Error err = {0};
    const char *text = "{\"ok\":true,\"progress\":true,\"message\":\"blocked by PDB train-pdb\"}";
    cr_assert_eq(fleet_task_result_parse(text, strlen(text), &t, &err), 0, "%s", err.message);
    cr_expect(t.progress);
    cr_expect_str_eq(t.message, "blocked by PDB train-pdb");
    text = "{\"ok\":false,\"message\":\"done\"}";
    cr_assert_eq(fleet_task_result_parse(text, strlen(text), &t, &err), 0, "%s", err.message);
    cr_expect_not(t.progress);
}
