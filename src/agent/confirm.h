/* confirm.h: the agent's confirmations that placed workloads now run (POST
 * /v1/requests/{id}/activate), sent side by side.
 *
 * One answer of the work route may place several workloads on a node at once (the eight
 * one-GPU jobs that follow a gang). Sent one after another, the eighth would be confirmed
 * seven round trips (each a durable commit on the control plane) after the first; sent side
 * by side on connections of their own they land in the control plane's same group commit, and
 * every one of them is confirmed about one round trip after its start. */
#pragma once

#include <jansson.h>
#include <signal.h>

#include "client/client.h"
#include "util/error.h"

/* Confirmations in flight at once, at most; more wait for a free connection. */
#define CONFIRM_PARALLEL_MAX 8

typedef struct Confirm {
    char path[64]; /* "/v1/requests/<id>/activate" */
    json_t *body;  /* {"url": ...} or NULL; owned by the caller */
    /* how it went: client_call()'s result, and on 0 the status and the answer (owned) */
    int r;
    long status;
    json_t *answer;
    Error err;
} Confirm;

typedef struct ConfirmPool {
    const char *server, *token;
    volatile sig_atomic_t *stop;
    Client *cl[CONFIRM_PARALLEL_MAX - 1]; /* opened when first needed, then kept alive */
} ConfirmPool;

/* The pool of a daemon that talks to server with token; stop (may be NULL) ends calls in
 * flight (client_set_abort()). The strings must outlive the pool. Opens nothing yet. */
void confirm_pool_init(ConfirmPool *p, const char *server, const char *token,
                       volatile sig_atomic_t *stop);
void confirm_pool_done(ConfirmPool *p);

/* Send every item, the first on cl (the caller's own connection) and up to
 * CONFIRM_PARALLEL_MAX - 1 others at the same time on the pool's, and return once all are
 * answered: each item's r, status, answer and err say how it went. */
void confirm_send_all(ConfirmPool *p, Client *cl, Confirm *items, size_t n);

/* Free the answers confirm_send_all() left in the items. */
void confirm_items_done(Confirm *items, size_t n);
