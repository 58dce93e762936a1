/* test-records-copies.c: the workloads file's two copies (R7): written over the older copy in
 * place, read from the newest whole one, the first format read and replaced, growth past a
 * slot, and damaged copies. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/pci-sysfs.h"
#include "agent/records.h"
#include "helpers.h"
#include "util/fileio.h"
#include "util/macro.h"

#define MAGIC "# einsora agent records v2: "

typedef struct Fixture {
    char dir[64], path[96];
} Fixture;

static void fixture_init(Fixture *f) {
    snprintf(f->dir, sizeof(f->dir), "/tmp/einsora-records-XXXXXX");
    cr_assert(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/workloads", f->dir);
}

static void fixture_done(Fixture *f) {
    cr_expect_eq(remove_temp_tree(f->dir), 0);
}

static struct stat stat_of(const char *path) {
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "%s: %s", path, strerror(errno));
    return st;
}

/* The records listed, as "<bdf> <id>;" each, into buf; the list's return. */
static int listed(const Fixture *f, char *buf, size_t size, Error *err) {
    char **b = NULL, **i = NULL;
    size_t n = 0, k = 0;
    int r = agent_records_list(f->dir, &b, &i, &n, err);
    buf[0] = '\0';
    for (size_t j = 0; r >= 0 && j < n && k < size; j++)
        k += (size_t)snprintf(buf + k, size - k, "%s %s;", b[j], i[j]);
    strv_free(b, n);
    strv_free(i, n);
    return r;
}

static void expect_listed(const Fixture *f, const char *want) {
    char got[32768];
    Error err = {0};
    cr_assert_eq(listed(f, got, sizeof(got), &err), 0, "%s", error_message(&err));
    cr_expect_str_eq(got, want);
}

static void add(const Fixture *f, const char *bdf, const char *id) {
    Error err = {0};
    cr_assert_eq(agent_records_add(f->dir, bdf, id, &err), 0, "%s", error_message(&err));
}

/* Offsets of the file's two copies: 0 and half its size. */
static size_t slot_of(const Fixture *f) {
    return (size_t)stat_of(f->path).st_size / 2;
}

/* Overwrite one byte of the file at off (a torn or damaged write). */
static void damage(const Fixture *f, size_t off) {
    int fd = open(f->path, O_RDWR);
    cr_assert_geq(fd, 0);
    char c;
    cr_assert_eq(pread(fd, &c, 1, (off_t)off), 1);
    c ^= 0x20;
    cr_assert_eq(pwrite(fd, &c, 1, (off_t)off), 1);
    close(fd);
}

/* A workload's start and stop change the records where they are: the same file (inode), the
 * same size, the two copies taking turns; every write is read back whole. */
