/* test-store.c: every store.h call, migrations, transactions and rollback, run against both
 * backends: an SQLite file and a real PostgreSQL 15 (pg-helper.c, started by main()). */
#include <criterion/criterion.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "pg-helper.h"
#include "store/store-pg.h"
#include "store/store.h"
#include "util/macro.h"

static PgTest pg;

/* A fresh, empty store location for one test. */
static void new_location(bool postgres, char *buf, size_t size) {
    if (postgres) {
        pg_test_start(&pg); /* finds the server main() started */
        cr_assert_eq(pg_test_new_db(&pg, buf, size), 0);
        return;
    }
    char dir[] = "/tmp/einsora-store-XXXXXX";
    cr_assert(mkdtemp(dir));
    snprintf(buf, size, "%s/state.db", dir);
}

static Store *open_ok(const char *loc) {
    Store *s = NULL;
    Error err = {0};
    int r = store_open(loc, &s, &err);
    cr_assert(r >= 0, "store_open(%s): %s", loc, error_message(&err));
    return s;
}

static void begin_ok(Store *s) {
    Error err = {0};
    cr_assert(store_begin(s, &err) >= 0, "%s", error_message(&err));
}

static void commit_ok(Store *s) {
    Error err = {0};
    cr_assert(store_commit(s, &err) >= 0, "%s", error_message(&err));
}

/* Each body runs once per backend: NAME_sqlite and NAME_postgresql. */
#define STORE_TEST(name)                                                                           \
    static void name##_body(bool postgres, const char *loc);                                       \
    Test(store, name##_sqlite) {                                                                   \
        char loc[256];                                                                             \
        new_location(false, loc, sizeof(loc));                                                     \
        name##_body(false, loc);                                                                   \
    }                                                                                              \
    Test(store, name##_postgresql) {                                                               \
        char loc[256];                                                                             \
        new_location(true, loc, sizeof(loc));                                                      \
        name##_body(true, loc);                                                                    \
    }                                                                                              \
    static void name##_body(_unused_ bool postgres, const char *loc)

/* Collects what a foreach sees, as "key=value;" text, so order and content are checked. */
typedef struct Seen {
    char text[4096];
    int stop_after; /* 0: never */
    int n;
} Seen;

static int seen_keyed(const char *key, const char *json, void *userdata) {
    Seen *seen = userdata;
    size_t len = strlen(seen->text);
    snprintf(seen->text + len, sizeof(seen->text) - len, "%s=%s;", key, json);
    return ++seen->n == seen->stop_after ? -ECANCELED : 0;
}

static int seen_request(const StoreRequest *r, void *userdata) {
    Seen *seen = userdata;
    size_t len = strlen(seen->text);
    snprintf(seen->text + len, sizeof(seen->text) - len, "%llu:%s:%s:%s:%s;",
             (unsigned long long)r->id, r->user, r->idem_key ? r->idem_key : "-", r->state,
             r->json);
    return ++seen->n == seen->stop_after ? -ECANCELED : 0;
}

static int seen_event(const StoreEvent *e, void *userdata) {
    Seen *seen = userdata;
    size_t len = strlen(seen->text);
    snprintf(seen->text + len, sizeof(seen->text) - len, "%llu@%lld:%s:%s:%s:%s;",
             (unsigned long long)e->seq, (long long)e->time_ms, e->actor, e->type, e->object,
             e->json);
    return ++seen->n == seen->stop_after ? -ECANCELED : 0;
}

STORE_TEST(r16_store_migrations_bring_a_new_store_to_the_current_version) {
    Store *s = open_ok(loc);
    cr_assert_eq(store_schema_version(s), 3);
    cr_assert_str_eq(store_backend(s), postgres ? "postgresql" : "sqlite");
    store_close(s);
    /* Opening again applies nothing and keeps the version. */
    s = open_ok(loc);
    cr_assert_eq(store_schema_version(s), 3);
    store_close(s);
}

STORE_TEST(r16_store_tokens_add_lookup_unknown_and_duplicate) {
    Store *s = open_ok(loc);
    Error err = {0};
    begin_ok(s);
    cr_assert(store_token_add(s, "aa11", "alice", "owner", "n1,n2", &err) >= 0, "%s",
              error_message(&err));
    cr_assert(store_token_add(s, "bb22", "bob", "user", NULL, &err) >= 0, "%s",
              error_message(&err));
    commit_ok(s);

    StoreToken t = {0};
    cr_assert(store_token_lookup(s, "aa11", &t, &err) >= 0);
    cr_assert_str_eq(t.user, "alice");
    cr_assert_str_eq(t.role, "owner");
    cr_assert_str_eq(t.nodes, "n1,n2");
    store_token_done(&t);
    cr_assert(store_token_lookup(s, "bb22", &t, &err) >= 0);
    cr_assert_null(t.nodes);
    store_token_done(&t);
    cr_assert_eq(store_token_lookup(s, "cc33", &t, &err), -ENOENT);
    cr_assert_null(t.user, "nothing written on failure");

    Error dup = {0};
    begin_ok(s);
    cr_assert_eq(store_token_add(s, "aa11", "mallory", "admin", NULL, &dup), -EEXIST);
    cr_assert(strstr(dup.message, "adding a token"), "%s", dup.message);
    store_rollback(s);
    cr_assert(store_token_lookup(s, "aa11", &t, &err) >= 0);
    cr_assert_str_eq(t.user, "alice", "the duplicate changed nothing");
    store_token_done(&t);
    store_close(s);
}

