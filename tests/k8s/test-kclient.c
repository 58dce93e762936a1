/* test-kclient.c: the Kubernetes client (kubeconfig, in-cluster config, list, watch, merge
 * patch, errors) against the API-server double in its own process. */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "double.h"
#include "helpers.h"
#include "k8s/kclient.h"
#include "k8s/kubeconfig.h"
#include "k8s/watch-event.h"

#define KUBECONFIG_HEAD "apiVersion: v1\nkind: Config\ncurrent-context: prod\n"

Test(kubeconfig, r3_current_context_with_ca_data_and_token) {
    const char *text = KUBECONFIG_HEAD
            "clusters:\n- name: other\n  cluster:\n    server: https://10.0.0.9:6443\n"
            "- name: c1\n  cluster:\n    server: https://k8s.example:6443/\n"
            "    certificate-authority-data: LS0tLS1CRUdJTiBDRVJU\n"
            "users:\n- name: u1\n  user:\n    token: abc.def\n"
            "contexts:\n- name: prod\n  context:\n    cluster: c1\n    user: u1\n    namespace: "
            "gpu\n";
    KubeConfig *k = NULL;
    Error err = {0};
    cr_assert_eq(kubeconfig_parse(text, strlen(text), "cfg", "/etc/kube", NULL, &k, &err), 0, "%s",
                 err.message);
    cr_expect_str_eq(k->server, "https://k8s.example:6443");
    cr_expect_str_eq(k->token, "abc.def");
    cr_expect_str_eq(k->namespace_, "gpu");
    cr_expect_eq(k->ca_pem_len, 15u);
    cr_expect_eq(memcmp(k->ca_pem, "-----BEGIN CERT", 15), 0);
    kubeconfig_free(k);
}

Test(kubeconfig, r3_files_are_relative_to_the_kubeconfig) {
    const char *text =
            KUBECONFIG_HEAD "clusters:\n- name: c1\n  cluster:\n    server: https://h:6443\n    "
                            "certificate-authority: ca.crt\n"
                            "users:\n- name: u1\n  user:\n    client-certificate: /abs/u.crt\n    "
                            "client-key: keys/u.key\n"
                            "contexts:\n- name: prod\n  context:\n    cluster: c1\n    user: u1\n";
    KubeConfig *k = NULL;
    Error err = {0};
    cr_assert_eq(kubeconfig_parse(text, strlen(text), "cfg", "/etc/kube", NULL, &k, &err), 0, "%s",
                 err.message);
    cr_expect_str_eq(k->ca_file, "/etc/kube/ca.crt");
    cr_expect_str_eq(k->cert_file, "/abs/u.crt");
    cr_expect_str_eq(k->key_file, "/etc/kube/keys/u.key");
    cr_expect_str_eq(k->namespace_, "default");
    kubeconfig_free(k);
}

static void expect_refused(const char *text, const char *context, const char *needle) {
    KubeConfig *k = NULL;
    Error err = {0};
    cr_expect_lt(kubeconfig_parse(text, strlen(text), "cfg", NULL, context, &k, &err), 0,
                 "accepted: %s", text);
    cr_expect_null(k);
    cr_expect(strstr(err.message, needle), "'%s' does not say '%s'", err.message, needle);
}

