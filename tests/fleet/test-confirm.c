/* test-confirm.c: the agent confirms the workloads of one work answer together (R17): in one
 * call (POST /v1/nodes/{name}/activate), or side by side one call each against a control plane
 * without that route, and confirms again, at its next heartbeat, one whose confirmation went
 * unanswered. The real `einsora agent run` on a fixture machine against a control plane double
 * that speaks the real routes: its work route places eight workloads at once, and each
 * confirmation waits until all eight are in flight (so confirmations sent one after another
 * never get there). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/pci-sysfs.h"
#include "agent/records.h"
#include "fleet-helpers.h"
#include "helpers.h"
#include "util/fileio.h"
#include "wire/api-address.h"

#define PLACED 8
#define REFUSED_ID 3 /* its first confirmation is answered 503: nothing was committed */

typedef struct Double {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int in_flight, most_in_flight;
    int confirmed[PLACED + 1]; /* confirmations per id, answered or not */
    bool active[PLACED + 1];
    int heartbeats, refused_at; /* heartbeats when REFUSED_ID's first confirmation came */
    int heartbeat_of_retry;     /* and when its second came; -1 none yet */
    /* Each first confirmation is answered only once the agent polled its work after it came:
     * an agent that waits for its confirmations' answers before it polls again gets them only
     * at the deadline. */
    bool hold_until_polled;
    int polls;              /* GET .../work with a cursor */
    int answered_by_a_poll; /* first confirmations that a poll let through */
    bool torn_in_heartbeat; /* a heartbeat said "torn-42" runs */
    /* A poll is answered with the work as it was when the poll came, under a new cursor: made
     * before the confirmations it let through were committed, it still shows them placed. */
    bool stale_answers;
    bool no_batch_route; /* an older control plane: POST /v1/nodes/n1/activate is a 404 */
    int batch_calls, most_in_batch;
} Double;

/* The work with the workloads' states in active (d->active unless a snapshot), under cursor. */
static void work_json(const bool *active, unsigned cursor, char *buf, size_t size) {
    size_t len = (size_t)snprintf(buf, size,
                                  "{\"node\":\"n1\",\"unreachable\":false,\"tasks\":[],"
                                  "\"cursor\":\"%016x\",\"workloads\":[",
                                  cursor);
    for (int id = 1; id <= PLACED && len < size; id++)
        len += (size_t)snprintf(
                buf + len, size - len,
                "%s{\"id\":%d,\"user\":\"u\",\"kind\":\"container\",\"state\":\"%s\","
                "\"placement\":{\"node\":\"n1\",\"class\":\"nvidia-h100-80gb\",\"method\":"
                "\"container\",\"devices\":[%d],\"addresses\":[\"0000:1%d:00.0\"]},"
                "\"request\":{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}}",
                id > 1 ? "," : "", id, active[id] ? "active" : "placed", id - 1, id);
    if (len < size)
        snprintf(buf + len, size - len, "]}");
}

/* Confirmations of n ids in one call: wait (a generous deadline) until every placed
 * workload's is in flight; each one's status into status[]. */
static void confirm(Double *d, const int *ids, int n, unsigned *status) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    int first = 0; /* first confirmations among them */
    for (int i = 0; i < n; i++) {
        d->in_flight++;
        first += d->confirmed[ids[i]]++ == 0;
    }
    if (d->in_flight > d->most_in_flight)
        d->most_in_flight = d->in_flight;
    pthread_cond_broadcast(&d->cond);
    int polls_before = d->polls;
    while (first && !d->hold_until_polled && d->most_in_flight < PLACED &&
           pthread_cond_timedwait(&d->cond, &d->lock, &until) == 0)
        ;
    while (first && d->hold_until_polled && d->polls == polls_before &&
           pthread_cond_timedwait(&d->cond, &d->lock, &until) == 0)
        ;
    if (d->hold_until_polled && d->polls > polls_before)
        d->answered_by_a_poll += first;
    for (int i = 0; i < n; i++) {
        int id = ids[i];
        d->in_flight--;
        if (id == REFUSED_ID && d->confirmed[id] == 1) {
            d->refused_at = d->heartbeats;
            status[i] = 503;
            continue;
        }
        if (id == REFUSED_ID && d->heartbeat_of_retry < 0)
            d->heartbeat_of_retry = d->heartbeats;
        d->active[id] = true;
        status[i] = 200;
    }
}

