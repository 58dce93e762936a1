/* cdi.c: resolve a CDI device name from the specs on disk (cdi.h). */
#include "drivers/cdi.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config/yaml-util.h"
#include "util/fileio.h"
#include "util/macro.h"
#include "util/strutil.h"

void cdi_device_done(CdiDevice *d) {
    if (!d)
        return;
    for (size_t i = 0; i < d->n_nodes; i++) {
        free(d->nodes[i].path);
        free(d->nodes[i].host_path);
    }
    free(d->nodes);
    for (size_t i = 0; i < d->n_env; i++)
        free(d->env[i]);
    free(d->env);
    *d = (CdiDevice){0};
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

static int bad(Error *err, const char *file, const yaml_node_t *n, const char *what) {
    return error_set_at(err, -EINVAL, file, n ? (unsigned)n->start_mark.line + 1 : 1,
                        n ? (unsigned)n->start_mark.column + 1 : 1, "CDI spec: %s", what);
}

/* Append the device nodes and env of one containerEdits mapping (absent: nothing). */
static int add_edits(yaml_document_t *doc, yaml_node_t *edits, const char *file, CdiDevice *d,
                     Error *err) {
    if (!edits)
        return 0;
    if (edits->type != YAML_MAPPING_NODE)
        return bad(err, file, edits, "containerEdits must be a mapping");
    yaml_node_t *env = map_get(doc, edits, "env"), *nodes = map_get(doc, edits, "deviceNodes");
    if (env) {
        if (env->type != YAML_SEQUENCE_NODE)
            return bad(err, file, env, "env must be a list");
        for (yaml_node_item_t *it = env->data.sequence.items.start;
             it < env->data.sequence.items.top; it++) {
            yaml_node_t *n = yaml_document_get_node(doc, *it);
            const char *s = yaml_scalar(n);
            if (!s || !strchr(s, '=') || s[0] == '=')
                return bad(err, file, n, "an env entry must be KEY=VALUE");
            char **e = realloc(d->env, (d->n_env + 1) * sizeof(*e));
            if (!e)
                return error_set(err, -ENOMEM, "out of memory");
            d->env = e;
            if (!(d->env[d->n_env] = strdup(s)))
                return error_set(err, -ENOMEM, "out of memory");
            d->n_env++;
        }
    }
    if (nodes) {
        if (nodes->type != YAML_SEQUENCE_NODE)
            return bad(err, file, nodes, "deviceNodes must be a list");
        for (yaml_node_item_t *it = nodes->data.sequence.items.start;
             it < nodes->data.sequence.items.top; it++) {
            yaml_node_t *n = yaml_document_get_node(doc, *it);
            const char *path = yaml_scalar(map_get(doc, n, "path"));
            const char *host = yaml_scalar(map_get(doc, n, "hostPath"));
            if (!path || path[0] != '/' || (host && host[0] != '/'))
                return bad(err, file, n,
                           "a device node needs an absolute path (and hostPath, when given)");
            CdiNode *v = realloc(d->nodes, (d->n_nodes + 1) * sizeof(*v));
            if (!v)
                return error_set(err, -ENOMEM, "out of memory");
            d->nodes = v;
            CdiNode *c = &d->nodes[d->n_nodes];
            c->path = strdup(path);
            c->host_path = strdup(host ? host : path);
            d->n_nodes++;
            if (!c->path || !c->host_path)
                return error_set(err, -ENOMEM, "out of memory");
        }
    }
    return 0;
}

static int resolve_doc(yaml_document_t *doc, const char *file, const char *kind, const char *name,
                       CdiDevice *ret, Error *err) {
    yaml_node_t *root = yaml_document_get_root_node(doc);
    if (!root || root->type != YAML_MAPPING_NODE)
        return bad(err, file, root, "the top level must be a mapping");
    const char *version = yaml_scalar(map_get(doc, root, "cdiVersion"));
    const char *k = yaml_scalar(map_get(doc, root, "kind"));
    yaml_node_t *devices = map_get(doc, root, "devices");
    if (!version || !k || !devices || devices->type != YAML_SEQUENCE_NODE)
        return bad(err, file, root, "cdiVersion, kind and a list of devices are required");
    if (STRNEQ(k, kind))
        return -ENOENT;
    for (yaml_node_item_t *it = devices->data.sequence.items.start;
         it < devices->data.sequence.items.top; it++) {
        yaml_node_t *dev = yaml_document_get_node(doc, *it);
        const char *n = yaml_scalar(map_get(doc, dev, "name"));
        if (!n)
            return bad(err, file, dev, "every device has a name");
        if (STRNEQ(n, name))
            continue;
        CdiDevice d = {0};
        int r = add_edits(doc, map_get(doc, dev, "containerEdits"), file, &d, err);
        if (r >= 0)
            r = add_edits(doc, map_get(doc, root, "containerEdits"), file, &d, err);
        if (r < 0) {
            cdi_device_done(&d);
            return r;
        }
        *ret = d;
        return 0;
    }
    return -ENOENT;
}

static int split_qualified(const char *qualified, char *kind, size_t size, const char **ret_name,
                           Error *err) {
    const char *eq = strchr(qualified, '=');
    const char *slash = strchr(qualified, '/');
    if (!eq || !slash || slash > eq || eq[1] == 0 || (size_t)(eq - qualified) >= size)
        return error_set(err, -EINVAL, "'%.64s' is not a CDI device name (vendor.com/class=name)",
                         qualified);
    memcpy(kind, qualified, (size_t)(eq - qualified));
    kind[eq - qualified] = 0;
    *ret_name = eq + 1;
    return 0;
}

int cdi_resolve_text(const char *text, size_t len, const char *file, const char *qualified,
                     CdiDevice *ret, Error *err) {
    char kind[128];
    const char *name = NULL;
    int r = split_qualified(qualified, kind, sizeof(kind), &name, err);
    if (r < 0)
        return r;
    yaml_document_t doc;
    if ((r = yaml_load_text(text, len, file, &doc, err)) < 0)
        return r;
    r = resolve_doc(&doc, file, kind, name, ret, err);
    yaml_document_delete(&doc);
    return r;
}

static bool spec_file_name(const char *n) {
    size_t l = strlen(n);
    return n[0] != '.' &&
           ((l > 5 && STREQ(n + l - 5, ".yaml")) || (l > 4 && STREQ(n + l - 4, ".yml")) ||
            (l > 5 && STREQ(n + l - 5, ".json")));
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Resolve from one dir's specs (in name order); 0 when found, -ENOENT otherwise. */
static int resolve_dir(const char *dir, const char *qualified, CdiDevice *ret) {
    DIR *d = opendir(dir);
    if (!d)
        return -ENOENT;
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!spec_file_name(e->d_name))
            continue;
        char **v = realloc(names, (n + 1) * sizeof(*v));
        if (!v)
            break;
        names = v;
        if ((names[n] = strdup(e->d_name)))
            n++;
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof(*names), cmp_names);
    int found = -ENOENT;
    for (size_t i = 0; i < n; i++) {
        _cleanup_free_ char *path = strprintf("%s/%s", dir, names[i]), *text = NULL;
        size_t len;
        CdiDevice dev = {0};
        Error e = {0};
        if (found < 0 && path && read_full_file(path, 4 << 20, &text, &len) >= 0 &&
            cdi_resolve_text(text, len, path, qualified, &dev, &e) >= 0) {
            *ret = dev;
            found = 0;
        }
        free(names[i]);
    }
    free(names);
    return found;
}

int cdi_resolve(const char *dirs, const char *qualified, CdiDevice *ret, Error *err) {
    char kind[128];
    const char *name = NULL;
    int r = split_qualified(qualified, kind, sizeof(kind), &name, err);
    if (r < 0)
        return r;
    _cleanup_free_ char *copy = strdup(dirs ? dirs : CDI_DIRS_DEFAULT);
    if (!copy)
        return error_set(err, -ENOMEM, "out of memory");
    CdiDevice best = {0};
    bool found = false;
    char *save = NULL;
    for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        CdiDevice d = {0};
        if (resolve_dir(dir, qualified, &d) < 0)
            continue;
        cdi_device_done(&best); /* a later dir overrides an earlier one */
        best = d;
        found = true;
    }
    if (!found)
        return error_set(err, -ENOENT,
                         "the allocated device %s has no CDI entry in %s: generate the spec with "
                         "`nvidia-ctk cdi generate` (the NVIDIA Container Toolkit's job)",
                         qualified, dirs ? dirs : CDI_DIRS_DEFAULT);
    *ret = best;
    return 0;
}
