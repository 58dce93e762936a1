/* fuzz-api-handlers.c: libFuzzer target that drives the router, authentication, the query
 * parser and every handler in process (no sockets), on a real server with a temporary state
 * file, under every role.
 *
 * Input: one byte picks the caller (admin, owner, trusted, user, node, a bad token, none),
 * then "METHOD TARGET\n", header lines "Name: value\n" up to an empty line, then the body.
 * Every answer must be a status from 100 to 599 with a JSON object (or text) body; an error
 * answer carries {code, message}; the core's invariants hold after every input. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "server/api.h"
#include "store/store.h"
#include "util/sha256.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_INPUT_MAX (SERVER_BODY_MAX + 4096)
#define QUERY_MAX 16

static const struct {
    const char *token, *user, *role, *nodes;
} callers[] = {
        {"fz-admin", "root", "admin", NULL},     {"fz-owner", "olga", "owner", "n1"},
        {"fz-trusted", "tina", "trusted", NULL}, {"fz-user", "ulf", "user", NULL},
        {"fz-node", "agent-n1", "node", "n1"},
};

static Server *server;
static char state_dir[64];

typedef struct Query {
    char *key[QUERY_MAX], *value[QUERY_MAX];
    size_t n;
} Query;

static int unhex(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* Percent-decode in place, as libmicrohttpd does ('+' is a space in a query). */
static void unescape(char *s, bool plus) {
    char *w = s;
    for (char *r = s; *r; r++) {
        int hi, lo;
        if (*r == '%' && (hi = unhex(r[1])) >= 0 && (lo = unhex(r[2])) >= 0) {
            *w++ = (char)(hi * 16 + lo);
            r += 2;
        } else
            *w++ = plus && *r == '+' ? ' ' : *r;
    }
    *w = 0;
}

static const char *query_lookup(void *conn, const char *key) {
    const Query *q = conn;
    /* A long-poll would only make the fuzzer wait; its cursor and filter are still parsed. */
    if (strcmp(key, "wait") == 0)
        return NULL;
    for (size_t i = 0; i < q->n; i++)
        if (strcmp(q->key[i], key) == 0)
            return q->value[i];
    return NULL;
}

static void parse_query(char *qs, Query *q) {
    for (char *p = qs, *next; p && *p && q->n < QUERY_MAX; p = next) {
        next = strchr(p, '&');
        if (next)
            *next++ = 0;
        char *eq = strchr(p, '=');
        if (eq)
            *eq++ = 0;
        unescape(p, true);
        if (eq)
            unescape(eq, true);
        q->key[q->n] = p;
        q->value[q->n] = eq ? eq : p + strlen(p); /* "key" alone is an empty value */
        q->n++;
    }
}

static void check_answer(const HttpCtx *c) {
    if (c->status < 100 || c->status > 599)
        abort();
    if (c->text)
        return;
    if (!json_is_object(c->json))
        abort();
    if (c->status >= 400 && (!json_is_string(json_object_get(c->json, "code")) ||
                             !json_is_string(json_object_get(c->json, "message"))))
        abort();
}

static void dispatch(const char *method, const char *path, Query *q, const char *authorization,
                     const char *idem_key, const char *body, size_t body_len) {
    HttpCtx c = {
            .s = server,
            .method = method,
            .path = path,
            .body = body,
            .body_len = body_len,
            .authorization = authorization,
            .idem_key = idem_key,
            .query = query_lookup,
            .conn = q,
    };
    api_dispatch(&c);
    check_answer(&c);
    json_decref(c.json);
    free(c.text);
}

static void cleanup(void) {
    server_close(server);
    server = NULL;
    char path[128];
    static const char *const files[] = {"state.db", "state.db-wal", "state.db-shm"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", state_dir, files[i]);
        (void)unlink(path);
    }
    (void)rmdir(state_dir);
}

