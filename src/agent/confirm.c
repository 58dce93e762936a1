/* confirm.c: the agent's confirmations of started workloads, sent side by side in the
 * background by a few worker threads, each with its own connection (confirm.h). */
#include "agent/confirm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/macro.h"
#include "wire/api-address.h"
#include "util/strutil.h"

void confirm_pool_init(ConfirmPool *p, const char *server, const char *token, const char *node,
                       volatile sig_atomic_t *stop) {
    *p = (ConfirmPool){.server = server, .token = token, .node = node, .stop = stop};
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

static void send_one(Client *cl, Confirm *c) {
    c->r = client_call(cl, "POST", c->path, c->body, NULL, &c->status, &c->answer, &c->err);
}

/* The confirmations of list (two or more) in one call; each gets its item's answer. False
 * when the control plane has no such route: the list is to be sent one call each. */
static bool send_batch(ConfirmPool *p, Client *cl, Confirm *list) {
    json_t *items = json_array();
    for (Confirm *c = list; c; c = c->next) {
        json_t *it = json_pack("{s:s}", "id", c->id);
        json_t *url = json_object_get(c->body, "url");
        if (it && url)
            json_object_set(it, "url", url);
        json_array_append_new(items, it);
    }
    char path[160];
    snprintf(path, sizeof(path), "/v1/nodes/%s/activate", p->node);
    json_t *answer = NULL;
    long status = 0;
    Error err = {0};
    json_t *body = json_pack("{s:o}", "requests", items);
    int r = body ? client_call(cl, "POST", path, body, NULL, &status, &answer, &err)
                 : error_set(&err, -ENOMEM, "out of memory");
    json_decref(body);
    if (r >= 0 && client_route_unknown(status, answer)) {
        pthread_mutex_lock(&p->lock);
        p->single_only = true;
        pthread_mutex_unlock(&p->lock);
        json_decref(answer);
        return false;
    }
    json_t *results = r >= 0 && status == 200 ? json_object_get(answer, "results") : NULL;
    size_t k = 0;
    for (Confirm *c = list; c; c = c->next, k++) {
        json_t *it = json_array_get(results, k);
        const char *id = json_string_value(json_object_get(it, "id"));
        if (id && STREQ(id, c->id)) {
            c->r = 0;
            c->status = (long)json_integer_value(json_object_get(it, "status"));
            c->answer = json_incref(json_object_get(it, c->status < 300 ? "request" : "error"));
        } else if (r < 0) {
            c->r = r;
            c->err = err;
        } else { /* no answer for this one: looked at again at the next turn, as a 5xx */
            c->r = 0;
            c->status = status == 200 ? 502 : status;
            c->answer = json_incref(answer);
        }
    }
    json_decref(answer);
    return true;
}

typedef struct Worker {
    ConfirmPool *p;
    unsigned slot;
} Worker;

static void *worker_main(void *arg);

/* Under the lock: up to `want` workers more, while the calls to make (those queued and
 * `incoming` more) outnumber the idle workers. */
static void add_workers(ConfirmPool *p, size_t want, size_t incoming) {
    size_t calls = incoming, idle = p->n_idle;
    for (Confirm *q = p->queued; q; q = q->next)
        calls++;
    for (; want && p->n_workers < CONFIRM_PARALLEL_MAX && calls > idle && !p->quitting;
         want--, idle++) {
        Worker *w = malloc(sizeof(*w));
        if (!w)
            return;
        *w = (Worker){.p = p, .slot = p->n_workers};
        if (pthread_create(&p->workers[p->n_workers], NULL, worker_main, w) != 0) {
            free(w);
            return;
        }
        p->n_workers++;
    }
}

static void *worker_main(void *arg) {
    Worker w = *(Worker *)arg;
    free(arg);
    ConfirmPool *p = w.p;
    Client *cl = NULL;
    Error open_err = {0};
    int opened = client_new(p->server, p->token, &cl, &open_err);
    if (opened >= 0 && p->ca_file)
        opened = client_set_ca_file(cl, p->ca_file, &open_err);
    if (opened >= 0 && p->instance)
        opened = client_set_header(cl, WIRE_AGENT_HEADER, p->instance, &open_err);
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
        /* Everything queued, in one call when the control plane takes batches. */
        Confirm *list = p->queued, *last = list;
        for (size_t n = 1; last->next && n < CONFIRM_BATCH_MAX && p->node && !p->single_only; n++)
            last = last->next;
        p->queued = last->next;
        if (!p->queued)
            p->queued_tail = NULL;
        last->next = NULL;
        p->sending[w.slot] = list;
        pthread_mutex_unlock(&p->lock);
        for (Confirm *c = list; c && opened < 0; c = c->next) {
            c->r = opened;
            c->err = open_err;
        }
        if (opened >= 0 && list->next && !send_batch(p, cl, list)) {
            /* An older control plane: back to the queue's head, side by side on workers. */
            size_t n = 0;
            for (last = list; last->next; last = last->next)
                n++;
            pthread_mutex_lock(&p->lock);
            p->sending[w.slot] = NULL;
            last->next = p->queued;
            p->queued = list;
            if (!p->queued_tail)
                p->queued_tail = last;
            add_workers(p, n + 1, 0);
            pthread_cond_broadcast(&p->cond);
            continue;
        }
        if (opened >= 0 && !list->next)
            send_one(cl, list);
        int64_t now = mono_ms();
        pthread_mutex_lock(&p->lock);
        p->sending[w.slot] = NULL;
        for (Confirm *c = list, *next; c; c = next) {
            next = c->next;
            if (c->r >= 0 && c->status >= 200 && c->status < 300) {
                unsigned k = p->answered_next++ % CONFIRM_REMEMBERED;
                snprintf(p->answered[k].id, sizeof(p->answered[k].id), "%s", c->id);
                p->answered[k].placed_ms = c->placed_ms;
                p->answered[k].at_ms = now;
            }
            append(&p->done, &p->done_tail, c);
        }
    }
    pthread_mutex_unlock(&p->lock);
    client_free(cl);
    return NULL;
}

int confirm_submit(ConfirmPool *p, Confirm *list) {
    pthread_mutex_lock(&p->lock);
    size_t n = 0;
    for (Confirm *c = list; c; c = c->next)
        n++;
    /* One call for the list when the control plane takes batches, else one each. */
    size_t calls = p->node && !p->single_only ? 1 : n;
    add_workers(p, calls, calls);
    if (!p->n_workers || p->quitting) {
        pthread_mutex_unlock(&p->lock);
        for (Confirm *c = list, *next; c; c = next) {
            next = c->next;
            confirm_free(c);
        }
        return -EAGAIN;
    }
    for (Confirm *c = list, *next; c; c = next) {
        next = c->next;
        append(&p->queued, &p->queued_tail, c);
    }
    pthread_mutex_unlock(&p->lock);
    /* One worker per call, woken after the unlock: a broadcast for each confirmation woke
     * every idle worker (all but one to find the queue empty again), and a worker woken under
     * the lock only blocked on it; in a burst each such wakeup is a cross-CPU interrupt. */
    if (calls == 1)
        pthread_cond_signal(&p->cond);
    else
        pthread_cond_broadcast(&p->cond);
    return 0;
}

bool confirm_pending(ConfirmPool *p, const char *id) {
    bool found = false;
    pthread_mutex_lock(&p->lock);
    for (Confirm *q = p->queued; q && !found; q = q->next)
        found = STREQ(q->id, id);
    for (unsigned i = 0; i < p->n_workers && !found; i++)
        for (Confirm *q = p->sending[i]; q && !found; q = q->next)
            found = STREQ(q->id, id);
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
