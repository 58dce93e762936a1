/* workloads.c: placements into workload specs (workloads.h). */
#include "agent/workloads.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "util/macro.h"
#include "util/strutil.h"
#include "wire/request.h"

bool agent_map_get(const char *map, const char *key, char *buf, size_t size) {
    size_t n = strlen(key);
    for (const char *p = map; p && *p;) {
        const char *end = strchrnul(p, ',');
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (eq && (size_t)(eq - p) == n && !strncmp(p, key, n)) {
            snprintf(buf, size, "%.*s", (int)(end - eq - 1), eq + 1);
            return true;
        }
        p = *end ? end + 1 : end;
    }
    return false;
}

const char *const agent_image_keys[] = {
        "notebook",           "endpoint",      "container",    "vm",
        "endpoint-llama.cpp", "endpoint-vllm", "endpoint-mlx", NULL};
const char *const agent_runtime_keys[] = {"kata", "runc", NULL};

int agent_map_check(const char *map, const char *what, const char *const *keys, Error *err) {
    for (const char *p = map; p && *p;) {
        const char *end = strchrnul(p, ',');
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (!eq || eq == p || eq + 1 == end)
            return error_set(err, -EINVAL, "%s: '%.*s' is not KEY=VALUE", what, (int)(end - p), p);
        bool known = !keys;
        for (size_t k = 0; keys && keys[k] && !known; k++)
            known = strlen(keys[k]) == (size_t)(eq - p) && !strncmp(keys[k], p, (size_t)(eq - p));
        if (!known) {
            StrBuf list = {0};
            for (size_t k = 0; keys[k]; k++)
                strbuf_printf(&list, "%s%s", k ? ", " : "", keys[k]);
            int r = error_set(err, -EINVAL, "%s: '%.*s' is not a key it takes (%s)", what,
                              (int)(eq - p), p, strbuf_cstr(&list));
            strbuf_done(&list);
            return r;
        }
        for (const char *q = map; q < p;) {
            const char *qe = strchrnul(q, ',');
            if ((size_t)(strchr(q, '=') - q) == (size_t)(eq - p) &&
                !strncmp(q, p, (size_t)(eq - p)))
                return error_set(err, -EINVAL, "%s: '%.*s' is given twice", what, (int)(eq - p), p);
            q = qe + 1;
        }
        p = *end ? end + 1 : end;
    }
    return 0;
}

bool agent_work_is_container(json_t *work) {
    const char *m =
            json_string_value(json_object_get(json_object_get(work, "placement"), "method"));
    return m &&
           (STREQ(m, "container") || STREQ(m, "mig") || STREQ(m, "time-slice") || STREQ(m, "cpu"));
}

bool agent_work_is_vm(json_t *work) {
    const char *m =
            json_string_value(json_object_get(json_object_get(work, "placement"), "method"));
    return m && STREQ(m, "passthrough");
}

unsigned agent_work_port(json_t *work) {
    const char *kind = json_string_value(json_object_get(work, "kind"));
    const char *rt = json_string_value(
            json_object_get(json_object_get(work, "placement"), "endpoint_runtime"));
    if (kind && STREQ(kind, "notebook"))
        return 8888;
    if (kind && STREQ(kind, "endpoint"))
        return rt && STREQ(rt, "vllm") ? 8000 : 8080;
    return 0;
}

void agent_work_url(const AgentWorkloadConfig *cfg, json_t *work, unsigned host_port, char *buf,
                    size_t size) {
    const char *kind = json_string_value(json_object_get(work, "kind"));
    buf[0] = 0;
    if (!agent_work_port(work) || !host_port || isempty(cfg->address))
        return;
    snprintf(buf, size, "http://%s:%u%s", cfg->address, host_port,
             STREQ(kind, "endpoint") ? "/v1" : "/");
}

static const Accelerator *find_gpu(const MachineInventory *inv, const char *bdf) {
    for (size_t i = 0; inv && i < inv->n_accelerators; i++)
        if (STREQ(inv->accelerators[i].bdf, bdf))
            return &inv->accelerators[i];
    return NULL;
}

