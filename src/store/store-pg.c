/* store-pg.c: the PostgreSQL backend of store.h (libpq), shared by several replicas.
 *
 * The same tables and numbered migrations as SQLite, in PostgreSQL's dialect. Two tables of
 * its own: einsora_meta (the schema version, PostgreSQL having no user_version, and the site
 * that owns the database) and einsora_leader (the lease and epoch of leader.c). A commit
 * returns once PostgreSQL has made it durable (synchronous_commit, its default); a
 * transaction that appended events notifies LISTENers on "einsora_events" at its commit. */
#include "store-backend.h"
#include "store-pg.h"

#include <errno.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/macro.h"
#include "util/strutil.h"

/* Migration i brings the database from version i to i+1; the same numbers as SQLite's. */
static const char *const migrations[] = {
        /* 1: the first schema */
        "CREATE TABLE tokens (hash TEXT PRIMARY KEY, \"user\" TEXT NOT NULL, role TEXT NOT NULL,"
        "  nodes TEXT);"
        "CREATE TABLE nodes (name TEXT PRIMARY KEY, doc TEXT NOT NULL);"
        "CREATE TABLE requests (id BIGINT PRIMARY KEY, \"user\" TEXT NOT NULL, idem_key TEXT,"
        "  state TEXT NOT NULL, doc TEXT NOT NULL);"
        "CREATE UNIQUE INDEX requests_idem ON requests(\"user\", idem_key) WHERE idem_key IS NOT "
        "NULL;"
        "CREATE TABLE events (seq BIGINT PRIMARY KEY, time_ms BIGINT NOT NULL,"
        "  actor TEXT NOT NULL, type TEXT NOT NULL, object TEXT NOT NULL, doc TEXT NOT NULL);",
        /* 2: the fleet's records (agents, mode switches in progress, work for agents) */
        "CREATE TABLE fleet (key TEXT PRIMARY KEY, doc TEXT NOT NULL);",
        /* 3: tokens that expire; NULL: never */
        "ALTER TABLE tokens ADD COLUMN expires_ms BIGINT;",
};
_Static_assert(ARRAY_SIZE(migrations) == STORE_SCHEMA_VERSION, "one migration per schema version");

/* Created before any migration, under the same lock, so replicas starting together agree. */
static const char bootstrap_sql[] =
        "CREATE TABLE IF NOT EXISTS einsora_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE IF NOT EXISTS einsora_leader (id INT PRIMARY KEY CHECK (id = 1),"
        "  epoch BIGINT NOT NULL, holder TEXT, url TEXT, expires_at TIMESTAMPTZ NOT NULL);"
        "INSERT INTO einsora_leader VALUES (1, 0, NULL, NULL, 'epoch') ON CONFLICT DO NOTHING;";

enum {
    STMT_FENCE,
    STMT_TOKEN_ADD,
    STMT_TOKEN_LOOKUP,
    STMT_NODE_PUT,
    STMT_NODE_DELETE,
    STMT_NODE_ALL,
    STMT_REQUEST_PUT,
    STMT_REQUEST_ALL,
    STMT_EVENT_APPEND,
    STMT_EVENT_AFTER,
    STMT_FLEET_PUT,
    STMT_FLEET_DELETE,
    STMT_FLEET_ALL,
    STMT_TOKEN_ALL,
    STMT_TOKEN_COUNT_PREFIX,
    STMT_TOKEN_DELETE_PREFIX,
    STMT_PRUNE_REQUESTS,
    STMT_PRUNE_EVENTS,
    STMT_REQUEST_FORGET_KEY,
    _STMT_MAX,
};

