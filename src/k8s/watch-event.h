/* watch-event.h: one line of a Kubernetes watch stream ({"type": ..., "object": ...}) and the
 * verb and resource a request stands for (what RBAC must allow). Pure; the event parser is
 * fuzzed by fuzz/fuzz-watch-event.c. */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "util/error.h"

typedef enum K8sEventType {
    K8S_ADDED,
    K8S_MODIFIED,
    K8S_DELETED,
    K8S_BOOKMARK, /* only a newer resourceVersion: nothing changed */
    K8S_ERROR,    /* object is a Status; code 410 means "relist" */
    _K8S_EVENT_MAX,
} K8sEventType;

const char *k8s_event_type_to_string(K8sEventType t);

typedef struct K8sEvent {
    K8sEventType type;
    json_t *object;               /* owned: free with k8s_event_done() */
    const char *resource_version; /* inside object; NULL for ERROR */
    const char *name;             /* metadata.name; NULL for BOOKMARK and ERROR */
    long code;                    /* ERROR: the Status code (410 Gone: the version is too old) */
    const char *message;          /* ERROR: the Status message, may be NULL */
} K8sEvent;

/* Refuses anything but an object with a known type and an object of the right shape. */
int k8s_watch_event_parse(const char *text, size_t len, K8sEvent *ret, Error *err);
void k8s_event_done(K8sEvent *e);

/* For an error sentence: the RBAC verb (get, list, watch, create, update, patch, delete,
 * deletecollection), the resource with its subresource ("pods/eviction") and the API group
 * ("" for core) of method + path. Unknown shapes give "request" and the path. */
typedef struct K8sAccess {
    char verb[24];
    char resource[96];
    char group[96];
    char name[256]; /* "" for a collection */
} K8sAccess;

void k8s_describe_access(const char *method, const char *path, K8sAccess *ret);