static const char *render_node(const Accelerator *a) {
    for (size_t i = 0; i < a->n_device_files; i++)
        if (a->device_files[i] && strstr(a->device_files[i], "/dri/renderD"))
            return a->device_files[i];
    return NULL;
}

/* A string list field of the request ("command", "env"), at most 64 items. */
static int strv_field(json_t *req, const char *key, const char **v, size_t max, bool *ret_has,
                      Error *err) {
    json_t *a = json_object_get(req, key);
    *ret_has = false;
    if (!a)
        return 0;
    if (!json_is_array(a) || json_array_size(a) > max)
        return error_set(err, -EINVAL, "the request's '%s' is not a list of at most %zu texts", key,
                         max);
    size_t i;
    json_t *s;
    json_array_foreach(a, i, s) {
        if (!json_is_string(s))
            return error_set(err, -EINVAL, "the request's '%s' item %zu is not a text", key, i);
        v[i] = json_string_value(s);
    }
    v[json_array_size(a)] = NULL;
    *ret_has = true;
    return 0;
}

/* The request's "ports": at most 16 container ports, each 1..65535 (the server checked them;
 * an agent trusts no input either). */
static int ports_field(json_t *req, unsigned ports[16], size_t *ret_n, Error *err) {
    json_t *a = json_object_get(req, "ports");
    *ret_n = 0;
    if (!a)
        return 0;
    if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > 16)
        return error_set(err, -EINVAL, "the request's 'ports' is not a list of 1 to 16 ports");
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) {
        json_int_t n = json_integer_value(v);
        if (!json_is_integer(v) || n < 1 || n > 65535)
            return error_set(err, -EINVAL,
                             "the request's 'ports' item %zu is not a port from 1 to 65535", i);
        ports[i] = (unsigned)n;
    }
    *ret_n = json_array_size(a);
    return 0;
}

/* What every spec starts from: the item's kind, and its id into a cleared buf. */
static int work_begin(json_t *work, AgentSpecBuf *buf, const char **ret_kind, Error *err) {
    const char *kind = json_string_value(json_object_get(work, "kind"));
    json_int_t idn = json_integer_value(json_object_get(work, "id"));
    if (!kind || idn <= 0 || !json_is_object(json_object_get(work, "placement")))
        return error_set(err, -EINVAL,
                         "the control plane's workload item lacks id, kind or placement");
    memset(buf, 0, sizeof(*buf));
    snprintf(buf->id, sizeof(buf->id), "%" JSON_INTEGER_FORMAT, idn);
    json_int_t created = json_integer_value(json_object_get(work, "created_ms"));
    if (created > 0)
        snprintf(buf->created, sizeof(buf->created), "%" JSON_INTEGER_FORMAT, created);
    *ret_kind = kind;
    return 0;
}

/* A VM request's disk: a file of the site's VM image folder, named by its file name. The
 * agent runs as root and libvirt hands the disk to the guest writable, so a path (any host
 * file, a block device) is never taken from a request. */
static int vm_image_path(const AgentWorkloadConfig *cfg, const char *id, const char *name,
                         char *buf, size_t size, Error *err) {
    char dir[PATH_MAX] = "";
    if (cfg->vm_image_dir)
        snprintf(dir, sizeof(dir), "%s", cfg->vm_image_dir);
    else if (agent_map_get(cfg->images, "vm", dir, sizeof(dir)) && dir[0] == '/')
        *strrchr(dir, '/') = 0; /* the folder of the default disk ("/disk": none) */
    else
        dir[0] = 0;
    if (!vm_image_name_is_valid(name))
        return error_set(err, -EINVAL,
                         "request %s: a VM's image is one of the site's disk images, named by "
                         "its file name, not '%.64s'",
                         id, name);
    if (!dir[0] || (size_t)snprintf(buf, size, "%s/%s", dir, name) >= size)
        return error_set(err, -ENOENT,
                         "request %s names the VM image '%s' but this site offers none by name "
                         "(agent run --vm-image-dir DIR)",
                         id, name);
    struct stat st;
    if (stat(buf, &st) < 0 || !S_ISREG(st.st_mode))
        return error_set(err, -ENOENT, "request %s: no VM image '%s' in %s", id, name, dir);
    return 0;
}

