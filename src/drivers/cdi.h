/* cdi.h: read Container Device Interface specs (the NVIDIA Container Toolkit writes them with
 * `nvidia-ctk cdi generate`; we never write NVIDIA's spec ourselves) and resolve a qualified
 * device name ("nvidia.com/gpu=GPU-…") to the device nodes and environment it brings: the
 * device's own container edits plus the spec's common ones. Used to say clearly when an
 * allocated device has no CDI entry, and to give a Docker-compatible engine without CDI the
 * same device nodes explicitly. Mounts and hooks are not resolved here (the engine's CDI
 * support applies them). */
#pragma once

#include <stddef.h>

#include "util/error.h"

#define CDI_DIRS_DEFAULT "/etc/cdi:/var/run/cdi"

typedef struct CdiNode {
    char *path;      /* in the container */
    char *host_path; /* on the host (defaults to path) */
} CdiNode;

typedef struct CdiDevice {
    CdiNode *nodes;
    size_t n_nodes;
    char **env; /* "KEY=VALUE" */
    size_t n_env;
} CdiDevice;

void cdi_device_done(CdiDevice *d);

/* Resolve "kind=name" from one spec's text (YAML or JSON). Returns 0 and fills *ret when the
 * spec describes it, -ENOENT when the spec is of another kind or lacks the device, -EINVAL with
 * a sentence when the spec is malformed. file names the spec in error sentences. */
int cdi_resolve_text(const char *text, size_t len, const char *file, const char *qualified,
                     CdiDevice *ret, Error *err);

/* Resolve from every *.yaml, *.yml and *.json file in the colon-separated dirs (NULL:
 * CDI_DIRS_DEFAULT); later dirs override earlier ones as the CDI rules say. -ENOENT with a
 * sentence naming the dirs searched when no spec has it; a malformed spec is skipped. */
int cdi_resolve(const char *dirs, const char *qualified, CdiDevice *ret, Error *err);
