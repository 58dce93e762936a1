/* test-node-map.c: what a Kubernetes node means to Einsora (R3, R6, R8), GPU pods, the GPU
 * Operator's convergence, the KubeVirt config and the Pod/VMI of a placement. Pure. */
#include <criterion/criterion.h>
#include <string.h>

#include "config/catalog-yaml.h"
#include "config/pciids.h"
#include "k8s/kubevirt.h"
#include "k8s/node-map.h"
#include "k8s/workloads.h"

static Catalog *cat;

static void load(void) {
    PciIds *ids = NULL;
    Error err = {0};
    cr_assert_eq(pci_ids_load(EINSORA_PCI_IDS_FOR_TESTS, &ids, &err), 0, "%s", err.message);
    cr_assert_eq(catalog_load_file(TEST_DATA "/catalog.yaml", ids, &cat, &err), 0, "%s",
                 err.message);
    pci_ids_free(ids);
}

static void unload(void) {
    catalog_free(cat);
}

TestSuite(node_map, .init = load, .fini = unload);

static json_t *node(const char *mode, const char *product, const char *res, const char *count,
                    bool ready) {
    json_t *labels = json_pack("{s:s}", "nvidia.com/gpu.present", "true");
    if (mode)
        json_object_set_new(labels, "nvidia.com/gpu.workload.config", json_string(mode));
    if (product)
        json_object_set_new(labels, "nvidia.com/gpu.product", json_string(product));
    json_t *alloc = json_pack("{s:s}", "cpu", "64");
    if (res)
        json_object_set_new(alloc, res, json_string(count));
    return json_pack("{s:{s:s, s:o}, s:{s:b}, s:{s:o, s:[{s:s, s:s}]}}", "metadata", "name", "n1",
                     "labels", labels, "spec", "unschedulable", 0, "status", "allocatable", alloc,
                     "conditions", "type", "Ready", "status", ready ? "True" : "False");
}

static const char *class_of(const K8sNodeView *v) {
    return v->class_index >= 0 ? cat->classes[v->class_index].name : "(none)";
}

/* R3: "A missing or unknown label is an error shown to the operator, not a silent default." */
Test(node_map, r3_a_missing_or_unknown_mode_label_is_an_error_not_a_default) {
    K8sNodeView v;
    Error err = {0};
    json_t *n = node("container", "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu", "8", true);
    cr_assert_eq(k8s_node_view(cat, n, &v, &err), 0);
    cr_expect_str_eq(v.mode, "container");
    cr_expect_str_eq(class_of(&v), "nvidia-h100-80gb");
    cr_expect_eq(v.count, 8u);
    cr_expect(v.ready);
    cr_expect_str_eq(v.mode_error, "");
    json_decref(n);
    n = node(NULL, "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu", "8", true);
    cr_assert_eq(k8s_node_view(cat, n, &v, &err), 0);
    cr_expect_str_eq(v.mode, "", "no mode guessed");
    cr_expect(strstr(v.mode_error, "has GPUs and no nvidia.com/gpu.workload.config label"), "%s",
              v.mode_error);
    json_decref(n);
    /* A node without GPUs has no mode to get wrong. */
    n = json_pack("{s:{s:s, s:{}}, s:{s:{s:s}, s:[{s:s, s:s}]}}", "metadata", "name", "cpu1",
                  "labels", "status", "allocatable", "cpu", "64", "conditions", "type", "Ready",
                  "status", "True");
    cr_assert_eq(k8s_node_view(cat, n, &v, &err), 0);
    cr_expect_str_eq(v.mode_error, "");
    json_decref(n);
    n = node("vm-vgpu", "NVIDIA-H100-80GB-HBM3", NULL, NULL, true);
    cr_assert_eq(k8s_node_view(cat, n, &v, &err), 0);
    cr_expect_str_eq(v.mode, "");
    cr_expect(strstr(v.mode_error, "vGPU is not supported"), "%s", v.mode_error);
    json_decref(n);
}

