/* suggest.c: nearest-word suggestions for mistyped verbs and options. */
#include "suggest.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"
#include "output.h"
#include "verbs.h"
#include "wire/node.h"

#define WORD_MAX 64

size_t edit_distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > WORD_MAX || m > WORD_MAX)
        return SIZE_MAX; /* nobody mistypes a word this long */
    /* Three rows of the optimal-string-alignment table: two back is needed for swaps. */
    size_t rows[3][WORD_MAX + 1];
    for (size_t j = 0; j <= m; j++)
        rows[0][j] = j;
    for (size_t i = 1; i <= n; i++) {
        size_t *cur = rows[i % 3], *prev = rows[(i - 1) % 3], *prev2 = rows[(i + 1) % 3];
        cur[0] = i;
        for (size_t j = 1; j <= m; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t best = MIN(prev[j] + 1, cur[j - 1] + 1);
            best = MIN(best, prev[j - 1] + cost);
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                best = MIN(best, prev2[j - 2] + 1);
            cur[j] = best;
        }
    }
    return rows[n % 3][m];
}

const char *suggest_nearest(const char *word, const char *const *candidates, size_t n) {
    const char *best = NULL;
    size_t best_d = SIZE_MAX, len = strlen(word);
    /* Up to a third of the word may be wrong (at least one letter, at most three). */
    size_t allowed = MAX((size_t)1, MIN((size_t)3, len / 3));
    for (size_t i = 0; i < n; i++) {
        size_t d = edit_distance(word, candidates[i]);
        if (len >= 3 && strncmp(candidates[i], word, len) == 0)
            d = MIN(d, (size_t)1); /* a prefix of a longer name: the start was right */
        if (d <= allowed && d < best_d) {
            best = candidates[i];
            best_d = d;
        }
    }
    return best;
}

static const struct option *find_by_val(const struct option *o, int val) {
    for (; o && o->name; o++)
        if (o->val == val && !o->flag)
            return o;
    return NULL;
}

/* The verb above a sub-verb ("agent" for `agent run`), for the messages: set once per run. */
static const char *parent_verb;

void cli_set_parent_verb(const char *verb) {
    parent_verb = verb;
}

int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts) {
    opterr = 0;
    optopt = 0;
    int c = getopt_long(argc, argv, shortopts, longopts, NULL);
    if (c != '?')
        return c;
    char verb[64];
    snprintf(verb, sizeof(verb), "%s%s%s", parent_verb ? parent_verb : "", parent_verb ? " " : "",
             argv[0]);
    const char *arg = optind > 0 && optind - 1 < argc ? argv[optind - 1] : "";
    const struct option *known = optopt ? find_by_val(longopts, optopt) : NULL;
    if (optopt && (known || (optopt < 128 && strchr(shortopts, optopt)))) {
        /* A known option without its value. */
        if (known)
            fprintf(stderr, "einsora: %s: option '--%s' needs a value\n", verb, known->name);
        else
            fprintf(stderr, "einsora: %s: option '-%c' needs a value\n", verb, optopt);
        return c;
    }
    if (optopt && optopt < 128 && optopt > ' ') {
        fprintf(stderr, "einsora: %s: unknown option '-%c'\n", verb, optopt);
        return c;
    }
    char word[WORD_MAX + 1];
    const char *name = arg;
    while (*name == '-')
        name++;
    snprintf(word, sizeof(word), "%.*s", (int)strcspn(name, "="), name);
    const char *names[64];
    size_t n = 0;
    for (const struct option *o = longopts; o && o->name && n < ARRAY_SIZE(names); o++)
        names[n++] = o->name;
    /* A prefix of several flags is not unknown but ambiguous (getopt takes a prefix only one
     * flag has): the ones it could be are named, not one guessed. */
    char could[256] = "";
    size_t n_could = 0, len = strlen(word);
    for (size_t i = 0; i < n && len; i++)
        if (strncmp(names[i], word, len) == 0 &&
            strlen(could) + strlen(names[i]) + 8 < sizeof(could)) {
            snprintf(could + strlen(could), sizeof(could) - strlen(could), "%s`--%s`",
                     n_could ? ", " : "", names[i]);
            n_could++;
        }
    if (n_could > 1) {
        fprintf(stderr, "einsora: %s: option '%s' is ambiguous: it could be %s\n", verb, arg,
                could);
        return c;
    }
    const char *near = suggest_nearest(word, names, n);
    if (near)
        fprintf(stderr, "einsora: %s: unknown option '%s'; did you mean `--%s`?\n", verb, arg,
                near);
    else
        fprintf(stderr, "einsora: %s: unknown option '%s' (see `einsora %s --help`)\n", verb, arg,
                verb);
    return c;
}

int cli_unknown_sub(const char *verb, const char *sub, const char *const *subs, size_t n) {
    const char *near = suggest_nearest(sub, subs, n);
    /* One line, not the verb's whole usage above it (where the line would scroll past). */
    if (near) {
        fprintf(stderr,
                "einsora: %s: unknown sub-command '%s'; did you mean `%s`? (`einsora %s --help` "
                "lists them)\n",
                verb, sub, near, verb);
        return EXIT_USAGE;
    }
    fprintf(stderr, "einsora: %s: unknown sub-command '%s' (", verb, sub);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "%s%s", i ? ", " : "", subs[i]);
    fprintf(stderr, "; `einsora %s --help` says more)\n", verb);
    return EXIT_USAGE;
}
/* The capabilities the control plane acts on (a node's others would be kept and never
 * honoured: a typo must not pass as one). */
static const char *const known_caps[] = {"kata", "mig_in_kata", "mig-in-kata"};

/* What the node description takes (wire/node.h), of the known names: 0, or EXIT_USAGE after
 * saying what is wrong. */
int cli_check_capabilities(const char *verb, const char *list) {
    size_t n = 0;
    for (const char *p = list;; n++) {
        const char *e = strchrnul(p, ',');
        char name[32];
        if ((size_t)(e - p) >= sizeof(name) || n >= SPEC_MAX_CAPS)
            return fail(EXIT_USAGE,
                        "%s: --capabilities is at most %d comma-separated names of at most 31 "
                        "characters",
                        verb, SPEC_MAX_CAPS);
        memcpy(name, p, (size_t)(e - p));
        name[e - p] = 0;
        bool known = false;
        for (size_t i = 0; i < ARRAY_SIZE(known_caps); i++)
            known = known || STREQ(name, known_caps[i]);
        if (!known) {
            const char *near = suggest_nearest(name, known_caps, ARRAY_SIZE(known_caps));
            return near ? fail(EXIT_USAGE,
                               "%s: unknown capability '%s'; did you mean `%s`? (kata, "
                               "mig_in_kata)",
                               verb, name, near)
                        : fail(EXIT_USAGE,
                               "%s: unknown capability '%s' (the control plane knows kata and "
                               "mig_in_kata)",
                               verb, name);
        }
        for (const char *q = list; q < p;) { /* given twice: a typo, and the server refuses it */
            const char *qe = strchrnul(q, ',');
            if ((size_t)(qe - q) == strlen(name) && !strncmp(q, name, strlen(name)))
                return fail(EXIT_USAGE, "%s: capability '%s' is given twice", verb, name);
            q = *qe ? qe + 1 : qe;
        }
        if (!*e)
            return 0;
        p = e + 1;
    }
}
