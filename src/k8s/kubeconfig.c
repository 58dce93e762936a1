/* kubeconfig.c: kubeconfig and in-cluster configuration of the Kubernetes client. */
#include "kubeconfig.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config/yaml-util.h"
#include "util/fileio.h"
#include "util/macro.h"
#include "util/strutil.h"

#define KUBE_FILE_MAX (4u << 20)

void kubeconfig_free(KubeConfig *k) {
    if (!k)
        return;
    free(k->context);
    free(k->server);
    free(k->ca_pem);
    free(k->ca_file);
    free(k->token);
    free(k->token_file);
    free(k->cert_pem);
    free(k->key_pem);
    free(k->cert_file);
    free(k->key_file);
    free(k->namespace_);
    free(k);
}

int k8s_base64_decode(const char *in, char **ret, size_t *ret_len) {
    size_t n = strlen(in);
    _cleanup_free_ char *out = malloc(n / 4 * 3 + 4);
    if (!out)
        return -ENOMEM;
    size_t len = 0;
    uint32_t acc = 0;
    unsigned bits = 0;
    bool pad = false;
    for (const char *p = in; *p; p++) {
        int v;
        char c = *p;
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        if (c == '=') {
            pad = true;
            continue;
        }
        if (pad)
            return -EINVAL; /* data after padding */
        if (c >= 'A' && c <= 'Z')
            v = c - 'A';
        else if (c >= 'a' && c <= 'z')
            v = c - 'a' + 26;
        else if (c >= '0' && c <= '9')
            v = c - '0' + 52;
        else if (c == '+')
            v = 62;
        else if (c == '/')
            v = 63;
        else
            return -EINVAL;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[len++] = (char)((acc >> bits) & 0xff);
        }
    }
    if (bits >= 6)
        return -EINVAL; /* a lone trailing character carries no whole byte */
    out[len] = 0;
    *ret = TAKE_PTR(out);
    *ret_len = len;
    return 0;
}

static yaml_node_t *map_get(yaml_document_t *doc, yaml_node_t *map, const char *key) {
    if (!map || map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        const char *k = yaml_scalar(yaml_document_get_node(doc, p->key));
        if (k && STREQ(k, key))
            return yaml_document_get_node(doc, p->value);
    }
    return NULL;
}

static const char *map_scalar(yaml_document_t *doc, yaml_node_t *map, const char *key) {
    const char *s = yaml_scalar(map_get(doc, map, key));
    return s && *s ? s : NULL;
}

/* The `what` mapping of the entry named name in the list under list_key (clusters, users,
 * contexts all have this shape: - name: N \n  cluster: {...}). */
static yaml_node_t *named(yaml_document_t *doc, yaml_node_t *root, const char *list_key,
                          const char *what, const char *name) {
    yaml_node_t *list = map_get(doc, root, list_key);
    if (!list || list->type != YAML_SEQUENCE_NODE)
        return NULL;
    for (yaml_node_item_t *i = list->data.sequence.items.start; i < list->data.sequence.items.top;
         i++) {
        yaml_node_t *item = yaml_document_get_node(doc, *i);
        const char *n = map_scalar(doc, item, "name");
        if (n && STREQ(n, name)) {
            yaml_node_t *m = map_get(doc, item, what);
            return m && m->type == YAML_MAPPING_NODE ? m : NULL;
        }
    }
    return NULL;
}

static int dup_path(const char *base_dir, const char *p, char **ret) {
    if (!p)
        return 0;
    char *s;
    if (p[0] != '/' && base_dir && *base_dir) {
        if (asprintf(&s, "%s/%s", base_dir, p) < 0)
            return -ENOMEM;
    } else if (!(s = strdup(p)))
        return -ENOMEM;
    *ret = s;
    return 0;
}

static int dup_str(const char *p, char **ret) {
    if (!p)
        return 0;
    return (*ret = strdup(p)) ? 0 : -ENOMEM;
}

static int decode_field(const char *file, const char *field, const char *data, char **ret,
                        size_t *ret_len, Error *err) {
    if (!data)
        return 0;
    int r = k8s_base64_decode(data, ret, ret_len);
    if (r == -EINVAL)
        return error_set(err, r, "%s: '%s' is not valid base64", file, field);
    return r < 0 ? error_set(err, r, "out of memory") : 0;
}

