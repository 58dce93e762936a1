/* fuzz-journal.c: libFuzzer target for the binding journal and the workload-records parsers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/journal.h"
#include "agent/pci-sysfs.h"
#include "agent/records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    JournalOp op;
    Error err = {0};
    if (journal_parse((const char *)data, size, &op, &err) == 0) {
        /* Whatever parses must be self-consistent. */
        if (op.n_fns > JOURNAL_MAX_FNS || !pci_bdf_is_valid(op.gpu))
            abort();
        for (size_t i = 0; i < op.n_fns; i++)
            if (!pci_bdf_is_valid(op.fns[i].bdf) || op.fns[i].step >= _JOURNAL_STEP_MAX)
                abort();
    }
    /* Both formats of the workloads file: its two copies (either may be torn) or lines alone. */
    char **bdfs, **ids;
    size_t n;
    if (agent_records_decode((const char *)data, size, &bdfs, &ids, &n, NULL) == 0) {
        for (size_t i = 0; i < n; i++)
            if (!pci_bdf_is_valid(bdfs[i]) || strchr(ids[i], ' '))
                abort();
        strv_free(bdfs, n);
        strv_free(ids, n);
    }
    return 0;
}
