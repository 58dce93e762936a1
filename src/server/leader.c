/* leader.c: the election among replicas on PostgreSQL (a fenced lease) and a standby's answers. */
#include "leader.h"

#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "replay.h"
#include "store/store-pg.h"
#include "util/macro.h"

enum { STANDBY, LEADING };

struct Leader {
    Server *s;
    char holder[96]; /* this process, unique among replicas */
    char url[128];   /* where this replica is reached, as other replicas advertise it */
    unsigned lease_ms;
    PGconn *conn; /* the lease's own session */
    pthread_t thread;
    _Atomic int role;
    _Atomic uint64_t epoch;      /* the epoch this replica leads under (0: never led) */
    _Atomic uint64_t seen_epoch; /* the newest epoch seen in the lease row */
    _Atomic uint64_t takeovers;  /* elections this replica won */
    _Atomic uint64_t failovers;  /* of which from an earlier leader (epoch > 1) */
    /* When the lease was last taken or renewed (mono_ms, sent time): past a lease from it,
     * another replica may lead, so this one answers nothing as the leader (a process paused
     * longer than a lease wakes up believing it leads until its next renewal fails). */
    _Atomic uint64_t renewed_ms;
    /* The last renewal could not reach PostgreSQL: nothing commits until it answers again
     * (or the lease ends and this replica steps down), which /readyz says. */
    atomic_bool store_away;
    atomic_bool stop;
    bool running; /* the thread was started */
    bool writer_started;
    pthread_mutex_t lock;
    char leader_url[128]; /* the current leader's, from the lease row; "" when unknown */
};

static uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(unsigned ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Stop the server with a sentence (the main loop sees fatal and exits). */
static void step_down(Leader *l, const char *why) {
    Server *s = l->s;
    if (!atomic_load(&s->fatal)) {
        error_set(&s->fatal_err, -ESTALE, "%s", why);
        atomic_store(&s->fatal, true);
    }
    atomic_store(&l->role, STANDBY);
}

/* One statement with text parameters; the result's rows, or -1 on failure. It never waits
 * longer than a lease (nor past a stop): a PostgreSQL that does not answer is dropped and
 * connected to again, so that an election never hangs on one session. */
static int lease_exec(Leader *l, const char *sql, int n, const char *const *params, char *out,
                      size_t out_size) {
    if (!l->conn || !PQsendQueryParams(l->conn, sql, n, NULL, params, NULL, NULL, 0))
        return -1;
    uint64_t end = mono_ms() + l->lease_ms;
    PGresult *res, *last = NULL;
    bool dead = false;
    for (;;) {
        while (!dead && PQisBusy(l->conn)) {
            uint64_t now = mono_ms();
            if (now >= end || atomic_load(&l->stop)) {
                dead = true;
                break;
            }
            struct pollfd p = {.fd = PQsocket(l->conn), .events = POLLIN};
            (void)poll(&p, 1, (int)MIN(end - now, 20u));
            if (!PQconsumeInput(l->conn))
                break; /* the connection failed: PQgetResult reports it */
        }
        if (dead || !(res = PQgetResult(l->conn)))
            break;
        PQclear(last);
        last = res;
    }
    int rows = -1;
    if (!dead && PQresultStatus(last) == PGRES_TUPLES_OK) {
        rows = PQntuples(last);
        if (out && rows > 0)
            snprintf(out, out_size, "%s", PQgetvalue(last, 0, 0));
    }
    PQclear(last);
    if (dead) {
        PQfinish(l->conn);
        l->conn = NULL;
    }
    return rows;
}

static bool ensure_conn(Leader *l) {
    if (l->conn && PQstatus(l->conn) == CONNECTION_OK)
        return true;
    PQfinish(l->conn);
    l->conn = NULL;
    PGconn *c = NULL;
    if (store_pg_connect(l->s->cfg.state_path, &c, NULL) < 0)
        return false;
    l->conn = c;
    /* A takeover waits for a transaction of the old leader that holds the lease row; never
     * for longer than a lease (that transaction is killed by then, see store_pg_set_fence). */
    char sql[96];
    snprintf(sql, sizeof(sql), "SET lock_timeout = %u", l->lease_ms);
    PQclear(PQexec(l->conn, sql));
    return true;
}

/* Take the lease if it expired; on success *ret_epoch is the new epoch. */
static bool try_acquire(Leader *l, uint64_t *ret_epoch) {
    char lease[24], epoch[24] = "";
    snprintf(lease, sizeof(lease), "%u milliseconds", l->lease_ms);
    const char *p[] = {l->holder, l->url, lease};
    /* FOR UPDATE first: it waits for every write transaction of the old leader in flight (each
     * holds the row FOR KEY SHARE, store-pg.c's fence), which a plain UPDATE would not. The
     * UPDATE then sees the row as it is after them. */
    int n = lease_exec(l,
                       "WITH held AS (SELECT id FROM einsora_leader WHERE id = 1 FOR UPDATE) "
                       "UPDATE einsora_leader SET epoch = epoch + 1, holder = $1, url = $2, "
                       "expires_at = clock_timestamp() + $3::interval FROM held "
                       "WHERE einsora_leader.id = held.id AND expires_at < clock_timestamp() "
                       "RETURNING epoch",
                       3, p, epoch, sizeof(epoch));
    if (n != 1) {
        char row[200] = "";
        /* An expired lease names no leader: clients are told to retry, not sent to it. */
        if (lease_exec(l,
                       "SELECT epoch || ' ' || CASE WHEN expires_at > clock_timestamp() "
                       "THEN coalesce(url, '') ELSE '' END FROM einsora_leader WHERE id = 1",
                       0, NULL, row, sizeof(row)) == 1) {
            char *sp = strchr(row, ' ');
            pthread_mutex_lock(&l->lock);
            snprintf(l->leader_url, sizeof(l->leader_url), "%s", sp ? sp + 1 : "");
            pthread_mutex_unlock(&l->lock);
            /* After the URL: a standby whose /readyz shows an epoch knows its leader. */
            atomic_store(&l->seen_epoch, strtoull(row, NULL, 10));
        }
        return false;
    }
    *ret_epoch = strtoull(epoch, NULL, 10);
    return true;
}

/* Keep the lease; 1 renewed, 0 deposed (another epoch holds it), -1 PostgreSQL unreachable. */
static int renew(Leader *l) {
    char lease[24], epoch[24];
    snprintf(lease, sizeof(lease), "%u milliseconds", l->lease_ms);
    snprintf(epoch, sizeof(epoch), "%" PRIu64, atomic_load(&l->epoch));
    const char *p[] = {epoch, lease};
    int n = lease_exec(l,
                       "UPDATE einsora_leader SET expires_at = clock_timestamp() + $2::interval "
                       "WHERE id = 1 AND epoch = $1 RETURNING epoch",
                       2, p, NULL, 0);
    return n < 0 ? -1 : n;
}

/* Loading a large state may take longer than a lease: keep it meanwhile (on the lease's own
 * session, which the load does not use). */
typedef struct Keeper {
    Leader *l;
    atomic_bool done;
} Keeper;

static void *keep_lease(void *userdata) {
    Keeper *k = userdata;
    while (!atomic_load(&k->done)) {
        for (unsigned slept = 0; slept < k->l->lease_ms / 3 && !atomic_load(&k->done); slept += 10)
            sleep_ms(10);
        uint64_t sent = mono_ms();
        if (!atomic_load(&k->done) && ensure_conn(k->l) && renew(k->l) > 0)
            atomic_store(&k->l->renewed_ms, sent); /* a failure shows at the fenced commit */
    }
    return NULL;
}

/* Won the election: fence, load, check, serve. */
static int take_over(Leader *l, uint64_t epoch) {
    Server *s = l->s;
    Error err = {0};
    /* The lease is kept from the moment it is won, on this thread's own connection: ending
     * the replay (below) may wait for a view it is loading, and a lease that lapsed meanwhile
     * let the next standby depose this one before it ever led. */
    atomic_store(&l->epoch, epoch);
    Keeper keeper = {.l = l};
    pthread_t keeper_thread;
    bool keeping = pthread_create(&keeper_thread, NULL, keep_lease, &keeper) == 0;
    /* The replay ends here (its last view answers reads until this replica leads); the full
     * load and the invariant check replace it, on the store connection it used. */
    replay_stop(s);
    /* Fenced by the epoch from now on, but with no idle-in-transaction limit for the load: it
     * reads the whole state in one transaction and rebuilds the core between its statements,
     * which on a large state (or a busy machine) takes longer than a lease; PostgreSQL would
     * end the session then, and no replica could ever take over. The load writes nothing
     * another replica waits for, and the commit's epoch check still refuses a deposed one. */
    store_pg_set_fence(s->store, epoch, 0);
    int r = state_load(s, &err);
    if (r >= 0) /* a paused leader's open transaction is ended within a lease again */
        store_pg_set_fence(s->store, epoch, l->lease_ms);
    atomic_store(&keeper.done, true);
    if (keeping)
        pthread_join(keeper_thread, NULL);
    if (r < 0) {
        if (!atomic_load(&s->fatal)) {
            error_set(&s->fatal_err, r, "refusing to lead (epoch %" PRIu64 "): %s", epoch,
                      error_message(&err));
            atomic_store(&s->fatal, true);
        }
        return r;
    }
    if ((r = writer_start(s)) < 0) {
        error_set(&s->fatal_err, r, "cannot start the writer thread");
        atomic_store(&s->fatal, true);
        return r;
    }
    l->writer_started = true;
    atomic_store(&l->seen_epoch, epoch);
    atomic_fetch_add(&l->takeovers, 1);
    if (epoch > 1)
        atomic_fetch_add(&l->failovers, 1);
    pthread_mutex_lock(&l->lock);
    snprintf(l->leader_url, sizeof(l->leader_url), "%s", l->url);
    pthread_mutex_unlock(&l->lock);
    atomic_store(&l->role, LEADING);
    replay_drop_view(s);
    if (s->cfg.log)
        fprintf(s->cfg.log, "einsora: leading (epoch %" PRIu64 ")\n", epoch);
    return 0;
}

static void *leader_main(void *userdata) {
    Leader *l = userdata;
    Server *s = l->s;
    uint64_t renewed_ms = 0; /* when the last renewal was sent that succeeded */
    while (!atomic_load(&l->stop) && !atomic_load(&s->fatal)) {
        unsigned poll =
                atomic_load(&l->role) == LEADING ? l->lease_ms / 3 : MAX(l->lease_ms / 6, 20u);
        uint64_t sent = mono_ms();
        bool up = ensure_conn(l);
        if (atomic_load(&l->role) == STANDBY) {
            uint64_t epoch;
            if (up && try_acquire(l, &epoch)) {
                atomic_store(&l->renewed_ms, sent);
                if (take_over(l, epoch) < 0)
                    break;
                renewed_ms = atomic_load(&l->renewed_ms); /* the keeper's, during the load */
                continue;
            }
        } else {
            int r = up ? renew(l) : -1;
            atomic_store(&l->store_away, r < 0);
            if (r > 0) {
                renewed_ms = sent;
                atomic_store(&l->renewed_ms, sent);
            } else if (r == 0 || mono_ms() - renewed_ms >= l->lease_ms) {
                /* Deposed, or the lease may be someone else's by now: stop acting on it. */
                char why[200];
                snprintf(why, sizeof(why),
                         r == 0 ? "Another replica took over from epoch %" PRIu64 "; stepping down."
                                : "PostgreSQL was unreachable for a whole lease (epoch %" PRIu64
                                  "); stepping down.",
                         atomic_load(&l->epoch));
                step_down(l, why);
                break;
            }
        }
        for (unsigned slept = 0; slept < poll && !atomic_load(&l->stop); slept += 20)
            sleep_ms(MIN(20u, poll - slept));
    }
    return NULL;
}

int leader_init(Server *s, Error *err) {
    Leader *l = calloc(1, sizeof(*l));
    if (!l)
        return error_set(err, -ENOMEM, "out of memory");
    l->s = s;
    l->lease_ms = s->cfg.lease_ms ? s->cfg.lease_ms : LEADER_LEASE_MS_DEFAULT;
    pthread_mutex_init(&l->lock, NULL);
    s->leader = l;
    return 0;
}

int leader_start(Server *s, uint16_t port, Error *err) {
    Leader *l = s->leader;
    char host[64] = "";
    gethostname(host, sizeof(host) - 1);
    snprintf(l->holder, sizeof(l->holder), "%s:%d:%u", host, (int)getpid(), port);
    if (s->cfg.advertise_url)
        snprintf(l->url, sizeof(l->url), "%s", s->cfg.advertise_url);
    else {
        /* The --listen address, unless it is a wildcard (0.0.0.0, [::]), which no client can
         * reach: then this machine's name. https when it serves TLS. */
        const char *listen = s->cfg.listen ? s->cfg.listen : SERVER_DEFAULT_LISTEN;
        const char *colon = strrchr(listen, ':');
        int n = (int)(colon ? colon - listen : 0);
        bool wildcard = n == 0 || (n == 7 && !strncmp(listen, "0.0.0.0", 7)) ||
                        (n == 4 && !strncmp(listen, "[::]", 4)) ||
                        (n == 2 && !strncmp(listen, "::", 2));
        const char *scheme = s->cfg.tls_cert_path ? "https" : "http";
        if (wildcard && host[0])
            snprintf(l->url, sizeof(l->url), "%s://%s:%u", scheme, host, port);
        else
            snprintf(l->url, sizeof(l->url), "%s://%.*s:%u", scheme, n, listen, port);
    }
    int r = replay_start(s, err);
    if (r < 0)
        return r;
    r = pthread_create(&l->thread, NULL, leader_main, l);
    if (r != 0)
        return error_set(err, -r, "cannot start the election thread");
    l->running = true;
    pthread_setname_np(l->thread, "einsora-leader");
    return 0;
}

void leader_stop(Server *s) {
    Leader *l = s->leader;
    if (!l)
        return;
    atomic_store(&l->stop, true);
    if (l->running)
        pthread_join(l->thread, NULL);
    if (l->writer_started)
        writer_stop(s);
    replay_free(s);
    /* Hand the lease back at once on a clean stop, so a standby need not wait it out. */
    if (atomic_load(&l->role) == LEADING && l->conn && PQstatus(l->conn) == CONNECTION_OK) {
        char epoch[24];
        snprintf(epoch, sizeof(epoch), "%" PRIu64, atomic_load(&l->epoch));
        const char *p[] = {epoch};
        PQclear(PQexecParams(
                l->conn,
                "UPDATE einsora_leader SET expires_at = 'epoch' WHERE id = 1 AND epoch = $1", 1,
                NULL, p, NULL, NULL, 0));
    }
    PQfinish(l->conn);
    pthread_mutex_destroy(&l->lock);
    free(l);
    s->leader = NULL;
}

bool server_is_leader(Server *s) {
    if (!s->leader)
        return true;
    Leader *l = s->leader;
    return atomic_load(&l->role) == LEADING &&
           mono_ms() - atomic_load(&l->renewed_ms) < (uint64_t)l->lease_ms;
}

static enum MHD_Result append_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value) {
    StrBuf *b = cls;
    static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~";
    strbuf_printf(b, "%c", strchr(b->data ? b->data : "", '?') ? '&' : '?');
    for (const char *parts[] = {key, value}, **p = parts; p < parts + 2; p++) {
        if (p == parts + 1) {
            if (!value)
                break;
            strbuf_printf(b, "=");
        }
        for (const char *ch = *p; *ch; ch++)
            if (strchr(safe, *ch))
                strbuf_printf(b, "%c", *ch);
            else
                strbuf_printf(b, "%%%02X", (unsigned char)*ch);
    }
    return MHD_YES;
}

