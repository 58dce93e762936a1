/* metrics-capacity.c: the capacity and mode-switch gauges of /metrics, shaped so that a sum
 * over any label counts nothing twice: the states of einsora_capacity_units partition each
 * class's units (no "total" beside its parts), MIG slice classes (alternatives cut from the
 * same GPUs) and CPU cores have families of their own, and a switch is 1 on exactly one of
 * its step labels. */
#include "api.h"
#include "fleet.h"
#include "server-internal.h"

static const char *const unit_states[] = {"allocated", "free", "cordoned", "quarantined"};

static void help(StrBuf *b, const char *name, const char *text) {
    strbuf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", name, text, name);
}

/* The catalog class of a capacity row, or NULL. */
static const GpuClass *row_class(Server *s, const CapacityRow *row) {
    if (!s->catalog || row->class_index < 0 || (size_t)row->class_index >= s->catalog->n_classes)
        return NULL;
    return &s->catalog->classes[row->class_index];
}

void metrics_write_capacity(StrBuf *b, Server *s) {
    pthread_rwlock_rdlock(&s->lock);
    CapacityRow *rows = NULL;
    size_t n = 0;
    if (sched_capacity(s->sched, &rows, &n, NULL) < 0)
        n = 0;
    pthread_rwlock_unlock(&s->lock);
    help(b, "einsora_capacity_units",
         "Whole units (GPUs, Macs) of each class per mode (R6) and state, summed over sites; "
         "the states partition the units, so a sum over every label counts each unit once.");
    for (int pass = 0; pass < 3; pass++) {
        if (pass == 1)
            help(b, "einsora_mig_slices",
                 "MIG slices of each slice class (cut from the GPUs of class `parent`) by state: "
                 "allocated slices exist and add up; free, cordoned and quarantined ones are "
                 "what each profile alone could still get (or could once the GPU is back), "
                 "alternatives that must not be summed over class.");
        else if (pass == 2)
            help(b, "einsora_cpu_cores", "CPU cores offered to cpu-class requests, by state.");
        for (size_t i = 0; i < n; i++) {
            const CapacityRow *r = &rows[i];
            if (r->site)
                continue; /* the per-site rows: their sums follow */
            const GpuClass *cls = row_class(s, r);
            bool slice = cls && cls->mig_parent, cpu = r->mode == CAPACITY_CPU;
            if ((pass == 0 && (slice || cpu)) || (pass == 1 && !slice) || (pass == 2 && !cpu))
                continue;
            const uint64_t v[] = {r->allocated, r->free, r->cordoned, r->quarantined};
            for (size_t k = 0; k < ARRAY_SIZE(v); k++) {
                strbuf_printf(b, "%s{class=\"",
                              pass == 0   ? "einsora_capacity_units"
                              : pass == 1 ? "einsora_mig_slices"
                                          : "einsora_cpu_cores");
                metrics_label_value(b, r->class_name);
                if (pass == 1) {
                    strbuf_puts(b, "\",parent=\"");
                    metrics_label_value(b, cls->mig_parent);
                }
                if (pass == 0)
                    strbuf_printf(b, "\",mode=\"%s", capacity_mode_to_string(r->mode));
                strbuf_printf(b, "\",state=\"%s\"} %llu\n", unit_states[k],
                              (unsigned long long)v[k]);
            }
        }
    }
    free(rows);
}

void metrics_write_switches(StrBuf *b, Server *s) {
    help(b, "einsora_switch_step",
         "Each node's current (or last) mode switch: 1 on the step it is at, 0 on the others "
         "(cordon, drain, rebind, verify, uncordon, done, failed). switch names the target "
         "mode, and the GPU when one GPU of a lab machine switches.");
    pthread_rwlock_rdlock(&s->lock);
    for (size_t i = 0; i < s->nodes.cap; i++) {
        if (!s->nodes.keys[i] || s->nodes.keys[i] == PTRMAP_TOMB)
            continue;
        const Node *node = s->nodes.values[i];
        const NodeSwitch *sw = node->sw;
        if (!sw)
            continue;
        for (SwitchStep st = 0; st < _SW_STEP_MAX; st++) {
            strbuf_puts(b, "einsora_switch_step{node=\"");
            metrics_label_value(b, node->spec.name);
            strbuf_puts(b, "\",switch=\"");
            metrics_label_value(b, sw->mode);
            if (sw->gpu >= 0)
                strbuf_printf(b, " gpu %d", sw->gpu);
            strbuf_printf(b, "\",step=\"%s\"} %d\n", switch_step_to_string(st), st == sw->step);
        }
    }
    pthread_rwlock_unlock(&s->lock);
}
