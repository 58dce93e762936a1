/* mig.h: the MIG profile table (SPEC) and the placement geometry of a GPU's 8 memory slots.
 *
 * Pure data and arithmetic. A MIG GPU has 8 memory slots; each profile shape takes a fixed
 * number of consecutive slots and may start only at given slots. The per-card names come
 * from the SPEC table; at run time the agent reads the real profiles from NVML. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define MIG_SLOTS 8

typedef enum MigShape {
    MIG_SHAPE_1G,        /* 1 compute slice, 1 memory slot, 7 fit */
    MIG_SHAPE_1G_DOUBLE, /* 1 compute slice, double memory: 2 slots, 4 fit */
    MIG_SHAPE_2G,
    MIG_SHAPE_3G,
    MIG_SHAPE_4G,
    MIG_SHAPE_7G,
    _MIG_SHAPE_MAX,
    _MIG_SHAPE_INVALID = -1,
} MigShape;

typedef struct MigShapeInfo {
    unsigned compute_slices; /* the "Ng" part */
    unsigned mem_slots;      /* consecutive memory slots taken */
    uint8_t start_mask;      /* bit i set: may start at slot i */
    unsigned max_instances;  /* how many fit on one GPU */
} MigShapeInfo;

typedef struct MigCardRow {
    const char *card;   /* e.g. "H100-80GB" */
    unsigned memory_gb; /* card memory that selects this row */
    const char *profiles[_MIG_SHAPE_MAX];
} MigCardRow;

const MigShapeInfo *mig_shape_info(MigShape shape);

/* The SPEC table row for a card of this memory size (within MIG_ROW_MEMORY_SLACK_GB, as NVML
 * reports it), or NULL when no MIG card has it. */
#define MIG_ROW_MEMORY_SLACK_GB 2
const MigCardRow *mig_card_row_for_memory(unsigned memory_gb);

/* The shape of a profile name within a row, or _MIG_SHAPE_INVALID. */
MigShape mig_row_profile_shape(const MigCardRow *row, const char *profile);

/* The shape of a profile on a card of card_gb: its row's in the SPEC table; on a MIG card
 * outside the table (an H100 NVL, a GH200: R2c "and similar, as NVML reports") measured: "Ng.Mgb"
 * with N compute slices of a shape (1, 2, 3, 4, 7) and M the memory of the slots that shape
 * takes (an eighth of the card a slot, within an eighth of that), which also tells a 1g of two
 * slots' memory from a plain one. _MIG_SHAPE_INVALID when it fits neither. */
MigShape mig_profile_shape(unsigned card_gb, const char *profile);

/* Memory in GB named by a profile ("3g.40gb" -> 40); 0 when the name is malformed. */
unsigned mig_profile_memory_gb(const char *profile);

/* Slot bitmap helpers: bit i of a layout is memory slot i in use. */
bool mig_can_place(uint8_t used, MigShape shape, unsigned start);
uint8_t mig_shape_mask(MigShape shape, unsigned start);

/* How many more instances of shape fit into layout `used` (greedy by start slot, which is
 * exact for these aligned shapes). */
unsigned mig_count_placeable(uint8_t used, MigShape shape);
