/* writer.c: the single writer thread: group commit of API changes and the server's timers.
 *
 * Every change goes through here, so the core and the in-memory records have one writer and
 * the store sees one transaction per batch: BEGIN IMMEDIATE, apply up to batch_max ops (and
 * any fallback deadline that passed, R13), write the changed rows, COMMIT, and only then
 * publish the events and answer the ops. A failed commit leaves memory ahead of the disk,
 * so the server stops rather than answer from a state it cannot vouch for; a restart
 * rebuilds from what was committed. */
#include "server-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/macro.h"

int64_t server_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* code "not_committed": certainly nothing was committed, so a client may send the call again
 * anywhere; "unavailable": the outcome is not known (a commit whose answer was lost). */
static void answer_unavailable(Op *ops, const char *code, const char *message) {
    for (Op *op = ops; op; op = op->next) {
        json_decref(op->body);
        free(op->text);
        op->text = NULL;
        op->reply_len = 0;
        op->status = 503;
        op->body = json_pack("{s:s, s:s}", "code", code, "message", message);
    }
}

static void fail_ops(Server *s, Op *ops) {
    answer_unavailable(ops, "unavailable",
                       s->leader ? "The server could not commit this change and is stopping; retry "
                                   "after it restarts (or at another replica)."
                                 : "The server could not commit this change and is stopping; retry "
                                   "after it restarts.");
}

/* Ops that never reached the store: the server is stopping. */
static void refuse_ops(Server *s, Op *ops) {
    answer_unavailable(ops, "not_committed",
                       s->leader ? "This change was not committed and the server is stopping; send "
                                   "it again (another replica takes over)."
                                 : "This change was not committed and the server is stopping; send "
                                   "it again once it restarts.");
}

int writer_check(Server *s, int r, const Error *err, const char *what) {
    if (r < 0 && s->batch_failed == 0) {
        s->batch_failed = r;
        if (err && err->code)
            s->batch_err = *err;
        else
            error_set(&s->batch_err, r, "state store: %s failed", what);
    }
    return r;
}

/* Apply one batch (ops may be NULL: a timer tick) in one transaction. */
static void run_batch(Server *s, Op *ops, size_t n_ops) {
    Error err = {0};
    uint64_t t0 = mono_us();
    int r = store_begin(s->store, &err);
    if (r < 0 && r != -ESTALE) {
        /* Nothing was applied yet: the ops get 503 and the server stays up; the store
         * reconnects (with backoff) at a later begin. A fenced-off leader (-ESTALE) stops. */
        char msg[ERROR_MESSAGE_MAX + 64];
        const char *m = error_message(&err);
        size_t ml = strlen(m);
        snprintf(msg, sizeof(msg), "%s%s Nothing was changed; retry shortly.", m,
                 ml && m[ml - 1] != '.' ? "." : "");
        answer_unavailable(ops, "not_committed", msg);
        /* Not a busy loop while the store is away (a timer batch comes straight back). */
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
        return;
    }
    pthread_rwlock_wrlock(&s->lock);
    s->now_ms = server_now_ms();
    s->batch_failed = 0;
    if (r >= 0) {
        for (Op *op = ops; op; op = op->next) {
            s->actor = op->who ? op->who->user : "system";
            op->fn(s, op);
            (void)state_flush_consequences(s); /* after the op's own events */
        }
        s->actor = "system";
        /* R13: fallback deadlines fire from the server's clock. */
        if (sched_next_deadline(s->sched) <= core_now(s))
            sched_tick(s->sched, core_now(s));
        (void)state_flush_consequences(s);
        /* Agents' heartbeats, reset checks to ask for, mode switches to advance. */
        fleet_tick(s);
        history_prune(s);
        r = state_flush_dirty(s, &err);
        if (r >= 0 && s->batch_failed < 0) {
            r = s->batch_failed;
            err = s->batch_err;
        }
    }
    pthread_rwlock_unlock(&s->lock);
    bool committing = r >= 0;
    if (r >= 0)
        r = store_commit(s->store, &err);
    if (r < 0) {
        store_rollback(s->store);
        events_rollback(&s->events);
        if (committing)
            fail_ops(s, ops);
        else /* fenced off, or the store failed before COMMIT was sent */
            refuse_ops(s, ops);
        s->fatal_err = err;
        atomic_store(&s->fatal, true);
    } else {
        events_publish(&s->events);
        histogram_observe(&s->metrics.commit, mono_us() - t0);
        atomic_fetch_add(&s->metrics.commits, 1);
        atomic_fetch_add(&s->metrics.committed_ops, n_ops);
    }
}

/* The stack's value once the writer stopped: a push finds it and refuses its op. */
static Op writer_closed_mark;
#define WRITER_CLOSED (&writer_closed_mark)

/* Append every op pushed since the last look to the writer's queue, oldest first. */
static void take_pushed(Server *s) {
    Op *stack = atomic_exchange(&s->q_stack, NULL), *fifo = NULL, *tail = stack;
    while (stack) {
        Op *next = stack->next;
        stack->next = fifo;
        fifo = stack;
        stack = next;
    }
    if (!fifo)
        return;
    if (s->q_tail)
        s->q_tail->next = fifo;
    else
        s->q_head = fifo;
    s->q_tail = tail;
}

/* Whether the writer has work without ops (a fallback deadline, agents' heartbeats, the
 * retention); if not, how long it may sleep. */