/* POST /v1/nodes/n1/activate: {"requests":[{"id":"N"},...]} answered item by item, as the
 * control plane does. */
static unsigned confirm_batch(Double *d, const char *upload, char *body, size_t size) {
    d->batch_calls++;
    if (d->no_batch_route) {
        snprintf(body, size,
                 "{\"code\":\"not_found\",\"message\":\"No such endpoint: "
                 "/v1/nodes/n1/activate.\"}");
        return 404;
    }
    json_t *j = json_loads(upload, 0, NULL), *it;
    int ids[PLACED], n = 0;
    size_t i;
    json_array_foreach(json_object_get(j, "requests"), i, it) {
        int id = atoi(json_string_value(json_object_get(it, "id")) ?: "0");
        if (id >= 1 && id <= PLACED && n < PLACED)
            ids[n++] = id;
    }
    json_decref(j);
    if (n > d->most_in_batch)
        d->most_in_batch = n;
    unsigned status[PLACED];
    confirm(d, ids, n, status);
    size_t len = (size_t)snprintf(body, size, "{\"results\":[");
    for (int k = 0; k < n && len < size; k++)
        len += (size_t)snprintf(
                body + len, size - len, "%s{\"id\":\"%d\",\"status\":%u,%s}", k ? "," : "", ids[k],
                status[k],
                status[k] == 200
                        ? "\"request\":{\"state\":\"active\"}"
                        : "\"error\":{\"code\":\"not_committed\",\"message\":\"Nothing was "
                          "committed.\"}");
    if (len < size)
        snprintf(body + len, size - len, "]}");
    return 200;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls) {
    (void)version, (void)upload;
    Double *d = cls;
    /* The batch's body, gathered on the connection's own thread (one request at a time). */
    static __thread char upload_buf[4096];
    static __thread size_t upload_len;
    if (!*con_cls)
        upload_len = 0;
    if (*con_cls && *upload_size && upload_len + *upload_size < sizeof(upload_buf)) {
        memcpy(upload_buf + upload_len, upload, *upload_size);
        upload_len += *upload_size;
        upload_buf[upload_len] = 0;
    }
    if (*con_cls && *upload_size && strstr(url, "/heartbeat")) {
        pthread_mutex_lock(&d->lock);
        d->torn_in_heartbeat = d->torn_in_heartbeat || memmem(upload, *upload_size, "torn", 4);
        pthread_mutex_unlock(&d->lock);
    }
    if (fleet_double_request_pending(con_cls, cls, upload_size))
        return MHD_YES;
    unsigned status = 200;
    static __thread char body[8192];
    snprintf(body, sizeof(body), "{}");
    int id = 0;
    pthread_mutex_lock(&d->lock);
    if (!strcmp(method, "POST") && strstr(url, "/heartbeat")) {
        d->heartbeats++;
        snprintf(body, sizeof(body), "{\"node\":\"n1\",\"unreachable\":false,\"tasks\":[]}");
    } else if (!strcmp(method, "GET") && strstr(url, "/work")) {
        const char *after = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "after");
        bool then[PLACED + 1];
        memcpy(then, d->active, sizeof(then));
        if (after) { /* nothing new: a short wait (this thread is the connection's own) */
            d->polls++;
            pthread_cond_broadcast(&d->cond);
            pthread_mutex_unlock(&d->lock);
            usleep(100 * 1000);
            pthread_mutex_lock(&d->lock);
        }
        work_json(d->stale_answers ? then : d->active,
                  d->stale_answers ? (unsigned)d->polls + 1 : 1, body, sizeof(body));
    } else if (!strcmp(method, "POST") && !strcmp(url, "/v1/nodes/n1/activate")) {
        status = confirm_batch(d, upload_len ? upload_buf : "{}", body, sizeof(body));
    } else if (!strcmp(method, "POST") && sscanf(url, "/v1/requests/%d/activate", &id) == 1 &&
               id >= 1 && id <= PLACED) {
        confirm(d, &id, 1, &status);
        if (status != 200)
            snprintf(body, sizeof(body),
                     "{\"code\":\"not_committed\",\"message\":\"Nothing was committed.\"}");
    }
    pthread_mutex_unlock(&d->lock);
    struct MHD_Response *r =
            MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", "application/json");
    MHD_add_response_header(r, WIRE_API_HEADER, WIRE_API_VERSION); /* a control plane's answer */
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static bool all_active(Double *d) {
    pthread_mutex_lock(&d->lock);
    bool yes = true;
    for (int id = 1; id <= PLACED; id++)
        yes = yes && d->active[id];
    pthread_mutex_unlock(&d->lock);
    return yes;
}

