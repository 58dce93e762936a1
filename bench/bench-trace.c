/* bench-trace.c: replay of the Alibaba GPU cluster trace (2023, openb) against our placement
 * and a first-fit baseline in the same run: GPUs allocated and GPUs stranded over time.
 *
 * Mapping (the trace has no users and undisclosed models): user = FNV-1a hash of the task
 * name mod 64 ("u0".."u63"), all trusted tenants of one datacenter site, so containers run
 * under runc and may time-slice with the same user's tasks (R2e); a task with gpu_milli <
 * 1000 asks to share, one with 0 GPUs asks for cpu cores. gpu_spec lists the acceptable
 * models ('|'-separated; empty: any): first-fit takes a node of any of them, ours asks for the
 * first as its class and the others as fallbacks after 0 s; a task that takes any model asks
 * in the order any_model_order() gives. Models G1-G3 get classes of their own (alibaba-g1..g3,
 * made-up PCI ids).
 * "Stranded": free GPUs at a moment when some GPU task waits (free but unusable to it).
 *
 *   bench-trace [POD_CSV]   (default TRACES_DIR/alibaba-gpu-v2023/openb_pod_list_default.csv) */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/catalog-yaml.h"
#include "core/sched.h"
#include "util/fileio.h"
#include "util/macro.h"

#define DIR TRACES_DIR "/alibaba-gpu-v2023"
#define MAX_GPUS_PER_NODE 16
#define TS_REPLICAS 4
#define SAMPLES 24

static const char *const models[] = {"G2", "T4", "P100", "G3", "V100M16", "V100M32", "A10", "G1"};
#define N_MODELS (sizeof(models) / sizeof(models[0]))
static const char *const class_of[N_MODELS] = {"alibaba-g2",  "alibaba-t4",      "alibaba-p100",
                                               "alibaba-g3",  "alibaba-v100m16", "alibaba-v100m32",
                                               "alibaba-a10", "alibaba-g1"};

static const char catalog_text[] =
        "classes:\n"
        "  - {name: alibaba-g1, vendor: nvidia, match: {pci: '10de:f001'}, memory_gb: 32, "
        "container_resource: nvidia.com/gpu, node_selector: m=g1}\n"
        "  - {name: alibaba-g2, vendor: nvidia, match: {pci: '10de:f002'}, memory_gb: 32, "
        "container_resource: nvidia.com/gpu, node_selector: m=g2}\n"
        "  - {name: alibaba-g3, vendor: nvidia, match: {pci: '10de:f003'}, memory_gb: 32, "
        "container_resource: nvidia.com/gpu, node_selector: m=g3}\n"
        "  - {name: alibaba-t4, vendor: nvidia, match: {pci: '10de:1eb8'}, memory_gb: 16, "
        "container_resource: nvidia.com/gpu, node_selector: m=t4}\n"
        "  - {name: alibaba-p100, vendor: nvidia, match: {pci: '10de:15f8'}, memory_gb: 16, "
        "container_resource: nvidia.com/gpu, node_selector: m=p100}\n"
        "  - {name: alibaba-v100m16, vendor: nvidia, match: {pci: '10de:1db4'}, memory_gb: 16, "
        "container_resource: nvidia.com/gpu, node_selector: m=v100m16}\n"
        "  - {name: alibaba-v100m32, vendor: nvidia, match: {pci: '10de:1db5'}, memory_gb: 32, "
        "container_resource: nvidia.com/gpu, node_selector: m=v100m32}\n"
        "  - {name: alibaba-a10, vendor: nvidia, match: {pci: '10de:2236'}, memory_gb: 24, "
        "container_resource: nvidia.com/gpu, node_selector: m=a10}\n"
        "  - {name: cpu, vendor: cpu}\n";

typedef struct TNode {
    char name[32];
    unsigned cpu, gpus;
    int model; /* -1: no GPU */
} TNode;

