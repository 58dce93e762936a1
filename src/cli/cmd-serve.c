/* cmd-serve.c: `einsora serve`: run the control plane's HTTP API. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "output.h"
#include "server/server.h" /* the one CLI verb that runs the server library itself */
#include "util/strutil.h"
#include "suggest.h"
#include "verbs.h"

static void serve_usage(FILE *f) {
    fputs("usage: einsora serve [--listen ADDR:PORT] [--state FILE | --store LOCATION]\n"
          "                     [--catalog FILE] [--port-file FILE] [--pci-ids FILE]\n"
          "                     [--site NAME] [--advertise URL] [--lease-ms N] [--batch N]\n"
          "                     [--retention D] [--store-retention D] [--per-address N]\n"
          "                     [--http-threads N] [--header-deadline D]\n"
          "                     [--tls-cert FILE --tls-key FILE | --insecure-plain-http]\n\n"
          "Run the control plane: the HTTP/JSON API under /v1 (see docs/openapi.yaml).\n"
          "Listens on loopback unless told otherwise; port 0 picks a free port, printed as\n"
          "'listening on http://ADDR:PORT' on stdout once the state is restored.\n\n"
          "  --listen ADDR:PORT  address to listen on (default " SERVER_DEFAULT_LISTEN
          "); IPv6 as\n"
          "                      [::1]:7780, or a host name\n"
          "  --state FILE        SQLite state file (default ./einsora.db)\n"
          "  --store LOCATION    an SQLite file, or PostgreSQL: postgresql://... or a conninfo\n"
          "                      ('host=... dbname=...'); several replicas may share one\n"
          "                      database: one leads, the others stand by (docs/postgresql.md)\n"
          "  --site NAME         the Einsora site owning the PostgreSQL database (default\n"
          "                      'default'); another site's database is refused\n"
          "  --advertise URL     how clients reach this replica (default: from --listen; the\n"
          "                      host name for a wildcard address such as 0.0.0.0)\n"
          "  --lease-ms N        the leader's lease on PostgreSQL (default 3000)\n"
          "  --catalog FILE      catalog of GPU classes (default: the shipped catalog)\n"
          "  --pci-ids FILE      pci.ids database for device names (default "
          "/usr/share/misc/pci.ids)\n"
          "  --port-file FILE    also write the chosen port to FILE\n"
          "  --batch N           operations per group commit (1 = one transaction each)\n"
          "  --retention D       ended requests, their events and idempotency keys leave\n"
          "                      memory D after they ended (default 1d; s, m, h or d)\n"
          "  --store-retention D ... and the state file after D (default 30d; 'never')\n"
          "  --per-address N     open connections from one client address (default 256)\n"
          "  --http-threads N    threads that run the API's handlers (default 64); a change\n"
          "                      holds one until its commit, so N bounds how many changes\n"
          "                      one commit gathers; idle connections hold none\n"
          "  --header-deadline D a request's headers must arrive within D of its connection\n"
          "                      opening, however they trickle (default 30s)\n"
          "  --tls-cert FILE     serve HTTPS with this PEM certificate (chain)...\n"
          "  --tls-key FILE      ... and this PEM key; needed on any address but loopback\n"
          "  --insecure-plain-http  serve plain HTTP off loopback anyway (behind a TLS proxy)\n"
          "  -h, --help          this text\n",
          f);
}

typedef struct Ready {
    const char *listen;
    const char *port_file;
    bool tls;
} Ready;

/* The temporary the port file is written to and renamed from, so a reader never sees half a
 * number; false (errno ENAMETOOLONG) when the name does not fit. */
static bool port_file_tmp(const char *path, char tmp[PATH_MAX]) {
    if ((size_t)snprintf(tmp, PATH_MAX, "%s.tmp", path) < PATH_MAX)
        return true;
    errno = ENAMETOOLONG;
    return false;
}

