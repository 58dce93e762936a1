/* conn-deadline.c: shut down connections whose request headers missed their deadline. */
#include "conn-deadline.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "util/clock.h"
#include "util/macro.h"

typedef struct Watched {
    struct Watched *prev, *next;
    ConnDeadline *owner;
    int fd;
    int64_t since_ms; /* headers awaited since; 0 = not awaiting headers */
} Watched;

struct ConnDeadline {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    bool stopping;
    int64_t deadline_ms;
    Watched *head;
    atomic_uint_fast64_t expired;
};

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One pass a quarter deadline (at most a second): a connection is shut down at most that
 * late, and the pass costs one look at each open connection. */
static void *watch_main(void *userdata) {
    ConnDeadline *w = userdata;
    int64_t period = MAX(MIN(w->deadline_ms / 4, 1000), 10);
    pthread_mutex_lock(&w->lock);
    while (!w->stopping) {
        int64_t now = mono_ms();
        for (Watched *c = w->head; c; c = c->next)
            if (c->since_ms && now - c->since_ms >= w->deadline_ms) {
                /* The entry leaves the list only in the CLOSED notification, which comes
                 * before libmicrohttpd closes the descriptor: under the lock, fd is still
                 * this connection's. */
                shutdown(c->fd, SHUT_RDWR);
                c->since_ms = 0;
                atomic_fetch_add(&w->expired, 1);
            }
        struct timespec ts = timespec_after_ms(CLOCK_REALTIME, (uint64_t)period);
        (void)pthread_cond_timedwait(&w->cond, &w->lock, &ts);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

int conn_deadline_new(int64_t deadline_ms, ConnDeadline **ret, Error *err) {
    ConnDeadline *w = calloc(1, sizeof(*w));
    if (!w)
        return error_set(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    w->deadline_ms = deadline_ms > 0 ? deadline_ms : 1;
    int r = pthread_create(&w->thread, NULL, watch_main, w);
    if (r != 0) {
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return error_set(err, -r, "cannot start the connection deadline watcher");
    }
    *ret = w;
    return 0;
}

void conn_deadline_free(ConnDeadline *w) {
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    while (w->head) {
        Watched *c = w->head;
        w->head = c->next;
        free(c);
    }
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

void conn_deadline_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    ConnDeadline *w = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info =
                MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        Watched *c = info ? calloc(1, sizeof(*c)) : NULL;
        if (!c)
            return; /* unwatched: it still has the idle timeout and the per-address limit */
        c->owner = w;
        c->fd = info->connect_fd;
        c->since_ms = mono_ms();
        pthread_mutex_lock(&w->lock);
        c->next = w->head;
        if (w->head)
            w->head->prev = c;
        w->head = c;
        pthread_mutex_unlock(&w->lock);
        *socket_context = c;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        Watched *c = *socket_context;
        if (!c)
            return;
        pthread_mutex_lock(&w->lock);
        if (c->prev)
            c->prev->next = c->next;
        else
            w->head = c->next;
        if (c->next)
            c->next->prev = c->prev;
        pthread_mutex_unlock(&w->lock);
        free(c);
        *socket_context = NULL;
    }
}

static void set_since(struct MHD_Connection *conn, bool awaiting) {
    const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    Watched *c = info ? info->socket_context : NULL;
    if (!c)
        return;
    pthread_mutex_lock(&c->owner->lock);
    c->since_ms = awaiting ? mono_ms() : 0;
    pthread_mutex_unlock(&c->owner->lock);
}

void conn_deadline_headers_done(struct MHD_Connection *conn) {
    set_since(conn, false);
}

void conn_deadline_request_done(struct MHD_Connection *conn) {
    set_since(conn, true);
}

uint64_t conn_deadline_expired(const ConnDeadline *w) {
    return w ? atomic_load(&((ConnDeadline *)w)->expired) : 0;
}
