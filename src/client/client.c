/* client.c: libcurl easy handle per Client, reused so keep-alive connections stay open. */
#include "client.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"
#include "util/strutil.h"

struct Client {
    CURL *curl;
    char *base;
    char *auth_header;
    char *ca_file; /* issue 16: trust this CA for https (NULL: the system's) */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

void client_free(Client *c) {
    if (!c)
        return;
    if (c->curl)
        curl_easy_cleanup(c->curl);
    free(c->base);
    free(c->auth_header);
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
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false;
    return true;
}

int client_new(const char *server, const char *token, Client **ret, Error *err) {
    if (isempty(server))
        return error_set(err, -EINVAL, "No server given: use --server or EINSORA_SERVER.");
    if (token && !header_value_ok(token))
        return error_set(err, -EINVAL, "The token holds a control character (CR, LF, ...).");
    pthread_once(&curl_once, curl_init_once);
    Client *c = calloc(1, sizeof(*c));
    if (!c)
        return error_set(err, -ENOMEM, "Out of memory.");
    size_t n = strlen(server);
    while (n > 0 && server[n - 1] == '/')
        n--;
    c->base = strstr(server, "://") ? strndup(server, n) : strprintf("http://%.*s", (int)n, server);
    c->curl = curl_easy_init();
    if (token)
        c->auth_header = strprintf("Authorization: Bearer %s", token);
    if (!c->base || !c->curl || (token && !c->auth_header)) {
        client_free(c);
        return error_set(err, -ENOMEM, "Out of memory.");
    }
    *ret = c;
    return 0;
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *userdata) {
    strbuf_append(userdata, ptr, size * nmemb);
    return size * nmemb;
}

int client_call_raw(Client *c, const char *method, const char *path, const char *body,
                    size_t body_len, const char *idem_key, long *ret_status, char **ret_text,
                    Error *err) {
    if (idem_key && !header_value_ok(idem_key))
        return error_set(err, -EINVAL, "The Idempotency-Key holds a control character (CR, LF, ...).");
    if (!header_value_ok(method) || !header_value_ok(path))
        return error_set(err, -EINVAL, "The method or path holds a control character.");
    _cleanup_free_ char *url = strprintf("%s%s", c->base, path);
    _cleanup_free_ char *idem = idem_key ? strprintf("Idempotency-Key: %s", idem_key) : NULL;
    if (!url || (idem_key && !idem))
        return error_set(err, -ENOMEM, "Out of memory.");
    struct curl_slist *headers = NULL;
    if (c->auth_header)
        headers = curl_slist_append(headers, c->auth_header);
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
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    if (c->ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(headers);
    if (rc != CURLE_OK) {
        strbuf_done(&out);
        int code = rc == CURLE_COULDNT_CONNECT ? -ECONNREFUSED
                 : rc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EIO;
        return error_set(err, code, "Cannot reach the server at %s: %s.", c->base,
                         curl_easy_strerror(rc));
    }
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (!strbuf_cstr(&out)) {
        strbuf_done(&out);
        return error_set(err, -ENOMEM, "Out of memory.");
    }
    *ret_status = status;
    if (ret_text)
        *ret_text = out.data;
    else
        strbuf_done(&out);
    return 0;
}

int client_call(Client *c, const char *method, const char *path, json_t *body,
                const char *idem_key, long *ret_status, json_t **ret_json, Error *err) {
    _cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    if (body && !text)
        return error_set(err, -ENOMEM, "Out of memory.");
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
        return error_set(err, -ENOMEM, "Out of memory.");
    free(c->ca_file);
    c->ca_file = copy;
    return 0;
}
