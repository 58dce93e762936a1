/* test-wire.c: every wire shape survives decode(encode(x)) == x, and the strict decoder
 * refuses what is not its shape with a sentence naming the field. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire/decode.h"
#include "wire/event.h"
#include "wire/fleet.h"
#include "wire/node.h"
#include "wire/pci-address.h"
#include "wire/placement.h"
#include "wire/request.h"
#include "wire/switch.h"
#include "wire/task.h"

static ApiNode *node_of(const char *text) {
    ApiNode *n = calloc(1, sizeof(*n));
    Error err = {0};
    cr_assert_eq(api_node_parse(text, strlen(text), n, &err), 0, "%s: %s", err.message, text);
    return n;
}

static void expect_node_refused(const char *text, const char *words) {
    ApiNode *n = calloc(1, sizeof(*n));
    Error err = {0};
    cr_expect_lt(api_node_parse(text, strlen(text), n, &err), 0, "accepted %s", text);
    cr_expect(strstr(err.message, words), "'%s' does not say '%s'", err.message, words);
    free(n);
}

static void expect_request_refused(const char *text, const char *words) {
    ApiRequest r;
    Error err = {0};
    cr_expect_lt(api_request_parse(text, strlen(text), &r, &err), 0, "accepted %s", text);
    cr_expect(strstr(err.message, words), "'%s' does not say '%s'", err.message, words);
}

#define NODE_HEAD "{\"name\":\"n1\",\"site\":\"dc1\",\"platform\":\"linux\",\"owner\":\"ops\","

Test(wire, r3_r7_node_round_trips_into_the_cores_enums) {
    const char *texts[] = {
            NODE_HEAD
            "\"site_kind\":\"datacenter\",\"mode\":\"vm-passthrough\",\"cpus\":64,\"cordoned\":"
            "true,"
            "\"capabilities\":[\"kata\"],\"device_resource\":\"nvidia.com/GH100\","
            "\"devices\":[{\"pci\":\"0000:17:00.0\",\"class\":\"nvidia-h100-80gb\",\"memory_gb\":"
            "80,"
            "\"binding\":\"vfio\",\"reset_verified\":true,\"quarantined\":\"fell off the bus\"}]}",
            NODE_HEAD "\"site_kind\":\"lab\",\"time_slice_replicas\":4,"
                      "\"devices\":[{\"pci\":\"0000:01:00.0\",\"class\":\"nvidia-a100-80gb\","
                      "\"memory_gb\":80,"
                      "\"mig\":[{\"profile\":\"1g.10gb\",\"start\":0},{\"profile\":\"3g.40gb\","
                      "\"start\":4}],\"mig_profiles\":[\"1g.10gb\",\"3g.40gb\",\"7g.80gb\"]},"
                      "{\"class\":\"\",\"memory_gb\":0,\"mig_profiles\":[]}]}",
            NODE_HEAD
            "\"site_kind\":\"solo\",\"apple_unified_memory_gb\":64,\"apple_usable_memory_gb\":48}",
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        ApiNode *n = node_of(texts[i]), *back = calloc(1, sizeof(*back));
        json_t *j = api_node_to_json(n);
        Error err = {0};
        cr_assert_eq(api_node_from_json(j, back, &err), 0, "%s", err.message);
        cr_expect_eq(memcmp(n, back, sizeof(*n)), 0, "node %zu changed in a round trip", i);
        json_decref(j);
        free(n);
        free(back);
    }
    ApiNode *dc = node_of(texts[0]);
    cr_expect_eq(dc->site_kind, SITE_DATACENTER);
    cr_expect_eq(dc->mode, NODE_MODE_VM_PASSTHROUGH);
    cr_expect_eq(dc->devices[0].binding, BINDING_VFIO);
    cr_expect(dc->devices[0].quarantined);
    free(dc);
    ApiNode *lab = node_of(texts[1]);
    cr_expect_eq(lab->mode, NODE_MODE_NONE, "a lab node has no node mode (R7)");
    cr_expect_eq(lab->devices[0].binding, BINDING_HOST, "host is the default binding");
    cr_expect(lab->devices[0].mig_enabled && lab->devices[0].n_mig == 2);
    cr_expect(lab->devices[0].mig_profiles_given && lab->devices[0].n_mig_profiles == 3);
    cr_expect(lab->devices[1].mig_profiles_given && lab->devices[1].n_mig_profiles == 0,
              "an empty list is a report: no profile offered");
    free(lab);
}

Test(wire, r1_request_round_trips_into_the_cores_enums) {
    const char *texts[] = {
            "{\"kind\":\"vm\",\"class\":\"nvidia-h100-80gb\",\"count\":2,\"guest_os\":\"macos\","
            "\"fallback\":[\"cpu\"],"
            "\"wait_s\":60,\"wait_for_nodes\":true}",
            "{\"kind\":\"endpoint\",\"memory_gb\":24,\"runtime\":\"llama.cpp\",\"model\":\"m\","
            "\"ports\":[8080,9090],"
            "\"env\":[\"A=1\"],\"command\":[\"serve\",\"--x\"],\"image\":\"img:1\",\"share\":true}",
            "{\"kind\":\"notebook\",\"class\":\"cpu\"}",
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        ApiRequest r, back;
        memset(&r, 0, sizeof(r));
        memset(&back, 0, sizeof(back));
        Error err = {0};
        cr_assert_eq(api_request_parse(texts[i], strlen(texts[i]), &r, &err), 0, "%s", err.message);
        json_t *j = api_request_to_json(&r);
        cr_assert_eq(api_request_from_json(j, &back, &err), 0, "%s", err.message);
        json_t *again = api_request_to_json(&back);
        cr_expect(json_equal(j, again), "request %zu changed in a round trip", i);
        cr_expect_eq(back.kind, r.kind);
        cr_expect_eq(back.guest_os, r.guest_os);
        cr_expect_eq(back.runtime, r.runtime);
        json_decref(j);
        json_decref(again);
    }
    ApiRequest r;
    Error err = {0};
    cr_assert_eq(api_request_parse(texts[0], strlen(texts[0]), &r, &err), 0);
    cr_expect_eq(r.kind, WORKLOAD_VM);
    cr_expect_eq(r.guest_os, GUEST_MACOS);
    cr_assert_eq(api_request_parse(texts[1], strlen(texts[1]), &r, &err), 0);
    cr_expect_eq(r.runtime, ENDPOINT_RUNTIME_LLAMA_CPP);
    cr_assert_eq(api_request_parse(texts[2], strlen(texts[2]), &r, &err), 0);
    cr_expect_eq(r.runtime, ENDPOINT_RUNTIME_NONE);
}

Test(wire, bad_input_wire_unknown_fields_and_wrong_types_name_the_field) {
    expect_request_refused("{\"kind\":\"vm\",\"class\":\"cpu\",\"colour\":\"red\"}", "'colour'");
    expect_request_refused("{\"kind\":\"vm\",\"class\":\"cpu\",\"user\":\"eve\"}", "token");
    expect_request_refused("{\"kind\":\"vm\",\"class\":7}", "'class' must be a string");
    expect_request_refused("{\"kind\":\"vm\",\"class\":\"cpu\",\"count\":\"2\"}",
                           "'count' must be an integer");
    expect_request_refused("{\"kind\":\"vm\",\"class\":\"cpu\",\"share\":1}",
                           "'share' must be true or false");
    expect_request_refused("{\"kind\":\"robot\",\"class\":\"cpu\"}",
                           "'kind' must be vm, container");
    expect_request_refused("{\"kind\":\"endpoint\",\"class\":\"cpu\",\"runtime\":\"none\"}",
                           "'runtime'");
    expect_request_refused("{\"class\":\"cpu\"}", "'kind' is required");
    /* An empty string is not "left out": it is refused, not silently dropped. */
    expect_request_refused("{\"kind\":\"container\",\"class\":\"cpu\",\"image\":\"\"}",
                           "field 'image' is empty");
    expect_request_refused("{\"kind\":\"endpoint\",\"class\":\"cpu\",\"model\":\"\"}",
                           "field 'model' is empty");
    expect_request_refused("{\"kind\":\"endpoint\",\"class\":\"cpu\",\"runtime\":\"\"}",
                           "field 'runtime' is empty");
    expect_request_refused("{\"kind\":\"vm\",\"class\":\"cpu\",\"guest_os\":\"\"}",
                           "field 'guest_os' is empty");
    expect_request_refused("{\"kind\":\"endpoint\",\"memory_gb\":8,\"class\":\"\"}",
                           "field 'class' is empty");
    /* GPU memory for cpu would be ignored: refused, as fields of another kind are. */
    expect_request_refused("{\"kind\":\"endpoint\",\"class\":\"cpu\",\"memory_gb\":8}",
                           "class cpu takes 'count' cores");
    expect_node_refused(NODE_HEAD "\"site_kind\":\"moon\"}",
                        "'site_kind' must be solo, lab or datacenter");
    expect_node_refused(NODE_HEAD "\"site_kind\":\"datacenter\",\"mode\":\"none\"}", "'mode'");
    expect_node_refused(NODE_HEAD "\"site_kind\":\"lab\",\"devices\":[{\"binding\":\"pci-stub\"}]}",
                        "'binding'");
    expect_node_refused(NODE_HEAD "\"site_kind\":\"lab\",\"devices\":[{\"slot\":1}]}",
                        "'slot' in device 0");
    expect_node_refused(
            NODE_HEAD
            "\"site_kind\":\"lab\",\"devices\":[{\"mig\":[{\"profile\":\"1g\",\"x\":1}]}]}",
            "'x' in a MIG instance");
    expect_node_refused(NODE_HEAD "\"site_kind\":\"lab\",\"cpus\":-1}", "'cpus' must be between");
    expect_node_refused("[1]", "must be a JSON object");
    expect_node_refused("{\"name\":", "malformed JSON");
}

