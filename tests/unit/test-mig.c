/* test-mig.c: the SPEC MIG table and the 8-slot geometry (R2c). */
#include <criterion/criterion.h>
#include <limits.h>

#include "core/mig.h"

Test(mig, r2c_every_spec_row_and_profile) {
    struct {
        unsigned mem;
        const char *p[6];
    } rows[] = {
            {40, {"1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}},
            {80, {"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}},
            {141, {"1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"}},
            {180, {"1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"}},
    };
    for (size_t r = 0; r < 4; r++) {
        const MigCardRow *row = mig_card_row_for_memory(rows[r].mem);
        cr_assert_not_null(row);
        for (int s = 0; s < 6; s++)
            cr_expect_eq(mig_row_profile_shape(row, rows[r].p[s]), (MigShape)s, "%s", rows[r].p[s]);
    }
    cr_expect_null(mig_card_row_for_memory(48));
    cr_expect_eq(mig_row_profile_shape(mig_card_row_for_memory(40), "1g.20gb"), _MIG_SHAPE_INVALID);
}

Test(mig, r2c_instances_that_fit_one_gpu) {
    cr_expect_eq(mig_count_placeable(0, MIG_SHAPE_1G), 7, "seven 1g leave slot 7 unused");
    cr_expect_eq(mig_count_placeable(0, MIG_SHAPE_1G_DOUBLE), 4);
    cr_expect_eq(mig_count_placeable(0, MIG_SHAPE_2G), 3);
    cr_expect_eq(mig_count_placeable(0, MIG_SHAPE_3G), 2);
    cr_expect_eq(mig_count_placeable(0, MIG_SHAPE_4G), 1);
    cr_expect_eq(mig_count_placeable(0, MIG_SHAPE_7G), 1);
}

Test(mig, r2c_allowed_start_slots) {
    cr_expect(mig_can_place(0, MIG_SHAPE_1G, 6));
    cr_expect(!mig_can_place(0, MIG_SHAPE_1G, 7));
    cr_expect(mig_can_place(0, MIG_SHAPE_1G_DOUBLE, 6));
    cr_expect(!mig_can_place(0, MIG_SHAPE_1G_DOUBLE, 1));
    cr_expect(!mig_can_place(0, MIG_SHAPE_2G, 6), "2g starts only at 0, 2, 4");
    cr_expect(mig_can_place(0, MIG_SHAPE_3G, 4));
    cr_expect(!mig_can_place(0, MIG_SHAPE_3G, 2));
    cr_expect(!mig_can_place(0, MIG_SHAPE_4G, 4));
    cr_expect(!mig_can_place(0x01, MIG_SHAPE_7G, 0));
    cr_expect_eq(mig_shape_mask(MIG_SHAPE_3G, 4), 0xf0, "a 3g takes four memory slots");
    /* a 3g at 4 leaves room for one 4g at 0, no second 3g at 0 is blocked by nothing */
    cr_expect_eq(mig_count_placeable(0xf0, MIG_SHAPE_4G), 1);
    cr_expect_eq(mig_count_placeable(0x10, MIG_SHAPE_3G), 1, "one 1g at slot 4 blocks the 3g at 4");
}

/* A start near UINT_MAX made start + slots wrap past the bound check (found by ./dev lint). */
Test(mig, r2c_shape_mask_refuses_a_start_past_the_slots) {
    cr_expect_eq(mig_shape_mask(MIG_SHAPE_1G, 7), 0x80);
    cr_expect_eq(mig_shape_mask(MIG_SHAPE_1G, 8), 0);
    cr_expect_eq(mig_shape_mask(MIG_SHAPE_3G, 5), 0, "a 3g from 5 would need slots 5-8");
    cr_expect_eq(mig_shape_mask(MIG_SHAPE_1G, UINT_MAX), 0);
    cr_expect_eq(mig_shape_mask(MIG_SHAPE_3G, UINT_MAX - 2), 0);
}

Test(mig, r2c_profile_memory_parse) {
    cr_expect_eq(mig_profile_memory_gb("3g.40gb"), 40);
    cr_expect_eq(mig_profile_memory_gb("7g.141gb"), 141);
    cr_expect_eq(mig_profile_memory_gb("1g.5gb"), 5);
    cr_expect_eq(mig_profile_memory_gb("1g.5gbx"), 0);
    cr_expect_eq(mig_profile_memory_gb("g.5gb"), 0);
    cr_expect_eq(mig_profile_memory_gb("1g5gb"), 0);
    cr_expect_eq(mig_profile_memory_gb(""), 0);
}
