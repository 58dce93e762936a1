/* bench-node-work.c: does a node's work answer cost the node's work, or every live request?
 * Drives the real server in process (handlers, writer, SQLite on tmpfs; no HTTP): one node
 * holds 8 placements and is cordoned; then other nodes are filled with --small live requests,
 * the target's work answer (GET /v1/nodes/target/work: digest and body) is timed, then they are
 * filled up to --large live requests and it is timed again. Prints both and their ratio (the
 * baseline is the small figure of the same run); 1.0 when a poll costs its node's work only.
 *
 *   bench-node-work [--small N] [--large N] [--polls N] [--only N]
 *
 * --only N fills to N live requests and polls only then (for callgrind's instruction counts:
 * valgrind --tool=callgrind --toggle-collect=api_node_work bench-node-work --only N). */
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

/* Microseconds per work answer of the target node, over `polls` answers. */
static double poll_us(unsigned polls) {
    double t0 = bench_seconds();
    for (unsigned i = 0; i < polls; i++) {
        json_t *w = NULL;
        if (call("GET", "/v1/nodes/target/work", NULL, &w) != 200 ||
            json_array_size(json_object_get(w, "workloads")) != TARGET_WORK)
            die("the target's work answer is wrong");
        json_decref(w);
    }
    return (bench_seconds() - t0) * 1e6 / polls;
}

int main(int argc, char **argv) {
    unsigned long small = 100, large = 5000, only = 0;
    unsigned polls = 2000;
    static const struct option opts[] = {{"small", required_argument, NULL, 's'},
                                         {"large", required_argument, NULL, 'l'},
                                         {"polls", required_argument, NULL, 'p'},
                                         {"only", required_argument, NULL, 'o'},
                                         {}};
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
    if (only) {
        fill_to(only, &have);
        printf("bench-node-work: %lu live requests on %u other nodes: %.2f us per work answer "
               "(%u answers)\n",
               only, nodes_made, poll_us(polls), polls);
    } else {
        fill_to(small, &have);
        double a = poll_us(polls);
        unsigned na = nodes_made;
        fill_to(large, &have);
        double b = poll_us(polls);
        printf("bench-node-work: the work answer of a node with %d placements, %u answers each\n",
               TARGET_WORK, polls);
        printf("  %6lu live requests elsewhere (%5u nodes): %8.2f us per answer (baseline)\n",
               small, na, a);
        printf("  %6lu live requests elsewhere (%5u nodes): %8.2f us per answer   ratio %.2f\n",
               large, nodes_made, b, b / (a > 0 ? a : 1));
    }
    server_close(srv);
    return bench_store_remove(dir) == 0 ? 0 : 1;
}