static const char *const stmt_sql[_STMT_MAX] = {
        /* FOR KEY SHARE: a standby taking over (which locks this row FOR UPDATE first, see
         * leader.c) waits for this transaction, and this transaction, started after the
         * takeover, finds a newer epoch. The leader's own renewal (a plain UPDATE of
         * expires_at, a no-key update) does not wait for it: a write transaction longer than a
         * lease -- a takeover's load of a long queue -- must not let the lease run out under
         * the leader that holds it (FOR SHARE did, and the next standby deposed it). */
        [STMT_FENCE] = "SELECT 1 FROM einsora_leader WHERE id = 1 AND epoch = $1 FOR KEY SHARE",
        [STMT_TOKEN_ADD] = "INSERT INTO tokens(hash, \"user\", role, nodes, expires_ms) "
                           "VALUES($1, $2, $3, $4, $5)",
        [STMT_TOKEN_LOOKUP] =
                "SELECT \"user\", role, nodes, expires_ms FROM tokens WHERE hash = $1",
        [STMT_NODE_PUT] = "INSERT INTO nodes(name, doc) VALUES($1, $2) "
                          "ON CONFLICT(name) DO UPDATE SET doc = excluded.doc",
        [STMT_NODE_DELETE] = "DELETE FROM nodes WHERE name = $1",
        [STMT_NODE_ALL] = "SELECT name, doc FROM nodes ORDER BY name",
        [STMT_REQUEST_PUT] = "INSERT INTO requests(id, \"user\", idem_key, state, doc) "
                             "VALUES($1, $2, $3, $4, $5) ON CONFLICT(id) DO UPDATE SET "
                             "state = excluded.state, doc = excluded.doc",
        [STMT_REQUEST_ALL] = "SELECT id, \"user\", idem_key, state, doc FROM requests ORDER BY id",
        [STMT_EVENT_APPEND] = "INSERT INTO events(seq, time_ms, actor, type, object, doc) "
                              "VALUES($1, $2, $3, $4, $5, $6)",
        [STMT_EVENT_AFTER] = "SELECT seq, time_ms, actor, type, object, doc FROM events "
                             "WHERE seq > $1 ORDER BY seq",
        [STMT_FLEET_PUT] = "INSERT INTO fleet(key, doc) VALUES($1, $2) "
                           "ON CONFLICT(key) DO UPDATE SET doc = excluded.doc",
        [STMT_FLEET_DELETE] = "DELETE FROM fleet WHERE key = $1",
        [STMT_FLEET_ALL] = "SELECT key, doc FROM fleet ORDER BY key",
        /* COLLATE "C": byte order, as SQLite sorts. */
        [STMT_TOKEN_ALL] = "SELECT hash, \"user\", role, nodes, expires_ms FROM tokens "
                           "ORDER BY \"user\" COLLATE \"C\", hash COLLATE \"C\"",
        [STMT_TOKEN_COUNT_PREFIX] = "SELECT count(*) FROM tokens WHERE left(hash, length($1)) = $1",
        [STMT_TOKEN_DELETE_PREFIX] = "DELETE FROM tokens WHERE left(hash, length($1)) = $1",
        /* Retention, as in SQLite: ended requests last updated before the cutoff (their
         * idempotency keys with them), never the newest row, whose id the next one follows. */
        [STMT_PRUNE_REQUESTS] = "DELETE FROM requests WHERE state IN ('released', 'cancelled', "
                                "'refused', 'ended') AND (doc::jsonb->>'updated_ms')::numeric < $1 "
                                "AND id < (SELECT max(id) FROM requests)",
        /* Events: a prefix of the feed (it stays gap-free), never the newest. */
        [STMT_PRUNE_EVENTS] = "DELETE FROM events WHERE seq <= (SELECT max(seq) FROM events "
                              "WHERE time_ms < $1) AND seq < (SELECT max(seq) FROM events)",
        [STMT_REQUEST_FORGET_KEY] = "UPDATE requests SET idem_key = NULL WHERE id = $1",
};

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 5000

struct PgStore {
    Store base;
    PGconn *conn;
    char *conninfo;
    char *where; /* "database D on H" for sentences (never the password) */
    bool in_tx;
    bool notify;        /* this transaction appended events */
    uint64_t last_seq;  /* the last event appended in this transaction */
    uint64_t fence;     /* the leader's epoch every transaction checks; 0: none */
    unsigned max_tx_ms; /* idle_in_transaction_session_timeout; 0: PostgreSQL's default */
    bool max_tx_set;    /* this session's timeout is set: a 0 must be said to lift it */
    unsigned backoff_ms;
    uint64_t retry_at_ms; /* no reconnection attempt before this (monotonic) */
};

static const StoreOps pg_ops;
typedef struct PgStore PgStore;
static int apply_session_settings(PgStore *s, Error *err);

static PgStore *pg_of(Store *base) {
    return (PgStore *)base;
}

static uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* libpq's messages end in a newline (and some go on with hints on more lines): keep the
 * first line, which says what happened. */
static const char *trim_msg(const char *msg, char *buf, size_t size) {
    snprintf(buf, size, "%s", msg ? msg : "");
    buf[strcspn(buf, "\n")] = 0;
    size_t n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = 0;
    return buf[0] ? buf : "unknown error";
}