typedef struct Task {
    char name[32];
    unsigned cpu, gpus, milli;
    uint8_t models[N_MODELS]; /* acceptable models in the order gpu_spec lists them */
    unsigned n_models;        /* 0: any model */
    unsigned model_mask;      /* bit m: model m acceptable (all bits when any) */
    uint64_t start, end;
    unsigned user;
} Task;

static int model_index(const char *s) {
    for (size_t i = 0; i < N_MODELS; i++)
        if (strcmp(s, models[i]) == 0)
            return (int)i;
    return -1;
}

/* Split a CSV line in place (no quoting in these files). */
static size_t split(char *line, char **f, size_t max) {
    size_t n = 0;
    f[n++] = line;
    for (char *p = line; *p && n < max; p++)
        if (*p == ',') {
            *p = '\0';
            f[n++] = p + 1;
        }
    return n;
}

static char *next_line(char **cur) {
    char *l = *cur;
    if (!l || !*l)
        return NULL;
    char *nl = strchr(l, '\n');
    if (nl) {
        *nl = '\0';
        *cur = nl + 1;
    } else
        *cur = l + strlen(l);
    return l;
}

/* The columns each file's rows are read by (the trace's README): a file whose header does
 * not begin with them is another file (the node list given as a pod list, say), whose rows
 * would be read as nonsense, so it is refused. */
#define NODE_HEADER "sn,cpu_milli,memory_mib,gpu,model"
#define POD_HEADER "name,cpu_milli,memory_mib,num_gpu,gpu_milli"

static void expect_header(const char *line, const char *want, const char *path, const char *what) {
    if (!line || strncmp(line, want, strlen(want)) != 0) {
        fprintf(stderr,
                "bench-trace: %s is not %s: its first line must begin with '%s' (it is '%.80s')\n",
                path, what, want, line ? line : "");
        exit(1);
    }
}

static TNode *load_nodes(size_t *ret_n) {
    char *text = NULL, *cur, *l, *f[8];
    size_t len;
    if (read_full_file(DIR "/openb_node_list_all_node.csv", 64u << 20, &text, &len) < 0) {
        fprintf(stderr, "bench-trace: cannot read the node list in %s\n", DIR);
        exit(1);
    }
    TNode *nodes = calloc(4096, sizeof(TNode));
    size_t n = 0;
    cur = text;
    expect_header(next_line(&cur), NODE_HEADER, DIR "/openb_node_list_all_node.csv", "a node list");
    while ((l = next_line(&cur)) && n < 4096) {
        if (split(l, f, 8) < 5)
            continue;
        TNode *t = &nodes[n++];
        snprintf(t->name, sizeof(t->name), "%s", f[0]);
        t->cpu = (unsigned)(strtoul(f[1], NULL, 10) / 1000);
        t->gpus = (unsigned)MIN(strtoul(f[3], NULL, 10), MAX_GPUS_PER_NODE);
        t->model = t->gpus ? model_index(f[4]) : -1;
        if (t->model < 0)
            t->gpus = 0;
    }
    free(text);
    *ret_n = n;
    return nodes;
}