bool leader_gate(HttpCtx *c) {
    Server *s = c->s;
    if (server_is_leader(s) || STREQ(c->path, "/healthz") || STREQ(c->path, "/readyz") ||
        STREQ(c->path, "/metrics") || replay_serves(c))
        return false;
    leader_redirect(c);
    return true;
}

void leader_redirect(HttpCtx *c) {
    Server *s = c->s;
    char url[128];
    pthread_mutex_lock(&s->leader->lock);
    snprintf(url, sizeof(url), "%s", s->leader->leader_url);
    pthread_mutex_unlock(&s->leader->lock);
    /* Never to itself: a replica restarted on the leader's address before its lease ran out. */
    if (!url[0] || STREQ(url, s->leader->url) || atomic_load(&s->fatal)) {
        /* "standby": nothing was done, so a client may send even a change elsewhere. */
        api_error(c, 503, "standby",
                  "This replica is a standby and no leader is known yet; "
                  "retry shortly or at another replica.");
        return;
    }
    /* 307 keeps the method and body: the client repeats the same call at the leader. */
    StrBuf loc = {0};
    strbuf_printf(&loc, "%s%s", url, c->path);
    if (c->conn)
        MHD_get_connection_values(c->conn, MHD_GET_ARGUMENT_KIND, append_arg, &loc);
    if (!strbuf_cstr(&loc)) {
        strbuf_done(&loc);
        api_error(c, 500, "internal", "Out of memory.");
        return;
    }
    api_error(c, 307, "standby", "This replica is a standby; the leader is %s.", url);
    c->redirect = loc.data; /* freed after sending */
}

