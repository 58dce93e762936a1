/* name-table.h: one macro per enum for its string names, both ways.
 *
 * Header-only and free of I/O, so the pure core uses it as the server and agent do. A table is
 * indexed by the enum value; from_string returns (type)-1, every enum's _INVALID value, for an
 * unknown or NULL name, and to_string returns NULL for a value outside the table. */
#pragma once

#include <string.h>

static inline int name_table_lookup(const char *const *table, int n, const char *s) {
    if (!s)
        return -1;
    for (int i = 0; i < n; i++)
        if (table[i] && strcmp(table[i], s) == 0)
            return i;
    return -1;
}

/* The table PREFIX_names and PREFIX_to_string() alone, for enums whose parser is special. */
#define NAME_TABLE_TO_STRING(type, prefix, max, ...)                                               \
    static const char *const prefix##_names[max] = {__VA_ARGS__};                                  \
    const char *prefix##_to_string(type v) {                                                       \
        return (int)v >= 0 && (int)v < (max) ? prefix##_names[v] : NULL;                           \
    }

/* The table, PREFIX_to_string() and PREFIX_from_string(). */
#define NAME_TABLE(type, prefix, max, ...)                                                         \
    NAME_TABLE_TO_STRING(type, prefix, max, __VA_ARGS__)                                           \
    type prefix##_from_string(const char *s) {                                                     \
        return (type)name_table_lookup(prefix##_names, (max), s);                                  \
    }
