/* api-misc.c: probes, metrics, classes, capacity, the event feed and the invariant check. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "config.h"
#include "config/catalog-json.h"
#include "leader.h"
#include "longpoll.h"
#include "server/request-names.h"
#include "wire/decode.h"
#include "util/macro.h"
#include "util/strutil.h"

void api_healthz(HttpCtx *c) {
    /* The server's version: a client or an operator tells which build answers. */
    c->json = json_pack("{s:s, s:s}", "status", "ok", "version", EINSORA_VERSION);
}

void api_readyz(HttpCtx *c) {
    /* Routes answer only after the state was rebuilt and checked, so being reachable and not
     * failed means ready. */
    if (atomic_load(&c->s->fatal))
        api_error(c, 503, "unavailable", "The server hit a storage error.");
    else if (!server_is_leader(c->s))
        api_error(c, 503, "standby",
                  "This replica is a standby: it answers reads from its "
                  "replay and redirects changes to the leader.");
    else if (c->s->store_unwritable)
        api_error(c, 503, "unavailable", "The state store could not be written at start: %s",
                  error_message(&c->s->store_probe_err));
    else if (leader_store_away(c->s)) /* a balancer must not send changes here meanwhile */
        api_error(c, 503, "unavailable",
                  "PostgreSQL does not answer this leader: no change commits until it does "
                  "(or another replica takes over).");
    else if (atomic_load(&c->s->draining))
        api_error(c, 503, "unavailable", "The server is shutting down.");
    else
        c->json = json_pack("{s:s}", "status", "ready");
    if (c->json)
        leader_readyz(c->s, c->json);
}

void api_classes(HttpCtx *c) {
    c->json = catalog_to_json(c->s->catalog); /* {"classes": [...]} */
}

/* The devices no class matches (R8) on the nodes of one site: a walk of the nodes, for a
 * capacity asked of one site. */
static size_t site_unclassified(Server *s, const char *site) {
    size_t n = 0, nn = sched_node_count(s->sched);
    for (size_t i = 0; i < nn; i++) {
        NodeInfo ni;
        if (sched_node_info_at(s->sched, i, &ni) < 0 || STRNEQ(site, ni.site))
            continue;
        for (size_t d = 0; d < ni.n_devices; d++) {
            DeviceInfo di;
            n += sched_device_info(s->sched, ni.name, (unsigned)d, &di) >= 0 && di.class_index < 0;
        }
    }
    return n;
}

/* Capacity rows (R6) and each datacenter node's advertised resources; the caller holds the
 * state lock. */
