/* bench-node-work.c: does a node's work answer cost the node's work, or every live request?
 * Drives the real server in process (handlers, writer, SQLite on tmpfs; no HTTP): one node
 * holds 8 placements and is cordoned; then other nodes are filled with --small live requests,
 * the target's work answer (GET /v1/nodes/target/work: digest and body) is timed, then they are
 * filled up to --large live requests and it is timed again. Prints both and their ratio (the
 * baseline is the small figure of the same run); 1.0 when a poll costs its node's work only.
 *
 *   bench-node-work [--small N] [--large N] [--polls N] [--only N] [--tasks]
 *
 * --only N fills to N live requests and polls only then (for callgrind's instruction counts:
 * valgrind --tool=callgrind --toggle-collect=api_node_work bench-node-work --only N).
 * --tasks: the other nodes hold open tasks instead (a consumer GPU each whose reset check
 * (R9) their agent has not run yet), --small and --large of them. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench-inproc.h"
#include "util/macro.h"

#define NODE_CPUS 64
#define TARGET_WORK 8

static const char admin_token[] = "ens_bench-node-work-admin";
static Server *srv;
static unsigned nodes_made;

static int call(const char *method, const char *path, const char *body, json_t **ret) {
    return bench_call(srv, "Bearer ens_bench-node-work-admin", method, path, body, ret);
}

static void die(const char *what) {
    fprintf(stderr, "bench-node-work: %s\n", what);
    exit(1);
}

static void add_node(const char *name) {
    bench_add_cpu_node(srv, "Bearer ens_bench-node-work-admin", name, "root", NODE_CPUS);
}

static void place_one(void) {
    json_t *q = NULL;
    if (call("POST", "/v1/requests", "{\"kind\":\"container\",\"class\":\"cpu\"}", &q) != 201 ||
        strcmp(strempty(json_string_value(json_object_get(q, "state"))), "placed") != 0)
        die("a submission was not placed");
    json_decref(q);
}

/* Live requests on the other nodes, `live` in all (nodes added as they fill). */
static void fill_to(unsigned long live, unsigned long *have) {
    for (; *have < live; (*have)++) {
        if (*have >= (unsigned long)nodes_made * NODE_CPUS) {
            char name[32];
            snprintf(name, sizeof(name), "n%u", nodes_made++);
            add_node(name);
        }
        place_one();
    }
}

/* Open tasks on the other nodes, `open` in all: a node each, with one consumer GPU on vfio
 * that no check has passed and an agent that beats, so the fleet asks it for the check. */
static void fill_tasks_to(unsigned long open, unsigned long *have) {
    for (; *have < open; (*have)++) {
        char name[32], path[64], body[512];
        snprintf(name, sizeof(name), "t%u", nodes_made++);
        snprintf(body, sizeof(body),
                 "{\"name\":\"%s\",\"site\":\"lab1\",\"site_kind\":\"lab\",\"platform\":"
                 "\"linux\",\"owner\":\"root\",\"cpus\":8,\"devices\":[{\"pci\":"
                 "\"0000:01:00.0\",\"class\":\"nvidia-rtx-4090\",\"memory_gb\":24,\"binding\":"
                 "\"vfio\"}]}",
                 name);
        snprintf(path, sizeof(path), "/v1/nodes/%s", name);
        if (call("PUT", path, body, NULL) != 201)
            die("registering a node with a consumer GPU failed");
        snprintf(path, sizeof(path), "/v1/nodes/%s/heartbeat", name);
        if (call("POST", path, "{\"interval_s\":3600}", NULL) != 200)
            die("a heartbeat failed");
        json_t *w = NULL;
        snprintf(path, sizeof(path), "/v1/nodes/%s/work", name);
        if (call("GET", path, NULL, &w) != 200 || json_array_size(json_object_get(w, "tasks")) != 1)
            die("no reset check was asked of a new node's agent");
        json_decref(w);
    }
}

/* Microseconds per task result (an agent's "the reset check passed"), over the checks of
 * the next `count` nodes fill_tasks_to() made, starting at node *next. */
