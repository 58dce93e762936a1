/* journal.h: the binding journal, so that an agent killed mid-switch can finish or undo it.
 *
 * One operation (one GPU's IOMMU group moving to one driver) at a time, in
 * <state>/journal, one line per event, each appended with a single write() and fsync'd:
 *
 *   einsora-journal 1
 *   begin <op-id> <gpu-bdf> vfio|host
 *   fn <bdf> <from-driver|-> <to-driver|-> <original-driver_override|->
 *   step <bdf> override|unbound|probed|verified
 *   end <op-id> done|rolled-back|quarantined
 *
 * "fn" lines come right after "begin" (the intent); "to" is "-" when going back to the host
 * with no known host driver (any driver but vfio-pci will do). A last line without its newline
 * is a write the kill interrupted and is ignored; anything else malformed is an error. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

#define JOURNAL_MAX_FNS 8 /* functions 0-7 of one PCI slot */
#define JOURNAL_NAME_MAX 64

typedef enum JournalStep {
    JOURNAL_STEP_INTENT,
    JOURNAL_STEP_OVERRIDE,
    JOURNAL_STEP_UNBOUND,
    JOURNAL_STEP_PROBED,
    JOURNAL_STEP_VERIFIED,
    _JOURNAL_STEP_MAX,
} JournalStep;

typedef enum JournalOutcome {
    JOURNAL_OPEN, /* no "end" line: the agent stopped before finishing */
    JOURNAL_DONE,
    JOURNAL_ROLLED_BACK,
    JOURNAL_QUARANTINED,
} JournalOutcome;

typedef struct JournalFn {
    char bdf[16];
    char from[JOURNAL_NAME_MAX];     /* "" when no driver was bound */
    char to[JOURNAL_NAME_MAX];       /* "" = any driver but vfio-pci */
    char override[JOURNAL_NAME_MAX]; /* the driver_override found before, "" for none */
    JournalStep step;
} JournalFn;

typedef struct JournalOp {
    unsigned long id;
    char gpu[16];
    bool to_vfio;
    JournalFn fns[JOURNAL_MAX_FNS];
    size_t n_fns;
    JournalOutcome outcome;
} JournalOp;

const char *journal_step_to_string(JournalStep s);
const char *journal_outcome_to_string(JournalOutcome o);

/* Parse a journal's text; *ret is the last operation. -ENOENT when it holds none. */
int journal_parse(const char *text, size_t len, JournalOp *ret, Error *err);

/* Load <state_dir>/journal; -ENOENT when there is none or it holds no operation. */
int journal_load(const char *state_dir, JournalOp *ret, Error *err);

/* Start an operation: replaces the journal (the previous operation must have ended) with the
 * header, "begin" and the "fn" lines of op. op->id is chosen here (previous id + 1). */
int journal_begin(const char *state_dir, JournalOp *op, Error *err);
int journal_step(const char *state_dir, const char *bdf, JournalStep step, Error *err);
int journal_end(const char *state_dir, unsigned long id, JournalOutcome outcome, Error *err);