Test(kubeconfig, r3_bad_kubeconfigs_are_refused_with_a_sentence) {
    const char *users = "users:\n- name: u1\n  user:\n    exec:\n      command: aws\n";
    const char *rest = "clusters:\n- name: c1\n  cluster:\n    server: https://h:6443\n"
                       "contexts:\n- name: prod\n  context:\n    cluster: c1\n    user: u1\n";
    char buf[1024];
    snprintf(buf, sizeof(buf), KUBECONFIG_HEAD "%s%s", users, rest);
    expect_refused(buf, NULL, "exec or auth-provider");
    snprintf(buf, sizeof(buf), KUBECONFIG_HEAD "%s", rest);
    expect_refused(buf, NULL, "user 'u1'");
    expect_refused(buf, "staging", "context 'staging'");
    expect_refused("apiVersion: v1\nkind: Config\n", NULL, "no current-context");
    expect_refused("- a\n- b\n", NULL, "must be a mapping");
    expect_refused(KUBECONFIG_HEAD "clusters:\n- name: c1\n  cluster:\n    server: ftp://h\n"
                                   "contexts:\n- name: prod\n  context:\n    cluster: c1\n",
                   NULL, "https://HOST:PORT");
    expect_refused(KUBECONFIG_HEAD "clusters:\n- name: c1\n  cluster:\n    server: https://h\n"
                                   "    certificate-authority-data: '***'\n"
                                   "contexts:\n- name: prod\n  context:\n    cluster: c1\n",
                   NULL, "not valid base64");
    expect_refused(KUBECONFIG_HEAD
                   "clusters:\n- name: c1\n  cluster:\n    server: https://h\n"
                   "users:\n- name: u1\n  user:\n    client-certificate-data: QUJD\n"
                   "contexts:\n- name: prod\n  context:\n    cluster: c1\n    user: u1\n",
                   NULL, "without its key");
    expect_refused("a: [", NULL, "YAML syntax error");
    /* A token is a header line's value: a CR/LF in it would inject headers into every call. */
    expect_refused(KUBECONFIG_HEAD
                   "clusters:\n- name: c1\n  cluster:\n    server: https://h\n"
                   "users:\n- name: u1\n  user:\n    token: \"abc\\r\\nX-Evil: injected\"\n"
                   "contexts:\n- name: prod\n  context:\n    cluster: c1\n    user: u1\n",
                   NULL, "holds a control character");
}

Test(kubeconfig, r3_base64_decodes_with_and_without_padding) {
    char *out;
    size_t len;
    cr_assert_eq(k8s_base64_decode("aGVsbG8=", &out, &len), 0);
    cr_expect_str_eq(out, "hello");
    free(out);
    cr_assert_eq(k8s_base64_decode("aGVs\nbG8", &out, &len), 0);
    cr_expect_eq(len, 5u);
    free(out);
    cr_expect_eq(k8s_base64_decode("aGVsbG8=x", &out, &len), -EINVAL);
    cr_expect_eq(k8s_base64_decode("a", &out, &len), -EINVAL);
}

Test(kubeconfig, r3_in_cluster_service_account) {
    char dir[] = "/tmp/einsora-sa-XXXXXX";
    cr_assert(mkdtemp(dir));
    char p[128];
    const char *files[][2] = {
            {"token", "sa-token\n"}, {"ca.crt", "PEM"}, {"namespace", "einsora\n"}};
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, files[i][0]);
        FILE *f = fopen(p, "w");
        cr_assert(f);
        fputs(files[i][1], f);
        fclose(f);
    }
    KubeConfig *k = NULL;
    Error err = {0};
    unsetenv("KUBERNETES_SERVICE_HOST");
    cr_expect_eq(kubeconfig_in_cluster(dir, &k, &err), -ENOENT);
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    cr_assert_eq(kubeconfig_in_cluster(dir, &k, &err), 0, "%s", err.message);
    cr_expect_str_eq(k->server, "https://10.96.0.1:443");
    cr_expect_str_eq(k->token, "sa-token");
    cr_expect_str_eq(k->namespace_, "einsora");
    cr_expect_str_eq(k->ca_pem, "PEM");
    kubeconfig_free(k);
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, files[i][0]);
        unlink(p);
    }
    rmdir(dir);
}

