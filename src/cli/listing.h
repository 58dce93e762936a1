/* listing.h: what every list verb shares: paging through the API to the end (or --limit N),
 * and the output flags operators know from kubectl: -o json|yaml|wide|name, --no-headers. */
#pragma once

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "remote.h"
#include "util/table.h"

typedef enum ListFormat {
    LIST_TABLE,
    LIST_WIDE, /* the table with more columns */
    LIST_JSON, /* one document: {"<key>": [...], "next": cursor} */
    LIST_YAML, /* the same document as YAML */
    LIST_NAME, /* kind/name, one per line (for xargs) */
} ListFormat;

typedef struct ListOpts {
    ListFormat format;
    bool no_headers;
    uint64_t limit; /* 0: every item */
    bool watch;     /* --watch (watch.h) */
} ListOpts;

/* getopt_long entries of the list verbs (remote_getopt then also accepts -o). The lists the
 * server answers in one piece (nodes, classes, capacity, tenants) take LIST_FORMAT_OPTIONS;
 * the paged ones also --limit. */
#define LIST_FORMAT_OPTIONS                                                                        \
    {"output", required_argument, NULL, 'o'}, {                                                    \
        "no-headers", no_argument, NULL, 0x111                                                     \
    }
#define LIST_OPTIONS                                                                               \
    LIST_FORMAT_OPTIONS, {                                                                         \
        "limit", required_argument, NULL, 0x112                                                    \
    }
/* --watch, on the lists that offer it (watch.h). */
#define LIST_WATCH_OPTION                                                                          \
    { "watch", no_argument, NULL, 0x113 }
#define LIST_WATCH_HELP                                                                            \
    "  --watch          print the list, then again each time it changes (on a terminal: redrawn\n" \
    "                   in place); Ctrl-C ends it with exit code 0\n"
#define LIST_FORMAT_HELP                                                                           \
    "  -o, --output FMT table (default), wide (more columns), json, yaml or name (kind/id)\n"      \
    "  --no-headers     print the table without its header line\n"
#define LIST_HELP                                                                                  \
    LIST_FORMAT_HELP                                                                               \
    "  --limit N        stop after N items (default: every page the server has)\n"

/* Handle one of LIST_OPTIONS: true with *ret_code 0 or a usage exit code; false when c is
 * not one of them. */
bool list_option(ListOpts *l, int c, const char *arg, int *ret_code);
/* A RemoteExtraFn for verbs whose only extra options are LIST_(FORMAT_)OPTIONS; userdata is
 * the ListOpts. */
int list_only_option(int c, const char *arg, void *userdata);
/* After parsing: --json means -o json. */
void list_finish(ListOpts *l, const RemoteOpts *o);

/* GET path (which may already hold a query, but no `after` or `limit`) page after page from
 * cursor `after`, until a short page or l->limit items. *ret gets {"<key>": [...], "next":
 * cursor}. cl may be NULL (a client is opened from o). */
int list_fetch(const RemoteOpts *o, Client *cl, const char *path, const char *key,
               const ListOpts *l, uint64_t after, json_t **ret);

/* The formats that are not a table: -o json|yaml print doc whole, -o name prints
 * "<kind>/<name>" for each item of doc's array `key`, the name taken from the item's field
 * name_field (a string or an integer; NULL: the item is itself the name). Returns true and
 * *ret_code (doc freed) when it printed; false (doc kept) when the format is a table. */
bool list_print_untabled(const ListOpts *l, json_t *doc, const char *key, const char *kind,
                         const char *name_field, int *ret_code);
/* Print doc (from list_fetch) as json or yaml; frees doc. */
int list_print_document(const ListOpts *l, json_t *doc);
/* Print a table honouring --no-headers; frees t. */
void list_print_table(const ListOpts *l, Table *t);
/* Print j as YAML (block style) on f. */
void print_yaml(json_t *j, FILE *f);