Test(node_map, r6_passthrough_class_from_the_device_name_or_its_pci_id) {
    K8sNodeView v;
    Error err = {0};
    json_t *n = node("vm-passthrough", NULL, "nvidia.com/GH100_H100_SXM5_80GB", "4", true);
    cr_assert_eq(k8s_node_view(cat, n, &v, &err), 0);
    cr_expect_str_eq(class_of(&v), "nvidia-h100-80gb");
    cr_expect_not(v.resource_differs);
    json_decref(n);
    n = node("vm-passthrough", NULL, "nvidia.com/2335", "2",
             true); /* pci.ids has no name: the raw id */
    cr_assert_eq(k8s_node_view(cat, n, &v, &err), 0);
    cr_expect_str_eq(class_of(&v), "nvidia-h200-141gb");
    cr_expect(v.resource_differs, "counted under the name the node advertises (R6)");
    cr_expect_str_eq(v.resource, "nvidia.com/2335");
    json_decref(n);
    /* An older device plugin spells it from an older pci.ids (Debian 12's). */
    n = node("vm-passthrough", "NVIDIA-H100-80GB-HBM3", "nvidia.com/GH100H100_SXM5_80GB", "2",
             false);
    cr_assert_eq(k8s_node_view(cat, n, &v, &err), 0);
    cr_expect_str_eq(class_of(&v), "nvidia-h100-80gb");
    cr_expect(v.resource_differs, "the node's own name differs from the catalog's");
    cr_expect_str_eq(v.resource, "nvidia.com/GH100H100_SXM5_80GB");
    cr_expect_not(v.ready);
    json_decref(n);
    n = node("container", "NVIDIA-Unknown-GPU", "nvidia.com/gpu", "1", true);
    cr_assert_eq(k8s_node_view(cat, n, &v, &err), 0);
    cr_expect_eq(v.class_index, -1, "unclassified, shown (R8)");
    json_t *spec = k8s_node_spec_json(
            cat, &v, &(K8sSite){.site = "dc", .owner = "op", .caps = "kata"}, false);
    cr_expect_eq(json_array_size(json_object_get(spec, "devices")), 1u);
    cr_expect_str_eq(json_string_value(json_array_get(json_object_get(spec, "capabilities"), 1)),
                     "kata");
    /* R2e: a Pod asks for whole nvidia.com/gpu units and the device plugin's time-slicing
     * replicas go to any Pod: a Kubernetes GPU takes one workload, never a shared slice. */
    cr_expect_eq(json_integer_value(json_object_get(spec, "time_slice_replicas")), 1);
    json_decref(spec);
    json_decref(n);
}

Test(node_map, r2c_mixed_strategy_mig_slices_are_laid_out_on_the_mig_gpus) {
    K8sNodeView v;
    Error err = {0};
    json_t *n = node("container", "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu", "1", true);
    json_t *md = json_object_get(n, "metadata"),
           *alloc = json_object_get(json_object_get(n, "status"), "allocatable");
    json_object_set_new(json_object_get(md, "labels"), "nvidia.com/gpu.count", json_string("3"));
    json_object_set_new(alloc, "nvidia.com/mig-1g.10gb", json_string("7"));
    json_object_set_new(alloc, "nvidia.com/mig-3g.40gb", json_string("2"));
    cr_assert_eq(k8s_node_view(cat, n, &v, &err), 0);
    cr_expect_eq(v.count, 1u, "one whole GPU");
    cr_expect_eq(v.n_mig_gpus, 2u);
    cr_expect_not(v.mig_unplaced);
    json_t *spec = k8s_node_spec_json(cat, &v, &(K8sSite){.site = "dc", .owner = "op"}, false);
    json_t *devs = json_object_get(spec, "devices");
    cr_assert_eq(json_array_size(devs), 3u);
    json_t *a = json_array_get(devs, 1), *b = json_array_get(devs, 2);
    cr_expect(json_is_true(json_object_get(a, "mig_enabled")));
    cr_expect_eq(json_array_size(json_object_get(a, "mig")), 2u,
                 "the two 3g slices share a GPU (slots 0 and 4)");
    cr_expect_eq(json_integer_value(
                         json_object_get(json_array_get(json_object_get(a, "mig"), 1), "start")),
                 4);
    cr_expect_eq(json_array_size(json_object_get(b, "mig")), 7u, "seven 1g slices fill the other");
    json_decref(spec);
    /* more slices than the labelled GPUs hold: said, not invented */
    json_object_set_new(alloc, "nvidia.com/mig-7g.80gb", json_string("1"));
    cr_assert_eq(k8s_node_view(cat, n, &v, &err), 0);
    cr_expect(v.mig_unplaced);
    json_decref(n);
}

