/* replicas.h: the replica processes of tests/replicas (test-replicas.c) that the standby's
 * tests (test-standby.c) share: spawned `einsora serve` on one real PostgreSQL. */
#pragma once

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

#include "client/client.h"

#define REPLICAS 3

typedef struct Replica {
    pid_t pid;
    unsigned port;
    char log[200];
} Replica;

extern Replica rep[REPLICAS];
extern char conninfo[256];      /* the test's database */
extern long long leader_epoch;  /* set by wait_leader() */
extern __thread Error last_err; /* the last call()'s transport failure, for messages */

uint64_t now_ms(void);
/* A replica's own view: "leader", "standby", or NULL when it does not answer (free it). */
char *role_of(int i, long long *epoch);
/* Wait (a generous deadline) until a replica leads under an epoch newer than after. */
int wait_leader(long long after, unsigned timeout_ms);
/* One API call; the HTTP status, or a negative errno (last_err says why). */
long call(Client *c, const char *method, const char *path, const char *body, const char *key,
          json_t **ret);
/* `einsora token create` on the test's database; the token (free it). */
char *token(const char *user, const char *role);
/* Two replicas on a fresh database; the leader's index once one leads. */
int start_two(void);
/* Criterion fini: kill the replicas, remove their directory. */
void kill_replicas(void);
void remove_dir(void);
/* pg_ctl ACTION (stop, start) on the PostgreSQL every test of the binary shares. */
int replicas_pg_ctl(const char *action);
