/* verbs.h: one entry point per top-level verb (a thin file each, cmd-*.c). */
#pragma once

/* Exit codes shared by every verb. */
enum {
    EXIT_OK = 0,
    EXIT_FAIL = 1,  /* the command ran and found a problem (bad file, refused, server error) */
    EXIT_USAGE = 2, /* the command line itself was wrong */
};

int verb_catalog(int argc, char **argv);
int verb_plan(int argc, char **argv);
int verb_agent(int argc, char **argv);

/* Sub-verbs of `einsora agent`; argv[0] is the sub-verb's name. */
int agent_discover_verb(int argc, char **argv);
int agent_bind_verb(int argc, char **argv);
