/* kclient.h: a small Kubernetes API client (libcurl + jansson): GET, list (every page),
 * watch with resourceVersion and bookmarks, POST, merge PATCH, DELETE. Errors are sentences
 * a site operator can act on: 401 names the credentials, 403 the verb and resource the
 * ClusterRole must allow, 404, 409, 410 (the caller relists), timeouts; 429 is retried with
 * backoff (Retry-After honoured) before it becomes an error. One client per thread. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "k8s/kubeconfig.h"
#include "k8s/watch-event.h"
#include "util/error.h"

typedef struct K8sClient K8sClient;

typedef struct K8sOptions {
    unsigned timeout_ms;  /* one ordinary request; 0: 15000 */
    unsigned retries_429; /* how many times a 429 is retried; 0: 6 */
    unsigned backoff_ms;  /* first wait after a 429 without Retry-After; 0: 200 (doubles, at most 5
                             s) */
    unsigned page_limit;  /* items per list page; 0: 500 */
} K8sOptions;

/* cfg is copied. */
int k8s_client_new(const KubeConfig *cfg, const K8sOptions *opt, K8sClient **ret, Error *err);
void k8s_client_free(K8sClient *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(K8sClient *, k8s_client_free);

/* The configured namespace (for namespaced calls without one). */
const char *k8s_client_namespace(const K8sClient *c);

/* One request, any answer: 0 with the HTTP status and the JSON body (NULL when not JSON).
 * Only a transport failure is an error (-ETIMEDOUT, -ECONNREFUSED, -EIO). No 429 retry. */
int k8s_request(K8sClient *c, const char *method, const char *path, const char *content_type,
                json_t *body, long *ret_status, json_t **ret_json, Error *err);

/* A request that must succeed: 2xx gives 0 and the body (ret_json may be NULL); 429 is
 * retried; otherwise a negative errno with a sentence: 401 -EACCES, 403 -EPERM, 404 -ENOENT,
 * 409 -EEXIST (create) / -EBUSY, 410 -ESTALE, 400/422 -EINVAL, 429 (retries spent) -EAGAIN,
 * other -EIO. */
int k8s_call(K8sClient *c, const char *method, const char *path, const char *content_type,
             json_t *body, json_t **ret_json, Error *err);

/* Turn an HTTP answer into the error k8s_call() gives (status must not be 2xx). */
int k8s_status_error(const K8sClient *c, const char *method, const char *path, long status,
                     json_t *body, Error *err);

int k8s_get(K8sClient *c, const char *path, json_t **ret, Error *err);
/* application/merge-patch+json */
int k8s_merge_patch(K8sClient *c, const char *path, json_t *patch, json_t **ret, Error *err);

/* Every item of a collection, page by page (limit/continue); *ret_rv is the list's
 * resourceVersion to watch from. query (may be NULL) is appended, e.g. "fieldSelector=...". */
int k8s_list(K8sClient *c, const char *path, const char *query, json_t **ret_items, char **ret_rv,
             Error *err);

/* Called for each event of a watch (bookmarks included). A negative return stops the watch
 * and is returned by k8s_watch(). */
typedef int (*k8s_event_fn)(const K8sEvent *e, void *userdata);

/* Watch path from *rv with bookmarks, for at most timeout_s seconds (the server ends the
 * stream then; 0 is refused). *rv follows every event. Returns 0 when the stream ended,
 * -ESTALE when the version is too old (410, as a status or an ERROR event: relist), or
 * another error. */
int k8s_watch(K8sClient *c, const char *path, const char *query, char **rv, unsigned timeout_s,
              k8s_event_fn fn, void *userdata, Error *err);
