/* confirm.c: the agent's confirmations of started workloads, sent side by side in the
 * background by a few worker threads, each with its own connection (confirm.h). */
#include "agent/confirm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/macro.h"

void confirm_pool_init(ConfirmPool *p, const char *server, const char *token,
                       volatile sig_atomic_t *stop) {
    *p = (ConfirmPool){.server = server, .token = token, .stop = stop};
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
}

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

Confirm *confirm_new(const char *id, int64_t placed_ms, json_t *body, char *note) {
    Confirm *c = calloc(1, sizeof(*c));
    if (!c) {
        json_decref(body);
        free(note);
        return NULL;
    }
    snprintf(c->id, sizeof(c->id), "%s", id);
    c->placed_ms = placed_ms;
    snprintf(c->path, sizeof(c->path), "/v1/requests/%s/activate", id);
    c->body = body;
    c->note = note;
    return c;
}

void confirm_free(Confirm *c) {
    if (!c)
        return;
    json_decref(c->body);
    json_decref(c->answer);
    free(c->note);
    free(c);
}

static void append(Confirm **head, Confirm **tail, Confirm *c) {
    c->next = NULL;
    if (*tail)
        (*tail)->next = c;
    else
        *head = c;
    *tail = c;
}

typedef struct Worker {
    ConfirmPool *p;
    unsigned slot;
} Worker;

static void *worker_main(void *arg) {
    Worker w = *(Worker *)arg;
    free(arg);
    ConfirmPool *p = w.p;
    Client *cl = NULL;
    Error open_err = {0};
    int opened = client_new(p->server, p->token, &cl, &open_err);
    if (opened >= 0 && p->stop)
        client_set_abort(cl, p->stop);
    pthread_mutex_lock(&p->lock);
    for (;;) {
        p->n_idle++;
        while (!p->queued && !p->quitting)
            pthread_cond_wait(&p->cond, &p->lock);
        p->n_idle--;
        if (!p->queued) /* quitting, nothing left to send */
            break;
        Confirm *c = p->queued;
        p->queued = c->next;
        if (!p->queued)
            p->queued_tail = NULL;
        p->sending[w.slot] = c;
        pthread_mutex_unlock(&p->lock);
        if (opened < 0) {
            c->r = opened;
            c->err = open_err;
        } else
            c->r = client_call(cl, "POST", c->path, c->body, NULL, &c->status, &c->answer, &c->err);
        int64_t now = mono_ms();
        pthread_mutex_lock(&p->lock);
        p->sending[w.slot] = NULL;
        if (c->r >= 0 && c->status >= 200 && c->status < 300) {
            unsigned k = p->answered_next++ % CONFIRM_REMEMBERED;
            snprintf(p->answered[k].id, sizeof(p->answered[k].id), "%s", c->id);
            p->answered[k].placed_ms = c->placed_ms;
            p->answered[k].at_ms = now;
        }
        append(&p->done, &p->done_tail, c);
    }
    pthread_mutex_unlock(&p->lock);
    client_free(cl);
    return NULL;
}

int confirm_submit(ConfirmPool *p, Confirm *c) {
    pthread_mutex_lock(&p->lock);
    unsigned queued = 0;
    for (Confirm *q = p->queued; q; q = q->next)
        queued++;
    /* A worker more while every one is busy or already has a confirmation waiting for it. */
    if (p->n_workers < CONFIRM_PARALLEL_MAX && queued >= p->n_idle && !p->quitting) {
        Worker *w = malloc(sizeof(*w));
        if (w) {
            *w = (Worker){.p = p, .slot = p->n_workers};
            if (pthread_create(&p->workers[p->n_workers], NULL, worker_main, w) == 0)
                p->n_workers++;
            else
                free(w);
        }
    }
    if (!p->n_workers || p->quitting) {
        pthread_mutex_unlock(&p->lock);
        confirm_free(c);
        return -EAGAIN;
    }
    append(&p->queued, &p->queued_tail, c);
    pthread_mutex_unlock(&p->lock);
    /* One worker per confirmation, woken after the unlock: a broadcast woke every idle worker
     * for each one (all but one to find the queue empty again), and a worker woken under the
     * lock only blocked on it; in a burst each such wakeup is a cross-CPU interrupt. */
    pthread_cond_signal(&p->cond);
    return 0;
}

bool confirm_pending(ConfirmPool *p, const char *id) {
    bool found = false;
    pthread_mutex_lock(&p->lock);
    for (Confirm *q = p->queued; q && !found; q = q->next)
        found = STREQ(q->id, id);
    for (unsigned i = 0; i < p->n_workers && !found; i++)
        found = p->sending[i] && STREQ(p->sending[i]->id, id);
    pthread_mutex_unlock(&p->lock);
    return found;
}

bool confirm_answered(ConfirmPool *p, const char *id, int64_t placed_ms) {
    int64_t now = mono_ms();
    bool found = false;
    pthread_mutex_lock(&p->lock);
    for (unsigned k = 0; k < CONFIRM_REMEMBERED && !found; k++)
        found = p->answered[k].at_ms && now - p->answered[k].at_ms < CONFIRM_ANSWER_TRUST_MS &&
                p->answered[k].placed_ms == placed_ms && STREQ(p->answered[k].id, id);
    pthread_mutex_unlock(&p->lock);
    return found;
}

Confirm *confirm_take_done(ConfirmPool *p) {
    pthread_mutex_lock(&p->lock);
    Confirm *done = p->done;
    p->done = p->done_tail = NULL;
    pthread_mutex_unlock(&p->lock);
    return done;
}

Confirm *confirm_pool_done(ConfirmPool *p) {
    pthread_mutex_lock(&p->lock);
    p->quitting = true;
    Confirm *unsent = p->queued;
    p->queued = p->queued_tail = NULL;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->n_workers; i++)
        pthread_join(p->workers[i], NULL);
    p->n_workers = 0;
    /* Not sent: left for the caller as not done, so that nothing waits on a call at exit. */
    for (Confirm *c = unsent, *next; c; c = next) {
        next = c->next;
        c->r = error_set(&c->err, -ECANCELED, "the agent stopped before it was sent");
        append(&p->done, &p->done_tail, c);
    }
    Confirm *done = p->done;
    p->done = p->done_tail = NULL;
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    return done;
}
