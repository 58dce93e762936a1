/* confirm.h: the agent's confirmations that placed workloads now run (POST
 * /v1/requests/{id}/activate), sent side by side and in the background.
 *
 * One answer of the work route may place several workloads on a node at once (the eight
 * one-GPU jobs that follow a gang). Sent one after another, the eighth would be confirmed
 * seven round trips (each a durable commit on the control plane) after the first; sent side
 * by side on connections of their own they land in the control plane's same group commit, and
 * every one of them is confirmed about one round trip after its start.
 *
 * Nor does the agent wait for the answers: while a confirmation waits for its commit, the
 * agent is back on its long-poll, so a placement that comes meanwhile is started at once
 * rather than after that round trip. The answers are taken (confirm_take_done) where the agent
 * looks at its work again.
 *
 * Confirmations queued together go in one call (POST /v1/nodes/{name}/activate, up to
 * CONFIRM_BATCH_MAX): when a wave of placements lands on every node at once, each agent's
 * eight confirmations are one request and one commit, not eight requests contending for the
 * control plane's CPUs. Each item is answered as its single call would be. A control plane
 * that does not know the route (older) gets one call each from then on. */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "client/client.h"
#include "util/error.h"

/* Confirmations in flight at once, at most (a worker thread and a connection each); more wait
 * for a free one. */
#define CONFIRM_PARALLEL_MAX 8
/* Confirmations sent in one call, at most (the route's own limit). */
#define CONFIRM_BATCH_MAX 64

/* A work answer the control plane made before it committed a confirmation still shows that
 * workload placed, and may reach the agent after the confirmation's answer (the commit of one
 * placement wakes the agent's poll while the confirmation of the one before is on its way).
 * The last CONFIRM_REMEMBERED confirmations answered 2xx are remembered for
 * CONFIRM_ANSWER_TRUST_MS, so that such an answer does not send them again: in a burst of
 * placements about one confirmation in five went out twice, each a round trip and a 409. Past
 * that time a work answer that shows the workload placed is believed (the answer was lost,
 * say, to a restore of the control plane's state), and it is confirmed again. */
#define CONFIRM_REMEMBERED 64
#define CONFIRM_ANSWER_TRUST_MS 2000

typedef struct Confirm {
    struct Confirm *next;
    char id[32];       /* the request's id */
    int64_t placed_ms; /* when the control plane placed it here (its work item's placed_ms) */
    char path[64];     /* "/v1/requests/<id>/activate" */
    json_t *body;      /* {"url": ...} or NULL; owned */
    char *note;        /* what to log once confirmed (owned; may be NULL) */
    /* how it went: client_call()'s result, and on 0 the status and the answer (owned) */
    int r;
    long status;
    json_t *answer;
    Error err;
} Confirm;

typedef struct ConfirmPool {
    const char *server, *token;
    const char *ca_file;  /* the control plane's private CA, or NULL (AgentConfig) */
    const char *node;     /* the batch route's node; NULL: one call each */
    const char *instance; /* the agent's (WIRE_AGENT_HEADER), or NULL */
    bool single_only;     /* the control plane answered that it has no batch route */
    volatile sig_atomic_t *stop;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool quitting;
    unsigned n_workers, n_idle;
    pthread_t workers[CONFIRM_PARALLEL_MAX];
    Confirm *queued, *queued_tail;          /* to send, oldest first */
    Confirm *sending[CONFIRM_PARALLEL_MAX]; /* in flight, per worker (a list: one call) */
    Confirm *done, *done_tail;              /* answered (or not sent: r < 0), oldest first */
    struct {
        char id[32];
        int64_t placed_ms, at_ms;   /* at_ms: when answered (CLOCK_MONOTONIC) */
    } answered[CONFIRM_REMEMBERED]; /* the latest answered 2xx, a ring; at_ms 0: empty */
    unsigned answered_next;
} ConfirmPool;

/* The pool of node's agent that talks to server with token (node NULL: one call per
 * confirmation); stop (may be NULL) ends calls in flight (client_set_abort()). The strings
 * must outlive the pool. Starts nothing yet. */
void confirm_pool_init(ConfirmPool *p, const char *server, const char *token, const char *node,
                       volatile sig_atomic_t *stop);
/* Stop the workers (a call in flight ends when stop is set, else with its answer) and return
 * what confirm_take_done() would, followed by what was never sent (r = -ECANCELED). */
Confirm *confirm_pool_done(ConfirmPool *p);

/* A new confirmation of request id, placed at placed_ms ("path" filled in; body and note the
 * caller's, which become the item's), or NULL when out of memory. */
Confirm *confirm_new(const char *id, int64_t placed_ms, json_t *body, char *note);
void confirm_free(Confirm *c);

/* Queue the confirmations of list (linked by next; the pool's from now on) and return at
 * once; a worker sends them, in one call when it can. -errno (all freed) when no worker can
 * be started at all. */
int confirm_submit(ConfirmPool *p, Confirm *list);
/* Whether a confirmation of id is queued or in flight. */
bool confirm_pending(ConfirmPool *p, const char *id);
/* Whether a confirmation of id placed at placed_ms was answered 2xx less than
 * CONFIRM_ANSWER_TRUST_MS ago: a work answer that shows it placed was made before the commit. */
bool confirm_answered(ConfirmPool *p, const char *id, int64_t placed_ms);
/* The answered confirmations, oldest first, linked by next (the caller's: confirm_free each). */
Confirm *confirm_take_done(ConfirmPool *p);
