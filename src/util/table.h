/* table.h: aligned text tables for people (the CLI's default output). */
#pragma once

#include <stdio.h>

#include "util/macro.h"

typedef struct Table Table;

/* Columns are given as a NULL-terminated list of header names. */
Table *table_new(const char *first_header, ...) __attribute__((sentinel));
void table_free(Table *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(Table *, table_free);

/* Add one row; exactly as many cells as headers (NULL prints "-"). Returns -ENOMEM/-EINVAL. */
int table_add_row(Table *t, ...);
/* Add a row from an array of cells. */
int table_add_rowv(Table *t, const char *const *cells);

/* Print with columns padded to their widest cell, two spaces apart. */
void table_print(const Table *t, FILE *f);
/* The same without the header line (--no-headers: for scripts). */
void table_print_body(const Table *t, FILE *f);
size_t table_rows(const Table *t);
