/* http.c: libmicrohttpd glue and the server's life cycle (start, restore, serve, stop). */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "config.h"
#include "config/catalog-yaml.h"
#include "leader.h"
#include "store/store-pg.h"
#include "util/macro.h"
#include "util/strutil.h"

typedef struct Upload {
    StrBuf body;
    bool too_large;
} Upload;

static uint64_t mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static const char *lookup_query(void *conn, const char *key) {
    return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
}

static enum MHD_Result send_answer(struct MHD_Connection *conn, HttpCtx *c) {
    char *text = c->text;
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
    if (!resp) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            c->content_type ? c->content_type : "application/json");
    if (c->status == 405 && c->match.allowed[0])
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, c->match.allowed);
    if (c->location)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, c->location);
    free(c->location);
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)c->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
    Server *s = cls;
    Upload *up = *con_cls;
    if (!up) {
        up = calloc(1, sizeof(*up));
        if (!up)
            return MHD_NO;
        *con_cls = up;
        /* Refuse a declared oversized body before reading it. */
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
        uint64_t len;
        if (cl && parse_uint64(cl, UINT64_MAX, &len) >= 0 && len > SERVER_BODY_MAX)
            up->too_large = true;
        else
            return MHD_YES;
    }
    if (*upload_data_size > 0) {
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
            .method = method,
            .path = url,
            .body = up->body.len ? strbuf_cstr(&up->body) : "",
            .body_len = up->body.len,
            .authorization = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                         MHD_HTTP_HEADER_AUTHORIZATION),
            .idem_key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Idempotency-Key"),
            .query = lookup_query,
            .conn = conn,
    };
    if (up->too_large)
        api_error(&c, 413, "too_large", "The request body is larger than %u bytes.",
                  SERVER_BODY_MAX);
    else if (up->body.oom)
        api_error(&c, 500, "internal", "Out of memory reading the request body.");
    else if (!leader_gate(&c))
        api_dispatch(&c);
    size_t idx = c.match.route ? (size_t)c.match.route->id : _R_MAX;
    if (idx < METRICS_ROUTES)
        histogram_observe(&s->metrics.api[idx], mono_us() - t0);
    if (c.status >= 100 && c.status < 600)
        atomic_fetch_add(&s->metrics.responses[c.status / 100], 1);
    return send_answer(conn, &c);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    Upload *up = *con_cls;
    if (!up)
        return;
    strbuf_done(&up->body);
    free(up);
    *con_cls = NULL;
}

static int parse_listen(const char *listen, struct sockaddr_in *ret, Error *err) {
    const char *colon = strrchr(listen, ':');
    if (!colon)
        return error_set(err, -EINVAL, "--listen takes ADDRESS:PORT, e.g. 127.0.0.1:7780.");
    char host[64];
    size_t n = (size_t)(colon - listen);
    if (n == 0 || n >= sizeof(host))
        return error_set(err, -EINVAL, "--listen: bad address in '%s'.", listen);
    memcpy(host, listen, n);
    host[n] = 0;
    uint64_t port;
    if (parse_uint64(colon + 1, 65535, &port) < 0)
        return error_set(err, -EINVAL, "--listen: bad port in '%s'.", listen);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (STREQ(host, "localhost"))
        strcpy(host, "127.0.0.1");
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        return error_set(err, -EINVAL, "--listen: '%s' is not an IPv4 address.", host);
    *ret = sa;
    return 0;
}

static void server_free(Server *s) {
    leader_stop(s); /* when startup failed after leader_init() */
    state_free(s);
    for (size_t i = 0; i < s->token_cache.cap; i++)
        if (s->token_cache.keys[i] && s->token_cache.keys[i] != PTRMAP_TOMB)
            free(s->token_cache.values[i]);
    ptrmap_done(&s->token_cache);
    sched_free(s->sched);
    catalog_free(s->catalog);
    store_close(s->store);
    store_close(s->reader);
    events_done(&s->events);
    pthread_rwlock_destroy(&s->lock);
    pthread_mutex_destroy(&s->reader_lock);
    free(s);
}

int server_run(const ServerConfig *cfg, void (*ready_fn)(uint16_t port, void *userdata),
               void *userdata, Error *err) {
    struct sockaddr_in sa;
    int r = parse_listen(cfg->listen ? cfg->listen : SERVER_DEFAULT_LISTEN, &sa, err);
    if (r < 0)
        return r;
    Server *s = calloc(1, sizeof(*s));
    if (!s)
        return error_set(err, -ENOMEM, "Out of memory.");
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
    /* Optional: without pci.ids, vm_device_name falls back to raw device ids (R6). */
    (void)pci_ids_load(cfg->pci_ids_path ? cfg->pci_ids_path : EINSORA_PCI_IDS, &ids, NULL);
    r = catalog_load_file(cfg->catalog_path ? cfg->catalog_path : catalog_default_path(), ids,
                          &s->catalog, err);
    pci_ids_free(ids);
    if (r >= 0)
        r = store_open_site(cfg->state_path, cfg->site, &s->store, err);
    if (r >= 0)
        r = store_open_site(cfg->state_path, cfg->site, &s->reader, err);
    /* Replicas on PostgreSQL load the state only once elected (leader.c). */
    bool replicas = r >= 0 && store_is_pg(s->store);
    if (replicas)
        r = leader_init(s, err);
    if (r >= 0 && !(s->sched = sched_new(s->catalog)))
        r = error_set(err, -ENOMEM, "Out of memory.");
    if (r >= 0) {
        sched_set_on_placed(s->sched, state_on_placed, s);
        if (!replicas)
            r = state_load(s, err);
    }
    if (r < 0) {
        server_free(s);
        return r;
    }

    /* Signals are taken synchronously by this thread; block them before any thread starts. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (!replicas && (r = writer_start(s)) < 0) {
        server_free(s);
        return error_set(err, r, "Cannot start the writer thread.");
    }
    struct MHD_Daemon *d = MHD_start_daemon(
            MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0,
            NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
            MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_CONNECTION_TIMEOUT,
            (unsigned)120, MHD_OPTION_CONNECTION_LIMIT, (unsigned)4000, MHD_OPTION_LISTEN_BACKLOG_SIZE,
            (unsigned)1024, MHD_OPTION_END);
    if (!d) {
        if (!replicas)
            writer_stop(s);
        server_free(s);
        return error_set(err, -EADDRINUSE, "Cannot listen on %s (in use, or not an address of "
                                           "this host).",
                         cfg->listen ? cfg->listen : SERVER_DEFAULT_LISTEN);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    uint16_t port = info ? info->port : ntohs(sa.sin_port);
    if (replicas && (r = leader_start(s, port, err)) < 0) {
        MHD_stop_daemon(d);
        server_free(s);
        return r;
    }
    if (ready_fn)
        ready_fn(port, userdata);

    struct timespec tick = {0, 200 * 1000 * 1000};
    while (!atomic_load(&s->fatal)) {
        int sig = sigtimedwait(&mask, NULL, &tick);
        if (sig == SIGINT || sig == SIGTERM)
            break;
    }
    r = 0;
    if (atomic_load(&s->fatal))
        r = error_set(err, s->fatal_err.code ? s->fatal_err.code : -EIO, "Stopped: %s",
                      error_message(&s->fatal_err));
    events_close(&s->events); /* wake long-polls so their connections can end */
    MHD_stop_daemon(d);
    if (replicas)
        leader_stop(s); /* and the writer, if it led */
    else
        writer_stop(s);
    server_free(s);
    return r;
}
