/* http.c: libmicrohttpd glue and the server's life cycle (start, restore, serve, stop). */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "config.h"
#include "config/catalog-yaml.h"
#include "conn-deadline.h"
#include "leader.h"
#include "longpoll.h"
#include "replay.h"
#include "server/web.h"
#include "util/fileio.h"
#include "store/store-pg.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "wire/api-address.h"

typedef struct Upload {
    StrBuf body;
    bool started; /* the access handler has seen this request's headers */
    bool too_large;
    bool ambiguous_length; /* two Content-Lengths, or one with Transfer-Encoding: refused */
    const char *twice;     /* a header that must be one, given twice: refused */
    bool no_host;          /* an HTTP/1.1 request without Host: refused (RFC 9112) */
    bool nul_in_uri;       /* the raw request target escapes a NUL byte: refused, never truncated */
    bool slash_in_segment; /* the raw path escapes a '/': refused, never split */
    bool parked;           /* a long-poll suspended in longpoll.c: the next call is its wake-up */
    int64_t park_deadline_ms; /* the deadline it was parked with (a woken one may park again) */
    uint64_t start_us;        /* the request's headers were complete: its body has a deadline */
} Upload;

/* What on_uri() saw in the raw request target, carried to the access handler in the value of
 * *con_cls itself: libmicrohttpd calls the completion callback only for requests whose
 * handler ran, so anything allocated here for a request it then refused on its own (one with
 * a few hundred query parameters, more than a connection's memory holds) would be lost. */
#define URI_NUL 1u   /* the target escapes a NUL byte: refused, never truncated */
#define URI_SLASH 2u /* the path escapes a '/': refused, never split */
static const char uri_marks[4];

static bool is_uri_mark(const void *p) {
    return (const char *)p >= uri_marks && (const char *)p < uri_marks + sizeof(uri_marks);
}

/* libmicrohttpd unescapes the path and query in place, so an escaped NUL ("%00") would end
 * the string early and make "/v1/requests/1%00/cancel" look like another route, and "%2F"
 * would split a segment. The raw target is seen here first; what this returns becomes the
 * connection's *con_cls: one of uri_marks, never memory to free. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
    (void)cls, (void)conn;
    unsigned marks = 0;
    const char *query = uri ? strchrnul(uri, '?') : NULL;
    for (const char *p = uri; p && (p = strchr(p, '%')); p++) {
        if (p[1] == '0' && p[2] == '0')
            marks |= URI_NUL;
        /* libmicrohttpd decodes "%2F" before routing, which would turn one escaped segment
         * ("n1%2Fcordon") into two. */
        if (p < query && p[1] == '2' && (p[2] == 'F' || p[2] == 'f'))
            marks |= URI_SLASH;
    }
    return (void *)&uri_marks[marks];
}

static uint64_t mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static const char *lookup_query(void *conn, const char *key) {
    return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
}

typedef struct QueryCheck {
    const char *const *allowed;
    uint64_t seen; /* bit i: allowed[i] was given */
    const char *bad;
    int r;
} QueryCheck;

static enum MHD_Result query_key_check(void *cls, enum MHD_ValueKind kind, const char *key,
                                       const char *value) {
    QueryCheck *q = cls;
    for (size_t i = 0; q->allowed[i]; i++)
        if (STREQ(key, q->allowed[i])) {
            if (!value) { /* "?limit": a parameter without '=' would read as not given */
                q->bad = key, q->r = -ENODATA;
                return MHD_NO;
            }
            assert(i < 64); /* a route reads a handful of parameters */
            if (q->seen & (UINT64_C(1) << i)) {
                q->bad = key, q->r = -EEXIST;
                return MHD_NO; /* stop at the first one given twice */
            }
            q->seen |= UINT64_C(1) << i;
            return MHD_YES;
        }
    q->bad = key, q->r = -ENOENT;
    return MHD_NO; /* stop at the first unknown one */
}

typedef struct Framing {
    unsigned lengths, encodings, authorizations, keys, hosts;
} Framing;

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value) {
    Framing *f = cls;
    f->lengths += strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0;
    f->encodings += strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0;
    f->authorizations += strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION) == 0;
    f->keys += strcasecmp(key, "Idempotency-Key") == 0;
    f->hosts += strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0;
    return MHD_YES;
}