Test(watch_event, r3_events_and_410_are_parsed) {
    K8sEvent e;
    Error err = {0};
    const char *mod =
            "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\","
            "\"resourceVersion\":\"42\"}}}";
    cr_assert_eq(k8s_watch_event_parse(mod, strlen(mod), &e, &err), 0, "%s", err.message);
    cr_expect_eq(e.type, K8S_MODIFIED);
    cr_expect_str_eq(e.name, "n1");
    cr_expect_str_eq(e.resource_version, "42");
    k8s_event_done(&e);
    const char *bm = "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Node\",\"metadata\":{"
                     "\"resourceVersion\":\"50\"}}}";
    cr_assert_eq(k8s_watch_event_parse(bm, strlen(bm), &e, &err), 0, "%s", err.message);
    cr_expect_eq(e.type, K8S_BOOKMARK);
    k8s_event_done(&e);
    const char *gone = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,"
                       "\"message\":\"too old\"}}";
    cr_assert_eq(k8s_watch_event_parse(gone, strlen(gone), &e, &err), 0, "%s", err.message);
    cr_expect_eq(e.code, 410);
    k8s_event_done(&e);
    const char *bad[] = {"[]",
                         "{\"type\":\"ADDED\"}",
                         "{\"type\":\"RENAMED\",\"object\":{}}",
                         "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"x\"}}}",
                         "{\"type\":\"ERROR\",\"object\":{\"message\":\"x\"}}",
                         "{"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_expect_lt(k8s_watch_event_parse(bad[i], strlen(bad[i]), &e, &err), 0, "accepted %s",
                     bad[i]);
}

Test(watch_event, r4_access_names_verb_resource_and_group) {
    K8sAccess a;
    k8s_describe_access("POST", "/api/v1/namespaces/ml/pods/train-0/eviction", &a);
    cr_expect_str_eq(a.verb, "create");
    cr_expect_str_eq(a.resource, "pods/eviction");
    cr_expect_str_eq(a.group, "");
    k8s_describe_access("GET", "/apis/kubevirt.io/v1/virtualmachineinstances?watch=1&x=y", &a);
    cr_expect_str_eq(a.verb, "watch");
    cr_expect_str_eq(a.resource, "virtualmachineinstances");
    cr_expect_str_eq(a.group, "kubevirt.io");
    k8s_describe_access("PATCH", "/api/v1/nodes/gpu-a", &a);
    cr_expect_str_eq(a.verb, "patch");
    cr_expect_str_eq(a.name, "gpu-a");
    k8s_describe_access("GET", "/api/v1/nodes?limit=5", &a);
    cr_expect_str_eq(a.verb, "list");
}

static K8sDouble dbl;
static void start(void) {
    k8s_double_start(&dbl, "cluster.json", 0.2);
}
static void stop(void) {
    k8s_double_stop(&dbl);
}

TestSuite(kclient, .init = start, .fini = stop, .timeout = 120);

Test(kclient, r6_list_reads_every_page) {
    KubeConfig cfg = {.server = dbl.server, .token = K8S_DOUBLE_TOKEN};
    K8sOptions opt = {.page_limit = 2};
    K8sClient *c;
    Error err = {0};
    cr_assert_eq(k8s_client_new(&cfg, &opt, &c, &err), 0);
    json_t *items;
    char *rv;
    cr_assert_eq(k8s_list(c, "/api/v1/nodes", NULL, &items, &rv, &err), 0, "%s", err.message);
    cr_expect_eq(json_array_size(items), 6u);
    cr_expect_gt(atoi(rv), 0);
    json_decref(items);
    free(rv);
    cr_assert_eq(
            k8s_list(c, "/api/v1/pods", "fieldSelector=spec.nodeName%3Dgpu-a", &items, &rv, &err),
            0, "%s", err.message);
    cr_expect_eq(json_array_size(items), 2u);
    json_decref(items);
    free(rv);
    k8s_client_free(c);
}

Test(kclient, r3_kubeconfig_file_reaches_the_double) {
    KubeConfig *k = NULL;
    Error err = {0};
    cr_assert_eq(kubeconfig_load(dbl.kubeconfig, NULL, &k, &err), 0, "%s", err.message);
    K8sClient *c;
    cr_assert_eq(k8s_client_new(k, NULL, &c, &err), 0);
    json_t *n = NULL;
    cr_assert_eq(k8s_get(c, "/api/v1/nodes/gpu-a", &n, &err), 0, "%s", err.message);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(n, "metadata"), "name")),
                     "gpu-a");
    json_decref(n);
    k8s_client_free(c);
    kubeconfig_free(k);
}