static double result_us(unsigned count, unsigned *next) {
    double spent = 0;
    for (unsigned i = 0; i < count; i++, (*next)++) {
        char path[64];
        json_t *w = NULL;
        snprintf(path, sizeof(path), "/v1/nodes/t%u/work", *next);
        if (call("GET", path, NULL, &w) != 200)
            die("a node's work answer failed");
        json_int_t id = json_integer_value(
                json_object_get(json_array_get(json_object_get(w, "tasks"), 0), "id"));
        json_decref(w);
        snprintf(path, sizeof(path), "/v1/nodes/t%u/tasks/%lld", *next, (long long)id);
        double t0 = bench_seconds();
        if (call("POST", path, "{\"ok\":true,\"verdict\":\"pass\",\"message\":\"ok\"}", NULL) !=
            200)
            die("a task result was refused");
        spent += bench_seconds() - t0;
    }
    return spent * 1e6 / count;
}

/* Microseconds per work answer of the target node, over `polls` answers. */
static double poll_us(unsigned polls) {
    double t0 = bench_seconds();
    for (unsigned i = 0; i < polls; i++) {
        /* The answer as sent, checked by counting its workloads' "request" members: parsing it
         * would time the bench more than the server. */
        char *text = NULL;
        if (bench_call_text(srv, "Bearer ens_bench-node-work-admin", "GET", "/v1/nodes/target/work",
                            NULL, &text) != 200)
            die("the target's work answer failed");
        unsigned n = 0;
        for (const char *p = text; (p = strstr(p, "\"request\":{")); p++)
            n++;
        free(text);
        if (n != TARGET_WORK)
            die("the target's work answer is wrong");
    }
    return (bench_seconds() - t0) * 1e6 / polls;
}

int main(int argc, char **argv) {
    unsigned long small = 100, large = 5000, only = 0;
    unsigned polls = 2000;
    bool tasks = false;
    static const struct option opts[] = {
            {"small", required_argument, NULL, 's'}, {"tasks", no_argument, NULL, 't'},
            {"large", required_argument, NULL, 'l'}, {"polls", required_argument, NULL, 'p'},
            {"only", required_argument, NULL, 'o'},  {}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) >= 0) {
        if (o == 's')
            small = strtoul(optarg, NULL, 10);
        else if (o == 'l')
            large = strtoul(optarg, NULL, 10);
        else if (o == 'p')
            polls = (unsigned)strtoul(optarg, NULL, 10);
        else if (o == 'o')
            only = strtoul(optarg, NULL, 10);
        else if (o == 't')
            tasks = true;
        else
            return 2;
    }
    if (!polls || small > large)
        die("--polls must be positive and --small at most --large");
    char dir[64], path[128];
    bench_store_with_admin(admin_token, dir, path);
    Error err = {0};
    ServerConfig cfg = {.state_path = path};
    if (server_open(&cfg, &srv, &err) < 0)
        die(error_message(&err));

    add_node("target");
    for (int i = 0; i < TARGET_WORK; i++)
        place_one();
    if (call("POST", "/v1/nodes/target/cordon", NULL, NULL) != 200)
        die("cordoning the target failed");
    unsigned long have = 0;
    void (*fill)(unsigned long, unsigned long *) = tasks ? fill_tasks_to : fill_to;
    const char *what = tasks ? "open tasks" : "live requests";
    if (only) {
        fill(only, &have);
        printf("bench-node-work: %lu %s on %u other nodes: %.2f us per work answer "
               "(%u answers)\n",
               only, what, nodes_made, poll_us(polls), polls);
    } else {
        unsigned next_result = 0, results = (unsigned)MIN(small, 500ul);
        fill(small, &have);
        double a = poll_us(polls);
        double ra = tasks ? result_us(results, &next_result) : 0;
        unsigned na = nodes_made;
        fill(large, &have);
        double b = poll_us(polls);
        double rb = tasks ? result_us(results, &next_result) : 0;
        printf("bench-node-work: the work answer of a node with %d placements, %u answers each\n",
               TARGET_WORK, polls);
        printf("  %6lu %s elsewhere (%5u nodes): %8.2f us per answer (baseline)\n", small, what, na,
               a);
        printf("  %6lu %s elsewhere (%5u nodes): %8.2f us per answer   ratio %.2f\n", large, what,
               nodes_made, b, b / (a > 0 ? a : 1));
        if (tasks)
            printf("  a task result (%u each, the last of them at ~%lu and ~%lu open): %.1f / %.1f "
                   "us   ratio %.2f\n",
                   results, small, large, ra, rb, rb / (ra > 0 ? ra : 1));
    }
    server_close(srv);
    return bench_store_remove(dir) == 0 ? 0 : 1;
}