static void hide_gpus(const char **env, size_t *n);

int agent_work_spec(const AgentWorkloadConfig *cfg, json_t *work, const MachineInventory *inv,
                    AgentSpecBuf *buf, WorkloadSpec *ret, Error *err) {
    json_t *p = json_object_get(work, "placement"), *req = json_object_get(work, "request");
    const char *kind;
    int r = work_begin(work, buf, &kind, err);
    if (r < 0)
        return r;
    WorkloadSpec s = {
            .id = buf->id, .kind = kind, .created = buf->created[0] ? buf->created : NULL};
    /* The image: the request's own, else the site's default for the kind -- for an endpoint,
     * first the one for its runtime (R14: vLLM on NVIDIA, llama.cpp on cpu), `endpoint-vllm`,
     * `endpoint-llama.cpp`. */
    const char *image = json_string_value(json_object_get(req, "image"));
    const char *ert = json_string_value(json_object_get(p, "endpoint_runtime"));
    char by_runtime[80] = "";
    if (STREQ(kind, "endpoint") && ert && STRNEQ(ert, "none"))
        snprintf(by_runtime, sizeof(by_runtime), "endpoint-%s", ert);
    if (image && STREQ(kind, "vm")) {
        if ((r = vm_image_path(cfg, buf->id, image, buf->image, sizeof(buf->image), err)) < 0)
            return r;
    } else if (image)
        snprintf(buf->image, sizeof(buf->image), "%s", image);
    else if ((!by_runtime[0] ||
              !agent_map_get(cfg->images, by_runtime, buf->image, sizeof(buf->image))) &&
             !agent_map_get(cfg->images, kind, buf->image, sizeof(buf->image)))
        return error_set(err, -ENOENT,
                         "request %s names no image and this site has no default %s image "
                         "(agent run --images %s=IMAGE)",
                         buf->id, kind, kind);
    s.image = buf->image;
    bool has;
    if ((r = strv_field(req, "command", buf->cmd, 64, &has, err)) < 0)
        return r;
    s.command = has ? buf->cmd : NULL;
    if ((r = strv_field(req, "env", buf->env, 64, &has, err)) < 0)
        return r;
    /* An endpoint's model reaches its server as EINSORA_MODEL (the image's command uses it). */
    const char *model = json_string_value(json_object_get(req, "model"));
    if (model) {
        size_t n = has ? json_array_size(json_object_get(req, "env")) : 0;
        snprintf(buf->model_env, sizeof(buf->model_env), "EINSORA_MODEL=%s", model);
        buf->env[n] = buf->model_env;
        buf->env[n + 1] = NULL;
        has = true;
    }
    const char *pm0 = json_string_value(json_object_get(p, "method"));
    if (pm0 && STREQ(pm0, "cpu") && !agent_work_is_vm(work)) {
        /* A cpu container sees no GPU whatever its env says: on an engine whose default
         * runtime is NVIDIA's, NVIDIA_VISIBLE_DEVICES=all would hand it every GPU (R17). */
        size_t n_env = 0;
        while (has && buf->env[n_env])
            n_env++;
        hide_gpus(buf->env, &n_env);
        has = true;
    }
    s.env = has ? buf->env : NULL;
    /* The runtime the rules chose (R2: Kata for strangers), by the engine's name for it. */
    const char *rt = json_string_value(json_object_get(p, "container_runtime"));
    if (rt && STRNEQ(rt, "none")) {
        if (!agent_map_get(cfg->runtimes, rt, buf->runtime, sizeof(buf->runtime))) {
            if (STREQ(rt, "kata"))
                return error_set(err, -EOPNOTSUPP,
                                 "the placement asks for Kata and this agent maps no engine "
                                 "runtime to it (agent run --runtimes kata=NAME)");
            /* runc is every engine's default: no name needed */
        } else
            s.oci_runtime = buf->runtime;
    }
    const char *pm = json_string_value(json_object_get(p, "method"));
    bool mig = pm && STREQ(pm, "mig");
    size_t i;
    json_t *addr;
    json_array_foreach(json_object_get(p, "addresses"), i, addr) {
        const char *bdf = json_string_value(addr);
        const Accelerator *a = bdf ? find_gpu(inv, bdf) : NULL;
        if (!a)
            return error_set(err, -ENODEV,
                             "the allocated GPU %s is not in this machine's inventory",
                             strempty(bdf));
        if (buf->n_gpus == ARRAY_SIZE(buf->gpus))
            return error_set(err, -E2BIG, "too many GPUs for one workload");
        WorkloadGpu *g = &buf->gpus[buf->n_gpus];
        g->pci = a->bdf;
        if (agent_work_is_vm(work)) {
            /* The whole IOMMU group goes to the VM (R7); bridges stay with the host. */
            g->vendor = a->vendor == VENDOR_AMD ? "amd" : "nvidia";
            g->group = buf->group[buf->n_gpus];
            for (size_t k = 0; k < a->n_group && g->n_group < ARRAY_SIZE(buf->group[0]); k++)
                if (!a->group[k].kind || STRNEQ(a->group[k].kind, "bridge"))
                    buf->group[buf->n_gpus][g->n_group++] = a->group[k].bdf;
        } else if (a->vendor == VENDOR_NVIDIA && mig) {
            /* A slice gets its MIG device, which the agent makes (agent_mig_prepare) and puts
             * here: never the whole GPU's UUID (R15, R17). */
            g->vendor = "nvidia";
            g->uuid = NULL;
        } else if (a->vendor == VENDOR_NVIDIA && a->driver && STREQ(a->driver, "vfio-pci")) {
            /* A stranger's container on a passthrough GPU runs under Kata, which takes the GPU
             * into its VM over VFIO (R2b): its group's device, not the host driver's. */
            if (!rt || STRNEQ(rt, "kata"))
                return error_set(err, -EPERM,
                                 "the allocated GPU %s is on vfio-pci: only a Kata container "
                                 "can take it (R2b), and this placement is %s",
                                 a->bdf, rt ? rt : "none");
            if (a->iommu_group < 0)
                return error_set(err, -ENODEV,
                                 "the allocated GPU %s is on vfio-pci but in no IOMMU group",
                                 a->bdf);
            g->vendor = "nvidia";
            g->vfio = true;
            g->iommu_group = a->iommu_group;
        } else if (a->vendor == VENDOR_NVIDIA) {
            g->vendor = "nvidia";
            g->uuid = a->uuid;
            if (!g->uuid)
                return error_set(err, -ENODEV,
                                 "the allocated GPU %s has no UUID (NVML did not answer): "
                                 "the engine cannot be told which GPU it is",
                                 a->bdf);
        } else if (a->vendor == VENDOR_AMD) {
            g->vendor = "amd";
            g->render_node = render_node(a);
            if (!g->render_node)
                return error_set(err, -ENODEV, "the allocated AMD GPU %s has no render node",
                                 a->bdf);
        } else
            return error_set(err, -EOPNOTSUPP,
                             "the allocated device %s is not a GPU a container can take", a->bdf);
        buf->n_gpus++;
    }
    /* A VM's size: the placement's (from the request), else the driver's defaults. */
    s.memory_mb = (unsigned)json_integer_value(json_object_get(p, "memory_gb")) * 1024;
    s.vcpus = (unsigned)json_integer_value(json_object_get(p, "cpu_cores"));
    const char *method = json_string_value(json_object_get(p, "method"));
    if (method && STREQ(method, "cpu") && !agent_work_is_vm(work))
        s.cpu_limit = s.vcpus;
    s.gpus = buf->gpus;
    s.n_gpus = buf->n_gpus;
    size_t n_ports;
    if ((r = ports_field(req, buf->ports, &n_ports, err)) < 0)
        return r;
    if (n_ports && !agent_work_is_vm(work))
        s.ports = buf->ports, s.n_ports = n_ports; /* exactly the request's, nothing else */
    else if (!agent_work_is_vm(work) && (buf->port = agent_work_port(work)))
        s.ports = &buf->port, s.n_ports = 1;
    *ret = s;
    return 0;
}