STORE_TEST(r16_store_nodes_put_replace_delete_in_name_order) {
    Store *s = open_ok(loc);
    Error err = {0};
    begin_ok(s);
    cr_assert(store_node_put(s, "n2", "{\"v\":1}", &err) >= 0, "%s", error_message(&err));
    cr_assert(store_node_put(s, "n1", "{\"v\":1}", &err) >= 0);
    cr_assert(store_node_put(s, "n3", "{\"v\":1}", &err) >= 0);
    cr_assert(store_node_put(s, "n2", "{\"v\":2}", &err) >= 0, "a put replaces");
    cr_assert(store_node_delete(s, "n3", &err) >= 0);
    cr_assert(store_node_delete(s, "absent", &err) >= 0, "deleting nothing is no error");
    commit_ok(s);
    Seen seen = {0};
    cr_assert(store_node_foreach(s, seen_keyed, &seen, &err) >= 0);
    cr_assert_str_eq(seen.text, "n1={\"v\":1};n2={\"v\":2};");
    /* A callback's error stops the walk and comes back. */
    seen = (Seen){.stop_after = 1};
    cr_assert_eq(store_node_foreach(s, seen_keyed, &seen, &err), -ECANCELED);
    cr_assert_eq(seen.n, 1);
    store_close(s);
}

STORE_TEST(r16_store_requests_upsert_in_id_order_with_unique_idempotency_keys) {
    Store *s = open_ok(loc);
    Error err = {0};
    begin_ok(s);
    StoreRequest a = {.id = 2, .user = "alice", .idem_key = "k1", .state = "pending", .json = "{}"};
    StoreRequest b = {
            .id = 1, .user = "bob", .idem_key = NULL, .state = "placed", .json = "{\"x\":1}"};
    /* ids beyond 32 bits must survive (PostgreSQL BIGINT). */
    StoreRequest c = {
            .id = 5000000000ull, .user = "bob", .idem_key = "k1", .state = "pending", .json = "{}"};
    cr_assert(store_request_put(s, &a, &err) >= 0, "%s", error_message(&err));
    cr_assert(store_request_put(s, &b, &err) >= 0);
    cr_assert(store_request_put(s, &c, &err) >= 0, "the same key of another user is fine");
    a.state = "placed";
    a.json = "{\"p\":1}";
    cr_assert(store_request_put(s, &a, &err) >= 0, "a put updates state and document");
    commit_ok(s);
    Seen seen = {0};
    cr_assert(store_request_foreach(s, seen_request, &seen, &err) >= 0);
    cr_assert_str_eq(seen.text, "1:bob:-:placed:{\"x\":1};2:alice:k1:placed:{\"p\":1};"
                                "5000000000:bob:k1:pending:{};");

    /* The same user's key twice is refused (the server's idempotency rests on it). */
    Error dup = {0};
    StoreRequest d = {.id = 9, .user = "alice", .idem_key = "k1", .state = "pending", .json = "{}"};
    begin_ok(s);
    cr_assert_eq(store_request_put(s, &d, &dup), -EEXIST, "%s", dup.message);
    store_rollback(s);
    seen = (Seen){0};
    cr_assert(store_request_foreach(s, seen_request, &seen, &err) >= 0);
    cr_assert_eq(seen.n, 3);
    store_close(s);
}

