/* engine.c: containers over the engine's unix socket (engine.h). */
#include "drivers/engine.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "drivers/cdi.h"
#include "util/macro.h"
#include "util/strutil.h"

#define ANSWER_MAX (16u << 20)

typedef struct Engine {
    Driver base;
    char *socket, *cdi_dirs, *dev_root, *node;
    EngineDialect dialect;
    EngineGpuMode gpu_mode;
    bool podman;
    unsigned timeout_s;
} Engine;

void engine_config_init(EngineConfig *c) {
    *c = (EngineConfig){.dialect = -1, .gpu_mode = -1, .api_timeout_s = 60};
}

/* ---- HTTP over the unix socket ---- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

typedef struct Sink {
    StrBuf buf;
    FILE *out;      /* logs: demultiplexed output goes here instead of buf */
    uint8_t hdr[8]; /* the stream's frame header being read */
    size_t hdr_len;
    uint64_t left; /* bytes of the current frame's payload still to come */
    bool raw;      /* not multiplexed (a TTY container) */
    bool overflow;
} Sink;

/* Docker's log stream: frames of [stream, 0, 0, 0, size (big endian 32)] then size bytes. */
static void demux(Sink *s, const uint8_t *p, size_t n) {
    while (n) {
        if (s->raw) {
            fwrite(p, 1, n, s->out);
            return;
        }
        if (s->left) {
            size_t k = (size_t)MIN((uint64_t)n, s->left);
            fwrite(p, 1, k, s->out);
            p += k, n -= k, s->left -= k;
            continue;
        }
        s->hdr[s->hdr_len++] = *p++, n--;
        if (s->hdr_len == 1 && s->hdr[0] > 2) { /* not a frame: the container has a TTY */
            s->raw = true;
            fwrite(s->hdr, 1, 1, s->out);
        } else if (s->hdr_len == 8) {
            s->left = (uint64_t)s->hdr[4] << 24 | (uint64_t)s->hdr[5] << 16 |
                      (uint64_t)s->hdr[6] << 8 | s->hdr[7];
            s->hdr_len = 0;
        }
    }
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *userdata) {
    Sink *s = userdata;
    size_t n = size * nmemb;
    if (s->out) {
        demux(s, (const uint8_t *)ptr, n);
        fflush(s->out);
    } else if (s->buf.len + n > ANSWER_MAX)
        s->overflow = true;
    else
        strbuf_append(&s->buf, ptr, n);
    return n;
}

/* One API call. path is below the dialect's prefix unless it starts with "!" (raw path).
 * timeout_s 0: no limit (following logs). ret_json: the parsed answer, when it is JSON. */
static int http(Engine *e, const char *method, const char *path, json_t *body, unsigned timeout_s,
                FILE *out, long *ret_status, json_t **ret_json, Error *err) {
    const char *prefix = path[0] == '!'                ? ""
                         : e->dialect == ENGINE_LIBPOD ? "/v4.0.0/libpod"
                                                       : "/v1.41";
    _cleanup_free_ char *url =
            strprintf("http://engine%s%s", prefix, path[0] == '!' ? path + 1 : path);
    _cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    CURL *h = curl_easy_init();
    if (!url || !h || (body && !text)) {
        if (h)
            curl_easy_cleanup(h);
        return error_set(err, -ENOMEM, "out of memory");
    }
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    Sink sink = {.out = out};
    curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, e->socket);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)timeout_s);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    if (text)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
    else if (STREQ(method, "POST"))
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(h);
    if (rc != CURLE_OK) {
        strbuf_done(&sink.buf);
        int code = rc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT
                   : rc == CURLE_COULDNT_CONNECT  ? -ECONNREFUSED
                                                  : -EIO;
        return error_set(err, code, "the container engine at %s does not answer %s %s: %s",
                         e->socket, method, path[0] == '!' ? path + 1 : path,
                         curl_easy_strerror(rc));
    }
    if (sink.overflow) {
        strbuf_done(&sink.buf);
        return error_set(err, -EFBIG, "the container engine's answer to %s %s is over %u bytes",
                         method, path, ANSWER_MAX);
    }
    if (ret_json)
        *ret_json = sink.buf.len ? json_loadb(sink.buf.data, sink.buf.len, 0, NULL) : NULL;
    strbuf_done(&sink.buf);
    *ret_status = status;
    return 0;
}

