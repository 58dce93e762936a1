/* longpoll.c: parked long-polls: woken by a matching event, a deadline or a hang-up. */
#include "longpoll.h"

#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "server/ptrmap.h"
#include "util/macro.h"

typedef struct Waiter Waiter;
struct Waiter {
    struct MHD_Connection *conn;
    int fd;
    char *user; /* NULL: an admin */
    int64_t deadline_ms;
    Waiter *prev, *next; /* in its list: the admins' or its user's */
};

typedef struct WaiterList {
    Waiter *head;
} WaiterList;

struct LongPoll {
    pthread_mutex_t lock;
    WaiterList admins;
    PtrMap by_user; /* user -> WaiterList* */
    PtrMap by_conn; /* "%p" of the connection -> Waiter* */
    size_t n;
    int epfd, wakefd;
    bool stopping;
    pthread_t thread;
};

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void conn_key(const struct MHD_Connection *conn, char buf[32]) {
    snprintf(buf, 32, "%p", (const void *)conn);
}

static WaiterList *list_of(LongPoll *lp, const char *user, bool create) {
    if (!user)
        return &lp->admins;
    WaiterList *l = ptrmap_get(&lp->by_user, user);
    if (!l && create && (l = calloc(1, sizeof(*l))) && ptrmap_put(&lp->by_user, user, l) < 0) {
        free(l);
        l = NULL;
    }
    return l;
}

/* Unlink, stop watching and resume w; called with lock held. */
static void wake_locked(LongPoll *lp, Waiter *w) {
    WaiterList *l = list_of(lp, w->user, false);
    if (w->prev)
        w->prev->next = w->next;
    else if (l)
        l->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    if (l && !l->head && w->user)
        free(ptrmap_remove(&lp->by_user, w->user));
    char key[32];
    conn_key(w->conn, key);
    ptrmap_remove(&lp->by_conn, key);
    (void)epoll_ctl(lp->epfd, EPOLL_CTL_DEL, w->fd, NULL);
    lp->n--;
    MHD_resume_connection(w->conn);
    free(w->user);
    free(w);
}

static void *watch_main(void *userdata) {
    LongPoll *lp = userdata;
    struct epoll_event evs[64];
    for (;;) {
        int n = epoll_wait(lp->epfd, evs, ARRAY_SIZE(evs), 250);
        pthread_mutex_lock(&lp->lock);
        if (lp->stopping) {
            pthread_mutex_unlock(&lp->lock);
            break;
        }
        for (int i = 0; i < n; i++) {
            if (evs[i].data.ptr == NULL) { /* the wake-up eventfd */
                uint64_t v;
                (void)!read(lp->wakefd, &v, sizeof(v));
                continue;
            }
            /* The client hung up: answer now, so libmicrohttpd sees the closed socket and
             * frees the connection at once (unless something woke it meanwhile). */
            char key[32];
            conn_key(evs[i].data.ptr, key);
            Waiter *w = ptrmap_get(&lp->by_conn, key);
            if (w)
                wake_locked(lp, w);
        }
        /* Deadlines: a scan a quarter second is cheap next to a thread per waiter. */
        int64_t now = mono_ms();
        for (size_t i = 0; i < lp->by_conn.cap; i++)
            if (lp->by_conn.keys[i] && lp->by_conn.keys[i] != PTRMAP_TOMB) {
                Waiter *w = lp->by_conn.values[i];
                if (w->deadline_ms <= now)
                    wake_locked(lp, w);
            }
        pthread_mutex_unlock(&lp->lock);
    }
    return NULL;
}

int longpoll_new(LongPoll **ret, Error *err) {
    LongPoll *lp = calloc(1, sizeof(*lp));
    if (!lp)
        return error_set(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&lp->lock, NULL);
    lp->epfd = epoll_create1(EPOLL_CLOEXEC);
    lp->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    int r = 0;
    if (lp->epfd < 0 || lp->wakefd < 0 || epoll_ctl(lp->epfd, EPOLL_CTL_ADD, lp->wakefd, &ev) < 0)
        r = -errno;
    else
        r = -pthread_create(&lp->thread, NULL, watch_main, lp);
    if (r < 0) {
        if (lp->epfd >= 0)
            close(lp->epfd);
        if (lp->wakefd >= 0)
            close(lp->wakefd);
        pthread_mutex_destroy(&lp->lock);
        free(lp);
        return error_set(err, r, "cannot start the long-poll watcher");
    }
    pthread_setname_np(lp->thread, "einsora-longpoll");
    *ret = lp;
    return 0;
}

