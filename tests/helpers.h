/* helpers.h: shared test utilities: temp files, running the einsora binary, fixtures. */
#pragma once

#include <stddef.h>

/* Write text to a new temporary file; returns its path (caller frees, file removed at exit
 * of the test process by the OS temp cleaner is not assumed: call unlink). */
char *write_temp_file(const char *text);

/* Run EINSORA_BIN with args (NULL-terminated), capture stdout and stderr (caller frees).
 * Returns the exit status, or -1 when it did not exit normally. */
int run_einsora(char **ret_out, char **ret_err, const char *arg0, ...) __attribute__((sentinel));

/* Read a whole file into a new string; aborts the test on failure. */
char *slurp(const char *path);

/* Remove a test's temporary tree (rm -rf, without a shell: any path is safe). Returns 0 when
 * it was removed, else rm's exit status (-1 when rm could not run). */
int remove_temp_tree(const char *dir);
