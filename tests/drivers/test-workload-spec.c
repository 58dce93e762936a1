/* test-workload-spec.c: the workload on a request (image, command), the agent's end report,
 * and how the agent turns a pushed placement into a driver's spec (R17): the allocated GPUs'
 * UUIDs and render nodes from its inventory, the site's default image, the runtime names. Bad
 * input of each kind is refused with a sentence. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <limits.h>
#include <errno.h>
#include <string.h>

#include "agent/workloads.h"
#include "drivers/engine-body.h"
#include "wire/request.h"
#include "server/workload-end.h"

Test(workload_spec, r17_request_carries_image_and_command) {
    ApiRequest r;
    Error err = {0};
    const char *ok = "{\"kind\":\"container\",\"class\":\"cpu\",\"image\":\"localhost/"
                     "x:1\",\"command\":[\"sh\",\"-c\",\"echo hi\"],"
                     "\"env\":[\"A=1\"]}";
    cr_assert_eq(api_request_parse(ok, strlen(ok), &r, &err), 0, "%s", error_message(&err));
    cr_assert_str_eq(r.image, "localhost/x:1");
    json_t *j = api_request_to_json(&r);
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(j, "command"), 2)),
                     "echo hi");
    cr_assert_str_eq(json_string_value(json_object_get(j, "image")), "localhost/x:1");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(j, "env"), 0)), "A=1");
    json_decref(j);
    const char *bad[] = {
            "{\"kind\":\"container\",\"class\":\"cpu\",\"command\":\"sh -c x\"}",
            "{\"kind\":\"container\",\"class\":\"cpu\",\"command\":[]}",
            "{\"kind\":\"container\",\"class\":\"cpu\",\"command\":[1]}",
            "{\"kind\":\"container\",\"class\":\"cpu\",\"image\":7}",
            "{\"kind\":\"container\",\"class\":\"cpu\",\"env\":[\"NOEQUALS\"]}",
            "{\"kind\":\"container\",\"class\":\"cpu\",\"model\":\"llama\"}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        Error e = {0};
        cr_assert_lt(api_request_parse(bad[i], strlen(bad[i]), &r, &e), 0, "case %zu", i);
        cr_assert(strstr(e.message, "'command'") || strstr(e.message, "'image'") ||
                          strstr(e.message, "'env'") || strstr(e.message, "'model'"),
                  "case %zu: %s", i, e.message);
    }
}

Test(workload_spec, r17_workload_end_bodies) {
    WorkloadEnd e;
    Error err = {0};
    char reason[300];
    cr_assert_eq(workload_end_parse("{\"exit_code\":3}", 15, &e, &err), 0);
    workload_end_reason(&e, reason, sizeof(reason));
    cr_assert_str_eq(reason, "exited with code 3");
    const char *f = "{\"failed\":true,\"message\":\"no such image\"}";
    cr_assert_eq(workload_end_parse(f, strlen(f), &e, &err), 0);
    workload_end_reason(&e, reason, sizeof(reason));
    cr_assert_str_eq(reason, "failed: no such image");
    /* The longest message with a character where the request's reason (256 bytes) ends: cut
     * before it, never inside (a reason that is not UTF-8 is dropped by every JSON writer). */
    WorkloadEnd longest = {.has_exit_code = true, .exit_code = 7};
    memset(longest.message, 'a', 233);
    strcpy(longest.message + 233, "\xe2\x82\xac\xe2\x82\xac");
    char cut[256];
    workload_end_reason(&longest, cut, sizeof(cut));
    cr_assert_eq(strlen(cut), 255, "cut, then '...': %zu", strlen(cut));
    cr_assert_str_eq(cut + strlen(cut) - 3, "...");
    const char *bad[] = {
            "{}",
            "{\"exit_code\":256}",
            "{\"exit_code\":-1}",
            "{\"failed\":1}",
            "{\"x\":1}",
            "[",
            "[]",
            "{\"exit_code\":0,\"failed\":true}" /* it ran, or it could not: not both */};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        Error e2 = {0};
        cr_assert_eq(workload_end_parse(bad[i], strlen(bad[i]), &e, &e2), -EINVAL, "case %zu", i);
        cr_assert(e2.message[0], "case %zu says why", i);
    }
}