bool agent_work_is_process(const AgentWorkloadConfig *cfg, json_t *work) {
    const char *kind = json_string_value(json_object_get(work, "kind"));
    const char *m =
            json_string_value(json_object_get(json_object_get(work, "placement"), "method"));
    if (!kind || !m || STRNEQ(kind, "endpoint"))
        return false;
    return STREQ(m, "apple-whole") || (STREQ(m, "cpu") && cfg && cfg->cpu_endpoints_as_process);
}

/* The first port from `port` up that none of taken holds (0 when every one above is). */
static unsigned first_port_free(unsigned port, const unsigned *taken, size_t n_taken) {
    for (; port && port <= 65535; port++) {
        bool held = false;
        for (size_t i = 0; i < n_taken && !held; i++)
            held = taken[i] == port;
        if (!held)
            return port;
    }
    return 0;
}

/* On a cpu placement the GPU runtimes see no device (R17), whatever the request's env says:
 * its items for these keys are dropped and these go in. */
static const char *const no_gpu_env[] = {"CUDA_VISIBLE_DEVICES=", "NVIDIA_VISIBLE_DEVICES=void",
                                         "HIP_VISIBLE_DEVICES=", "ROCR_VISIBLE_DEVICES="};

static void hide_gpus(const char **env, size_t *n) {
    size_t k = 0;
    for (size_t i = 0; i < *n; i++) {
        bool drop = false;
        for (size_t h = 0; h < ARRAY_SIZE(no_gpu_env) && !drop; h++)
            drop = strncmp(env[i], no_gpu_env[h], strcspn(no_gpu_env[h], "=") + 1) == 0;
        if (!drop)
            env[k++] = env[i];
    }
    for (size_t h = 0; h < ARRAY_SIZE(no_gpu_env); h++)
        env[k++] = no_gpu_env[h];
    env[k] = NULL;
    *n = k;
}

