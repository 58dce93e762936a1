/* store-sqlite.c: the embedded SQLite backend of store.h (WAL, BEGIN IMMEDIATE, migrations). */
#include "store-backend.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/macro.h"
#include "util/strutil.h"

/* Numbered schema migrations: migration i brings the file from user_version i to i+1.
 * Append only; never edit one that has shipped. */
static const char *const migrations[] = {
        /* 1: the first schema */
        "CREATE TABLE tokens (hash TEXT PRIMARY KEY, user TEXT NOT NULL, role TEXT NOT NULL,"
        "  nodes TEXT);"
        "CREATE TABLE nodes (name TEXT PRIMARY KEY, doc TEXT NOT NULL);"
        "CREATE TABLE requests (id INTEGER PRIMARY KEY, user TEXT NOT NULL, idem_key TEXT,"
        "  state TEXT NOT NULL, doc TEXT NOT NULL);"
        "CREATE UNIQUE INDEX requests_idem ON requests(user, idem_key) WHERE idem_key IS NOT NULL;"
        "CREATE TABLE events (seq INTEGER PRIMARY KEY, time_ms INTEGER NOT NULL,"
        "  actor TEXT NOT NULL, type TEXT NOT NULL, object TEXT NOT NULL, doc TEXT NOT NULL);",
        /* 2: the fleet's records (agents, mode switches in progress, work for agents) */
        "CREATE TABLE fleet (key TEXT PRIMARY KEY, doc TEXT NOT NULL);",
        /* 3: tokens that expire; NULL: never */
        "ALTER TABLE tokens ADD COLUMN expires_ms INTEGER;",
};
_Static_assert(ARRAY_SIZE(migrations) == STORE_SCHEMA_VERSION, "one migration per schema version");

enum {
    STMT_BEGIN,
    STMT_COMMIT,
    STMT_ROLLBACK,
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
    _STMT_MAX,
};

static const char *const stmt_sql[_STMT_MAX] = {
        [STMT_BEGIN] = "BEGIN IMMEDIATE",
        [STMT_COMMIT] = "COMMIT",
        [STMT_ROLLBACK] = "ROLLBACK",
        [STMT_TOKEN_ADD] = "INSERT INTO tokens(hash, user, role, nodes) VALUES(?1, ?2, ?3, ?4)",
        [STMT_TOKEN_LOOKUP] = "SELECT user, role, nodes, expires_ms FROM tokens WHERE hash = ?1",
        [STMT_NODE_PUT] = "INSERT INTO nodes(name, doc) VALUES(?1, ?2) "
                          "ON CONFLICT(name) DO UPDATE SET doc = excluded.doc",
        [STMT_NODE_DELETE] = "DELETE FROM nodes WHERE name = ?1",
        [STMT_NODE_ALL] = "SELECT name, doc FROM nodes ORDER BY name",
        [STMT_REQUEST_PUT] = "INSERT INTO requests(id, user, idem_key, state, doc) "
                             "VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT(id) DO UPDATE SET "
                             "state = excluded.state, doc = excluded.doc",
        [STMT_REQUEST_ALL] = "SELECT id, user, idem_key, state, doc FROM requests ORDER BY id",
        [STMT_EVENT_APPEND] = "INSERT INTO events(seq, time_ms, actor, type, object, doc) "
                              "VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
        [STMT_EVENT_AFTER] = "SELECT seq, time_ms, actor, type, object, doc FROM events "
                             "WHERE seq > ?1 ORDER BY seq",
        [STMT_FLEET_PUT] = "INSERT INTO fleet(key, doc) VALUES(?1, ?2) "
                           "ON CONFLICT(key) DO UPDATE SET doc = excluded.doc",
        [STMT_FLEET_DELETE] = "DELETE FROM fleet WHERE key = ?1",
        [STMT_FLEET_ALL] = "SELECT key, doc FROM fleet ORDER BY key",
};

typedef struct SqliteStore {
    Store base;
    sqlite3 *db;
    sqlite3_stmt *stmt[_STMT_MAX];
} SqliteStore;

static const StoreOps sqlite_ops;