Test(workload_spec, r17_activation_url_is_checked) {
    char url[WORKLOAD_URL_MAX];
    Error err = {0};
    cr_assert_eq(workload_activate_parse("", 0, url, &err), 0);
    cr_assert_str_eq(url, "", "no body: no URL");
    const char *ok = "{\"url\":\"http://lab-h100:46767/v1\"}";
    cr_assert_eq(workload_activate_parse(ok, strlen(ok), url, &err), 0);
    cr_assert_str_eq(url, "http://lab-h100:46767/v1");
    const char *bad[] = {"{\"url\":\"ftp://x\"}",    "{\"url\":\"http://\"}",
                         "{\"url\":\"http://a b\"}", "{\"url\":1}",
                         "{\"uri\":\"http://x\"}",   "[]"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        Error e = {0};
        cr_assert_eq(workload_activate_parse(bad[i], strlen(bad[i]), url, &e), -EINVAL, "case %zu",
                     i);
        cr_assert(e.message[0], "case %zu says why", i);
    }
}

Test(workload_spec, r17_notebook_and_endpoint_urls) {
    AgentWorkloadConfig cfg = {.address = "lab-h100"};
    char url[200];
    json_t *nb = json_pack("{s:s, s:{s:s}}", "kind", "notebook", "placement", "endpoint_runtime",
                           "none");
    json_t *ep = json_pack("{s:s, s:{s:s}}", "kind", "endpoint", "placement", "endpoint_runtime",
                           "vllm");
    json_t *vm = json_pack("{s:s, s:{s:s}}", "kind", "vm", "placement", "endpoint_runtime", "none");
    cr_assert_eq(agent_work_port(nb), 8888);
    cr_assert_eq(agent_work_port(ep), 8000);
    cr_assert_eq(agent_work_port(vm), 0);
    agent_work_url(&cfg, nb, 40001, url, sizeof(url));
    cr_assert_str_eq(url, "http://lab-h100:40001/");
    agent_work_url(&cfg, ep, 40002, url, sizeof(url));
    cr_assert_str_eq(url, "http://lab-h100:40002/v1", "an endpoint's OpenAI-compatible base URL");
    agent_work_url(&cfg, vm, 40003, url, sizeof(url));
    cr_assert_str_eq(url, "");
    agent_work_url(&cfg, nb, 0, url, sizeof(url));
    cr_assert_str_eq(url, "", "no published port: no URL");
    json_decref(nb);
    json_decref(ep);
    json_decref(vm);
}

Test(workload_spec, r17_agent_maps_are_checked) {
    char v[64];
    cr_assert(agent_map_get("notebook=a:1,container=b:2", "container", v, sizeof(v)));
    cr_assert_str_eq(v, "b:2");
    cr_assert(!agent_map_get("notebook=a:1", "vm", v, sizeof(v)));
    Error err = {0};
    cr_assert_eq(agent_map_check("notebook=a,vm=/d,endpoint-llama.cpp=l", "--images",
                                 agent_image_keys, &err),
                 0);
    cr_assert_eq(agent_map_check("notebook", "--images", agent_image_keys, &err), -EINVAL);
    cr_assert(strstr(err.message, "is not KEY=VALUE"), "%s", err.message);
    Error e2 = {0};
    cr_assert_eq(agent_map_check("kata=a,kata=b", "--runtimes", agent_runtime_keys, &e2), -EINVAL);
    cr_assert(strstr(e2.message, "given twice"), "%s", e2.message);
    Error e3 = {0};
    cr_assert_eq(agent_map_check("notebok=x", "--images", agent_image_keys, &e3), -EINVAL);
    cr_assert(strstr(e3.message, "'notebok' is not a key it takes (notebook, endpoint"), "%s",
              e3.message);
}

/* A machine with one NVIDIA GPU (UUID known), one without NVML data, and one AMD card. */
static MachineInventory *inventory(void) {
    static char *files[] = {"/dev/kfd", "/dev/dri/renderD129"};
    static GroupPeer group[] = {{.bdf = "0000:3b:00.1", .kind = "audio"},
                                {.bdf = "0000:3a:00.0", .kind = "bridge"}};
    static Accelerator acc[4] = {
            {.vendor = VENDOR_NVIDIA,
             .bdf = "0000:3b:00.0",
             .uuid = "GPU-aaaa",
             .group = group,
             .n_group = 2},
            {.vendor = VENDOR_NVIDIA, .bdf = "0000:5e:00.0"},
            {.vendor = VENDOR_AMD,
             .bdf = "0000:c1:00.0",
             .device_files = files,
             .n_device_files = 2},
            /* a passthrough node's GPU: on vfio-pci, no NVML UUID */
            {.vendor = VENDOR_NVIDIA,
             .bdf = "0000:db:00.0",
             .driver = "vfio-pci",
             .iommu_group = 45},
    };
    static MachineInventory inv = {.accelerators = acc, .n_accelerators = 4};
    return &inv;
}

