/* pg-helper.h: a real PostgreSQL 15 for tests, started in a temporary directory.
 *
 * initdb runs as the unprivileged `postgres` user when the tests run as root (CI), the
 * server listens on a unix socket in the directory only (no TCP), and it is stopped and
 * removed by pg_test_stop(). A test binary starts one server in its main() and each test
 * takes a fresh database of its own. The benchmarks use it too, so it has no test
 * framework in it: callers assert on the returns. */
#pragma once

#include <stddef.h>

#define PG_TEST_BIN "/usr/lib/postgresql/15/bin"
#define PG_TEST_ENV "EINSORA_TEST_PG_DIR" /* the running server's directory, for workers */

typedef struct PgTest {
    char dir[128]; /* data directory and socket directory */
    int owner;     /* this process started it (and stops it) */
    int durable;   /* set before start: fsync on (benchmarks); tests run with fsync off */
} PgTest;

/* Start a server (or, in a worker process, find the one its parent started through
 * PG_TEST_ENV). Returns 0, or a negative errno with a line on stderr. */
int pg_test_start(PgTest *pg);
/* Stop the server (when this process owns it) and remove its directory. */
void pg_test_stop(PgTest *pg);
/* pg_ctl stop -m fast and start again (the "PostgreSQL restarted" case); or just one. */
int pg_test_restart(PgTest *pg);
int pg_test_pg_ctl(PgTest *pg, const char *action);

/* The conninfo of the server's maintenance database, or of database `db`. */
void pg_test_conninfo(const PgTest *pg, const char *db, char *buf, size_t size);
/* Create a fresh, uniquely named database; writes its conninfo into buf. Returns 0, or a
 * negative errno with a line on stderr (also for the other calls). */
int pg_test_new_db(const PgTest *pg, char *buf, size_t size);
/* Run one SQL command on database conninfo. */
int pg_test_exec(const char *conninfo, const char *sql);
