/* server-internal.h: the server's shared state, seen by its modules only.
 *
 * Threads: libmicrohttpd runs each connection on a thread of its own (http.c); a handler reads the
 * in-memory state under `lock` (read) and sends every change as an Op to the single writer thread,
 * which applies a batch of ops to memory and the core under `lock` (write), writes the changed rows
 * in ONE transaction, commits, and only then answers each op (group commit, R16). Readers may
 * briefly see a change that is not committed yet; nothing is acknowledged, and no event is
 * published, before its commit. */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/catalog.h"
#include "core/sched.h"
#include "server/cap-history.h"
#include "server/events.h"
#include "server/metrics.h"
#include "server/server.h"
#include "wire/api-address.h"
#include "wire/node.h"
#include "wire/placement.h"
#include "server/history.h"
#include "server/ptrmap.h"
#include "store/store.h"
#include "util/macro.h"

typedef enum Role {
    ROLE_ADMIN,
    ROLE_OWNER,
    ROLE_TRUSTED,
    ROLE_USER,
    ROLE_NODE,
    _ROLE_MAX,
    _ROLE_INVALID = -1
} Role;
const char *role_to_string(Role r);
Role role_from_string(const char *s);

typedef struct Principal {
    char user[SPEC_NAME_MAX];
    Role role;
    char nodes[512]; /* owner: the nodes owned; node: the agent's node (comma-separated) */
} Principal;
bool principal_has_node(const Principal *p, const char *node);
/* Who may change node `name` owned by `owner` (NULL: not known yet): admins; an owner token
 * naming the node and owning it; the node's own agent. */
bool principal_may_manage(const Principal *who, const char *name, const char *owner);
typedef struct TokenMemo TokenMemo;

typedef enum ReqState {
    REQ_PENDING,
    REQ_PLACED,
    REQ_ACTIVE,
    REQ_RELEASED,
    REQ_CANCELLED,
    REQ_REFUSED,
    REQ_ENDED,
    _REQ_STATE_MAX,
    _REQ_STATE_INVALID = -1
} ReqState;
const char *req_state_to_string(ReqState s);
ReqState req_state_from_string(const char *s);

typedef struct Req {
    uint64_t id;
    char *user;
    char *idem_key;
    /* The request as submitted, as its compact JSON text (api_request_write()'s), which every
     * record and work list splices in; and the fields read without decoding it
     * (req_held_core_spec() decodes the whole for the core). An ApiRequest is 3.2 KiB, almost all
     * of it room for text that is usually empty, and the server keeps every request for a day. */
    char *spec_text;
    WorkloadKind kind;
    unsigned wait_s;
    size_t n_fallback;
    bool trusted; /* submitted by a trusted tenant */
    ReqState state;
    char reason_code[32];
    char reason[SCHED_MESSAGE_MAX]; /* the decision's sentence, whole */
    /* Where it runs, while placed/active and kept afterwards for history: the placement's
     * compact JSON (wire_placement_write()'s), which its record, its request.placed event and
     * its node's work list splice in; and what readers look up in it, kept beside it, so that
     * nothing decodes the text or builds a tree of it on the writer's path. NULL: never placed. */
    char *placement_text;
    char *placed_node;       /* NULL in a stored placement that names none */
    Method placed_method;    /* _METHOD_INVALID in one whose method is unknown */
    uint32_t placed_devices; /* bit i: the node's device i */
    int64_t created_ms, updated_ms, placed_ms;
    bool dirty; /* changed in the current batch: written at its commit */
    /* The stored form as JSON text, encoded once per change: the store write and the HTTP
     * answer share it (state_req_text); any change drops it (state_mark_dirty). */
    char *text;
} Req;

/* fleet.h: a mode switch in progress (or the last one) and the work queued for agents. */
typedef struct NodeSwitch NodeSwitch;
typedef struct Task Task;

typedef struct Node {
    ApiNode spec; /* as registered (cordoned kept current) */
    /* The fleet (fleet.c): the node's agent and its mode switch. */
    unsigned heartbeat_s;         /* the agent's interval; 0: no agent reports for the node */
    _Atomic int64_t last_seen_ms; /* the agent's last heartbeat (server clock) */
    bool unreachable;             /* missed heartbeats: nothing new is placed there */
    /* The instance of the agent that last sent a heartbeat (WIRE_AGENT_HEADER), "" when none
     * said: in memory only, a restart takes the first agent that beats. */
    char agent_instance[WIRE_AGENT_INSTANCE_MAX + 1];
    bool reset_scan;   /* look for consumer GPUs that need a reset check (R9) */
    bool fleet_queued; /* in Server.fleet_queue */
    NodeSwitch *sw;    /* the current or last mode switch, NULL when none */
    ReqVec work;       /* the requests placed here (node-work.h) */
} Node;

