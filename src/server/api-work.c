/* api-work.c: GET /v1/nodes/{name}/work, the long-poll through which a node's agent learns of
 * its work (placements, stops, tasks) at once instead of at its next heartbeat.
 *
 * The cursor names the work the agent last saw: a digest of the node's open tasks and of the
 * requests placed or active on it (each by its id and the time it was placed there, so a
 * request placed again is new work). A request's own placed -> active step is not in it: the
 * agent made that step itself, and hearing it back would cost the agent one more round trip
 * and the server one more answer per placement. An answer comes at once when the
 * work differs from what the cursor names; otherwise the connection is parked (longpoll.c, no
 * thread waits) and looked at again whenever an event that may change this node's work is
 * published, until the work changes or `wait` seconds pass. As the cursor describes a state rather
 * than a position in a feed, it never goes stale: an agent that reconnects (to a restarted server,
 * a new leader) with its last cursor is answered at once if anything changed while it was away, and
 * nothing is missed in between. */
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "fleet.h"
#include "longpoll.h"
#include "node-work.h"
#include "util/macro.h"
#include "util/strutil.h"

#define WORK_CURSOR_LEN 16 /* hex digits */

static uint64_t
mix64(uint64_t x) { /* splitmix64's finaliser: every input bit moves every output bit */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9u;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

/* Order-free (a sum), so it does not depend on the order of the indexes it walks. */
static uint64_t work_digest(const Server *s, const Node *n) {
    uint64_t d = mix64(1);
    TaskVec t = fleet_tasks_of(s, n->spec.name);
    for (size_t i = 0; i < t.n; i++)
        d += mix64(mix64(t.v[i]->id) ^ 0x7461736bu);
    const ReqVec *v = node_work_of(n); /* the node's own index: a poll costs its work only */
    for (size_t i = 0; i < v->n; i++) {
        const Req *r = v->v[i];
        if (api_node_work_has(r, n->spec.name))
            d += mix64(mix64(r->id) ^ (uint64_t)r->placed_ms);
    }
    return d;
}

static int parse_cursor(const char *text, uint64_t *ret) {
    uint64_t v = 0;
    size_t i;
    for (i = 0; text[i]; i++) {
        char ch = text[i];
        int x = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (x < 0 || i >= WORK_CURSOR_LEN)
            return -EINVAL;
        v = v << 4 | (uint64_t)x;
    }
    if (i != WORK_CURSOR_LEN)
        return -EINVAL;
    *ret = v;
    return 0;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A parked connection is also woken when its client hangs up: answer it then (libmicrohttpd
 * closes it), never park it again, or the closed socket would wake it over and over. */
static bool client_gone(HttpCtx *c) {
    const union MHD_ConnectionInfo *ci =
            c->conn ? MHD_get_connection_info(c->conn, MHD_CONNECTION_INFO_CONNECTION_FD) : NULL;
    if (!ci)
        return false;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

void api_node_work(HttpCtx *c) {
    Server *s = c->s;
    const char *node = c->match.params[0];
    if (!api_is_agent_of(&c->who, node))
        API_FAIL(c, 403, "forbidden", "Only the agent of node %s (or an admin) reads its work.",
                 node);
    uint64_t wait, seen = 0;
    if (!api_query_uint(c, "wait", 0, 60, &wait))
        return;
    const char *after = api_query(c, "after");
    if (after && parse_cursor(after, &seen) < 0)
        API_FAIL(c, 400, "bad_request",
                 "Query parameter 'after' must be the cursor of an earlier answer (%d hex digits).",
                 WORK_CURSOR_LEN);
    int64_t now = now_ms();
    int64_t deadline = c->resumed ? c->park_deadline_ms : now + (int64_t)wait * 1000;
    bool may_park = c->can_park && now < deadline && !(c->resumed && client_gone(c));

    pthread_rwlock_rdlock(&s->lock);
    const Node *n = ptrmap_get(&s->nodes, node);
    uint64_t digest = n ? work_digest(s, n) : 0;
    bool park = n && after && digest == seen && may_park;
    char cursor[WORK_CURSOR_LEN + 1];
    snprintf(cursor, sizeof(cursor), "%016" PRIx64, digest);
    char *body = NULL;
    if (n && !park) {
        JsonText w = {0};
        api_node_work_write(s, n, &w, cursor);
        body = json_text_take_line(&w);
    }
    pthread_rwlock_unlock(&s->lock);

    if (!n)
        API_FAIL(c, 404, "not_found",
                 "No node %s: the agent registers it first (PUT /v1/nodes/%s).", node, node);
    if (park) {
        if (c->resumed)
            atomic_fetch_add(&s->metrics.work_idle_wakeups, 1);
        /* Woken by the events that may change this node's work (api_work_note_event()): each
         * wake looks again, cheaply. */
        c->park = true;
        c->park_deadline_ms = deadline;
        c->park_user = NULL;
        c->park_node = node;
        return;
    }
    if (!body)
        API_FAIL(c, 500, "internal", "Out of memory.");
    c->text = body;
}

/* Which node's work the event may change: a node event its node, a request event the node
 * its request is placed on (none while it never was), a task or GPU event the node in its
 * data; any other event (a tenant's trust, a kind unknown here) every node, as waking too
 * many polls only costs a look while waking too few would leave an agent waiting. */
void api_work_note_event(Server *s, const char *type, const char *object, json_t *data) {
    if (!s->longpoll || !type)
        return;
    const char *node = NULL;
    bool none = false;
    uint64_t id;
    if (STREQ(type, "request.active"))
        return; /* the agent's own report: no node's work changes (work_digest()) */
    if (string_has_prefix(type, "node."))
        node = object;
    else if (string_has_prefix(type, "request.") && object &&
             parse_uint64(object, UINT64_MAX, &id) >= 0) {
        const Req *r = state_req(s, id);
        node = r ? r->placed_node : NULL;
        none = !node && r && (r->state == REQ_PENDING || r->state == REQ_REFUSED);
    } else
        node = json_string_value(json_object_get(data, "node"));
    if (none)
        return;
    /* Under the feed's lock: the listener's long-polls are stopped (and freed) under it. */
    pthread_mutex_lock(&s->events.lock);
    if (s->events.on_publish)
        longpoll_note_node(s->longpoll, node);
    pthread_mutex_unlock(&s->events.lock);
}
