/* test-journal.c: the binding journal, the agent's records and quarantine files (R7, R4, R9). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "agent/journal.h"
#include "agent/pci-sysfs.h"
#include "agent/records.h"
#include "helpers.h"
#include "util/fileio.h"
#include "util/macro.h"

static const char good[] = "einsora-journal 1\n"
                           "begin 7 0000:01:00.0 vfio\n"
                           "fn 0000:01:00.0 nvidia vfio-pci -\n"
                           "fn 0000:01:00.1 snd_hda_intel vfio-pci -\n"
                           "step 0000:01:00.0 override\n"
                           "step 0000:01:00.0 unbound\n";

Test(journal, r7_journal_parses_an_unfinished_operation) {
    JournalOp op;
    Error err = {0};
    cr_assert_eq(journal_parse(good, strlen(good), &op, &err), 0, "%s", error_message(&err));
    cr_expect_eq(op.id, 7);
    cr_expect_str_eq(op.gpu, "0000:01:00.0");
    cr_expect(op.to_vfio);
    cr_expect_eq(op.n_fns, 2);
    cr_expect_str_eq(op.fns[0].from, "nvidia");
    cr_expect_str_eq(op.fns[0].override, "");
    cr_expect_eq(op.fns[0].step, JOURNAL_STEP_UNBOUND);
    cr_expect_eq(op.fns[1].step, JOURNAL_STEP_INTENT);
    cr_expect_eq(op.outcome, JOURNAL_OPEN);
}

Test(journal, r7_torn_last_line_is_ignored) {
    char text[512];
    snprintf(text, sizeof(text), "%sstep 0000:01:00.0 pro", good);
    JournalOp op;
    cr_assert_eq(journal_parse(text, strlen(text), &op, NULL), 0);
    cr_expect_eq(op.fns[0].step, JOURNAL_STEP_UNBOUND);
}

/* A crash leaves a torn last record (cut short, or zeros a power loss left): the record written
 * next (a recovery's end) starts on a line of its own, so the journal stays readable and the
 * next binding may begin. */
