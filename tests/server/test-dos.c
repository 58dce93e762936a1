/* test-dos.c: one client cannot deny the others. Connections cost a socket, not a
 * thread; one address holds a bounded number; a parked long-poll whose client went away is
 * freed at once, and an event wakes only the long-polls that may see it; SIGTERM answers
 * every committed operation before the server exits. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "helpers.h"
#include "server/server.h"
#include "srv-helpers.h"
#include "util/macro.h"

static TestServer ts;

static void setup(void) {
    ts_start(&ts);
}

static void teardown(void) {
    ts_stop(&ts);
}

TestSuite(dos, .init = setup, .fini = teardown, .timeout = 120);

static const char *str(json_t *j, const char *key) {
    const char *s = json_string_value(json_object_get(j, key));
    return s ? s : "";
}

static uint16_t server_port(void) {
    const char *colon = strrchr(ts.url, ':');
    return (uint16_t)atoi(colon + 1);
}

/* A TCP connection to the server from loopback address `from` (127.0.0.N). */
static int raw_connect(const char *from) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in src = {.sin_family = AF_INET};
    inet_pton(AF_INET, from, &src.sin_addr);
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(server_port())};
    inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
    if (bind(fd, (struct sockaddr *)&src, sizeof(src)) < 0 ||
        connect(fd, (struct sockaddr *)&dst, sizeof(dst)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static long metric(const char *name) {
    json_t *j = NULL;
    Client *c = NULL;
    Error err = {0};
    cr_assert_eq(client_new(ts.url, NULL, &c, &err), 0);
    long status = 0;
    char *text = NULL;
    cr_assert_eq(client_call_raw(c, "GET", "/metrics", NULL, 0, NULL, &status, &text, &err), 0,
                 "%s", err.message);
    client_free(c);
    json_decref(j);
    char key[128];
    snprintf(key, sizeof(key), "\n%s ", name);
    const char *p = strstr(text, key);
    long v = p ? atol(p + strlen(key)) : -1;
    free(text);
    return v;
}

static bool wait_metric(const char *name, long want) {
    for (int i = 0; i < 3000; i++) { /* a deadline, not a measure: 30 s */
        if (metric(name) == want)
            return true;
        usleep(10000);
    }
    return false;
}

Test(dos, dos_one_address_holding_thousands_of_sockets_denies_no_agent_or_user) {
    /* The attacker's sockets: 4000, or what this process may open. */
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
    size_t want = rl.rlim_cur > 4300 ? 4000 : rl.rlim_cur - 300;
    cr_log_info("attacker sockets: %zu", want);

    ts_add_h100_node(&ts, "n1", "alice", 2);
    char *agent = ts_token(&ts, "n1-agent", "node", "n1");
    char *alice = ts_token(&ts, "alice", "user", NULL);
    int *fds = calloc(want, sizeof(int));
    size_t held = 0;
    for (size_t i = 0; i < want; i++) {
        int fd = raw_connect("127.0.0.2");
        if (fd < 0)
            continue;
        /* Half a request, then silence: what a trickling client looks like. */
        (void)!write(fd, "GET /v1/requests HTTP/1.1\r\nHost: x\r\n", 36);
        fds[held++] = fd;
    }
    cr_assert_gt(held, want / 2, "the attacker opened its sockets (%zu)", held);
    /* Meanwhile the agent heartbeats and a user submits, from another address. */
    for (int round = 0; round < 3; round++) {
        json_t *j = NULL;
        long st = ts_call(&ts, agent, "POST", "/v1/nodes/n1/heartbeat", "{\"interval_s\":5}", &j);
        cr_assert_eq(st, 200, "the agent was served: %ld %s", st, str(j, "message"));
        json_decref(j);
        st = ts_call(&ts, alice, "POST", "/v1/requests",
                     "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", &j);
        cr_assert_eq(st, 201, "the user was served: %ld %s", st, str(j, "message"));
        json_decref(j);
    }
    for (size_t i = 0; i < held; i++)
        close(fds[i]);
    free(fds);
    free(agent), free(alice);
}

/* Send a long-poll by hand on a socket of our own; returns the socket. */
static int long_poll(const char *token, long long after) {
    int fd = raw_connect("127.0.0.1");
    cr_assert(fd >= 0);
    char req[512];
    int n = snprintf(req, sizeof(req),
                     "GET /v1/events?after=%lld&wait=60 HTTP/1.1\r\nHost: x\r\n"
                     "Authorization: Bearer %s\r\n\r\n",
                     after, token);
    cr_assert_eq(write(fd, req, (size_t)n), n);
    return fd;
}

static long long feed_end(void) {
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/events?after=0&limit=10000", NULL, &j), 200);
    long long next = json_integer_value(json_object_get(j, "next"));
    json_decref(j);
    return next;
}

Test(dos, dos_long_polls_park_without_threads_wake_by_filter_and_free_on_hang_up) {
    char *alice = ts_token(&ts, "alice", "user", NULL), *bob = ts_token(&ts, "bob", "user", NULL);
    long long end = feed_end();
    int fa = long_poll(alice, end), fb = long_poll(bob, end);
    cr_assert(wait_metric("einsora_parked_long_polls", 2), "both long-polls parked");
    /* Alice's event wakes Alice's follower only. */
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, alice, "POST", "/v1/requests",
                         "{\"kind\":\"container\",\"class\":\"cpu\"}", &j),
                 201);
    json_decref(j);
    char buf[4096];
    ssize_t n =
            read(fa, buf, sizeof(buf) - 1); /* blocks until the answer (test timeout bounds it) */
    cr_assert_gt(n, 0);
    buf[n] = 0;
    cr_assert(strstr(buf, "200 OK") && strstr(buf, "request.submitted"), "%s", buf);
    cr_assert(wait_metric("einsora_parked_long_polls", 1),
              "Bob's long-poll still waits: not woken");
    /* Bob goes away: his long-poll is freed now, not when its 60 s are up. */
    close(fb);
    cr_assert(wait_metric("einsora_parked_long_polls", 0), "the hung-up long-poll was freed");
    close(fa);
    free(alice), free(bob);
}