Test(node_map, r4_converged_needs_old_gone_new_counted_and_ready) {
    char why[200];
    json_t *n = node("vm-passthrough", NULL, "nvidia.com/gpu", "8", true);
    cr_expect_not(k8s_node_converged(n, "vm-passthrough", NULL, 8, why, sizeof(why)));
    cr_expect(strstr(why, "old GPU resource nvidia.com/gpu"), "%s", why);
    json_decref(n);
    n = node("vm-passthrough", NULL, "nvidia.com/GH100_H100_SXM5_80GB", "6", true);
    cr_expect_not(k8s_node_converged(n, "vm-passthrough", NULL, 8, why, sizeof(why)));
    cr_expect(strstr(why, "6 of 8"), "%s", why);
    json_decref(n);
    n = node("vm-passthrough", NULL, "nvidia.com/GH100_H100_SXM5_80GB", "8", false);
    cr_expect_not(k8s_node_converged(n, "vm-passthrough", NULL, 8, why, sizeof(why)));
    cr_expect(strstr(why, "not Ready"), "%s", why);
    json_decref(n);
    n = node("container", NULL, "nvidia.com/gpu", "8", true);
    cr_expect(k8s_node_converged(n, "container", NULL, 8, why, sizeof(why)));
    json_decref(n);
}

Test(node_map, r4_gpu_pods_are_those_asking_nvidia_resources) {
    json_t *gpu = json_pack("{s:{s:[{s:{s:{s:s}}}]}}", "spec", "containers", "resources", "limits",
                            "nvidia.com/gpu", "1");
    json_t *mig = json_pack("{s:{s:[{s:{s:{s:i}}}]}}", "spec", "initContainers", "resources",
                            "requests", "nvidia.com/mig-1g.10gb", 1);
    json_t *cpu = json_pack("{s:{s:[{s:{s:{s:s}}}]}}", "spec", "containers", "resources", "limits",
                            "cpu", "2");
    json_t *done = json_pack("{s:{s:[{s:{s:{s:s}}}]}, s:{s:s}}", "spec", "containers", "resources",
                             "limits", "nvidia.com/gpu", "1", "status", "phase", "Succeeded");
    cr_expect(k8s_pod_holds_gpu(gpu));
    cr_expect(k8s_pod_holds_gpu(mig));
    cr_expect_not(k8s_pod_holds_gpu(cpu));
    cr_expect_not(k8s_pod_holds_gpu(done), "a finished pod holds nothing");
    json_decref(gpu), json_decref(mig), json_decref(cpu), json_decref(done);
}

Test(node_map, r6_kubevirt_permitted_host_devices_from_the_catalog) {
    json_t *p = k8s_permitted_host_devices(cat);
    size_t i;
    json_t *d;
    bool h100 = false, mig = false;
    json_array_foreach(json_object_get(p, "pciHostDevices"), i, d) {
        const char *sel = json_string_value(json_object_get(d, "pciVendorSelector"));
        const char *res = json_string_value(json_object_get(d, "resourceName"));
        h100 = h100 || (strcmp(sel, "10DE:2330") == 0 &&
                        strcmp(res, "nvidia.com/GH100_H100_SXM5_80GB") == 0);
        mig = mig || strstr(res, "mig-");
        cr_expect(json_is_true(json_object_get(d, "externalResourceProvider")));
    }
    cr_expect(h100);
    cr_expect_not(mig, "MIG slices are never passed through");
    json_decref(p);
}