STORE_TEST(r16_store_events_come_back_after_a_sequence_number) {
    Store *s = open_ok(loc);
    Error err = {0};
    begin_ok(s);
    for (uint64_t i = 1; i <= 4; i++) {
        char obj[16];
        snprintf(obj, sizeof(obj), "r%llu", (unsigned long long)i);
        StoreEvent e = {.seq = i,
                        .time_ms = 1700000000000 + (int64_t)i,
                        .actor = "alice",
                        .type = "request.placed",
                        .object = obj,
                        .json = "{}"};
        cr_assert(store_event_append(s, &e, &err) >= 0, "%s", error_message(&err));
    }
    commit_ok(s);
    Seen seen = {0};
    cr_assert(store_event_foreach(s, 2, seen_event, &seen, &err) >= 0);
    cr_assert_str_eq(seen.text, "3@1700000000003:alice:request.placed:r3:{};"
                                "4@1700000000004:alice:request.placed:r4:{};");
    seen = (Seen){0};
    cr_assert(store_event_foreach(s, 4, seen_event, &seen, &err) >= 0);
    cr_assert_eq(seen.n, 0);
    /* A sequence number is never reused. */
    StoreEvent again = {
            .seq = 3, .time_ms = 1, .actor = "x", .type = "t", .object = "o", .json = "{}"};
    begin_ok(s);
    cr_assert_eq(store_event_append(s, &again, &err), -EEXIST);
    store_rollback(s);
    store_close(s);
}

STORE_TEST(r16_store_fleet_records_put_delete_in_key_order) {
    Store *s = open_ok(loc);
    Error err = {0};
    begin_ok(s);
    cr_assert(store_fleet_put(s, "task/2", "{\"t\":2}", &err) >= 0, "%s", error_message(&err));
    cr_assert(store_fleet_put(s, "switch/n1", "{\"m\":\"vm\"}", &err) >= 0);
    cr_assert(store_fleet_put(s, "agent/n1", "{}", &err) >= 0);
    cr_assert(store_fleet_put(s, "switch/n1", "{\"m\":\"container\"}", &err) >= 0);
    cr_assert(store_fleet_delete(s, "task/2", &err) >= 0);
    commit_ok(s);
    Seen seen = {0};
    cr_assert(store_fleet_foreach(s, seen_keyed, &seen, &err) >= 0);
    cr_assert_str_eq(seen.text, "agent/n1={};switch/n1={\"m\":\"container\"};");
    store_close(s);
}

STORE_TEST(r16_store_rollback_discards_the_whole_transaction) {
    Store *s = open_ok(loc);
    Error err = {0};
    begin_ok(s);
    cr_assert(store_node_put(s, "keep", "{}", &err) >= 0);
    commit_ok(s);
    begin_ok(s);
    cr_assert(store_node_put(s, "gone", "{}", &err) >= 0);
    cr_assert(store_node_delete(s, "keep", &err) >= 0);
    StoreRequest r = {.id = 1, .user = "u", .state = "pending", .json = "{}"};
    cr_assert(store_request_put(s, &r, &err) >= 0);
    store_rollback(s);
    store_rollback(s); /* a second rollback (nothing open) is harmless */
    Seen seen = {0};
    cr_assert(store_node_foreach(s, seen_keyed, &seen, &err) >= 0);
    cr_assert_str_eq(seen.text, "keep={};");
    seen = (Seen){0};
    cr_assert(store_request_foreach(s, seen_request, &seen, &err) >= 0);
    cr_assert_eq(seen.n, 0);
    store_close(s);
}

STORE_TEST(r16_store_a_committed_transaction_survives_closing_and_an_open_one_does_not) {
    Store *s = open_ok(loc);
    Error err = {0};
    begin_ok(s);
    StoreRequest r = {
            .id = 7, .user = "u", .idem_key = "k", .state = "placed", .json = "{\"gpu\":0}"};
    cr_assert(store_request_put(s, &r, &err) >= 0);
    commit_ok(s);
    begin_ok(s);
    StoreRequest lost = {.id = 8, .user = "u", .state = "pending", .json = "{}"};
    cr_assert(store_request_put(s, &lost, &err) >= 0);
    store_close(s); /* never committed: as if the server died here */

    s = open_ok(loc);
    Seen seen = {0};
    cr_assert(store_request_foreach(s, seen_request, &seen, &err) >= 0);
    cr_assert_str_eq(seen.text, "7:u:k:placed:{\"gpu\":0};");
    store_close(s);
}

STORE_TEST(r16_store_a_second_connection_sees_only_what_was_committed) {
    Store *w = open_ok(loc), *r = open_ok(loc);
    Error err = {0};
    begin_ok(w);
    cr_assert(store_token_add(w, "ff", "u", "user", NULL, &err) >= 0);
    StoreToken t = {0};
    /* SQLite WAL and PostgreSQL both give the reader the last committed state. */
    cr_assert_eq(store_token_lookup(r, "ff", &t, &err), -ENOENT);
    commit_ok(w);
    cr_assert(store_token_lookup(r, "ff", &t, &err) >= 0);
    store_token_done(&t);
    store_close(w);
    store_close(r);
}

/* --- refused at start, each with a sentence --- */