static void setup(void) {
    const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(state_dir, sizeof(state_dir), "%s/einsora-fuzz-XXXXXX", tmp);
    if (!mkdtemp(state_dir))
        abort();
    static char state_path[128];
    snprintf(state_path, sizeof(state_path), "%s/state.db", state_dir);
    Store *st = NULL;
    Error err = {0};
    if (store_open(state_path, &st, &err) < 0)
        abort();
    for (size_t i = 0; i < sizeof(callers) / sizeof(callers[0]); i++) {
        char hash[SHA256_DIGEST_SIZE * 2 + 1];
        sha256_hex(callers[i].token, strlen(callers[i].token), hash);
        if (store_token_add(st, hash, callers[i].user, callers[i].role, callers[i].nodes, &err) < 0)
            abort();
    }
    store_close(st);
    ServerConfig cfg = {.state_path = state_path};
    if (server_open(&cfg, &server, &err) < 0) {
        fprintf(stderr, "fuzz-api-handlers: %s\n", error_message(&err));
        abort();
    }
    atexit(cleanup);
    /* Something to act on: a node with GPUs (owned by the owner, reported by the node token)
     * and a request placed on it. */
    static const char node[] =
            "{\"name\":\"n1\",\"site\":\"dc1\",\"site_kind\":\"datacenter\",\"platform\":\"linux\","
            "\"owner\":\"olga\",\"mode\":\"container\",\"cpus\":64,\"devices\":["
            "{\"pci\":\"0000:17:00.0\",\"class\":\"nvidia-h100-80gb\",\"memory_gb\":80},"
            "{\"pci\":\"0000:18:00.0\",\"class\":\"nvidia-h100-80gb\",\"memory_gb\":80}]}";
    static const char req[] = "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}";
    Query none = {0};
    dispatch("POST", "/v1/nodes", &none, "Bearer fz-admin", NULL, node, strlen(node));
    dispatch("POST", "/v1/requests", &none, "Bearer fz-user", NULL, req, strlen(req));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2 || size > FUZZ_INPUT_MAX)
        return 0;
    if (!server)
        setup();
    char *buf = malloc(size);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0;
    size_t len = size - 1;

    char authorization[64] = "";
    unsigned pick = data[0] % 7;
    if (pick < 5)
        snprintf(authorization, sizeof(authorization), "Bearer %s", callers[pick].token);
    else if (pick == 5)
        snprintf(authorization, sizeof(authorization), "Bearer not-a-token");

    char *line_end = memchr(buf, '\n', len);
    char *rest = line_end ? line_end + 1 : buf + len;
    if (line_end)
        *line_end = 0;
    char *target = strchr(buf, ' ');
    if (!target)
        goto out;
    *target++ = 0;
    const char *method = buf;
    const char *idem_key = NULL;
    /* Headers up to an empty line. */
    while (rest < buf + len) {
        char *e = memchr(rest, '\n', (size_t)(buf + len - rest));
        if (!e)
            break;
        *e = 0;
        char *h = rest;
        rest = e + 1;
        if (!*h)
            break;
        char *colon = strchr(h, ':');
        if (!colon)
            continue;
        *colon++ = 0;
        while (*colon == ' ')
            colon++;
        if (strcasecmp(h, "Authorization") == 0)
            snprintf(authorization, sizeof(authorization), "%s", colon);
        else if (strcasecmp(h, "Idempotency-Key") == 0)
            idem_key = colon;
    }
    char *qs = strchr(target, '?');
    if (qs)
        *qs++ = 0;
    unescape(target, false);
    Query q = {0};
    parse_query(qs, &q);
    dispatch(method, target, &q, authorization[0] ? authorization : NULL, idem_key, rest,
             (size_t)(buf + len - rest));

    Error err = {0};
    pthread_rwlock_rdlock(&server->lock);
    int r = sched_check(server->sched, &err);
    pthread_rwlock_unlock(&server->lock);
    if (r < 0) {
        fprintf(stderr, "invariant broken: %s\n", error_message(&err));
        abort();
    }
out:
    free(buf);
    return 0;
}