/* The headers, once: whether the request says its body's length more than one way
 * (libmicrohttpd reads the body by the first Content-Length; a proxy in front of us may read
 * it by another, and whatever lies between the two would reach us as a request nobody sent:
 * RFC 9112, 6.3, refuse it and close the connection), and which header that must be one is
 * given twice (two tokens: which one acts would be our guess). */
static void check_headers(struct MHD_Connection *conn, const char *version, Upload *up) {
    Framing f = {0};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, count_framing, &f);
    /* RFC 9112 3.2: an HTTP/1.1 request has exactly one Host header. */
    up->no_host = !f.hosts && version && STREQ(version, MHD_HTTP_VERSION_1_1);
    up->ambiguous_length = f.lengths > 1 || (f.lengths && f.encodings);
    up->twice = f.authorizations > 1 ? MHD_HTTP_HEADER_AUTHORIZATION
                : f.keys > 1         ? "Idempotency-Key"
                : f.hosts > 1        ? MHD_HTTP_HEADER_HOST
                                     : NULL;
}

static int query_check(void *conn, const char *const *allowed, const char **ret_key) {
    QueryCheck q = {.allowed = allowed};
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, query_key_check, &q);
    if (q.r < 0)
        *ret_key = q.bad;
    return q.r;
}

static enum MHD_Result send_answer(struct MHD_Connection *conn, HttpCtx *c) {
    _cleanup_free_ char *text = c->text; /* MHD owns it once the response is made */
    if (!text) {
        if (!c->json)
            c->json = json_object();
        text = json_dumps(c->json, JSON_COMPACT);
        if (text) {
            size_t n = strlen(text);
            char *t = realloc(text, n + 2);
            if (t) {
                t[n] = '\n', t[n + 1] = 0;
                text = t;
            }
        }
    }
    json_decref(c->json);
    if (!text)
        return MHD_NO;
    struct MHD_Response *resp =
            MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!resp)
        return MHD_NO;
    TAKE_PTR(text);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            c->content_type ? c->content_type : "application/json");
    for (size_t i = 0; web_security_headers[i][0]; i++)
        MHD_add_response_header(resp, web_security_headers[i][0], web_security_headers[i][1]);
    /* Every answer says whose it is: a client told another server's URL (any web server
     * answers 200 with JSON of its own) refuses the answer instead of reading nulls in it. */
    MHD_add_response_header(resp, WIRE_API_HEADER, WIRE_API_VERSION);
    /* An answer is a user's or an admin's view of the fleet at one moment: no shared cache or
     * browser history keeps it. A dashboard file may be kept, but is asked for again, so that
     * an upgraded server never runs with the last version's page. */
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL,
                            c->asset ? "no-cache" : "no-store");
    if (c->status == 405 && c->match.allowed[0])
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, c->match.allowed);
    if (c->status == 401) /* RFC 6750: say which scheme the API wants */
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"einsora\"");
    if (c->redirect) /* a standby points at the leader */
        MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, c->redirect);
    else if (c->location[0])
        MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, c->location);
    free(c->redirect);
    c->redirect = NULL;
    if (c->etag[0])
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, c->etag);
    if (c->close)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)c->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

#define AUTH_LOG_EVERY_MS 10000

/* The refusals' log state is the server's; one lock for it (401s are rare, and a flood is
 * what the rate keeps off the log, not off this lock). */
static pthread_mutex_t auth_log_lock = PTHREAD_MUTEX_INITIALIZER;

static void peer_address(struct MHD_Connection *conn, char *buf, size_t size) {
    snprintf(buf, size, "?");
    const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, buf,
                  (socklen_t)size);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, buf,
                  (socklen_t)size);
}

/* The refusals no line named yet, said with the last one's address; the caller holds the log
 * lock. */
static void auth_log_quiet_ones(Server *s, int64_t now) {
    if (!s->auth_unlogged)
        return;
    fprintf(s->cfg.log,
            "einsora serve: %lu more call(s) refused for their token since the last such line "
            "(the last from %s)\n",
            s->auth_unlogged, s->auth_unlogged_peer);
    s->auth_unlogged = 0;
    s->auth_logged_ms = now;
}