typedef struct Server Server;
typedef struct Leader Leader;

/* One change, applied by the writer thread inside a transaction with `lock` held for writing.
 * fn sets status and body (the answer), and must change nothing when it fails. */
typedef struct Op Op;
typedef void (*OpFn)(Server *s, Op *op);
struct Op {
    OpFn fn;
    const Principal *who;
    void *arg;
    int status;
    json_t *body;
    char *text; /* the answer as JSON text with its newline, instead of body; owned */
    /* The caller's buffer for an answer's text (op_answer_text()): the writer copies into it
     * rather than hand over memory it allocated, since each free of that on the caller's
     * thread locks the writer's heap while the writer allocates from it. */
    char *reply;
    size_t reply_size, reply_len; /* reply_len 0: no text there */
    sem_t done; /* posted by the writer once committed: one wake-up per op, no herd */
    Op *next;
};

struct Server {
    ServerConfig cfg;
    Catalog *catalog;
    Sched *sched;
    Store *store;  /* the writer's connection (and startup's) */
    Store *reader; /* token lookups from connection threads */
    pthread_mutex_t reader_lock;
    TokenMemo *token_memo; /* under reader_lock: auth.c, for a store that cannot answer */

    pthread_rwlock_t lock; /* everything below up to the writer */
    Req **reqs;            /* by id - 1 */
    size_t n_reqs, cap_reqs;
    PtrMap idem;          /* "user\nkey" -> Req* */
    PtrMap nodes;         /* name -> Node* */
    PtrMap sites;         /* name -> (void*)(SiteKind + 1) */
    PtrMap trusted_users; /* tenants an admin granted trust: name -> (void*)1 (tenants.c) */
    Req **dirty;          /* requests to write at this batch's commit */
    size_t n_dirty, cap_dirty;
    const char *actor; /* who the current op acts for */
    /* Events of what the queue did in consequence of a change (a placement a release made
     * room for), held back until the change's own event is in the feed: a reader of the feed
     * sees the cause first (state_flush_consequences). */
    struct DeferredEvent *deferred;
    size_t n_deferred, cap_deferred;
    bool deferring;
    int64_t now_ms; /* the current batch's clock */

    EventLog events;
    Metrics metrics;

    /* The fleet (fleet.c), under `lock` like the records above. */
    Task **tasks; /* work for agents not finished yet, in id order */
    size_t n_tasks, cap_tasks;
    /* node name -> TaskVec* of its open tasks, in id order: an agent's poll, a node's JSON
     * and the test for an open reset check cost that node's tasks, not every node's. */
    PtrMap tasks_by_node;
    uint64_t last_task_id;
    size_t n_agents; /* nodes with heartbeat_s > 0 */
    /* The nodes fleet_tick() looks at next (fleet_mark()): a reset check to ask for, a switch
     * to advance. Only those, so that a batch after a release costs what changed, not a walk
     * of the whole fleet (10,000 nodes at every commit of a busy datacenter). */
    Node **fleet_queue;
    size_t n_fleet_queue, cap_fleet_queue;
    bool fleet_scan_all;          /* the queue could not grow: the next tick looks at every node */
    _Atomic int64_t fleet_due_ms; /* when the writer must run fleet_tick() even without ops */

    /* Changes reach the writer through a lock-free stack (writer.c): a caller pushes, the
     * writer takes them all at once. q_lock and q_cond only put an idle writer to sleep. */
    _Atomic(Op *) q_stack;     /* newest first; WRITER_CLOSED once the writer stopped */
    atomic_bool writer_asleep; /* callers must wake it (under q_lock) */
    Op *q_head, *q_tail;       /* the writer's own: taken from q_stack, oldest first */
    pthread_mutex_t q_lock;
    pthread_cond_t q_cond;
    atomic_bool stopping;
    atomic_bool fatal;
    Error fatal_err;
    pthread_t writer;
    Leader *leader; /* replicas on PostgreSQL (leader.c); NULL: the only server, always leading */
    int state_lock_fd;     /* the SQLite state file, flock()ed: one server per file; -1: none */
    struct Replay *replay; /* a standby's replay of the leader's commits (replay.c) */
    bool replay_view;      /* this is a standby's read-only view: loaded, never written */

