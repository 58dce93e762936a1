/* table.c: aligned text tables. */
#include "table.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "strutil.h"

#define TABLE_MAX_COLUMNS 32

struct Table {
    size_t n_cols;
    char **cells; /* row-major, header row first */
    size_t n_rows, cap_rows;
};

void table_free(Table *t) {
    if (!t)
        return;
    for (size_t i = 0; i < t->n_rows * t->n_cols; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t);
}

Table *table_new(const char *first_header, ...) {
    const char *headers[TABLE_MAX_COLUMNS];
    size_t n = 0;
    va_list ap;
    va_start(ap, first_header);
    for (const char *h = first_header; h && n < TABLE_MAX_COLUMNS; h = va_arg(ap, const char *))
        headers[n++] = h;
    va_end(ap);
    _cleanup_(table_freep) Table *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->n_cols = n;
    if (table_add_rowv(t, headers) < 0)
        return NULL;
    return TAKE_PTR(t);
}

int table_add_rowv(Table *t, const char *const *cells) {
    if (t->n_rows == t->cap_rows) {
        size_t cap = t->cap_rows ? t->cap_rows * 2 : 16;
        char **c = realloc(t->cells, cap * t->n_cols * sizeof(char *));
        if (!c)
            return -ENOMEM;
        t->cells = c;
        t->cap_rows = cap;
    }
    char **row = t->cells + t->n_rows * t->n_cols;
    for (size_t i = 0; i < t->n_cols; i++) {
        row[i] = strdup(cells[i] ? cells[i] : "-");
        if (!row[i]) {
            for (size_t k = 0; k < i; k++)
                free(row[k]);
            return -ENOMEM;
        }
        /* One line per cell, and nothing a terminal acts on (server text may hold either). */
        string_mask_control(row[i]);
    }
    t->n_rows++;
    return 0;
}

int table_add_row(Table *t, ...) {
    const char *cells[TABLE_MAX_COLUMNS];
    va_list ap;
    va_start(ap, t);
    for (size_t i = 0; i < t->n_cols; i++)
        cells[i] = va_arg(ap, const char *);
    va_end(ap);
    return table_add_rowv(t, cells);
}

static void print_from(const Table *t, FILE *f, size_t first_row) {
    size_t width[TABLE_MAX_COLUMNS] = {0};
    for (size_t r = 0; r < t->n_rows; r++)
        for (size_t c = 0; c < t->n_cols; c++)
            width[c] = MAX(width[c], strlen(t->cells[r * t->n_cols + c]));
    for (size_t r = first_row; r < t->n_rows; r++) {
        for (size_t c = 0; c < t->n_cols; c++) {
            const char *s = t->cells[r * t->n_cols + c];
            if (c + 1 == t->n_cols)
                fprintf(f, "%s\n", s);
            else
                fprintf(f, "%-*s  ", (int)width[c], s);
        }
    }
}

void table_print(const Table *t, FILE *f) {
    print_from(t, f, 0);
}

void table_print_body(const Table *t, FILE *f) {
    print_from(t, f, 1); /* row 0 holds the headers */
}

size_t table_rows(const Table *t) {
    return t->n_rows - 1;
}