static int from_doc(yaml_document_t *doc, const char *file, const char *base_dir,
                    const char *context, KubeConfig *k, Error *err) {
    yaml_node_t *root = yaml_document_get_root_node(doc);
    if (!root || root->type != YAML_MAPPING_NODE)
        return error_set(
                err, -EINVAL,
                "%s: a kubeconfig must be a mapping (apiVersion, clusters, users, contexts)", file);
    const char *kind = map_scalar(doc, root, "kind");
    if (kind && STRNEQ(kind, "Config"))
        return error_set(err, -EINVAL, "%s: kind is '%s', a kubeconfig has kind Config", file,
                         kind);
    const char *ctx = context ? context : map_scalar(doc, root, "current-context");
    if (!ctx)
        return error_set(err, -EINVAL, "%s: no current-context is set and none was asked for",
                         file);
    yaml_node_t *c = named(doc, root, "contexts", "context", ctx);
    if (!c)
        return error_set(err, -ENOENT, "%s: context '%s' is not defined under contexts", file, ctx);
    const char *cluster = map_scalar(doc, c, "cluster"), *user = map_scalar(doc, c, "user");
    if (!cluster)
        return error_set(err, -EINVAL, "%s: context '%s' names no cluster", file, ctx);
    yaml_node_t *cl = named(doc, root, "clusters", "cluster", cluster);
    if (!cl)
        return error_set(err, -ENOENT,
                         "%s: cluster '%s' (of context '%s') is not defined under clusters", file,
                         cluster, ctx);
    yaml_node_t *u = user ? named(doc, root, "users", "user", user) : NULL;
    if (user && !u)
        return error_set(err, -ENOENT, "%s: user '%s' (of context '%s') is not defined under users",
                         file, user, ctx);
    const char *server = map_scalar(doc, cl, "server");
    if (!server || (strncmp(server, "https://", 8) != 0 && strncmp(server, "http://", 7) != 0) ||
        strlen(server) > 2048)
        return error_set(err, -EINVAL,
                         "%s: cluster '%s' needs a server of the form https://HOST:PORT", file,
                         cluster);
    if (map_get(doc, u, "exec") || map_get(doc, u, "auth-provider"))
        return error_set(err, -EOPNOTSUPP,
                         "%s: user '%s' authenticates through an exec or auth-provider plugin, "
                         "which Einsora does "
                         "not run: give it a token, tokenFile or client certificate",
                         file, user);
    const char *insecure = map_scalar(doc, cl, "insecure-skip-tls-verify");
    k->insecure = insecure && STREQ(insecure, "true");
    int r;
    if ((r = dup_str(ctx, &k->context)) < 0 || (r = dup_str(server, &k->server)) < 0 ||
        (r = dup_str(map_scalar(doc, c, "namespace") ?: "default", &k->namespace_)) < 0 ||
        (r = dup_path(base_dir, map_scalar(doc, cl, "certificate-authority"), &k->ca_file)) < 0 ||
        (r = dup_str(map_scalar(doc, u, "token"), &k->token)) < 0 ||
        (r = dup_path(base_dir, map_scalar(doc, u, "tokenFile"), &k->token_file)) < 0 ||
        (r = dup_path(base_dir, map_scalar(doc, u, "client-certificate"), &k->cert_file)) < 0 ||
        (r = dup_path(base_dir, map_scalar(doc, u, "client-key"), &k->key_file)) < 0)
        return error_set(err, r, "out of memory");
    while (strlen(k->server) > 8 && k->server[strlen(k->server) - 1] == '/')
        k->server[strlen(k->server) - 1] = 0;
    if ((r = decode_field(file, "certificate-authority-data",
                          map_scalar(doc, cl, "certificate-authority-data"), &k->ca_pem,
                          &k->ca_pem_len, err)) < 0 ||
        (r = decode_field(file, "client-certificate-data",
                          map_scalar(doc, u, "client-certificate-data"), &k->cert_pem,
                          &k->cert_pem_len, err)) < 0 ||
        (r = decode_field(file, "client-key-data", map_scalar(doc, u, "client-key-data"),
                          &k->key_pem, &k->key_pem_len, err)) < 0)
        return r;
    if (!!(k->cert_pem || k->cert_file) != !!(k->key_pem || k->key_file))
        return error_set(err, -EINVAL,
                         "%s: user '%s' has a client certificate without its key, or a key without "
                         "its certificate",
                         file, user);
    return 0;
}

/* The token goes into a header line: a CR or LF in it would add headers of its own to every
 * call to the API server. */
static int token_check(const KubeConfig *k, Error *err) {
    if (k->token && string_has_control(k->token))
        return error_set(err, -EINVAL,
                         "the kubeconfig's token%s%s holds a control character (CR, LF, ...)",
                         k->token_file ? " from " : "", k->token_file ? k->token_file : "");
    return 0;
}