/* From the main loop's tick: a burst is counted once AUTH_LOG_EVERY_MS passed since the last
 * line, even when no refusal follows it. */
static void auth_log_flush(Server *s) {
    if (!s->cfg.log)
        return;
    pthread_mutex_lock(&auth_log_lock);
    int64_t now = server_now_ms();
    if (now - s->auth_logged_ms >= AUTH_LOG_EVERY_MS)
        auth_log_quiet_ones(s, now);
    pthread_mutex_unlock(&auth_log_lock);
}

/* A call refused for its token, in the log: who (the peer's address), what it asked and why
 * (no token, one not known, one expired). At most a line per AUTH_LOG_EVERY_MS; the rest are
 * counted, and said with the last one's address (auth_log_quiet_ones()). The path is the
 * caller's bytes: only printable ASCII of it is written. */
static void log_auth_refusal(Server *s, struct MHD_Connection *conn, const HttpCtx *c) {
    if (!s->cfg.log)
        return;
    char peer[INET6_ADDRSTRLEN], path[128];
    peer_address(conn, peer, sizeof(peer));
    size_t k = 0;
    for (const char *p = c->path; *p && k + 1 < sizeof(path); p++)
        path[k++] = *p >= 0x20 && *p < 0x7f ? *p : '?';
    path[k] = 0;
    const char *why = json_string_value(json_object_get(c->json, "message"));
    pthread_mutex_lock(&auth_log_lock);
    int64_t now = server_now_ms();
    if (s->auth_logged_ms && now - s->auth_logged_ms < AUTH_LOG_EVERY_MS) {
        s->auth_unlogged++;
        snprintf(s->auth_unlogged_peer, sizeof(s->auth_unlogged_peer), "%s", peer);
    } else {
        auth_log_quiet_ones(s, now); /* the ones before this line, said first */
        s->auth_logged_ms = now;
        fprintf(s->cfg.log, "einsora serve: refused %.16s %s from %s (401): %s\n", c->method, path,
                peer, c->authorization ? (why ? why : "a token it does not know.") : "no token.");
    }
    pthread_mutex_unlock(&auth_log_lock);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
    Server *s = cls;
    Upload *up = is_uri_mark(*con_cls) ? NULL : *con_cls;
    if (!up || !up->started) {
        if (!up) {
            unsigned marks =
                    is_uri_mark(*con_cls) ? (unsigned)((const char *)*con_cls - uri_marks) : 0;
            if (!(up = calloc(1, sizeof(*up))))
                return MHD_NO;
            up->nul_in_uri = marks & URI_NUL;
            up->slash_in_segment = marks & URI_SLASH;
        }
        *con_cls = up;
        up->started = true;
        conn_deadline_headers_done(conn);
        up->start_us = mono_us();
        atomic_fetch_add(&s->http_active, 1);
        /* Refuse a declared oversized body before reading it. */
        const char *cl =
                MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        uint64_t len;
        check_headers(conn, version, up);
        if (!up->ambiguous_length && cl && parse_uint64(cl, UINT64_MAX, &len) >= 0 &&
            len > SERVER_BODY_MAX)
            up->too_large = true;
        if (!up->ambiguous_length && !up->too_large)
            return MHD_YES;
    }
    if (*upload_data_size > 0) {
        /* A body trickled byte by byte would hold its connection forever: the whole body
         * has a deadline, whatever the pace (the idle timeout restarts on every byte). */
        if (mono_us() - up->start_us > (uint64_t)SERVER_BODY_DEADLINE_S * 1000000u)
            return MHD_NO;
        if (!up->too_large) {
            if (up->body.len + *upload_data_size > SERVER_BODY_MAX)
                up->too_large = true;
            else
                strbuf_append(&up->body, upload_data, *upload_data_size);
        }
        *upload_data_size = 0;
        return MHD_YES;
    }

    uint64_t t0 = mono_us();
    HttpCtx c = {
            .s = s,
            /* HEAD is GET without the body (RFC 9110 9.3.2; libmicrohttpd leaves the body
             * out): a load balancer's health check asks HEAD /healthz. */
            .method = STREQ(method, "HEAD") ? "GET" : method,
            .path = url,
            .body = up->body.len ? strbuf_cstr(&up->body) : "",
            .body_len = up->body.len,
            .authorization = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                         MHD_HTTP_HEADER_AUTHORIZATION),
            .idem_key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Idempotency-Key"),
            .agent_instance = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, WIRE_AGENT_HEADER),
            .query = lookup_query,
            .query_check = query_check,
            .content_type_in = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                           MHD_HTTP_HEADER_CONTENT_TYPE),
            .if_match =
                    MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_MATCH),
            .conn = conn,
            .can_park = s->longpoll && !atomic_load(&s->draining),
            .resumed = up->parked,
            .park_deadline_ms = up->parked ? up->park_deadline_ms : 0,
    };
    up->parked = false;
    uint64_t seen = replay_seen(s); /* a standby's long-polls read its replay */
    if (atomic_load(&s->draining) && !c.resumed)
        api_error(&c, 503, api_is_change(&c) ? "not_committed" : "unavailable",
                  "The server is shutting down; retry in a moment%s.",
                  api_is_change(&c) ? " (this change was not committed)" : "");
    else if (up->nul_in_uri)
        api_error(&c, 400, "bad_request",
                  "The request target contains an escaped NUL byte (%%00).");
    else if (up->slash_in_segment)
        api_error(&c, 400, "bad_request", "A path segment contains an escaped '/' (%%2F).");
    else if (up->ambiguous_length) {
        api_error(&c, 400, "bad_request",
                  "The request gives its body's length twice (two Content-Length headers, or "
                  "one with Transfer-Encoding).");
        c.close = true; /* what follows on the connection is not to be read as requests */
    } else if (up->too_large)
        api_error(&c, 413, "too_large", "The request body is larger than %u bytes.",
                  SERVER_BODY_MAX);
    else if (up->no_host)
        api_error(&c, 400, "bad_request", "An HTTP/1.1 request needs a Host header.");
    else if (up->twice)
        api_error(&c, 400, "bad_request", "The request gives its %s header twice.", up->twice);
    else if (up->body.oom)
        api_error(&c, 500, "internal", "Out of memory reading the request body.");
    else if (!leader_gate(&c))
        api_dispatch(&c);
    if (c.park) {
        /* Nothing to say yet: no thread waits, the connection is parked until an event it may
         * see, its deadline or its client's hang-up. */
        up->parked = true;
        up->park_deadline_ms = c.park_deadline_ms;
        MHD_suspend_connection(conn);
        int parked =
                c.park_node ? longpoll_park_node(s->longpoll, conn, c.park_node, c.park_deadline_ms)
                            : longpoll_park(s->longpoll, conn, c.park_user, c.park_deadline_ms);
        if (parked >= 0 && replay_seen(s) != seen)
            longpoll_wake(s->longpoll, conn); /* published while it was being parked */
        return MHD_YES;
    }
    if (c.status == 401)
        log_auth_refusal(s, conn, &c);
    size_t idx = c.match.route ? (size_t)c.match.route->id : _R_MAX;
    if (idx < METRICS_ROUTES)
        histogram_observe(&s->metrics.api[idx], mono_us() - t0);
    if (c.status >= 100 && c.status < 600)
        atomic_fetch_add(&s->metrics.responses[c.status - 100], 1);
    return send_answer(conn, &c);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    Upload *up = *con_cls;
    if (!up || is_uri_mark(up)) {
        *con_cls = NULL;
        return;
    }
    if (up->started)
        atomic_fetch_sub(&((Server *)cls)->http_active, 1);
    conn_deadline_request_done(conn);
    strbuf_done(&up->body);
    free(up);
    *con_cls = NULL;
}