Test(node_map, r17_manifests_of_placements) {
    K8sWorkloadSite site = {.namespace_ = "ns",
                            .pod_image = "img",
                            .vm_image = "disk",
                            .kata_runtime_class = "kata-gpu"};
    json_t *nb = json_pack("{s:i, s:s, s:s, s:s, s:{s:s, s:s, s:s, s:s, s:[i,i]}}", "id", 7, "user",
                           "Alice@corp", "kind", "notebook", "state", "placed", "placement", "node",
                           "gpu-b", "class", "nvidia-h100-80gb", "method", "container",
                           "container_runtime", "kata", "devices", 0, 1);
    json_t *pod = k8s_workload_manifest(cat, &site, nb, "nvidia.com/GH100H100_SXM5_80GB");
    cr_assert_not_null(pod);
    json_t *spec = json_object_get(pod, "spec");
    cr_expect_str_eq(json_string_value(json_object_get(spec, "nodeName")), "gpu-b");
    cr_expect_str_eq(json_string_value(json_object_get(spec, "runtimeClassName")), "kata-gpu");
    json_t *limits = json_object_get(
            json_object_get(json_array_get(json_object_get(spec, "containers"), 0), "resources"),
            "limits");
    cr_expect_str_eq(json_string_value(json_object_get(limits, "nvidia.com/GH100H100_SXM5_80GB")),
                     "2");
    json_t *labels = json_object_get(json_object_get(pod, "metadata"), "labels");
    cr_expect_str_eq(json_string_value(json_object_get(labels, "einsora.io/user")), "Alice_corp");
    cr_expect_str_eq(json_string_value(json_object_get(labels, K8S_LABEL_REQUEST)), "7");
    json_decref(pod);
    json_decref(nb);
    json_t *slice = json_pack("{s:i, s:s, s:s, s:{s:s, s:s, s:s, s:s, s:[i]}}", "id", 8, "user",
                              "bob", "kind", "endpoint", "placement", "node", "gpu-a", "class",
                              "nvidia-h100-80gb-mig-1g.10gb", "method", "mig", "container_runtime",
                              "runc", "devices", 3);
    pod = k8s_workload_manifest(cat, &site, slice, "nvidia.com/gpu");
    limits = json_object_get(
            json_object_get(
                    json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0),
                    "resources"),
            "limits");
    cr_expect_str_eq(json_string_value(json_object_get(limits, "nvidia.com/mig-1g.10gb")), "1");
    json_decref(pod);
    json_decref(slice);
    json_t *vm = json_pack("{s:i, s:s, s:s, s:{s:s, s:s, s:s, s:[i]}}", "id", 9, "user", "carol",
                           "kind", "vm", "placement", "node", "gpu-d", "class", "nvidia-h100-80gb",
                           "method", "passthrough", "devices", 0);
    json_t *vmi = k8s_workload_manifest(cat, &site, vm, "nvidia.com/GH100_H100_SXM5_80GB");
    cr_assert_not_null(vmi);
    cr_expect_str_eq(json_string_value(json_object_get(vmi, "kind")), "VirtualMachineInstance");
    json_t *gpus = json_object_get(
            json_object_get(json_object_get(json_object_get(vmi, "spec"), "domain"), "devices"),
            "gpus");
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(gpus, 0), "deviceName")),
                     "nvidia.com/GH100_H100_SXM5_80GB");
    json_decref(vmi);
    json_decref(vm);
    /* R11, R17: a cpu VM placed on a Kubernetes node is a VMI with its cores and no GPU. */
    vm = json_pack("{s:i, s:s, s:s, s:{s:s, s:s, s:s, s:i}}", "id", 10, "user", "carol", "kind",
                   "vm", "placement", "node", "gpu-e", "class", "cpu", "method", "cpu", "cpu_cores",
                   8);
    vmi = k8s_workload_manifest(cat, &site, vm, NULL);
    cr_assert_not_null(vmi, "a cpu VM is a workload too");
    json_t *domain = json_object_get(json_object_get(vmi, "spec"), "domain");
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(domain, "cpu"), "cores")), 8);
    cr_expect_null(json_object_get(json_object_get(domain, "devices"), "gpus"));
    json_decref(vmi);
    json_decref(vm);
}

/* R17, R14: the Pod runs the workload the request asked for - its image, command, env and
 * ports, an endpoint's model as EINSORA_MODEL, the port its server listens on - and a cpu
 * placement's Pod is told to see no GPU whatever its env says. */