Test(store, r16_store_sqlite_refuses_a_newer_schema) {
    char loc[256];
    new_location(false, loc, sizeof(loc));
    store_close(open_ok(loc));
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(loc, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    Store *s = NULL;
    Error err = {0};
    cr_assert_eq(store_open(loc, &s, &err), -EPROTO);
    cr_assert(strstr(err.message, "newer than this einsora knows"), "%s", err.message);
}

/* Bad input: another program's SQLite database given as --state is refused naming it, and
 * gets none of Einsora's tables (its own are as they were). */
Test(store, bad_input_another_programs_sqlite_database_is_refused_untouched) {
    char loc[256];
    new_location(false, loc, sizeof(loc));
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(loc, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db, "CREATE TABLE photos(x); INSERT INTO photos VALUES (1)", NULL,
                              NULL, NULL),
                 SQLITE_OK);
    sqlite3_close(db);
    Store *s = NULL;
    Error err = {0};
    cr_assert_eq(store_open(loc, &s, &err), -EPROTO);
    cr_assert(strstr(err.message, "is not an Einsora state file") && strstr(err.message, "photos"),
              "%s", err.message);
    cr_assert_eq(sqlite3_open(loc, &db), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    cr_assert_eq(sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master", -1, &st, NULL),
                 SQLITE_OK);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    cr_assert_eq(sqlite3_column_int(st, 0), 1, "only the photos table is there");
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* Bad input: a --state that is a directory, or a file that is not a state file, is refused
 * naming it, and left as it was (its mode too: a folder made 0600 cannot be entered). */
/* R16, bad input: a state file this user may not write (made read-only) is refused at open,
 * saying so, and left as it was: never opened read-only to fail at the first change after the
 * server said it listens, and never made writable behind the operator's back. Root writes any
 * file, so as root the open runs as nobody, in a folder nobody may enter. */
Test(store, bad_input_a_read_only_state_file_is_refused_and_left_read_only) {
    char loc[256];
    new_location(false, loc, sizeof(loc));
    store_close(open_ok(loc));
    cr_assert_eq(chmod(loc, 0400), 0);
    char dir[256];
    snprintf(dir, sizeof(dir), "%s", loc);
    *strrchr(dir, '/') = 0;
    cr_assert_eq(chmod(dir, 0755), 0);
    if (geteuid() == 0)
        cr_assert_eq(chown(loc, 65534, 65534), 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) < 0 || setuid(65534) < 0))
            _exit(3);
        Store *s = NULL;
        Error err = {0};
        int r = store_open(loc, &s, &err);
        if (r < 0 && r != -EROFS)
            fprintf(stderr, "store_open: %d %s\n", r, err.message);
        _exit(r == -EROFS && strstr(err.message, "is read-only") ? 0 : r >= 0 ? 1 : 2);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit %d (1: opened, 2: other error)",
              WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    struct stat st;
    cr_assert_eq(stat(loc, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0400, "mode %o", st.st_mode & 0777);
}

Test(store, bad_input_a_state_path_that_is_not_a_state_file_is_refused_untouched) {
    char dir[] = "/tmp/einsora-notstate-XXXXXX";
    cr_assert(mkdtemp(dir));
    cr_assert_eq(chmod(dir, 0755), 0);
    char file[sizeof(dir) + 16];
    snprintf(file, sizeof(file), "%s/notes.txt", dir);
    FILE *f = fopen(file, "w");
    cr_assert(f);
    fputs("these are notes, not a database, long enough for SQLite to read a header\n", f);
    fclose(f);
    cr_assert_eq(chmod(file, 0644), 0);
    Store *s = NULL;
    Error e1 = {0}, e2 = {0};
    cr_expect_eq(store_open(dir, &s, &e1), -EISDIR);
    cr_expect(strstr(e1.message, "is a directory"), "%s", e1.message);
    cr_expect_lt(store_open(file, &s, &e2), 0);
    cr_expect(strstr(e2.message, file) && strstr(e2.message, "not a database"), "%s", e2.message);
    struct stat st;
    cr_assert_eq(stat(dir, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0755, "the folder's mode is as it was");
    cr_assert_eq(stat(file, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0644, "the file's mode is as it was");
    unlink(file);
    char side[sizeof(file) + 8];
    snprintf(side, sizeof(side), "%s-wal", file), unlink(side);
    snprintf(side, sizeof(side), "%s-shm", file), unlink(side);
    rmdir(dir);
}

Test(store, r16_store_postgresql_refuses_a_bad_conninfo) {
    Store *s = NULL;
    Error err = {0};
    cr_assert_eq(store_open("postgresql://[::1", &s, &err), -EINVAL);
    cr_assert(strstr(err.message, "bad PostgreSQL connection string"), "%s", err.message);
    cr_assert_null(s);
}

Test(store, r16_store_postgresql_refuses_an_unreachable_server) {
    pg_test_start(&pg);
    char loc[256];
    /* A socket directory with no server in it. */
    snprintf(loc, sizeof(loc), "host=/nonexistent-einsora user=einsora dbname=x connect_timeout=2");
    Store *s = NULL;
    Error err = {0};
    cr_assert_eq(store_open(loc, &s, &err), -ECONNREFUSED);
    cr_assert(strstr(err.message, "cannot connect to PostgreSQL"), "%s", err.message);
    /* A database that does not exist on a server that does. */
    pg_test_conninfo(&pg, "no_such_db", loc, sizeof(loc));
    error_clear(&err);
    cr_assert_eq(store_open(loc, &s, &err), -ECONNREFUSED);
    cr_assert(strstr(err.message, "no_such_db"), "%s", err.message);
}

Test(store, r16_store_postgresql_refuses_a_newer_schema) {
    char loc[256];
    new_location(true, loc, sizeof(loc));
    store_close(open_ok(loc));
    cr_assert_eq(
            pg_test_exec(loc, "UPDATE einsora_meta SET value = '99' WHERE key = 'schema_version'"),
            0);
    Store *s = NULL;
    Error err = {0};
    cr_assert_eq(store_open(loc, &s, &err), -EPROTO);
    cr_assert(strstr(err.message, "schema version 99, newer than this einsora knows (3)"), "%s",
              err.message);
}

/* A schema version that is no number is a damaged schema, said so, not read as 0 (which ran
 * the first migration again and failed on "relation tokens already exists"). */
Test(store, r16_store_postgresql_refuses_a_schema_version_that_is_no_number) {
    char loc[256];
    new_location(true, loc, sizeof(loc));
    store_close(open_ok(loc));
    cr_assert_eq(
            pg_test_exec(loc, "UPDATE einsora_meta SET value = 'abc' WHERE key = 'schema_version'"),
            0);
    Store *s = NULL;
    Error err = {0};
    cr_assert_eq(store_open(loc, &s, &err), -EPROTO);
    cr_assert(strstr(err.message, "schema version 'abc'") && strstr(err.message, "damaged"), "%s",
              err.message);
}

Test(store, r16_store_postgresql_refuses_a_database_of_another_site) {
    char loc[256];
    new_location(true, loc, sizeof(loc));
    Store *s = NULL;
    Error err = {0};
    cr_assert(store_open_site(loc, "paris", &s, &err) >= 0, "%s", error_message(&err));
    store_close(s);
    s = NULL;
    cr_assert_eq(store_open_site(loc, "berlin", &s, &err), -EEXIST);
    cr_assert(strstr(err.message, "belongs to the Einsora site 'paris', not 'berlin'"), "%s",
              err.message);
    cr_assert_null(s);
    cr_assert(store_open_site(loc, "paris", &s, &err) >= 0, "its own site still opens it");
    store_close(s);
}

/* The token verbs open the store for any site: on a database a `serve --site paris` made,
 * and on a fresh one without claiming it (docs/postgresql.md makes the first admin token
 * before the first replica starts). */
Test(store, r16_token_verbs_work_on_a_sites_database_and_claim_no_site) {
    char fresh[256], claimed[256];
    new_location(true, fresh, sizeof(fresh));
    new_location(true, claimed, sizeof(claimed));
    Store *s = NULL;
    Error err = {0};
    cr_assert(store_open_site(claimed, "paris", &s, &err) >= 0, "%s", error_message(&err));
    store_close(s);
    const char *locs[] = {fresh, claimed};
    for (size_t i = 0; i < 2; i++) {
        char *out = NULL, *errs = NULL;
        int rc = run_einsora(&out, &errs, "token", "create", "--state", locs[i], "--user", "root",
                             "--role", "admin", NULL);
        cr_expect_eq(rc, 0, "%s: %s", locs[i], errs);
        free(out), free(errs);
        rc = run_einsora(&out, &errs, "token", "list", "--state", locs[i], NULL);
        cr_expect_eq(rc, 0, "%s: %s", locs[i], errs);
        cr_expect(strstr(out, "root"), "%s", out);
        free(out), free(errs);
    }
    /* The fresh database is still anyone's: the first replica's --site claims it. */
    s = NULL;
    cr_assert(store_open_site(fresh, "paris", &s, &err) >= 0, "%s", error_message(&err));
    store_close(s);
    s = NULL;
    cr_assert_eq(store_open_site(fresh, "berlin", &s, &err), -EEXIST);
}

Test(store, r16_store_postgresql_fence_refuses_a_superseded_leader) {
    char loc[256];
    new_location(true, loc, sizeof(loc));
    Store *s = open_ok(loc);
    Error err = {0};
    cr_assert_eq(pg_test_exec(loc, "UPDATE einsora_leader SET epoch = 3"), 0);
    store_pg_set_fence(s, 3, 0);
    begin_ok(s);
    cr_assert(store_node_put(s, "n1", "{}", &err) >= 0);
    commit_ok(s);
    /* Another replica takes over: the old leader's next transaction is refused. */
    cr_assert_eq(pg_test_exec(loc, "UPDATE einsora_leader SET epoch = 4"), 0);
    cr_assert_eq(store_begin(s, &err), -ESTALE);
    cr_assert(strstr(err.message, "no longer the leader"), "%s", err.message);
    store_close(s);
}

/* R16: a write transaction of the leader holds the lease row so that a takeover waits for it
 * (a takeover locks the row FOR UPDATE, leader.c), but the leader's own renewal -- an UPDATE of
 * the expiry alone -- does not: a transaction longer than a lease (a takeover's load of a long
 * queue) would otherwise let the lease run out under the leader holding it. */
Test(store, r16_store_postgresql_fence_holds_off_a_takeover_but_not_the_renewal) {
    char loc[256];
    new_location(true, loc, sizeof(loc));
    Store *s = open_ok(loc);
    cr_assert_eq(pg_test_exec(loc, "UPDATE einsora_leader SET epoch = 3"), 0);
    store_pg_set_fence(s, 3, 0);
    begin_ok(s); /* the fence is checked, and its lock held until the commit */
    cr_expect_eq(pg_test_exec(loc, "SET lock_timeout = 5000; UPDATE einsora_leader SET "
                                   "expires_at = clock_timestamp() + interval '3 s' WHERE id = 1 "
                                   "AND epoch = 3"),
                 0, "the renewal goes through while the transaction is open");
    cr_expect_neq(pg_test_exec(loc, "SET lock_timeout = 200; WITH held AS (SELECT id FROM "
                                    "einsora_leader WHERE id = 1 FOR UPDATE) UPDATE "
                                    "einsora_leader SET epoch = epoch + 1 FROM held WHERE "
                                    "einsora_leader.id = held.id"),
                  0, "a takeover waits for the transaction (here: past its lock timeout)");
    commit_ok(s);
    cr_expect_eq(pg_test_exec(loc, "SET lock_timeout = 5000; WITH held AS (SELECT id FROM "
                                   "einsora_leader WHERE id = 1 FOR UPDATE) UPDATE "
                                   "einsora_leader SET epoch = epoch + 1 FROM held WHERE "
                                   "einsora_leader.id = held.id"),
                 0, "once it committed, the takeover goes through");
    Error err = {0};
    cr_assert_eq(store_begin(s, &err), -ESTALE, "and the old leader's next transaction fails");
    store_close(s);
}

Test(store, r16_store_postgresql_reconnects_after_postgresql_restarts) {
    char loc[256];
    new_location(true, loc, sizeof(loc));
    Store *s = open_ok(loc);
    Error err = {0};
    begin_ok(s);
    cr_assert(store_node_put(s, "before", "{}", &err) >= 0);
    commit_ok(s);
    cr_assert(pg_test_restart(&pg) >= 0);
    /* The dead connection is found at the next begin and reopened (backoff permitting); a
     * deadline, not a count, bounds the wait. */
    int r = -1;
    for (int i = 0; i < 600 && r < 0; i++) {
        error_clear(&err);
        r = store_begin(s, &err);
        if (r < 0) {
            cr_assert_eq(r, -ENOTCONN, "%s", err.message);
            usleep(50 * 1000);
        }
    }
    cr_assert(r >= 0, "%s", err.message);
    cr_assert(store_node_put(s, "after", "{}", &err) >= 0, "%s", error_message(&err));
    commit_ok(s);
    Seen seen = {0};
    cr_assert(store_node_foreach(s, seen_keyed, &seen, &err) >= 0);
    cr_assert_str_eq(seen.text, "after={};before={};");
    store_close(s);
}

Test(store, r16_serve_refuses_another_sites_database_and_a_bad_store_with_a_sentence) {
    char loc[256];
    new_location(true, loc, sizeof(loc));
    Store *s = NULL;
    Error err = {0};
    cr_assert(store_open_site(loc, "paris", &s, &err) >= 0, "%s", error_message(&err));
    store_close(s);
    char *out = NULL, *errs = NULL;
    int rc = run_einsora(&out, &errs, "serve", "--listen", "127.0.0.1:0", "--store", loc, "--site",
                         "berlin", NULL);
    cr_assert_neq(rc, 0);
    cr_assert(strstr(errs, "belongs to the Einsora site 'paris', not 'berlin'"), "%s", errs);
    free(out);
    free(errs);
    rc = run_einsora(&out, &errs, "serve", "--listen", "127.0.0.1:0", "--store",
                     "host=/nonexistent-einsora user=einsora dbname=x connect_timeout=2", NULL);
    cr_assert_neq(rc, 0);
    cr_assert(strstr(errs, "cannot connect to PostgreSQL"), "%s", errs);
    free(out);
    free(errs);
}

/* --- expiring tokens and retention, on both backends --- */

static int seen_token(const char *hash_hex, const StoreToken *t, void *userdata) {
    Seen *seen = userdata;
    size_t len = strlen(seen->text);
    snprintf(seen->text + len, sizeof(seen->text) - len, "%s:%s:%s:%s:%lld;", hash_hex, t->user,
             t->role, t->nodes ? t->nodes : "-", (long long)t->expires_ms);
    return ++seen->n == seen->stop_after ? -ECANCELED : 0;
}

STORE_TEST(r12_store_tokens_expire_list_in_user_order_and_revoke_by_a_unique_prefix) {
    Store *s = open_ok(loc);
    Error err = {0};
    begin_ok(s);
    cr_assert(store_token_add_expiring(s, "aaaa1111bbbb", "zoe", "user", NULL, 1800000000000,
                                       &err) >= 0,
              "%s", error_message(&err));
    cr_assert(store_token_add_expiring(s, "aaaa1111cccc", "alice", "owner", "n1", 0, &err) >= 0);
    cr_assert(store_token_add(s, "dddd2222eeee", "Bob", "admin", NULL, &err) >= 0);
    commit_ok(s);
    StoreToken t = {0};
    cr_assert(store_token_lookup(s, "aaaa1111bbbb", &t, &err) >= 0);
    cr_assert_eq(t.expires_ms, 1800000000000);
    store_token_done(&t);
    cr_assert(store_token_lookup(s, "dddd2222eeee", &t, &err) >= 0);
    cr_assert_eq(t.expires_ms, 0, "a token without expiry never expires");
    store_token_done(&t);
    Seen seen = {0};
    cr_assert(store_token_foreach(s, seen_token, &seen, &err) >= 0, "%s", error_message(&err));
    cr_assert_str_eq(seen.text, "dddd2222eeee:Bob:admin:-:0;aaaa1111cccc:alice:owner:n1:0;"
                                "aaaa1111bbbb:zoe:user:-:1800000000000;");

    /* Refused prefixes change nothing. */
    static const struct {
        const char *prefix;
        int code;
    } bad[] = {{"aaaa111", -EINVAL},
               {"AAAA1111", -EINVAL},
               {"aaaa1111", -EEXIST},
               {"ffff0000", -ENOENT}};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        Error e = {0};
        begin_ok(s);
        cr_assert_eq(store_token_revoke(s, bad[i].prefix, &e), bad[i].code, "%s", bad[i].prefix);
        cr_assert(e.message[0], "a sentence for %s", bad[i].prefix);
        store_rollback(s);
    }
    begin_ok(s);
    cr_assert(store_token_revoke(s, "aaaa1111b", &err) >= 0, "%s", error_message(&err));
    commit_ok(s);
    cr_assert_eq(store_token_lookup(s, "aaaa1111bbbb", &t, &err), -ENOENT);
    seen = (Seen){0};
    cr_assert(store_token_foreach(s, seen_token, &seen, &err) >= 0);
    cr_assert_eq(seen.n, 2);
    store_close(s);
}

static void put_request(Store *s, uint64_t id, const char *key, const char *state,
                        int64_t updated_ms) {
    char doc[64];
    snprintf(doc, sizeof(doc), "{\"updated_ms\":%lld}", (long long)updated_ms);
    StoreRequest r = {.id = id, .user = "alice", .idem_key = key, .state = state, .json = doc};
    Error err = {0};
    cr_assert(store_request_put(s, &r, &err) >= 0, "%s", error_message(&err));
}

static void put_event(Store *s, uint64_t seq, int64_t time_ms) {
    StoreEvent e = {
            .seq = seq, .time_ms = time_ms, .actor = "a", .type = "t", .object = "o", .json = "{}"};
    Error err = {0};
    cr_assert(store_event_append(s, &e, &err) >= 0, "%s", error_message(&err));
}

STORE_TEST(r12_store_prune_drops_old_ended_requests_and_an_event_prefix_never_the_newest) {
    Store *s = open_ok(loc);
    Error err = {0};
    begin_ok(s);
    put_request(s, 1, "k1", "released", 100);
    put_request(s, 2, NULL, "placed", 100);     /* live: kept however old */
    put_request(s, 3, NULL, "cancelled", 5000); /* ended after the cutoff */
    put_request(s, 4, NULL, "refused", 200);
    put_request(s, 5, NULL, "ended", 100); /* the newest row: kept */
    for (uint64_t i = 1; i <= 4; i++)
        put_event(s, i, i <= 2 ? (int64_t)i * 100 : 5000 + (int64_t)i);
    cr_assert(store_prune(s, 1000, &err) >= 0, "%s", error_message(&err));
    commit_ok(s);
    Seen seen = {0};
    cr_assert(store_request_foreach(s, seen_request, &seen, &err) >= 0);
    cr_assert_str_eq(seen.text, "2:alice:-:placed:{\"updated_ms\":100};"
                                "3:alice:-:cancelled:{\"updated_ms\":5000};"
                                "5:alice:-:ended:{\"updated_ms\":100};");
    seen = (Seen){0};
    cr_assert(store_event_foreach(s, 0, seen_event, &seen, &err) >= 0);
    cr_assert_eq(seen.n, 2);
    cr_assert(strncmp(seen.text, "3@", 2) == 0, "a gap-free suffix is left: %s", seen.text);
    /* Everything old: the newest event stays, so the next seq follows it. */
    begin_ok(s);
    cr_assert(store_prune(s, 1000000, &err) >= 0);
    commit_ok(s);
    seen = (Seen){0};
    cr_assert(store_event_foreach(s, 0, seen_event, &seen, &err) >= 0);
    cr_assert_str_eq(seen.text, "4@5004:a:t:o:{};");
    seen = (Seen){0};
    cr_assert(store_request_foreach(s, seen_request, &seen, &err) >= 0);
    cr_assert(strstr(seen.text, "5:alice:-:ended") && !strstr(seen.text, "3:alice"), "%s",
              seen.text);
    store_close(s);
}

STORE_TEST(r12_store_a_forgotten_idempotency_key_may_be_used_again) {
    Store *s = open_ok(loc);
    Error err = {0};
    begin_ok(s);
    put_request(s, 1, "k1", "released", 100);
    cr_assert(store_request_forget_key(s, 1, &err) >= 0, "%s", error_message(&err));
    put_request(s, 2, "k1", "pending", 200);
    commit_ok(s);
    Seen seen = {0};
    cr_assert(store_request_foreach(s, seen_request, &seen, &err) >= 0);
    cr_assert_str_eq(seen.text, "1:alice:-:released:{\"updated_ms\":100};"
                                "2:alice:k1:pending:{\"updated_ms\":200};");
    store_close(s);
}

/* A state file main's einsora left at version 2 (before expiring tokens) gains migration 3
 * and keeps its tokens, which never expire. */
Test(store, r12_store_sqlite_file_at_version_2_migrates_to_3_keeping_tokens) {
    char loc[256];
    new_location(false, loc, sizeof(loc));
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(loc, &db), SQLITE_OK);
    cr_assert_eq(
            sqlite3_exec(db,
                         "CREATE TABLE tokens (hash TEXT PRIMARY KEY, user TEXT NOT NULL, "
                         "role TEXT NOT NULL, nodes TEXT);"
                         "CREATE TABLE nodes (name TEXT PRIMARY KEY, doc TEXT NOT NULL);"
                         "CREATE TABLE requests (id INTEGER PRIMARY KEY, user TEXT NOT NULL, "
                         "idem_key TEXT, state TEXT NOT NULL, doc TEXT NOT NULL);"
                         "CREATE TABLE events (seq INTEGER PRIMARY KEY, time_ms INTEGER NOT NULL,"
                         " actor TEXT NOT NULL, type TEXT NOT NULL, object TEXT NOT NULL, doc TEXT "
                         "NOT NULL);"
                         "CREATE TABLE fleet (key TEXT PRIMARY KEY, doc TEXT NOT NULL);"
                         "INSERT INTO tokens VALUES ('aa11', 'alice', 'admin', NULL);"
                         "PRAGMA user_version = 2;",
                         NULL, NULL, NULL),
            SQLITE_OK);
    sqlite3_close(db);
    Store *s = open_ok(loc);
    cr_assert_eq(store_schema_version(s), 3);
    StoreToken t = {0};
    Error err = {0};
    cr_assert(store_token_lookup(s, "aa11", &t, &err) >= 0, "%s", error_message(&err));
    cr_assert_str_eq(t.user, "alice");
    cr_assert_eq(t.expires_ms, 0);
    store_token_done(&t);
    store_close(s);
}

int main(int argc, char *argv[]) {
    if (pg_test_start(&pg) < 0)
        return 1;
    struct criterion_test_set *tests = criterion_initialize();
    int result = 0;
    if (criterion_handle_args(argc, argv, true))
        result = !criterion_run_all_tests(tests);
    criterion_finalize(tests);
    pg_test_stop(&pg);
    return result;
}