/* A call whose answer must be a 2xx; otherwise the engine's sentence, prefixed with what. */
static int call_ok(Engine *e, const char *method, const char *path, json_t *body, const char *what,
                   long *ret_status, json_t **ret_json, Error *err) {
    long status = 0;
    json_t *j = NULL;
    int r = http(e, method, path, body, e->timeout_s, NULL, &status, &j, err);
    if (r < 0)
        return r;
    if (ret_status)
        *ret_status = status;
    if (status >= 300) {
        char msg[400];
        engine_error_sentence(j, status, msg, sizeof(msg));
        json_decref(j);
        return error_set(err,
                         status == 404   ? -ENOENT
                         : status == 409 ? -EEXIST
                                         : -EIO,
                         "%s: %s", what, msg);
    }
    if (ret_json)
        *ret_json = j;
    else
        json_decref(j);
    return 0;
}

/* ---- devices for the container ---- */

typedef struct Plan {
    char **ids, **cdi, **env;
    size_t n_ids, n_cdi, n_env;
    EngineDevice *devs;
    char **dev_strings; /* owns the devices' paths */
    size_t n_devs, n_dev_strings;
} Plan;

static void plan_done(Plan *p) {
    for (size_t i = 0; i < p->n_ids; i++)
        free(p->ids[i]);
    for (size_t i = 0; i < p->n_cdi; i++)
        free(p->cdi[i]);
    for (size_t i = 0; i < p->n_env; i++)
        free(p->env[i]);
    for (size_t i = 0; i < p->n_dev_strings; i++)
        free(p->dev_strings[i]);
    free(p->ids), free(p->cdi), free(p->env), free(p->devs), free(p->dev_strings);
}

static int push(char ***v, size_t *n, char *s) {
    char **w = s ? realloc(*v, (*n + 1) * sizeof(*w)) : NULL;
    if (!w) {
        free(s);
        return -ENOMEM;
    }
    *v = w;
    w[(*n)++] = s;
    return 0;
}

