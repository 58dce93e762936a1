/* kclient.c: the Kubernetes API over libcurl: TLS from the kubeconfig, JSON in and out,
 * errors that name what to fix, 429 backoff, list pages and watch streams. */
#include "kclient.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/macro.h"

#define BACKOFF_MAX_MS 5000u
#define LIST_PAGE 500
#define BODY_MAX (64u << 20)

struct K8sClient {
    CURL *curl;
    char *server, *token, *namespace_;
    struct curl_blob ca, cert, key;
    char *ca_buf, *cert_buf, *key_buf;
    bool insecure;
    K8sOptions opt;
};

static int curl_global(void) {
    static int done = 0; /* curl_global_init is idempotent; it runs once per process here */
    if (!done && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return -EIO;
    done = 1;
    return 0;
}

void k8s_client_free(K8sClient *c) {
    if (!c)
        return;
    if (c->curl)
        curl_easy_cleanup(c->curl);
    free(c->server);
    free(c->token);
    free(c->namespace_);
    free(c->ca_buf);
    free(c->cert_buf);
    free(c->key_buf);
    free(c);
}

static int blob(const char *pem, size_t len, char **buf, struct curl_blob *b) {
    if (!pem)
        return 0;
    if (!(*buf = malloc(len + 1)))
        return -ENOMEM;
    memcpy(*buf, pem, len);
    (*buf)[len] = 0;
    *b = (struct curl_blob){.data = *buf, .len = len, .flags = CURL_BLOB_NOCOPY};
    return 0;
}

int k8s_client_new(const KubeConfig *cfg, const K8sOptions *opt, K8sClient **ret, Error *err) {
    if (curl_global() < 0)
        return error_set(err, -EIO, "libcurl failed to start");
    if (!cfg->server)
        return error_set(err, -EINVAL, "the Kubernetes configuration names no server");
    if ((cfg->cert_file && !cfg->cert_pem) || (cfg->key_file && !cfg->key_pem) ||
        (cfg->ca_file && !cfg->ca_pem) || (cfg->token_file && !cfg->token))
        return error_set(
                err, -EINVAL,
                "the Kubernetes configuration's files were not read (use kubeconfig_load)");
    _cleanup_(k8s_client_freep) K8sClient *c = calloc(1, sizeof(*c));
    if (!c || !(c->curl = curl_easy_init()) || !(c->server = strdup(cfg->server)) ||
        (cfg->token && !(c->token = strdup(cfg->token))) ||
        !(c->namespace_ = strdup(cfg->namespace_ ? cfg->namespace_ : "default")) ||
        blob(cfg->ca_pem, cfg->ca_pem_len, &c->ca_buf, &c->ca) < 0 ||
        blob(cfg->cert_pem, cfg->cert_pem_len, &c->cert_buf, &c->cert) < 0 ||
        blob(cfg->key_pem, cfg->key_pem_len, &c->key_buf, &c->key) < 0)
        return error_set(err, -ENOMEM, "out of memory");
    c->insecure = cfg->insecure;
    if (opt)
        c->opt = *opt;
    if (!c->opt.timeout_ms)
        c->opt.timeout_ms = 15000;
    if (!c->opt.retries_429)
        c->opt.retries_429 = 6;
    if (!c->opt.backoff_ms)
        c->opt.backoff_ms = 200;
    if (!c->opt.page_limit)
        c->opt.page_limit = LIST_PAGE;
    *ret = TAKE_PTR(c);
    return 0;
}

const char *k8s_client_namespace(const K8sClient *c) {
    return c->namespace_;
}

typedef struct Sink {
    char *buf;
    size_t len, cap;
    /* watch streams: split lines and hand each to fn */
    k8s_event_fn fn;
    void *userdata;
    char **rv;
    int stop; /* the callback's or the parser's error */
    bool gone;
    Error *err;
    CURL *curl;
} Sink;

static int sink_append(Sink *s, const char *p, size_t n) {
    if (s->len + n + 1 > BODY_MAX)
        return -EFBIG;
    if (s->len + n + 1 > s->cap) {
        size_t cap = MAX(s->cap * 2, s->len + n + 1);
        char *b = realloc(s->buf, cap);
        if (!b)
            return -ENOMEM;
        s->buf = b;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
    s->buf[s->len] = 0;
    return 0;
}

static int handle_line(Sink *s, const char *line, size_t len) {
    while (len && (line[len - 1] == '\r' || line[len - 1] == ' '))
        len--;
    if (!len)
        return 0;
    K8sEvent e;
    int r = k8s_watch_event_parse(line, len, &e, s->err);
    if (r < 0)
        return r;
    if (e.type == K8S_ERROR) {
        if (e.code == 410)
            s->gone = true;
        else
            r = error_set(s->err, -EIO, "the watch ended with an error (%ld): %s", e.code,
                          strempty(e.message));
        k8s_event_done(&e);
        return s->gone ? -ESTALE : r;
    }
    char *v = strdup(e.resource_version);
    if (!v) {
        k8s_event_done(&e);
        return -ENOMEM;
    }
    free(*s->rv);
    *s->rv = v;
    r = s->fn(&e, s->userdata);
    k8s_event_done(&e);
    return r;
}

static size_t on_data(char *p, size_t size, size_t nmemb, void *userdata) {
    Sink *s = userdata;
    size_t n = size * nmemb;
    if (sink_append(s, p, n) < 0) {
        s->stop = -ENOMEM;
        return 0;
    }
    if (!s->fn)
        return n;
    long status = 0;
    curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200)
        return n; /* an error Status, read whole */
    char *nl;
    while ((nl = memchr(s->buf, '\n', s->len))) {
        size_t line = (size_t)(nl - s->buf);
        int r = handle_line(s, s->buf, line);
        memmove(s->buf, nl + 1, s->len - line - 1);
        s->len -= line + 1;
        s->buf[s->len] = 0;
        if (r < 0) {
            s->stop = r;
            return 0;
        }
    }
    return n;
}

static int perform(K8sClient *c, const char *method, const char *path, const char *content_type,
                   const char *body, long timeout_ms, Sink *sink, long *ret_status, Error *err) {
    CURL *h = c->curl;
    curl_easy_reset(h);
    _cleanup_free_ char *url = NULL, *auth = NULL, *ctype = NULL;
    if (asprintf(&url, "%s%s", c->server, path) < 0)
        return error_set(err, -ENOMEM, "out of memory");
    struct curl_slist *hdr = curl_slist_append(NULL, "Accept: application/json");
    if (c->token && asprintf(&auth, "Authorization: Bearer %s", c->token) >= 0)
        hdr = curl_slist_append(hdr, auth);
    if (body &&
        asprintf(&ctype, "Content-Type: %s", content_type ? content_type : "application/json") >= 0)
        hdr = curl_slist_append(hdr, ctype);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)MIN(c->opt.timeout_ms, 10000u));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    if (c->ca_buf)
        curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &c->ca);
    if (c->cert_buf) {
        curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &c->cert);
        curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &c->key);
    }
    if (c->insecure) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    sink->curl = h;
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, sink);
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(hdr);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, ret_status);
    if (sink->stop)
        return sink->stop;
    switch (rc) {
    case CURLE_OK:
        return 0;
    case CURLE_OPERATION_TIMEDOUT:
        return error_set(err, -ETIMEDOUT,
                         "the Kubernetes API at %s did not answer %s %s within %ld ms", c->server,
                         method, path, timeout_ms);
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
        return error_set(err, -ECONNREFUSED, "cannot reach the Kubernetes API at %s: %s", c->server,
                         curl_easy_strerror(rc));
    default:
        return error_set(err, -EIO, "%s %s%s failed: %s", method, c->server, path,
                         curl_easy_strerror(rc));
    }
}

