/* cmd-workload.c: `einsora stop ID` (the workload ends: release it when it runs, cancel it
 * while it waits) and `einsora logs ID [--follow]` (its output, read from the container engine
 * of this machine: the node that runs it). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drivers/engine.h"
#include "engine-local.h"
#include "output.h"
#include "remote.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "verbs.h"

int verb_stop(int argc, char **argv) {
    static const char usage[] =
            "usage: einsora stop ID [--server URL] [--token T] [--json]\n\n"
            "End a workload: a running one is released (its engine stops it and\n"
            "frees its GPUs), a waiting one is cancelled.\n\n";
    RemoteOpts o = {0};
    int r = remote_getopt(argc, argv, NULL, NULL, NULL, &o, usage);
    if (r >= 0)
        return r;
    if (optind + 1 != argc)
        return fail(EXIT_USAGE, "stop: give one request id");
    char path[128];
    json_t *q = NULL;
    snprintf(path, sizeof(path), "/v1/requests/%.64s", argv[optind]);
    if ((r = remote_call(&o, "GET", path, NULL, NULL, &q)) != EXIT_OK)
        return r;
    const char *st = strempty(json_str(q, "state")), *why = json_str(q, "reason");
    const char *how = STREQ(st, "pending")                         ? "cancel"
                      : STREQ(st, "placed") || STREQ(st, "active") ? "release"
                                                                   : NULL;
    if (!how) {
        fprintf(stderr, "einsora: request %s is already %s%s%s\n", argv[optind], st,
                why ? ": " : "", strempty(why));
        json_decref(q);
        return EXIT_FAIL;
    }
    json_decref(q);
    q = NULL;
    snprintf(path, sizeof(path), "/v1/requests/%.64s/%s", argv[optind], how);
    if ((r = remote_call(&o, "POST", path, NULL, NULL, &q)) != EXIT_OK)
        return r;
    if (o.json)
        return print_json(q);
    printf("request %s %s\n", argv[optind],
           STREQ(how, "cancel") ? "cancelled" : "released: its workload stops");
    json_decref(q);
    return EXIT_OK;
}

const char *cli_local_engine_socket(void) {
    static const char *const known[] = {"/run/podman/podman.sock", "/var/run/docker.sock", NULL};
    const char *env = getenv("EINSORA_ENGINE_SOCKET");
    if (env && env[0])
        return env;
    for (size_t i = 0; known[i]; i++)
        if (access(known[i], F_OK) == 0)
            return known[i];
    return NULL;
}

int verb_logs(int argc, char **argv) {
    static const struct option options[] = {{"follow", no_argument, NULL, 'f'},
                                            {"engine-socket", required_argument, NULL, 's'},
                                            {"help", no_argument, NULL, 'h'},
                                            {}};
    static const char usage[] =
            "usage: einsora logs ID [--follow] [--engine-socket SOCK]\n\n"
            "Show a container workload's output, on the node that runs it.\n\n"
            "  --follow              keep printing until the workload ends\n"
            "  --engine-socket SOCK  the engine's socket (default $EINSORA_ENGINE_SOCKET,\n"
            "                        /run/podman/podman.sock or /var/run/docker.sock)\n"
            "  -h, --help            show this help\n";
    bool follow = false;
    const char *sock = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "fh", options, NULL)) >= 0)
        switch (c) {
        case 'f':
            follow = true;
            break;
        case 's':
            sock = optarg;
            break;
        case 'h':
            fputs(usage, stdout);
            return EXIT_OK;
        default:
            fputs(usage, stderr);
            return EXIT_USAGE;
        }
    if (optind + 1 != argc)
        return fail(EXIT_USAGE, "logs: give one request id");
    uint64_t id;
    if (parse_decimal_uint64(argv[optind], UINT64_MAX, &id) < 0 || id == 0)
        return fail(EXIT_USAGE,
                    "logs: '%.32s' is not a request id (a number, as `einsora "
                    "requests` shows it)",
                    argv[optind]);
    if (!sock && !(sock = cli_local_engine_socket()))
        return fail(EXIT_FAIL, "logs: no container engine socket on this machine (looked "
                               "at " CLI_ENGINE_SOCKETS_LOOKED_AT "; give --engine-socket)");
    EngineConfig cfg;
    engine_config_init(&cfg);
    cfg.socket = sock;
    Driver *d = NULL;
    char product[160];
    Error err = {0};
    if (engine_driver_new(&cfg, &d, product, sizeof(product), &err) < 0 ||
        d->ops->logs(d, argv[optind], follow, stdout, &err) < 0) {
        driver_free(d);
        if (err.code == -ENOENT) /* not here: ended (removed), a VM, or another node's */
            return fail(EXIT_NOT_FOUND,
                        "%s (logs are a container's, on the node that runs it; a workload that "
                        "ended is removed with its output, a VM has none here)",
                        error_message(&err));
        return fail_error(EXIT_FAIL, &err);
    }
    driver_free(d);
    return EXIT_OK;
}
