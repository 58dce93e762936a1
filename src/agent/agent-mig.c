/* agent-mig.c: the MIG instances of this node's slice workloads (R2c, R15, R17). A slice's
 * workload gets the MIG device of an instance made on its placement's slots, never the whole
 * GPU; the instance is recorded ("mig-instances": request id -> GPU UUID and first slot) and
 * removed once its workload is gone, also after an agent restart. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent-internal.h"
#include "agent/nvml-mig.h"
#include "util/macro.h"
#include "util/strutil.h"

#define MIG_RECORDS "mig-instances"

int agent_mig_prepare(Agent *a, json_t *w, const char *id, const MachineInventory *inv,
                      char *ret_uuid, size_t uuid_size, Error *err) {
    json_t *p = json_object_get(w, "placement");
    const char *method = json_string_value(json_object_get(p, "method"));
    ret_uuid[0] = 0;
    if (!method || STRNEQ(method, "mig"))
        return 0;
    const char *bdf = json_string_value(json_array_get(json_object_get(p, "addresses"), 0));
    const char *cls = json_string_value(json_object_get(p, "class"));
    const GpuClass *c = cls && a->catalog ? catalog_find(a->catalog, cls) : NULL;
    const Accelerator *gpu = NULL;
    for (size_t i = 0; bdf && inv && i < inv->n_accelerators && !gpu; i++)
        if (STREQ(inv->accelerators[i].bdf, bdf))
            gpu = &inv->accelerators[i];
    if (!c || !c->mig_profile)
        return error_set(err, -EINVAL, "request %s: %s is not a MIG slice class this agent knows",
                         id, strempty(cls));
    if (!gpu || !gpu->uuid)
        return error_set(err, -ENODEV,
                         "request %s: the GPU %s of its slice is not in this machine's inventory "
                         "with its UUID",
                         id, strempty(bdf));
    if (a->cfg->discover.no_nvml)
        return error_set(err, -EOPNOTSUPP,
                         "request %s: a MIG slice's instance is made through NVML, which this "
                         "agent does not load (--no-nvml)",
                         id);
    unsigned start = (unsigned)json_integer_value(json_object_get(p, "mig_start")),
             slots = (unsigned)json_integer_value(json_object_get(p, "mig_slots"));
    char line[160];
    snprintf(line, sizeof(line), "%s %u", gpu->uuid, start);
    /* Recorded for this request already (a start again after a restart): a process in it may
     * be this workload's own. */
    _cleanup_free_ char *records = agent_read_state(a, MIG_RECORDS);
    const char *was;
    size_t was_len;
    bool ours = text_key_value(records, id, &was, &was_len) && was_len == strlen(line) &&
                !strncmp(was, line, was_len);
    bool made = false;
    int r = nvml_mig_make(a->cfg->discover.nvml_lib, gpu->uuid, c->mig_profile, start, slots, ours,
                          ret_uuid, uuid_size, &made, err);
    if (r < 0)
        return r;
    Error rerr = {0};
    if (agent_state_set_line(a, MIG_RECORDS, id, line, &rerr) < 0)
        agent_logf(a, "cannot record the MIG instance of %s: %s", id, error_message(&rerr));
    agent_logf(a, "%s MIG instance %s (%s at slot %u of %s) for %s", made ? "made" : "took",
               ret_uuid, c->mig_profile, start, gpu->uuid, id);
    a->push_due = true; /* the GPU's instances as they now are */
    return 0;
}

typedef struct MigRecord {
    char id[32], gpu[100];
    unsigned start;
    bool known; /* its workload runs (or is to stop) here */
} MigRecord;

void agent_mig_reap(Agent *a) {
    _cleanup_free_ char *text = agent_read_state(a, MIG_RECORDS);
    MigRecord recs[64];
    size_t n = 0;
    for (const char *l = text; l && *l && n < ARRAY_SIZE(recs);) {
        const char *e = strchrnul(l, '\n');
        _cleanup_free_ char *one = strndup(l, (size_t)(e - l));
        l = *e ? e + 1 : e;
        MigRecord *m = &recs[n];
        if (one && sscanf(one, "%31s %99s %u", m->id, m->gpu, &m->start) == 3) {
            m->known = agent_workload_known(a, m->id);
            n++;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (recs[i].known)
            continue;
        /* The instance went on to the slice placed next on its slots (taken as it was): that
         * one's now, and only the record goes. */
        bool taken_over = false;
        for (size_t k = 0; k < n && !taken_over; k++)
            taken_over = k != i && recs[k].known && STREQ(recs[k].gpu, recs[i].gpu) &&
                         recs[k].start == recs[i].start;
        Error err = {0};
        int r = taken_over ? 0
                           : nvml_mig_remove(a->cfg->discover.nvml_lib, recs[i].gpu, recs[i].start,
                                             &err);
        if (r == -EBUSY)
            continue; /* its process is still ending: again at the next look, quietly */
        if (r < 0 && r != -ENODEV) {
            agent_logf(a, "MIG instance of %s: %s (tried again later)", recs[i].id,
                       error_message(&err));
            continue;
        }
        if (!taken_over)
            agent_logf(a, "removed the MIG instance of %s (slot %u of %s)", recs[i].id,
                       recs[i].start, recs[i].gpu);
        (void)agent_state_set_line(a, MIG_RECORDS, recs[i].id, NULL, &err);
        a->push_due = true; /* the GPU's instances changed */
    }
}
