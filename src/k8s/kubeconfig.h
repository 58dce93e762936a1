/* kubeconfig.h: where the Kubernetes API is and how to prove who we are: a kubeconfig file
 * (its current context: server, CA data or file, bearer token or token file, client
 * certificate and key as data or files) or the in-cluster service account. The parser is
 * pure (fuzzed by fuzz/fuzz-kubeconfig.c); the loaders read the files it names. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

typedef struct KubeConfig {
    char *context; /* the context used (informative) */
    char *server;  /* https://HOST:PORT or http://HOST:PORT, no trailing slash */
    char *ca_pem;  /* the CA bundle itself (from certificate-authority-data or read) */
    size_t ca_pem_len;
    char *ca_file;            /* certificate-authority: a path, kept when not read yet */
    bool insecure;            /* insecure-skip-tls-verify */
    char *token;              /* bearer token */
    char *token_file;         /* tokenFile: read at load time */
    char *cert_pem, *key_pem; /* client-certificate(-data), client-key(-data) */
    size_t cert_pem_len, key_pem_len;
    char *cert_file, *key_file;
    char *namespace_; /* the context's namespace, "default" when none */
} KubeConfig;

void kubeconfig_free(KubeConfig *k);
DEFINE_TRIVIAL_CLEANUP_FUNC(KubeConfig *, kubeconfig_free);

/* Parse kubeconfig text and resolve context (NULL: current-context). File references stay
 * as paths (relative ones are taken relative to base_dir when it is not NULL). Refuses an
 * exec or auth-provider user (not supported) and a context, cluster or user that is missing,
 * with a sentence naming it. Pure. */
int kubeconfig_parse(const char *text, size_t len, const char *file, const char *base_dir,
                     const char *context, KubeConfig **ret, Error *err);

/* Read path (NULL: $KUBECONFIG, else ~/.kube/config), parse it and read the files it names
 * (CA, token, certificate, key). */
int kubeconfig_load(const char *path, const char *context, KubeConfig **ret, Error *err);

/* The in-cluster configuration: $KUBERNETES_SERVICE_HOST/PORT and the service account's
 * token, ca.crt and namespace under sa_dir (NULL: /var/run/secrets/kubernetes.io/serviceaccount).
 */
int kubeconfig_in_cluster(const char *sa_dir, KubeConfig **ret, Error *err);

/* Standard base64 (padding optional, whitespace skipped) into a NUL-terminated buffer. */
int k8s_base64_decode(const char *in, char **ret, size_t *ret_len);