static Task *load_tasks(const char *path, size_t *ret_n) {
    char *text = NULL, *cur, *l, *f[16];
    size_t len;
    if (read_full_file(path, 64u << 20, &text, &len) < 0) {
        fprintf(stderr, "bench-trace: cannot read %s\n", path);
        exit(1);
    }
    size_t cap = 16384, n = 0;
    Task *tasks = calloc(cap, sizeof(Task));
    cur = text;
    expect_header(next_line(&cur), POD_HEADER, path, "a pod list");
    while ((l = next_line(&cur))) {
        size_t nf = split(l, f, 16);
        if (nf < 5 || n == cap)
            continue;
        Task *t = &tasks[n++];
        snprintf(t->name, sizeof(t->name), "%s", f[0]);
        t->cpu = (unsigned)((strtoul(f[1], NULL, 10) + 999) / 1000);
        t->gpus = (unsigned)strtoul(f[3], NULL, 10);
        t->milli = (unsigned)strtoul(f[4], NULL, 10);
        t->n_models = 0;
        t->start = n; /* files without times (multigpu20): one arrival per row, never released */
        t->end = UINT64_MAX;
        if (nf >= 10) {
            /* gpu_spec: models separated by '|', every one acceptable; unknown ones dropped. */
            for (char *m = f[5], *end; m && *m; m = end ? end + 1 : NULL) {
                end = strchr(m, '|');
                if (end)
                    *end = '\0';
                int k = model_index(m);
                if (k >= 0 && !(t->model_mask & (1u << k)) && t->n_models < N_MODELS) {
                    t->models[t->n_models++] = (uint8_t)k;
                    t->model_mask |= 1u << k;
                }
            }
            t->start = strtoull(f[8], NULL, 10);
            t->end = *f[9] ? strtoull(f[9], NULL, 10) : UINT64_MAX;
        }
        if (!t->n_models)
            t->model_mask = (1u << N_MODELS) - 1;
        uint32_t h = 2166136261u;
        for (const char *p = t->name; *p; p++)
            h = (h ^ (unsigned char)*p) * 16777619u;
        t->user = h % 64;
    }
    free(text);
    *ret_n = n;
    return tasks;
}

typedef struct Event {
    uint64_t t; /* trace seconds (replay) or tasks submitted so far (fill) */
    int end;
    uint32_t task, slot; /* slot: one submission (a task may be submitted in several rounds) */
} Event;

static int ev_cmp(const void *a, const void *b) {
    const Event *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    if (x->end != y->end)
        return y->end - x->end;
    return x->slot < y->slot ? -1 : x->slot > y->slot;
}

/* GPU demand a task holds while it runs, in thousandths of a GPU (a share: its gpu_milli). */
static unsigned demand_milli(const Task *t) {
    return t->gpus == 1 && t->milli < 1000 ? t->milli : t->gpus * 1000;
}

typedef struct Sample {
    uint64_t t;
    unsigned alloc, stranded;
} Sample;

/* ---- ours ---- */

static unsigned gpu_waiting_ours(Sched *s) {
    unsigned k = 0;
    for (size_t i = 0; i < sched_waiting_count(s) && i < 64; i++) {
        RequestSpec rs;
        if (sched_request_spec(s, sched_waiting_at(s, i), &rs) == 0 &&
            strcmp(rs.class_name, "cpu") != 0)
            k++;
    }
    return k;
}

static void measure_ours(Sched *s, unsigned *alloc, unsigned *free_gpus) {
    CapacityRow *rows;
    size_t n;
    *alloc = *free_gpus = 0;
    if (sched_capacity(s, &rows, &n, NULL) < 0)
        return;
    for (size_t i = 0; i < n; i++)
        if (!rows[i].site && rows[i].mode == CAPACITY_CONTAINER) {
            *alloc += (unsigned)rows[i].allocated;
            *free_gpus += (unsigned)rows[i].free;
        }
    free(rows);
}

/* The class order for a task that takes any model, per gang size k: first the models whose
 * smallest node holding k GPUs is smallest, so that one-GPU tasks fill the small nodes and
 * big nodes stay whole for gangs; ties go to the model with more GPUs. Our scheduler honours
 * the order of alternatives (R13) and packs best-fit within a class only; "G2 first" for every
 * any-model task would break the 8-GPU nodes that gangs need while the 2-GPU nodes stay idle. */