/* Lines of a state file but its comments; -1 when it cannot be read. */
static int lines(const char *path) {
    char *text = NULL;
    size_t len;
    int n = 0;
    if (read_full_file(path, 1 << 20, &text, &len) < 0)
        return -1;
    for (const char *l = text; *l;) { /* lines but '#' comments */
        const char *e = strchrnul(l, '\n');
        n += e > l && *l != '#';
        l = *e ? e + 1 : e;
    }
    free(text);
    return n;
}

/* Each workload confirmed once, but REFUSED_ID twice (its first answer was a 503). */
static void expect_each_confirmed_once(const Double *d) {
    for (int id = 1; id <= PLACED; id++)
        cr_expect_eq(d->confirmed[id], id == REFUSED_ID ? 2 : 1, "request %d confirmed %d times",
                     id, d->confirmed[id]);
}

/* The agent's log (the caller frees it). */
static char *agent_log(const char *dir) {
    char path[256], *log = NULL;
    snprintf(path, sizeof(path), "%s/agent.log", dir);
    cr_assert_eq(read_full_file(path, 1 << 20, &log, NULL), 0);
    return log;
}

/* The agent's GPU records as "<bdf> <id>\n" lines in *ret when not NULL (the caller frees
 * it); their count, -1 when they cannot be read. */
static int records_of(const char *dir, char **ret) {
    char **b, **ids;
    size_t n;
    if (agent_records_list(dir, &b, &ids, &n, NULL) < 0)
        return -1;
    size_t size = 1;
    for (size_t i = 0; i < n; i++)
        size += strlen(b[i]) + strlen(ids[i]) + 2;
    char *text = calloc(1, size);
    for (size_t i = 0, k = 0; text && i < n; i++)
        k += (size_t)snprintf(text + k, size - k, "%s %s\n", b[i], ids[i]);
    strv_free(b, n);
    strv_free(ids, n);
    cr_assert(text);
    if (ret)
        *ret = text;
    else
        free(text);
    return (int)n;
}

/* Whether the GPU of every placed workload is on record (one line each). */
static bool all_recorded(const char *dir) {
    return records_of(dir, NULL) == PLACED;
}

/* Run the agent (state in dir) against the double until it confirmed every workload; running
 * and records, when not NULL, are the contents of its "running" and "workloads" files before it
 * starts. */
static void run_agent(Double *d, char *dir, const char *running, const char *records) {
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->cond, NULL);
    struct MHD_Daemon *daemon = MHD_start_daemon(
            MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG, 0,
            NULL, NULL, answer, d, MHD_OPTION_SOCK_ADDR,
            &(struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)},
            MHD_OPTION_END);
    cr_assert(daemon);
    char url[64], path[256];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u",
             MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT)->port);
    cr_assert(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/running", dir);
    cr_assert(!running || write_string_file_atomic(path, running) == 0);
    snprintf(path, sizeof(path), "%s/workloads", dir);
    cr_assert(!records || write_string_file_atomic(path, records) == 0);
    pid_t agent = fleet_spawn_h100_agent(url, "n1-token", "n1", dir, NULL);
    bool done = false;
    for (int i = 0; i < 1200 && !(done = all_active(d) && all_recorded(dir)); i++)
        usleep(100 * 1000);
    kill(agent, SIGTERM);
    int status;
    cr_assert_eq(waitpid(agent, &status, 0), agent);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    MHD_stop_daemon(daemon);
    cr_assert(done, "the agent never confirmed and recorded all %d workloads (see %s/agent.log)",
              PLACED, dir);
    pthread_cond_destroy(&d->cond);
    pthread_mutex_destroy(&d->lock);
}