static void on_ready(uint16_t port, void *userdata) {
    Ready *r = userdata;
    char host[256] = "127.0.0.1";
    const char *colon = strrchr(r->listen, ':');
    if (colon && (size_t)(colon - r->listen) < sizeof(host))
        snprintf(host, sizeof(host), "%.*s", (int)(colon - r->listen), r->listen);
    printf("listening on %s://%s:%u\n", r->tls ? "https" : "http", host, port);
    fflush(stdout);
    if (r->port_file) {
        char tmp[PATH_MAX];
        FILE *f = port_file_tmp(r->port_file, tmp) ? fopen(tmp, "we") : NULL;
        bool ok = f && fprintf(f, "%u\n", port) > 0;
        ok = f && fclose(f) == 0 && ok;
        if (!ok || rename(tmp, r->port_file) < 0)
            fprintf(stderr, "einsora: warning: cannot write %s\n", r->port_file);
    }
}

/* Whether the port file's temporary can be made where on_ready() makes it (errno when not). */
static bool port_file_writable(const char *path) {
    char tmp[PATH_MAX];
    if (!port_file_tmp(path, tmp))
        return false;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return false;
    close(fd);
    unlink(tmp);
    return true;
}

int verb_serve(int argc, char **argv) {
    static const struct option options[] = {
            {"listen", required_argument, NULL, 'l'},
            {"state", required_argument, NULL, 's'},
            {"catalog", required_argument, NULL, 'c'},
            {"port-file", required_argument, NULL, 'p'},
            {"pci-ids", required_argument, NULL, 'i'},
            {"batch", required_argument, NULL, 'b'},
            {"store", required_argument, NULL, 's'},
            {"site", required_argument, NULL, 'S'},
            {"advertise", required_argument, NULL, 'a'},
            {"lease-ms", required_argument, NULL, 'L'},
            {"retention", required_argument, NULL, 'r'},
            {"store-retention", required_argument, NULL, 'R'},
            {"per-address", required_argument, NULL, 'P'},
            {"http-threads", required_argument, NULL, 'T'},
            {"header-deadline", required_argument, NULL, 'H'},
            {"tls-cert", required_argument, NULL, 'C'},
            {"tls-key", required_argument, NULL, 'K'},
            {"insecure-plain-http", no_argument, NULL, 'I'},
            {"help", no_argument, NULL, 'h'},
            {},
    };
    ServerConfig cfg = {.listen = SERVER_DEFAULT_LISTEN,
                        .state_path = "einsora.db",
                        .batch_max = SERVER_BATCH_MAX,
                        .log = stderr};
    int c;
    unsigned state_given = 0;
    uint64_t batch, lease;
    while ((c = cli_getopt(argc, argv, "h", options)) >= 0) {
        switch (c) {
        case 'l':
            cfg.listen = optarg;
            break;
        case 's':
            /* --state and --store are one option: given twice, the one ignored would be a
             * surprise (which state does this server write?). */
            if (state_given++)
                return fail(EXIT_USAGE, "serve: give the state once (--state FILE or --store "
                                        "LOCATION, not both or twice)");
            cfg.state_path = optarg;
            break;
        case 'c':
            cfg.catalog_path = optarg;
            break;
        case 'p':
            cfg.port_file = optarg;
            break;
        case 'i':
            cfg.pci_ids_path = optarg;
            break;
        case 'b':
            if (parse_uint64(optarg, 100000, &batch) < 0 || batch == 0)
                return fail(EXIT_USAGE, "serve: --batch takes a number from 1 to 100000, not '%s'",
                            optarg);
            cfg.batch_max = (unsigned)batch;
            break;
        case 'S':
            cfg.site = optarg;
            break;
        case 'a':
            /* Standbys send clients there (Location): a URL they can follow, or nothing. */
            if ((strncmp(optarg, "http://", 7) != 0 && strncmp(optarg, "https://", 8) != 0) ||
                !optarg[strncmp(optarg, "https://", 8) == 0 ? 8 : 7] || strpbrk(optarg, " \t\r\n"))
                return fail(EXIT_USAGE,
                            "serve: --advertise takes the URL clients reach this replica at "
                            "(http://HOST:PORT or https://...), not '%s'",
                            optarg);
            cfg.advertise_url = optarg;
            break;
        case 'L':
            if (parse_decimal_uint64(optarg, 600000, &lease) < 0 || lease < 100)
                return fail(EXIT_USAGE,
                            "serve: --lease-ms takes a number from 100 to 600000, not '%s'",
                            optarg);
            cfg.lease_ms = (unsigned)lease;
            break;
        case 'r':
            if (parse_duration_ms(optarg, 3650ll * 86400 * 1000, &cfg.retention_ms) < 0 ||
                cfg.retention_ms == 0)
                return fail(EXIT_USAGE,
                            "serve: --retention takes a duration such as 90s, 12h or 1d");
            break;
        case 'R':
            if (STREQ(optarg, "never"))
                cfg.store_retention_ms = -1;
            else if (parse_duration_ms(optarg, 36500ll * 86400 * 1000, &cfg.store_retention_ms) <
                             0 ||
                     cfg.store_retention_ms == 0)
                return fail(EXIT_USAGE,
                            "serve: --store-retention takes a duration such as 30d, or never");
            break;
        case 'P':
            if (parse_uint64(optarg, 1000000, &batch) < 0 || batch == 0)
                return fail(EXIT_USAGE,
                            "serve: --per-address takes a number from 1 to 1000000, not '%s'",
                            optarg);
            cfg.per_address_limit = (unsigned)batch;
            break;
        case 'T':
            if (parse_uint64(optarg, SERVER_HTTP_THREADS_MAX, &batch) < 0 || batch == 0)
                return fail(EXIT_USAGE,
                            "serve: --http-threads takes a number from 1 to %u, not '%s'",
                            SERVER_HTTP_THREADS_MAX, optarg);
            cfg.http_threads = (unsigned)batch;
            break;
        case 'H':
            if (parse_duration_ms(optarg, 3600ll * 1000, &cfg.header_deadline_ms) < 0 ||
                cfg.header_deadline_ms == 0)
                return fail(EXIT_USAGE,
                            "serve: --header-deadline takes a duration such as 10s or 1m");
            break;
        case 'C':
            cfg.tls_cert_path = optarg;
            break;
        case 'K':
            cfg.tls_key_path = optarg;
            break;
        case 'I':
            cfg.insecure_plain_http = true;
            break;
        case 'h':
            serve_usage(stdout);
            return EXIT_OK;
        default:
            serve_usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind < argc)
        return fail(EXIT_USAGE, "serve: unexpected argument '%s'", argv[optind]);
    if (!cfg.tls_cert_path != !cfg.tls_key_path)
        return fail(EXIT_USAGE, "serve: TLS needs both --tls-cert and --tls-key");
    /* The state file outlives memory: what memory still shows after a restart must be there
     * to be read back, or an ended request answers 200 before a restart and 404 after it. */
    int64_t in_memory = cfg.retention_ms ? cfg.retention_ms : SERVER_RETENTION_MS,
            in_store = cfg.store_retention_ms ? cfg.store_retention_ms : SERVER_STORE_RETENTION_MS;
    if (in_store >= 0 && in_store < in_memory)
        return fail(EXIT_USAGE,
                    "serve: --store-retention is shorter than --retention: the state file keeps "
                    "ended requests at least as long as memory does");
    Error err = {0};
    struct sockaddr_storage sa;
    socklen_t sa_len;
    if (server_listen_address(cfg.listen, &sa, &sa_len, &err) < 0)
        return fail_error(EXIT_USAGE, &err);
    /* Whoever reads the port file waits for it: a file that can never be written is found
     * now, before any state is opened, not once the server listens (a warning nobody waits
     * for). */
    if (cfg.port_file && !port_file_writable(cfg.port_file))
        return fail(EXIT_USAGE, "serve: --port-file %s: cannot write there: %s", cfg.port_file,
                    strerror(errno));
    Ready ready = {cfg.listen, cfg.port_file, cfg.tls_cert_path != NULL};
    if (server_run(&cfg, on_ready, &ready, &err) < 0)
        return fail_error(EXIT_FAIL, &err);
    return EXIT_OK;
}