Test(records_copies, r7_records_are_written_over_the_older_copy_in_place) {
    Fixture f;
    fixture_init(&f);
    add(&f, "0000:01:00.0", "7");
    struct stat first = stat_of(f.path);
    char *text = NULL;
    cr_assert_eq(read_full_file(f.path, 1 << 20, &text, NULL), 0);
    cr_expect(!strncmp(text, MAGIC "seq 1 ", strlen(MAGIC "seq 1 ")), "%.60s", text);
    free(text);
    add(&f, "0000:02:00.0", "8");
    Error err = {0};
    cr_assert_eq(agent_records_remove(f.dir, "7", &err), 0, "%s", error_message(&err));
    add(&f, "0000:03:00.0", "9");
    struct stat now = stat_of(f.path);
    cr_expect_eq(now.st_ino, first.st_ino, "the file was replaced, not written in place");
    cr_expect_eq(now.st_size, first.st_size);
    expect_listed(&f, "0000:02:00.0 8;0000:03:00.0 9;");
    /* Four writes: seq 4 in the second copy, seq 3 in the first. */
    cr_assert_eq(read_full_file(f.path, 1 << 20, &text, NULL), 0);
    size_t slot = slot_of(&f);
    cr_expect(!strncmp(text, MAGIC "seq 3 ", strlen(MAGIC "seq 3 ")), "%.60s", text);
    cr_expect(!strncmp(text + slot, MAGIC "seq 4 ", strlen(MAGIC "seq 4 ")), "%.60s", text + slot);
    free(text);
    /* Shorter records leave no line of the copy they replace: seq 5 (first copy) holds 9
     * alone, seq 6 (second) nothing, where 8 and 9 were. */
    cr_assert_eq(agent_records_remove(f.dir, "8", &err), 0, "%s", error_message(&err));
    cr_assert_eq(agent_records_remove(f.dir, "9", &err), 0, "%s", error_message(&err));
    expect_listed(&f, "");
    cr_assert_eq(read_full_file(f.path, 1 << 20, &text, NULL), 0);
    cr_expect(!strstr(text, "0000:02:00.0 8\n"), "a line of an older copy is left");
    char *nine = strstr(text, "0000:03:00.0 9\n");
    cr_expect(nine && nine < text + slot && !strstr(nine + 1, "0000:03:00.0 9\n"),
              "9 is not in the first copy alone");
    free(text);
    char tmp[128];
    snprintf(tmp, sizeof(tmp), "%s.tmp", f.path);
    cr_expect_eq(access(tmp, F_OK), -1, "a temporary file was left behind");
    fixture_done(&f);
}

/* A crash in the middle of a write leaves that copy torn: the records read as the copy before
 * it, and the next write goes over the torn one. Both copies damaged is an error that names
 * the file, never an empty list (its GPUs would look free to the binding code), and the file
 * is left for a person to look at, as records that do not parse are. */
Test(records_copies, r7_a_torn_copy_reads_as_the_one_before_it_and_both_torn_is_an_error) {
    Fixture f;
    fixture_init(&f);
    add(&f, "0000:01:00.0", "7");
    add(&f, "0000:02:00.0", "8"); /* seq 2, the second copy */
    size_t slot = slot_of(&f);
    size_t body = strlen(MAGIC "seq 2 len 99 sum 0123456789abcdef\n"); /* into the body */
    damage(&f, slot + body + 3);
    expect_listed(&f, "0000:01:00.0 7;");
    add(&f, "0000:03:00.0", "9"); /* seq 2 again, over the torn copy */
    expect_listed(&f, "0000:01:00.0 7;0000:03:00.0 9;");
    damage(&f, 10); /* the first copy's header: the second is read, as the newest */
    expect_listed(&f, "0000:01:00.0 7;0000:03:00.0 9;");
    damage(&f, slot + body); /* the second copy's header or body */
    char got[512];
    Error err = {0};
    cr_expect_eq(listed(&f, got, sizeof(got), &err), -EBADMSG);
    cr_expect(strstr(error_message(&err), f.path) && strstr(error_message(&err), "whole"), "%s",
              error_message(&err));
    /* Nor is it written over: a change needs the records it changes. */
    err = (Error){0};
    cr_expect_eq(agent_records_add(f.dir, "0000:04:00.0", "10", &err), -EBADMSG);
    cr_expect_eq(listed(&f, got, sizeof(got), &err), -EBADMSG);
    fixture_done(&f);
}

/* A state folder from before the two copies: its lines are read as they are, and the next
 * write replaces the file with the two-copy one holding the same records and the change. */
Test(records_copies, r7_records_in_the_first_format_are_read_and_replaced_at_the_next_write) {
    Fixture f;
    fixture_init(&f);
    cr_assert_eq(write_string_file_atomic(f.path, "# old\n0000:01:00.0 7\n0000:02:00.0 7\n"), 0);
    expect_listed(&f, "0000:01:00.0 7;0000:02:00.0 7;");
    add(&f, "0000:03:00.0", "8");
    expect_listed(&f, "0000:01:00.0 7;0000:02:00.0 7;0000:03:00.0 8;");
    char *text = NULL;
    cr_assert_eq(read_full_file(f.path, 1 << 20, &text, NULL), 0);
    cr_expect(!strncmp(text, MAGIC, strlen(MAGIC)), "%.60s", text);
    free(text);
    fixture_done(&f);
}