static SqliteStore *sqlite_of(Store *base) {
    return (SqliteStore *)base;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(sqlite3_stmt *, sqlite3_finalize);

static int sql_fail(SqliteStore *s, Error *err, const char *what) {
    int rc = sqlite3_extended_errcode(s->db);
    int code = (rc & 0xff) == SQLITE_CONSTRAINT ? -EEXIST
               : (rc & 0xff) == SQLITE_BUSY     ? -EBUSY
               : (rc & 0xff) == SQLITE_FULL     ? -ENOSPC
                                                : -EIO;
    return error_set(err, code, "state store: %s failed: %s", what, sqlite3_errmsg(s->db));
}

static void sqlite_close(Store *base) {
    SqliteStore *s = sqlite_of(base);
    for (size_t i = 0; i < _STMT_MAX; i++)
        sqlite3_finalize(s->stmt[i]);
    sqlite3_close(s->db);
    free(s);
}

static int exec_sql(SqliteStore *s, const char *sql, Error *err) {
    char *msg = NULL;
    if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        int r = error_set(err, -EIO, "state store: %s", msg ? msg : sqlite3_errmsg(s->db));
        sqlite3_free(msg);
        return r;
    }
    return 0;
}

static int read_user_version(SqliteStore *s, int *ret, Error *err) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
        return sql_fail(s, err, "reading the schema version");
    int r = sqlite3_step(st) == SQLITE_ROW ? 0 : -EIO;
    if (r == 0)
        *ret = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return r < 0 ? sql_fail(s, err, "reading the schema version") : 0;
}

/* A file at schema version 0 is new to Einsora: an empty one becomes a state file, but one
 * that already holds tables is another program's database given by mistake (--state
 * pointing at the wrong .db), which the first migration would write Einsora's tables into. */
static int refuse_foreign(SqliteStore *s, const char *path, Error *err) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT name FROM sqlite_master LIMIT 1", -1, &st, NULL) !=
        SQLITE_OK)
        return sql_fail(s, err, "reading the schema");
    int step = sqlite3_step(st);
    int r = 0;
    if (step == SQLITE_ROW)
        r = error_set(err, -EPROTO,
                      "%s is not an Einsora state file: it is an SQLite database with other "
                      "contents (such as '%.60s') and no Einsora schema version; give the "
                      "server's state file, or a new path",
                      path, (const char *)sqlite3_column_text(st, 0));
    else if (step != SQLITE_DONE)
        r = sql_fail(s, err, "reading the schema");
    sqlite3_finalize(st);
    return r;
}

/* Each migration runs in its own transaction together with its version bump, so a crash
 * mid-way leaves the file at the previous version. */
static int migrate(SqliteStore *s, const char *path, Error *err) {
    int v = 0, r = read_user_version(s, &v, err);
    if (r < 0)
        return r;
    if (v > (int)ARRAY_SIZE(migrations))
        return error_set(err, -EPROTO,
                         "state file %s has schema version %d, newer than this einsora knows (%zu)",
                         path, v, ARRAY_SIZE(migrations));
    if (v == 0 && (r = refuse_foreign(s, path, err)) < 0)
        return r;
    for (; v < (int)ARRAY_SIZE(migrations); v++) {
        char bump[64];
        snprintf(bump, sizeof(bump), "PRAGMA user_version = %d", v + 1);
        if ((r = exec_sql(s, "BEGIN IMMEDIATE", err)) < 0)
            return r;
        if ((r = exec_sql(s, migrations[v], err)) < 0 || (r = exec_sql(s, bump, err)) < 0 ||
            (r = exec_sql(s, "COMMIT", err)) < 0) {
            exec_sql(s, "ROLLBACK", NULL);
            return r;
        }
    }
    s->base.version = v;
    return 0;
}

/* The state holds token hashes and every tenant's requests: only its user reads it. SQLite
 * creates the -wal and -shm files with the database's mode, so the database is made 0600
 * before SQLite opens it, and files an older version left readable are tightened. */
static bool is_memory(const char *path) {
    return STREQ(path, ":memory:") || string_has_prefix(path, "file:");
}

/* A new state file is made 0600 before SQLite opens it. An existing path is left as it is
 * here: a directory or another file given by mistake is refused by the open, untouched. */
static int make_new_private(const char *path, Error *err) {
    if (is_memory(path))
        return 0;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return error_set(err, -EISDIR,
                         "state file %s is a directory: give a file in it, such as %s/state.db",
                         path, path);
    /* Never open and close a descriptor of a file this process may already have open in
     * SQLite: closing it would drop that connection's POSIX locks. Only a new file is
     * opened here (O_EXCL). */
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
    else if (errno != EEXIST)
        return error_set(err, -errno, "cannot create state file %s: %s", path, strerror(errno));
    return 0;
}