void longpoll_free(LongPoll *lp) {
    if (!lp)
        return;
    longpoll_wake_all(lp);
    pthread_mutex_lock(&lp->lock);
    lp->stopping = true;
    pthread_mutex_unlock(&lp->lock);
    uint64_t one = 1;
    (void)!write(lp->wakefd, &one, sizeof(one));
    pthread_join(lp->thread, NULL);
    for (size_t i = 0; i < lp->by_user.cap; i++)
        if (lp->by_user.keys[i] && lp->by_user.keys[i] != PTRMAP_TOMB)
            free(lp->by_user.values[i]);
    ptrmap_done(&lp->by_user);
    ptrmap_done(&lp->by_conn);
    close(lp->epfd);
    close(lp->wakefd);
    pthread_mutex_destroy(&lp->lock);
    free(lp);
}

int longpoll_park(LongPoll *lp, struct MHD_Connection *conn, const char *user,
                  int64_t deadline_ms) {
    const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    Waiter *w = calloc(1, sizeof(*w));
    int r = !ci || !w || (user && !(w->user = strdup(user))) ? -ENOMEM : 0;
    bool resumed = false;
    pthread_mutex_lock(&lp->lock);
    WaiterList *l = r < 0 || lp->stopping ? NULL : list_of(lp, user, true);
    char key[32];
    conn_key(conn, key);
    if (r >= 0 && (!l || ptrmap_put(&lp->by_conn, key, w) < 0))
        r = lp->stopping ? -ESHUTDOWN : -ENOMEM;
    if (r >= 0) {
        w->conn = conn;
        w->fd = ci->connect_fd;
        w->deadline_ms = deadline_ms;
        w->next = l->head;
        if (l->head)
            l->head->prev = w;
        l->head = w;
        lp->n++;
        /* The connection, not the waiter: an event may come after another thread woke (and
         * freed) the waiter; the watcher looks the connection up again under the lock. */
        struct epoll_event ev = {.events = EPOLLRDHUP, .data.ptr = conn};
        if (epoll_ctl(lp->epfd, EPOLL_CTL_ADD, w->fd, &ev) < 0) {
            r = -errno;
            wake_locked(lp, w); /* resumes conn */
            w = NULL;
            resumed = true;
        }
    }
    pthread_mutex_unlock(&lp->lock);
    if (r < 0 && !resumed) {
        if (w)
            free(w->user);
        free(w);
        MHD_resume_connection(conn); /* never leave it suspended */
    }
    return r;
}

void longpoll_wake(LongPoll *lp, struct MHD_Connection *conn) {
    char key[32];
    conn_key(conn, key);
    pthread_mutex_lock(&lp->lock);
    Waiter *w = ptrmap_get(&lp->by_conn, key);
    if (w)
        wake_locked(lp, w);
    pthread_mutex_unlock(&lp->lock);
}

static void wake_list(LongPoll *lp, WaiterList *l) {
    while (l && l->head) {
        bool last = !l->head->next && l->head->user; /* waking it frees a user's list */
        wake_locked(lp, l->head);
        if (last)
            break;
    }
}

void longpoll_notify(LongPoll *lp, const char *user) {
    pthread_mutex_lock(&lp->lock);
    wake_list(lp, &lp->admins);
    if (user)
        wake_list(lp, list_of(lp, user, false));
    pthread_mutex_unlock(&lp->lock);
}

void longpoll_wake_all(LongPoll *lp) {
    pthread_mutex_lock(&lp->lock);
    for (size_t i = 0; i < lp->by_conn.cap; i++)
        if (lp->by_conn.keys[i] && lp->by_conn.keys[i] != PTRMAP_TOMB)
            wake_locked(lp, lp->by_conn.values[i]);
    pthread_mutex_unlock(&lp->lock);
}

size_t longpoll_count(LongPoll *lp) {
    pthread_mutex_lock(&lp->lock);
    size_t n = lp->n;
    pthread_mutex_unlock(&lp->lock);
    return n;
}
