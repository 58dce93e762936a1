/* records.h: the agent's small on-disk records in its state directory: running workloads
 * (written by the fleet code), quarantined GPUs, and each function's host driver.
 *
 * "workloads" holds a line "<bdf> <workload-id>" per GPU in use ('#' comments), twice: the file
 * is two slots of equal size, each a copy that opens with a header line giving its sequence
 * number, length and checksum. A write goes over the older copy and is fdatasync'd; a reader
 * takes the newest whole copy, so a crash in the middle of a write leaves the copy before it.
 * Its name, size and blocks stay, so a workload's start or stop costs one synchronous data
 * write rather than a new file, its rename and the folder's sync. The rest of a slot is blank
 * lines: read by a person the file shows both copies (the higher seq is the current one), and
 * an older agent that reads it as lines takes both (GPUs in use in either: the safe side). A
 * file of lines alone (the first format) is read as it is and replaced at the next write.
 * "quarantine/<bdf>" holds one line (why the GPU is quarantined), "host-driver/<bdf>" one line (the
 * driver the function was on before it went to vfio-pci); each is replaced by a temporary file that
 * is fsync'd and renamed, so a crash leaves the old or the new content, never a mix. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"
#include "util/fileio.h"

/* Create state_dir (and its sub-folders) when missing. */
int agent_state_dir_ensure(const char *state_dir, Error *err);

/* Hold state_dir for this process, creating it when missing: an exclusive flock() on
 * "<state_dir>/lock", which then holds this process's pid. One agent command at a time works on
 * a state folder (`agent run`, `bind`, `switch`, `reset-check`, `recover`): a second, whose
 * recovery would roll back the first's move in flight, is refused at once with -EBUSY, naming
 * the holder's pid when the file has it. The hold lasts until *ret_fd is closed (or the process
 * ends); O_CLOEXEC, so a workload the agent starts never holds it. */
int agent_state_lock(const char *state_dir, int *ret_fd, Error *err);

/* Workload ids recorded on bdf (sorted as in the file); ret_n 0 when none. Free with strv_free. */
int agent_records_for_gpu(const char *state_dir, const char *bdf, char ***ret, size_t *ret_n,
                          Error *err);
/* Every "<bdf> <id>" line, as two parallel arrays. Free each with strv_free. */
int agent_records_list(const char *state_dir, char ***ret_bdfs, char ***ret_ids, size_t *ret_n,
                       Error *err);
int agent_records_add(const char *state_dir, const char *bdf, const char *workload_id, Error *err);
/* The same for several GPUs of one workload, in one rewrite. */
int agent_records_add_many(const char *state_dir, const char *const *bdfs, size_t n,
                           const char *workload_id, Error *err);
/* Remove every line of the workloads in remove_ids and add a line per (add_bdfs[i],
 * add_ids[i]) not there yet, in one write (none when nothing changes): what one answer of the
 * control plane stops and starts, recorded at once. The change is durable on return (its copy
 * fdatasync'd, or a new file synced with its name). Returns the number of lines added. */
int agent_records_update(const char *state_dir, const char *const *remove_ids, size_t n_remove,
                         const char *const *add_bdfs, const char *const *add_ids, size_t n_add,
                         Error *err);
/* The same, on the records the caller read with agent_records_list() (bdfs, ids, n; not
 * changed): an agent that looks at them first does not read them twice. */
int agent_records_update_from(const char *state_dir, char *const *bdfs, char *const *ids, size_t n,
                              const char *const *remove_ids, size_t n_remove,
                              const char *const *add_bdfs, const char *const *add_ids, size_t n_add,
                              Error *err);
/* Remove every line of workload_id; -ENOENT when there was none. */
int agent_records_remove(const char *state_dir, const char *workload_id, Error *err);
/* The records in the workloads file's bytes (data, len), in either format: the two-copy file
 * (records.c) or the lines alone. */
int agent_records_decode(const char *data, size_t len, char ***ret_bdfs, char ***ret_ids,
                         size_t *ret_n, Error *err);
/* Parse the records' lines (exposed for the fuzzer). */
int agent_records_parse(const char *text, char ***ret_bdfs, char ***ret_ids, size_t *ret_n,
                        Error *err);

/* Quarantine: the reason is one line of plain text. get returns -ENOENT when not quarantined. */
int agent_quarantine_set(const char *state_dir, const char *bdf, const char *reason, Error *err);
int agent_quarantine_get(const char *state_dir, const char *bdf, char **ret_reason);
int agent_quarantine_clear(const char *state_dir, const char *bdf, Error *err);

/* The host driver remembered for a function (-ENOENT when none). */
int agent_host_driver_remember(const char *state_dir, const char *bdf, const char *driver,
                               Error *err);
int agent_host_driver_get(const char *state_dir, const char *bdf, char **ret);

/* Write content to path atomically (temporary file, fsync, rename, fsync of the folder). */
int write_file_atomic(const char *path, const char *content, Error *err);
/* The same, made as durable as sync says (fileio.h). */
int write_file_atomic_as(const char *path, const char *content, WriteSync sync, Error *err);
/* Replace a file of lines in place, unsynced (write_lines_file_in_place()). */
int write_lines_in_place(const char *path, const char *content, Error *err);

/* "<state_dir>/<name>" into buf; -ENAMETOOLONG (with a message) when it does not fit. */
int agent_state_path(const char *state_dir, const char *name, char *buf, size_t size, Error *err);
/* Read <state_dir>/<name> (at most max bytes) into *ret, its path into path (for messages).
 * -ENOENT without a message when the file is missing; what names the file in other errors
 * ("the binding journal"). */
int agent_state_read(const char *state_dir, const char *name, const char *what, size_t max,
                     char path[PATH_MAX], char **ret, size_t *ret_len, Error *err);
/* Replace <state_dir>/<name> with content, atomically as write_file_atomic does. */
int agent_state_write(const char *state_dir, const char *name, const char *content, Error *err);
