/* cmd-plan.c: `einsora plan`: an offline what-if. Replays a request file against an inventory
 * with the real placement engine and prints every decision with its reason, and the
 * capacity before and after, so operators can try a policy before they deploy it. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config/catalog-yaml.h"
#include "config/inventory-yaml.h"
#include "config/requests-yaml.h"
#include "core/sched.h"
#include "output.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "util/table.h"
#include "suggest.h"
#include "verbs.h"
#include "wire/placement.h"

static void plan_usage(FILE *f) {
    fputs("usage: einsora plan --inventory FILE --requests FILE [--catalog FILE] [--json]\n\n"
          "Replay the requests against the inventory offline and print each decision (placed,\n"
          "waiting with its reason, refused) and the capacity before and after. Requests are\n"
          "submitted at their 'at' time and end at 'release_at'; fallback deadlines (R13) pass\n"
          "as the clock advances. Nothing is contacted or changed.\n\n"
          "  --inventory FILE  sites and nodes (YAML; see tests/fixtures/plan/inventory.yaml)\n"
          "  --requests FILE   requests (YAML; see tests/fixtures/plan/requests.yaml)\n"
          "  --catalog FILE    catalog of GPU classes (default: $EINSORA_CATALOG or the shipped "
          "one)\n"
          "  --pci-ids FILE    pci.ids for vm_device_name (default " EINSORA_PCI_IDS ")\n"
          "  --json            machine-readable output\n"
          "  -h, --help        this text\n",
          f);
}

typedef struct Event {
    uint64_t time;
    int release; /* releases sort before submissions at the same time: they free room */
    size_t index;
} Event;

static int event_cmp(const void *a, const void *b) {
    const Event *x = a, *y = b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    if (x->release != y->release)
        return y->release - x->release;
    return x->index < y->index ? -1 : x->index > y->index;
}

typedef struct Plan {
    bool json;
    json_t *events; /* --json */
    Table *table;   /* text */
    uint64_t now;
} Plan;

static void record(Plan *plan, const char *id, const char *event, const Decision *d) {
    if (plan->json) {
        json_t *j = json_pack("{s:I, s:s, s:s}", "time", (json_int_t)plan->now, "request", id,
                              "event", event);
        if (!j)
            return;
        if (d) {
            json_object_set_new(j, "decision", json_string(decision_kind_to_string(d->kind)));
            json_object_set_new(j, "reason", json_string(sched_reason_to_string(d->reason)));
            json_object_set_new(j, "message", json_string(d->message));
            if (d->kind == DECISION_WAITING)
                json_object_set_new(j, "queue_position",
                                    json_integer((json_int_t)d->queue_position));
            if (d->kind == DECISION_PLACED)
                json_object_set_new(j, "placement", wire_placement_to_json(&d->placement, NULL));
        }
        json_array_append_new(plan->events, j);
        return;
    }
    char t[32], detail[SCHED_MESSAGE_MAX + 32];
    snprintf(t, sizeof(t), "%llu", (unsigned long long)plan->now);
    if (d && d->kind == DECISION_WAITING)
        snprintf(detail, sizeof(detail), "%s (queue position %zu)", d->message, d->queue_position);
    else
        snprintf(detail, sizeof(detail), "%s", d ? d->message : "released");
    table_add_row(plan->table, t, id, event, d ? decision_kind_to_string(d->kind) : "-", detail);
}

static void on_placed(void *userdata, const char *id, const Decision *d) {
    record(userdata, id, "placed-from-queue", d);
}

static json_t *capacity_json(const CapacityRow *rows, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (!rows[i].site && rows[i].total)
            json_array_append_new(a, wire_capacity_row_to_json(&rows[i]));
    return a;
}

static void print_capacity(const char *title, const CapacityRow *rows, size_t n) {
    Table *t = table_new("CLASS", "MODE", "RESOURCE", "TOTAL", "ALLOCATED", "FREE", "CORDONED",
                         "QUARANTINED", NULL);
    if (!t)
        return;
    for (size_t i = 0; i < n; i++) {
        const CapacityRow *r = &rows[i];
        if (r->site || !r->total)
            continue;
        char v[5][24];
        uint64_t nums[5] = {r->total, r->allocated, r->free, r->cordoned, r->quarantined};
        for (int k = 0; k < 5; k++)
            snprintf(v[k], sizeof(v[k]), "%llu", (unsigned long long)nums[k]);
        table_add_row(t, r->class_name, capacity_mode_to_string(r->mode), r->resource, v[0], v[1],
                      v[2], v[3], v[4]);
    }
    printf("%s\n", title);
    table_print(t, stdout);
    table_free(t);
}

static int capacity(Sched *s, CapacityRow **rows, size_t *n) {
    Error err = {0};
    return sched_capacity(s, rows, n, &err) < 0 ? fail_error(EXIT_FAIL, &err) : EXIT_OK;
}

