/* node-work.h: each node's index of the requests placed on it, so that a node's work (its
 * poll answer, its cursor, its heartbeat) costs the node's own work, not every live request.
 * Called with the server's lock held: for writing to change an index, for reading to scan. */
#pragma once

#include "history.h"

typedef struct Server Server;
typedef struct Node Node;

/* r was just given a placement (state.c): index it under its node, in id order. Entries of
 * requests that no longer work there are dropped from that node's index on the way. */
void node_work_placed(Server *s, Req *r);
/* r leaves the node of its current placement (it is placed elsewhere, or freed): unindex it. */
void node_work_forget(Server *s, Req *r);
/* The node's index: the requests placed or active there, and maybe some that since ended or
 * moved (readers skip them: api_node_work_has()). Never NULL. */
const ReqVec *node_work_of(const Node *n);
void node_work_free(Node *n);
