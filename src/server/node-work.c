/* node-work.c: each node's index of the requests placed on it (node-work.h). */
#include "node-work.h"

#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "server-internal.h"

static Node *node_of(Server *s, const Req *r) {
    return r->placed_node ? ptrmap_get(&s->nodes, r->placed_node) : NULL;
}

void node_work_placed(Server *s, Req *r) {
    Node *n = node_of(s, r);
    if (!n)
        return;
    ReqVec *v = &n->work;
    /* Drop what is no longer work here (ended, moved): the index stays the size of the node's
     * work plus what ended since its last placement. r itself is kept, and found once. */
    size_t w = 0;
    bool present = false;
    for (size_t i = 0; i < v->n; i++)
        if (v->v[i] == r || api_node_work_has(v->v[i], n->spec.name)) {
            present = present || v->v[i] == r;
            v->v[w++] = v->v[i];
        }
    v->n = w;
    if (present)
        return;
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 8;
        Req **x = realloc(v->v, cap * sizeof(Req *));
        if (!x)
            abort(); /* as state.c: a node's agent must not miss its work for want of memory */
        v->v = x;
        v->cap = cap;
    }
    /* Id order, as the live index gives: answers list the work in the same order as before. */
    size_t at = history_first_after(v, r->id);
    memmove(v->v + at + 1, v->v + at, (v->n - at) * sizeof(Req *));
    v->v[at] = r;
    v->n++;
}

void node_work_forget(Server *s, Req *r) {
    Node *n = node_of(s, r);
    if (!n)
        return;
    ReqVec *v = &n->work;
    for (size_t i = 0; i < v->n; i++)
        if (v->v[i] == r) {
            memmove(v->v + i, v->v + i + 1, (v->n - i - 1) * sizeof(Req *));
            v->n--;
            return;
        }
}

const ReqVec *node_work_of(const Node *n) {
    return &n->work;
}

void node_work_free(Node *n) {
    if (!n)
        return;
    free(n->work.v);
    n->work = (ReqVec){0};
}