Test(confirm, r17_agent_confirms_an_answers_workloads_side_by_side_and_a_lost_one_again,
     .timeout = 180) {
    Double d = {.refused_at = -1, .heartbeat_of_retry = -1};
    char dir[] = "/tmp/einsora-confirm-XXXXXX";
    run_agent(&d, dir, NULL, NULL);
    cr_expect_eq(d.most_in_flight, PLACED,
                 "at most %d of one answer's %d confirmations were in flight at once: they went "
                 "one after another",
                 d.most_in_flight, PLACED);
    cr_expect_eq(d.most_in_batch, PLACED, "one answer's confirmations went in %d calls or more",
                 PLACED / (d.most_in_batch ? d.most_in_batch : 1));
    expect_each_confirmed_once(&d);
    cr_expect_gt(d.heartbeat_of_retry, d.refused_at,
                 "the unanswered confirmation was sent again before the next heartbeat");
    char path[256];
    snprintf(path, sizeof(path), "%s/running", dir);
    cr_expect_eq(lines(path), PLACED, "the agent does not record its %d workloads as running",
                 PLACED);
    cr_expect_eq(records_of(dir, NULL), PLACED, "the agent does not record the %d workloads' GPUs",
                 PLACED);
    cr_assert_eq(remove_temp_tree(dir), 0);
}

/* A control plane without the batch route (older than the agent) answers its first batch 404:
 * the agent sends those confirmations again one call each, side by side, and no more batches. */
Test(confirm, r17_against_an_older_control_plane_the_agent_confirms_one_call_each_side_by_side,
     .timeout = 180) {
    Double d = {.refused_at = -1, .heartbeat_of_retry = -1, .no_batch_route = true};
    char dir[] = "/tmp/einsora-confirm-XXXXXX";
    run_agent(&d, dir, NULL, NULL);
    cr_expect_eq(d.batch_calls, 1, "%d batches sent to a control plane that has no such route",
                 d.batch_calls);
    cr_expect_eq(d.most_in_flight, PLACED, "at most %d of %d single confirmations at once",
                 d.most_in_flight, PLACED);
    expect_each_confirmed_once(&d);
    cr_expect_gt(d.heartbeat_of_retry, d.refused_at);
    cr_assert_eq(remove_temp_tree(dir), 0);
}

/* The agent's list of what runs is not fsync'd, its GPU records are; after a power loss the
 * two may disagree, and the list may hold a torn line (never sent as running). Workloads the agent
 * finds in its list are confirmed again, not started again, and their GPUs are recorded first (R7:
 * the binding code refuses to rebind a recorded GPU), each once; a record of a workload the list no
 * longer names (the power loss ended it) is dropped, so that its GPU is not marked in use for good.
 */
