/* web.c: serves the embedded dashboard, and the two API reads it needs (whoami, the capacity
 * ring), routed like every other /v1 endpoint. */
#include "server/web.h"

#include <stdlib.h>
#include <string.h>

#include "server/cap-history.h"
#include "server/web-assets.h"
#include "util/macro.h"

const char *const web_security_headers[][2] = {
        {"Content-Security-Policy",
         "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
         "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
         "frame-ancestors 'none'"},
        {"X-Content-Type-Options", "nosniff"},
        {"Referrer-Policy", "no-referrer"},
        {"X-Frame-Options", "DENY"},
        {"Cross-Origin-Opener-Policy", "same-origin"},
        {NULL, NULL},
};

static const WebAsset *find_asset(const char *path) {
    if (STREQ(path, "/"))
        path = "/index.html";
    for (size_t i = 0; i < web_n_assets; i++)
        if (STREQ(web_assets[i].path, path))
            return &web_assets[i];
    return NULL;
}

void api_whoami(HttpCtx *c) {
    json_t *nodes = json_array();
    /* An owner acts on the nodes its token names that its user owns (or that it may still
     * register): a named node someone else owns is not listed as the owner's. */
    pthread_rwlock_rdlock(&c->s->lock);
    for (const char *p = c->who.nodes; *p;) {
        const char *e = strchrnul(p, ',');
        char name[256];
        snprintf(name, sizeof(name), "%.*s", (int)MIN((size_t)(e - p), sizeof(name) - 1), p);
        const Node *n = c->who.role == ROLE_OWNER ? ptrmap_get(&c->s->nodes, name) : NULL;
        if (!n || principal_may_manage(&c->who, name, n->spec.owner))
            json_array_append_new(nodes, json_stringn(p, (size_t)(e - p)));
        p = *e ? e + 1 : e;
    }
    pthread_rwlock_unlock(&c->s->lock);
    c->json = json_pack("{s:s, s:s, s:o}", "user", c->who.user, "role", role_to_string(c->who.role),
                        "nodes", nodes);
}

void api_capacity_history(HttpCtx *c) {
    c->json = cap_history_to_json(&c->s->cap_history);
}

bool web_serve(HttpCtx *c) {
    cap_history_maybe_sample(c->s, server_now_ms());
    if (strncmp(c->path, "/v1/", 4) == 0)
        return false;
    const WebAsset *a = find_asset(c->path);
    if (!a)
        return false;
    /* A file answers GET, and HEAD as GET without its body (the HTTP library drops it). */
    if (STRNEQ(c->method, "GET") && STRNEQ(c->method, "HEAD")) {
        snprintf(c->match.allowed, sizeof(c->match.allowed), "GET, HEAD");
        api_error(c, 405, "method_not_allowed", "%.200s answers GET, HEAD, not %.16s.", c->path,
                  c->method);
        return true;
    }
    c->text = malloc(a->size + 1);
    if (!c->text) {
        api_error(c, 500, "internal", "Out of memory.");
        return true;
    }
    memcpy(c->text, a->data, a->size + 1);
    c->status = 200;
    c->content_type = a->content_type;
    c->asset = true;
    return true;
}