static json_t *work(const char *kind, const char *method, const char *runtime, const char *addr,
                    const char *req) {
    char text[1024];
    snprintf(
            text, sizeof(text),
            "{\"id\":42,\"kind\":\"%s\",\"state\":\"placed\",\"request\":%s,\"placement\":{"
            "\"method\":\"%s\","
            "\"container_runtime\":\"%s\",\"addresses\":[\"%s\"],\"memory_gb\":8,\"cpu_cores\":4}}",
            kind, req, method, runtime, addr);
    json_t *j = json_loads(text, 0, NULL);
    cr_assert(j, "%s", text);
    return j;
}

Test(workload_spec, r17_placement_becomes_the_drivers_spec) {
    AgentWorkloadConfig cfg = {.images = "notebook=nb:1,vm=/disks/u.qcow2",
                               .runtimes = "kata=kata-runtime"};
    AgentSpecBuf buf;
    WorkloadSpec s;
    Error err = {0};
    json_t *w = work("notebook", "container", "kata", "0000:3b:00.0", "{}");
    cr_assert_eq(agent_work_spec(&cfg, w, inventory(), &buf, &s, &err), 0, "%s",
                 error_message(&err));
    cr_assert_str_eq(s.id, "42");
    cr_assert_str_eq(s.image, "nb:1", "the site's default image for the kind");
    cr_assert_str_eq(s.oci_runtime, "kata-runtime");
    cr_assert_eq(s.n_gpus, 1);
    cr_assert_str_eq(s.gpus[0].uuid, "GPU-aaaa");
    cr_assert_null(s.command);
    json_decref(w);
    w = work("endpoint", "container", "runc", "0000:c1:00.0",
             "{\"image\":\"mine:2\",\"command\":[\"rocminfo\"],\"env\":[\"A=1\"],\"model\":\"llama-"
             "3\"}");
    cr_assert_eq(agent_work_spec(&cfg, w, inventory(), &buf, &s, &err), 0, "%s",
                 error_message(&err));
    cr_assert_str_eq(s.image, "mine:2");
    cr_assert_str_eq(s.command[0], "rocminfo");
    cr_assert_str_eq(s.env[0], "A=1");
    cr_assert_str_eq(s.env[1], "EINSORA_MODEL=llama-3", "the endpoint's model reaches its server");
    cr_assert_null(s.env[2]);
    cr_assert_null(s.oci_runtime, "runc: the engine's default");
    cr_assert_str_eq(s.gpus[0].render_node, "/dev/dri/renderD129");
    json_decref(w);
    w = work("vm", "passthrough", "none", "0000:3b:00.0", "{}");
    cr_assert_eq(agent_work_spec(&cfg, w, inventory(), &buf, &s, &err), 0, "%s",
                 error_message(&err));
    cr_assert_str_eq(s.image, "/disks/u.qcow2");
    cr_assert_eq(s.gpus[0].n_group, 1, "the audio function goes along, the bridge stays");
    cr_assert_str_eq(s.gpus[0].group[0], "0000:3b:00.1");
    cr_assert_eq(s.memory_mb, 8192);
    cr_assert_eq(s.vcpus, 4);
    json_decref(w);
}

/* R2b: a stranger's container on a passthrough GPU runs under Kata, which takes the GPU into its
 * VM over VFIO: the spec hands it the GPU's VFIO group, never a host driver's device (a GPU on
 * vfio-pci has none, nor an NVML UUID). Any other runtime cannot take such a GPU: said. */
Test(workload_spec, r2b_a_kata_container_gets_its_vfio_gpu_by_its_iommu_group) {
    AgentWorkloadConfig cfg = {.images = "container=c:1", .runtimes = "kata=kata-runtime"};
    AgentSpecBuf buf;
    WorkloadSpec s;
    Error err = {0};
    json_t *w = work("container", "container", "kata", "0000:db:00.0", "{}");
    cr_assert_eq(agent_work_spec(&cfg, w, inventory(), &buf, &s, &err), 0, "%s",
                 error_message(&err));
    cr_assert_eq(s.n_gpus, 1);
    cr_expect(s.gpus[0].vfio);
    cr_expect_eq(s.gpus[0].iommu_group, 45);
    cr_expect_null(s.gpus[0].uuid);
    cr_expect_str_eq(s.oci_runtime, "kata-runtime");
    json_decref(w);
    w = work("container", "container", "runc", "0000:db:00.0", "{}");
    cr_expect_eq(agent_work_spec(&cfg, w, inventory(), &buf, &s, &err), -EPERM);
    cr_expect(strstr(err.message, "only a Kata container"), "%s", err.message);
    json_decref(w);
}