Test(confirm, r7_workloads_confirmed_again_have_their_gpus_recorded_first, .timeout = 180) {
    Double d = {.refused_at = -1, .heartbeat_of_retry = -1};
    char dir[] = "/tmp/einsora-confirm-XXXXXX";
    run_agent(&d, dir, "1\n2\n3\n4\n5\n6\n7\n8\ntorn-42\n", "0000:19:00.0 42\n0000:11:00.0 1\n");
    cr_expect(!d.torn_in_heartbeat, "a heartbeat said that a torn line of the list runs");
    char *records = NULL;
    int n = records_of(dir, &records);
    cr_expect_eq(n, PLACED, "%d GPU records, not one for each of the %d workloads", n, PLACED);
    cr_expect(strstr(records, " 42\n") == NULL, "the forgotten workload's record stayed: %s",
              records);
    cr_expect(strstr(records, "0000:18:00.0 8\n") != NULL, "workload 8's GPU is not recorded: %s",
              records);
    free(records);
    expect_each_confirmed_once(&d);
    char *log = agent_log(dir);
    cr_expect(strstr(log, "confirmed 1: it runs") != NULL, "not confirmed as running: %s", log);
    cr_expect(strstr(log, "started container") == NULL, "a workload was started again: %s", log);
    cr_expect(strstr(log, "dropped a line that is not a request id ('torn-42')") &&
                      !strstr(log, "stopped torn-42"),
              "the torn line is said to be one, not stopped: %s", log);
    free(log);
    cr_assert_eq(remove_temp_tree(dir), 0);
}

/* The agent does not wait for its confirmations' answers: while they wait for the control
 * plane's commit it is back on its long-poll, so a placement that comes meanwhile is started
 * at once. Here each confirmation is answered only after the agent polled its work again. */
Test(confirm, r17_agent_polls_its_work_while_its_confirmations_wait_for_their_answers,
     .timeout = 180) {
    Double d = {.refused_at = -1, .heartbeat_of_retry = -1, .hold_until_polled = true};
    char dir[] = "/tmp/einsora-confirm-XXXXXX";
    run_agent(&d, dir, NULL, NULL);
    cr_expect_eq(d.answered_by_a_poll, PLACED,
                 "%d of %d confirmations were let through by a poll of the work: the agent waited "
                 "for their answers before polling",
                 d.answered_by_a_poll, PLACED);
    cr_expect_eq(d.confirmed[REFUSED_ID], 2, "the unanswered confirmation was sent %d times",
                 d.confirmed[REFUSED_ID]);
    char *log = agent_log(dir);
    cr_expect(strstr(log, "started container 8 ") != NULL, "not logged once confirmed: %s", log);
    free(log);
    cr_assert_eq(remove_temp_tree(dir), 0);
}

/* A workload the control plane has active and the agent's list names, but whose GPU is not on
 * record (adopted from an engine, or its record lost in a power loss), gets its record back at
 * the agent's first turn, and is not confirmed again (R7: a GPU in use is never unrecorded). */
Test(confirm, r7_an_active_workload_that_runs_here_gets_its_missing_gpu_records_back,
     .timeout = 180) {
    Double d = {.refused_at = -1, .heartbeat_of_retry = -1};
    for (int id = 1; id <= PLACED; id++)
        d.active[id] = true;
    char dir[] = "/tmp/einsora-confirm-XXXXXX";
    run_agent(&d, dir, "1\n2\n3\n4\n5\n6\n7\n8\n", "0000:13:00.0 3\n");
    for (int id = 1; id <= PLACED; id++)
        cr_expect_eq(d.confirmed[id], 0, "active request %d confirmed %d times", id,
                     d.confirmed[id]);
    cr_assert_eq(remove_temp_tree(dir), 0);
}

/* A work answer the control plane made before it committed some confirmations, which reaches
 * the agent after their answers, still shows those workloads placed: they are not confirmed
 * again (each would be a round trip for a 409), but one whose confirmation got no answer is. */
Test(confirm, r17_a_work_answer_older_than_a_confirmations_commit_does_not_send_it_again,
     .timeout = 180) {
    Double d = {.refused_at = -1,
                .heartbeat_of_retry = -1,
                .hold_until_polled = true,
                .stale_answers = true};
    char dir[] = "/tmp/einsora-confirm-XXXXXX";
    run_agent(&d, dir, NULL, NULL);
    cr_expect_eq(d.answered_by_a_poll, PLACED, "%d of %d confirmations let through by a poll",
                 d.answered_by_a_poll, PLACED);
    expect_each_confirmed_once(&d);
    char *log = agent_log(dir);
    cr_expect(strstr(log, "confirmed 1: it runs") == NULL, "confirmed again: %s", log);
    free(log);
    cr_assert_eq(remove_temp_tree(dir), 0);
}