static json_t *capacity_json(Server *s, const char *cls, const char *site, Error *err) {
    CapacityRow *rows = NULL;
    size_t n = 0;
    if (sched_capacity(s->sched, &rows, &n, err) < 0)
        return NULL;
    json_t *list = json_array(), *nodes = json_array();
    /* With a class asked for, the nodes' lists keep what that class is advertised as (its
     * rows' resources) on the nodes that have its GPUs: another class's nvidia.com/gpu is not
     * this one's. */
    const char *res_of_cls[8];
    size_t n_res = 0;
    for (size_t i = 0; i < n; i++) {
        if ((cls && STRNEQ(cls, rows[i].class_name)) ||
            (site && (!rows[i].site || STRNEQ(site, rows[i].site))))
            continue;
        json_array_append_new(list, wire_capacity_row_to_json(&rows[i]));
        bool seen = !rows[i].resource;
        for (size_t k = 0; k < n_res && !seen; k++)
            seen = STREQ(res_of_cls[k], rows[i].resource);
        if (cls && !seen && n_res < ARRAY_SIZE(res_of_cls))
            res_of_cls[n_res++] = rows[i].resource; /* the catalog's: outlives rows */
    }
    free(rows);
    const GpuClass *fc = cls ? catalog_find(s->catalog, cls) : NULL;
    const char *card =
            fc && fc->mig_parent_index >= 0 ? s->catalog->classes[fc->mig_parent_index].name : cls;
    size_t nn = sched_node_count(s->sched);
    for (size_t i = 0; i < nn; i++) {
        NodeInfo ni;
        ResourceCount *rc = NULL;
        size_t nrc = 0;
        if (sched_node_info_at(s->sched, i, &ni) < 0 || ni.site_kind != SITE_DATACENTER ||
            (site && STRNEQ(site, ni.site)))
            continue;
        const Node *node = ptrmap_get(&s->nodes, ni.name);
        bool has_card = !cls;
        for (size_t d = 0; node && !has_card && d < node->spec.n_devices; d++)
            has_card = STREQ(node->spec.devices[d].cls, card);
        if (!has_card || sched_node_resources(s->sched, ni.name, &rc, &nrc, NULL) < 0)
            continue;
        json_t *res = json_object();
        /* A Kubernetes node may advertise its passthrough GPUs under another name than the
         * catalog's vm_device_name: its own name is the one that counts (R6). */
        const char *own =
                node && node->spec.device_resource[0] && ni.mode == NODE_MODE_VM_PASSTHROUGH
                        ? node->spec.device_resource
                        : NULL;
        char note[320] = "";
        for (size_t k = 0; k < nrc; k++) {
            bool renamed = own && STRNEQ(rc[k].name, own) && STRNEQ(rc[k].name, "nvidia.com/gpu") &&
                           strncmp(rc[k].name, "nvidia.com/mig-", 15) != 0 &&
                           strncmp(rc[k].name, "nvidia.com/", 11) == 0;
            if (renamed)
                snprintf(note, sizeof(note), "advertises %s, not the catalog's vm_device_name %s",
                         own, rc[k].name);
            bool of_cls = !cls;
            for (size_t r = 0; r < n_res && !of_cls; r++)
                of_cls = STREQ(res_of_cls[r], rc[k].name);
            if (of_cls)
                json_object_set_new(res, renamed ? own : rc[k].name,
                                    json_integer((json_int_t)rc[k].count));
        }
        free(rc);
        if (cls && !json_object_size(res)) {
            json_decref(res);
            continue;
        }
        json_t *nj = json_pack("{s:s, s:s, s:s, s:o}", "node", ni.name, "site", ni.site, "mode",
                               node_mode_to_string(ni.mode), "resources", res);
        if (note[0])
            json_object_set_new(nj, "note", json_string(note));
        json_array_append_new(nodes, nj);
    }
    return json_pack(
            "{s:o, s:o, s:I}", "classes", list, "nodes", nodes, "unclassified",
            (json_int_t)(site ? site_unclassified(s, site) : sched_unclassified_count(s->sched)));
}

void api_capacity(HttpCtx *c) {
    Error err = {0};
    const char *cls = api_query(c, "class");
    if (cls && !wire_name_is_valid(cls)) /* echoed below: never bytes JSON cannot carry */
        API_FAIL(c, 400, "bad_request", "Query 'class' is not a valid class name.");
    if (cls && !class_name_known(c->s->catalog, cls)) { /* a typo, not an empty class */
        c->status = 422;
        c->json = class_name_unknown(c->s->catalog, "class", cls, ".");
        return;
    }
    const char *site = api_query(c, "site");
    if (site && !wire_name_is_valid(site)) /* echoed below */
        API_FAIL(c, 400, "bad_request", "Query 'site' is not a valid site name.");
    pthread_rwlock_rdlock(&c->s->lock);
    /* A typo is said, as a class's is: an empty table would read as a site with nothing. A
     * site whose nodes all left is still known, and counts nothing. */
    if (site && !sched_site_exists(c->s->sched, site)) {
        pthread_rwlock_unlock(&c->s->lock);
        char msg[256];
        snprintf(msg, sizeof(msg), "No site '%.128s' is known: no node was ever registered there.",
                 site);
        c->status = 422;
        c->json = json_pack("{s:s, s:s, s:s, s:s}", "code", "unknown_site", "message", msg, "field",
                            "site", "name", site);
        return;
    }
    c->json = capacity_json(c->s, cls, site, &err);
    pthread_rwlock_unlock(&c->s->lock);
    if (!c->json)
        api_error(c, 500, "internal", "%s", error_message(&err));
}

/* A cursor older than what retention kept missed events: 410 Gone with the oldest cursor, so a
 * client relists instead of silently skipping (as a Kubernetes watch answers 410). Checked
 * after the read: the base only grows, so a base still at or below the cursor means no gap. */