    /* The first store write that failed in the current batch (writer.c): the whole batch
     * then fails, even where a caller ignores the return value. */
    int batch_failed;
    Error batch_err;

    /* http.c: requests between their first byte handled and their answer sent,
     * a draining shutdown, and the parked long-polls (NULL without a listener). */
    atomic_long http_active;
    atomic_bool draining;
    /* Calls refused for their token (401): logged at most once per AUTH_LOG_EVERY_MS, so that
     * an operator sees a misconfigured agent or a probe, and a flood cannot fill the log. */
    int64_t auth_logged_ms;      /* under http.c's log lock */
    unsigned long auth_unlogged; /* refused since that line */
    char auth_unlogged_peer[48]; /* the last of them's address */
    struct LongPoll *longpoll;
    /* The write probe at start failed: /readyz says so. */
    bool store_unwritable;
    Error store_probe_err;
    /* history.c, under `lock`: live requests, and each user's, in id order. */
    ReqVec live;
    PtrMap reqs_by_user; /* user -> ReqVec* */
    ReqVec ended;        /* ended requests, oldest end first, from ended_head on: retention */
    size_t ended_head;
    size_t live_ended; /* requests in `live` seen to end since it was last filtered (about) */
    int64_t last_prune_ms, last_store_prune_ms;
    /* Requests dropped since the writer last gave freed memory back to the system
     * (history_trim()), and when it did. */
    size_t dropped_since_trim;
    int64_t last_trim_ms;
    CapHistory cap_history; /* the dashboard's capacity chart (cap-history.h) */
};

/* writer.c */
/* Note a store write's result r (err may be NULL): a failure fails the current batch. */
int writer_check(Server *s, int r, const Error *err, const char *what);
int writer_start(Server *s);
void writer_stop(Server *s);
/* Queue op and wait until it is applied and committed (or the server failed: 503). */
void writer_submit(Server *s, Op *op);
int64_t server_now_ms(void);
/* The core's clock is the server's in milliseconds (sched_set_time_scale(1000)), never whole
 * seconds rounded down: a fallback must not open before submitted + wait (R13). */
#define CORE_MS_PER_SECOND 1000
static inline uint64_t core_now(const Server *s) {
    return (uint64_t)s->now_ms;
}

/* state.c: in-memory records and the core glue (called with lock held for writing). */
Req *state_req(Server *s, uint64_t id);
int state_req_add(Server *s, Req *r);
void state_mark_dirty(Server *s, Req *r);
int state_flush_dirty(Server *s, Error *err);
/* The record's stored form as JSON text, encoded at most once per change; NULL: no memory. */
const char *state_req_text(Req *r);
/* Apply a core decision to a record, emit its event. */
void state_apply_decision(Server *s, Req *r, const Decision *d);
int state_ensure_site(Server *s, const char *site, const char *kind, Error *err);
void state_trust_user(Server *s, const char *user);
int state_node_add_core(Server *s, const ApiNode *n, Error *err);
/* Devices of spec whose class the catalog has not (as a card class) become unclassified (R8):
 * a stored node after a catalog change, or an agent classifying with an older catalog. */
void state_node_unclassify_unknown(const Server *s, ApiNode *spec);
void state_on_placed(void *userdata, const char *request_id, const Decision *d);
/* Emit the events state_on_placed() held back, in their order, as the system's (the user
 * whose change made room is not named to the one placed). After each op and each timer step
 * of a batch, and before its commit; 0 or the batch's failure. */
int state_flush_consequences(Server *s);
json_t *req_to_json(Server *s, const Req *r);
json_t *node_to_json(Server *s, const Node *n);
/* The same member for member, written by one encoder (wire/json-text.h): a list of nodes is
 * answered as text without a tree per node. */
void node_write(Server *s, const Node *n, JsonText *w);
/* That text with its newline, as an answer's body (NULL: out of memory, or a string that is
 * not UTF-8); a change's answer of it (op->text, or the tree when the text failed). */
char *node_answer_text(Server *s, const Node *n);
void op_answer_node(Server *s, Op *op, int status, const Node *n);
/* Emit an event into the current transaction (takes data; NULL: {}). */
int state_event(Server *s, const char *type, const char *object, const char *user, json_t *data);
/* R2c/R16: the memory slots of the MIG instances node n reports busy, less our own slices'
 * (the core keeps those), are never offered (the agent reports which ones processes use). */