Test(node_map, r17_a_pod_runs_the_requests_image_command_env_model_and_ports) {
    K8sWorkloadSite site = {.namespace_ = "ns",
                            .pod_image = "img",
                            .vm_image = "disk",
                            .kata_runtime_class = "kata-gpu"};
    json_t *ep = json_pack(
            "{s:i, s:s, s:s, s:{s:s, s:s, s:s, s:s, s:[i]}, s:{s:s, s:[s,s], s:[s,s], s:s}}", "id",
            11, "user", "alice", "kind", "endpoint", "placement", "node", "gpu-a", "class",
            "nvidia-h100-80gb", "method", "container", "endpoint_runtime", "vllm", "devices", 0,
            "request", "image", "vllm/vllm-openai:v0.6.3", "command", "serve", "--x", "env",
            "HF_TOKEN=x=y", "A=", "model", "meta-llama/Llama-3.1-8B");
    json_t *pod = k8s_workload_manifest(cat, &site, ep, "nvidia.com/gpu");
    cr_assert_not_null(pod);
    json_t *c = json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(c, "image")), "vllm/vllm-openai:v0.6.3");
    char *text = json_dumps(json_object_get(c, "command"), JSON_COMPACT);
    cr_expect_str_eq(text, "[\"serve\",\"--x\"]");
    free(text);
    text = json_dumps(json_object_get(c, "env"), JSON_COMPACT | JSON_SORT_KEYS);
    cr_expect_str_eq(text,
                     "[{\"name\":\"HF_TOKEN\",\"value\":\"x=y\"},{\"name\":\"A\",\"value\":\"\"},"
                     "{\"name\":\"EINSORA_MODEL\",\"value\":\"meta-llama/Llama-3.1-8B\"}]");
    free(text);
    json_t *port = json_array_get(json_object_get(c, "ports"), 0);
    cr_expect_eq(json_integer_value(json_object_get(port, "containerPort")), 8000, "vLLM's port");
    json_decref(pod);
    json_decref(ep);

    json_t *cpu = json_pack("{s:i, s:s, s:s, s:{s:s, s:s, s:s, s:i}, s:{s:[s], s:[i]}}", "id", 12,
                            "user", "bob", "kind", "container", "placement", "node", "gpu-a",
                            "class", "cpu", "method", "cpu", "cpu_cores", 2, "request", "env",
                            "NVIDIA_VISIBLE_DEVICES=all", "ports", 9000);
    pod = k8s_workload_manifest(cat, &site, cpu, NULL);
    cr_assert_not_null(pod);
    c = json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(c, "image")), "img", "the site's image");
    text = json_dumps(json_object_get(c, "env"), JSON_COMPACT | JSON_SORT_KEYS);
    cr_expect_str_eq(text, "[{\"name\":\"NVIDIA_VISIBLE_DEVICES\",\"value\":\"void\"}]");
    free(text);
    port = json_array_get(json_object_get(c, "ports"), 0);
    cr_expect_eq(json_integer_value(json_object_get(port, "containerPort")), 9000);
    json_decref(pod);
    json_decref(cpu);
}

/* R11: every machine offers cpu; a Kubernetes node's whole allocatable cores (millicores
 * rounded down), and none from a quantity this does not read. */
Test(node_map, r11_a_kubernetes_node_offers_its_allocatable_cores_as_cpu) {
    static const struct {
        const char *q;
        unsigned cores;
    } cases[] = {{"64", 64}, {"63500m", 63}, {"999m", 0}, {"1.5", 0}, {"", 0}, {"12Ki", 0}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *n = node("container", "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu", "8", true);
        json_object_set_new(json_object_get(json_object_get(n, "status"), "allocatable"), "cpu",
                            json_string(cases[i].q));
        K8sNodeView v;
        Error err = {0};
        cr_assert_eq(k8s_node_view(cat, n, &v, &err), 0, "%s", err.message);
        cr_expect_eq(v.cpus, cases[i].cores, "'%s'", cases[i].q);
        json_t *spec = k8s_node_spec_json(cat, &v, &(K8sSite){.site = "dc", .owner = "op"}, false);
        cr_expect_eq(json_integer_value(json_object_get(spec, "cpus")), (json_int_t)cases[i].cores,
                     "'%s'", cases[i].q);
        json_decref(spec);
        json_decref(n);
    }
}