Test(wire, bad_input_wire_server_refuses_a_pci_address_the_agent_would) {
    cr_expect(pci_bdf_is_valid("0000:3b:00.0"));
    cr_expect_not(pci_bdf_is_valid("0000:3B:00.0"), "sysfs writes lower-case hex");
    cr_expect_not(pci_bdf_is_valid("0000:3b:00.8"), "a PCI function is 0 to 7");
    cr_expect_not(pci_bdf_is_valid("3b:00.0"));
    const char *bad[] = {NODE_HEAD "\"site_kind\":\"lab\",\"devices\":[{\"pci\":\"gpu0\"}]}",
                         NODE_HEAD "\"site_kind\":\"lab\",\"devices\":[{\"pci\":\"0000:01:00.0\"},{"
                                   "\"pci\":\"0000:17:00.0/x\"}]}"};
    for (size_t i = 0; i < 2; i++) {
        ApiNode *n = node_of(bad[i]); /* decodes: a state file written before the check loads */
        Error err = {0};
        cr_expect_eq(api_node_check_sent(n, &err), -EINVAL, "%s", bad[i]);
        cr_expect(strstr(err.message, "'pci'"), "%s", err.message);
        free(n);
    }
    /* A quarantine names its reason (R9): an empty one is refused, as a missing one is not
     * a quarantine at all. */
    ApiNode *q = node_of(NODE_HEAD "\"site_kind\":\"lab\",\"devices\":[{\"quarantined\":\"\"}]}");
    Error qerr = {0};
    cr_expect_eq(api_node_check_sent(q, &qerr), -EINVAL);
    cr_expect(strstr(qerr.message, "'quarantined'"), "%s", qerr.message);
    free(q);
    /* A Kubernetes node's GPUs have no address: none is still fine. */
    ApiNode *k8s = node_of(NODE_HEAD
                           "\"site_kind\":\"lab\",\"devices\":[{\"class\":\"nvidia-h100-80gb\"}]}");
    Error err = {0};
    cr_expect_eq(api_node_check_sent(k8s, &err), 0);
    free(k8s);
}

