/* double.h: the Kubernetes API-server double (tests/doubles/k8s-apiserver.py) as a process of
 * the test, on 127.0.0.1, with a kubeconfig that points at it. */
#pragma once

#include <jansson.h>
#include <sys/types.h>

#include "k8s/kclient.h"

#define K8S_DOUBLE_TOKEN "double-admin-token"

typedef struct K8sDouble {
    pid_t pid;
    unsigned port;
    char dir[64];         /* temporary folder: port file, kubeconfig */
    char server[64];      /* http://127.0.0.1:PORT */
    char kubeconfig[128]; /* a kubeconfig file with the token */
} K8sDouble;

/* fixture: a file under tests/fixtures/k8s/. operator_delay_s: the GPU Operator's delay. */
void k8s_double_start(K8sDouble *d, const char *fixture, double operator_delay_s);
void k8s_double_stop(K8sDouble *d);

/* A client of the double with token (NULL: the valid one). */
K8sClient *k8s_double_client(const K8sDouble *d, const char *token);

/* POST /_double/WHAT with a JSON body text; asserts 200. */
void k8s_double_control(const K8sDouble *d, const char *what, const char *body);

/* GET an object (path under the API) from the double; NULL when absent. */
json_t *k8s_double_get(const K8sDouble *d, const char *path);