bool leader_store_away(Server *s) {
    return s->leader && atomic_load(&s->leader->store_away);
}

void leader_readyz(Server *s, json_t *j) {
    Leader *l = s->leader;
    json_object_set_new(j, "role", json_string(server_is_leader(s) ? "leader" : "standby"));
    if (l)
        json_object_set_new(j, "epoch",
                            json_integer((json_int_t)(atomic_load(&l->role) == LEADING
                                                              ? atomic_load(&l->epoch)
                                                              : atomic_load(&l->seen_epoch))));
    replay_readyz(s, j);
}

void leader_metrics(Server *s, StrBuf *b) {
    Leader *l = s->leader;
    bool leading = server_is_leader(s);
    strbuf_printf(b,
                  "# HELP einsora_leader Whether this replica leads (1) or stands by (0).\n"
                  "# TYPE einsora_leader gauge\neinsora_leader %d\n",
                  leading ? 1 : 0);
    strbuf_printf(b,
                  "# HELP einsora_leader_epoch The leader's epoch (a standby: the newest seen).\n"
                  "# TYPE einsora_leader_epoch gauge\neinsora_leader_epoch %" PRIu64 "\n",
                  !l        ? 0
                  : leading ? atomic_load(&l->epoch)
                            : atomic_load(&l->seen_epoch));
    strbuf_printf(b,
                  "# HELP einsora_leader_takeovers_total Elections this replica won.\n"
                  "# TYPE einsora_leader_takeovers_total counter\n"
                  "einsora_leader_takeovers_total %" PRIu64 "\n",
                  l ? atomic_load(&l->takeovers) : 0);
    strbuf_printf(b,
                  "# HELP einsora_leader_failovers_total Leaderships this replica took over "
                  "from an earlier leader.\n# TYPE einsora_leader_failovers_total counter\n"
                  "einsora_leader_failovers_total %" PRIu64 "\n",
                  l ? atomic_load(&l->failovers) : 0);
    if (l)
        replay_metrics(s, b);
}