/* "HOST:PORT", "[IPV6]:PORT" or "NAME:PORT" -> the address to bind (getaddrinfo).
 * "localhost" stays 127.0.0.1 whatever the resolver prefers, as it always was. */
int server_listen_address(const char *listen, struct sockaddr_storage *ret, socklen_t *ret_len,
                          Error *err) {
    const char *colon = strrchr(listen, ':');
    if (!colon)
        return error_set(err, -EINVAL,
                         "--listen takes ADDRESS:PORT, e.g. 127.0.0.1:7780 or [::1]:7780");
    char host[256];
    size_t n = (size_t)(colon - listen);
    const char *h = listen;
    if (n >= 2 && listen[0] == '[' && listen[n - 1] == ']')
        h++, n -= 2; /* [::1]:7780 */
    if (n == 0 || n >= sizeof(host))
        return error_set(err, -EINVAL, "--listen: bad address in '%s'", listen);
    memcpy(host, h, n);
    host[n] = 0;
    uint64_t port;
    if (parse_uint64(colon + 1, 65535, &port) < 0)
        return error_set(err, -EINVAL, "--listen: bad port in '%s'", listen);
    if (STREQ(host, "localhost"))
        strcpy(host, "127.0.0.1");
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *ai = NULL;
    char service[8];
    snprintf(service, sizeof(service), "%u", (unsigned)port);
    int g = getaddrinfo(host, service, &hints, &ai);
    if (g != 0 || !ai)
        return error_set(err, -EINVAL, "--listen: cannot resolve '%s': %s", host, gai_strerror(g));
    if (ai->ai_addrlen > sizeof(*ret)) {
        freeaddrinfo(ai);
        return error_set(err, -EINVAL, "--listen: '%s' is not an IP address", host);
    }
    memset(ret, 0, sizeof(*ret));
    memcpy(ret, ai->ai_addr, ai->ai_addrlen);
    *ret_len = (socklen_t)ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}