static void any_model_order(const TNode *nodes, size_t n_nodes, uint8_t order[][N_MODELS]) {
    unsigned total[N_MODELS] = {0};
    for (size_t i = 0; i < n_nodes; i++)
        if (nodes[i].model >= 0)
            total[nodes[i].model] += nodes[i].gpus;
    for (unsigned k = 0; k <= MAX_GPUS_PER_NODE; k++) {
        unsigned fit[N_MODELS];
        for (size_t m = 0; m < N_MODELS; m++) {
            fit[m] = UINT32_MAX;
            order[k][m] = (uint8_t)m;
        }
        for (size_t i = 0; i < n_nodes; i++)
            if (nodes[i].model >= 0 && nodes[i].gpus >= MAX(k, 1u))
                fit[nodes[i].model] = MIN(fit[nodes[i].model], nodes[i].gpus);
        for (size_t a = 1; a < N_MODELS; a++) /* insertion sort: 8 entries */
            for (size_t b = a; b > 0; b--) {
                uint8_t x = order[k][b - 1], y = order[k][b];
                if (fit[x] < fit[y] || (fit[x] == fit[y] && total[x] >= total[y]))
                    break;
                order[k][b - 1] = y;
                order[k][b] = x;
            }
    }
}

/* Which slots run, and the GPU demand they serve: followed through the submit answers and the
 * queue's later placements, so that "allocated" can be told apart from "served" (time slices of
 * one user packed onto fewer GPUs serve the same demand with fewer GPUs allocated). */
typedef struct Served {
    const Task *tasks;
    const uint32_t *slot_task;
    bool *running;
    uint64_t milli;
} Served;

static void served_start(Served *sv, uint32_t slot) {
    if (!sv->running[slot] && sv->tasks[sv->slot_task[slot]].gpus) {
        sv->running[slot] = true;
        sv->milli += demand_milli(&sv->tasks[sv->slot_task[slot]]);
    }
}

static void served_stop(Served *sv, uint32_t slot) {
    if (sv->running[slot]) {
        sv->running[slot] = false;
        sv->milli -= demand_milli(&sv->tasks[sv->slot_task[slot]]);
    }
}

static void on_placed_ours(void *userdata, const char *request_id, const Decision *d) {
    (void)d;
    served_start(userdata, (uint32_t)strtoul(request_id + 1, NULL, 10));
}

