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