typedef struct Seen {
    int modified, bookmarks;
    char label[64];
} Seen;

static int on_event(const K8sEvent *e, void *userdata) {
    Seen *s = userdata;
    if (e->type == K8S_BOOKMARK)
        s->bookmarks++;
    if (e->type == K8S_MODIFIED && e->name && strcmp(e->name, "gpu-a") == 0) {
        s->modified++;
        const char *v = json_string_value(
                json_object_get(json_object_get(json_object_get(e->object, "metadata"), "labels"),
                                "einsora.test/mark"));
        if (v)
            snprintf(s->label, sizeof(s->label), "%s", v);
    }
    return 0;
}

Test(kclient, r4_merge_patch_is_seen_by_a_watch_from_the_list_version) {
    K8sClient *c = k8s_double_client(&dbl, NULL);
    json_t *items;
    char *rv;
    Error err = {0};
    cr_assert_eq(k8s_list(c, "/api/v1/nodes", NULL, &items, &rv, &err), 0, "%s", err.message);
    json_decref(items);
    json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "einsora.test/mark", "one");
    cr_assert_eq(k8s_merge_patch(c, "/api/v1/nodes/gpu-a", patch, NULL, &err), 0, "%s",
                 err.message);
    json_decref(patch);
    Seen s = {0};
    char *before = strdup(rv);
    /* watch again from where the last one ended until a bookmark came (the double sends one
     * about every second; the count of tries is only a generous deadline) */
    for (int i = 0; i < 30 && !s.bookmarks; i++)
        cr_assert_eq(k8s_watch(c, "/api/v1/nodes", NULL, &rv, 2, on_event, &s, &err), 0, "%s",
                     err.message);
    cr_expect_eq(s.modified, 1);
    cr_expect_str_eq(s.label, "one");
    cr_expect_geq(s.bookmarks, 1, "bookmarks were asked for");
    cr_expect_gt(atoi(rv), atoi(before), "the watch follows the versions it saw");
    free(before);
    free(rv);
    k8s_client_free(c);
}

Test(kclient, r4_watch_ends_with_410_after_compaction) {
    K8sClient *c = k8s_double_client(&dbl, NULL);
    json_t *items;
    char *rv;
    Error err = {0};
    cr_assert_eq(k8s_list(c, "/api/v1/nodes", NULL, &items, &rv, &err), 0, "%s", err.message);
    json_decref(items);
    k8s_double_control(&dbl, "compact", "{}");
    Seen s = {0};
    cr_expect_eq(k8s_watch(c, "/api/v1/nodes", NULL, &rv, 5, on_event, &s, &err), -ESTALE);
    cr_expect(strstr(err.message, "410 Gone"), "%s", err.message);
    free(rv);
    k8s_client_free(c);
}

Test(kclient, r4_rbac_403_names_the_verb_and_resource) {
    k8s_double_control(&dbl, "rbac",
                       "{\"deny\": [[\"create\", \"pods/eviction\"], [\"patch\", \"nodes\"]]}");
    K8sClient *c = k8s_double_client(&dbl, NULL);
    Error err = {0};
    json_t *ev = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "policy/v1", "kind",
                           "Eviction", "metadata", "name", "train-0", "namespace", "ml");
    cr_expect_eq(k8s_call(c, "POST", "/api/v1/namespaces/ml/pods/train-0/eviction", NULL, ev, NULL,
                          &err),
                 -EPERM);
    cr_expect(strstr(err.message, "verb \"create\" on resource \"pods/eviction\""), "%s",
              err.message);
    json_decref(ev);
    error_clear(&err);
    json_t *patch = json_pack("{s:{s:b}}", "spec", "unschedulable", 1);
    cr_expect_eq(k8s_merge_patch(c, "/api/v1/nodes/gpu-a", patch, NULL, &err), -EPERM);
    cr_expect(strstr(err.message, "verb \"patch\" on resource \"nodes\""), "%s", err.message);
    json_decref(patch);
    k8s_client_free(c);
}

