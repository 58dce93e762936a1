/* client.c: libcurl easy handle per Client, reused so keep-alive connections stay open;
 * with several server URLs (replicas), a call follows a standby's redirect and fails over. */
#include "client.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "util/macro.h"
#include "util/strutil.h"
#include "wire/api-address.h"

#define CLIENT_MAX_SERVERS 16
#define FAILOVER_WINDOW_MS 30000 /* how long a call keeps trying the replicas */

struct Client {
    CURL *curl;
    char *base; /* the server in use: one of servers[] */
    char *servers[CLIENT_MAX_SERVERS];
    size_t n_servers, cur;
    char *auth_header;
    char *extra_header;                /* client_set_header() */
    char *ca_file;                     /* trust this CA for https (NULL: the system's) */
    volatile sig_atomic_t *abort_flag; /* a call in flight gives up once it is set */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

const char *client_clear_server(const Client *c) {
    for (size_t i = 0; c && i < c->n_servers; i++) {
        const char *u = c->servers[i];
        if (strncmp(u, "http://", 7) != 0)
            continue;
        const char *host = u + 7;
        if (strncmp(host, "127.", 4) == 0 || strncmp(host, "localhost", 9) == 0 ||
            strncmp(host, "[::1]", 5) == 0)
            continue;
        return u;
    }
    return NULL;
}

void client_free(Client *c) {
    if (!c)
        return;
    if (c->curl)
        curl_easy_cleanup(c->curl);
    for (size_t i = 0; i < c->n_servers; i++)
        free(c->servers[i]);
    free(c->auth_header);
    free(c->extra_header);
    free(c->ca_file);
    free(c);
}

char *client_escape(const char *s) {
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *out = malloc(n * 3 + 1), *w = out;
    if (!out)
        return NULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '.' || *p == '_' || *p == '~')
            *w++ = (char)*p;
        else {
            *w++ = '%';
            *w++ = hex[*p >> 4];
            *w++ = hex[*p & 15];
        }
    }
    *w = 0;
    return out;
}

/* A header value with CR, LF or another control byte would end the header and start
 * another one (header injection). */
static bool header_value_ok(const char *v) {
    return !string_has_control(v);
}

/* http:// or https://, then a host (and maybe a port and path) without spaces or control
 * characters: what curl would otherwise report as "cannot reach" after trying. */
static bool server_url_is_valid(const char *u) {
    const char *rest = strncasecmp(u, "http://", 7) == 0    ? u + 7
                       : strncasecmp(u, "https://", 8) == 0 ? u + 8
                                                            : NULL;
    if (!rest || !*rest || *rest == '/' || *rest == ':')
        return false;
    if (strchr(rest, ' ') || string_has_control(rest))
        return false;
    /* The rest as libcurl reads it: "http://[::1" (an IPv6 address left open) or a port
     * that is no number is a mistyped URL, said as such, not a server that does not answer. */
    CURLU *h = curl_url();
    bool ok = h && curl_url_set(h, CURLUPART_URL, u, 0) == CURLUE_OK;
    curl_url_cleanup(h);
    return ok;
}

int client_new(const char *server, const char *token, Client **ret, Error *err) {
    if (isempty(server))
        return error_set(err, -EINVAL, "no server given: use --server or EINSORA_SERVER");
    if (token && !header_value_ok(token))
        return error_set(err, -EINVAL, "the token holds a control character (CR, LF, ...)");
    pthread_once(&curl_once, curl_init_once);
    Client *c = calloc(1, sizeof(*c));
    if (!c)
        return error_set(err, -ENOMEM, "out of memory");
    /* "url1,url2,...": the replicas of one control plane. */
    for (const char *p = server; *p;) {
        size_t n = strcspn(p, ",");
        const char *next = p[n] ? p + n + 1 : p + n;
        while (n > 0 && (p[n - 1] == '/' || p[n - 1] == ' '))
            n--;
        /* The API's own prefix is the client's to add: "http://h:7780/v1", copied from a
         * request's URL, names the same server (not "/v1/v1/requests", a 404). */
        if (n > 3 && memcmp(p + n - 3, "/v1", 3) == 0)
            for (n -= 3; n > 0 && p[n - 1] == '/';)
                n--;
        while (n > 0 && *p == ' ')
            p++, n--;
        if (n > 0) {
            if (c->n_servers == CLIENT_MAX_SERVERS) {
                client_free(c);
                return error_set(err, -E2BIG, "more than %d server URLs given", CLIENT_MAX_SERVERS);
            }
            char *u = memmem(p, n, "://", 3) ? strndup(p, n) : strprintf("http://%.*s", (int)n, p);
            if (!u) {
                client_free(c);
                return error_set(err, -ENOMEM, "out of memory");
            }
            if (!server_url_is_valid(u)) {
                int r = error_set(err, -EINVAL,
                                  "'%.*s' is not a server URL: give http://HOST:PORT or "
                                  "https://HOST:PORT",
                                  (int)n, p);
                free(u);
                client_free(c);
                return r;
            }
            c->servers[c->n_servers++] = u;
        }
        p = next;
    }
    if (c->n_servers == 0) {
        client_free(c);
        return error_set(err, -EINVAL, "no server given: use --server or EINSORA_SERVER");
    }
    c->base = c->servers[0];
    c->curl = curl_easy_init();
    if (token)
        c->auth_header = strprintf("Authorization: Bearer %s", token);
    if (!c->curl || (token && !c->auth_header)) {
        client_free(c);
        return error_set(err, -ENOMEM, "out of memory");
    }
    *ret = c;
    return 0;
}