int kubeconfig_parse(const char *text, size_t len, const char *file, const char *base_dir,
                     const char *context, KubeConfig **ret, Error *err) {
    yaml_document_t doc;
    int r = yaml_load_text(text, len, file, &doc, err);
    if (r < 0)
        return r;
    KubeConfig *k = calloc(1, sizeof(*k));
    if (!k) {
        yaml_document_delete(&doc);
        return error_set(err, -ENOMEM, "out of memory");
    }
    r = from_doc(&doc, file, base_dir, context, k, err);
    yaml_document_delete(&doc);
    if (r >= 0)
        r = token_check(k, err);
    if (r < 0) {
        kubeconfig_free(k);
        return r;
    }
    *ret = k;
    return 0;
}

static int read_into(const char *what, const char *path, char **ret, size_t *ret_len, Error *err) {
    char *text = NULL;
    size_t len = 0;
    int r = read_full_file(path, KUBE_FILE_MAX, &text, &len);
    if (r < 0)
        return error_set(err, r, "cannot read the %s %s: %s", what, path, strerror(-r));
    free(*ret);
    *ret = text;
    if (ret_len)
        *ret_len = len;
    return 0;
}

static void strip(char *s) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
        s[--n] = 0;
}

/* Read the files a parsed configuration names. */
static int read_files(KubeConfig *k, Error *err) {
    int r;
    if (k->ca_file && !k->ca_pem &&
        (r = read_into("CA file", k->ca_file, &k->ca_pem, &k->ca_pem_len, err)) < 0)
        return r;
    if (k->token_file && !k->token) {
        if ((r = read_into("token file", k->token_file, &k->token, NULL, err)) < 0)
            return r;
        strip(k->token);
    }
    if (k->cert_file && !k->cert_pem &&
        (r = read_into("client certificate", k->cert_file, &k->cert_pem, &k->cert_pem_len, err)) <
                0)
        return r;
    if (k->key_file && !k->key_pem &&
        (r = read_into("client key", k->key_file, &k->key_pem, &k->key_pem_len, err)) < 0)
        return r;
    return token_check(k, err);
}

int kubeconfig_load(const char *path, const char *context, KubeConfig **ret, Error *err) {
    _cleanup_free_ char *home_path = NULL;
    if (!path)
        path = getenv("KUBECONFIG");
    if (path && strchr(path, ':'))
        return error_set(err, -EOPNOTSUPP,
                         "KUBECONFIG lists several files (%s): pass one with --kubeconfig", path);
    if (!path || !*path) {
        const char *home = getenv("HOME");
        if (!home || asprintf(&home_path, "%s/.kube/config", home) < 0)
            return error_set(err, -ENOENT, "no kubeconfig: set KUBECONFIG or pass --kubeconfig");
        path = home_path;
    }
    _cleanup_free_ char *text = NULL, *dir = strdup(path);
    size_t len;
    if (!dir)
        return error_set(err, -ENOMEM, "out of memory");
    int r = read_full_file(path, KUBE_FILE_MAX, &text, &len);
    if (r < 0)
        return error_set(err, r, "cannot read the kubeconfig %s: %s", path, strerror(-r));
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        strcpy(dir, ".");
    _cleanup_(kubeconfig_freep) KubeConfig *k = NULL;
    if ((r = kubeconfig_parse(text, len, path, dir, context, &k, err)) < 0 ||
        (r = read_files(k, err)) < 0)
        return r;
    *ret = TAKE_PTR(k);
    return 0;
}

int kubeconfig_in_cluster(const char *sa_dir, KubeConfig **ret, Error *err) {
    const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port)
        return error_set(err, -ENOENT,
                         "not running in a cluster: KUBERNETES_SERVICE_HOST and "
                         "KUBERNETES_SERVICE_PORT are not set");
    if (!sa_dir)
        sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
    _cleanup_(kubeconfig_freep) KubeConfig *k = calloc(1, sizeof(*k));
    if (!k)
        return error_set(err, -ENOMEM, "out of memory");
    bool v6 = strchr(host, ':') != NULL;
    if (asprintf(&k->server, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port) < 0 ||
        asprintf(&k->token_file, "%s/token", sa_dir) < 0 ||
        asprintf(&k->ca_file, "%s/ca.crt", sa_dir) < 0 || !(k->context = strdup("in-cluster")))
        return error_set(err, -ENOMEM, "out of memory");
    _cleanup_free_ char *ns_path = NULL;
    if (asprintf(&ns_path, "%s/namespace", sa_dir) < 0)
        return error_set(err, -ENOMEM, "out of memory");
    if (read_full_file(ns_path, 256, &k->namespace_, NULL) >= 0)
        strip(k->namespace_);
    else if (!(k->namespace_ = strdup("default")))
        return error_set(err, -ENOMEM, "out of memory");
    int r = read_files(k, err);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(k);
    return 0;
}