/* Map a failed result (or a dead connection) to an errno and a sentence. */
static int pg_fail(PgStore *s, PGresult *res, Error *err, const char *what) {
    char buf[400];
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res && PQresultErrorMessage(res)[0] ? PQresultErrorMessage(res)
                                                          : PQerrorMessage(s->conn);
    int code = !s->conn || PQstatus(s->conn) != CONNECTION_OK ? -ENOTCONN
               : state && STREQ(state, "23505")               ? -EEXIST
               : state && strncmp(state, "53", 2) == 0        ? -ENOSPC
               : state && STREQ(state, "40001")               ? -EBUSY
                                                              : -EIO;
    if (code == -ENOTCONN)
        return error_set(err, code,
                         "state store: %s failed: the connection to PostgreSQL (%s) "
                         "is lost: %s",
                         what, s->where, trim_msg(msg, buf, sizeof(buf)));
    return error_set(err, code, "state store: %s failed: %s", what,
                     trim_msg(msg, buf, sizeof(buf)));
}

DEFINE_TRIVIAL_CLEANUP_FUNC(PGresult *, PQclear);

static int exec_cmd(PgStore *s, const char *sql, Error *err, const char *what) {
    _cleanup_(PQclearp) PGresult *res = PQexec(s->conn, sql);
    return PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK
                   ? 0
                   : pg_fail(s, res, err, what);
}

static int reconnect(PgStore *s, Error *err);

/* Run prepared statement i with text parameters; returns the result or NULL and a set err.
 * Outside a transaction (reads at startup, token lookups) a lost connection is reopened and
 * the statement tried once more. */