/* One server per SQLite state file: a second would answer from a copy that goes stale at the
 * first's next commit and fail its own first write. flock(), which SQLite's own (fcntl)
 * locks do not see; held by an fd kept open until the stores are closed (closing any fd of
 * the file drops the process's fcntl locks). Replicas share PostgreSQL instead. */
static int lock_state_file(Server *s, const char *path, Error *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return error_set(err, -errno, "cannot open the state file %s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        close(fd);
        if (e == EWOULDBLOCK)
            return error_set(err, -EBUSY,
                             "the state file %s is in use by another einsora server (serve or "
                             "up): one server per state file; replicas share a PostgreSQL "
                             "database (docs/postgresql.md)",
                             path);
        return error_set(err, -e, "cannot lock the state file %s: %s", path, strerror(e));
    }
    s->state_lock_fd = fd;
    return 0;
}

static void server_free(Server *s) {
    leader_stop(s); /* when startup failed after leader_init() */
    auth_memo_free(s);
    state_free(s);
    sched_free(s->sched);
    catalog_free(s->catalog);
    store_close(s->store);
    store_close(s->reader);
    if (s->state_lock_fd >= 0)
        close(s->state_lock_fd);
    events_done(&s->events);
    pthread_rwlock_destroy(&s->lock);
    pthread_mutex_destroy(&s->reader_lock);
    free(s);
}

/* Reads may work on a store that cannot take a write (read-only file system, full disk, a
 * broken file): write a row once at start, so /readyz tells a balancer before a client's
 * change fails. The server still starts, to answer reads and say why it is not ready. */
static void probe_store(Server *s) {
    Error e = {0};
    char doc[64];
    snprintf(doc, sizeof(doc), "{\"started_ms\":%lld}", (long long)server_now_ms());
    int r = store_begin(s->store, &e);
    if (r >= 0 && (r = store_fleet_put(s->store, "meta/ready-probe", doc, &e)) >= 0)
        r = store_commit(s->store, &e);
    if (r < 0) {
        store_rollback(s->store);
        s->store_unwritable = true;
        s->store_probe_err = e;
        if (s->cfg.log)
            fprintf(s->cfg.log, "einsora serve: not ready: %s\n", error_message(&e));
    }
}

