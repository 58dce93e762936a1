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
    char *node; /* a work poll: woken by its node's events only (user is then NULL) */
    int64_t deadline_ms;
    Waiter *prev, *next; /* in its list: the admins', its user's or its node's */
};

typedef struct WaiterList {
    Waiter *head;
} WaiterList;

struct LongPoll {
    pthread_mutex_t lock;
    WaiterList admins;
    PtrMap by_user; /* user -> WaiterList* */
    PtrMap by_node; /* node -> WaiterList*: work polls */
    /* Nodes whose work events appended since the last publish may change (not yet visible:
     * they are woken when the events are); every node when `all_noted`. */
    char **noted;
    size_t n_noted;
    bool all_noted;
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

static WaiterList *list_in(PtrMap *map, const char *key, bool create) {
    WaiterList *l = ptrmap_get(map, key);
    if (!l && create && (l = calloc(1, sizeof(*l))) && ptrmap_put(map, key, l) < 0) {
        free(l);
        l = NULL;
    }
    return l;
}

static WaiterList *list_of(LongPoll *lp, const char *user, bool create) {
    return user ? list_in(&lp->by_user, user, create) : &lp->admins;
}

/* Unlink, stop watching and resume w; called with lock held. */
static void wake_locked(LongPoll *lp, Waiter *w) {
    WaiterList *l = w->node ? list_in(&lp->by_node, w->node, false) : list_of(lp, w->user, false);
    if (w->prev)
        w->prev->next = w->next;
    else if (l)
        l->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    if (l && !l->head && w->node)
        free(ptrmap_remove(&lp->by_node, w->node));
    else if (l && !l->head && w->user)
        free(ptrmap_remove(&lp->by_user, w->user));
    char key[32];
    conn_key(w->conn, key);
    ptrmap_remove(&lp->by_conn, key);
    (void)epoll_ctl(lp->epfd, EPOLL_CTL_DEL, w->fd, NULL);
    lp->n--;
    MHD_resume_connection(w->conn);
    free(w->user);
    free(w->node);
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
    for (size_t i = 0; i < lp->by_node.cap; i++)
        if (lp->by_node.keys[i] && lp->by_node.keys[i] != PTRMAP_TOMB)
            free(lp->by_node.values[i]);
    ptrmap_done(&lp->by_node);
    for (size_t i = 0; i < lp->n_noted; i++)
        free(lp->noted[i]);
    free(lp->noted);
    ptrmap_done(&lp->by_conn);
    close(lp->epfd);
    close(lp->wakefd);
    pthread_mutex_destroy(&lp->lock);
    free(lp);
}

/* Park conn in the list of `node` (a work poll) or else of `user` (an event poll). */
static int park(LongPoll *lp, struct MHD_Connection *conn, const char *user, const char *node,
                int64_t deadline_ms) {
    const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    Waiter *w = calloc(1, sizeof(*w));
    int r = !ci || !w || (user && !(w->user = strdup(user))) || (node && !(w->node = strdup(node)))
                    ? -ENOMEM
                    : 0;
    bool resumed = false;
    pthread_mutex_lock(&lp->lock);
    WaiterList *l = r < 0 || lp->stopping ? NULL
                    : node                ? list_in(&lp->by_node, node, true)
                                          : list_of(lp, user, true);
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
        if (w) {
            free(w->user);
            free(w->node);
        }
        free(w);
        MHD_resume_connection(conn); /* never leave it suspended */
    }
    return r;
}

int longpoll_park(LongPoll *lp, struct MHD_Connection *conn, const char *user,
                  int64_t deadline_ms) {
    return park(lp, conn, user, NULL, deadline_ms);
}

int longpoll_park_node(LongPoll *lp, struct MHD_Connection *conn, const char *node,
                       int64_t deadline_ms) {
    return park(lp, conn, NULL, node, deadline_ms);
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
        /* waking it frees a user's or a node's list */
        bool last = !l->head->next && (l->head->user || l->head->node);
        wake_locked(lp, l->head);
        if (last)
            break;
    }
}

void longpoll_note_node(LongPoll *lp, const char *node) {
    pthread_mutex_lock(&lp->lock);
    bool known = lp->all_noted || !node;
    for (size_t i = 0; !known && i < lp->n_noted; i++)
        known = STREQ(lp->noted[i], node);
    char **grown = known ? NULL : realloc(lp->noted, (lp->n_noted + 1) * sizeof(*lp->noted));
    if (grown)
        lp->noted = grown;
    if (!known && (!grown || !(lp->noted[lp->n_noted] = strdup(node))))
        lp->all_noted = true; /* out of memory: waking too many is safe, too few is not */
    else if (!known)
        lp->n_noted++;
    if (!node)
        lp->all_noted = true;
    pthread_mutex_unlock(&lp->lock);
}

/* Wake the work polls of the nodes noted, and forget them; called with lock held. */
static void wake_noted_locked(LongPoll *lp) {
    if (lp->all_noted)
        for (size_t i = 0; i < lp->by_conn.cap; i++)
            if (lp->by_conn.keys[i] && lp->by_conn.keys[i] != PTRMAP_TOMB &&
                ((Waiter *)lp->by_conn.values[i])->node)
                wake_locked(lp, lp->by_conn.values[i]);
    for (size_t i = 0; i < lp->n_noted; i++) {
        if (!lp->all_noted)
            wake_list(lp, list_in(&lp->by_node, lp->noted[i], false));
        free(lp->noted[i]);
    }
    lp->n_noted = 0;
    lp->all_noted = false;
}

void longpoll_notify(LongPoll *lp, const char *user) {
    pthread_mutex_lock(&lp->lock);
    wake_list(lp, &lp->admins);
    if (user)
        wake_list(lp, list_of(lp, user, false));
    wake_noted_locked(lp);
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