/* A lab node with one device of memory_gb whose `field` is the list [list]: accepted (refusal
 * NULL) or refused by the decoder or api_node_check_sent with a message holding refusal. */
static void expect_device_list(unsigned memory_gb, const char *field, const char *list,
                               const char *refusal) {
    char text[1024];
    snprintf(text, sizeof(text),
             NODE_HEAD
             "\"site_kind\":\"lab\",\"devices\":[{\"pci\":\"0000:01:00.0\",\"memory_gb\":%u,"
             "\"%s\":[%s]}]}",
             memory_gb, field, list);
    ApiNode *n = calloc(1, sizeof(*n));
    Error err = {0};
    int r = api_node_parse(text, strlen(text), n, &err);
    if (r >= 0)
        r = api_node_check_sent(n, &err);
    if (!refusal)
        cr_expect_eq(r, 0, "%s: %s", list, err.message);
    else {
        cr_expect_eq(r, -EINVAL, "%s", list);
        cr_expect(strstr(err.message, refusal), "%s: %s", list, err.message);
    }
    free(n);
}

/* R2c: the MIG instances a node reports fit the GPU's 8 memory slots (SPEC "MIG profiles"):
 * a known profile shape, an allowed start slot, no overlap. Real layouts of cards outside the
 * SPEC table (an A30's, an H100 NVL's) and NVML's "+me" profiles still pass. */
static void expect_mig(unsigned memory_gb, const char *mig, const char *refusal) {
    expect_device_list(memory_gb, "mig", mig, refusal);
}

Test(wire, r2c_bad_input_a_mig_layout_that_cannot_be_on_a_gpu_is_refused) {
    /* Layouts a real H100 can hold. */
    expect_mig(80,
               "{\"profile\":\"1g.10gb\",\"start\":0},{\"profile\":\"1g.10gb+me\",\"start\":1},"
               "{\"profile\":\"2g.20gb\",\"start\":2},{\"profile\":\"3g.40gb\",\"start\":4}",
               NULL);
    expect_mig(80, "{\"profile\":\"1g.20gb\",\"start\":6},{\"profile\":\"4g.40gb\",\"start\":0}",
               NULL);
    expect_mig(141, "{\"profile\":\"7g.141gb\",\"start\":0}", NULL);
    expect_mig(94, "{\"profile\":\"1g.12gb\",\"start\":6},{\"profile\":\"3g.47gb\",\"start\":0}",
               NULL);
    /* Overlaps, impossible starts, unknown profiles. */
    expect_mig(80, "{\"profile\":\"3g.40gb\",\"start\":0},{\"profile\":\"2g.20gb\",\"start\":2}",
               "overlaps another instance");
    expect_mig(80, "{\"profile\":\"1g.10gb\",\"start\":3},{\"profile\":\"1g.10gb\",\"start\":3}",
               "overlaps another instance");
    expect_mig(80, "{\"profile\":\"1g.20gb\",\"start\":1}", "cannot start at memory slot 1");
    expect_mig(80, "{\"profile\":\"3g.40gb\",\"start\":2}", "cannot start at memory slot 2");
    expect_mig(80, "{\"profile\":\"7g.80gb\",\"start\":1}", "cannot start at memory slot 1");
    expect_mig(80, "{\"profile\":\"1g.10gb\",\"start\":7}", "cannot start at memory slot 7");
    expect_mig(80, "{\"profile\":\"5g.50gb\",\"start\":0}", "is not a MIG profile");
    expect_mig(80, "{\"profile\":\"big\",\"start\":0}", "is not a MIG profile");
    /* Another card's profiles on a card of the SPEC's table: an A100-40GB's, an H200's. */
    expect_mig(80, "{\"profile\":\"1g.5gb\",\"start\":0}",
               "'1g.5gb' is not a MIG profile of this 80 GB card (such as 3g.40gb)");
    expect_mig(80, "{\"profile\":\"7g.141gb\",\"start\":0}", "is not a MIG profile of this");
    /* NVML's total for an H200 rounds to 140 GB, a B200's to 179: still their table rows. */
    expect_mig(140, "{\"profile\":\"1g.35gb\",\"start\":1},{\"profile\":\"1g.18gb\",\"start\":2}",
               "cannot start at memory slot 1");
    expect_mig(140, "{\"profile\":\"1g.35gb\",\"start\":2},{\"profile\":\"1g.18gb\",\"start\":3}",
               "overlaps another instance");
    expect_mig(179, "{\"profile\":\"3g.90gb\",\"start\":2}", "cannot start at memory slot 2");
}

/* R2c, bad input: a device said MIG off beside MIG instances contradicts itself: refused, not
 * taken as MIG on (which would offer its slices and hide it from whole-GPU requests). */
Test(wire, r2c_bad_input_mig_off_with_mig_instances_is_refused) {
    static const char text[] = NODE_HEAD
            "\"site_kind\":\"lab\",\"devices\":[{\"pci\":\"0000:01:00.0\",\"memory_gb\":80,"
            "\"mig_enabled\":false,\"mig\":[{\"profile\":\"1g.10gb\",\"start\":0}]}]}";
    ApiNode *n = calloc(1, sizeof(*n));
    Error err = {0};
    cr_expect_eq(api_node_parse(text, strlen(text), n, &err), -EINVAL);
    cr_expect(strstr(err.message, "'mig_enabled' is false but 'mig' lists 1 instance"), "%s",
              err.message);
    free(n);
}