static bool timers_due(Server *s, int64_t *ret_wait_ms) {
    /* Sleep until the next fallback deadline (at most a second, so that a deadline computed
     * from a request submitted meanwhile is never missed by long). */
    pthread_rwlock_rdlock(&s->lock);
    uint64_t next = sched_next_deadline(s->sched);
    pthread_rwlock_unlock(&s->lock);
    int64_t now = server_now_ms();
    int64_t fleet_due = atomic_load(&s->fleet_due_ms);
    bool fatal = atomic_load(&s->fatal);
    if (fleet_due <= now && !fatal)
        return true;
    /* Retention runs even when no op comes (only this thread changes what it reads). */
    if (history_prune_due(s, now) && !fatal)
        return true;
    /* Deadlines are in ms (core_now): the batch's tick opens the fallback and drops the
     * deadline, so a passed one wakes the writer exactly once. */
    if (next != UINT64_MAX && (int64_t)next <= now)
        return true;
    int64_t wait_ms = 1000;
    if (next != UINT64_MAX)
        wait_ms = MIN(wait_ms, (int64_t)next - now);
    *ret_wait_ms = MIN(wait_ms, fleet_due - now);
    return false;
}

/* Sleep up to wait_ms unless an op was pushed or the server is stopping. A caller pushes
 * before it reads writer_asleep, and this thread sets it before it looks at the stack, so
 * one of the two sees the other (no lost wake-up); q_lock covers the gap between this
 * thread's look and its wait. */
static void sleep_until_pushed(Server *s, int64_t wait_ms) {
    struct timespec ts = timespec_after_ms(CLOCK_MONOTONIC, (uint64_t)MAX(wait_ms, 0));
    pthread_mutex_lock(&s->q_lock);
    atomic_store(&s->writer_asleep, true);
    if (!atomic_load(&s->q_stack) && !atomic_load(&s->stopping))
        (void)pthread_cond_timedwait(&s->q_cond, &s->q_lock, &ts);
    atomic_store(&s->writer_asleep, false);
    pthread_mutex_unlock(&s->q_lock);
}

static void *writer_main(void *userdata) {
    Server *s = userdata;
    for (;;) {
        take_pushed(s);
        bool stopping = atomic_load(&s->stopping);
        int64_t wait_ms = 0;
        if (!s->q_head && stopping)
            break;
        if (!s->q_head && !timers_due(s, &wait_ms)) {
            sleep_until_pushed(s, wait_ms);
            continue;
        }
        Op *batch = s->q_head, *last = NULL;
        size_t n = 0;
        for (Op *op = batch; op && n < s->cfg.batch_max; op = op->next)
            last = op, n++;
        if (last) {
            s->q_head = last->next;
            if (!s->q_head)
                s->q_tail = NULL;
            last->next = NULL;
        } else
            batch = NULL;

        if (atomic_load(&s->fatal))
            refuse_ops(s, batch);
        else
            run_batch(s, batch, n);

        /* Only the first caller is woken here; each caller wakes the next (writer_submit()),
         * so that the batch's wake-ups run on the callers' threads while this one commits the
         * next batch. */
        if (batch)
            sem_post(&batch->done);
        history_trim(s, server_now_ms()); /* the batch is answered: nobody waits on this */
    }
    /* Ops pushed after the last look: refused, and no later push gets in. */
    Op *left = atomic_exchange(&s->q_stack, WRITER_CLOSED);
    refuse_ops(s, left);
    if (left)
        sem_post(&left->done);
    return NULL;
}

int writer_start(Server *s) {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_mutex_init(&s->q_lock, NULL);
    pthread_cond_init(&s->q_cond, &a);
    pthread_condattr_destroy(&a);
    if (s->cfg.batch_max == 0)
        s->cfg.batch_max = SERVER_BATCH_MAX;
    int r = pthread_create(&s->writer, NULL, writer_main, s);
    if (r == 0)
        pthread_setname_np(s->writer, "einsora-writer");
    return -r;
}

void writer_stop(Server *s) {
    pthread_mutex_lock(&s->q_lock);
    atomic_store(&s->stopping, true);
    pthread_cond_signal(&s->q_cond);
    pthread_mutex_unlock(&s->q_lock);
    pthread_join(s->writer, NULL);
    pthread_mutex_destroy(&s->q_lock);
    pthread_cond_destroy(&s->q_cond);
}

void writer_submit(Server *s, Op *op) {
    sem_init(&op->done, 0, 0);
    Op *head = atomic_load(&s->q_stack);
    do {
        if (head == WRITER_CLOSED || atomic_load(&s->stopping)) {
            op->next = NULL;
            refuse_ops(s, op);
            sem_destroy(&op->done);
            return;
        }
        op->next = head;
    } while (!atomic_compare_exchange_weak(&s->q_stack, &head, op));
    if (atomic_load(&s->writer_asleep)) {
        pthread_mutex_lock(&s->q_lock);
        pthread_cond_signal(&s->q_cond);
        pthread_mutex_unlock(&s->q_lock);
    }
    while (sem_wait(&op->done) < 0 && errno == EINTR)
        ;
    /* The next op of the batch waits on its caller's stack until this post (writer_main()). */
    if (op->next)
        sem_post(&op->next->done);
    sem_destroy(&op->done);
}