/* Whole GPUs in use are counted once even when time-sliced: capacity counts devices. */
static void run_ours(const Catalog *cat, const TNode *nodes, size_t n_nodes, const Task *tasks,
                     size_t n_slots, const Event *ev, size_t n_ev, Sample *out, uint64_t span,
                     double *avg_alloc, double *avg_stranded, double *avg_served) {
    Sched *s = sched_new(cat);
    uint32_t *slot_task = calloc(n_slots, sizeof(uint32_t));
    Served sv = {tasks, slot_task, calloc(n_slots, sizeof(bool)), 0};
    for (size_t e = 0; e < n_ev; e++)
        slot_task[ev[e].slot] = ev[e].task;
    sched_set_on_placed(s, on_placed_ours, &sv);
    sched_add_site(s, "ali", SITE_DATACENTER, NULL);
    char users[64][8];
    for (int u = 0; u < 64; u++) {
        snprintf(users[u], sizeof(users[u]), "u%d", u);
        sched_site_trust(s, "ali", users[u], true, NULL);
    }
    SchedLabel label = {SCHED_MODE_LABEL, "container"};
    for (size_t i = 0; i < n_nodes; i++) {
        DeviceSpec devs[MAX_GPUS_PER_NODE];
        for (unsigned g = 0; g < nodes[i].gpus; g++)
            devs[g] = (DeviceSpec){.class_name = class_of[nodes[i].model]};
        NodeSpec spec = {.name = nodes[i].name,
                         .site = "ali",
                         .owner = "operator",
                         .labels = &label,
                         .n_labels = nodes[i].gpus ? 1 : 0,
                         .cpu_cores = nodes[i].cpu,
                         .time_slice_replicas = TS_REPLICAS,
                         .devices = devs,
                         .n_devices = nodes[i].gpus};
        Error err = {0};
        if (sched_add_node(s, &spec, 0, &err) < 0) {
            fprintf(stderr, "bench-trace: %s\n", err.message);
            exit(1);
        }
    }
    const char *fb_all[N_MODELS];
    uint8_t any_order[MAX_GPUS_PER_NODE + 1][N_MODELS];
    any_model_order(nodes, n_nodes, any_order);
    size_t si = 0;
    double sum_a = 0, sum_s = 0, sum_v = 0;
    size_t n_meas = 0;
    for (size_t e = 0; e < n_ev; e++) {
        const Task *t = &tasks[ev[e].task];
        char id[16];
        snprintf(id, sizeof(id), "s%u", ev[e].slot);
        if (ev[e].end) {
            sched_release(s, id, ev[e].t, NULL);
            served_stop(&sv, ev[e].slot);
        } else {
            /* The models it lists, in its order; any model: the order a client that knows the
             * fleet would give (any_order), since our alternatives are strictly ordered (R13). */
            const uint8_t *ms =
                    t->n_models ? t->models : any_order[MIN(t->gpus, MAX_GPUS_PER_NODE)];
            size_t nm = t->n_models ? t->n_models : N_MODELS;
            for (size_t k = 1; k < nm; k++)
                fb_all[k - 1] = class_of[ms[k]];
            RequestSpec rs = {.id = id,
                              .user = users[t->user],
                              .kind = WORKLOAD_CONTAINER,
                              .class_name = t->gpus ? class_of[ms[0]] : "cpu",
                              .count = t->gpus ? t->gpus : t->cpu,
                              .share = t->gpus == 1 && t->milli < 1000,
                              .fallback = t->gpus ? fb_all : NULL,
                              .n_fallback = t->gpus ? nm - 1 : 0,
                              .wait_s = 0,
                              .submitted = ev[e].t};
            Decision d;
            sched_submit(s, &rs, ev[e].t, &d, NULL);
            if (d.kind == DECISION_PLACED)
                served_start(&sv, ev[e].slot);
        }
        if ((e & 63) == 0 || e + 1 == n_ev) {
            unsigned a, f;
            measure_ours(s, &a, &f);
            unsigned st = gpu_waiting_ours(s) ? f : 0;
            sum_a += a;
            sum_s += st;
            sum_v += (double)sv.milli / 1000;
            n_meas++;
            while (si < SAMPLES && ev[e].t >= span * si / SAMPLES)
                out[si++] = (Sample){ev[e].t, a, st};
        }
    }
    *avg_alloc = sum_a / n_meas;
    *avg_stranded = sum_s / n_meas;
    *avg_served = sum_v / n_meas;
    sched_free(s);
    free(slot_task);
    free(sv.running);
}

/* ---- first-fit baseline: same nodes, same rules (whole GPUs; time slices of one user, at
 * most TS_REPLICAS), but the first node in list order that fits, and a FIFO retried in order
 * after every release ---- */

typedef struct FGpu {
    uint8_t users; /* tasks on it */
    int16_t user;  /* -1 free */
    bool whole;
} FGpu;

typedef struct FState {
    const TNode *nodes;
    size_t n_nodes;
    FGpu (*gpu)[MAX_GPUS_PER_NODE];
    unsigned *cpu_free;
    int32_t *where; /* per slot: node, -1 waiting, -2 done */
    uint32_t *slot_task;
    uint32_t *waiting; /* slots */
    size_t n_waiting;
    uint64_t served_milli; /* GPU demand of the running GPU tasks */
} FState;