int k8s_request(K8sClient *c, const char *method, const char *path, const char *content_type,
                json_t *body, long *ret_status, json_t **ret_json, Error *err) {
    _cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    if (body && !text)
        return error_set(err, -ENOMEM, "out of memory");
    Sink s = {.err = err};
    long status = 0;
    int r = perform(c, method, path, content_type, text, (long)c->opt.timeout_ms, &s, &status, err);
    if (r < 0) {
        free(s.buf);
        return r == -ENOMEM ? error_set(err, r, "out of memory") : r;
    }
    json_t *j = s.buf ? json_loadb(s.buf, s.len, 0, NULL) : NULL;
    free(s.buf);
    *ret_status = status;
    if (ret_json)
        *ret_json = j;
    else
        json_decref(j);
    return 0;
}

static const char *status_message(json_t *body) {
    const char *m = json_string_value(json_object_get(body, "message"));
    return m ? m : "no message";
}

int k8s_status_error(const K8sClient *c, const char *method, const char *path, long status,
                     json_t *body, Error *err) {
    K8sAccess a;
    k8s_describe_access(method, path, &a);
    const char *msg = status_message(body);
    char what[400];
    snprintf(what, sizeof(what), "%s %s%s%s", a.verb, a.resource, *a.name ? " " : "", a.name);
    switch (status) {
    case 401:
        return error_set(err, -EACCES,
                         "the Kubernetes API at %s does not accept our credentials (401 "
                         "Unauthorized) for %s: check "
                         "the kubeconfig's token or client certificate",
                         c->server, what);
    case 403:
        return error_set(
                err, -EPERM,
                "RBAC forbids %s (403 Forbidden): the ClusterRole must allow verb \"%s\" on "
                "resource "
                "\"%s\" in API group \"%s\" (see docs/kubernetes-rbac.yaml). The API said: %s",
                what, a.verb, a.resource, a.group, msg);
    case 404:
        return error_set(err, -ENOENT, "not found (404) on %s: %s", what, msg);
    case 409:
        return error_set(err, STREQ(a.verb, "create") ? -EEXIST : -EBUSY,
                         "conflict (409) on %s: %s", what, msg);
    case 410:
        return error_set(err, -ESTALE,
                         "gone (410) on %s: the resourceVersion is too old, list again. %s", what,
                         msg);
    case 400:
    case 415:
    case 422:
        return error_set(err, -EINVAL, "the Kubernetes API refused %s (%ld): %s", what, status,
                         msg);
    case 429:
        return error_set(err, -EAGAIN,
                         "the Kubernetes API kept answering 429 Too Many Requests to %s: %s", what,
                         msg);
    default:
        return error_set(err, -EIO, "the Kubernetes API answered %ld to %s: %s", status, what, msg);
    }
}