typedef struct Submitter {
    char *token;
    atomic_bool *stop;
    unsigned acked;
} Submitter;

static void *submit_loop(void *p) {
    Submitter *a = p;
    Client *c = NULL;
    Error err = {0};
    if (client_new(ts.url, a->token, &c, &err) < 0)
        return NULL;
    json_t *body = json_loads("{\"kind\":\"container\",\"class\":\"cpu\"}", 0, NULL);
    while (!atomic_load(a->stop)) {
        long st = 0;
        json_t *q = NULL;
        if (client_call(c, "POST", "/v1/requests", body, NULL, &st, &q, &err) < 0)
            break; /* the server stopped listening */
        json_decref(q);
        if (st == 201)
            a->acked++;
        else if (st == 503)
            break; /* refused while draining: nothing was committed */
    }
    json_decref(body);
    client_free(c);
    return NULL;
}

Test(dos, r16_sigterm_answers_every_committed_operation_before_exit) {
    enum { N = 4 };
    atomic_bool stop = false;
    Submitter sub[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        char user[16];
        snprintf(user, sizeof(user), "u%d", i);
        sub[i] = (Submitter){.token = ts_token(&ts, user, "user", NULL), .stop = &stop};
        pthread_create(&t[i], NULL, submit_loop, &sub[i]);
    }
    /* Let them get going, then stop the server in the middle of their traffic. */
    for (int i = 0; i < 3000 && sub[0].acked < 20; i++)
        usleep(10000);
    ts_kill(&ts, false); /* SIGTERM; expects a clean exit */
    atomic_store(&stop, true);
    unsigned acked = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        acked += sub[i].acked;
    }
    ts_spawn(&ts);
    json_t *all = ts_list_all(&ts, ts.admin, "/v1/requests", "requests");
    cr_assert_eq(json_array_size(all), acked,
                 "every committed request was answered (%zu stored, %u acknowledged)",
                 json_array_size(all), acked);
    json_decref(all);
    for (int i = 0; i < N; i++)
        free(sub[i].token);
}

