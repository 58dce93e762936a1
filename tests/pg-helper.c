/* pg-helper.c: a real PostgreSQL 15 in a temporary directory for the tests. */
#include "pg-helper.h"

#include <errno.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run argv (as `postgres` when we are root), quietly; returns its exit status or -1. */
static int run_pg_tool(const PgTest *pg, const char *const *argv) {
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        char log[256];
        snprintf(log, sizeof(log), "%s.tool.log", pg->dir);
        FILE *f = fopen(log, "ae");
        if (f) {
            dup2(fileno(f), 1);
            dup2(fileno(f), 2);
        }
        const char *args[32];
        size_t n = 0;
        if (geteuid() == 0) {
            args[n++] = "runuser";
            args[n++] = "-u";
            args[n++] = "postgres";
            args[n++] = "--";
        }
        for (size_t i = 0; argv[i] && n < 31; i++)
            args[n++] = argv[i];
        args[n] = NULL;
        execvp(args[0], (char *const *)args);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int pg_test_pg_ctl(PgTest *pg, const char *action) {
    char opts[300], log[256];
    /* Tests check Einsora, not PostgreSQL's own crash safety: fsync stays off there unless
     * durable is set (the benchmark). */
    snprintf(opts, sizeof(opts), "-k %s -c listen_addresses='' -c max_connections=200%s", pg->dir,
             pg->durable ? "" : " -c fsync=off");
    snprintf(log, sizeof(log), "%s/server.log", pg->dir);
    const char *argv[] = {PG_TEST_BIN "/pg_ctl",
                          "-D",
                          pg->dir,
                          "-l",
                          log,
                          "-o",
                          opts,
                          "-w",
                          "-t",
                          "60",
                          "-m",
                          "fast",
                          action,
                          NULL};
    return run_pg_tool(pg, argv) == 0 ? 0 : -EIO;
}

int pg_test_start(PgTest *pg) {
    *pg = (PgTest){.durable = pg->durable};
    const char *running = getenv(PG_TEST_ENV);
    if (running) {
        snprintf(pg->dir, sizeof(pg->dir), "%s", running);
        return 0;
    }
    snprintf(pg->dir, sizeof(pg->dir), "/tmp/einsora-pg-XXXXXX");
    if (!mkdtemp(pg->dir))
        return -errno;
    if (geteuid() == 0) {
        struct passwd *pw = getpwnam("postgres");
        if (!pw || chown(pg->dir, pw->pw_uid, pw->pw_gid) < 0) {
            fprintf(stderr, "pg-helper: no `postgres` user to run PostgreSQL as\n");
            rmdir(pg->dir);
            return -ENOENT;
        }
    }
    const char *initdb[] = {PG_TEST_BIN "/initdb", "-D", pg->dir, "-A", "trust", "-U", "einsora",
                            "--no-sync",           NULL};
    if (run_pg_tool(pg, initdb) != 0 || pg_test_pg_ctl(pg, "start") < 0) {
        fprintf(stderr, "pg-helper: cannot start PostgreSQL in %s (see %s.tool.log)\n", pg->dir,
                pg->dir);
        return -EIO;
    }
    pg->owner = 1;
    setenv(PG_TEST_ENV, pg->dir, 1);
    return 0;
}

void pg_test_stop(PgTest *pg) {
    if (!pg->owner)
        return;
    (void)pg_test_pg_ctl(pg, "stop");
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s.tool.log'", pg->dir, pg->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "pg-helper: cannot remove %s\n", pg->dir);
    pg->owner = 0;
}

int pg_test_restart(PgTest *pg) {
    return pg_test_pg_ctl(pg, "restart");
}

void pg_test_conninfo(const PgTest *pg, const char *db, char *buf, size_t size) {
    snprintf(buf, size, "host=%s user=einsora dbname=%s", pg->dir, db ? db : "postgres");
}

static void quiet(void *userdata, const char *message) {
}

int pg_test_exec(const char *conninfo, const char *sql) {
    PGconn *c = PQconnectdb(conninfo);
    int r = -ECONNREFUSED;
    if (PQstatus(c) == CONNECTION_OK) {
        PQsetNoticeProcessor(c, quiet, NULL);
        PGresult *res = PQexec(c, sql);
        ExecStatusType st = PQresultStatus(res);
        r = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? 0 : -EIO;
        PQclear(res);
    }
    if (r < 0)
        fprintf(stderr, "pg-helper: %s: %s", sql, PQerrorMessage(c));
    PQfinish(c);
    return r;
}

int pg_test_new_db(const PgTest *pg, char *buf, size_t size) {
    static atomic_uint counter;
    char name[64], sql[128], admin[256];
    snprintf(name, sizeof(name), "t_%d_%u", (int)getpid(), atomic_fetch_add(&counter, 1));
    snprintf(sql, sizeof(sql), "CREATE DATABASE %s", name);
    pg_test_conninfo(pg, NULL, admin, sizeof(admin));
    int r = pg_test_exec(admin, sql);
    if (r >= 0)
        pg_test_conninfo(pg, name, buf, size);
    return r;
}
