/* mig.c: the MIG profile table and slot geometry (SPEC "MIG profiles"). */
#include "mig.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"

static const MigShapeInfo shapes[_MIG_SHAPE_MAX] = {
        [MIG_SHAPE_1G] = {1, 1, 0x7f, 7},        /* starts {0..6} */
        [MIG_SHAPE_1G_DOUBLE] = {1, 2, 0x55, 4}, /* starts {0,2,4,6} */
        [MIG_SHAPE_2G] = {2, 2, 0x15, 3},        /* starts {0,2,4} */
        [MIG_SHAPE_3G] = {3, 4, 0x11, 2},        /* starts {0,4} */
        [MIG_SHAPE_4G] = {4, 4, 0x01, 1},        /* starts {0} */
        [MIG_SHAPE_7G] = {7, 8, 0x01, 1},        /* starts {0} */
};

static const MigCardRow rows[] = {
        {"A100-40GB", 40, {"1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}},
        {"A100-80GB/H100-80GB",
         80,
         {"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}},
        {"H200-141GB", 141, {"1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"}},
        {"B200-180GB", 180, {"1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"}},
};

const MigShapeInfo *mig_shape_info(MigShape shape) {
    if ((int)shape < 0 || shape >= _MIG_SHAPE_MAX)
        return NULL;
    return &shapes[shape];
}

const MigCardRow *mig_card_row_for_memory(unsigned memory_gb) {
    /* Near, not equal: NVML's total rounds to 140 GB on an H200 and 179 on a B200 (the
     * table names the marketed size); the rows lie 40 GB or more apart. */
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
        if (memory_gb + MIG_ROW_MEMORY_SLACK_GB >= rows[i].memory_gb &&
            memory_gb <= rows[i].memory_gb + MIG_ROW_MEMORY_SLACK_GB)
            return &rows[i];
    return NULL;
}

MigShape mig_row_profile_shape(const MigCardRow *row, const char *profile) {
    if (!row || !profile)
        return _MIG_SHAPE_INVALID;
    for (int s = 0; s < _MIG_SHAPE_MAX; s++)
        if (strcmp(row->profiles[s], profile) == 0)
            return (MigShape)s;
    return _MIG_SHAPE_INVALID;
}

MigShape mig_profile_shape(unsigned card_gb, const char *profile) {
    const MigCardRow *row = mig_card_row_for_memory(card_gb);
    if (row)
        return mig_row_profile_shape(row, profile);
    unsigned m = mig_profile_memory_gb(profile);
    if (!m || m > card_gb || profile[1] != 'g')
        return _MIG_SHAPE_INVALID;
    unsigned g = (unsigned)(profile[0] - '0');
    for (int s = 0; s < _MIG_SHAPE_MAX; s++) {
        /* 8 M against slots x card, in integers: within an eighth */
        uint64_t want = (uint64_t)shapes[s].mem_slots * card_gb, have = 8ull * m;
        uint64_t off = want > have ? want - have : have - want;
        if (shapes[s].compute_slices == g && 8 * off <= want)
            return (MigShape)s;
    }
    return _MIG_SHAPE_INVALID;
}

unsigned mig_profile_memory_gb(const char *profile) {
    /* "<digits>g.<digits>gb" */
    const char *p = profile;
    if (!p || *p < '1' || *p > '9')
        return 0;
    while (*p >= '0' && *p <= '9')
        p++;
    if (p[0] != 'g' || p[1] != '.')
        return 0;
    p += 2;
    if (*p < '1' || *p > '9')
        return 0;
    unsigned v = 0;
    while (*p >= '0' && *p <= '9') {
        v = v * 10 + (unsigned)(*p - '0');
        if (v > 100000)
            return 0;
        p++;
    }
    return strcmp(p, "gb") == 0 ? v : 0;
}

uint8_t mig_shape_mask(MigShape shape, unsigned start) {
    const MigShapeInfo *info = mig_shape_info(shape);
    /* start is checked alone first: start + mem_slots could wrap and pass */
    if (!info || start >= MIG_SLOTS || info->mem_slots > MIG_SLOTS - start)
        return 0;
    return (uint8_t)(((1u << info->mem_slots) - 1u) << start);
}

bool mig_can_place(uint8_t used, MigShape shape, unsigned start) {
    const MigShapeInfo *info = mig_shape_info(shape);
    if (!info || start >= MIG_SLOTS || !(info->start_mask & (1u << start)))
        return false;
    uint8_t m = mig_shape_mask(shape, start);
    return m && !(used & m);
}

unsigned mig_count_placeable(uint8_t used, MigShape shape) {
    unsigned n = 0;
    for (unsigned s = 0; s < MIG_SLOTS; s++)
        if (mig_can_place(used, shape, s)) {
            used |= mig_shape_mask(shape, s);
            n++;
        }
    return n;
}