/* Whether the server has closed fd: readable with nothing to read, or a send refused. */
static bool closed_by_server(int fd) {
    struct timeval tv = {0, 100 * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char c;
    ssize_t n = recv(fd, &c, 1, 0);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

Test(dos, dos_headers_trickled_byte_by_byte_are_cut_at_their_deadline) {
    ts_kill(&ts, false);
    ts.extra[0] = "--header-deadline", ts.extra[1] = "1s";
    ts_spawn(&ts);
    int fd = raw_connect("127.0.0.1");
    cr_assert(fd >= 0);
    static const char head[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
    cr_assert_eq(send(fd, head, sizeof(head) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(head) - 1);
    /* One header byte every 100 ms restarts the 30 s idle timeout each time; only the
     * headers' own deadline ends it. A bound, not a measure: 600 bytes (60 s at least). */
    static const char trickle[] = "X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    bool closed = false;
    for (int i = 0; i < 600 && !closed; i++) {
        closed = send(fd, &trickle[i % (sizeof(trickle) - 1)], 1, MSG_NOSIGNAL) < 0 ||
                 closed_by_server(fd);
    }
    close(fd);
    cr_assert(closed, "a connection trickling its headers was never cut");
    /* Whoever sends a request at a normal pace is served as before. */
    cr_assert_eq(ts_call(&ts, NULL, "GET", "/healthz", NULL, NULL), 200);
}

/* Each connection's memory is smaller than libmicrohttpd's default (SERVER_CONNECTION_MEMORY,
 * which it zeroes after every request): what clients send still fits. Headers of 8 KiB (the
 * common limit) with a few dozen more, and a body of nearly SERVER_BODY_MAX, are served;
 * only more headers than that get 431, never a request that used to fit it. */
Test(dos, dos_connection_memory_takes_8k_of_headers_and_the_largest_body) {
    int fd = raw_connect("127.0.0.1");
    cr_assert(fd >= 0);
    size_t cap = 16 * 1024;
    char *req = malloc(cap);
    int n = snprintf(req, cap, "GET /v1/whoami HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n",
                     ts.admin);
    for (int i = 0; i < 40; i++)
        n += snprintf(req + n, cap - (size_t)n, "X-Header-%d: value-%d\r\n", i, i);
    n += snprintf(req + n, cap - (size_t)n, "X-Pad: ");
    memset(req + n, 'p', 8192);
    n += 8192;
    n += snprintf(req + n, cap - (size_t)n, "\r\n\r\n");
    cr_assert_eq(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
    char answer[4096] = {0};
    size_t got = 0;
    for (int i = 0; i < 100 && !strstr(answer, "\r\n\r\n") && got + 1 < sizeof(answer); i++) {
        ssize_t k = recv(fd, answer + got, sizeof(answer) - 1 - got, 0);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(fd);
    free(req);
    cr_assert(strncmp(answer, "HTTP/1.1 200", 12) == 0, "8 KiB of headers: %.40s", answer);

    /* The largest body the API takes, nearly all of it white space around a request. */
    size_t len = SERVER_BODY_MAX - 16;
    char *body = malloc(len + 1);
    static const char head[] = "{\"kind\":\"container\",\"class\":\"cpu\"";
    memcpy(body, head, sizeof(head) - 1);
    memset(body + sizeof(head) - 1, ' ', len - sizeof(head));
    body[len - 1] = '}';
    body[len] = 0;
    json_t *j = NULL;
    long st = ts_call(&ts, ts.admin, "POST", "/v1/requests", body, &j);
    free(body);
    cr_expect_eq(st, 201, "a %zu-byte request: %ld %s", len, st, str(j, "message"));
    json_decref(j);
}

/* The threads libmicrohttpd runs handlers on: its pool's workers, or its one thread. */
static unsigned count_http_workers(pid_t pid) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    cr_assert(d, "%s: %s", path, strerror(errno));
    unsigned n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char comm_path[sizeof(path) + sizeof(e->d_name) + 8], comm[32] = "";
        snprintf(comm_path, sizeof(comm_path), "%s/%s/comm", path, e->d_name);
        FILE *f = e->d_name[0] != '.' ? fopen(comm_path, "re") : NULL;
        if (f && fgets(comm, sizeof(comm), f))
            n += STREQ(comm, "MHD-worker\n") || STREQ(comm, "MHD-single\n");
        if (f)
            fclose(f);
    }
    closedir(d);
    return n;
}

/* The same once it reaches want, or after a generous deadline: libmicrohttpd names each of its
 * threads from inside it once it runs, which may come after the server answers its port. */
static unsigned wait_http_workers(pid_t pid, unsigned want) {
    unsigned n = count_http_workers(pid);
    for (int i = 0; i < 1000 && n != want; i++) {
        usleep(10 * 1000);
        n = count_http_workers(pid);
    }
    return n;
}

/* A change holds its handler's thread until its commit, so the pool bounds how many changes
 * one commit gathers: its size is the operator's (--http-threads, default 64), and a pool of
 * one still serves reads and changes. Out of range is a usage error before anything starts. */
Test(dos, dos_http_threads_sets_the_handler_pool) {
    cr_expect_eq(wait_http_workers(ts.pid, SERVER_HTTP_THREADS), SERVER_HTTP_THREADS);
    ts_kill(&ts, false);
    ts.extra[0] = "--http-threads", ts.extra[1] = "1";
    ts_spawn(&ts);
    cr_expect_eq(wait_http_workers(ts.pid, 1), 1);
    cr_expect_eq(ts_call(&ts, NULL, "GET", "/healthz", NULL, NULL), 200);
    ts_add_h100_node(&ts, "one-thread", "ops", 2);
    ts_submit(&ts, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\",\"count\":1}");
    static const char *const bad[] = {"0", "1025", "x", "-1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *out = NULL, *err = NULL;
        cr_expect_eq(run_einsora(&out, &err, "serve", "--http-threads", bad[i], "--state",
                                 "/nonexistent/never-opened.db", NULL),
                     2, "--http-threads %s", bad[i]);
        cr_expect(strstr(err, "--http-threads takes a number from 1 to 1024"), "%s", err);
        free(out), free(err);
    }
}

/* Send req on fd and read the answer until the server closes (a deadline, not a measure). */
static void exchange_until_closed(int fd, const char *req, int n, char *answer, size_t size) {
    cr_assert_eq(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
    memset(answer, 0, size);
    size_t got = 0;
    struct timeval tv = {.tv_sec = 20};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    for (ssize_t r; got + 1 < size && (r = recv(fd, answer + got, size - 1 - got, 0)) > 0;)
        got += (size_t)r;
    close(fd);
}

/* A request that gives its body's length twice is refused and its connection closed: behind a
 * proxy that reads the other length, the bytes between the two would otherwise be served as a
 * request nobody sent (request smuggling, RFC 9112 6.3). */
Test(dos, bad_input_a_body_length_given_twice_is_refused_and_the_connection_closed) {
    static const char *const framings[] = {
            "Content-Length: 2\r\nContent-Length: 60\r\n",
            "Content-Length: 60\r\nTransfer-Encoding: chunked\r\n",
    };
    for (size_t k = 0; k < 2; k++) {
        int fd = raw_connect("127.0.0.1");
        cr_assert(fd >= 0);
        char req[1024];
        int n = snprintf(req, sizeof(req),
                         "POST /v1/requests HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                         "Content-Type: application/json\r\n%s\r\n"
                         "{}GET /v1/whoami HTTP/1.1\r\nHost: x\r\n\r\n",
                         ts.admin, framings[k]);
        char answer[8192];
        exchange_until_closed(fd, req, n, answer, sizeof(answer));
        cr_expect(strncmp(answer, "HTTP/1.1 400", 12) == 0, "case %zu: %s", k, answer);
        cr_expect(strstr(answer, "body's length twice"), "case %zu: %s", k, answer);
        const char *second = strstr(answer + 1, "HTTP/1.1 ");
        cr_expect(!second, "case %zu: one answer only, nothing smuggled: %s", k, answer);
    }
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/requests", NULL, NULL), 200,
                 "the server serves on");
}

/* Bad input: two tokens (or two idempotency keys) in one request: which one would act is a
 * guess, and a proxy may have added one. Refused, naming the header; nothing is done. */
Test(dos, bad_input_a_header_that_must_be_one_given_twice_is_refused) {
    char *user = ts_token(&ts, "bob", "user", NULL);
    static const char *const named[] = {"Authorization header twice",
                                        "Idempotency-Key header twice"};
    for (size_t k = 0; k < 2; k++) {
        int fd = raw_connect("127.0.0.1");
        cr_assert(fd >= 0);
        char headers[1024], req[2048];
        if (k == 0)
            snprintf(headers, sizeof(headers),
                     "Authorization: Bearer %s\r\nAuthorization: Bearer %s\r\n", user, ts.admin);
        else
            snprintf(headers, sizeof(headers),
                     "Authorization: Bearer %s\r\nIdempotency-Key: a\r\nIdempotency-Key: b\r\n",
                     user);
        const char body[] = "{\"kind\":\"container\",\"class\":\"cpu\",\"count\":1}";
        int n = snprintf(req, sizeof(req),
                         "POST /v1/requests HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s"
                         "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                         headers, sizeof(body) - 1, body);
        char answer[8192];
        exchange_until_closed(fd, req, n, answer, sizeof(answer));
        cr_expect(strncmp(answer, "HTTP/1.1 400", 12) == 0, "case %zu: %s", k, answer);
        cr_expect(strstr(answer, named[k]), "case %zu: %s", k, answer);
    }
    json_t *all = ts_list_all(&ts, ts.admin, "/v1/requests", "requests");
    cr_expect_eq(json_array_size(all), 0, "nothing was submitted");
    json_decref(all);
    free(user);
}

/* An outsider's request that libmicrohttpd gives up on before any handler sees it (more query
 * parameters than a connection's memory holds) leaves nothing behind: repeated, the server
 * serves on and stops cleanly (a leak would fail its exit under the sanitizers). */
Test(dos, dos_requests_refused_before_a_handler_leak_nothing) {
    char req[8192];
    int n = snprintf(req, sizeof(req), "GET /healthz?");
    for (int i = 0; i < 400 && n < (int)sizeof(req) - 64; i++)
        n += snprintf(req + n, sizeof(req) - (size_t)n, "%sx%d=1", i ? "&" : "", i);
    n += snprintf(req + n, sizeof(req) - (size_t)n,
                  " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    for (int k = 0; k < 3; k++) {
        int fd = raw_connect("127.0.0.1");
        cr_assert(fd >= 0);
        char answer[4096];
        exchange_until_closed(fd, req, n, answer, sizeof(answer));
    }
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/requests", NULL, NULL), 200,
                 "the server serves on");
}

/* HEAD is GET without the body (RFC 9110): a load balancer's health check asks HEAD /healthz. */
Test(dos, api_head_answers_as_get_without_a_body) {
    int fd = raw_connect("127.0.0.1");
    cr_assert(fd >= 0);
    static const char req[] = "HEAD /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    char answer[4096];
    exchange_until_closed(fd, req, (int)sizeof(req) - 1, answer, sizeof(answer));
    cr_expect(strncmp(answer, "HTTP/1.1 200", 12) == 0, "%s", answer);
    const char *end = strstr(answer, "\r\n\r\n");
    cr_expect(end && end[4] == 0, "a body after HEAD's headers: %s", answer);
    cr_expect(strcasestr(answer, "Einsora-API: 1"), "%s", answer);
    cr_expect(strcasestr(answer, "Cache-Control: no-store"), "an API answer is never cached: %s",
              answer);
}

/* The dashboard's files may be cached but are asked for again (an upgrade shows at once). */
Test(dos, api_dashboard_files_are_revalidated_not_stored) {
    int fd = raw_connect("127.0.0.1");
    cr_assert(fd >= 0);
    static const char req[] = "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    char answer[65536];
    exchange_until_closed(fd, req, (int)sizeof(req) - 1, answer, sizeof(answer));
    cr_expect(strncmp(answer, "HTTP/1.1 200", 12) == 0, "%.200s", answer);
    cr_expect(strcasestr(answer, "Cache-Control: no-cache"), "%.400s", answer);
}

/* Bad input: an HTTP/1.1 request without a Host header, or with two (RFC 9112 3.2). HTTP/1.0
 * has none to give and is served. */
Test(dos, bad_input_an_http11_request_without_one_host_is_refused) {
    static const struct {
        const char *req, *want;
    } cases[] = {
            {"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n", " 400 "},
            {"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n", " 400 "},
            {"GET /healthz HTTP/1.0\r\n\r\n", " 200 "},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int fd = raw_connect("127.0.0.1");
        cr_assert(fd >= 0);
        char answer[4096];
        exchange_until_closed(fd, cases[i].req, (int)strlen(cases[i].req), answer, sizeof(answer));
        const char *eol = strstr(answer, "\r\n"), *at = strstr(answer, cases[i].want);
        cr_expect(eol && at && at < eol, "case %zu: %s", i, answer);
    }
}

/* SIGHUP (a reload, to an operator's habit) does not stop the server: nothing is read again
 * while it serves, and a HUP's default exit would skip the drain of changes in flight. */
Test(dos, r16_sighup_leaves_the_server_serving) {
    cr_assert_eq(kill(ts.pid, SIGHUP), 0);
    /* The signal is taken (or the server died of it) before the next answer: a call answered
     * after it proves it served on. */
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/whoami", NULL, NULL), 200);
    cr_assert_eq(kill(ts.pid, 0), 0, "the server is gone");
}

/* An operator sees calls refused for their token (a misconfigured agent, a probe) in the
 * log, with the caller's address; a flood of them is one line now and a count later, not a
 * line each. */
Test(dos, bad_input_calls_refused_for_their_token_are_logged_but_not_one_line_each) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < 50; i++)
        cr_assert_eq(ts_call(&ts, "not-a-token", "GET", "/v1/requests", NULL, NULL), 401);
    clock_gettime(CLOCK_MONOTONIC, &b);
    /* At most a line per 10 s: however long the calls took here, far fewer lines than calls;
     * and the ones no line named are counted once 10 s passed, even with no refusal after
     * them (a deadline, not a measure: the count comes within the next minute). */
    long long took_ms = (b.tv_sec - a.tv_sec) * 1000ll + (b.tv_nsec - a.tv_nsec) / 1000000;
    char path[256], line[512];
    snprintf(path, sizeof(path), "%s/server.log", ts.dir);
    long long lines = 0, counted = 0;
    for (int tries = 0; tries < 600 && counted < 50; tries++) {
        FILE *f = fopen(path, "r");
        cr_assert(f);
        lines = counted = 0;
        while (fgets(line, sizeof(line), f)) {
            if (strstr(line, "refused GET /v1/requests from 127.0.0.1 (401): The token is not "
                             "valid.")) {
                lines++;
                counted++;
            }
            const char *more = strstr(line, "einsora serve: ");
            unsigned long n;
            if (more && sscanf(more, "einsora serve: %lu more call(s) refused", &n) == 1 &&
                strstr(line, "(the last from 127.0.0.1)"))
                counted += (long long)n;
        }
        fclose(f);
        if (counted < 50)
            usleep(100 * 1000);
    }
    cr_expect(lines >= 1 && lines <= 1 + took_ms / 10000, "%lld lines for 50 refusals in %lld ms",
              lines, took_ms);
    cr_expect_eq(counted, 50, "every refusal is counted in the log");
}

/* One call with a node's agent instance header, answered on a fresh connection: its status. */
static int agent_call(const char *method, const char *path, const char *token, const char *instance,
                      const char *body) {
    int fd = raw_connect("127.0.0.1");
    cr_assert(fd >= 0);
    char req[2048], answer[8192];
    int n = snprintf(
            req, sizeof(req),
            "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer %s\r\n"
            "Einsora-Agent: %s\r\nContent-Type: application/json\r\nContent-Length: %zu"
            "\r\n\r\n%s",
            method, path, token, instance, strlen(body), body);
    exchange_until_closed(fd, req, n, answer, sizeof(answer));
    int status = 0;
    cr_assert_eq(sscanf(answer, "HTTP/1.1 %d", &status), 1, "%s", answer);
    if (status >= 300)
        cr_log_info("%s %s: %s", method, path, answer);
    return status;
}

/* R17: a second agent started for the same node (another state folder, the same --name) is
 * refused while the first one beats: its heartbeat, which runs nothing, would end the first
 * one's workloads as "no longer run", and its work list would start them again. */
Test(dos, r17_a_second_agent_of_a_live_node_is_refused_and_ends_nothing) {
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *agent = ts_token(&ts, "n1-agent", "node", "n1");
    cr_assert_eq(agent_call("POST", "/v1/nodes/n1/heartbeat", agent, "aaaa",
                            "{\"interval_s\":60,\"running\":[]}"),
                 200);
    json_t *q = NULL;
    char *alice = ts_token(&ts, "alice", "user", NULL); /* the node's owner: runc, no Kata */
    cr_assert_eq(ts_call(&ts, alice, "POST", "/v1/requests",
                         "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}", &q),
                 201);
    free(alice);
    long long id = (long long)json_integer_value(json_object_get(q, "id"));
    json_decref(q);
    char path[96];
    snprintf(path, sizeof(path), "/v1/requests/%lld/activate", id);
    cr_assert_eq(agent_call("POST", path, agent, "aaaa", "{}"), 200);
    /* Another instance: refused, whatever it says; the workload stays active. */
    cr_expect_eq(agent_call("POST", "/v1/nodes/n1/heartbeat", agent, "bbbb",
                            "{\"interval_s\":60,\"running\":[]}"),
                 409);
    cr_expect_eq(agent_call("GET", "/v1/nodes/n1/work", agent, "bbbb", ""), 409);
    snprintf(path, sizeof(path), "/v1/requests/%lld", id);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", path, NULL, &q), 200);
    cr_expect_str_eq(json_string_value(json_object_get(q, "state")), "active");
    json_decref(q);
    /* The agent itself goes on. */
    char beat[96];
    snprintf(beat, sizeof(beat), "{\"interval_s\":60,\"running\":[%lld]}", id);
    cr_expect_eq(agent_call("POST", "/v1/nodes/n1/heartbeat", agent, "aaaa", beat), 200);
    free(agent);
}