int server_open(const ServerConfig *cfg, Server **ret, Error *err) {
    Server *s = calloc(1, sizeof(*s));
    if (!s)
        return error_set(err, -ENOMEM, "out of memory");
    s->state_lock_fd = -1;
    s->cfg = *cfg;
    /* The writer must not starve behind a stream of readers (glibc prefers readers). */
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&s->lock, &ra);
    pthread_rwlockattr_destroy(&ra);
    pthread_mutex_init(&s->reader_lock, NULL);
    events_init(&s->events);

    PciIds *ids = NULL;
    /* Optional: without pci.ids, vm_device_name falls back to raw device ids (R6). A file the
     * operator named is not optional: one that cannot be read is an error, not a silent
     * fallback to raw ids. */
    int r = pci_ids_load(cfg->pci_ids_path ? cfg->pci_ids_path : EINSORA_PCI_IDS, &ids, err);
    if (r < 0 && cfg->pci_ids_path) {
        server_free(s);
        return r;
    }
    r = catalog_load_file(cfg->catalog_path ? cfg->catalog_path : catalog_default_path(), ids,
                          &s->catalog, err);
    pci_ids_free(ids);
    if (r >= 0)
        r = store_open_site(cfg->state_path, cfg->site ? cfg->site : "default", &s->store, err);
    if (r >= 0)
        r = store_open_site(cfg->state_path, cfg->site ? cfg->site : "default", &s->reader, err);
    /* Replicas on PostgreSQL load the state only once elected (leader.c). */
    bool replicas = r >= 0 && store_is_pg(s->store);
    if (r >= 0 && !replicas)
        r = lock_state_file(s, cfg->state_path, err);
    if (replicas)
        r = leader_init(s, err);
    if (r >= 0 && !(s->sched = sched_new(s->catalog)))
        r = error_set(err, -ENOMEM, "out of memory");
    if (r >= 0) {
        sched_set_on_placed(s->sched, state_on_placed, s);
        sched_set_time_scale(s->sched, CORE_MS_PER_SECOND);
        /* R15: checked after every change of state in a debug build's server. */
        sched_set_check_invariants(s->sched, EINSORA_DEBUG_CHECKS);
        if (!replicas)
            r = state_load(s, err);
    }
    /* A replica probes nothing and starts no writer until it leads (leader.c). */
    if (r >= 0 && !replicas)
        probe_store(s);
    if (r >= 0 && !replicas && (r = writer_start(s)) < 0)
        r = error_set(err, r, "cannot start the writer thread");
    if (r < 0) {
        server_free(s);
        return r;
    }
    *ret = s;
    return 0;
}

void server_close(Server *s) {
    if (!s)
        return;
    events_close(&s->events); /* wake long-polls so their connections can end */
    if (s->leader)
        leader_stop(s); /* and the writer, if it led */
    else
        writer_stop(s);
    server_free(s);
}

static void on_event_published(void *userdata, const char *user) {
    longpoll_notify(userdata, user);
}

static void stop_longpolls(Server *s) {
    pthread_mutex_lock(&s->events.lock);
    s->events.on_publish = NULL;
    pthread_mutex_unlock(&s->events.lock);
    longpoll_free(s->longpoll);
    s->longpoll = NULL;
}

/* Sockets are what connections cost now: take the hard limit, and leave some for the
 * state file, the listener and the pool's epoll and wake-up descriptors. */
static unsigned raise_fd_limit(unsigned threads) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return 1000;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
        (void)getrlimit(RLIMIT_NOFILE, &rl);
    }
    rlim_t reserve = 64 + 4 * (rlim_t)threads;
    rlim_t n = rl.rlim_cur > 256 + reserve ? rl.rlim_cur - reserve : 256;
    return (unsigned)MIN(n, (rlim_t)1000000);
}

/* SIGTERM: stop accepting, wake the parked long-polls, answer every request already being
 * handled (each op in the writer's queue is committed and answered), then stop. A request
 * that arrives meanwhile on an open connection gets 503 before anything is committed. */
static void drain(Server *s, struct MHD_Daemon *d) {
    atomic_store(&s->draining, true);
    MHD_socket lfd = MHD_quiesce_daemon(d);
    longpoll_wake_all(s->longpoll);
    events_close(&s->events); /* blocking readers (none in this mode) end too */
    uint64_t deadline = mono_us() + (uint64_t)SERVER_DRAIN_S * 1000000u;
    while (atomic_load(&s->http_active) > 0 && mono_us() < deadline)
        nanosleep(&(struct timespec){0, 5 * 1000 * 1000}, NULL);
    MHD_stop_daemon(d);
    if (lfd != MHD_INVALID_SOCKET)
        close(lfd);
    stop_longpolls(s);
}