Test(journal, r7_a_record_after_a_torn_tail_starts_a_line_of_its_own) {
    static const char *const tails[] = {"step 0000:01:00.0 pro", "\0\0\0\0"};
    for (size_t i = 0; i < ARRAY_SIZE(tails); i++) {
        char dir[] = "/tmp/einsora-torn-XXXXXX", path[64];
        cr_assert(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/journal", dir);
        FILE *f = fopen(path, "w");
        cr_assert(f);
        fwrite(good, 1, strlen(good), f);
        fwrite(tails[i], 1, i == 0 ? strlen(tails[i]) : 4, f);
        fclose(f);
        Error err = {0};
        cr_assert_eq(journal_end(dir, 7, JOURNAL_ROLLED_BACK, &err), 0, "%s", error_message(&err));
        JournalOp op;
        cr_assert_eq(journal_load(dir, &op, &err), 0, "case %zu: %s", i, error_message(&err));
        cr_expect_eq(op.outcome, JOURNAL_ROLLED_BACK, "case %zu", i);
        cr_expect_eq(op.fns[0].step, JOURNAL_STEP_UNBOUND, "case %zu: the torn step is not taken",
                     i);
        JournalOp next = {.to_vfio = true, .n_fns = 1};
        strcpy(next.gpu, "0000:01:00.0");
        strcpy(next.fns[0].bdf, "0000:01:00.0");
        cr_expect_eq(journal_begin(dir, &next, &err), 0, "case %zu: %s", i, error_message(&err));
        cr_expect_eq(next.id, 8);
        cr_expect_eq(remove_temp_tree(dir), 0);
    }
}

Test(journal, r7_damaged_journal_is_an_error_naming_the_line) {
    static const char *const bad[] = {
            "einsora-journal 2\n",
            "einsora-journal 1\nstep 0000:01:00.0 override\n",
            "einsora-journal 1\nbegin 1 0000:01:00.0 sideways\n",
            "einsora-journal 1\nbegin 1 0000:01:00.0 vfio\nfn 0000:01:00.0 nv/idia vfio-pci -\n",
            "einsora-journal 1\nbegin 1 0000:01:00.0 vfio\nfn 0000:01:00.0 nvidia vfio-pci -\nstep "
            "0000:01:00.0 probed\nstep 0000:01:00.0 override\n",
            "einsora-journal 1\nbegin 1 0000:01:00.0 vfio\nstep 0000:02:00.0 override\n",
            "einsora-journal 1\nbegin 1 0000:01:00.0 vfio\nend 2 done\n",
            "einsora-journal 1\nbegin 1 0000:01:00.0 vfio\nbegin 2 0000:01:00.0 host\n",
            "einsora-journal 1\nbegin 1 0000:01:00.0 vfio\nend 1 done\nend 1 done\n",
            "einsora-journal 1\nbegin 1 0000:01:00.0 vfio\nwhatever\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        JournalOp op;
        Error err = {0};
        cr_expect_eq(journal_parse(bad[i], strlen(bad[i]), &op, &err), -EINVAL, "case %zu", i);
        cr_expect(err.message[0] != '\0', "case %zu has a sentence", i);
    }
    JournalOp op;
    cr_expect_eq(journal_parse("einsora-journal 1\n", 18, &op, NULL), -ENOENT);
}

static char *temp_state(void) {
    char *dir = strdup("/tmp/einsora-state-XXXXXX");
    cr_assert(mkdtemp(dir));
    return dir;
}

Test(journal, r7_journal_round_trip_on_disk_and_one_operation_at_a_time) {
    char *dir = temp_state();
    JournalOp op = {.to_vfio = false, .n_fns = 1};
    strcpy(op.gpu, "0000:01:00.0");
    strcpy(op.fns[0].bdf, "0000:01:00.0");
    strcpy(op.fns[0].from, "vfio-pci");
    strcpy(op.fns[0].override, "vfio-pci");
    Error err = {0};
    cr_assert_eq(journal_begin(dir, &op, &err), 0, "%s", error_message(&err));
    cr_assert_eq(journal_step(dir, "0000:01:00.0", JOURNAL_STEP_OVERRIDE, &err), 0);
    JournalOp again = op;
    cr_expect_eq(journal_begin(dir, &again, &err), -EBUSY,
                 "an unfinished operation blocks the next");
    JournalOp loaded;
    cr_assert_eq(journal_load(dir, &loaded, &err), 0);
    cr_expect_eq(loaded.fns[0].step, JOURNAL_STEP_OVERRIDE);
    cr_expect_str_eq(loaded.fns[0].to, "");
    cr_assert_eq(journal_end(dir, op.id, JOURNAL_DONE, &err), 0);
    cr_assert_eq(journal_begin(dir, &again, &err), 0, "%s", error_message(&err));
    cr_expect_eq(again.id, op.id + 1);
    cr_expect_eq(remove_temp_tree(dir), 0);
    free(dir);
}

/* A lock whose taker died is held by what it forked: a kernel write hung in the kernel. The
 * refusal says so, instead of naming a pid an operator can no longer find. */
Test(records, r7_a_lock_held_after_its_taker_died_is_said_to_be_a_write_in_flight) {
    char *dir = temp_state();
    Error err = {0};
    int fd = -1;
    cr_assert_eq(agent_state_lock(dir, &fd, &err), 0, "%s", error_message(&err));
    pid_t gone = fork();
    cr_assert(gone >= 0);
    if (gone == 0)
        _exit(0);
    cr_assert_eq(waitpid(gone, NULL, 0), gone);
    char pid[24];
    snprintf(pid, sizeof(pid), "%d\n", (int)gone);
    cr_assert_eq(pwrite(fd, pid, strlen(pid), 0), (ssize_t)strlen(pid));
    int fd2 = -1;
    cr_expect_eq(agent_state_lock(dir, &fd2, &err), -EBUSY);
    cr_expect(strstr(err.message, "has ended") && strstr(err.message, "still in flight"), "%s",
              err.message);
    close(fd);
    cr_expect_eq(remove_temp_tree(dir), 0);
    free(dir);
}

Test(records, r7_workload_records_add_list_remove) {
    char *dir = temp_state();
    Error err = {0};
    cr_assert_eq(agent_records_add(dir, "0000:01:00.0", "vm-bob-3", &err), 0, "%s",
                 error_message(&err));
    cr_assert_eq(agent_records_add(dir, "0000:02:00.0", "notebook-7", &err), 0);
    char **ids;
    size_t n;
    cr_assert_eq(agent_records_for_gpu(dir, "0000:01:00.0", &ids, &n, &err), 0);
    cr_expect_eq(n, 1);
    cr_expect_str_eq(ids[0], "vm-bob-3");
    strv_free(ids, n);
    cr_assert_eq(agent_records_remove(dir, "vm-bob-3", &err), 0);
    cr_assert_eq(agent_records_for_gpu(dir, "0000:01:00.0", &ids, &n, &err), 0);
    cr_expect_eq(n, 0);
    strv_free(ids, n);
    cr_expect_eq(agent_records_remove(dir, "vm-bob-3", &err), -ENOENT);
    cr_expect_eq(agent_records_add(dir, "01:00.0", "x", &err), -EINVAL);
    cr_expect_eq(agent_records_add(dir, "0000:01:00.0", "has space", &err), -EINVAL);
    cr_expect_eq(remove_temp_tree(dir), 0);
    free(dir);
}

Test(records, r7_a_gangs_gpus_are_recorded_together_or_not_at_all) {
    char *dir = temp_state();
    Error err = {0};
    const char *gang[] = {"0000:01:00.0", "0000:02:00.0", "0000:03:00.0"};
    cr_assert_eq(agent_records_add_many(dir, gang, 3, "gang-1", &err), 0, "%s",
                 error_message(&err));
    char **ids;
    size_t n;
    for (size_t i = 0; i < 3; i++) {
        cr_assert_eq(agent_records_for_gpu(dir, gang[i], &ids, &n, &err), 0);
        cr_expect(n == 1 && !strcmp(ids[0], "gang-1"), "GPU %s not recorded for the gang", gang[i]);
        strv_free(ids, n);
    }
    /* One bad address refuses the whole gang: nothing of it is written. */
    const char *bad[] = {"0000:04:00.0", "04:00.0"};
    cr_expect_eq(agent_records_add_many(dir, bad, 2, "gang-2", &err), -EINVAL);
    cr_assert_eq(agent_records_for_gpu(dir, "0000:04:00.0", &ids, &n, &err), 0);
    cr_expect_eq(n, 0);
    strv_free(ids, n);
    cr_assert_eq(agent_records_remove(dir, "gang-1", &err), 0);
    cr_assert_eq(agent_records_for_gpu(dir, gang[2], &ids, &n, &err), 0);
    cr_expect_eq(n, 0);
    strv_free(ids, n);
    cr_expect_eq(remove_temp_tree(dir), 0);
    free(dir);
}

/* What one answer of the control plane stops and starts is recorded in one rewrite: the
 * stopped workloads' GPUs are free, the started ones' recorded, the others untouched. */
Test(records, r7_an_answers_stops_and_starts_are_recorded_at_once) {
    char *dir = temp_state();
    Error err = {0};
    cr_assert_eq(agent_records_add(dir, "0000:01:00.0", "1", &err), 0, "%s", error_message(&err));
    cr_assert_eq(agent_records_add(dir, "0000:02:00.0", "2", &err), 0);
    cr_assert_eq(agent_records_add(dir, "0000:03:00.0", "3", &err), 0);
    const char *gone[] = {"1", "3"};
    const char *bdfs[] = {"0000:01:00.0", "0000:04:00.0", "0000:05:00.0"};
    const char *ids[] = {"4", "5", "5"};
    cr_assert_eq(agent_records_update(dir, gone, 2, bdfs, ids, 3, &err), 3, "%s",
                 error_message(&err));
    char **b, **i;
    size_t n;
    cr_assert_eq(agent_records_list(dir, &b, &i, &n, &err), 0);
    const char *want[][2] = {{"0000:02:00.0", "2"},
                             {"0000:01:00.0", "4"},
                             {"0000:04:00.0", "5"},
                             {"0000:05:00.0", "5"}};
    cr_assert_eq(n, 4, "%zu records, not 4", n);
    for (size_t k = 0; k < n; k++)
        cr_expect(!strcmp(b[k], want[k][0]) && !strcmp(i[k], want[k][1]), "line %zu: %s %s", k,
                  b[k], i[k]);
    strv_free(b, n);
    strv_free(i, n);
    /* A bad address refuses the whole update: the stop in it is not recorded either. */
    const char *bad[] = {"05:00.0"};
    const char *bad_ids[] = {"6"};
    const char *stop2[] = {"2"};
    cr_expect_eq(agent_records_update(dir, stop2, 1, bad, bad_ids, 1, &err), -EINVAL);
    cr_assert_eq(agent_records_for_gpu(dir, "0000:02:00.0", &b, &n, &err), 0);
    cr_expect_eq(n, 1, "the refused update removed a record");
    strv_free(b, n);
    cr_expect_eq(remove_temp_tree(dir), 0);
    free(dir);
}

/* A workload confirmed again (it ran already) has its GPUs recorded once: lines already there
 * are not added twice, nothing is rewritten when nothing changes, and the count of lines added
 * is returned. */
Test(records, r7_recording_a_workloads_gpus_again_adds_only_what_is_missing) {
    char *dir = temp_state();
    Error err = {0};
    const char *bdfs[] = {"0000:01:00.0", "0000:02:00.0"};
    const char *ids[] = {"7", "7"};
    cr_assert_eq(agent_records_update(dir, NULL, 0, bdfs, ids, 1, &err), 1, "%s",
                 error_message(&err));
    cr_assert_eq(agent_records_update(dir, NULL, 0, bdfs, ids, 2, &err), 1, "%s",
                 error_message(&err));
    cr_assert_eq(agent_records_update(dir, NULL, 0, bdfs, ids, 2, &err), 0, "%s",
                 error_message(&err));
    char **b, **i;
    size_t n;
    cr_assert_eq(agent_records_list(dir, &b, &i, &n, &err), 0);
    cr_expect_eq(n, 2, "%zu records, not 2", n);
    for (size_t k = 0; k < MIN(n, (size_t)2); k++)
        cr_expect(!strcmp(b[k], bdfs[k]) && !strcmp(i[k], "7"), "line %zu: %s %s", k, b[k], i[k]);
    strv_free(b, n);
    strv_free(i, n);
    const char *gone[] = {"7"};
    cr_assert_eq(agent_records_update(dir, gone, 1, NULL, NULL, 0, &err), 0);
    cr_assert_eq(agent_records_list(dir, &b, &i, &n, &err), 0);
    cr_expect_eq(n, 0);
    strv_free(b, n);
    strv_free(i, n);
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/workloads.tmp", dir);
    cr_expect_eq(access(path, F_OK), -1, "a temporary file was left behind");
    cr_expect_eq(remove_temp_tree(dir), 0);
    free(dir);
}

/* The records' folder is not asked for at every rewrite (three mkdir calls at each of the
 * agent's turns) but made again when a rewrite finds it gone, with its sub-folders; a folder
 * that cannot be made is an error that names it. */
Test(records, r7_a_record_written_after_its_folder_went_makes_the_folder_again) {
    char *dir = temp_state();
    Error err = {0};
    cr_assert_eq(remove_temp_tree(dir), 0);
    const char *bdfs[] = {"0000:01:00.0"}, *ids[] = {"7"};
    cr_assert_eq(agent_records_update(dir, NULL, 0, bdfs, ids, 1, &err), 1, "%s",
                 error_message(&err));
    char **b, **i;
    size_t n;
    cr_assert_eq(agent_records_list(dir, &b, &i, &n, &err), 0, "%s", error_message(&err));
    cr_expect(n == 1 && !strcmp(b[0], bdfs[0]) && !strcmp(i[0], "7"), "%zu records", n);
    strv_free(b, n);
    strv_free(i, n);
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/quarantine", dir);
    cr_expect_eq(access(path, F_OK), 0, "the sub-folders were not made with it");
    snprintf(path, sizeof(path), "%s/file", dir);
    cr_assert_eq(write_string_file_atomic(path, "x\n"), 0);
    snprintf(path, sizeof(path), "%s/file/state", dir);
    err = (Error){0};
    cr_expect_lt(agent_records_update(path, NULL, 0, bdfs, ids, 1, &err), 0);
    cr_expect(strstr(error_message(&err), "/file/state") != NULL, "%s", error_message(&err));
    cr_expect_eq(remove_temp_tree(dir), 0);
    free(dir);
}

/* Each way of replacing a state file leaves the whole new content under its name and no
 * temporary file; a folder that is not there is an error that writes nothing. */
Test(records, r16_a_replaced_state_file_holds_the_whole_new_content_at_every_sync_level) {
    char *dir = temp_state();
    const WriteSync levels[] = {WRITE_SYNC_NONE, WRITE_SYNC_CONTENT, WRITE_SYNC_ALL};
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    snprintf(path, sizeof(path), "%s/running", dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    for (size_t k = 0; k < ARRAY_SIZE(levels); k++) {
        char want[64];
        snprintf(want, sizeof(want), "%zu\n%zu\n", k, k + 100);
        cr_assert_eq(write_string_file_atomic_as(path, want, levels[k]), 0);
        char *got = NULL;
        cr_assert_eq(read_full_file(path, 1024, &got, NULL), 0);
        cr_expect_str_eq(got, want);
        free(got);
        cr_expect_eq(access(tmp, F_OK), -1, "level %d left %s", (int)levels[k], tmp);
    }
    cr_expect_eq(fsync_parent_dir(path), 0);
    snprintf(path, sizeof(path), "%s/missing/running", dir);
    cr_expect_eq(write_string_file_atomic_as(path, "1\n", WRITE_SYNC_NONE), -ENOENT);
    cr_expect_eq(fsync_parent_dir(path), -ENOENT);
    cr_expect_eq(remove_temp_tree(dir), 0);
    free(dir);
}

/* The non-empty lines of path, each followed by '\n' (blank lines dropped), in *ret. */
static void nonblank_lines(const char *path, char *ret, size_t size) {
    char *text = NULL;
    cr_assert_eq(read_full_file(path, 1 << 20, &text, NULL), 0);
    size_t k = 0;
    for (const char *l = text; *l;) {
        const char *e = strchrnul(l, '\n');
        if (e > l)
            k += (size_t)snprintf(ret + k, size - k, "%.*s\n", (int)(e - l), l);
        l = *e ? e + 1 : e;
    }
    ret[k] = '\0';
    free(text);
}

/* "running" is rewritten in place: the same file, the new lines, what is left of the old
 * content only newlines; past a page it is replaced whole (and trimmed) instead. */
Test(records, r7_a_list_rewritten_in_place_keeps_its_file_and_no_old_line, .timeout = 30) {
    char *dir = temp_state();
    char path[PATH_MAX], got[8192];
    snprintf(path, sizeof(path), "%s/running", dir);
    cr_assert_eq(write_lines_file_in_place(path, "101\n102\n103\n"), 0);
    struct stat first, st;
    cr_assert_eq(stat(path, &first), 0);
    nonblank_lines(path, got, sizeof(got));
    cr_expect_str_eq(got, "101\n102\n103\n");
    cr_assert_eq(write_lines_file_in_place(path, "7\n"), 0);
    cr_assert_eq(stat(path, &st), 0);
    cr_expect_eq(st.st_ino, first.st_ino, "not the same file: renamed over");
    cr_expect_eq(st.st_size, first.st_size, "the old size, padded with newlines");
    nonblank_lines(path, got, sizeof(got));
    cr_expect_str_eq(got, "7\n", "an old line (or part of one) is left");
    cr_assert_eq(write_lines_file_in_place(path, ""), 0);
    nonblank_lines(path, got, sizeof(got));
    cr_expect_str_eq(got, "");
    /* Past a page: replaced whole, and a short list after it trims the file again. */
    char big[WRITE_IN_PLACE_MAX + 64];
    size_t k = 0;
    for (unsigned i = 0; k + 8 < WRITE_IN_PLACE_MAX + 8; i++)
        k += (size_t)snprintf(big + k, sizeof(big) - k, "%06u\n", i);
    cr_assert_gt(strlen(big), WRITE_IN_PLACE_MAX);
    cr_assert_eq(write_lines_file_in_place(path, big), 0);
    nonblank_lines(path, got, sizeof(got));
    cr_expect_str_eq(got, big);
    cr_assert_eq(write_lines_file_in_place(path, "8\n"), 0);
    cr_assert_eq(stat(path, &st), 0);
    cr_expect_eq(st.st_size, 2, "a short list after one past a page did not trim the file");
    nonblank_lines(path, got, sizeof(got));
    cr_expect_str_eq(got, "8\n");
    /* Errors change nothing: a missing folder, a folder in the file's place. */
    snprintf(path, sizeof(path), "%s/missing/running", dir);
    cr_expect_eq(write_lines_file_in_place(path, "1\n"), -ENOENT);
    cr_expect_eq(access(path, F_OK), -1);
    cr_expect_lt(write_lines_file_in_place(dir, "1\n"), 0);
    /* A FIFO in the file's place, with no reader: an error, not a wait for one. */
    snprintf(path, sizeof(path), "%s/fifo", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    cr_expect_lt(write_lines_file_in_place(path, "1\n"), 0);
    cr_expect_eq(remove_temp_tree(dir), 0);
    free(dir);
}

Test(records, r7_bad_workload_records_are_an_error) {
    char **b, **i;
    size_t n;
    Error err = {0};
    cr_expect_eq(agent_records_parse("# c\n0000:01:00.0 a\n\n", &b, &i, &n, &err), 0);
    cr_expect_eq(n, 1);
    strv_free(b, n);
    strv_free(i, n);
    cr_expect_eq(agent_records_parse("0000:01:00.0\n", &b, &i, &n, &err), -EINVAL);
    cr_expect(strstr(error_message(&err), "line 1") != NULL);
    cr_expect_eq(agent_records_parse("nonsense id\n", &b, &i, &n, NULL), -EINVAL);
}

Test(records, r9_quarantine_set_get_clear) {
    char *dir = temp_state();
    Error err = {0};
    char *reason = NULL;
    cr_expect_eq(agent_quarantine_get(dir, "0000:01:00.0", &reason), -ENOENT);
    cr_assert_eq(agent_quarantine_set(dir, "0000:01:00.0", "reset failed\nsecond line", &err), 0,
                 "%s", error_message(&err));
    cr_assert_eq(agent_quarantine_get(dir, "0000:01:00.0", &reason), 0);
    cr_expect_str_eq(reason, "reset failed second line");
    free(reason);
    cr_expect_eq(agent_quarantine_clear(dir, "0000:01:00.0", &err), 0);
    cr_expect_eq(agent_quarantine_clear(dir, "0000:01:00.0", &err), -ENOENT);
    cr_expect_eq(agent_quarantine_set(dir, "../etc", "x", &err), -EINVAL);
    cr_expect_eq(remove_temp_tree(dir), 0);
    free(dir);
}