/* R15, R17: a MIG slice's placement never hands its workload the whole GPU: the spec leaves
 * the device for the slice's own MIG device (the agent makes it, agent-mig.c), and an engine
 * refuses a GPU without one. */
Test(workload_spec, r15_a_mig_slice_never_gets_the_whole_gpus_uuid) {
    AgentWorkloadConfig cfg = {.images = "container=c:1"};
    AgentSpecBuf buf;
    WorkloadSpec s;
    Error err = {0};
    json_t *w = work("container", "mig", "runc", "0000:3b:00.0", "{}");
    cr_assert_eq(agent_work_spec(&cfg, w, inventory(), &buf, &s, &err), 0, "%s",
                 error_message(&err));
    cr_assert_eq(s.n_gpus, 1);
    cr_expect_null(s.gpus[0].uuid, "not GPU-aaaa, the whole GPU");
    json_decref(w);
}

/* R17: a VM request names its disk among the site's images, never by a path: the agent runs
 * as root, so a path would hand any host file or block device to the guest, writable. */
Test(workload_spec, r17_a_vm_request_names_a_site_image_never_a_host_path) {
    char dir[] = "/tmp/einsora-vm-images-XXXXXX", path[PATH_MAX];
    cr_assert(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/ubuntu.qcow2", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fclose(f);
    AgentWorkloadConfig cfg = {.images = "vm=/disks/u.qcow2", .vm_image_dir = dir};
    AgentSpecBuf buf;
    WorkloadSpec s;
    Error err = {0};
    json_t *w = work("vm", "passthrough", "none", "0000:3b:00.0", "{\"image\":\"ubuntu.qcow2\"}");
    cr_assert_eq(agent_work_spec(&cfg, w, inventory(), &buf, &s, &err), 0, "%s",
                 error_message(&err));
    cr_assert_str_eq(s.image, path);
    json_decref(w);
    static const char *const refused[][2] = {
            {"/dev/sda", "not '/dev/sda'"},
            {"../etc/shadow", "not '../etc/shadow'"},
            {".hidden", "not '.hidden'"},
            {"missing.qcow2", "no VM image 'missing.qcow2'"},
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        char req[128];
        snprintf(req, sizeof(req), "{\"image\":\"%s\"}", refused[i][0]);
        w = work("vm", "passthrough", "none", "0000:3b:00.0", req);
        Error e = {0};
        cr_expect_lt(agent_work_spec(&cfg, w, inventory(), &buf, &s, &e), 0, "%s", req);
        cr_expect(strstr(e.message, refused[i][1]), "%s: %s", req, e.message);
        json_decref(w);
    }
    /* Without --vm-image-dir: the folder of the default disk. */
    snprintf(path, sizeof(path), "vm=%s/default.qcow2", dir);
    AgentWorkloadConfig by_default = {.images = path};
    w = work("vm", "passthrough", "none", "0000:3b:00.0", "{\"image\":\"ubuntu.qcow2\"}");
    cr_assert_eq(agent_work_spec(&by_default, w, inventory(), &buf, &s, &err), 0, "%s",
                 error_message(&err));
    cr_assert(strstr(s.image, "/ubuntu.qcow2") && !strncmp(s.image, dir, strlen(dir)), "%s",
              s.image);
    json_decref(w);
    snprintf(path, sizeof(path), "%s/ubuntu.qcow2", dir);
    unlink(path);
    rmdir(dir);
}

/* R14: an endpoint runs its placement's runtime, so the site's default image is the one for
 * that runtime when the site names one; R17: a cpu placement's container gets its cores and no
 * more (a GPU placement's is not limited here). */
/* R17: a container placed on cpu sees no GPU whatever its request's env says: on an engine
 * whose default runtime is NVIDIA's, NVIDIA_VISIBLE_DEVICES=all would hand it every GPU. */
Test(workload_spec, r17_a_cpu_container_is_told_to_see_no_gpu) {
    AgentWorkloadConfig cfg = {.images = "container=c:1"};
    AgentSpecBuf buf;
    WorkloadSpec s;
    Error err = {0};
    json_t *w = json_loads("{\"id\":6,\"kind\":\"container\",\"request\":{\"env\":["
                           "\"NVIDIA_VISIBLE_DEVICES=all\",\"A=1\",\"CUDA_VISIBLE_DEVICES=0\"]},"
                           "\"placement\":{\"method\":\"cpu\",\"container_runtime\":\"runc\","
                           "\"cpu_cores\":2}}",
                           0, NULL);
    cr_assert(w);
    cr_assert_eq(agent_work_spec(&cfg, w, inventory(), &buf, &s, &err), 0, "%s",
                 error_message(&err));
    bool void_seen = false, a_seen = false;
    for (size_t i = 0; s.env && s.env[i]; i++) {
        cr_expect(strcmp(s.env[i], "NVIDIA_VISIBLE_DEVICES=all") != 0, "the request's all stays");
        cr_expect(strcmp(s.env[i], "CUDA_VISIBLE_DEVICES=0") != 0);
        void_seen = void_seen || !strcmp(s.env[i], "NVIDIA_VISIBLE_DEVICES=void");
        a_seen = a_seen || !strcmp(s.env[i], "A=1");
    }
    cr_expect(void_seen && a_seen, "void in, the rest of the env kept");
    json_decref(w);
}

Test(workload_spec, r14_an_endpoints_default_image_follows_its_runtime_and_cpu_cores_are_a_limit) {
    AgentWorkloadConfig cfg = {.images = "endpoint=vllm:1,endpoint-llama.cpp=llama:1"};
    AgentSpecBuf buf;
    WorkloadSpec s;
    Error err = {0};
    json_t *w = json_loads("{\"id\":5,\"kind\":\"endpoint\",\"request\":{},\"placement\":{"
                           "\"method\":\"cpu\",\"endpoint_runtime\":\"llama.cpp\","
                           "\"container_runtime\":\"runc\",\"cpu_cores\":3}}",
                           0, NULL);
    cr_assert(w);
    cr_assert_eq(agent_work_spec(&cfg, w, inventory(), &buf, &s, &err), 0, "%s",
                 error_message(&err));
    cr_assert_str_eq(s.image, "llama:1", "llama.cpp on cpu");
    cr_assert_eq(s.cpu_limit, 3, "its cores");
    json_t *body = engine_create_body(ENGINE_DOCKER, &s, &(EngineGpus){0});
    cr_assert_eq(
            json_integer_value(json_object_get(json_object_get(body, "HostConfig"), "NanoCpus")),
            3000000000LL);
    json_decref(body);
    body = engine_create_body(ENGINE_LIBPOD, &s, &(EngineGpus){0});
    json_t *cpu = json_object_get(json_object_get(body, "resource_limits"), "cpu");
    cr_assert_eq(json_integer_value(json_object_get(cpu, "quota")), 300000);
    cr_assert_eq(json_integer_value(json_object_get(cpu, "period")), 100000);
    json_decref(body);
    json_decref(w);
    w = json_loads("{\"id\":6,\"kind\":\"endpoint\",\"request\":{},\"placement\":{"
                   "\"method\":\"container\",\"endpoint_runtime\":\"vllm\","
                   "\"container_runtime\":\"runc\",\"addresses\":[\"0000:3b:00.0\"]}}",
                   0, NULL);
    cr_assert_eq(agent_work_spec(&cfg, w, inventory(), &buf, &s, &err), 0, "%s",
                 error_message(&err));
    cr_assert_str_eq(s.image, "vllm:1", "no endpoint-vllm image: the endpoint one");
    cr_assert_eq(s.cpu_limit, 0);
    json_decref(w);
}

Test(workload_spec, r17_placement_the_agent_cannot_run_is_said_clearly) {
    AgentWorkloadConfig cfg = {.images = "notebook=nb:1"};
    AgentSpecBuf buf;
    WorkloadSpec s;
    struct {
        const char *kind, *method, *runtime, *addr, *words;
    } cases[] = {
            {"endpoint", "container", "runc", "0000:3b:00.0", "no default endpoint image"},
            {"notebook", "container", "kata", "0000:3b:00.0", "maps no engine runtime"},
            {"notebook", "container", "runc", "0000:99:00.0", "not in this machine's inventory"},
            {"notebook", "container", "runc", "0000:5e:00.0", "has no UUID"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *w = work(cases[i].kind, cases[i].method, cases[i].runtime, cases[i].addr, "{}");
        Error err = {0};
        cr_assert_lt(agent_work_spec(&cfg, w, inventory(), &buf, &s, &err), 0, "case %zu", i);
        cr_assert(strstr(err.message, cases[i].words), "case %zu: %s", i, err.message);
        json_decref(w);
    }
}