static void sleep_ms(unsigned ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static unsigned retry_after_ms(CURL *h, unsigned fallback) {
    struct curl_header *hd = NULL;
    if (curl_easy_header(h, "Retry-After", 0, CURLH_HEADER, -1, &hd) == CURLHE_OK && hd &&
        hd->value) {
        char *end;
        unsigned long s = strtoul(hd->value, &end, 10);
        if (end != hd->value && s <= 60)
            return (unsigned)s * 1000u;
    }
    return fallback;
}

int k8s_call(K8sClient *c, const char *method, const char *path, const char *content_type,
             json_t *body, json_t **ret_json, Error *err) {
    unsigned backoff = c->opt.backoff_ms;
    for (unsigned attempt = 0;; attempt++) {
        long status;
        json_t *j = NULL;
        int r = k8s_request(c, method, path, content_type, body, &status, &j, err);
        if (r < 0)
            return r;
        if (status >= 200 && status < 300) {
            if (ret_json)
                *ret_json = j;
            else
                json_decref(j);
            return 0;
        }
        if (status == 429 && attempt < c->opt.retries_429) {
            json_decref(j);
            sleep_ms(MIN(retry_after_ms(c->curl, backoff), BACKOFF_MAX_MS));
            backoff = MIN(backoff * 2, BACKOFF_MAX_MS);
            continue;
        }
        r = k8s_status_error(c, method, path, status, j, err);
        json_decref(j);
        return r;
    }
}

int k8s_get(K8sClient *c, const char *path, json_t **ret, Error *err) {
    return k8s_call(c, "GET", path, NULL, NULL, ret, err);
}

int k8s_merge_patch(K8sClient *c, const char *path, json_t *patch, json_t **ret, Error *err) {
    return k8s_call(c, "PATCH", path, "application/merge-patch+json", patch, ret, err);
}

/* Percent-encode a continue token or resourceVersion for a query string. */
static char *escape(K8sClient *c, const char *s) {
    char *e = curl_easy_escape(c->curl, s, 0), *copy = e ? strdup(e) : NULL;
    curl_free(e);
    return copy;
}

int k8s_list(K8sClient *c, const char *path, const char *query, json_t **ret_items, char **ret_rv,
             Error *err) {
    json_t *items = json_array();
    _cleanup_free_ char *cont = NULL;
    char *rv = NULL;
    if (!items)
        return error_set(err, -ENOMEM, "out of memory");
    for (;;) {
        _cleanup_free_ char *url = NULL, *esc = cont ? escape(c, cont) : NULL;
        if (asprintf(&url, "%s?limit=%u%s%s%s%s", path, c->opt.page_limit, query ? "&" : "",
                     strempty(query), esc ? "&continue=" : "", strempty(esc)) < 0) {
            json_decref(items);
            return error_set(err, -ENOMEM, "out of memory");
        }
        json_t *page = NULL;
        int r = k8s_call(c, "GET", url, NULL, NULL, &page, err);
        json_t *md = json_object_get(page, "metadata"), *pi = json_object_get(page, "items");
        if (r >= 0 &&
            (!json_is_array(pi) || !json_is_string(json_object_get(md, "resourceVersion"))))
            r = error_set(err, -EINVAL, "the list %s has no items or no metadata.resourceVersion",
                          path);
        if (r < 0) {
            json_decref(page);
            json_decref(items);
            free(rv);
            return r;
        }
        json_array_extend(items, pi);
        free(rv);
        rv = strdup(json_string_value(json_object_get(md, "resourceVersion")));
        const char *next = json_string_value(json_object_get(md, "continue"));
        free(cont);
        cont = next && *next ? strdup(next) : NULL;
        json_decref(page);
        if (!rv) {
            json_decref(items);
            return error_set(err, -ENOMEM, "out of memory");
        }
        if (!cont)
            break;
    }
    *ret_items = items;
    *ret_rv = rv;
    return 0;
}

int k8s_watch(K8sClient *c, const char *path, const char *query, char **rv, unsigned timeout_s,
              k8s_event_fn fn, void *userdata, Error *err) {
    if (!timeout_s || !*rv)
        return error_set(err, -EINVAL, "a watch needs a resourceVersion and a timeout");
    _cleanup_free_ char *url = NULL, *esc = escape(c, *rv);
    if (!esc ||
        asprintf(&url,
                 "%s?watch=1&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%u%s%s",
                 path, esc, timeout_s, query ? "&" : "", strempty(query)) < 0)
        return error_set(err, -ENOMEM, "out of memory");
    Sink s = {.fn = fn, .userdata = userdata, .rv = rv, .err = err};
    long status = 0;
    /* the server ends the stream after timeout_s; the margin covers a slow last event */
    int r = perform(c, "GET", url, NULL, NULL, (long)(timeout_s + 30) * 1000L, &s, &status, err);
    if (r >= 0 && status != 200) {
        json_t *j = s.buf ? json_loadb(s.buf, s.len, 0, NULL) : NULL;
        r = k8s_status_error(c, "GET", url, status, j, err);
        json_decref(j);
    } else if (r >= 0 && s.len)
        r = handle_line(&s, s.buf, s.len); /* a last line without its newline */
    free(s.buf);
    if (s.gone || r == -ESTALE) {
        error_clear(err);
        return error_set(err, -ESTALE, "the watch of %s ended with 410 Gone: list again", path);
    }
    return r;
}
