/* replay.c: a standby follows the leader's commits into a read-only view and serves reads. */
#include "replay.h"

#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "config.h"
#include "leader.h"
#include "longpoll.h"
#include "store/store-pg.h"
#include "util/clock.h"
#include "util/macro.h"

#define REPLAY_CHANNEL "einsora_events"

/* A replica of the state at one committed sequence; readers hold a reference. */
typedef struct View {
    Server s; /* first: a handler's c->s points here */
    atomic_int refs;
} View;

struct Replay {
    Server *s;
    unsigned poll_ms; /* the periodic look at the events table: half a lease */
    PGconn *listen;   /* the LISTEN session */
    uint64_t listen_retry_ms;
    int wake_fd; /* readers and stop wake the thread */
    pthread_t thread;
    bool running;
    atomic_bool stop;

    pthread_mutex_t lock; /* current, and the condition readers wait on */
    pthread_cond_t cond;
    View *current;
    _Atomic uint64_t applied;     /* the current view's last sequence */
    _Atomic uint64_t known;       /* the newest committed sequence seen (NOTIFY, poll, reads) */
    _Atomic int64_t behind_since; /* when known first exceeded applied (ms, wall); 0: caught up */
    _Atomic uint64_t rebuilds;
    _Atomic uint64_t reads; /* answered from a view */
};

static uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static bool is_standby(Server *s) {
    return s->replay && !server_is_leader(s);
}

/* ---- views ---- */

static void view_free(View *v) {
    if (!v)
        return;
    Server *s = &v->s;
    state_free(s);
    sched_free(s->sched);
    events_done(&s->events);
    pthread_rwlock_destroy(&s->lock);
    pthread_mutex_destroy(&s->reader_lock);
    free(v);
}

static void view_unref(View *v) {
    if (v && atomic_fetch_sub(&v->refs, 1) == 1)
        view_free(v);
}

/* Record that the store holds sequence seq: the lag counts from the first time it does. */
static void note_known(Replay *rp, uint64_t seq) {
    uint64_t k = atomic_load(&rp->known);
    while (k < seq && !atomic_compare_exchange_weak(&rp->known, &k, seq))
        ;
    if (seq > atomic_load(&rp->applied)) {
        int64_t zero = 0;
        (void)atomic_compare_exchange_strong(&rp->behind_since, &zero, server_now_ms());
    }
}

/* The queue as the leader holds it: waiting requests in submission order, in the view's own
 * core, only for their queue positions and reasons; what it decides is never written. */
static int queue_waiting(Server *v, Error *err) {
    for (size_t i = 0; i < v->n_reqs; i++) {
        Req *q = v->reqs[i];
        if (!q || q->state != REQ_PENDING)
            continue;
        char id[32];
        const char *fb[SPEC_MAX_FALLBACK];
        RequestSpec spec;
        ApiRequest a;
        int r = req_held_core_spec(q, &a, id, fb, &spec, err);
        if (r < 0)
            return r;
        spec.wait_for_nodes = true; /* as the leader holds it: waiting (state.c, state_load) */
        r = sched_submit(v->sched, &spec, core_now(v), NULL, err);
        if (r < 0)
            return r;
    }
    return 0;
}

/* A new view from one snapshot of the store (the standby's own store connection, which the
 * writer does not use until this replica leads). */
static int view_load(Replay *rp, View **ret, Error *err) {
    Server *s = rp->s;
    View *v = calloc(1, sizeof(*v));
    if (!v)
        return error_set(err, -ENOMEM, "out of memory");
    atomic_init(&v->refs, 1);
    Server *vs = &v->s;
    vs->cfg = s->cfg;
    vs->catalog = s->catalog;
    vs->store = s->store;
    vs->reader = s->reader; /* not used: authentication runs on the standby itself */
    vs->replay_view = true;
    pthread_rwlock_init(&vs->lock, NULL);
    pthread_mutex_init(&vs->reader_lock, NULL);
    events_init(&vs->events);
    if (!(vs->sched = sched_new(s->catalog))) {
        view_free(v);
        return error_set(err, -ENOMEM, "out of memory");
    }
    sched_set_time_scale(vs->sched, CORE_MS_PER_SECOND);
    sched_set_check_invariants(vs->sched, EINSORA_DEBUG_CHECKS);
    int r = store_pg_begin_snapshot(s->store, err);
    if (r >= 0) {
        r = state_load(vs, err);
        store_rollback(s->store);
    }
    if (r >= 0)
        r = queue_waiting(vs, err);
    if (r < 0) {
        view_free(v);
        return r;
    }
    *ret = v;
    return 0;
}

