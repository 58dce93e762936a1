/* bench-fleet-tick.c: does a release cost the same on a fleet of 10,000 nodes as on one of 100?
 * Every commit ends with the fleet's tick (reset checks to ask for, mode switches to advance,
 * R4 R9); a release marks its node for it. Drives the real server in process (handlers,
 * writer, SQLite on tmpfs; no HTTP): registers --small CPU nodes, times --cycles submit +
 * release cycles (two commits each), registers up to --large nodes, times them again, and
 * prints both and their ratio (the baseline is the small figure of the same run); 1.0 when a
 * tick costs what changed, not the fleet's size.
 *
 *   bench-fleet-tick [--small N] [--large N] [--cycles N] */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench-inproc.h"
#include "util/macro.h"

static Server *srv;
static unsigned n_nodes;

static void fail(const char *what) {
    fprintf(stderr, "bench-fleet-tick: %s\n", what);
    exit(1);
}

#define ADMIN "Bearer ens_bench-fleet-tick-admin"

static int admin_call(const char *method, const char *path, const char *body, json_t **ret) {
    return bench_call(srv, ADMIN, method, path, body, ret);
}

/* CPU-only datacenter nodes up to `total` (n0, n1, ...). */
static void register_nodes(unsigned total) {
    for (; n_nodes < total; n_nodes++) {
        char name[32];
        snprintf(name, sizeof(name), "n%u", n_nodes);
        bench_add_cpu_node(srv, ADMIN, name, "root", 8);
    }
}

/* Microseconds per cycle: a one-core container placed, then released. */
static double cycle_us(unsigned cycles) {
    double t0 = bench_seconds();
    for (unsigned i = 0; i < cycles; i++) {
        json_t *q = NULL;
        if (admin_call("POST", "/v1/requests", "{\"kind\":\"container\",\"class\":\"cpu\"}", &q) !=
                    201 ||
            strcmp(strempty(json_string_value(json_object_get(q, "state"))), "placed") != 0)
            fail("a submission was not placed");
        char path[64];
        snprintf(path, sizeof(path), "/v1/requests/%" JSON_INTEGER_FORMAT "/release",
                 json_integer_value(json_object_get(q, "id")));
        json_decref(q);
        if (admin_call("POST", path, NULL, NULL) != 200)
            fail("a release failed");
    }
    return (bench_seconds() - t0) * 1e6 / cycles;
}

int main(int argc, char **argv) {
    unsigned long small = 100, large = 10000, cycles = 3000;
    static const struct option opts[] = {{"small", required_argument, NULL, 's'},
                                         {"large", required_argument, NULL, 'l'},
                                         {"cycles", required_argument, NULL, 'c'},
                                         {}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) >= 0) {
        unsigned long v = strtoul(optarg, NULL, 10);
        if (o == 's')
            small = v;
        else if (o == 'l')
            large = v;
        else if (o == 'c')
            cycles = v;
        else
            return 2;
    }
    if (!cycles || !small || small > large || large > 1000000)
        fail("--cycles and --small must be positive, --small at most --large (at most 1000000)");
    char dir[64], path[128];
    bench_store_with_admin("ens_bench-fleet-tick-admin", dir, path);
    Error err = {0};
    ServerConfig cfg = {.state_path = path};
    if (server_open(&cfg, &srv, &err) < 0)
        fail(error_message(&err));
    register_nodes((unsigned)small);
    double a = cycle_us((unsigned)cycles);
    register_nodes((unsigned)large);
    double b = cycle_us((unsigned)cycles);
    printf("bench-fleet-tick: submit + release of a one-core container, %lu cycles each\n", cycles);
    printf("  %7lu nodes: %8.2f us per cycle (baseline)\n", small, a);
    printf("  %7lu nodes: %8.2f us per cycle   ratio %.2f\n", large, b, b / (a > 0 ? a : 1));
    server_close(srv);
    return bench_store_remove(dir) == 0 ? 0 : 1;
}