/* 127.0.0.0/8 and ::1 (also as ::ffff:127.x.y.z): only this host can connect. */
static bool is_loopback(const struct sockaddr_storage *sa) {
    if (sa->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
}

int server_run(const ServerConfig *cfg, void (*ready_fn)(uint16_t port, void *userdata),
               void *userdata, Error *err) {
    struct sockaddr_storage sa;
    socklen_t sa_len = 0;
    const char *listen = cfg->listen ? cfg->listen : SERVER_DEFAULT_LISTEN;
    int r = server_listen_address(listen, &sa, &sa_len, err);
    if (r < 0)
        return r;
    bool tls = cfg->tls_cert_path || cfg->tls_key_path;
    if (tls && (!cfg->tls_cert_path || !cfg->tls_key_path))
        return error_set(err, -EINVAL, "TLS needs both --tls-cert and --tls-key");
    if (cfg->http_threads > SERVER_HTTP_THREADS_MAX)
        return error_set(err, -EINVAL, "--http-threads takes a number from 1 to %u",
                         SERVER_HTTP_THREADS_MAX);
    if (!tls && !cfg->insecure_plain_http && !is_loopback(&sa))
        return error_set(err, -EPERM,
                         "refusing to serve tokens over plain HTTP on %s, which is not loopback: "
                         "give --tls-cert FILE --tls-key FILE, or --insecure-plain-http (behind "
                         "a TLS proxy)",
                         listen);
    _cleanup_free_ char *cert = NULL, *key = NULL;
    if (tls) {
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
            return error_set(err, -EOPNOTSUPP, "this libmicrohttpd was built without TLS");
        if ((r = read_full_file(cfg->tls_cert_path, 1u << 20, &cert, NULL)) < 0)
            return error_set(err, r, "cannot read the TLS certificate %s: %s", cfg->tls_cert_path,
                             strerror(-r));
        if ((r = read_full_file(cfg->tls_key_path, 1u << 20, &key, NULL)) < 0)
            return error_set(err, r, "cannot read the TLS key %s: %s", cfg->tls_key_path,
                             strerror(-r));
        /* libmicrohttpd says only that it could not start: a file that is not the PEM asked
         * for (or the two given the wrong way round) is named here, before anything starts. */
        if (!strstr(cert, "-----BEGIN CERTIFICATE-----"))
            return error_set(err, -EINVAL,
                             "--tls-cert %s holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                             cfg->tls_cert_path);
        if (!strstr(key, "-----BEGIN ") || !strstr(key, "PRIVATE KEY-----"))
            return error_set(err, -EINVAL,
                             "--tls-key %s holds no PEM private key (-----BEGIN ... PRIVATE "
                             "KEY-----)",
                             cfg->tls_key_path);
    }
    /* Every request the server holds grows the heap of the thread that made it (the writer's,
     * mostly): glibc grows a thread's heap a page at a time, each step an mprotect() that takes
     * the address space's lock for writing while the other threads fault pages in under it
     * (1.7 calls per placement at 64 clients). A pad this size makes each thread heap
     * read-write when it is created; untouched pages still cost no memory, and freed pages
     * still go back (history_trim()). Before any thread starts, so every heap is made so. */
    mallopt(M_TOP_PAD, SERVER_HEAP_PAD);
    /* Signals are taken synchronously by this thread; block them before any thread starts. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    /* SIGHUP asks daemons to read their configuration again; this server reads its catalog
     * at start only, and a HUP's default (an exit without the drain) would drop the answers
     * of changes in flight: taken, logged, and otherwise left alone. */
    sigaddset(&mask, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);

    Server *s;
    if ((r = server_open(cfg, &s, err)) < 0)
        return r;
    if ((r = longpoll_new(&s->longpoll, err)) < 0) {
        server_close(s);
        return r;
    }
    pthread_mutex_lock(&s->events.lock);
    s->events.on_publish = on_event_published;
    s->events.on_publish_userdata = s->longpoll;
    pthread_mutex_unlock(&s->events.lock);
    ConnDeadline *deadline = NULL;
    if ((r = conn_deadline_new(cfg->header_deadline_ms > 0 ? cfg->header_deadline_ms
                                                           : SERVER_HEADER_DEADLINE_S * 1000,
                               &deadline, err)) < 0) {
        stop_longpolls(s);
        server_close(s);
        return r;
    }
    unsigned threads = cfg->http_threads ? cfg->http_threads : SERVER_HTTP_THREADS;
    unsigned conn_limit = raise_fd_limit(threads);
    /* epoll with a fixed pool of threads: an idle or trickling connection, or a parked
     * long-poll, costs a socket, never a thread; one address holds at most per_address. */
    errno = 0;
    struct MHD_Daemon *d = MHD_start_daemon(
            MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_SUSPEND_RESUME | MHD_USE_ITC |
                    (sa.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0) | (tls ? MHD_USE_TLS : 0),
            0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
            MHD_OPTION_NOTIFY_CONNECTION, conn_deadline_notify, deadline,
            MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_CONNECTION_TIMEOUT,
            (unsigned)SERVER_IDLE_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
            (size_t)SERVER_CONNECTION_MEMORY, MHD_OPTION_CONNECTION_LIMIT, conn_limit,
            MHD_OPTION_PER_IP_CONNECTION_LIMIT,
            cfg->per_address_limit ? cfg->per_address_limit : (unsigned)SERVER_PER_ADDRESS_MAX,
            MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)1024,
            /* Without TLS these two end the list (MHD_OPTION_END is 0). */
            tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, cert, MHD_OPTION_HTTPS_MEM_KEY, key,
            MHD_OPTION_END);
    if (!d) {
        /* libmicrohttpd says only that it failed; errno tells a thread it could not start
         * (EAGAIN: thread or memory limits) from an address it could not bind. */
        int e = errno;
        conn_deadline_free(deadline);
        stop_longpolls(s);
        server_close(s);
        if (e == EAGAIN || e == ENOMEM)
            return error_set(err, -e,
                             "cannot start %u handler threads (%s): give a smaller "
                             "--http-threads, or raise the process's limits",
                             threads, strerror(e));
        if (tls)
            return error_set(err, -EADDRINUSE,
                             "cannot serve on %s: the address is in use or not this host's, or "
                             "the TLS certificate %s and key %s were refused (do they match?)",
                             cfg->listen ? cfg->listen : SERVER_DEFAULT_LISTEN, cfg->tls_cert_path,
                             cfg->tls_key_path);
        return error_set(err, -EADDRINUSE,
                         "cannot listen on %s (in use, or not an address of "
                         "this host)",
                         cfg->listen ? cfg->listen : SERVER_DEFAULT_LISTEN);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    uint16_t port = info ? info->port
                         : ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                                          : ((struct sockaddr_in *)&sa)->sin_port);
    if (s->leader && (r = leader_start(s, port, err)) < 0) {
        drain(s, d);
        conn_deadline_free(deadline);
        server_close(s);
        return r;
    }
    if (ready_fn)
        ready_fn(port, userdata);
    if (s->cfg.log && !s->leader) /* a replica says what it restored once it leads */
        fprintf(s->cfg.log,
                "einsora serve: restored %zu node(s) and %zu request(s), %zu of them live, "
                "from %s\n",
                s->nodes.n, s->n_reqs, s->live.n, s->cfg.state_path);

    struct timespec tick = {0, 200 * 1000 * 1000};
    while (!atomic_load(&s->fatal)) {
        auth_log_flush(s);
        int sig = sigtimedwait(&mask, NULL, &tick);
        if (sig == SIGINT || sig == SIGTERM)
            break;
        if (sig == SIGHUP && s->cfg.log)
            fprintf(s->cfg.log, "einsora serve: SIGHUP: nothing is read again while serving; "
                                "restart the server to read a changed catalog\n");
    }
    r = 0;
    if (atomic_load(&s->fatal))
        r = error_set(err, s->fatal_err.code ? s->fatal_err.code : -EIO, "stopped: %s",
                      error_message(&s->fatal_err));
    else if (s->cfg.log)
        fprintf(s->cfg.log, "einsora serve: stopping: answering what is in flight\n");
    drain(s, d);
    conn_deadline_free(deadline);
    server_close(s);
    return r;
}
