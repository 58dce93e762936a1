/* bench-inproc.c: the real server in process for benchmarks (bench-inproc.h). */
#include "bench-inproc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"
#include "util/sha256.h"

void bench_store_with_admin(const char *token, char dir[64], char path[128]) {
    snprintf(dir, 64, "%s/einsora-bench-XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(dir)) {
        perror("bench: mkdtemp");
        exit(1);
    }
    snprintf(path, 128, "%s/state.db", dir);
    Store *st = NULL;
    Error err = {0};
    char hash[SHA256_DIGEST_SIZE * 2 + 1];
    sha256_hex(token, strlen(token), hash);
    if (store_open(path, &st, &err) < 0 ||
        store_token_add(st, hash, "root", "admin", NULL, &err) < 0) {
        fprintf(stderr, "bench: %s\n", error_message(&err));
        exit(1);
    }
    store_close(st);
}

static const char *no_query(void *conn, const char *key) {
    (void)conn, (void)key;
    return NULL;
}

int bench_call_text(Server *s, const char *authorization, const char *method, const char *path,
                    const char *body, char **ret_text) {
    HttpCtx c = {.s = s,
                 .method = method,
                 .path = path,
                 .body = body ? body : "",
                 .body_len = body ? strlen(body) : 0,
                 .authorization = authorization,
                 .query = no_query};
    api_dispatch(&c);
    /* What the server sends: its text, or the tree dumped as send_answer() dumps it. */
    char *text = c.text ? c.text : c.json ? json_dumps(c.json, JSON_COMPACT) : NULL;
    json_decref(c.json);
    if (ret_text)
        *ret_text = text;
    else
        free(text);
    return c.status;
}

int bench_call(Server *s, const char *authorization, const char *method, const char *path,
               const char *body, json_t **ret) {
    char *text = NULL;
    int status = bench_call_text(s, authorization, method, path, body, ret ? &text : NULL);
    if (ret)
        *ret = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    return status;
}

void bench_add_cpu_node(Server *s, const char *authorization, const char *name, const char *owner,
                        unsigned cpus) {
    char body[256];
    snprintf(body, sizeof(body),
             "{\"name\":\"%s\",\"site\":\"dc1\",\"site_kind\":\"datacenter\",\"platform\":"
             "\"linux\",\"owner\":\"%s\",\"mode\":\"container\",\"cpus\":%u}",
             name, owner, cpus);
    if (bench_call(s, authorization, "POST", "/v1/nodes", body, NULL) != 201) {
        fprintf(stderr, "bench: registering node %s failed\n", name);
        exit(1);
    }
}

double bench_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int bench_store_remove(const char *dir) {
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}
