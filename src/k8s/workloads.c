/* workloads.c: Pods and VMIs of placements. */
#include "workloads.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "util/macro.h"

void k8s_workload_name(json_int_t id, char *buf, size_t size) {
    snprintf(buf, size, "einsora-%" JSON_INTEGER_FORMAT, id);
}

/* A user name as a label value: [A-Za-z0-9._-], at most 63, alphanumeric at both ends. */
static void label_value(const char *s, char *buf, size_t size) {
    size_t k = 0;
    for (; *s && k + 1 < size && k < 63; s++)
        buf[k++] = isalnum((unsigned char)*s) || *s == '.' || *s == '_' || *s == '-' ? *s : '_';
    while (k && !isalnum((unsigned char)buf[k - 1]))
        k--;
    buf[k] = 0;
}

/* The request's "env" (["KEY=VALUE", ...], checked by the server) as a container's env, with
 * an endpoint's model as EINSORA_MODEL (the image's command uses it, as on an agent). A cpu
 * placement sees no GPU whatever its image says: on a node whose default runtime is NVIDIA's,
 * NVIDIA_VISIBLE_DEVICES=all would hand it every GPU of the node (R17). */
static json_t *container_env(json_t *req, bool cpu) {
    json_t *env = json_array(), *e;
    size_t i;
    json_array_foreach(json_object_get(req, "env"), i, e) {
        const char *kv = json_string_value(e), *eq = kv ? strchr(kv, '=') : NULL;
        if (!eq || eq == kv)
            continue;
        bool hidden = cpu && !strncmp(kv, "NVIDIA_VISIBLE_DEVICES=", 23);
        if (!hidden)
            json_array_append_new(
                    env, json_pack("{s:s%, s:s}", "name", kv, (size_t)(eq - kv), "value", eq + 1));
    }
    const char *model = json_string_value(json_object_get(req, "model"));
    if (model)
        json_array_append_new(env,
                              json_pack("{s:s, s:s}", "name", "EINSORA_MODEL", "value", model));
    if (cpu)
        json_array_append_new(
                env, json_pack("{s:s, s:s}", "name", "NVIDIA_VISIBLE_DEVICES", "value", "void"));
    return env;
}

/* The container of a Pod: the request's image (else the site's), command, env and ports; a
 * notebook or endpoint without ports has the one its server listens on (Jupyter 8888, vLLM
 * 8000, llama.cpp and MLX 8080), as an agent publishes it. */
static json_t *container_of(const K8sWorkloadSite *site, const char *kind, json_t *w,
                            json_t *limits) {
    json_t *req = json_object_get(w, "request"), *p = json_object_get(w, "placement");
    const char *image = json_string_value(json_object_get(req, "image"));
    const char *method = json_string_value(json_object_get(p, "method"));
    json_t *c = json_pack("{s:s, s:s, s:{s:o}}", "name", kind, "image",
                          image ? image : site->pod_image, "resources", "limits", limits);
    json_t *cmd = json_object_get(req, "command");
    if (c && json_array_size(cmd))
        json_object_set(c, "command", cmd);
    json_t *env = container_env(req, method && STREQ(method, "cpu"));
    if (c && json_array_size(env))
        json_object_set(c, "env", env);
    json_decref(env);
    json_t *ports = json_array(), *v;
    size_t i;
    json_array_foreach(json_object_get(req, "ports"), i, v)
            json_array_append_new(ports, json_pack("{s:I, s:s}", "containerPort",
                                                   json_integer_value(v), "protocol", "TCP"));
    if (!json_array_size(ports) && (STREQ(kind, "notebook") || STREQ(kind, "endpoint"))) {
        const char *rt = json_string_value(json_object_get(p, "endpoint_runtime"));
        json_int_t port = STREQ(kind, "notebook") ? 8888 : rt && STREQ(rt, "vllm") ? 8000 : 8080;
        json_array_append_new(ports,
                              json_pack("{s:I, s:s}", "containerPort", port, "protocol", "TCP"));
    }
    if (c && json_array_size(ports))
        json_object_set(c, "ports", ports);
    json_decref(ports);
    return c;
}