/* libcurl asks about once a second, more often while data flows. */
static int on_progress(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    const volatile sig_atomic_t *flag = userdata;
    return *flag ? 1 : 0;
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *userdata) {
    strbuf_append(userdata, ptr, size * nmemb);
    return size * nmemb;
}

/* Whether a header line of the answer is the control plane's mark (wire/api-address.h). */
static size_t on_header(char *line, size_t size, size_t nitems, void *userdata) {
    size_t n = size * nitems, k = strlen(WIRE_API_HEADER);
    if (n > k && line[k] == ':' && strncasecmp(line, WIRE_API_HEADER, k) == 0)
        *(bool *)userdata = true;
    return n;
}

/* One HTTP exchange with url; *ret_location gets a redirect's target (caller frees). */
static int call_once(Client *c, const char *url, const char *method, const char *body,
                     size_t body_len, const char *idem_key, long *ret_status, char **ret_text,
                     char **ret_location, Error *err) {
    _cleanup_free_ char *idem = idem_key ? strprintf("Idempotency-Key: %s", idem_key) : NULL;
    if (idem_key && !idem)
        return error_set(err, -ENOMEM, "out of memory");
    struct curl_slist *headers = NULL;
    if (c->auth_header)
        headers = curl_slist_append(headers, c->auth_header);
    if (c->extra_header)
        headers = curl_slist_append(headers, c->extra_header);
    if (idem)
        headers = curl_slist_append(headers, idem);
    if (body)
        headers = curl_slist_append(headers, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Expect:"); /* no 100-continue round trip */
    StrBuf out = {0};
    CURL *h = c->curl;
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    /* Send the path as built: curl would otherwise fold "/a/../b" into "/b". */
    curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &out);
    bool ours = false;
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &ours);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    /* With replicas to fail over to, a server that accepted the call but does not answer (a
     * paused or cut-off leader) is given up on sooner; the event feed's long poll keeps its
     * time. */
    bool long_poll = strstr(url, "/v1/events") != NULL || strstr(url, "/work?") != NULL;
    curl_easy_setopt(h, CURLOPT_TIMEOUT, c->n_servers > 1 && !long_poll ? 20L : 120L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    if (c->ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
    if (c->abort_flag) {
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, (void *)c->abort_flag);
    }
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
    /* libcurl's own sentence says which TLS check failed (expired, wrong name); its code's
     * sentence says only that one did. The buffer is this call's: unset after it. */
    char detail[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, detail);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
    curl_slist_free_all(headers);
    if (rc != CURLE_OK) {
        strbuf_done(&out);
        int code = rc == CURLE_COULDNT_CONNECT      ? -ECONNREFUSED
                   : rc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT
                                                    : -EIO;
        const char *hint =
                rc == CURLE_PEER_FAILED_VERIFICATION
                        ? (c->ca_file ? " (is EINSORA_CACERT the CA that signed its certificate?)"
                                      : " (a certificate signed by a private CA is trusted with "
                                        "EINSORA_CACERT=CA.pem)")
                : rc == CURLE_SSL_CACERT_BADFILE ? " (EINSORA_CACERT names no readable PEM file)"
                : rc == CURLE_SSL_CONNECT_ERROR
                        ? " (a plain http server? its URL then starts http://)"
                : rc == CURLE_GOT_NOTHING && strncmp(c->base, "http://", 7) == 0
                        ? " (an https server? its URL then starts https://)"
                        : "";
        return error_set(err, code, "cannot reach the server at %s: %s%s", c->base,
                         detail[0] ? detail : curl_easy_strerror(rc), hint);
    }
    long status = 0;
    char *location = NULL;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (!ours) {
        strbuf_done(&out);
        return error_set(err, -EPROTO,
                         "the server at %s is not an Einsora control plane: it answered HTTP %ld "
                         "without the %s header (a wrong URL, or a proxy answering for it)",
                         c->base, status, WIRE_API_HEADER);
    }
    if (status == 307 || status == 308)
        curl_easy_getinfo(h, CURLINFO_REDIRECT_URL, &location);
    if (!strbuf_cstr(&out) || (location && !(*ret_location = strdup(location)))) {
        strbuf_done(&out);
        return error_set(err, -ENOMEM, "out of memory");
    }
    *ret_status = status;
    if (ret_text)
        *ret_text = out.data;
    else
        strbuf_done(&out);
    return 0;
}

static uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Whether an answer says the call changed nothing and another replica may take it: a
 * standby's, a change certainly not committed, or any 503 of a call that is safe to repeat. */
