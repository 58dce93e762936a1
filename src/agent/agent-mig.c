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
    int r = nvml_mig_make(a->cfg->discover.nvml_lib, gpu->uuid, c->mig_profile, start, slots,
                          ret_uuid, uuid_size, err);
    if (r < 0)
        return r;
    char line[160];
    snprintf(line, sizeof(line), "%s %u", gpu->uuid, start);
    Error rerr = {0};
    if (agent_state_set_line(a, MIG_RECORDS, id, line, &rerr) < 0)
        agent_logf(a, "cannot record the MIG instance of %s: %s", id, error_message(&rerr));
    agent_logf(a, "made MIG instance %s (%s at slot %u of %s) for %s", ret_uuid, c->mig_profile,
               start, gpu->uuid, id);
    return 0;
}

void agent_mig_reap(Agent *a) {
    _cleanup_free_ char *text = agent_read_state(a, MIG_RECORDS);
    for (const char *l = text; l && *l;) {
        const char *e = strchrnul(l, '\n');
        char id[32], gpu[100];
        unsigned start;
        _cleanup_free_ char *one = strndup(l, (size_t)(e - l));
        l = *e ? e + 1 : e;
        if (!one || sscanf(one, "%31s %99s %u", id, gpu, &start) != 3 ||
            agent_workload_known(a, id))
            continue;
        Error err = {0};
        int r = nvml_mig_remove(a->cfg->discover.nvml_lib, gpu, start, &err);
        if (r < 0 && r != -ENODEV) {
            agent_logf(a, "MIG instance of %s: %s (tried again later)", id, error_message(&err));
            continue;
        }
        agent_logf(a, "removed the MIG instance of %s (slot %u of %s)", id, start, gpu);
        (void)agent_state_set_line(a, MIG_RECORDS, id, NULL, &err);
        a->push_due = true; /* the GPU's instances changed */
    }
}