/* Wake the long-polls parked on the standby for the events the new view added. */
static void wake_longpolls(Server *s, View *v, uint64_t from) {
    EventLog *el = &v->s.events;
    pthread_mutex_lock(&el->lock);
    pthread_mutex_lock(&s->events.lock);
    if (s->events.on_publish)
        for (uint64_t seq = MAX(from, el->base) + 1; seq <= el->published; seq++)
            s->events.on_publish(s->events.on_publish_userdata, el->ev[seq - el->base - 1].user);
    pthread_mutex_unlock(&s->events.lock);
    pthread_mutex_unlock(&el->lock);
}

static int rebuild(Replay *rp, Error *err) {
    View *v = NULL;
    int r = view_load(rp, &v, err);
    if (r < 0)
        return r;
    uint64_t seq = events_last(&v->s.events);
    pthread_mutex_lock(&rp->lock);
    View *old = rp->current;
    rp->current = v;
    uint64_t before = atomic_exchange(&rp->applied, seq);
    note_known(rp, seq);
    if (seq >= atomic_load(&rp->known))
        atomic_store(&rp->behind_since, 0);
    pthread_cond_broadcast(&rp->cond);
    pthread_mutex_unlock(&rp->lock);
    view_unref(old);
    if (seq > before)
        wake_longpolls(rp->s, v, before);
    atomic_fetch_add(&rp->rebuilds, 1);
    return 0;
}

/* ---- following ---- */

static void listen_close(Replay *rp) {
    PQfinish(rp->listen);
    rp->listen = NULL;
}

/* (Re)open the LISTEN session; true when it was opened now (notifications may have been
 * missed meanwhile: look at the table). */
static bool listen_ensure(Replay *rp) {
    if (rp->listen && PQstatus(rp->listen) == CONNECTION_OK)
        return false;
    listen_close(rp);
    if (mono_ms() < rp->listen_retry_ms)
        return false;
    rp->listen_retry_ms = mono_ms() + rp->poll_ms;
    PGconn *c = NULL;
    if (store_pg_connect(rp->s->cfg.state_path, &c, NULL) < 0)
        return false;
    PGresult *res = PQexec(c, "LISTEN " REPLAY_CHANNEL);
    bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    PQclear(res);
    if (!ok) {
        PQfinish(c);
        return false;
    }
    PQsetnonblocking(c, 1);
    rp->listen = c;
    return true;
}

/* Take the notifications that arrived. */
static void listen_drain(Replay *rp) {
    if (!rp->listen)
        return;
    if (!PQconsumeInput(rp->listen)) {
        listen_close(rp); /* reopened at the next turn; the table is polled meanwhile */
        return;
    }
    PGnotify *n;
    while ((n = PQnotifies(rp->listen))) {
        note_known(rp, strtoull(n->extra, NULL, 10));
        PQfreemem(n);
    }
}

static void *replay_main(void *userdata) {
    Replay *rp = userdata;
    Server *s = rp->s;
    uint64_t next_poll = 0, next_rebuild = 0;
    bool failing = false; /* said once per outage, not at every retry */
    while (!atomic_load(&rp->stop)) {
        if (listen_ensure(rp))
            next_poll = 0;
        uint64_t now = mono_ms();
        if (now >= next_poll) {
            uint64_t last = 0;
            if (store_pg_last_seq(s->store, &last, NULL) >= 0)
                note_known(rp, last);
            next_poll = now + rp->poll_ms;
        }
        bool due = !rp->current || atomic_load(&rp->known) > atomic_load(&rp->applied);
        if (due && now >= next_rebuild) {
            Error err = {0};
            uint64_t t0 = mono_ms();
            if (rebuild(rp, &err) < 0) {
                if (s->cfg.log && !failing)
                    fprintf(s->cfg.log, "einsora: standby replay: %s\n", error_message(&err));
                failing = true;
                next_rebuild = mono_ms() + rp->poll_ms; /* PostgreSQL away: retry later */
            } else { /* at most a quarter of a core on rebuilds, whatever the write rate */
                failing = false;
                next_rebuild = mono_ms() + MIN(3 * (mono_ms() - t0), rp->poll_ms);
            }
            continue;
        }
        uint64_t until = MIN(next_poll, due ? next_rebuild : UINT64_MAX);
        struct pollfd p[2] = {{.fd = rp->wake_fd, .events = POLLIN},
                              {.fd = rp->listen ? PQsocket(rp->listen) : -1, .events = POLLIN}};
        (void)poll(p, 2, until > now ? (int)MIN(until - now, 1000u) : 0);
        if (p[0].revents & POLLIN) {
            uint64_t x;
            (void)!read(rp->wake_fd, &x, sizeof(x));
        }
        listen_drain(rp);
    }
    return NULL;
}