static bool ff_place(FState *f, const Task *t, uint32_t ti) {
    for (size_t nd = 0; nd < f->n_nodes; nd++) {
        const TNode *n = &f->nodes[nd];
        if (!t->gpus) {
            if (f->cpu_free[nd] >= t->cpu) {
                f->cpu_free[nd] -= t->cpu;
                f->where[ti] = (int32_t)nd;
                return true;
            }
            continue;
        }
        if (n->model < 0 || !(t->model_mask & (1u << n->model)))
            continue;
        if (t->gpus == 1 && t->milli < 1000)
            for (unsigned g = 0; g < n->gpus; g++) {
                FGpu *x = &f->gpu[nd][g];
                if (x->user < 0 ||
                    (!x->whole && x->user == (int)t->user && x->users < TS_REPLICAS)) {
                    x->user = (int16_t)t->user;
                    x->users++;
                    f->where[ti] = (int32_t)nd;
                    f->served_milli += demand_milli(t);
                    return true;
                }
            }
        else {
            unsigned freeg = 0;
            for (unsigned g = 0; g < n->gpus; g++)
                freeg += f->gpu[nd][g].user < 0;
            if (freeg < t->gpus)
                continue;
            for (unsigned g = 0, k = 0; g < n->gpus && k < t->gpus; g++)
                if (f->gpu[nd][g].user < 0) {
                    f->gpu[nd][g] = (FGpu){1, (int16_t)t->user, true};
                    k++;
                }
            f->where[ti] = (int32_t)nd;
            f->served_milli += demand_milli(t);
            return true;
        }
    }
    return false;
}

static void ff_release(FState *f, const Task *t, uint32_t ti) {
    int32_t nd = f->where[ti];
    f->where[ti] = -2;
    if (nd < 0)
        return;
    if (!t->gpus) {
        f->cpu_free[nd] += t->cpu;
        return;
    }
    f->served_milli -= demand_milli(t);
    const TNode *n = &f->nodes[nd];
    bool shared = t->gpus == 1 && t->milli < 1000;
    unsigned left = t->gpus;
    for (unsigned g = 0; g < n->gpus && left; g++) {
        FGpu *x = &f->gpu[nd][g];
        if (x->user != (int)t->user || x->whole == shared)
            continue;
        if (--x->users == 0)
            *x = (FGpu){0, -1, false};
        left--;
    }
}

static void ff_measure(const FState *f, unsigned *alloc, unsigned *free_gpus) {
    *alloc = *free_gpus = 0;
    for (size_t nd = 0; nd < f->n_nodes; nd++)
        for (unsigned g = 0; g < f->nodes[nd].gpus; g++) {
            if (f->gpu[nd][g].user >= 0)
                (*alloc)++;
            else
                (*free_gpus)++;
        }
}

static void run_first_fit(const TNode *nodes, size_t n_nodes, const Task *tasks, size_t n_slots,
                          const Event *ev, size_t n_ev, Sample *out, uint64_t span,
                          double *avg_alloc, double *avg_stranded, double *avg_served) {
    FState f = {.nodes = nodes, .n_nodes = n_nodes};
    f.gpu = calloc(n_nodes, sizeof(*f.gpu));
    f.cpu_free = calloc(n_nodes, sizeof(unsigned));
    f.where = calloc(n_slots, sizeof(int32_t));
    f.slot_task = calloc(n_slots, sizeof(uint32_t));
    f.waiting = calloc(n_slots, sizeof(uint32_t));
    for (size_t e = 0; e < n_ev; e++)
        f.slot_task[ev[e].slot] = ev[e].task;
    for (size_t i = 0; i < n_nodes; i++) {
        f.cpu_free[i] = nodes[i].cpu;
        for (unsigned g = 0; g < MAX_GPUS_PER_NODE; g++)
            f.gpu[i][g].user = -1;
    }
    size_t si = 0, n_meas = 0;
    double sum_a = 0, sum_s = 0, sum_v = 0;
    for (size_t e = 0; e < n_ev; e++) {
        uint32_t ti = ev[e].slot;
        const Task *task = &tasks[ev[e].task];
        if (ev[e].end) {
            bool was_waiting = f.where[ti] == -1;
            ff_release(&f, task, ti);
            if (was_waiting)
                for (size_t w = 0; w < f.n_waiting; w++)
                    if (f.waiting[w] == ti) {
                        memmove(&f.waiting[w], &f.waiting[w + 1],
                                (f.n_waiting - w - 1) * sizeof(uint32_t));
                        f.n_waiting--;
                        break;
                    }
            size_t k = 0;
            for (size_t w = 0; w < f.n_waiting; w++)
                if (!ff_place(&f, &tasks[f.slot_task[f.waiting[w]]], f.waiting[w]))
                    f.waiting[k++] = f.waiting[w];
            f.n_waiting = k;
        } else if (!ff_place(&f, task, ti)) {
            f.where[ti] = -1;
            f.waiting[f.n_waiting++] = ti;
        }
        if ((e & 63) == 0 || e + 1 == n_ev) {
            unsigned a, fr, gw = 0;
            ff_measure(&f, &a, &fr);
            for (size_t w = 0; w < f.n_waiting && !gw; w++)
                gw = tasks[f.slot_task[f.waiting[w]]].gpus > 0;
            sum_a += a;
            sum_s += gw ? fr : 0;
            sum_v += (double)f.served_milli / 1000;
            n_meas++;
            while (si < SAMPLES && ev[e].t >= span * si / SAMPLES)
                out[si++] = (Sample){ev[e].t, a, gw ? fr : 0};
        }
    }
    *avg_alloc = sum_a / n_meas;
    *avg_stranded = sum_s / n_meas;
    *avg_served = sum_v / n_meas;
    free(f.gpu);
    free(f.cpu_free);
    free(f.where);
    free(f.slot_task);
    free(f.waiting);
}