static PGresult *run(PgStore *s, int i, int n, const char *const *params, Error *err,
                     const char *what) {
    char name[16];
    snprintf(name, sizeof(name), "s%d", i);
    if (!s->in_tx && PQstatus(s->conn) != CONNECTION_OK)
        (void)reconnect(s, NULL);
    _cleanup_(PQclearp) PGresult *res = PQexecPrepared(s->conn, name, n, params, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(res);
    if (!s->in_tx && st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK &&
        PQstatus(s->conn) != CONNECTION_OK) {
        s->retry_at_ms = 0;
        if (reconnect(s, NULL) >= 0) {
            PQclear(res);
            res = PQexecPrepared(s->conn, name, n, params, NULL, NULL, 0);
            st = PQresultStatus(res);
        }
    }
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
        return TAKE_PTR(res);
    pg_fail(s, res, err, what);
    return NULL;
}

static int run_cmd(PgStore *s, int i, int n, const char *const *params, Error *err,
                   const char *what) {
    _cleanup_(PQclearp) PGresult *res = run(s, i, n, params, err, what);
    if (!res)
        return err && err->code ? err->code : -EIO;
    return 0;
}

static int prepare_all(PgStore *s, Error *err) {
    for (int i = 0; i < _STMT_MAX; i++) {
        char name[16];
        snprintf(name, sizeof(name), "s%d", i);
        _cleanup_(PQclearp) PGresult *res = PQprepare(s->conn, name, stmt_sql[i], 0, NULL);
        if (PQresultStatus(res) != PGRES_COMMAND_OK)
            return pg_fail(s, res, err, "preparing a statement");
    }
    return 0;
}

static void ignore_notice(void *userdata, const char *message) {
}

int store_pg_connect(const char *conninfo, PGconn **ret, Error *err) {
    char *perr = NULL, buf[400];
    PQconninfoOption *opts = PQconninfoParse(conninfo, &perr);
    if (!opts) {
        int r = error_set(err, -EINVAL, "bad PostgreSQL connection string: %s",
                          trim_msg(perr ? perr : "out of memory", buf, sizeof(buf)));
        PQfreemem(perr);
        return r;
    }
    PQconninfoFree(opts);
    /* Ours first: what the operator's conninfo says wins. */
    const char *const keys[] = {"connect_timeout", "application_name", "dbname", NULL};
    const char *const values[] = {"5", "einsora", conninfo, NULL};
    PGconn *c = PQconnectdbParams(keys, values, 1);
    if (!c)
        return error_set(err, -ENOMEM, "out of memory");
    if (PQstatus(c) != CONNECTION_OK) {
        int r = error_set(err, -ECONNREFUSED, "cannot connect to PostgreSQL: %s",
                          trim_msg(PQerrorMessage(c), buf, sizeof(buf)));
        PQfinish(c);
        return r;
    }
    /* Sentences and notices stay out of stderr: a library never prints. */
    PQsetNoticeProcessor(c, ignore_notice, NULL);
    *ret = c;
    return 0;
}

static void pg_close(Store *base) {
    PgStore *s = pg_of(base);
    PQfinish(s->conn);
    free(s->conninfo);
    free(s->where);
    free(s);
}

static int read_meta(PgStore *s, const char *key, char **ret, Error *err) {
    const char *p[] = {key};
    _cleanup_(PQclearp) PGresult *res = PQexecParams(
            s->conn, "SELECT value FROM einsora_meta WHERE key = $1", 1, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        return pg_fail(s, res, err, "reading the schema version");
    char *v = PQntuples(res) > 0 ? strdup(PQgetvalue(res, 0, 0)) : NULL;
    if (PQntuples(res) > 0 && !v)
        return error_set(err, -ENOMEM, "out of memory");
    *ret = v;
    return 0;
}

static int write_meta(PgStore *s, const char *key, const char *value, Error *err) {
    const char *p[] = {key, value};
    _cleanup_(PQclearp) PGresult *res =
            PQexecParams(s->conn,
                         "INSERT INTO einsora_meta VALUES ($1, $2) "
                         "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                         2, NULL, p, NULL, NULL, 0);
    return PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : pg_fail(s, res, err, "migrating");
}

/* In one transaction under an advisory lock (replicas may start together): claim the
 * database for site, refuse a newer schema, apply the missing migrations. */
static int migrate(PgStore *s, const char *site, Error *err) {
    _cleanup_free_ char *version = NULL, *owner = NULL;
    int r = exec_cmd(s, "BEGIN", err, "migrating");
    if (r < 0)
        return r;
    if ((r = exec_cmd(s, "SELECT pg_advisory_xact_lock(4542239516823795045)", err, "migrating")) <
                0 ||
        (r = exec_cmd(s, "SET LOCAL client_min_messages = warning", err, "migrating")) < 0 ||
        (r = exec_cmd(s, bootstrap_sql, err, "migrating")) < 0 ||
        (r = read_meta(s, "site", &owner, err)) < 0 ||
        (r = read_meta(s, "schema_version", &version, err)) < 0)
        goto fail;
    if (site && owner && STRNEQ(owner, site)) {
        r = error_set(err, -EEXIST,
                      "PostgreSQL %s belongs to the Einsora site '%s', not '%s': give each site a "
                      "database of its own",
                      s->where, owner, site);
        goto fail;
    }
    if (site && !owner && (r = write_meta(s, "site", site, err)) < 0)
        goto fail;
    uint64_t parsed = 0;
    if (version && parse_decimal_uint64(version, INT32_MAX, &parsed) < 0) {
        /* Read as 0 it would run the first migration again over the tables it made. */
        r = error_set(err, -EPROTO,
                      "PostgreSQL %s has schema version '%.40s' in einsora_meta, which is no "
                      "number: the database's Einsora schema is damaged; restore it from a backup",
                      s->where, version);
        goto fail;
    }
    int v = (int)parsed;
    if (v > STORE_SCHEMA_VERSION) {
        r = error_set(err, -EPROTO,
                      "PostgreSQL %s has schema version %d, newer than this einsora knows (%d)",
                      s->where, v, STORE_SCHEMA_VERSION);
        goto fail;
    }
    for (; v < STORE_SCHEMA_VERSION; v++) {
        char next[16];
        snprintf(next, sizeof(next), "%d", v + 1);
        if ((r = exec_cmd(s, migrations[v], err, "migrating")) < 0 ||
            (r = write_meta(s, "schema_version", next, err)) < 0)
            goto fail;
    }
    if ((r = exec_cmd(s, "COMMIT", err, "migrating")) < 0)
        return r;
    s->base.version = (int)v;
    return 0;
fail:
    (void)exec_cmd(s, "ROLLBACK", NULL, "rolling back");
    return r;
}

int store_pg_open(const char *conninfo, const char *site, Store **ret, Error *err) {
    PgStore *s = calloc(1, sizeof(*s));
    if (!s)
        return error_set(err, -ENOMEM, "out of memory");
    s->base.ops = &pg_ops;
    _cleanup_(store_closep) Store *owned = &s->base;
    if (!(s->conninfo = strdup(conninfo)))
        return error_set(err, -ENOMEM, "out of memory");
    int r = store_pg_connect(conninfo, &s->conn, err);
    if (r >= 0) {
        if (asprintf(&s->where, "database %s on %s", PQdb(s->conn), PQhost(s->conn)) < 0)
            s->where = NULL, r = error_set(err, -ENOMEM, "out of memory");
    }
    if (r >= 0)
        r = migrate(s, site, err);
    if (r >= 0)
        r = prepare_all(s, err);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(owned);
    return 0;
}

/* A lost connection is reopened here, at most once per backoff interval (doubling up to
 * BACKOFF_MAX_MS while PostgreSQL stays away). Nothing of a transaction survives a lost
 * connection, so this runs only between transactions. */
static int reconnect(PgStore *s, Error *err) {
    uint64_t now = mono_ms();
    if (now < s->retry_at_ms)
        return error_set(err, -ENOTCONN,
                         "state store: PostgreSQL (%s) is unreachable; "
                         "retrying in %u ms",
                         s->where, (unsigned)(s->retry_at_ms - now));
    PGconn *c = NULL;
    Error e = {0};
    int r = store_pg_connect(s->conninfo, &c, &e);
    if (r >= 0) {
        PQfinish(s->conn);
        s->conn = c;
        r = prepare_all(s, &e);
        if (r >= 0)
            r = apply_session_settings(s, &e);
    }
    if (r < 0) {
        s->backoff_ms = s->backoff_ms ? MIN(s->backoff_ms * 2, BACKOFF_MAX_MS) : BACKOFF_MIN_MS;
        s->retry_at_ms = now + s->backoff_ms;
        return error_set(err, -ENOTCONN,
                         "state store: PostgreSQL (%s) is unreachable; retrying: %s", s->where,
                         error_message(&e));
    }
    s->backoff_ms = 0;
    return 0;
}

static int apply_session_settings(PgStore *s, Error *err) {
    if (!s->max_tx_ms && !s->max_tx_set)
        return 0;
    s->max_tx_set = s->max_tx_ms != 0; /* 0 is PostgreSQL's "no limit": said once it was set */
    char sql[96];
    snprintf(sql, sizeof(sql), "SET idle_in_transaction_session_timeout = %u", s->max_tx_ms);
    return exec_cmd(s, sql, err, "configuring the session");
}

void store_pg_set_fence(Store *base, uint64_t epoch, unsigned max_tx_ms) {
    if (base->ops != &pg_ops)
        return;
    PgStore *s = pg_of(base);
    s->fence = epoch;
    s->max_tx_ms = max_tx_ms;
    /* A failure here shows up as a lost connection at the next begin, which reapplies it. */
    (void)apply_session_settings(s, NULL);
}

bool store_is_pg(const Store *s) {
    return s->ops == &pg_ops;
}

static int fence_check(PgStore *s, Error *err) {
    char epoch[24];
    snprintf(epoch, sizeof(epoch), "%llu", (unsigned long long)s->fence);
    const char *p[] = {epoch};
    _cleanup_(PQclearp) PGresult *res =
            run(s, STMT_FENCE, 1, p, err, "checking the leader's epoch");
    if (!res)
        return err && err->code ? err->code : -EIO;
    if (PQntuples(res) == 0)
        return error_set(err, -ESTALE,
                         "this server is no longer the leader: its epoch %s was "
                         "superseded, and its change was not committed",
                         epoch);
    return 0;
}

static int pg_begin(Store *base, Error *err) {
    PgStore *s = pg_of(base);
    int r;
    if (PQstatus(s->conn) != CONNECTION_OK && (r = reconnect(s, err)) < 0)
        return r;
    Error first = {0};
    r = exec_cmd(s, "BEGIN", &first, "starting a transaction");
    /* A connection PostgreSQL closed while idle is only found dead now: nothing was done,
     * so reconnect and try once more. */
    if (r == -ENOTCONN) {
        s->retry_at_ms = 0;
        if ((r = reconnect(s, err)) < 0)
            return r;
        r = exec_cmd(s, "BEGIN", err, "starting a transaction");
    } else if (r < 0)
        return error_set(err, r, "%s", first.message);
    if (r < 0)
        return r;
    s->in_tx = true;
    s->notify = false;
    if (s->fence && (r = fence_check(s, err)) < 0) {
        (void)exec_cmd(s, "ROLLBACK", NULL, "rolling back");
        s->in_tx = false;
        return r;
    }
    return 0;
}

static int pg_commit(Store *base, Error *err) {
    PgStore *s = pg_of(base);
    int r = 0;
    if (s->notify) {
        /* Delivered to LISTENers only at commit, and not at all on rollback. */
        char seq[24];
        snprintf(seq, sizeof(seq), "%llu", (unsigned long long)s->last_seq);
        const char *p[] = {seq};
        PGresult *res = PQexecParams(s->conn, "SELECT pg_notify('einsora_events', $1)", 1, NULL, p,
                                     NULL, NULL, 0);
        r = PQresultStatus(res) == PGRES_TUPLES_OK ? 0 : pg_fail(s, res, err, "committing");
        PQclear(res);
    }
    if (r >= 0) {
        /* COMMIT of an aborted transaction answers ROLLBACK without an error: check. */
        PGresult *res = PQexec(s->conn, "COMMIT");
        if (PQresultStatus(res) != PGRES_COMMAND_OK)
            r = pg_fail(s, res, err, "committing");
        else if (!STREQ(PQcmdStatus(res), "COMMIT"))
            r = error_set(err, -EIO,
                          "state store: committing failed: the transaction was rolled back");
        PQclear(res);
    }
    if (r >= 0)
        s->in_tx = false;
    return r;
}

static void pg_rollback(Store *base) {
    PgStore *s = pg_of(base);
    if (s->in_tx && PQstatus(s->conn) == CONNECTION_OK)
        (void)exec_cmd(s, "ROLLBACK", NULL, "rolling back");
    s->in_tx = false;
}

static int pg_token_add_expiring(Store *base, const char *hash_hex, const char *user,
                                 const char *role, const char *nodes, int64_t expires_ms,
                                 Error *err) {
    char expires[24];
    snprintf(expires, sizeof(expires), "%lld", (long long)expires_ms);
    const char *p[] = {hash_hex, user, role, nodes, expires_ms > 0 ? expires : NULL};
    return run_cmd(pg_of(base), STMT_TOKEN_ADD, 5, p, err, "adding a token");
}

static int pg_token_add(Store *base, const char *hash_hex, const char *user, const char *role,
                        const char *nodes, Error *err) {
    return pg_token_add_expiring(base, hash_hex, user, role, nodes, 0, err);
}

static char *dup_value(PGresult *res, int row, int col) {
    return PQgetisnull(res, row, col) ? NULL : strdup(PQgetvalue(res, row, col));
}

static const char *value(PGresult *res, int row, int col) {
    return PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
}

static int pg_token_lookup(Store *base, const char *hash_hex, StoreToken *ret, Error *err) {
    PgStore *s = pg_of(base);
    const char *p[] = {hash_hex};
    PGresult *res = run(s, STMT_TOKEN_LOOKUP, 1, p, err, "looking up a token");
    if (!res)
        return err && err->code ? err->code : -EIO;
    int r;
    if (PQntuples(res) == 0)
        r = error_set(err, -ENOENT, "unknown token");
    else {
        StoreToken t = {dup_value(res, 0, 0), dup_value(res, 0, 1), dup_value(res, 0, 2),
                        PQgetisnull(res, 0, 3) ? 0 : strtoll(PQgetvalue(res, 0, 3), NULL, 10)};
        if (!t.user || !t.role || (!t.nodes && !PQgetisnull(res, 0, 2))) {
            store_token_done(&t);
            r = error_set(err, -ENOMEM, "out of memory");
        } else {
            *ret = t;
            r = 0;
        }
    }
    PQclear(res);
    return r;
}

static int pg_node_put(Store *base, const char *name, const char *json, Error *err) {
    const char *p[] = {name, json};
    return run_cmd(pg_of(base), STMT_NODE_PUT, 2, p, err, "saving a node");
}

static int pg_node_delete(Store *base, const char *name, Error *err) {
    const char *p[] = {name};
    return run_cmd(pg_of(base), STMT_NODE_DELETE, 1, p, err, "deleting a node");
}

typedef int (*RowFn)(PGresult *res, int row, void *fn, void *userdata);

/* Run a query and hand each row to row_fn; fn's negative return stops and is returned. */
static int foreach_row(PgStore *s, int stmt, int n, const char *const *params, RowFn row_fn,
                       void *fn, void *userdata, Error *err, const char *what) {
    PGresult *res = run(s, stmt, n, params, err, what);
    if (!res)
        return err && err->code ? err->code : -EIO;
    int r = 0;
    for (int i = 0; r >= 0 && i < PQntuples(res); i++)
        r = row_fn(res, i, fn, userdata);
    PQclear(res);
    return r;
}

static int keyed_row(PGresult *res, int row, void *fn, void *userdata) {
    return ((StoreNodeFn)fn)(value(res, row, 0), value(res, row, 1), userdata);
}

static int pg_node_foreach(Store *base, StoreNodeFn fn, void *userdata, Error *err) {
    return foreach_row(pg_of(base), STMT_NODE_ALL, 0, NULL, keyed_row, (void *)fn, userdata, err,
                       "reading nodes");
}

static int pg_request_put(Store *base, const StoreRequest *r, Error *err) {
    char id[24];
    snprintf(id, sizeof(id), "%llu", (unsigned long long)r->id);
    const char *p[] = {id, r->user, r->idem_key, r->state, r->json};
    return run_cmd(pg_of(base), STMT_REQUEST_PUT, 5, p, err, "saving a request");
}

static int request_row(PGresult *res, int row, void *fn, void *userdata) {
    StoreRequest r = {
            .id = strtoull(value(res, row, 0), NULL, 10),
            .user = value(res, row, 1),
            .idem_key = value(res, row, 2),
            .state = value(res, row, 3),
            .json = value(res, row, 4),
    };
    return ((StoreRequestFn)fn)(&r, userdata);
}

static int pg_request_foreach(Store *base, StoreRequestFn fn, void *userdata, Error *err) {
    return foreach_row(pg_of(base), STMT_REQUEST_ALL, 0, NULL, request_row, (void *)fn, userdata,
                       err, "reading requests");
}

static int pg_event_append(Store *base, const StoreEvent *e, Error *err) {
    PgStore *s = pg_of(base);
    char seq[24], t[24];
    snprintf(seq, sizeof(seq), "%llu", (unsigned long long)e->seq);
    snprintf(t, sizeof(t), "%lld", (long long)e->time_ms);
    const char *p[] = {seq, t, e->actor, e->type, e->object, e->json};
    int r = run_cmd(s, STMT_EVENT_APPEND, 6, p, err, "appending an event");
    if (r >= 0) {
        s->notify = true;
        s->last_seq = e->seq;
    }
    return r;
}

static int event_row(PGresult *res, int row, void *fn, void *userdata) {
    StoreEvent e = {
            .seq = strtoull(value(res, row, 0), NULL, 10),
            .time_ms = strtoll(value(res, row, 1), NULL, 10),
            .actor = value(res, row, 2),
            .type = value(res, row, 3),
            .object = value(res, row, 4),
            .json = value(res, row, 5),
    };
    return ((StoreEventFn)fn)(&e, userdata);
}

static int pg_event_foreach(Store *base, uint64_t after, StoreEventFn fn, void *userdata,
                            Error *err) {
    char a[24];
    snprintf(a, sizeof(a), "%llu", (unsigned long long)after);
    const char *p[] = {a};
    return foreach_row(pg_of(base), STMT_EVENT_AFTER, 1, p, event_row, (void *)fn, userdata, err,
                       "reading events");
}

static int pg_fleet_put(Store *base, const char *key, const char *json, Error *err) {
    const char *p[] = {key, json};
    return run_cmd(pg_of(base), STMT_FLEET_PUT, 2, p, err, "saving a fleet record");
}

static int pg_fleet_delete(Store *base, const char *key, Error *err) {
    const char *p[] = {key};
    return run_cmd(pg_of(base), STMT_FLEET_DELETE, 1, p, err, "deleting a fleet record");
}

static int pg_fleet_foreach(Store *base, StoreNodeFn fn, void *userdata, Error *err) {
    return foreach_row(pg_of(base), STMT_FLEET_ALL, 0, NULL, keyed_row, (void *)fn, userdata, err,
                       "reading fleet records");
}

static int token_row(PGresult *res, int row, void *fn, void *userdata) {
    StoreToken t = {
            .user = (char *)value(res, row, 1),
            .role = (char *)value(res, row, 2),
            .nodes = (char *)value(res, row, 3),
            .expires_ms = PQgetisnull(res, row, 4) ? 0 : strtoll(value(res, row, 4), NULL, 10),
    };
    return ((StoreTokenFn)fn)(value(res, row, 0), &t, userdata);
}

static int pg_token_foreach(Store *base, StoreTokenFn fn, void *userdata, Error *err) {
    return foreach_row(pg_of(base), STMT_TOKEN_ALL, 0, NULL, token_row, (void *)fn, userdata, err,
                       "listing tokens");
}

/* store.c checked the prefix's form. */
static int pg_token_revoke(Store *base, const char *hash_prefix, Error *err) {
    PgStore *s = pg_of(base);
    const char *p[] = {hash_prefix};
    PGresult *res = run(s, STMT_TOKEN_COUNT_PREFIX, 1, p, err, "finding a token");
    if (!res)
        return err && err->code ? err->code : -EIO;
    long long count = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    if (count == 0)
        return error_set(err, -ENOENT, "no token with id %s", hash_prefix);
    if (count > 1)
        return error_set(err, -EEXIST, "%lld tokens have ids starting %s; give more digits", count,
                         hash_prefix);
    return run_cmd(s, STMT_TOKEN_DELETE_PREFIX, 1, p, err, "revoking a token");
}

static int pg_prune(Store *base, int64_t before_ms, Error *err) {
    PgStore *s = pg_of(base);
    char before[24];
    snprintf(before, sizeof(before), "%lld", (long long)before_ms);
    const char *p[] = {before};
    int r = run_cmd(s, STMT_PRUNE_REQUESTS, 1, p, err, "dropping old history");
    return r < 0 ? r : run_cmd(s, STMT_PRUNE_EVENTS, 1, p, err, "dropping old history");
}

static int pg_request_forget_key(Store *base, uint64_t id, Error *err) {
    char i[24];
    snprintf(i, sizeof(i), "%llu", (unsigned long long)id);
    const char *p[] = {i};
    return run_cmd(pg_of(base), STMT_REQUEST_FORGET_KEY, 1, p, err,
                   "forgetting an idempotency key");
}

static const StoreOps pg_ops = {
        .name = "postgresql",
        .close = pg_close,
        .begin = pg_begin,
        .commit = pg_commit,
        .rollback = pg_rollback,
        .token_add = pg_token_add,
        .token_lookup = pg_token_lookup,
        .node_put = pg_node_put,
        .node_delete = pg_node_delete,
        .node_foreach = pg_node_foreach,
        .request_put = pg_request_put,
        .request_foreach = pg_request_foreach,
        .event_append = pg_event_append,
        .event_foreach = pg_event_foreach,
        .fleet_put = pg_fleet_put,
        .fleet_delete = pg_fleet_delete,
        .fleet_foreach = pg_fleet_foreach,
        .token_add_expiring = pg_token_add_expiring,
        .token_foreach = pg_token_foreach,
        .token_revoke = pg_token_revoke,
        .prune = pg_prune,
        .request_forget_key = pg_request_forget_key,
};

/* ---- a standby's reads (replay.c) ---- */

int store_pg_begin_snapshot(Store *base, Error *err) {
    if (base->ops != &pg_ops)
        return error_set(err, -EOPNOTSUPP, "snapshots are for PostgreSQL stores");
    PgStore *s = pg_of(base);
    int r;
    if (PQstatus(s->conn) != CONNECTION_OK && (r = reconnect(s, err)) < 0)
        return r;
    /* Every read until the rollback sees one committed state: records and events agree. */
    const char *sql = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
    Error first = {0};
    r = exec_cmd(s, sql, &first, "starting a snapshot");
    if (r == -ENOTCONN) { /* closed while idle: found only now, nothing was done */
        s->retry_at_ms = 0;
        if ((r = reconnect(s, err)) < 0)
            return r;
        r = exec_cmd(s, sql, err, "starting a snapshot");
    } else if (r < 0)
        return error_set(err, r, "%s", first.message);
    if (r < 0)
        return r;
    s->in_tx = true; /* no silent reconnection half-way through the snapshot */
    s->notify = false;
    return 0;
}

int store_pg_last_seq(Store *base, uint64_t *ret, Error *err) {
    if (base->ops != &pg_ops)
        return error_set(err, -EOPNOTSUPP, "the last sequence is read from PostgreSQL stores");
    PgStore *s = pg_of(base);
    if (!s->in_tx && PQstatus(s->conn) != CONNECTION_OK) {
        int r = reconnect(s, err);
        if (r < 0)
            return r;
    }
    _cleanup_(PQclearp) PGresult *res = PQexec(s->conn, "SELECT coalesce(max(seq), 0) FROM events");
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        int r = pg_fail(s, res, err, "reading the last event's sequence");
        return r < 0 ? r : -EIO;
    }
    *ret = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
    return 0;
}