int agent_work_process_spec(const AgentWorkloadConfig *cfg, json_t *work, const unsigned *taken,
                            size_t n_taken, AgentSpecBuf *buf, WorkloadSpec *ret, Error *err) {
    json_t *p = json_object_get(work, "placement"), *req = json_object_get(work, "request");
    const char *kind;
    int r = work_begin(work, buf, &kind, err);
    if (r < 0)
        return r;
    const char *method = json_string_value(json_object_get(p, "method"));
    size_t n_ports;
    r = ports_field(req, buf->ports, &n_ports, err);
    if (r < 0)
        return r;
    MacServerSpec ms = {.runtime = json_string_value(json_object_get(p, "endpoint_runtime")),
                        .model = json_string_value(json_object_get(req, "model")),
                        .port = n_ports ? buf->ports[0]
                                        : first_port_free(agent_work_port(work), taken, n_taken),
                        .on_gpu = !method || STRNEQ(method, "cpu")};
    if (!ms.port)
        return error_set(err, -EADDRINUSE, "no port is left for request %s's server", buf->id);
    if ((r = mac_server_argv(&ms, buf->argv, buf->port_text, err)) < 0)
        return r;
    const char *bin = STREQ(ms.runtime, "mlx") ? cfg->mlx_server : cfg->llama_server;
    if (isempty(bin))
        return error_set(err, -EOPNOTSUPP, "this agent has no %s server binary (agent run %s PATH)",
                         ms.runtime, STREQ(ms.runtime, "mlx") ? "--mlx-server" : "--llama-server");
    buf->argv[0] = bin;
    bool has;
    if ((r = strv_field(req, "env", buf->env, 64, &has, err)) < 0)
        return r;
    if (!ms.on_gpu) {
        size_t n_env = 0;
        while (has && buf->env[n_env])
            n_env++;
        hide_gpus(buf->env, &n_env);
        has = true;
    }
    buf->port = ms.port;
    *ret = (WorkloadSpec){.id = buf->id,
                          .kind = kind,
                          .command = buf->argv,
                          .env = has ? buf->env : NULL,
                          .ports = &buf->port,
                          .n_ports = 1};
    return 0;
}
