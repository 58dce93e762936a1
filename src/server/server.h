/* server.h: `einsora serve`: the control plane's HTTP/JSON API over the core and the store. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "util/error.h"
#include "wire/api-address.h" /* SERVER_DEFAULT_LISTEN */

#define SERVER_BODY_MAX (64u * 1024) /* larger bodies get 413 */
#define SERVER_BATCH_MAX 512         /* operations per group commit */
/* Connections cost a socket, not a thread (http.c). A change holds its handler's thread until
 * its commit, and the connections libmicrohttpd gave that thread wait meanwhile, so the pool
 * bounds how many changes one commit gathers: at 64 clients (bench-api) 16 threads gathered
 * 4-5 per commit, 64 threads 8-9, for 1.3x the placements/s and a third of the p99. */
#define SERVER_HTTP_THREADS 64u /* the pool that runs handlers (default) */
#define SERVER_HTTP_THREADS_MAX 1024u
/* Each connection's memory for a request's headers and its answer's (libmicrohttpd zeroes
 * all of it after every request: its default of 32 KiB was a fifth of a placement's
 * instructions). Headers up to 8 KiB, the common limit, fit with room to spare; bodies
 * stream through it in pieces, so they are bounded by SERVER_BODY_MAX alone. */
#define SERVER_CONNECTION_MEMORY (16u * 1024)
/* Address space each thread's heap is made read-write in at once (http.c: glibc's largest
 * thread heap, 64 MiB; pages cost memory only once touched). */
#define SERVER_HEAP_PAD (64u * 1024 * 1024)
#define SERVER_PER_ADDRESS_MAX 256  /* open connections from one client address (default) */
#define SERVER_IDLE_TIMEOUT_S 30    /* a connection silent this long is closed */
#define SERVER_BODY_DEADLINE_S 30   /* a request's whole body, however it trickles */
#define SERVER_HEADER_DEADLINE_S 30 /* a request's headers, however they trickle */
#define SERVER_DRAIN_S 10           /* SIGTERM: at most this long to answer what is in flight */
#define SERVER_RETENTION_MS (24ll * 3600 * 1000)            /* memory: a day */
#define SERVER_STORE_RETENTION_MS (30ll * 24 * 3600 * 1000) /* the state file: thirty days */

typedef struct ServerConfig {
    const char *listen;       /* "ADDR:PORT"; port 0 picks a free one */
    const char *state_path;   /* SQLite state file, or a PostgreSQL URI or conninfo */
    const char *catalog_path; /* catalog YAML; NULL = the default catalog */
    const char *pci_ids_path; /* NULL: the default pci.ids (EINSORA_PCI_IDS) */
    const char *port_file;    /* when set, the chosen port is written there once listening */
    unsigned batch_max;       /* 1 = one transaction per operation (the benchmark's baseline) */
    FILE *log;                /* where startup and fatal messages go; NULL = nowhere */
    /* Several replicas on PostgreSQL (state_path a PostgreSQL URI or conninfo, leader.h). */
    const char *site;           /* the Einsora site owning the database; NULL = "default" */
    const char *advertise_url;  /* how other replicas' clients reach this one; NULL: from listen */
    unsigned lease_ms;          /* the leader's lease; 0 = LEADER_LEASE_MS_DEFAULT */
    unsigned per_address_limit; /* connections from one address; 0 = SERVER_PER_ADDRESS_MAX */
    unsigned http_threads;      /* the handlers' pool; 0 = SERVER_HTTP_THREADS */
    /* Ended requests, their events and idempotency keys leave memory this long after they
     * ended (0: SERVER_RETENTION_MS), and the store after store_retention_ms (0:
     * SERVER_STORE_RETENTION_MS; negative: never). */
    int64_t retention_ms, store_retention_ms;
    /* A request's headers must be complete this long after its connection opened (or its
     * previous request was answered); 0: SERVER_HEADER_DEADLINE_S. */
    int64_t header_deadline_ms;
    /* TLS (PEM files, via libmicrohttpd's GnuTLS); without them a listen address
     * that is not loopback is refused unless insecure_plain_http, so tokens never cross a
     * network in clear by accident. */
    const char *tls_cert_path, *tls_key_path;
    bool insecure_plain_http;
} ServerConfig;

/* "HOST:PORT", "[IPV6]:PORT" or "NAME:PORT" -> the address to bind; -EINVAL with the reason
 * for anything else (the CLI checks --listen with it before opening any state). */
int server_listen_address(const char *listen, struct sockaddr_storage *ret, socklen_t *ret_len,
                          Error *err);

/* Open the state, rebuild the core from it (nodes, placed allocations, the waiting queue),
 * check the invariants, listen, and serve until SIGINT/SIGTERM. ready_fn is called once
 * listening with the bound port. Returns 0 on a clean stop. */
int server_run(const ServerConfig *cfg, void (*ready_fn)(uint16_t port, void *userdata),
               void *userdata, Error *err);