static void replay_free_now(Replay *rp) {
    view_unref(rp->current);
    close(rp->wake_fd);
    pthread_cond_destroy(&rp->cond);
    pthread_mutex_destroy(&rp->lock);
    free(rp);
}

static void wake(Replay *rp) {
    uint64_t one = 1;
    (void)!write(rp->wake_fd, &one, sizeof(one));
}

int replay_start(Server *s, Error *err) {
    if (!s->leader || s->replay)
        return 0;
    Replay *rp = calloc(1, sizeof(*rp));
    if (!rp)
        return error_set(err, -ENOMEM, "out of memory");
    rp->s = s;
    rp->poll_ms = MAX((s->cfg.lease_ms ? s->cfg.lease_ms : LEADER_LEASE_MS_DEFAULT) / 2, 20u);
    rp->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (rp->wake_fd < 0) {
        free(rp);
        return error_set(err, -errno, "cannot make an eventfd for the replay: %m");
    }
    pthread_mutex_init(&rp->lock, NULL);
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&rp->cond, &a);
    pthread_condattr_destroy(&a);
    rp->running = true; /* before readers can see it: they wait for its first view */
    int r = pthread_create(&rp->thread, NULL, replay_main, rp);
    if (r != 0) {
        rp->running = false;
        replay_free_now(rp);
        return error_set(err, -r, "cannot start the replay thread");
    }
    s->replay = rp;
    pthread_setname_np(rp->thread, "einsora-replay");
    return 0;
}

void replay_stop(Server *s) {
    Replay *rp = s->replay;
    if (!rp || !rp->running)
        return;
    atomic_store(&rp->stop, true);
    wake(rp);
    pthread_join(rp->thread, NULL);
    listen_close(rp);
    /* Readers waiting for a sequence give up at once: the replay goes no further. */
    pthread_mutex_lock(&rp->lock);
    rp->running = false;
    pthread_cond_broadcast(&rp->cond);
    pthread_mutex_unlock(&rp->lock);
}

void replay_drop_view(Server *s) {
    Replay *rp = s->replay;
    if (!rp)
        return;
    pthread_mutex_lock(&rp->lock);
    View *v = rp->current;
    rp->current = NULL;
    pthread_mutex_unlock(&rp->lock);
    view_unref(v); /* a read still on it frees it when done */
}

void replay_free(Server *s) {
    Replay *rp = s->replay;
    if (!rp)
        return;
    replay_stop(s);
    replay_free_now(rp);
    s->replay = NULL;
}

/* ---- reads ---- */

static bool served_route(int id) {
    switch (id) {
    case R_CLASSES:
    case R_NODES_LIST:
    case R_NODE_SHOW:
    case R_CAPACITY:
    case R_REQUESTS_LIST:
    case R_REQUEST_SHOW:
    case R_EVENTS:
    case R_INVARIANTS:
    case R_TENANTS_TRUSTED:
    case R_WHOAMI:
        return true;
    default:
        return false;
    }
}

bool replay_serves(const HttpCtx *c) {
    RouteMatch m;
    return c->s->replay && STREQ(c->method, "GET") &&
           router_match(api_routes, api_n_routes, c->method, c->path, &m) == 0 &&
           served_route(m.route->id);
}

