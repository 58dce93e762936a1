/* api-workloads.c: the end of a workload, as its node's agent reports it (R17): a workload
 * that exits or cannot start frees its allocation and its request becomes `ended` with the
 * exit code or the engine's sentence - never a silent release. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "fleet.h"
#include "server/workload-end.h"
#include "util/macro.h"
#include "util/strutil.h"

typedef struct EndArg {
    uint64_t id;
    const WorkloadEnd *end;
} EndArg;

static void op_end(Server *s, Op *op) {
    EndArg *a = op->arg;
    if (op->who->role != ROLE_ADMIN && op->who->role != ROLE_NODE)
        OP_FAIL(op, 403, "forbidden",
                "Only the agent of the node (or an admin) reports that a workload ended; a user "
                "releases a request instead.");
    Req *r = state_req(s, a->id);
    const char *node = r ? r->placed_node : NULL;
    bool agent = op->who->role == ROLE_ADMIN ||
                 (op->who->role == ROLE_NODE && node && principal_has_node(op->who, node));
    if (!r || !agent)
        OP_FAIL(op, 404, "not_found", "No request %" PRIu64 " placed on a node of yours.", a->id);
    char id[32];
    snprintf(id, sizeof(id), "%" PRIu64, r->id);
    if (r->state != REQ_PLACED && r->state != REQ_ACTIVE)
        OP_FAIL(op, 409, "conflict", "Request %s is %s; only a placed or active workload ends.", id,
                req_state_to_string(r->state));
    Error err = {0};
    if (sched_release(s->sched, id, core_now(s), &err) < 0)
        OP_FAIL(op, 500, "internal", "The placement engine could not let go of request %s: %s", id,
                error_message(&err));
    workload_end_reason(a->end, r->reason, sizeof(r->reason));
    r->reason_code[0] = 0; /* no waiting reason left */
    r->state = REQ_ENDED;
    state_mark_dirty(s, r);
    json_t *data = json_pack("{s:s, s:b, s:s}", "state", "ended", "failed", a->end->failed,
                             "reason", r->reason);
    if (a->end->has_exit_code)
        json_object_set_new(data, "exit_code", json_integer(a->end->exit_code));
    state_event(s, "request.ended", id, r->user, data);
    fleet_on_released(s, r);
    op->status = 200;
    op->body = req_to_json(s, r);
}

void api_request_end(HttpCtx *c) {
    uint64_t id;
    if (!api_path_id(c, c->match.params[0], "request", &id))
        return;
    WorkloadEnd end;
    Error err = {0};
    if (workload_end_parse(c->body, c->body_len, &end, &err) < 0)
        API_FAIL(c, 400, "bad_request", "%s", error_message(&err));
    EndArg a = {.id = id, .end = &end};
    api_apply(c, op_end, &a);
}