#define FILL_ROUNDS 3

/* Events of a replay: submissions at creation_time / factor, releases after the task's own
 * duration (factor 1: the trace's times). Returns the count; *ret_span the last time. */
static size_t replay_events(const Task *tasks, size_t n_tasks, unsigned factor, Event *ev,
                            uint64_t *ret_span) {
    size_t n_ev = 0;
    uint64_t span = 0;
    for (size_t i = 0; i < n_tasks; i++) {
        uint64_t start = tasks[i].start / factor;
        ev[n_ev++] = (Event){start, 0, (uint32_t)i, (uint32_t)i};
        uint64_t end = UINT64_MAX;
        if (tasks[i].end != UINT64_MAX && tasks[i].end >= tasks[i].start) {
            end = start + (tasks[i].end - tasks[i].start);
            ev[n_ev++] = (Event){end, 1, (uint32_t)i, (uint32_t)i};
        }
        span = MAX(span, end != UINT64_MAX ? end : start);
    }
    qsort(ev, n_ev, sizeof(Event), ev_cmp);
    *ret_span = span;
    return n_ev;
}

/* The most GPUs the tasks of a replay would hold at once if each were placed on arrival. */
static unsigned peak_demand(const Task *tasks, const Event *ev, size_t n_ev) {
    long now = 0, peak = 0;
    for (size_t e = 0; e < n_ev; e++) {
        now += ev[e].end ? -(long)tasks[ev[e].task].gpus : (long)tasks[ev[e].task].gpus;
        peak = MAX(peak, now);
    }
    return (unsigned)peak;
}