bool replay_enter(HttpCtx *c) {
    Server *s = c->s;
    if (!is_standby(s) || !c->match.route || !served_route(c->match.route->id))
        return true;
    Replay *rp = s->replay;
    /* Every commit made before this read: the store's last sequence now. PostgreSQL away:
     * no leader can commit either, and the last replayed state is the newest there is. */
    uint64_t need = 0;
    pthread_mutex_lock(&s->reader_lock);
    int r = store_pg_last_seq(s->reader, &need, NULL);
    pthread_mutex_unlock(&s->reader_lock);
    if (r < 0)
        need = 0;
    else
        note_known(rp, need);
    if (atomic_load(&rp->applied) < need)
        wake(rp); /* a NOTIFY may still be on its way: the replay need not wait for it */
    struct timespec deadline = timespec_after_ms(CLOCK_MONOTONIC, rp->poll_ms);
    View *v = NULL;
    pthread_mutex_lock(&rp->lock);
    while ((!rp->current || atomic_load(&rp->applied) < need) && rp->running &&
           pthread_cond_timedwait(&rp->cond, &rp->lock, &deadline) == 0)
        ;
    if (rp->current && atomic_load(&rp->applied) >= need) {
        v = rp->current;
        atomic_fetch_add(&v->refs, 1);
    }
    pthread_mutex_unlock(&rp->lock);
    if (!v) {
        /* Too far behind to answer as the leader would: the leader answers. */
        json_decref(c->json);
        c->json = NULL;
        leader_redirect(c);
        return false;
    }
    atomic_fetch_add(&rp->reads, 1);
    c->s = &v->s;
    return true;
}

void replay_leave(HttpCtx *c, Server *home) {
    if (c->s == home)
        return;
    view_unref((View *)c->s);
    c->s = home;
}

uint64_t replay_seen(Server *s) {
    return is_standby(s) ? atomic_load(&s->replay->applied) : events_last(&s->events);
}

static void lag(Server *s, uint64_t *applied, uint64_t *events, double *seconds) {
    Replay *rp = s->replay;
    if (!is_standby(s)) {
        *applied = events_last(&s->events);
        *events = 0;
        *seconds = 0;
        return;
    }
    *applied = atomic_load(&rp->applied);
    uint64_t known = atomic_load(&rp->known);
    *events = known > *applied ? known - *applied : 0;
    int64_t since = atomic_load(&rp->behind_since);
    *seconds = *events && since ? (double)MAX(server_now_ms() - since, 0) / 1000.0 : 0;
}

void replay_metrics(Server *s, StrBuf *b) {
    uint64_t applied, events;
    double seconds;
    lag(s, &applied, &events, &seconds);
    strbuf_printf(b,
                  "# HELP einsora_replay_applied_seq The last event sequence this replica's "
                  "state holds (a standby: its replay).\n"
                  "# TYPE einsora_replay_applied_seq gauge\neinsora_replay_applied_seq %" PRIu64
                  "\n",
                  applied);
    strbuf_printf(b,
                  "# HELP einsora_replay_lag_events Committed events a standby has not "
                  "applied yet (0 on the leader).\n"
                  "# TYPE einsora_replay_lag_events gauge\neinsora_replay_lag_events %" PRIu64 "\n",
                  events);
    strbuf_printf(b,
                  "# HELP einsora_replay_lag_seconds How long a standby has been behind: "
                  "since it first knew of a commit it had not applied (0 when caught up).\n"
                  "# TYPE einsora_replay_lag_seconds gauge\neinsora_replay_lag_seconds %.3f\n",
                  seconds);
    strbuf_printf(b,
                  "# HELP einsora_replay_rebuilds_total Views a standby loaded from the "
                  "store.\n# TYPE einsora_replay_rebuilds_total counter\n"
                  "einsora_replay_rebuilds_total %" PRIu64 "\n",
                  s->replay ? atomic_load(&s->replay->rebuilds) : 0);
    strbuf_printf(b,
                  "# HELP einsora_replay_reads_total Reads a standby answered from its "
                  "replay.\n# TYPE einsora_replay_reads_total counter\n"
                  "einsora_replay_reads_total %" PRIu64 "\n",
                  s->replay ? atomic_load(&s->replay->reads) : 0);
    if (is_standby(s)) /* the leader's full metrics have it too */
        strbuf_printf(b,
                      "# HELP einsora_parked_long_polls Event long-polls waiting.\n"
                      "# TYPE einsora_parked_long_polls gauge\neinsora_parked_long_polls %zu\n",
                      s->longpoll ? longpoll_count(s->longpoll) : 0);
}

void replay_readyz(Server *s, json_t *j) {
    uint64_t applied, events;
    double seconds;
    lag(s, &applied, &events, &seconds);
    json_object_set_new(j, "applied", json_integer((json_int_t)applied));
    if (is_standby(s))
        json_object_set_new(j, "lag_events", json_integer((json_int_t)events));
}