json_t *k8s_workload_manifest(const Catalog *cat, const K8sWorkloadSite *site, json_t *w,
                              const char *node_resource) {
    json_int_t id = json_integer_value(json_object_get(w, "id"));
    const char *kind = json_string_value(json_object_get(w, "kind")),
               *user = json_string_value(json_object_get(w, "user"));
    json_t *p = json_object_get(w, "placement");
    const char *node = json_string_value(json_object_get(p, "node")),
               *method = json_string_value(json_object_get(p, "method"));
    const char *cls = json_string_value(json_object_get(p, "class")),
               *crt = json_string_value(json_object_get(p, "container_runtime"));
    if (id <= 0 || !kind || !node || !method)
        return NULL;
    size_t n = json_array_size(json_object_get(p, "devices"));
    const GpuClass *c = cls ? catalog_find(cat, cls) : NULL;
    const char *res = STREQ(method, "mig") && c ? c->container_resource : node_resource;
    unsigned count = STREQ(method, "mig") ? 1 : (unsigned)n;
    char name[64], uid[64], idtext[32];
    k8s_workload_name(id, name, sizeof(name));
    label_value(strempty(user), uid, sizeof(uid));
    snprintf(idtext, sizeof(idtext), "%" JSON_INTEGER_FORMAT, id);
    json_t *labels = json_pack("{s:s, s:s, s:s}", K8S_LABEL_REQUEST, idtext, "einsora.io/user", uid,
                               "einsora.io/kind", kind);
    json_t *meta = json_pack("{s:s, s:s, s:o}", "name", name, "namespace", site->namespace_,
                             "labels", labels);
    json_int_t memory = json_integer_value(json_object_get(p, "memory_gb"));
    char mem[32];
    snprintf(mem, sizeof(mem), "%" JSON_INTEGER_FORMAT "Gi", memory > 0 ? memory : 4);
    json_int_t cores = json_integer_value(json_object_get(p, "cpu_cores"));
    if (STREQ(kind, "vm")) {
        /* The request's disk, as a containerDisk image (KubeVirt's), else the site's. */
        const char *vm_image =
                json_string_value(json_object_get(json_object_get(w, "request"), "image"));
        /* A GPU VM gets its GPUs (R2a); a cpu VM (R11) its cores and none. */
        bool cpu = STREQ(method, "cpu");
        if (cpu ? cores <= 0 : !res || !count)
            return json_decref(meta), NULL;
        json_t *devices = json_pack("{s:[{s:s, s:{s:s}}]}", "disks", "name", "rootdisk", "disk",
                                    "bus", "virtio");
        json_t *gpus = cpu ? NULL : json_array();
        for (unsigned i = 0; gpus && i < count; i++) {
            char g[16];
            snprintf(g, sizeof(g), "gpu%u", i);
            json_array_append_new(gpus, json_pack("{s:s, s:s}", "name", g, "deviceName", res));
        }
        if (gpus)
            json_object_set_new(devices, "gpus", gpus);
        json_t *domain = json_pack("{s:o, s:{s:{s:s}}}", "devices", devices, "resources",
                                   "requests", "memory", mem);
        if (domain && cpu)
            json_object_set_new(domain, "cpu", json_pack("{s:I}", "cores", cores));
        return json_pack("{s:s, s:s, s:o, s:{s:{s:s}, s:o, s:[{s:s, s:{s:s}}]}}", "apiVersion",
                         "kubevirt.io/v1", "kind", "VirtualMachineInstance", "metadata", meta,
                         "spec", "nodeSelector", "kubernetes.io/hostname", node, "domain", domain,
                         "volumes", "name", "rootdisk", "containerDisk", "image",
                         vm_image ? vm_image : site->vm_image);
    }
    json_t *limits = json_object();
    if (res && count && STRNEQ(method, "cpu")) {
        char q[16];
        snprintf(q, sizeof(q), "%u", count);
        json_object_set_new(limits, res, json_string(q));
    }
    if (cores > 0)
        json_object_set_new(limits, "cpu", json_sprintf("%" JSON_INTEGER_FORMAT, cores));
    json_t *pod = json_pack("{s:s, s:s, s:o, s:{s:s, s:s, s:[o]}}", "apiVersion", "v1", "kind",
                            "Pod", "metadata", meta, "spec", "nodeName", node, "restartPolicy",
                            STREQ(kind, "container") ? "Never" : "Always", "containers",
                            container_of(site, kind, w, limits));
    if (pod && crt && STREQ(crt, "kata"))
        json_object_set_new(json_object_get(pod, "spec"), "runtimeClassName",
                            json_string(site->kata_runtime_class));
    return pod;
}