/* Once SQLite has read it as a database: files an older version left readable are tightened
 * (by path), with the -wal and -shm files SQLite made with the database's mode. */
static int make_private(const char *path, Error *err) {
    if (is_memory(path))
        return 0;
    /* Tightened, never loosened: the owner's own bits stay as the operator set them (a file
     * made read-only is refused below, not made writable behind the operator's back). */
    struct stat st;
    if (stat(path, &st) == 0 && (st.st_mode & 077) && chmod(path, st.st_mode & 0700) < 0 &&
        errno != EPERM) /* EPERM: not ours to tighten */
        return error_set(err, -errno, "cannot make state file %s private: %s", path,
                         strerror(errno));
    static const char *const suffixes[] = {"-wal", "-shm"};
    for (size_t i = 0; i < ARRAY_SIZE(suffixes); i++) {
        char side[4096];
        if ((size_t)snprintf(side, sizeof(side), "%s%s", path, suffixes[i]) < sizeof(side))
            (void)chmod(side, 0600); /* absent is fine */
    }
    return 0;
}

int store_sqlite_open(const char *path, Store **ret, Error *err) {
    int pr = make_new_private(path, err);
    if (pr < 0)
        return pr;
    /* SQLite counts its allocations under one process-wide mutex, which the server's writer
     * and its token-lookup reader then contend for at every allocation; nothing here reads
     * the counts. Only a call before SQLite's first use takes effect (later ones fail,
     * harmlessly). */
    (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    SqliteStore *s = calloc(1, sizeof(*s));
    if (!s)
        return error_set(err, -ENOMEM, "out of memory");
    s->base.ops = &sqlite_ops;
    _cleanup_(store_closep) Store *owned = &s->base;
    if (sqlite3_open_v2(path, &s->db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        NULL) != SQLITE_OK)
        return error_set(err, -EIO, "cannot open state file %s: %s", path,
                         s->db ? sqlite3_errmsg(s->db) : "out of memory");
    /* SQLite opens a file it may not write read-only without a word; every change of the
     * server goes there, so it is refused now, not at the first write after "listening". */
    if (!is_memory(path) && sqlite3_db_readonly(s->db, "main") == 1)
        return error_set(err, -EROFS,
                         "state file %s is read-only to this user (uid %u): the server writes "
                         "every change there; give it a file it may write",
                         path, (unsigned)geteuid());
    sqlite3_busy_timeout(s->db, 5000);
    /* WAL + synchronous=FULL: a COMMIT returns only once the WAL is on disk, which is what
     * lets the server acknowledge right after it (R16). */
    Error perr = {0};
    int r = exec_sql(s, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON",
                     &perr);
    if (r < 0) /* "file is not a database": say which */
        return error_set(err, r, "state file %s: %s", path, error_message(&perr));
    r = make_private(path, err);
    if (r >= 0)
        r = migrate(s, path, err);
    for (size_t i = 0; r >= 0 && i < _STMT_MAX; i++)
        if (sqlite3_prepare_v3(s->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &s->stmt[i],
                               NULL) != SQLITE_OK)
            r = sql_fail(s, err, "preparing a statement");
    if (r < 0)
        return r;
    *ret = TAKE_PTR(owned);
    return 0;
}

/* Run a statement that returns no rows; always resets it. */
static int step_done(SqliteStore *s, sqlite3_stmt *st, Error *err, const char *what) {
    int rc = sqlite3_step(st);
    int r = rc == SQLITE_DONE ? 0 : sql_fail(s, err, what);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return r;
}

static void bind_text(sqlite3_stmt *st, int i, const char *v) {
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

static const char *col_text(sqlite3_stmt *st, int i) {
    return (const char *)sqlite3_column_text(st, i);
}

static int sqlite_begin(Store *base, Error *err) {
    SqliteStore *s = sqlite_of(base);
    return step_done(s, s->stmt[STMT_BEGIN], err, "starting a transaction");
}

static int sqlite_commit(Store *base, Error *err) {
    SqliteStore *s = sqlite_of(base);
    return step_done(s, s->stmt[STMT_COMMIT], err, "committing");
}

static void sqlite_rollback(Store *base) {
    SqliteStore *s = sqlite_of(base);
    if (!sqlite3_get_autocommit(s->db))
        (void)step_done(s, s->stmt[STMT_ROLLBACK], NULL, "rolling back");
}

static int sqlite_token_add(Store *base, const char *hash_hex, const char *user, const char *role,
                            const char *nodes, Error *err) {
    SqliteStore *s = sqlite_of(base);
    sqlite3_stmt *st = s->stmt[STMT_TOKEN_ADD];
    bind_text(st, 1, hash_hex);
    bind_text(st, 2, user);
    bind_text(st, 3, role);
    bind_text(st, 4, nodes);
    return step_done(s, st, err, "adding a token");
}

static int sqlite_token_lookup(Store *base, const char *hash_hex, StoreToken *ret, Error *err) {
    SqliteStore *s = sqlite_of(base);
    sqlite3_stmt *st = s->stmt[STMT_TOKEN_LOOKUP];
    bind_text(st, 1, hash_hex);
    int rc = sqlite3_step(st), r;
    if (rc == SQLITE_ROW) {
        StoreToken t = {
                .user = strdup(col_text(st, 0)),
                .role = strdup(col_text(st, 1)),
                .nodes = col_text(st, 2) ? strdup(col_text(st, 2)) : NULL,
                .expires_ms = sqlite3_column_int64(st, 3),
        };
        if (!t.user || !t.role) {
            store_token_done(&t);
            r = error_set(err, -ENOMEM, "out of memory");
        } else {
            *ret = t;
            r = 0;
        }
    } else if (rc == SQLITE_DONE)
        r = error_set(err, -ENOENT, "unknown token");
    else
        r = sql_fail(s, err, "looking up a token");
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return r;
}

static int sqlite_node_put(Store *base, const char *name, const char *json, Error *err) {
    SqliteStore *s = sqlite_of(base);
    sqlite3_stmt *st = s->stmt[STMT_NODE_PUT];
    bind_text(st, 1, name);
    bind_text(st, 2, json);
    return step_done(s, st, err, "saving a node");
}

static int sqlite_node_delete(Store *base, const char *name, Error *err) {
    SqliteStore *s = sqlite_of(base);
    sqlite3_stmt *st = s->stmt[STMT_NODE_DELETE];
    bind_text(st, 1, name);
    return step_done(s, st, err, "deleting a node");
}

/* Iterate a query; fn's negative return stops and is returned. */
#define FOREACH_ROW(s, st, err, what, body)                                                        \
    ({                                                                                             \
        int _r = 0, _rc;                                                                           \
        while ((_rc = sqlite3_step(st)) == SQLITE_ROW) {                                           \
            _r = (body);                                                                           \
            if (_r < 0)                                                                            \
                break;                                                                             \
        }                                                                                          \
        if (_r >= 0 && _rc != SQLITE_DONE)                                                         \
            _r = sql_fail(s, err, what);                                                           \
        sqlite3_reset(st);                                                                         \
        sqlite3_clear_bindings(st);                                                                \
        _r;                                                                                        \
    })

static int sqlite_node_foreach(Store *base, StoreNodeFn fn, void *userdata, Error *err) {
    SqliteStore *s = sqlite_of(base);
    sqlite3_stmt *st = s->stmt[STMT_NODE_ALL];
    return FOREACH_ROW(s, st, err, "reading nodes", fn(col_text(st, 0), col_text(st, 1), userdata));
}

static int sqlite_request_put(Store *base, const StoreRequest *r, Error *err) {
    SqliteStore *s = sqlite_of(base);
    sqlite3_stmt *st = s->stmt[STMT_REQUEST_PUT];
    sqlite3_bind_int64(st, 1, (sqlite3_int64)r->id);
    bind_text(st, 2, r->user);
    bind_text(st, 3, r->idem_key);
    bind_text(st, 4, r->state);
    bind_text(st, 5, r->json);
    return step_done(s, st, err, "saving a request");
}

static int request_row(sqlite3_stmt *st, StoreRequestFn fn, void *userdata) {
    StoreRequest r = {
            .id = (uint64_t)sqlite3_column_int64(st, 0),
            .user = col_text(st, 1),
            .idem_key = col_text(st, 2),
            .state = col_text(st, 3),
            .json = col_text(st, 4),
    };
    return fn(&r, userdata);
}

static int sqlite_request_foreach(Store *base, StoreRequestFn fn, void *userdata, Error *err) {
    SqliteStore *s = sqlite_of(base);
    sqlite3_stmt *st = s->stmt[STMT_REQUEST_ALL];
    return FOREACH_ROW(s, st, err, "reading requests", request_row(st, fn, userdata));
}

static int sqlite_event_append(Store *base, const StoreEvent *e, Error *err) {
    SqliteStore *s = sqlite_of(base);
    sqlite3_stmt *st = s->stmt[STMT_EVENT_APPEND];
    sqlite3_bind_int64(st, 1, (sqlite3_int64)e->seq);
    sqlite3_bind_int64(st, 2, e->time_ms);
    bind_text(st, 3, e->actor);
    bind_text(st, 4, e->type);
    bind_text(st, 5, e->object);
    bind_text(st, 6, e->json);
    return step_done(s, st, err, "appending an event");
}

static int event_row(sqlite3_stmt *st, StoreEventFn fn, void *userdata) {
    StoreEvent e = {
            .seq = (uint64_t)sqlite3_column_int64(st, 0),
            .time_ms = sqlite3_column_int64(st, 1),
            .actor = col_text(st, 2),
            .type = col_text(st, 3),
            .object = col_text(st, 4),
            .json = col_text(st, 5),
    };
    return fn(&e, userdata);
}

static int sqlite_event_foreach(Store *base, uint64_t after, StoreEventFn fn, void *userdata,
                                Error *err) {
    SqliteStore *s = sqlite_of(base);
    sqlite3_stmt *st = s->stmt[STMT_EVENT_AFTER];
    sqlite3_bind_int64(st, 1, (sqlite3_int64)after);
    return FOREACH_ROW(s, st, err, "reading events", event_row(st, fn, userdata));
}

static int sqlite_fleet_put(Store *base, const char *key, const char *json, Error *err) {
    SqliteStore *s = sqlite_of(base);
    sqlite3_stmt *st = s->stmt[STMT_FLEET_PUT];
    bind_text(st, 1, key);
    bind_text(st, 2, json);
    return step_done(s, st, err, "saving a fleet record");
}

static int sqlite_fleet_delete(Store *base, const char *key, Error *err) {
    SqliteStore *s = sqlite_of(base);
    sqlite3_stmt *st = s->stmt[STMT_FLEET_DELETE];
    bind_text(st, 1, key);
    return step_done(s, st, err, "deleting a fleet record");
}

static int sqlite_fleet_foreach(Store *base, StoreNodeFn fn, void *userdata, Error *err) {
    SqliteStore *s = sqlite_of(base);
    sqlite3_stmt *st = s->stmt[STMT_FLEET_ALL];
    return FOREACH_ROW(s, st, err, "reading fleet records",
                       fn(col_text(st, 0), col_text(st, 1), userdata));
}

/* ---- tokens listed, revoked and expiring (rare calls: statements made per call) ---- */

static int prepare(SqliteStore *s, const char *sql, sqlite3_stmt **ret, Error *err) {
    if (sqlite3_prepare_v2(s->db, sql, -1, ret, NULL) != SQLITE_OK)
        return sql_fail(s, err, "preparing a statement");
    return 0;
}

static int sqlite_token_add_expiring(Store *base, const char *hash_hex, const char *user,
                                     const char *role, const char *nodes, int64_t expires_ms,
                                     Error *err) {
    SqliteStore *s = sqlite_of(base);
    sqlite3_stmt *st = NULL;
    int r = prepare(s,
                    "INSERT INTO tokens(hash, user, role, nodes, expires_ms) "
                    "VALUES(?1, ?2, ?3, ?4, ?5)",
                    &st, err);
    if (r < 0)
        return r;
    bind_text(st, 1, hash_hex);
    bind_text(st, 2, user);
    bind_text(st, 3, role);
    bind_text(st, 4, nodes);
    if (expires_ms > 0)
        sqlite3_bind_int64(st, 5, expires_ms);
    else
        sqlite3_bind_null(st, 5);
    r = step_done(s, st, err, "adding a token");
    sqlite3_finalize(st);
    return r;
}

static int sqlite_token_foreach(Store *base, StoreTokenFn fn, void *userdata, Error *err) {
    SqliteStore *s = sqlite_of(base);
    sqlite3_stmt *st = NULL;
    int r = prepare(s, "SELECT hash, user, role, nodes, expires_ms FROM tokens ORDER BY user, hash",
                    &st, err);
    if (r < 0)
        return r;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        StoreToken t = {
                .user = (char *)col_text(st, 1),
                .role = (char *)col_text(st, 2),
                .nodes = (char *)col_text(st, 3),
                .expires_ms = sqlite3_column_int64(st, 4),
        };
        if ((r = fn(col_text(st, 0), &t, userdata)) < 0)
            break;
    }
    if (r >= 0 && rc != SQLITE_DONE)
        r = sql_fail(s, err, "listing tokens");
    sqlite3_finalize(st);
    return r;
}

static int sqlite_token_revoke(Store *base, const char *hash_prefix, Error *err) {
    SqliteStore *s = sqlite_of(base); /* store.c checked the prefix's form */
    _cleanup_(sqlite3_finalizep) sqlite3_stmt *find = NULL, *del = NULL;
    int r = prepare(s, "SELECT count(*) FROM tokens WHERE substr(hash, 1, length(?1)) = ?1", &find,
                    err);
    if (r < 0)
        return r;
    bind_text(find, 1, hash_prefix);
    int64_t count = sqlite3_step(find) == SQLITE_ROW ? sqlite3_column_int64(find, 0) : -1;
    if (count < 0)
        return sql_fail(s, err, "finding a token");
    sqlite3_reset(find); /* done reading: no read left open while the DELETE below writes */
    if (count == 0)
        return error_set(err, -ENOENT, "no token with id %s", hash_prefix);
    if (count > 1)
        return error_set(err, -EEXIST, "%lld tokens have ids starting %s; give more digits",
                         (long long)count, hash_prefix);
    if ((r = prepare(s, "DELETE FROM tokens WHERE substr(hash, 1, length(?1)) = ?1", &del, err)) <
        0)
        return r;
    bind_text(del, 1, hash_prefix);
    return step_done(s, del, err, "revoking a token");
}

/* ---- retention in the store ---- */

static int sqlite_prune(Store *base, int64_t before_ms, Error *err) {
    SqliteStore *s = sqlite_of(base);
    static const char *const sql[] = {
            /* Ended requests (and with them their idempotency keys) that ended before the
             * cutoff; never the newest row, whose id the next request's follows. */
            "DELETE FROM requests WHERE state IN ('released', 'cancelled', 'refused', 'ended') AND "
            "json_extract(doc, '$.updated_ms') < ?1 AND id < (SELECT max(id) FROM requests)",
            /* Events: a prefix of the feed (it stays gap-free), never the newest. */
            "DELETE FROM events WHERE seq <= (SELECT max(seq) FROM events WHERE time_ms < ?1) "
            "AND seq < (SELECT max(seq) FROM events)",
    };
    for (size_t i = 0; i < ARRAY_SIZE(sql); i++) {
        sqlite3_stmt *st = NULL;
        int r = prepare(s, sql[i], &st, err);
        if (r < 0)
            return r;
        sqlite3_bind_int64(st, 1, before_ms);
        r = step_done(s, st, err, "dropping old history");
        sqlite3_finalize(st);
        if (r < 0)
            return r;
    }
    return 0;
}

static int sqlite_request_forget_key(Store *base, uint64_t id, Error *err) {
    SqliteStore *s = sqlite_of(base);
    sqlite3_stmt *st = NULL;
    int r = prepare(s, "UPDATE requests SET idem_key = NULL WHERE id = ?1", &st, err);
    if (r < 0)
        return r;
    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    r = step_done(s, st, err, "forgetting an idempotency key");
    sqlite3_finalize(st);
    return r;
}

static const StoreOps sqlite_ops = {
        .name = "sqlite",
        .close = sqlite_close,
        .begin = sqlite_begin,
        .commit = sqlite_commit,
        .rollback = sqlite_rollback,
        .token_add = sqlite_token_add,
        .token_lookup = sqlite_token_lookup,
        .node_put = sqlite_node_put,
        .node_delete = sqlite_node_delete,
        .node_foreach = sqlite_node_foreach,
        .request_put = sqlite_request_put,
        .request_foreach = sqlite_request_foreach,
        .event_append = sqlite_event_append,
        .event_foreach = sqlite_event_foreach,
        .fleet_put = sqlite_fleet_put,
        .fleet_delete = sqlite_fleet_delete,
        .fleet_foreach = sqlite_fleet_foreach,
        .token_add_expiring = sqlite_token_add_expiring,
        .token_foreach = sqlite_token_foreach,
        .token_revoke = sqlite_token_revoke,
        .prune = sqlite_prune,
        .request_forget_key = sqlite_request_forget_key,
};
