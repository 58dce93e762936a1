/* verbs.h: one entry point per top-level verb (a thin file each, cmd-*.c). */
#pragma once

#include <stdbool.h>

/* Exit codes shared by every verb. */
enum {
    EXIT_OK = 0,
    EXIT_FAIL = 1,  /* the command ran and found a problem (bad file, refused, server error) */
    EXIT_USAGE = 2, /* the command line itself was wrong */
};

int verb_catalog(int argc, char **argv);
int verb_plan(int argc, char **argv);
int verb_agent(int argc, char **argv);
/* The control plane (server and API verbs; exit codes 3-5 in remote.h). */
int verb_serve(int argc, char **argv);
int verb_token(int argc, char **argv);
int verb_classes(int argc, char **argv);
int verb_nodes(int argc, char **argv);
int verb_node(int argc, char **argv);
int verb_capacity(int argc, char **argv);
int verb_requests(int argc, char **argv);
int verb_request(int argc, char **argv);
int verb_events(int argc, char **argv);

/* Sub-verbs of `einsora agent`; argv[0] is the sub-verb's name. */
int agent_discover_verb(int argc, char **argv);
int agent_bind_verb(int argc, char **argv);
int agent_run_verb(int argc, char **argv);
/* --apple-headroom-gb: GB kept for a Mac's owner, 0 (none) to 1e6; false when not that. */
bool agent_parse_headroom(const char *arg, double *ret);
/* The fleet: `einsora up` and `einsora node mode`. */
int verb_up(int argc, char **argv);
int node_mode_verb(int argc, char **argv);
/* An admin's trust grants (cmd-tenant.c). */
int verb_tenant(int argc, char **argv);
/* Workloads: `einsora run`, `einsora logs`, `einsora stop`. */
int verb_run(int argc, char **argv);
int verb_logs(int argc, char **argv);
int verb_stop(int argc, char **argv);
/* The datacenter: `einsora k8s sync|kubevirt-config`. */
int verb_k8s(int argc, char **argv);
/* Contexts (cmd-config.c). */
int verb_config(int argc, char **argv);
int verb_login(int argc, char **argv);