/* R2c: the MIG profiles a GPU's NVML offers name profiles of that card, each once; a card
 * outside the SPEC's table is measured by its compute slices. A device without the list has
 * every profile of its class (hand-registered and stored nodes). */
static void expect_profiles(unsigned memory_gb, const char *profiles, const char *refusal) {
    expect_device_list(memory_gb, "mig_profiles", profiles, refusal);
}

Test(wire, r2c_bad_input_mig_profiles_that_are_not_the_cards_are_refused) {
    expect_profiles(140, "\"1g.18gb\",\"1g.35gb\",\"2g.35gb\",\"3g.71gb\",\"7g.141gb\"", NULL);
    expect_profiles(80, "\"1g.10gb\",\"4g.40gb\"", NULL);
    expect_profiles(94, "\"1g.12gb\",\"3g.47gb\",\"7g.94gb\"", NULL);
    expect_profiles(80, "", NULL);
    expect_profiles(80, "\"1g.10gb\",\"1g.10gb\"", "MIG profile '1g.10gb' is listed twice");
    expect_profiles(80, "\"1g.5gb\"",
                    "'mig_profiles' entry '1g.5gb' is not a MIG profile of this 80 GB card");
    expect_profiles(80, "\"1g.10gb+me\"", "is not a MIG profile of this");
    expect_profiles(80, "\"5g.50gb\"", "is not a MIG profile of this");
    expect_profiles(80, "1", "entry 0 of 'mig_profiles' is not a MIG profile name");
    expect_profiles(80, "\"a-name-far-too-long-for-a-profile\"", "is not a MIG profile name");
    expect_profiles(80, "\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\"", "at most 6");
}

/* R2c: a MIG instance says where it starts (openapi.yaml: required [profile, start]); one
 * that does not is refused, never stored as starting at slot 0, where it may not be. */
Test(wire, r2c_bad_input_a_mig_instance_without_its_start_is_refused) {
    expect_node_refused(NODE_HEAD "\"site_kind\":\"lab\",\"devices\":[{\"pci\":\"0000:01:00.0\","
                                  "\"memory_gb\":80,\"mig\":[{\"profile\":\"1g.10gb\"}]}]}",
                        "field 'start' is required");
    expect_node_refused(NODE_HEAD "\"site_kind\":\"lab\",\"devices\":[{\"pci\":\"0000:01:00.0\","
                                  "\"memory_gb\":80,\"mig\":[{\"start\":0}]}]}",
                        "field 'profile' is required");
}

/* R10: a Mac's usable GPU memory is its wired limit less the owner's headroom, so at most its
 * memory; a client saying otherwise is refused (placements would promise memory the Mac does
 * not have), while a state file written before the check still loads. */
Test(wire, r10_bad_input_a_mac_with_more_usable_than_unified_memory_is_refused) {
    const char *bad[] = {NODE_HEAD "\"site_kind\":\"lab\",\"apple_unified_memory_gb\":16,"
                                   "\"apple_usable_memory_gb\":99}",
                         NODE_HEAD "\"site_kind\":\"lab\",\"apple_usable_memory_gb\":8}"};
    for (size_t i = 0; i < 2; i++) {
        ApiNode *n = node_of(bad[i]);
        Error err = {0};
        cr_expect_eq(api_node_check_sent(n, &err), -EINVAL, "%s", bad[i]);
        cr_expect(strstr(err.message, "'apple_usable_memory_gb'") && strstr(err.message, "(R10)"),
                  "%s", err.message);
        free(n);
    }
    ApiNode *mac = node_of(NODE_HEAD "\"site_kind\":\"lab\",\"apple_unified_memory_gb\":16,"
                                     "\"apple_usable_memory_gb\":12}");
    Error err = {0};
    cr_expect_eq(api_node_check_sent(mac, &err), 0, "%s", err.message);
    free(mac);
}

static Catalog *two_classes(void) {
    Catalog *c = catalog_new();
    const char *names[] = {"nvidia-a100-80gb", "cpu"};
    for (size_t i = 0; i < 2; i++) {
        GpuClass g = {.name = strdup(names[i])};
        Error err = {0};
        cr_assert_eq(catalog_add(c, &g, &err), 0, "%s", err.message);
    }
    return c;
}

Test(wire, r2_placement_round_trips_with_the_same_fields_everywhere) {
    Catalog *cat = two_classes();
    Placement p = {.node = "n1",
                   .class_name = "nvidia-a100-80gb",
                   .class_index = 0,
                   .method = METHOD_MIG,
                   .container_runtime = CONTAINER_RUNTIME_KATA,
                   .endpoint_runtime = ENDPOINT_RUNTIME_VLLM,
                   .n_devices = 2,
                   .devices = {3, 5},
                   .mig_start = 4,
                   .mig_slots = 2,
                   .fallback_index = 1};
    const char *addrs[] = {"0000:17:00.0", "0000:18:00.0"};
    json_t *j = wire_placement_to_json(&p, addrs);
    cr_assert_not_null(j);
    cr_expect_eq(json_array_size(json_object_get(j, "addresses")), 2);
    Placement back;
    char node[SCHED_ID_MAX];
    Error err = {0};
    cr_assert_eq(wire_placement_from_json(cat, j, &back, node, &err), 0, "%s", err.message);
    cr_expect_str_eq(back.node, "n1");
    cr_expect_str_eq(back.class_name, "nvidia-a100-80gb");
    cr_expect_eq(back.class_index, 0);
    cr_expect_eq(back.method, METHOD_MIG);
    cr_expect_eq(back.container_runtime, CONTAINER_RUNTIME_KATA);
    cr_expect_eq(back.endpoint_runtime, ENDPOINT_RUNTIME_VLLM);
    cr_expect_eq(back.n_devices, 2);
    cr_expect(back.devices[0] == 3 && back.devices[1] == 5);
    cr_expect(back.mig_start == 4 && back.mig_slots == 2 && back.fallback_index == 1);
    json_decref(j);
    /* The plan has no addresses, and a CPU placement keeps its cores and first choice. */
    Placement cpu = {.node = "n2",
                     .class_name = "cpu",
                     .class_index = 1,
                     .method = METHOD_CPU,
                     .cpu_cores = 8,
                     .fallback_index = -1};
    j = wire_placement_to_json(&cpu, NULL);
    cr_assert_eq(wire_placement_from_json(cat, j, &back, node, &err), 0, "%s", err.message);
    cr_expect(back.method == METHOD_CPU && back.cpu_cores == 8 && back.fallback_index == -1 &&
              !back.n_devices);
    json_decref(j);
    catalog_free(cat);
}

