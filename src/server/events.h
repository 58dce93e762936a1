/* events.h: the change feed: every change of state as an event with a sequence number.
 *
 * Events are appended by the writer inside a transaction and become visible only once that
 * transaction committed (events_publish), so a follower never sees a change that a crash
 * could take back. Readers wait for new events with a timeout (long-poll). */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/ptrmap.h"

typedef struct Event {
    uint64_t seq;
    int64_t time_ms;
    char *actor;
    char *type;
    char *object;
    char *user; /* whose object it is: non-admins see only their own */
    char *data; /* its data, a JSON object, as compact text: what a read answers with */
} Event;

typedef struct SeqVec {
    uint64_t *v;
    size_t n, cap;
} SeqVec;

typedef struct EventLog {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    Event *ev;     /* ev[i].seq == base + i + 1 */
    uint64_t base; /* events dropped by retention: seqs up to base are gone */
    size_t n, cap;
    uint64_t published; /* highest visible seq */
    bool closing;
    /* Called (under lock) for each event as it becomes visible, with its user (it wakes the
     * parked long-polls that may see it). */
    void (*on_publish)(void *userdata, const char *user);
    void *on_publish_userdata;
    /* Each user's events' seqs in order: a user's read never scans the feed. */
    PtrMap by_user; /* user -> SeqVec* */
} EventLog;

int events_init(EventLog *l);
void events_done(EventLog *l);
/* Append (invisible until published); takes ownership of data, the compact text of a JSON
 * object (NULL: {}). Returns the seq or 0. */
uint64_t events_append(EventLog *l, int64_t time_ms, const char *actor, const char *type,
                       const char *object, const char *user, char *data);
/* Drop unpublished events (a failed transaction). */
void events_rollback(EventLog *l);
void events_publish(EventLog *l);
/* Wake every waiting reader (shutdown). */
void events_close(EventLog *l);
uint64_t events_last(EventLog *l);
/* Events after `after` visible to `user` (NULL: all), at most limit; waits up to wait_ms
 * for the first one. Returns {"events": [...], "next": cursor} as text with a newline (an
 * answer's body; NULL when out of memory), and how many events it holds in *ret_n. */
char *events_read(EventLog *l, uint64_t after, size_t limit, int wait_ms, const char *user,
                  size_t *ret_n);
/* The newest seq dropped by retention (0: none); a cursor before it missed events. */
uint64_t events_base(EventLog *l);
/* Retention. The feed starts after seq `base` (startup, when the store kept only
 * later events; only while empty). */
void events_set_base(EventLog *l, uint64_t base);
/* time_ms of the oldest event retention could drop, INT64_MAX when none. */
int64_t events_oldest_ms(EventLog *l);
/* Drop published events older than before_ms from memory, oldest first, always keeping the
 * newest; returns how many. A cursor older than what is kept resumes at the oldest kept. */
size_t events_prune(EventLog *l, int64_t before_ms);