void state_node_mig_reserved(Server *s, const ApiNode *n);
/* Whether r is placed (or was, for an ended one) on node, and there on device dev (dev < 0:
 * any of its devices). */
bool req_placed_on(const Req *r, const char *node, int dev);
/* An endpoint's URL, kept with its placement: stored and shown with it. -ENOMEM changes
 * nothing. */
int state_req_placement_set_url(Req *r, const char *url);
/* The same with data's compact text given (owned; NULL: out of memory), for a caller that
 * has it already or writes it without the tree (wire/json-text.h). The feed and the store
 * keep the text; data, when not NULL, is taken and read only for the node whose work the
 * event may change (api_work_note_event(): a request event needs none). */
int state_event_text(Server *s, const char *type, const char *object, const char *user,
                     json_t *data, char *owned_text);
/* An event is being recorded: note the node whose work it may change, so that its work
 * polls wake when the event is published (api-work.c). */
void api_work_note_event(Server *s, const char *type, const char *object, json_t *data);
/* Rebuild memory and the core from the store (startup). */
int state_load(Server *s, Error *err);
void state_free(Server *s);
/* Free a request record no index holds any more (history.c's retention). */
void state_req_free(Req *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(Req *, state_req_free);
/* Hold spec in r (its text and the fields read without it); -ENOMEM changes nothing. */
int req_set_spec(Req *r, const ApiRequest *spec);
/* The core's spec of r, whose request is spec (the one just submitted); it points into spec,
 * id_buf and fallback_ptrs. */
void req_core_spec(const Req *r, const ApiRequest *spec, char id_buf[32],
                   const char *fallback_ptrs[SPEC_MAX_FALLBACK], RequestSpec *ret);
/* The same for a request known only by what r holds (restart, a standby's queue): its spec
 * text is decoded into *spec_buf first. */
int req_held_core_spec(const Req *r, ApiRequest *spec_buf, char id_buf[32],
                       const char *fallback_ptrs[SPEC_MAX_FALLBACK], RequestSpec *ret, Error *err);

/* fleet.c: agents, heartbeats, work for agents, mode switches (called by the writer with
 * `lock` held for writing, except fleet_due_ms). */
int fleet_load(Server *s, Error *err);
/* Once a loaded state is ready to serve: every agent's grace counts from now, not from when
 * the load began (a long load, or a takeover's, is the control plane's absence, not theirs). */
void fleet_grace_from_now(Server *s);
void fleet_free(Server *s);
void fleet_tick(Server *s);
/* A placed/active request ended (released, cancelled, evicted, lost): its consumer GPUs may
 * need a reset check (R9), a draining switch may go on. */
void fleet_on_released(Server *s, const Req *r);
/* An agent pushed (or an admin registered) the node. */
void fleet_on_node_put(Server *s, Node *n, bool by_agent);
/* Keep the control plane's own fields when the agent pushes its inventory again. */
void fleet_merge_agent_push(const Node *old, ApiNode *push);
/* A node description sent by hand (an admin's or owner's PUT): its GPUs' passed reset checks
 * and quarantines are the stored ones, never the body's (R9). */
void fleet_keep_checks(const Node *old, ApiNode *push);
/* The fleet's members of a node's JSON (agent, switch, tasks), into its open object. */
void fleet_node_write(Server *s, const Node *n, JsonText *w);
int save_node(Server *s, const Node *n);
/* End a placed/active request on behalf of the system (eviction, a lost workload). */
void state_end_request(Server *s, Req *r, ReqState final, const char *event_type, const char *why);

/* auth.c */
/* 0 and *ret on success; -EACCES (401) with a sentence otherwise. */
int auth_principal(Server *s, const char *authorization, Principal *ret, Error *err);
void auth_memo_free(Server *s);

/* http.c: the server without its listener: open the state, rebuild memory and start
 * the writer; server_close() stops the writer and frees everything. server_run() wraps these
 * around libmicrohttpd; the API fuzz target calls handlers on such a server in process. */
int server_open(const ServerConfig *cfg, Server **ret, Error *err);
/* tenants.c: load the admin's trust grants (R9) into memory and the core (startup). */
int tenants_load(Server *s, Error *err);
/* Grant or withdraw a tenant's trust (R9) in the writer's batch: stored, mirrored into the
 * core, an event saying by whom ("admin", "token"). Nothing happens when it is so already. */
int tenants_set_trust(Server *s, const char *tenant, bool grant, const char *by);
void server_close(Server *s);