Test(wire, bad_input_wire_placement_refusals_name_the_field) {
    Catalog *cat = two_classes();
    const char *bad[][2] = {
            {"{\"node\":\"n\",\"class\":\"gone\",\"method\":\"cpu\",\"container_runtime\":\"none\","
             "\"endpoint_runtime\":\"none\",\"devices\":[]}",
             "gone"},
            {"{\"node\":\"n\",\"class\":\"cpu\",\"method\":\"teleport\",\"container_runtime\":"
             "\"none\","
             "\"endpoint_runtime\":\"none\",\"devices\":[]}",
             "'method'"},
            {"{\"node\":\"n\",\"class\":\"cpu\",\"method\":\"cpu\",\"container_runtime\":\"none\","
             "\"endpoint_runtime\":\"none\"}",
             "'devices' is required"},
            {"{\"node\":\"n\",\"class\":\"cpu\",\"method\":\"cpu\",\"container_runtime\":\"none\","
             "\"endpoint_runtime\":\"none\",\"devices\":[-1]}",
             "'devices'"},
            {"{\"node\":\"n\",\"class\":\"cpu\",\"method\":\"cpu\",\"container_runtime\":\"none\","
             "\"endpoint_runtime\":\"none\",\"devices\":[],\"gpu\":1}",
             "'gpu'"},
            {"{\"node\":\"n\",\"class\":\"cpu\",\"method\":\"cpu\",\"container_runtime\":\"none\","
             "\"endpoint_runtime\":\"none\",\"devices\":[],\"fallback_index\":-2}",
             "'fallback_index'"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *j = json_loads(bad[i][0], 0, NULL);
        cr_assert_not_null(j);
        Placement p;
        char node[SCHED_ID_MAX];
        Error err = {0};
        cr_expect_lt(wire_placement_from_json(cat, j, &p, node, &err), 0, "accepted %s", bad[i][0]);
        cr_expect(strstr(err.message, bad[i][1]), "'%s' does not say %s", err.message, bad[i][1]);
        json_decref(j);
    }
    catalog_free(cat);
}

Test(wire, r6_capacity_row_has_one_shape) {
    CapacityRow site = {.class_name = "nvidia-h100-80gb",
                        .site = "dc1",
                        .mode = CAPACITY_VM,
                        .resource = "nvidia.com/GH100",
                        .total = 8,
                        .allocated = 3,
                        .free = 4,
                        .cordoned = 1};
    json_t *j = wire_capacity_row_to_json(&site);
    cr_expect_str_eq(json_string_value(json_object_get(j, "site")), "dc1");
    cr_expect_str_eq(json_string_value(json_object_get(j, "mode")), "vm");
    cr_expect_str_eq(json_string_value(json_object_get(j, "resource")), "nvidia.com/GH100");
    cr_expect_null(json_object_get(j, "node_selector"), "absent, not null, when the row has none");
    cr_expect_eq(json_integer_value(json_object_get(j, "total")), 8);
    cr_expect_eq(json_integer_value(json_object_get(j, "free")), 4);
    json_decref(j);
    CapacityRow sum = {.class_name = "cpu", .mode = CAPACITY_CPU, .total = 64};
    j = wire_capacity_row_to_json(&sum);
    cr_expect(json_is_null(json_object_get(j, "site")), "a sum over every site says site null");
    json_decref(j);
}

/* ---- task (server -> agent, R4, R7, R9) ---- */

static int task_decode(const char *text, Task *ret, uint64_t *ret_id, Error *err) {
    json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    cr_assert(j, "not JSON: %s", text);
    int r = wire_task_from_json(j, ret, ret_id, err);
    json_decref(j);
    return r;
}

Test(wire, r4_r9_task_round_trips_as_the_agent_reads_it) {
    const Task tasks[] = {
            {.id = 7,
             .node = "lab-1",
             .kind = TASK_BIND,
             .dev = 3,
             .gpu = "0000:41:00.0",
             .target = "vfio",
             .created_ms = 1700000000123},
            {.id = (uint64_t)1 << 40,
             .node = "dc.node_2",
             .kind = TASK_BIND,
             .gpu = "",
             .target = "host"}, /* a datacenter node's whole-node bind names no GPU */
            {.id = 1, .node = "n1", .kind = TASK_RESET_CHECK, .dev = 63, .gpu = "0000:ff:1f.7"},
    };
    for (size_t i = 0; i < sizeof(tasks) / sizeof(tasks[0]); i++) {
        json_t *j = wire_task_to_json(&tasks[i]);
        cr_assert(j);
        char *text = json_dumps(j, JSON_COMPACT);
        Task back;
        uint64_t id = 0;
        Error err = {0};
        cr_assert_eq(task_decode(text, &back, &id, &err), 0, "%s: %s", err.message, text);
        cr_expect_eq(id, tasks[i].id);
        cr_expect_eq(back.id, tasks[i].id);
        cr_expect_str_eq(back.node, tasks[i].node);
        cr_expect_eq(back.kind, tasks[i].kind);
        cr_expect_eq(back.dev, tasks[i].dev);
        cr_expect_str_eq(back.gpu, tasks[i].gpu);
        cr_expect_str_eq(back.target, tasks[i].target);
        cr_expect_eq(back.created_ms, tasks[i].created_ms);
        /* The fields the server has always sent, and no target on a reset check. */
        cr_expect_str_eq(json_string_value(json_object_get(j, "kind")),
                         task_kind_to_string(tasks[i].kind));
        cr_expect_eq(json_integer_value(json_object_get(j, "device")), tasks[i].dev);
        cr_expect_eq(json_object_get(j, "target") != NULL, tasks[i].target[0] != 0);
        free(text);
        json_decref(j);
    }
}

#define TASK_HEAD "{\"id\":9,\"node\":\"n1\",\"device\":0,\"created_ms\":5,"

Test(wire, bad_input_wire_task_refusals_name_the_field_and_keep_the_id) {
    const struct {
        const char *text, *words;
        uint64_t id; /* what the agent can still answer to */
    } cases[] = {
            {TASK_HEAD "\"kind\":\"reflash\",\"gpu\":\"0000:01:00.0\"}",
             "'kind' must be bind or reset-check", 9},
            {TASK_HEAD "\"kind\":\"bind\",\"gpu\":\"0000:01:00.0\"}",
             "'target' must be vfio or host", 9},
            {TASK_HEAD "\"kind\":\"bind\",\"gpu\":\"0000:01:00.0\",\"target\":\"nouveau\"}",
             "vfio or host", 9},
            {TASK_HEAD "\"kind\":\"reset-check\",\"gpu\":\"0000:01:00.0\",\"target\":\"vfio\"}",
             "bind tasks only", 9},
            {TASK_HEAD "\"kind\":\"bind\",\"gpu\":\"../../sys/x\",\"target\":\"vfio\"}",
             "not a PCI address", 9},
            {TASK_HEAD "\"kind\":\"bind\",\"target\":\"vfio\"}", "'gpu' is required", 9},
            {TASK_HEAD "\"kind\":\"bind\",\"gpu\":7,\"target\":\"vfio\"}", "'gpu' must be a string",
             9},
            {TASK_HEAD "\"kind\":\"bind\",\"gpu\":\"\",\"target\":\"vfio\",\"force\":true}",
             "unknown field 'force'", 9},
            {"{\"id\":9,\"node\":\"n1\",\"device\":64,\"created_ms\":5,\"kind\":\"reset-check\","
             "\"gpu\":\"\"}",
             "'device' must be between 0 and 63", 9},
            {"{\"id\":9,\"node\":\"N 1\",\"created_ms\":5,\"kind\":\"reset-check\",\"gpu\":\"\"}",
             "not a valid node name", 9},
            {"{\"id\":9,\"node\":\"n1\",\"kind\":\"reset-check\",\"gpu\":\"\"}",
             "'created_ms' is required", 9},
            {"{\"node\":\"n1\",\"created_ms\":5,\"kind\":\"reset-check\",\"gpu\":\"\"}",
             "'id' is required", 0},
            {"{\"id\":0,\"node\":\"n1\",\"created_ms\":5,\"kind\":\"reset-check\",\"gpu\":\"\"}",
             "'id' must be a positive", 0},
            {"{\"id\":\"9\",\"node\":\"n1\",\"created_ms\":5,\"kind\":\"reset-check\",\"gpu\":"
             "\"\"}",
             "'id' must be a positive", 0},
            {"[9]", "a task must be a JSON object", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        Task t = {.id = 12345};
        Task before = t;
        uint64_t id = 777;
        Error err = {0};
        cr_expect_lt(task_decode(cases[i].text, &t, &id, &err), 0, "accepted %s", cases[i].text);
        cr_expect(strstr(err.message, cases[i].words), "'%s' does not say '%s'", err.message,
                  cases[i].words);
        cr_expect_eq(id, cases[i].id, "%s: id %llu", cases[i].text, (unsigned long long)id);
        cr_expect(!memcmp(&t, &before, sizeof(t)), "a refusal changed the task: %s", cases[i].text);
    }
}

/* ---- mode switch (R3, R4, R7) ---- */

Test(wire, r4_switch_round_trips_as_clients_read_it) {
    NodeSwitch sw = {.mode = "vm-passthrough",
                     .drain = DRAIN_EVICT,
                     .gpu = 2,
                     .step = SW_REBIND,
                     .was_cordoned = true,
                     .started_ms = 1700000000000,
                     .updated_ms = 1700000000500,
                     .message = "rebinding GPU 2",
                     .n_tasks = 2};
    sw.tasks[0] = 41, sw.task_done[0] = true, sw.task_ok[0] = true;
    sw.tasks[1] = 42;
    NodeSwitch whole = {.mode = "container", .drain = DRAIN_NONE, .gpu = -1, .step = SW_DONE};
    const NodeSwitch *cases[] = {&sw, &whole};
    for (size_t i = 0; i < 2; i++) {
        json_t *j = wire_switch_to_json(cases[i]);
        cr_assert(j);
        NodeSwitch back;
        memset(&back, 0xa5, sizeof(back));
        Error err = {0};
        cr_assert_eq(wire_switch_from_json(j, &back, &err), 0, "%s", err.message);
        const NodeSwitch *w = cases[i];
        cr_expect_str_eq(back.mode, w->mode);
        cr_expect_eq(back.drain, w->drain);
        cr_expect_eq(back.gpu, w->gpu);
        cr_expect_eq(back.step, w->step);
        cr_expect_eq(back.was_cordoned, w->was_cordoned);
        cr_expect_eq(back.started_ms, w->started_ms);
        cr_expect_eq(back.updated_ms, w->updated_ms);
        cr_expect_str_eq(back.message, w->message);
        cr_assert_eq(back.n_tasks, w->n_tasks);
        for (size_t k = 0; k < w->n_tasks; k++) {
            cr_expect_eq(back.tasks[k], w->tasks[k]);
            cr_expect_eq(back.task_done[k], w->task_done[k]);
            cr_expect_eq(back.task_ok[k], w->task_ok[k]);
        }
        /* The fields a node's JSON has always shown. */
        cr_expect_str_eq(json_string_value(json_object_get(j, "step")),
                         switch_step_to_string(w->step));
        cr_expect_str_eq(json_string_value(json_object_get(j, "drain")),
                         drain_mode_to_string(w->drain));
        json_decref(j);
    }
}

#define SWITCH_TAIL "\"was_cordoned\":false,\"started_ms\":1,\"updated_ms\":2,\"message\":\"m\""

Test(wire, bad_input_wire_switch_refusals_name_the_field) {
    const struct {
        const char *text, *words;
    } cases[] = {
            {"{\"mode\":\"vm-vgpu\",\"drain\":\"none\",\"gpu\":-1,\"step\":\"done\"," SWITCH_TAIL
             ",\"tasks\":[]}",
             "'mode' must be container or vm-passthrough"},
            {"{\"mode\":\"container\",\"drain\":\"later\",\"gpu\":-1,\"step\":\"done\"," SWITCH_TAIL
             ",\"tasks\":[]}",
             "'drain' must be none, wait or evict"},
            {"{\"mode\":\"container\",\"drain\":\"none\",\"gpu\":-2,\"step\":\"done\"," SWITCH_TAIL
             ",\"tasks\":[]}",
             "'gpu' must be -1"},
            {"{\"mode\":\"container\",\"drain\":\"none\",\"gpu\":-1,\"step\":"
             "\"paused\"," SWITCH_TAIL ",\"tasks\":[]}",
             "'step' must be cordon"},
            {"{\"mode\":\"container\",\"drain\":\"none\",\"gpu\":-1,\"step\":\"done\"," SWITCH_TAIL
             "}",
             "'tasks' is required"},
            {"{\"mode\":\"container\",\"drain\":\"none\",\"gpu\":-1,\"step\":\"done\"," SWITCH_TAIL
             ",\"tasks\":[{\"id\":1,\"done\":true}]}",
             "'ok' is required"},
            {"{\"mode\":\"container\",\"drain\":\"none\",\"gpu\":-1,\"step\":\"done\"," SWITCH_TAIL
             ",\"tasks\":[{\"id\":-1,\"done\":true,\"ok\":true}]}",
             "positive integer"},
            {"{\"mode\":\"container\",\"drain\":\"none\",\"gpu\":-1,\"step\":\"done\"," SWITCH_TAIL
             ",\"tasks\":{}}",
             "'tasks' must be a list"},
            {"{\"mode\":\"container\",\"drain\":\"none\",\"gpu\":-1,\"step\":\"done\",\"was_"
             "cordoned\":false,\"started_ms\":-5,\"updated_ms\":2,\"message\":\"m\",\"tasks\":[]}",
             "'started_ms' must be an integer from 0"},
            {"{\"mode\":\"container\",\"drain\":\"none\",\"gpu\":-1,\"step\":\"done\"," SWITCH_TAIL
             ",\"tasks\":[],\"node\":\"n1\"}",
             "unknown field 'node' in a mode switch"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *j = json_loads(cases[i].text, JSON_REJECT_DUPLICATES, NULL);
        cr_assert(j, "not JSON: %s", cases[i].text);
        NodeSwitch sw = {.message = "kept"};
        Error err = {0};
        cr_expect_lt(wire_switch_from_json(j, &sw, &err), 0, "accepted %s", cases[i].text);
        cr_expect(strstr(err.message, cases[i].words), "'%s' does not say '%s'", err.message,
                  cases[i].words);
        cr_expect_str_eq(sw.message, "kept", "a refusal changed the switch");
        json_decref(j);
    }
}

/* ---- event envelope (the change feed) ---- */

Test(wire, event_feed_envelope_round_trips_as_the_cli_reads_it) {
    json_t *data =
            json_pack("{s:s, s:i}", "reason", "bind 0000:01:00.0 on n1 to vfio", "device", 0);
    const WireEvent events[] = {
            {.seq = 17,
             .time_ms = 1700000000123,
             .actor = "alice",
             .type = "request.placed",
             .object = "42",
             .user = "alice",
             .data = data},
            {.seq = 1, .actor = "system", .type = "task.queued", .object = "3", .data = data},
    };
    for (size_t i = 0; i < 2; i++) {
        json_t *j = wire_event_to_json(&events[i]);
        cr_assert(j);
        WireEvent back;
        Error err = {0};
        cr_assert_eq(wire_event_from_json(j, &back, &err), 0, "%s", err.message);
        cr_expect_eq(back.seq, events[i].seq);
        cr_expect_eq(back.time_ms, events[i].time_ms);
        cr_expect_str_eq(back.actor, events[i].actor);
        cr_expect_str_eq(back.type, events[i].type);
        cr_expect_str_eq(back.object, events[i].object);
        cr_expect_eq(back.user == NULL, events[i].user == NULL);
        if (events[i].user)
            cr_expect_str_eq(back.user, events[i].user);
        cr_expect(json_equal(back.data, data));
        json_decref(j);
    }
    json_decref(data);
}

/* The server keeps an event's data as text and splices it into a read's answer: that text is,
 * byte for byte, the tree's own encoding, and the CLI decodes it to the same data. */
Test(wire, event_with_kept_data_text_writes_what_the_tree_would) {
    json_t *data = json_pack("{s:s, s:s, s:i}", "reason_code", "queued", "reason",
                             "waiting: older requests \"first\" \u00e9", "queue_position", 3);
    char *data_text = json_dumps(data, JSON_COMPACT);
    WireEvent from_tree = {.seq = 9,
                           .time_ms = 1700000000456,
                           .actor = "system",
                           .type = "request.waiting",
                           .object = "7",
                           .user = "bob",
                           .data = data};
    WireEvent from_text = from_tree;
    from_text.data = NULL;
    from_text.data_text = data_text;
    json_t *tree = wire_event_to_json(&from_tree);
    char *want = json_dumps(tree, JSON_COMPACT);
    JsonText w = {0};
    wire_event_write(&from_text, &w);
    char *got = json_text_take(&w);
    cr_assert(want && got);
    cr_expect_str_eq(got, want);
    json_t *back_json = json_loads(got, 0, NULL);
    WireEvent back;
    Error err = {0};
    cr_assert_eq(wire_event_from_json(back_json, &back, &err), 0, "%s", err.message);
    cr_expect(json_equal(back.data, data));
    cr_expect_str_eq(back.user, "bob");
    json_decref(back_json);
    free(got);
    free(want);
    json_decref(tree);
    free(data_text);
    json_decref(data);
}

#define EVENT_HEAD "{\"seq\":3,\"time_ms\":5,\"actor\":\"bob\",\"object\":\"7\","

Test(wire, bad_input_wire_event_refusals_name_the_field) {
    const struct {
        const char *text, *words;
    } cases[] = {
            {EVENT_HEAD "\"type\":\"request.placed\",\"data\":[]}", "'data' must be a JSON object"},
            {EVENT_HEAD "\"type\":\"request.placed\"}", "'data' is required"},
            {EVENT_HEAD "\"type\":\"\",\"data\":{}}", "'type' must not be empty"},
            {EVENT_HEAD "\"type\":7,\"data\":{}}", "'type' must be a text"},
            {EVENT_HEAD "\"type\":\"a\",\"data\":{},\"user\":null}", "'user' must be a text"},
            {EVENT_HEAD "\"type\":\"a\",\"data\":{},\"extra\":1}",
             "unknown field 'extra' in an event"},
            {"{\"seq\":0,\"time_ms\":5,\"actor\":\"bob\",\"object\":\"7\",\"type\":\"a\",\"data\":{"
             "}}",
             "'seq' must be a positive"},
            {"{\"seq\":1,\"time_ms\":-1,\"actor\":\"bob\",\"object\":\"7\",\"type\":\"a\",\"data\":"
             "{}}",
             "'time_ms' must be an integer from 0"},
            {"{\"seq\":1,\"time_ms\":1,\"object\":\"7\",\"type\":\"a\",\"data\":{}}",
             "'actor' is required"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *j = json_loads(cases[i].text, JSON_REJECT_DUPLICATES, NULL);
        cr_assert(j, "not JSON: %s", cases[i].text);
        WireEvent e = {.seq = 99};
        Error err = {0};
        cr_expect_lt(wire_event_from_json(j, &e, &err), 0, "accepted %s", cases[i].text);
        cr_expect(strstr(err.message, cases[i].words), "'%s' does not say '%s'", err.message,
                  cases[i].words);
        cr_expect_eq(e.seq, 99, "a refusal changed the event");
        json_decref(j);
    }
}

/* R17: an engine's sentence of any length or bytes still ends the request: the body the server
 * keeps is cut on a character boundary and made valid UTF-8 (a longer or invalid one would be
 * refused, and the request would stay placed for ever). */
Test(wire, r17_a_workload_end_body_fits_what_the_server_keeps) {
    char long_msg[600] = "";
    for (size_t i = 0; i < 150; i++)
        strcat(long_msg, "\xc3\xa9"); /* 2-byte characters: 239 falls inside one */
    strcat(long_msg, "\xff tail");
    json_t *b = fleet_workload_end_body(true, 3, long_msg);
    cr_assert_not_null(b);
    const char *m = json_string_value(json_object_get(b, "message"));
    cr_assert_eq(strlen(m), 239, "cut before the character the limit falls in: %zu", strlen(m));
    cr_assert_str_eq(m + 236, "...", "and says it was cut");
    cr_assert(json_is_true(json_object_get(b, "failed")));
    cr_assert_null(json_object_get(b, "exit_code"), "a failed start has no exit code");
    json_decref(b);
    b = fleet_workload_end_body(false, 3, "bad \xff byte");
    cr_assert_not_null(b, "invalid UTF-8 is mended, not a lost report");
    cr_assert_str_eq(json_string_value(json_object_get(b, "message")), "bad ? byte");
    cr_assert_eq(json_integer_value(json_object_get(b, "exit_code")), 3);
    json_decref(b);
}

/* Bad input: a NUL, escaped or raw, is said in the client's terms, not jansson's API's. */
Test(wire, bad_input_a_nul_in_json_is_named_as_the_input_not_the_parsers_flag) {
    json_t *j = NULL;
    Error err = {0};
    const char esc[] = "{\"a\":\"\\u0000\"}";
    cr_assert_lt(wire_parse_text(esc, sizeof(esc) - 1, &j, &err), 0);
    cr_expect(strstr(err.message, "a NUL") && !strstr(err.message, "JSON_ALLOW_NUL"), "%s",
              err.message);
    const char raw[] = "{\"a\":1}\0x";
    Error e2 = {0};
    cr_assert_lt(wire_parse_text(raw, sizeof(raw) - 1, &j, &e2), 0);
    cr_expect(strstr(e2.message, "a NUL byte") && !strstr(e2.message, "end of file expected"), "%s",
              e2.message);
}