Test(kclient, r4_errors_401_404_409_415_are_sentences) {
    Error err = {0};
    K8sClient *bad = k8s_double_client(&dbl, "wrong");
    cr_expect_eq(k8s_get(bad, "/api/v1/nodes/gpu-a", NULL, &err), -EACCES);
    cr_expect(strstr(err.message, "401"), "%s", err.message);
    k8s_client_free(bad);
    K8sClient *c = k8s_double_client(&dbl, NULL);
    error_clear(&err);
    cr_expect_eq(k8s_get(c, "/api/v1/nodes/nope", NULL, &err), -ENOENT);
    cr_expect(strstr(err.message, "get nodes nope"), "%s", err.message);
    json_t *pod = json_pack("{s:s, s:s, s:{s:s}, s:{s:[{s:s, s:s}]}}", "apiVersion", "v1", "kind",
                            "Pod", "metadata", "name", "dup", "spec", "containers", "name", "c",
                            "image", "busybox");
    cr_assert_eq(k8s_call(c, "POST", "/api/v1/namespaces/ml/pods", NULL, pod, NULL, &err), 0, "%s",
                 err.message);
    error_clear(&err);
    cr_expect_eq(k8s_call(c, "POST", "/api/v1/namespaces/ml/pods", NULL, pod, NULL, &err), -EEXIST);
    cr_expect(strstr(err.message, "409"), "%s", err.message);
    json_decref(pod);
    json_t *patch = json_pack("{s:{s:b}}", "spec", "unschedulable", 1);
    error_clear(&err);
    cr_expect_eq(k8s_call(c, "PATCH", "/api/v1/nodes/gpu-a", "application/json", patch, NULL, &err),
                 -EINVAL);
    cr_expect(strstr(err.message, "415"), "%s", err.message);
    json_decref(patch);
    patch = json_pack("{s:{s:s}}", "spec", "unschedulable", "yes");
    error_clear(&err);
    cr_expect_eq(k8s_merge_patch(c, "/api/v1/nodes/gpu-a", patch, NULL, &err), -EINVAL,
                 "the double checks shapes");
    json_decref(patch);
    k8s_client_free(c);
}

Test(kclient, r4_429_is_retried_then_reported) {
    K8sClient *c = k8s_double_client(&dbl, NULL);
    Error err = {0};
    k8s_double_control(&dbl, "throttle", "{\"count\": 2}");
    cr_expect_eq(k8s_get(c, "/api/v1/nodes/gpu-a", NULL, &err), 0, "%s", err.message);
    k8s_client_free(c);
    KubeConfig cfg = {.server = dbl.server, .token = K8S_DOUBLE_TOKEN};
    K8sOptions opt = {.retries_429 = 1, .backoff_ms = 10};
    cr_assert_eq(k8s_client_new(&cfg, &opt, &c, &err), 0);
    k8s_double_control(&dbl, "throttle", "{\"count\": 5}");
    cr_expect_eq(k8s_get(c, "/api/v1/nodes/gpu-a", NULL, &err), -EAGAIN);
    cr_expect(strstr(err.message, "429"), "%s", err.message);
    k8s_double_control(&dbl, "throttle", "{\"count\": 0}");
    k8s_client_free(c);
}

Test(kclient, r4_a_silent_server_times_out) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(listen(fd, 4), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    char server[64];
    snprintf(server, sizeof(server), "http://127.0.0.1:%u", ntohs(a.sin_port));
    KubeConfig cfg = {.server = server, .token = "t"};
    K8sOptions opt = {.timeout_ms = 300};
    K8sClient *c;
    Error err = {0};
    cr_assert_eq(k8s_client_new(&cfg, &opt, &c, &err), 0);
    cr_expect_eq(k8s_get(c, "/api/v1/nodes", NULL, &err), -ETIMEDOUT);
    cr_expect(strstr(err.message, "did not answer"), "%s", err.message);
    k8s_client_free(c);
    close(fd);
}