/* Records that outgrow a copy's slot are written to a new, larger file (then in place again). */
Test(records_copies, r7_records_past_a_slot_go_to_a_larger_file) {
    Fixture f;
    fixture_init(&f);
    add(&f, "0000:01:00.0", "first");
    off_t size = stat_of(f.path).st_size;
    char want[32768] = "0000:01:00.0 first;";
    size_t k = strlen(want);
    for (int i = 0; i < 200; i++) {
        char bdf[16], id[32];
        snprintf(bdf, sizeof(bdf), "0000:%02x:%02x.0", 0x10 + i / 32, i % 32);
        snprintf(id, sizeof(id), "workload-%03d", i);
        add(&f, bdf, id);
        k += (size_t)snprintf(want + k, sizeof(want) - k, "%s %s;", bdf, id);
    }
    cr_expect_gt(stat_of(f.path).st_size, size);
    expect_listed(&f, want);
    ino_t ino = stat_of(f.path).st_ino;
    Error err = {0};
    cr_assert_eq(agent_records_remove(f.dir, "first", &err), 0, "%s", error_message(&err));
    cr_expect_eq(stat_of(f.path).st_ino, ino);
    expect_listed(&f, want + strlen("0000:01:00.0 first;"));
    fixture_done(&f);
}

/* What a copy's header must be to be believed: every field, in order, plain digits, a length
 * within the slot and a sum that matches; anything else is not a whole copy. */
Test(records_copies, r7_a_copy_is_whole_only_with_an_exact_header) {
    const char *body = "0000:01:00.0 7\n";
    /* Each header: what comes before its sum and what after. */
    static const char *const heads[][2] = {
            {MAGIC "seq 1 len 15 sum ", "\n"},  {MAGIC "seq 01 len 15 sum ", "\n"},
            {MAGIC "seq 1 len 16 sum ", "\n"},  {MAGIC "seq 1 len 15 sum 0", "\n"},
            {MAGIC "len 15 seq 1 sum ", "\n"},  {MAGIC "seq -1 len 15 sum ", "\n"},
            {MAGIC "seq 1 len 15 sum ", " \n"}, {MAGIC "seq 1 len 99999999999999999999 sum ", "\n"},
    };
    /* FNV-1a 64 of body, as records.c sums it. */
    unsigned long long h = 0xcbf29ce484222325ull;
    for (const char *p = body; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    char sum[17];
    snprintf(sum, sizeof(sum), "%016llx", h);
    for (size_t i = 0; i < ARRAY_SIZE(heads); i++) {
        char file[256];
        memset(file, '\n', sizeof(file));
        int n = snprintf(file, 128, "%s%s%s", heads[i][0], sum, heads[i][1]);
        memcpy(file + n, body, strlen(body));
        char **b = NULL, **ids = NULL;
        size_t nr = 0;
        Error err = {0};
        int r = agent_records_decode(file, sizeof(file), &b, &ids, &nr, &err);
        if (i == 0)
            cr_expect(r == 0 && nr == 1, "case 0: %d %s", r, error_message(&err));
        else
            cr_expect_eq(r, -EBADMSG, "case %zu read as whole (%d)", i, r);
        strv_free(b, nr);
        strv_free(ids, nr);
    }
    /* An odd size has no second copy: the first alone is read. */
    char **b = NULL, **ids = NULL;
    size_t nr = 0;
    char file[257];
    memset(file, '\n', sizeof(file));
    int n = snprintf(file, 128, "%s%s%s", heads[0][0], sum, heads[0][1]);
    memcpy(file + n, body, strlen(body));
    cr_expect_eq(agent_records_decode(file, sizeof(file), &b, &ids, &nr, NULL), 0);
    strv_free(b, nr);
    strv_free(ids, nr);
}
