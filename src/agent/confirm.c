/* confirm.c: the agent's confirmations of started workloads, sent side by side (confirm.h). */
#include "agent/confirm.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "util/macro.h"

void confirm_pool_init(ConfirmPool *p, const char *server, const char *token,
                       volatile sig_atomic_t *stop) {
    *p = (ConfirmPool){.server = server, .token = token, .stop = stop};
}

void confirm_pool_done(ConfirmPool *p) {
    for (size_t i = 0; i < ARRAY_SIZE(p->cl); i++) {
        client_free(p->cl[i]);
        p->cl[i] = NULL;
    }
}

typedef struct Job {
    Client *cl;
    Confirm *item;
} Job;

static void *send_one(void *arg) {
    Job *j = arg;
    Confirm *c = j->item;
    c->r = client_call(j->cl, "POST", c->path, c->body, NULL, &c->status, &c->answer, &c->err);
    return NULL;
}

/* The pool's k-th connection, opened when first needed; NULL (with the item's error set) when
 * it cannot be. */
static Client *pool_client(ConfirmPool *p, size_t k, Confirm *item) {
    if (!p->cl[k]) {
        if ((item->r = client_new(p->server, p->token, &p->cl[k], &item->err)) < 0)
            return NULL;
        if (p->stop)
            client_set_abort(p->cl[k], p->stop);
    }
    return p->cl[k];
}

void confirm_send_all(ConfirmPool *p, Client *cl, Confirm *items, size_t n) {
    for (size_t i = 0; i < n; i++) {
        items[i].r = 0;
        items[i].status = 0;
        items[i].answer = NULL;
        items[i].err = (Error){0};
    }
    for (size_t base = 0; base < n; base += CONFIRM_PARALLEL_MAX) {
        size_t k = MIN(n - base, (size_t)CONFIRM_PARALLEL_MAX);
        Job jobs[CONFIRM_PARALLEL_MAX];
        pthread_t th[CONFIRM_PARALLEL_MAX];
        bool started[CONFIRM_PARALLEL_MAX] = {false};
        for (size_t i = 1; i < k; i++) {
            Confirm *item = &items[base + i];
            jobs[i] = (Job){.cl = pool_client(p, i - 1, item), .item = item};
            if (jobs[i].cl)
                started[i] = pthread_create(&th[i], NULL, send_one, &jobs[i]) == 0;
        }
        jobs[0] = (Job){.cl = cl, .item = &items[base]};
        send_one(&jobs[0]);
        for (size_t i = 1; i < k; i++) {
            if (started[i])
                pthread_join(th[i], NULL);
            else if (jobs[i].cl) /* no thread to spare: this one goes after the others */
                send_one(&jobs[i]);
        }
    }
}

void confirm_items_done(Confirm *items, size_t n) {
    for (size_t i = 0; i < n; i++) {
        json_decref(items[i].answer);
        items[i].answer = NULL;
    }
}