static void report(const Catalog *cat, const TNode *nodes, size_t n_nodes, const Task *tasks,
                   size_t n_slots, const Event *ev, size_t n_ev, uint64_t span, const char *axis) {
    Sample ours[SAMPLES] = {0}, ff[SAMPLES] = {0};
    double oa, os, ov, fa, fs, fv;
    run_ours(cat, nodes, n_nodes, tasks, n_slots, ev, n_ev, ours, span, &oa, &os, &ov);
    run_first_fit(nodes, n_nodes, tasks, n_slots, ev, n_ev, ff, span, &fa, &fs, &fv);
    printf("%12s  %14s %14s  %14s %14s\n", axis, "ours alloc", "ours stranded", "ff alloc",
           "ff stranded");
    for (int i = 0; i < SAMPLES; i++)
        if (i == 0 || ours[i].t != ours[i - 1].t)
            printf("%12llu  %14u %14u  %14u %14u\n", (unsigned long long)ours[i].t, ours[i].alloc,
                   ours[i].stranded, ff[i].alloc, ff[i].stranded);
    printf("average: ours %.1f GPUs allocated, %.1f stranded; first-fit %.1f allocated, %.1f "
           "stranded\n",
           oa, os, fa, fs);
    printf("GPU demand served (gpu_milli of the running tasks, in GPUs): ours %.1f, first-fit "
           "%.1f; GPUs allocated per GPU served: ours %.3f, first-fit %.3f\n",
           ov, fv, ov ? oa / ov : 0.0, fv ? fa / fv : 0.0);
    printf("ratio ours/first-fit: allocated %.3fx, stranded %.3fx, served %.3fx\n",
           fa ? oa / fa : 0.0, fs ? os / fs : 0.0, fv ? ov / fv : 0.0);
}

int main(int argc, char **argv) {
    const char *pods = argc > 1 ? argv[1] : DIR "/openb_pod_list_default.csv";
    size_t n_nodes, n_tasks;
    TNode *nodes = load_nodes(&n_nodes);
    Task *tasks = load_tasks(pods, &n_tasks);
    Catalog *cat = NULL;
    Error err = {0};
    if (catalog_parse_yaml(catalog_text, strlen(catalog_text), "bench-trace", NULL, &cat, &err) <
        0) {
        fprintf(stderr, "bench-trace: %s\n", err.message);
        return 1;
    }
    unsigned gpus = 0;
    for (size_t i = 0; i < n_nodes; i++)
        gpus += nodes[i].gpus;
    /* 1. Replay at trace time: submissions at creation_time, releases at deletion_time. */
    Event *ev = calloc(n_tasks * FILL_ROUNDS, sizeof(Event));
    uint64_t span;
    size_t n_ev = replay_events(tasks, n_tasks, 1, ev, &span);
    printf("trace: %zu nodes, %u GPUs, %zu tasks (%s)\n", n_nodes, gpus, n_tasks, pods);
    printf("\n1. replay at trace time (%zu events over %llu s):\n", n_ev, (unsigned long long)span);
    report(cat, nodes, n_nodes, tasks, n_tasks, ev, n_ev, span, "time (s)");
    /* 1b. The same replay with arrivals compressed until the GPUs asked for at once reach the
     * fleet's: at trace time the fleet is nearly idle (tens of its GPUs in use), and the
     * schedulers differ only where requests compete. */
    unsigned factor = 1;
    while (factor < (1u << 24) && peak_demand(tasks, ev, n_ev) < gpus) {
        factor *= 2;
        n_ev = replay_events(tasks, n_tasks, factor, ev, &span);
    }
    if (factor > 1) {
        printf("\n1b. replay with arrivals %ux closer, durations kept (%zu events over %llu s):\n",
               factor, n_ev, (unsigned long long)span);
        report(cat, nodes, n_nodes, tasks, n_tasks, ev, n_ev, span, "time (s)");
    }
    /* 2. Fill: tasks in arrival order, never released, the trace repeated FILL_ROUNDS times,
     * as the FGD paper evaluates: how many GPUs get used before requests start to strand. */
    n_ev = 0;
    for (unsigned round = 0; round < FILL_ROUNDS; round++)
        for (size_t i = 0; i < n_tasks; i++)
            ev[n_ev] = (Event){n_ev, 0, (uint32_t)i, (uint32_t)n_ev}, n_ev++;
    qsort(ev, n_ev, sizeof(Event), ev_cmp);
    printf("\n2. fill: %zu submissions in arrival order (the trace %d times), nothing released:\n",
           n_ev, FILL_ROUNDS);
    report(cat, nodes, n_nodes, tasks, n_ev, ev, n_ev, n_ev, "submitted");
    free(ev);
    free(tasks);
    free(nodes);
    catalog_free(cat);
    return 0;
}
