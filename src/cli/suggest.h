/* suggest.h: "did you mean `requests`?": the nearest known word to a mistyped verb or option,
 * and the getopt wrapper every verb uses so that an unknown option is named and never passes
 * silently. */
#pragma once

#include <getopt.h>
#include <stddef.h>

/* Edit distance (insertions, deletions, substitutions, swaps of neighbours) between a and b. */
size_t edit_distance(const char *a, const char *b);
/* The candidate nearest to word, or NULL when none is near enough to be a likely typo. */
const char *suggest_nearest(const char *word, const char *const *candidates, size_t n);

/* getopt_long that reports an unknown option, or one missing its value, itself: "einsora: VERB:
 * unknown option '--folow'; did you mean `--follow`?" on stderr, then returns '?' as getopt
 * does. argv[0] is the verb's name. */
int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts);
/* Sub-verbs (agent run, ...) keep their own name in argv[0]: their parent prefixes it. */
void cli_set_parent_verb(const char *verb);

/* A sub-command no verb knows ("einsora request creat"): names it on stderr, with the nearest
 * of subs ("did you mean `create`?") or, failing one, all of them; returns EXIT_USAGE. */
int cli_unknown_sub(const char *verb, const char *sub, const char *const *subs, size_t n);

/* A --capabilities list a node description takes: names the control plane acts on (kata,
 * mig_in_kata), each once. 0, or EXIT_USAGE after saying what is wrong ("VERB: ..."). */
int cli_check_capabilities(const char *verb, const char *list);