static int run_plan(Sched *s, const RequestsFile *rf, Plan *plan) {
    Event *ev = calloc(rf->n_entries * 2 + 1, sizeof(Event));
    if (!ev)
        return fail(EXIT_FAIL, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < rf->n_entries; i++) {
        ev[n++] = (Event){rf->entries[i].spec.submitted, 0, i};
        if (rf->entries[i].release_at != REQUEST_NO_RELEASE)
            ev[n++] = (Event){rf->entries[i].release_at, 1, i};
    }
    qsort(ev, n, sizeof(Event), event_cmp);
    sched_set_on_placed(s, on_placed, plan);
    for (size_t i = 0; i < n; i++) {
        /* Deadlines that pass between events fall back at their own time (R13). */
        uint64_t due;
        while ((due = sched_next_deadline(s)) <= ev[i].time) {
            plan->now = MAX(plan->now, due);
            sched_tick(s, plan->now);
        }
        plan->now = ev[i].time;
        const RequestEntry *e = &rf->entries[ev[i].index];
        Error err = {0};
        if (ev[i].release) {
            Decision cur;
            if (sched_request_decision(s, e->spec.id, &cur) < 0)
                continue; /* refused earlier: nothing to release */
            record(plan, e->spec.id, "release", NULL);
            if (sched_release(s, e->spec.id, plan->now, &err) < 0) {
                free(ev);
                return fail_error(EXIT_FAIL, &err);
            }
            continue;
        }
        Decision d;
        if (sched_submit(s, &e->spec, plan->now, &d, &err) < 0) {
            free(ev);
            return fail_error(EXIT_FAIL, &err);
        }
        record(plan, e->spec.id, "submit", &d);
    }
    /* Let every fallback deadline still ahead pass, so the plan shows where they land. */
    uint64_t next;
    while ((next = sched_next_deadline(s)) != UINT64_MAX) {
        plan->now = MAX(plan->now, next);
        sched_tick(s, plan->now);
    }
    free(ev);
    return EXIT_OK;
}

static int plan_main(const char *catalog_path, const char *pci_ids_path, const char *inv_path,
                     const char *req_path, bool json) {
    Error err = {0};
    PciIds *ids = NULL;
    (void)pci_ids_load(pci_ids_path, &ids, NULL); /* only vm_device_name depends on it */
    Catalog *cat = NULL;
    int r = catalog_load_file(catalog_path ? catalog_path : catalog_default_path(), ids, &cat,
                              &err);
    pci_ids_free(ids);
    if (r < 0)
        return fail_error(EXIT_FAIL, &err);
    InventoryFile *inv = NULL;
    RequestsFile *rf = NULL;
    Sched *s = NULL;
    CapacityRow *before = NULL, *after = NULL;
    size_t n_before = 0, n_after = 0;
    int ret = EXIT_FAIL;
    if (inventory_load_file(inv_path, &inv, &err) < 0 ||
        requests_load_file(req_path, &rf, &err) < 0) {
        ret = fail_error(EXIT_FAIL, &err);
        goto out;
    }
    s = sched_new(cat);
    if (!s) {
        ret = fail(EXIT_FAIL, "out of memory");
        goto out;
    }
    if (inventory_apply(inv, s, 0, &err) < 0) {
        ret = fail_error(EXIT_FAIL, &err);
        goto out;
    }
    Plan plan = {.json = json};
    if (capacity(s, &before, &n_before) != EXIT_OK)
        goto out;
    plan.events = json ? json_array() : NULL;
    plan.table = json ? NULL : table_new("TIME", "REQUEST", "EVENT", "DECISION", "DETAIL", NULL);
    if ((json && !plan.events) || (!json && !plan.table)) {
        ret = fail(EXIT_FAIL, "out of memory");
        goto out;
    }
    ret = run_plan(s, rf, &plan);
    if (ret == EXIT_OK)
        ret = capacity(s, &after, &n_after);
    if (ret == EXIT_OK && json)
        ret = print_json(json_pack("{s:o, s:O, s:o, s:I}", "capacity_before",
                                   capacity_json(before, n_before), "decisions", plan.events,
                                   "capacity_after", capacity_json(after, n_after), "waiting",
                                   (json_int_t)sched_waiting_count(s)));
    else if (ret == EXIT_OK) {
        print_capacity("Capacity before:", before, n_before);
        printf("\nDecisions:\n");
        table_print(plan.table, stdout);
        printf("\n");
        print_capacity("Capacity after:", after, n_after);
        printf("\n%zu %s still waiting; %zu unclassified %s\n", sched_waiting_count(s),
               plural((long long)sched_waiting_count(s), "request", "requests"),
               sched_unclassified_count(s),
               plural((long long)sched_unclassified_count(s), "device", "devices"));
    }
    json_decref(plan.events);
    table_free(plan.table);
out:
    free(before);
    free(after);
    sched_free(s);
    requests_file_free(rf);
    inventory_file_free(inv);
    catalog_free(cat);
    return ret;
}

int verb_plan(int argc, char **argv) {
    static const struct option options[] = {
            {"inventory", required_argument, NULL, 'i'},
            {"requests", required_argument, NULL, 'r'},
            {"catalog", required_argument, NULL, 'c'},
            {"pci-ids", required_argument, NULL, 'p'},
            {"json", no_argument, NULL, 'j'},
            {"help", no_argument, NULL, 'h'},
            {},
    };
    const char *inv = NULL, *req = NULL, *catalog = NULL, *pci_ids = EINSORA_PCI_IDS;
    bool json = false;
    int c;
    while ((c = cli_getopt(argc, argv, "h", options)) >= 0) {
        switch (c) {
        case 'i':
            inv = optarg;
            break;
        case 'r':
            req = optarg;
            break;
        case 'c':
            catalog = optarg;
            break;
        case 'p':
            pci_ids = optarg;
            break;
        case 'j':
            json = true;
            break;
        case 'h':
            plan_usage(stdout);
            return EXIT_OK;
        default:
            plan_usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind < argc)
        return fail(EXIT_USAGE, "plan: unexpected argument '%s'", argv[optind]);
    if (!inv || !req) {
        plan_usage(stderr);
        return fail(EXIT_USAGE, "plan: --inventory and --requests are both needed");
    }
    return plan_main(catalog, pci_ids, inv, req, json);
}