static bool events_gone(HttpCtx *c, uint64_t after) {
    uint64_t base = events_base(&c->s->events);
    if (after == 0 || base <= after)
        return false;
    free(c->text);
    c->text = NULL;
    c->park = false;
    api_error(c, 410, "gone",
              "Events after %llu are no longer kept (retention); the oldest cursor is %llu: "
              "list from it again.",
              (unsigned long long)after, (unsigned long long)base);
    json_object_set_new(c->json, "oldest", json_integer((json_int_t)base));
    return true;
}

/* A cursor past the newest event was never given by this feed (a state restored from a
 * backup, another server's cursor): refused, or its reader would wait for seqs that are
 * given to other events and skip them. A standby that has not yet replayed that far says
 * so instead: the leader gave the cursor, and this replica will have it shortly. */
static bool events_ahead(HttpCtx *c, uint64_t after) {
    uint64_t newest = events_last(&c->s->events);
    if (after <= newest)
        return false;
    /* A standby answers from its replay's view (a Server of its own, replay_view set). */
    if (!server_is_leader(c->s) || c->s->replay_view) {
        api_error(c, 503, "unavailable",
                  "This replica has not seen event %llu yet (its newest is %llu); retry "
                  "shortly.",
                  (unsigned long long)after, (unsigned long long)newest);
        return true;
    }
    api_error(c, 400, "bad_request",
              "Cursor %llu is past the newest event (%llu): this server never gave it (a state "
              "restored from a backup, or another server's cursor?); read again from after=%llu.",
              (unsigned long long)after, (unsigned long long)newest, (unsigned long long)newest);
    json_object_set_new(c->json, "newest", json_integer((json_int_t)newest));
    return true;
}

