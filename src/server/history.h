/* history.h: indexes that keep handlers' cost independent of history: the live
 * requests (pending, placed, active) in id order, and each user's requests in id order.
 * Called with the server's lock held: for writing to add or compact, for reading to scan. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct Server Server;
typedef struct Req Req;

typedef struct ReqVec {
    Req **v;
    size_t n, cap;
} ReqVec;

/* A request was added (state_req_add): index it. -ENOMEM leaves nothing half-indexed. */
int history_req_added(Server *s, Req *r);
/* The live requests in id order (writer: ended ones are dropped from the index first). */
ReqVec *history_live(Server *s);
/* The user's requests in id order, NULL when none. */
const ReqVec *history_user(Server *s, const char *user);
/* Index of the first request in v with an id above `after` (binary search). */
size_t history_first_after(const ReqVec *v, uint64_t after);
bool history_req_is_live(const Req *r);
/* Retention (writer, once a second at most): free ended requests, their idempotency keys and
 * events older than the configured retention from memory, and (once a minute) drop what is
 * older than the store's retention from the store in the current transaction. */
void history_prune(Server *s);
/* Give the memory of dropped requests back to the system when enough went (writer thread,
 * outside the state lock). */
void history_trim(Server *s, int64_t now_ms);
/* Whether the writer should run a batch for the retention although no op waits (writer). */
bool history_prune_due(Server *s, int64_t now_ms);
void history_free(Server *s);