static int plan_device(Plan *p, const char *host, const char *container) {
    char *h = strdup(host), *c = strdup(container);
    if (push(&p->dev_strings, &p->n_dev_strings, h) < 0 ||
        push(&p->dev_strings, &p->n_dev_strings, c) < 0)
        return -ENOMEM;
    for (size_t i = 0; i < p->n_devs; i++) /* a node shared by several GPUs (nvidiactl) once */
        if (STREQ(p->devs[i].container_path, container))
            return 0;
    EngineDevice *v = realloc(p->devs, (p->n_devs + 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    p->devs = v;
    v[p->n_devs++] = (EngineDevice){h, c};
    return 0;
}

static int plan_env(Plan *p, const char *kv) {
    size_t k = strcspn(kv, "=");
    for (size_t i = 0; i < p->n_env; i++)
        if (!strncmp(p->env[i], kv, k + 1))
            return 0;
    return push(&p->env, &p->n_env, strdup(kv));
}

static int plan_nvidia(Engine *e, Plan *p, const WorkloadGpu *g, Error *err) {
    if (g->vfio) { /* Kata passes the group into its VM (R2b); no CDI entry exists for it */
        _cleanup_free_ char *host = strprintf("%s/vfio/%d", e->dev_root, g->iommu_group),
                            *in = strprintf("/dev/vfio/%d", g->iommu_group);
        if (!host || !in || plan_device(p, host, in) < 0)
            return error_set(err, -ENOMEM, "out of memory");
        return 0;
    }
    if (isempty(g->uuid))
        return error_set(err, -EINVAL, "the NVIDIA GPU %s has no UUID to hand to the engine",
                         strempty(g->pci));
    _cleanup_free_ char *name = strprintf("nvidia.com/gpu=%s", g->uuid);
    if (!name)
        return error_set(err, -ENOMEM, "out of memory");
    if (e->dialect == ENGINE_DOCKER && e->gpu_mode == ENGINE_GPU_DEVICE_REQUESTS)
        return push(&p->ids, &p->n_ids, strdup(g->uuid)) < 0
                       ? error_set(err, -ENOMEM, "out of memory")
                       : 0;
    /* CDI names or explicit nodes: the spec must describe the device (we never write it). */
    CdiDevice d = {0};
    int r = cdi_resolve(e->cdi_dirs, name, &d, err);
    if (r < 0)
        return r;
    if (e->dialect == ENGINE_LIBPOD || e->gpu_mode == ENGINE_GPU_CDI)
        r = push(&p->cdi, &p->n_cdi, TAKE_PTR(name));
    else {
        for (size_t i = 0; r >= 0 && i < d.n_nodes; i++)
            r = plan_device(p, d.nodes[i].host_path, d.nodes[i].path);
        for (size_t i = 0; r >= 0 && i < d.n_env; i++)
            r = plan_env(p, d.env[i]);
    }
    cdi_device_done(&d);
    return r < 0 ? error_set(err, r, "out of memory") : 0;
}

static int plan_amd(Engine *e, Plan *p, const WorkloadGpu *g, size_t index, Error *err) {
    const char *node = g->render_node;
    if (isempty(node) || node[0] != '/')
        return error_set(err, -EINVAL, "the AMD GPU %s has no render node to hand to the container",
                         strempty(g->pci));
    _cleanup_free_ char *kfd = strprintf("%s/kfd", e->dev_root);
    const char *base = strrchr(node, '/') + 1;
    _cleanup_free_ char *in = strprintf("/dev/dri/%s", base);
    if (!kfd || !in || plan_device(p, kfd, "/dev/kfd") < 0 || plan_device(p, node, in) < 0)
        return error_set(err, -ENOMEM, "out of memory");
    /* Inside, ROCm enumerates only the nodes it was given: 0..n-1. */
    char *old = NULL;
    for (size_t i = 0; i < p->n_env; i++)
        if (string_has_prefix(p->env[i], "ROCR_VISIBLE_DEVICES="))
            old = p->env[i], p->env[i] = strprintf("%s,%zu", old, index);
    if (old) {
        free(old);
        return 0;
    }
    return push(&p->env, &p->n_env, strprintf("ROCR_VISIBLE_DEVICES=%zu", index)) < 0
                   ? error_set(err, -ENOMEM, "out of memory")
                   : 0;
}

static int plan_build(Engine *e, const WorkloadSpec *spec, Plan *p, Error *err) {
    size_t amd = 0;
    for (size_t i = 0; i < spec->n_gpus; i++) {
        const WorkloadGpu *g = &spec->gpus[i];
        int r;
        if (g->vendor && STREQ(g->vendor, "nvidia"))
            r = plan_nvidia(e, p, g, err);
        else if (g->vendor && STREQ(g->vendor, "amd"))
            r = plan_amd(e, p, g, amd++, err);
        else
            r = error_set(err, -EOPNOTSUPP, "a container cannot be given a %s device",
                          strempty(g->vendor));
        if (r < 0)
            return r;
    }
    return 0;
}

/* ---- the driver ---- */

static Engine *engine_of(Driver *d) {
    return (Engine *)d;
}

static void remove_container(Engine *e, const char *name) {
    _cleanup_free_ char *path = strprintf("/containers/%s?force=true", name);
    long status;
    Error ignore = {0};
    if (path)
        (void)http(e, "DELETE", path, NULL, e->timeout_s, NULL, &status, NULL, &ignore);
}

/* A label of a container as the engine's inspect answer gives it, or NULL. */
static const char *inspect_label(json_t *inspect, const char *key) {
    return json_string_value(
            json_object_get(json_object_get(json_object_get(inspect, "Config"), "Labels"), key));
}

/* A create refused because the name is in use: ours already (never started twice: -EEXIST),
 * or a container of another node or made by hand that must not pass for the placed workload
 * (-ENOTUNIQ: the start fails saying so). */
static int name_taken(Engine *e, const char *name, const WorkloadSpec *spec, Error *err) {
    const char *id = spec->id;
    _cleanup_free_ char *path = strprintf("/containers/%s/json", name);
    json_t *j = NULL;
    long status = 0;
    Error e2 = {0};
    const char *req = NULL, *node = NULL, *created = NULL;
    if (path && http(e, "GET", path, NULL, e->timeout_s, NULL, &status, &j, &e2) >= 0 &&
        status < 300) {
        req = inspect_label(j, DRIVER_LABEL);
        node = inspect_label(j, DRIVER_LABEL_NODE);
        created = inspect_label(j, DRIVER_LABEL_CREATED);
    }
    int r = 0;
    if (status < 300 && (!req || STRNEQ(req, id)))
        r = error_set(err, -ENOTUNIQ,
                      "the engine has a container named %s that is not request %s's (made by "
                      "hand?): remove it",
                      name, id);
    else if (status < 300 && spec->created && (!created || STRNEQ(created, spec->created)))
        /* Our labels, but not this request's: one of an earlier request given the same id
         * (a fleet started again on a fresh state), or labels copied by hand. Taken for this
         * one, it would run the old command on the old devices (R17). */
        r = error_set(err, -ENOTUNIQ,
                      "the engine has a container named %s of an earlier request %s (made at %s, "
                      "this one at %s): remove it",
                      name, id, created ? created : "an unknown time", spec->created);
    else if (status < 300 && node && e->node && STRNEQ(node, e->node))
        r = error_set(err, -ENOTUNIQ,
                      "the engine has %s of node %s, not this node %s (two fleets on one engine?)",
                      name, node, e->node);
    else
        r = error_set(err, -EEXIST,
                      "the engine already has %s (request %s): it is not started twice", name, id);
    json_decref(j);
    return r;
}

static int engine_start(Driver *d, const WorkloadSpec *spec, Error *err) {
    Engine *e = engine_of(d);
    if (!driver_id_is_valid(spec->id))
        return error_set(err, -EINVAL, "'%.32s' is not a request id", strempty(spec->id));
    if (isempty(spec->image))
        return error_set(err, -EINVAL,
                         "request %s names no image, and the site has no default image for kind %s",
                         spec->id, strempty(spec->kind));
    char name[64];
    snprintf(name, sizeof(name), DRIVER_NAME_PREFIX "%s", spec->id);
    Plan plan = {0};
    int r = plan_build(e, spec, &plan, err);
    if (r < 0) {
        plan_done(&plan);
        return r;
    }
    EngineGpus g = {.nvidia_ids = (const char *const *)plan.ids,
                    .n_nvidia_ids = plan.n_ids,
                    .cdi_names = (const char *const *)plan.cdi,
                    .n_cdi_names = plan.n_cdi,
                    .devices = plan.devs,
                    .n_devices = plan.n_devs,
                    .env = (const char *const *)plan.env,
                    .n_env = plan.n_env};
    WorkloadSpec mine = *spec;
    mine.node = e->node;
    json_t *body = engine_create_body(e->dialect, &mine, &g);
    plan_done(&plan);
    if (!body)
        return error_set(err, -ENOMEM, "out of memory");
    _cleanup_free_ char *create = e->dialect == ENGINE_LIBPOD
                                          ? strdup("/containers/create")
                                          : strprintf("/containers/create?name=%s", name);
    long status = 0;
    Error e1 = {0};
    r = create ? call_ok(e, "POST", create, body, "The engine refused to create the container",
                         &status, NULL, &e1)
               : -ENOMEM;
    json_decref(body);
    if (r == -EEXIST || (r < 0 && strstr(e1.message, "already in use")))
        return name_taken(e, name, spec, err);
    if (r < 0 && status == 404)
        return error_set(err, -ENOENT,
                         "the image %s is not on the engine (%s): pull or build it there first",
                         spec->image, e1.message);
    if (r < 0 && status == 500 && strstr(e1.message, "image not known"))
        return error_set(err, -ENOENT,
                         "the image %s is not on the engine (%s): pull or build it there first",
                         spec->image, e1.message);
    if (r < 0)
        return error_set(err, r, "%s", e1.message);
    /* An engine may accept a runtime it will not use (Podman 4's APIs do): check before it runs. */
    if (spec->oci_runtime) {
        _cleanup_free_ char *path = strprintf("/containers/%s/json", name);
        json_t *j = NULL;
        WorkloadState st;
        const char *rt = NULL;
        r = path ? call_ok(e, "GET", path, NULL, "Cannot inspect the new container", NULL, &j, err)
                 : -ENOMEM;
        if (r >= 0 && engine_state_from_inspect(j, &st, &rt, err) >= 0 &&
            (!rt || STRNEQ(rt, spec->oci_runtime)))
            r = error_set(
                    err, -EOPNOTSUPP,
                    "the engine does not run OCI runtime %s for this container (it would use %s): "
                    "install and configure %s on the engine, or map the placement's runtime to one "
                    "it has",
                    spec->oci_runtime, rt ? rt : "its default", spec->oci_runtime);
        json_decref(j);
        if (r < 0) {
            remove_container(e, name);
            return r;
        }
    }
    _cleanup_free_ char *start = strprintf("/containers/%s/start", name);
    r = start ? call_ok(e, "POST", start, NULL, "The engine could not start the container", NULL,
                        NULL, err)
              : -ENOMEM;
    if (r < 0)
        remove_container(e, name);
    return r;
}

static int engine_status(Driver *d, const char *id, WorkloadState *ret, Error *err) {
    Engine *e = engine_of(d);
    if (!driver_id_is_valid(id))
        return error_set(err, -EINVAL, "'%.32s' is not a request id", id);
    _cleanup_free_ char *path = strprintf("/containers/" DRIVER_NAME_PREFIX "%s/json", id);
    long status = 0;
    json_t *j = NULL;
    const char *m = NULL;
    /* Podman answers 500 when the container's process exits while it inspects it ("read
     * /proc/PID/cgroup: no such process"): a look a moment later sees the exited state, so
     * an engine error is retried twice before it is the caller's. */
    for (int attempt = 0;; attempt++) {
        int r = path ? http(e, "GET", path, NULL, e->timeout_s, NULL, &status, &j, err) : -ENOMEM;
        if (r < 0)
            return r;
        m = json_string_value(json_object_get(j, "message"));
        if (status < 500 || (m && strstr(m, "no such container")) || attempt == 2)
            break;
        json_decref(j);
        j = NULL;
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    /* Podman answers 500 "no such container" for one removed while it looks it up. */
    if (status == 404 || (status >= 500 && m && strstr(m, "no such container"))) {
        json_decref(j);
        *ret = (WorkloadState){.status = WORKLOAD_ABSENT};
        snprintf(ret->message, sizeof(ret->message), "the engine has no container for request %s",
                 id);
        return 0;
    }
    if (status >= 300) {
        char msg[300];
        engine_error_sentence(j, status, msg, sizeof(msg));
        json_decref(j);
        return error_set(err, -EIO, "cannot inspect the container of request %s: %s", id, msg);
    }
    int r = engine_state_from_inspect(j, ret, NULL, err);
    const char *created = inspect_label(j, DRIVER_LABEL_CREATED);
    if (r >= 0 && created && strspn(created, "0123456789") == strlen(created))
        snprintf(ret->created, sizeof(ret->created), "%.20s", created);
    json_decref(j);
    return r;
}

static int engine_stop(Driver *d, const char *id, unsigned grace_s, Error *err) {
    Engine *e = engine_of(d);
    if (!driver_id_is_valid(id))
        return error_set(err, -EINVAL, "'%.32s' is not a request id", id);
    char name[64];
    snprintf(name, sizeof(name), DRIVER_NAME_PREFIX "%s", id);
    /* The engine sends SIGTERM, then SIGKILL after grace_s; should the engine itself hang,
     * our own deadline passes and the container is killed outright. */
    _cleanup_free_ char *stop = engine_stop_path(e->dialect, name, grace_s);
    long status = 0;
    Error e1 = {0};
    int r = stop ? http(e, "POST", stop, NULL, grace_s + 15, NULL, &status, NULL, &e1) : -ENOMEM;
    if (r == -ETIMEDOUT) {
        _cleanup_free_ char *kill = strprintf("/containers/%s/kill?signal=KILL", name);
        if (kill)
            (void)http(e, "POST", kill, NULL, e->timeout_s, NULL, &status, NULL, &e1);
    } else if (r < 0)
        return error_set(err, r, "%s", e1.message);
    _cleanup_free_ char *rm = strprintf("/containers/%s?force=true", name);
    r = rm ? http(e, "DELETE", rm, NULL, e->timeout_s, NULL, &status, NULL, err) : -ENOMEM;
    if (r < 0)
        return r;
    if (status >= 300 && status != 404)
        return error_set(err, -EIO, "the engine did not remove %s (HTTP %ld)", name, status);
    return 0;
}

static int engine_logs(Driver *d, const char *id, bool follow, FILE *out, Error *err) {
    Engine *e = engine_of(d);
    if (!driver_id_is_valid(id))
        return error_set(err, -EINVAL, "'%.32s' is not a request id", id);
    /* Asked first, so that an engine's error body never reaches out (the logs' stream). */
    _cleanup_free_ char *inspect = strprintf("/containers/" DRIVER_NAME_PREFIX "%s/json", id);
    long status = 0;
    Error ierr = {0};
    json_t *j = NULL;
    int r = inspect ? call_ok(e, "GET", inspect, NULL, "", &status, &j, &ierr) : -ENOMEM;
    if (r == -ENOENT || status == 404)
        return error_set(err, -ENOENT, "the engine has no container for request %s", id);
    if (r < 0)
        return error_set(err, r, "the engine did not give the logs of request %s%s", id,
                         error_message(&ierr));
    /* The name alone is anyone's to take: only the container this driver made for the
     * request (its label, as start checks it) speaks for it. */
    const char *req = inspect_label(j, DRIVER_LABEL);
    bool ours = req && STREQ(req, id);
    json_decref(j);
    if (!ours)
        return error_set(err, -ENOTUNIQ,
                         "the engine's container " DRIVER_NAME_PREFIX
                         "%s is not request %s's (made by hand?): its output is not shown",
                         id, id);
    _cleanup_free_ char *path =
            strprintf("/containers/" DRIVER_NAME_PREFIX "%s/logs?stdout=true&stderr=true%s", id,
                      follow ? "&follow=true" : "");
    r = path ? http(e, "GET", path, NULL, follow ? 0 : e->timeout_s, out, &status, NULL, err)
             : -ENOMEM;
    if (r < 0)
        return r;
    if (status == 404)
        return error_set(err, -ENOENT, "the engine has no container for request %s", id);
    if (status >= 300)
        return error_set(err, -EIO, "the engine did not give the logs of request %s (HTTP %ld)", id,
                         status);
    return 0;
}

static int engine_list(Driver *d, char ***ret_ids, size_t *ret_n, Error *err) {
    Engine *e = engine_of(d);
    json_t *j = NULL;
    int r = call_ok(e, "GET",
                    "/containers/json?all=true&filters=%7B%22label%22%3A%5B%22" DRIVER_LABEL
                    "%22%5D%7D",
                    NULL, "Cannot list the engine's containers", NULL, &j, err);
    if (r < 0)
        return r;
    char **ids = NULL;
    size_t n = 0, i;
    json_t *c;
    json_array_foreach(j, i, c) {
        json_t *labels = json_object_get(c, "Labels");
        const char *id = json_string_value(json_object_get(labels, DRIVER_LABEL)),
                   *node = json_string_value(json_object_get(labels, DRIVER_LABEL_NODE));
        if (node && e->node && STRNEQ(node, e->node))
            continue; /* another node's, on an engine they share: never adopted nor stopped */
        if (id && driver_id_is_valid(id) && push(&ids, &n, strdup(id)) < 0) {
            driver_ids_free(ids, n);
            json_decref(j);
            return error_set(err, -ENOMEM, "out of memory");
        }
    }
    json_decref(j);
    *ret_ids = ids;
    *ret_n = n;
    return 0;
}

static void engine_free(Driver *d) {
    Engine *e = engine_of(d);
    free(e->socket);
    free(e->node);
    free(e->cdi_dirs);
    free(e->dev_root);
    free(e);
}

static const DriverOps engine_ops = {
        .name = "container",
        .start = engine_start,
        .stop = engine_stop,
        .status = engine_status,
        .logs = engine_logs,
        .list = engine_list,
        .free = engine_free,
};

int engine_driver_new(const EngineConfig *cfg, Driver **ret, char *ret_product, size_t size,
                      Error *err) {
    if (isempty(cfg->socket))
        return error_set(err, -EINVAL, "no container engine socket given");
    pthread_once(&curl_once, curl_init_once);
    Engine *e = calloc(1, sizeof(*e));
    if (!e)
        return error_set(err, -ENOMEM, "out of memory");
    e->base.ops = &engine_ops;
    e->socket = strdup(cfg->socket);
    e->cdi_dirs = cfg->cdi_dirs ? strdup(cfg->cdi_dirs) : NULL;
    e->dev_root = strdup(cfg->dev_root ? cfg->dev_root : "/dev");
    e->timeout_s = cfg->api_timeout_s ? cfg->api_timeout_s : 60;
    e->node = cfg->node ? strdup(cfg->node) : NULL;
    if (!e->socket || !e->dev_root || (cfg->cdi_dirs && !e->cdi_dirs) || (cfg->node && !e->node)) {
        engine_free(&e->base);
        return error_set(err, -ENOMEM, "out of memory");
    }
    json_t *v = NULL;
    EngineDialect found;
    char product[96];
    int r = call_ok(e, "GET", "!/version", NULL, "The container engine's /version failed", NULL, &v,
                    err);
    if (r >= 0)
        r = engine_dialect_from_version(v, &found, product, sizeof(product), err);
    json_decref(v);
    if (r < 0) {
        engine_free(&e->base);
        return r;
    }
    e->podman = found == ENGINE_LIBPOD;
    e->dialect = cfg->dialect >= 0 ? (EngineDialect)cfg->dialect : found;
    if (cfg->gpu_mode >= 0)
        e->gpu_mode = (EngineGpuMode)cfg->gpu_mode;
    else if (e->podman) /* Podman's Docker-compatible API takes neither DeviceRequests nor CDI */
        e->gpu_mode = ENGINE_GPU_DEVICES;
    else {
        json_t *info = NULL;
        Error ignore = {0};
        e->gpu_mode = ENGINE_GPU_DEVICE_REQUESTS;
        if (call_ok(e, "GET", "/info", NULL, "info", NULL, &info, &ignore) >= 0 &&
            json_array_size(json_object_get(info, "CDISpecDirs")))
            e->gpu_mode = ENGINE_GPU_CDI;
        json_decref(info);
    }
    snprintf(ret_product, size, "%s, %s API%s%s", product,
             e->dialect == ENGINE_LIBPOD ? "libpod" : "Docker",
             e->dialect == ENGINE_DOCKER ? ", GPUs as " : "",
             e->dialect == ENGINE_DOCKER ? engine_gpu_mode_to_string(e->gpu_mode) : "");
    *ret = &e->base;
    return 0;
}