void api_events(HttpCtx *c) {
    uint64_t after, wait, limit;
    if (!api_query_uint(c, "after", 0, INT64_MAX, &after) ||
        !api_query_uint(c, "wait", 0, 60, &wait) ||
        !api_query_uint(c, "limit", 1000, 10000, &limit))
        return;
    if (!c->resumed && events_ahead(c, after))
        return;
    /* limit=0 lists no events and says where to resume (`next`, the cursor given), as a
     * paged list does: at once, since there is nothing it could wait for. */
    if (limit == 0)
        wait = 0;
    const char *user = c->who.role == ROLE_ADMIN ? NULL : c->who.user;
    if (c->can_park || c->resumed) {
        /* Never block a thread: look now, and park the connection when there is nothing. */
        size_t n = 0;
        c->text = events_read(&c->s->events, after, limit, 0, user, &n);
        if (!c->text)
            API_FAIL(c, 500, "internal", "Out of memory.");
        if (wait > 0 && !c->resumed && n == 0) {
            free(c->text);
            c->text = NULL;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            c->park = true;
            c->park_deadline_ms =
                    (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + (int64_t)wait * 1000;
            c->park_user = user;
        }
        events_gone(c, after);
        return;
    }
    size_t n = 0;
    c->text = events_read(&c->s->events, after, limit, (int)wait * 1000, user, &n);
    if (!c->text)
        API_FAIL(c, 500, "internal", "Out of memory.");
    events_gone(c, after);
}

void api_invariants(HttpCtx *c) {
    if (c->who.role != ROLE_ADMIN) {
        api_error(c, 403, "forbidden", "The invariant check is for admins.");
        return;
    }
    Error err = {0};
    pthread_rwlock_rdlock(&c->s->lock);
    int r = sched_check(c->s->sched, &err);
    size_t n = sched_request_count(c->s->sched);
    bool always = sched_checks_invariants(c->s->sched);
    pthread_rwlock_unlock(&c->s->lock);
    if (r < 0)
        c->json = json_pack("{s:b, s:s, s:b}", "ok", 0, "violation", error_message(&err),
                            "after_every_change", always);
    else
        c->json = json_pack("{s:b, s:I, s:b}", "ok", 1, "requests", (json_int_t)n,
                            "after_every_change", always);
}

static void gauge(StrBuf *b, const char *name, const char *help, const char *type) {
    strbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void api_metrics(HttpCtx *c) {
    Server *s = c->s;
    Metrics *m = &s->metrics;
    StrBuf b = {0};
    leader_metrics(s, &b);
    if (!server_is_leader(s)) {
        /* A standby has no state loaded: the rest comes from the leader. */
        c->text = b.data;
        c->content_type = "text/plain; version=0.0.4";
        return;
    }
    gauge(&b, "einsora_build_info", "The server's build: always 1, the version in a label.",
          "gauge");
    strbuf_printf(&b, "einsora_build_info{version=\"%s\"} 1\n", EINSORA_VERSION);
    metrics_write_capacity(&b, s);
    metrics_write_switches(&b, s);
    pthread_rwlock_rdlock(&s->lock);
    size_t waiting = sched_waiting_count(s->sched);
    size_t nodes = sched_node_count(s->sched);
    pthread_rwlock_unlock(&s->lock);
    gauge(&b, "einsora_queue_depth", "Requests waiting for placement.", "gauge");
    strbuf_printf(&b, "einsora_queue_depth %zu\n", waiting);
    gauge(&b, "einsora_nodes", "Registered nodes.", "gauge");
    strbuf_printf(&b, "einsora_nodes %zu\n", nodes);
    metrics_write_nodes(&b, s);
    gauge(&b, "einsora_parked_long_polls", "Event long-polls waiting without a thread.", "gauge");
    strbuf_printf(&b, "einsora_parked_long_polls %zu\n",
                  s->longpoll ? longpoll_count(s->longpoll) : 0);
    gauge(&b, "einsora_work_poll_idle_wakeups_total",
          "Parked work polls woken by an event that left their node's work unchanged.", "counter");
    strbuf_printf(&b, "einsora_work_poll_idle_wakeups_total %llu\n",
                  (unsigned long long)atomic_load(&m->work_idle_wakeups));
    gauge(&b, "einsora_queue_wait_seconds", "Time from submission to placement.", "histogram");
    histogram_write(&b, "einsora_queue_wait_seconds", NULL, &m->queue_wait);
    gauge(&b, "einsora_decisions_total",
          "Requests by the decision made when they were submitted (one each).", "counter");
    static const char *const outcomes[] = {"placed", "waiting", "refused"};
    for (size_t i = 0; i < 3; i++)
        strbuf_printf(&b, "einsora_decisions_total{outcome=\"%s\"} %llu\n", outcomes[i],
                      (unsigned long long)atomic_load(&m->decisions[i]));
    gauge(&b, "einsora_queue_exits_total",
          "Waiting requests placed, or refused, later (one each; cancelled ones are not here).",
          "counter");
    for (size_t i = 0; i < 3; i += 2)
        strbuf_printf(&b, "einsora_queue_exits_total{outcome=\"%s\"} %llu\n", outcomes[i],
                      (unsigned long long)atomic_load(&m->queue_exits[i]));
    gauge(&b, "einsora_commits_total", "Store transactions committed (group commit).", "counter");
    strbuf_printf(&b, "einsora_commits_total %llu\n", (unsigned long long)atomic_load(&m->commits));
    gauge(&b, "einsora_committed_operations_total", "API changes committed.", "counter");
    strbuf_printf(&b, "einsora_committed_operations_total %llu\n",
                  (unsigned long long)atomic_load(&m->committed_ops));
    gauge(&b, "einsora_commit_seconds", "Latency of one store transaction.", "histogram");
    histogram_write(&b, "einsora_commit_seconds", NULL, &m->commit);
    gauge(&b, "einsora_http_responses_total", "HTTP responses by exact status code.", "counter");
    for (size_t i = 0; i < METRICS_CODES; i++) {
        /* Only the codes answered so far: a code is a number, so its label needs no escaping. */
        unsigned long long n = atomic_load(&m->responses[i]);
        if (n)
            strbuf_printf(&b, "einsora_http_responses_total{code=\"%zu\"} %llu\n", i + 100, n);
    }
    gauge(&b, "einsora_api_request_seconds", "API latency per route.", "histogram");
    for (size_t i = 0; i < api_n_routes; i++) {
        const Route *rt = &api_routes[i];
        if (rt->id >= METRICS_ROUTES || !atomic_load(&m->api[rt->id].count))
            continue;
        char labels[160];
        snprintf(labels, sizeof(labels), "route=\"%s %s\"", rt->method, rt->pattern);
        histogram_write(&b, "einsora_api_request_seconds", labels, &m->api[rt->id]);
    }
    if (!strbuf_cstr(&b)) {
        strbuf_done(&b);
        api_error(c, 500, "internal", "Out of memory.");
        return;
    }
    c->text = b.data;
    c->content_type = "text/plain; version=0.0.4";
}