static bool retry_answer(long status, const char *text, bool repeatable) {
    if (status != 503)
        return false;
    if (repeatable)
        return true;
    json_t *j = json_loads(text, 0, NULL);
    const char *code = strempty(json_string_value(json_object_get(j, "code")));
    bool nothing_done = STREQ(code, "standby") || STREQ(code, "not_committed");
    json_decref(j);
    return nothing_done;
}

/* Make the replica a redirect points to the one in use, when it is one of ours. */
static void follow_leader(Client *c, const char *location) {
    for (size_t i = 0; i < c->n_servers; i++) {
        size_t n = strlen(c->servers[i]);
        if (strncmp(location, c->servers[i], n) == 0 && (location[n] == '/' || !location[n])) {
            c->cur = i;
            c->base = c->servers[i];
        }
    }
}

int client_call_raw(Client *c, const char *method, const char *path, const char *body,
                    size_t body_len, const char *idem_key, long *ret_status, char **ret_text,
                    Error *err) {
    if (idem_key && !header_value_ok(idem_key))
        return error_set(err, -EINVAL,
                         "the Idempotency-Key holds a control character (CR, LF, ...)");
    if (!header_value_ok(method) || !header_value_ok(path))
        return error_set(err, -EINVAL, "the method or path holds a control character");
    /* A call is repeated at another replica only when that cannot do it twice: reads, and
     * changes carrying an idempotency key; any call when the connection was refused. */
    bool repeatable = STREQ(method, "GET") || idem_key;
    uint64_t deadline = mono_ms() + (c->n_servers > 1 ? FAILOVER_WINDOW_MS : 0);
    unsigned backoff_ms = 25, redirects = 0;
    _cleanup_free_ char *target = NULL; /* a redirect's URL, used once */
    for (;;) {
        _cleanup_free_ char *url = target ? TAKE_PTR(target) : strprintf("%s%s", c->base, path);
        if (!url)
            return error_set(err, -ENOMEM, "out of memory");
        long status = 0;
        char *text = NULL, *location = NULL;
        Error e = {0};
        int r = call_once(c, url, method, body, body_len, idem_key, &status, &text, &location, &e);
        if (r >= 0 && location && redirects < 4) {
            /* A standby points at the leader: the same call there, at once. */
            redirects++;
            follow_leader(c, location);
            free(text);
            target = location;
            continue;
        }
        /* Redirected in a circle (replicas that disagree during an election): try again. */
        bool circle = location != NULL;
        free(location);
        bool again = c->n_servers > 1 && mono_ms() < deadline &&
                     !(c->abort_flag && *c->abort_flag) &&
                     (r >= 0 ? circle || retry_answer(status, text, repeatable)
                             : r == -ECONNREFUSED || (repeatable && r != -ENOMEM));
        if (!again) {
            if (r < 0) {
                free(text);
                return error_set(err, r, "%s", e.message);
            }
            *ret_status = status;
            if (ret_text)
                *ret_text = text;
            else
                free(text);
            return 0;
        }
        free(text);
        /* The next replica; a short, growing pause once all were tried. */
        c->cur = (c->cur + 1) % c->n_servers;
        c->base = c->servers[c->cur];
        redirects = 0;
        if (c->cur == 0) {
            nanosleep(&(struct timespec){backoff_ms / 1000, (long)(backoff_ms % 1000) * 1000000L},
                      NULL);
            backoff_ms = MIN(backoff_ms * 2, 500u);
        }
    }
}

int client_call(Client *c, const char *method, const char *path, json_t *body, const char *idem_key,
                long *ret_status, json_t **ret_json, Error *err) {
    _cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    if (body && !text)
        return error_set(err, -ENOMEM, "out of memory");
    char *answer = NULL;
    long status;
    int r = client_call_raw(c, method, path, text, text ? strlen(text) : 0, idem_key, &status,
                            &answer, err);
    if (r < 0)
        return r;
    json_t *j = json_loads(answer, 0, NULL);
    free(answer);
    *ret_status = status;
    if (ret_json)
        *ret_json = j;
    else
        json_decref(j);
    return 0;
}

int client_set_ca_file(Client *c, const char *path, Error *err) {
    char *copy = strdup(path);
    if (!copy)
        return error_set(err, -ENOMEM, "out of memory");
    free(c->ca_file);
    c->ca_file = copy;
    return 0;
}

int client_set_header(Client *c, const char *name, const char *value, Error *err) {
    if (!header_value_ok(name) || !header_value_ok(value) || strchr(name, ':'))
        return error_set(err, -EINVAL, "a header's name or value holds a control character");
    char *h = strprintf("%s: %s", name, value);
    if (!h)
        return error_set(err, -ENOMEM, "out of memory");
    free(c->extra_header);
    c->extra_header = h;
    return 0;
}

void client_set_abort(Client *c, volatile sig_atomic_t *flag) {
    c->abort_flag = flag;
}

bool client_route_unknown(long status, json_t *answer) {
    const char *code = json_string_value(json_object_get(answer, "code"));
    const char *msg = json_string_value(json_object_get(answer, "message"));
    return status == 405 || (status == 404 && code && strcmp(code, "not_found") == 0 && msg &&
                             strncmp(msg, "No such endpoint", 16) == 0);
}
