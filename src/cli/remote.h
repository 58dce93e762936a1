/* remote.h: shared plumbing of the verbs that talk to `einsora serve` over its API:
 * --server/--token/--json options, the call itself, and exit codes from HTTP answers. */
#pragma once

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>

#include "client/client.h"

/* Exit codes of the API verbs, beyond verbs.h's 0 ok / 1 failure or refused / 2 usage. */
enum {
    EXIT_UNREACHABLE = 3,   /* the server could not be reached */
    EXIT_DENIED = 4,        /* 401/403: missing, bad or insufficient token */
    EXIT_NOT_FOUND = 5,     /* 404: no such object (or not yours) */
    EXIT_TIMEOUT = 6,       /* a wait (--timeout) or the server's own deadline ran out */
    EXIT_INTERRUPTED = 130, /* Ctrl-C during a wait (128 + SIGINT, as shells report it) */
};

/* The one table from HTTP status to exit code (docs/cli.md): 400/422 usage (the server found
 * the arguments wrong), 401/403 not allowed, 404 not found, 408/504 timeout, else failed. */
int remote_exit_code(long status);

typedef struct RemoteOpts {
    const char *server; /* --server, else $EINSORA_SERVER, else http://127.0.0.1:7780 */
    const char *token;  /* --token, else $EINSORA_TOKEN */
    bool json;
    const char *context;      /* --context NAME (cmd-config.c) */
    bool server_from_context; /* o->server came from a context */
} RemoteOpts;

/* getopt_long entries every API verb accepts; ids are 0x100.. */
#define REMOTE_OPTIONS                                                                             \
    {"server", required_argument, NULL, 0x100}, {"token", required_argument, NULL, 0x101},         \
            {"json", no_argument, NULL, 0x102}, {                                                  \
        "context", required_argument, NULL, 0x103                                                  \
    }
#define REMOTE_HELP                                                                                \
    "  --server URL     API server (default $EINSORA_SERVER or http://127.0.0.1:7780); repeat\n"   \
    "                   it (or separate URLs with commas) to name several replicas\n"              \
    "  --token TOKEN    bearer token (default $EINSORA_TOKEN, else the context's token file)\n"    \
    "  --context NAME   use this context of ~/.config/einsora/config (default $EINSORA_CONTEXT,\n" \
    "                   else the current one; see `einsora config`)\n"                             \
    "  --json           machine-readable output (also -o json)\n"                                  \
    "  -h, --help       show this help\n"                                                          \
    "Exit codes: 0 ok, 1 failed or refused, 2 usage (also when the server finds the arguments\n"   \
    "wrong), 3 server unreachable, 4 not allowed, 5 not found, 6 timed out.\n"

/* --server given again: servers (NULL at first) with arg appended, comma-separated. */
const char *remote_add_server(const char *servers, const char *arg);
/* Handle one of REMOTE_OPTIONS; false when c is not one of them. */
bool remote_option(RemoteOpts *o, int c, const char *arg);
void remote_defaults(RemoteOpts *o);
/* Fill what flags left unset from $EINSORA_SERVER/$EINSORA_TOKEN, then from the context
 * (cmd-config.c). Returns EXIT_OK or an exit code after printing why. */
int remote_apply_context(RemoteOpts *o);
/* Add or replace a context and make it current (`einsora up`, `einsora login`). */
int remote_save_context(const char *name, const char *server, const char *token_file);

/* Call the API. On a 2xx answer returns EXIT_OK and *ret the JSON body (caller frees).
 * Otherwise prints "einsora: <message>" and returns the exit code for the status. */
int remote_call(const RemoteOpts *o, const char *method, const char *path, json_t *body,
                const char *idem_key, json_t **ret);
/* The same on an already open client (loops such as --wait and --follow). */
int remote_call_on(Client *cl, const char *method, const char *path, json_t *body,
                   const char *idem_key, json_t **ret);
int remote_open(const RemoteOpts *o, Client **ret);

/* Small helpers for tables. */
const char *json_str(json_t *obj, const char *key);
/* Integer field as a string in buf ("-" when missing). */
const char *json_int_str(json_t *obj, const char *key, char *buf, size_t size);

/* Parse the verb's options: the REMOTE_OPTIONS, --help, and `extra` (handled by on_extra,
 * which returns 0 or an exit code). Positional arguments stay at argv[optind...].
 * Returns -1 to go on, or the exit code to return (help shown, usage error). */
typedef int (*RemoteExtraFn)(int c, const char *arg, void *userdata);
int remote_getopt(int argc, char **argv, const struct option *extra, RemoteExtraFn on_extra,
                  void *userdata, RemoteOpts *o, const char *usage);
