/* test-catalog.c: the catalog of GPU classes (R8), its validation and vm_device_name (R6). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "config/catalog-yaml.h"
#include "config/pciids.h"

static PciIds *ids;

static void load_ids(void) {
    Error err = {0};
    cr_assert(pci_ids_load(EINSORA_PCI_IDS, &ids, &err) == 0, "%s", err.message);
}

static void free_ids(void) {
    pci_ids_free(ids);
}

TestSuite(catalog, .init = load_ids, .fini = free_ids);

static int parse(const char *text, Catalog **ret, Error *err) {
    return catalog_parse_yaml(text, strlen(text), "t.yaml", ids, ret, err);
}

/* Assert text fails with code and a message that starts with the position and holds needle. */
static void expect_error(const char *text, int code, const char *pos, const char *needle) {
    Catalog *cat = NULL;
    Error err = {0};
    int r = parse(text, &cat, &err);
    cr_assert_eq(r, code, "expected %d, got %d (%s)", code, r, err.message);
    cr_assert_null(cat, "a failed parse returns nothing");
    cr_assert(strncmp(err.message, pos, strlen(pos)) == 0, "position: want '%s' in '%s'", pos,
              err.message);
    cr_assert(strstr(err.message, needle), "want '%s' in '%s'", needle, err.message);
}

#define H100                                                                                       \
    "classes:\n"                                                                                   \
    "  - name: nvidia-h100-80gb\n"                                                                 \
    "    vendor: nvidia\n"                                                                         \
    "    match: {pci: 10de:2330}\n"                                                                \
    "    memory_gb: 80\n"                                                                          \
    "    container_resource: nvidia.com/gpu\n"                                                     \
    "    node_selector: nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3\n"

Test(catalog, r8_default_catalog_has_every_required_class) {
    Catalog *cat = NULL;
    Error err = {0};
    cr_assert_eq(catalog_load_file(TEST_DATA "/catalog.yaml", ids, &cat, &err), 0, "%s",
                 err.message);
    static const char *const required[] = {
            "nvidia-b200-180gb",
            "nvidia-h200-141gb",
            "nvidia-h100-80gb",
            "nvidia-h100-80gb-pcie",
            "nvidia-a100-80gb",
            "nvidia-a100-40gb",
            "nvidia-l40s",
            "nvidia-rtx-4090",
            "nvidia-rtx-5090",
            "apple-silicon-16gb",
            "apple-silicon-128gb",
            "amd-mi300x",
            "amd-rx-7900-xtx",
            "cpu",
            "nvidia-h100-80gb-mig-1g.10gb",
            "nvidia-h200-141gb-mig-7g.141gb",
            "nvidia-b200-180gb-mig-3g.90gb",
            "nvidia-a100-40gb-mig-1g.5gb",
            "nvidia-a100-80gb-mig-4g.40gb",
    };
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
        cr_expect_not_null(catalog_find(cat, required[i]), "missing class %s", required[i]);
    const GpuClass *rtx = catalog_find(cat, "nvidia-rtx-4090");
    cr_expect(rtx->consumer && rtx->internal_only && rtx->n_mig_profiles == 0);
    cr_expect(catalog_find(cat, "apple-silicon-64gb")->owner_only);
    /* every MIG card of the SPEC table has its six slice classes */
    size_t slices = 0;
    for (size_t i = 0; i < cat->n_classes; i++)
        slices += cat->classes[i].mig_parent != NULL;
    cr_expect_eq(slices, 8 * 6, "8 MIG cards x 6 profiles, got %zu", slices);
    const GpuClass *s = catalog_find(cat, "nvidia-h100-80gb-mig-3g.40gb");
    cr_expect_str_eq(s->container_resource, "nvidia.com/mig-3g.40gb");
    cr_expect_eq(s->memory_gb, 40);
    cr_expect_eq(s->mig_shape, MIG_SHAPE_3G);
    cr_expect_null(s->vm_device_name, "a MIG slice is never passed through");
    cr_expect_eq(
            catalog_find_mig_slice(cat, catalog_find_index(cat, "nvidia-h100-80gb"), "3g.40gb"), s);
    catalog_free(cat);
}

Test(catalog, r8_minimal_class_parses_with_every_field) {
    Catalog *cat = NULL;
    Error err = {0};
    cr_assert_eq(parse(H100 "    mig_profiles: [1g.10gb, 7g.80gb]\n"
                            "    internal_only: true\n    owner_only: false\n    consumer: false\n"
                            "    match2: x\n",
                       &cat, &err),
                 -EINVAL, "match2 is an unknown key");
    error_clear(&err);
    cr_assert_eq(parse(H100 "    mig_profiles: [1g.10gb, 7g.80gb]\n    internal_only: true\n", &cat,
                       &err),
                 0, "%s", err.message);
    const GpuClass *c = catalog_find(cat, "nvidia-h100-80gb");
    cr_assert_not_null(c);
    cr_expect_eq(c->vendor, VENDOR_NVIDIA);
    cr_expect_eq(c->n_pci, 1);
    cr_expect_eq(c->pci[0].device, 0x2330);
    cr_expect_eq(c->memory_gb, 80);
    cr_expect(c->internal_only);
    cr_expect_eq(c->n_mig_profiles, 2);
    cr_expect_eq(cat->n_classes, 4, "card plus two derived slices, and cpu (R11)");
    catalog_free(cat);
}

Test(catalog, r8_unknown_key_is_an_error_with_position) {
    expect_error(H100 "    colour: green\n", -EINVAL, "t.yaml:8:5:", "unknown key 'colour'");
    expect_error("classes: []\nextra: 1\n", -EINVAL,
                 "t.yaml:2:1:", "unknown top-level key 'extra'");
    expect_error("classes:\n  - name: a\n    vendor: nvidia\n    match: {pcie: 10de:2330}\n",
                 -EINVAL, "t.yaml:4:13:", "unknown key 'match.pcie'");
}

Test(catalog, r8_duplicate_class_name_is_an_error) {
    expect_error(H100 "  - name: nvidia-h100-80gb\n    vendor: cpu\n", -EEXIST,
                 "t.yaml:8:5:", "duplicate class name 'nvidia-h100-80gb'");
}

Test(catalog, r8_duplicate_key_is_an_error) {
    expect_error(H100 "    memory_gb: 81\n", -EINVAL,
                 "t.yaml:8:5:", "key 'memory_gb' appears twice");
}

Test(catalog, r8_missing_required_fields_are_errors) {
    expect_error("classes:\n  - vendor: cpu\n", -EINVAL,
                 "t.yaml:2:5:", "missing required field 'name'");
    expect_error("classes:\n  - name: x\n", -EINVAL,
                 "t.yaml:2:5:", "missing required field 'vendor'");
    expect_error("classes:\n  - name: x\n    vendor: nvidia\n    memory_gb: 8\n"
                 "    container_resource: nvidia.com/gpu\n    node_selector: a=b\n",
                 -EINVAL, "t.yaml:2:5:", "missing required field 'match'");
    expect_error("classes:\n  - name: x\n    vendor: nvidia\n    match: {pci: 10de:2330}\n"
                 "    container_resource: nvidia.com/gpu\n    node_selector: a=b\n",
                 -EINVAL, "t.yaml:2:5:", "missing required field 'memory_gb'");
    expect_error("classes:\n  - name: x\n    vendor: nvidia\n    match: {pci: 10de:2330}\n"
                 "    memory_gb: 8\n    node_selector: a=b\n",
                 -EINVAL, "t.yaml:2:5:", "missing required field 'container_resource'");
    expect_error("classes:\n  - name: x\n    vendor: nvidia\n    match: {pci: 10de:2330}\n"
                 "    memory_gb: 8\n    container_resource: nvidia.com/gpu\n",
                 -EINVAL, "t.yaml:2:5:", "missing required field 'node_selector'");
    expect_error("classes:\n  - name: a\n    vendor: apple\n    owner_only: true\n", -EINVAL,
                 "t.yaml:2:5:", "needs match.apple_memory_gb");
}

Test(catalog, r8_bad_numbers_are_errors) {
    expect_error("classes:\n  - name: a\n    vendor: nvidia\n    memory_gb: 8O\n", -EINVAL,
                 "t.yaml:4:16:", "bad number '8O'");
    expect_error("classes:\n  - name: a\n    vendor: nvidia\n    memory_gb: -4\n", -EINVAL,
                 "t.yaml:4:16:", "bad number '-4'");
    expect_error("classes:\n  - name: a\n    vendor: nvidia\n    memory_gb: 0\n", -EINVAL,
                 "t.yaml:4:16:", "above 0");
    expect_error("classes:\n  - name: a\n    vendor: nvidia\n    memory_gb: 99999999999999999999\n",
                 -ERANGE, "t.yaml:4:16:", "at most");
    expect_error("classes:\n  - name: a\n    vendor: nvidia\n    match: {pci: 10de:23x0}\n",
                 -EINVAL, "t.yaml:4:18:", "bad PCI id '10de:23x0'");
    expect_error("classes:\n  - name: a\n    vendor: cpu\n    consumer: maybe\n", -EINVAL,
                 "t.yaml:4:15:", "true or false");
}

Test(catalog, r2c_mig_profile_on_a_card_without_mig_is_an_error) {
    /* L40S: 48 GB, not in the SPEC table, and no profile of its memory */
    expect_error(
            "classes:\n  - name: nvidia-l40s\n    vendor: nvidia\n    match: {pci: 10de:26b9}\n"
            "    memory_gb: 48\n    container_resource: nvidia.com/gpu\n    node_selector: a=b\n"
            "    mig_profiles: [1g.10gb]\n",
            -EINVAL, "t.yaml:2:5:", "MIG profile '1g.10gb' does not fit a 48 GB card");
    /* a consumer card never has MIG (R9), even at a MIG card's memory size */
    expect_error("classes:\n  - name: rtx\n    vendor: nvidia\n    match: {pci: 10de:2684}\n"
                 "    memory_gb: 80\n    consumer: true\n    container_resource: nvidia.com/gpu\n"
                 "    node_selector: a=b\n    mig_profiles: [1g.10gb]\n",
                 -EINVAL, "t.yaml:2:5:", "consumer cards have no MIG");
    expect_error("classes:\n  - name: mi\n    vendor: amd\n    match: {pci: 1002:74a1}\n"
                 "    memory_gb: 80\n    container_resource: amd.com/gpu\n    node_selector: a=b\n"
                 "    mig_profiles: [1g.10gb]\n",
                 -EINVAL, "t.yaml:2:5:", "only NVIDIA cards have MIG");
}

#define CARD(gb, profiles)                                                                         \
    "classes:\n  - name: card\n    vendor: nvidia\n    match: {pci: 10de:2321}\n"                  \
    "    memory_gb: " #gb "\n    container_resource: nvidia.com/gpu\n    node_selector: a=b\n"     \
    "    mig_profiles: [" profiles "]\n"

/* R2c: MIG-capable cards are "A100, H100, H200, B200 and similar, as NVML reports": a card
 * outside the SPEC's table (an H100 NVL, a GH200) lists its profiles, measured by the memory
 * slots their compute slices take. */
Test(catalog, r2c_mig_profiles_of_a_card_outside_the_spec_table_are_accepted) {
    static const struct {
        const char *text;
        const char *slice;
        MigShape shape;
    } cards[] = {
            {CARD(94, "1g.12gb, 1g.24gb, 2g.24gb, 3g.47gb, 4g.47gb, 7g.94gb"), "card-mig-1g.24gb",
             MIG_SHAPE_1G_DOUBLE},
            {CARD(94, "1g.12gb, 1g.24gb, 2g.24gb, 3g.47gb, 4g.47gb, 7g.94gb"), "card-mig-3g.47gb",
             MIG_SHAPE_3G},
            {CARD(96, "1g.12gb, 1g.24gb, 2g.24gb, 3g.48gb, 4g.48gb, 7g.96gb"), "card-mig-1g.12gb",
             MIG_SHAPE_1G},
            {CARD(96, "1g.12gb, 1g.24gb, 2g.24gb, 3g.48gb, 4g.48gb, 7g.96gb"), "card-mig-7g.96gb",
             MIG_SHAPE_7G},
    };
    for (size_t i = 0; i < sizeof(cards) / sizeof(cards[0]); i++) {
        Catalog *cat = NULL;
        Error err = {0};
        cr_assert_eq(parse(cards[i].text, &cat, &err), 0, "%s", err.message);
        const GpuClass *s = catalog_find(cat, cards[i].slice);
        cr_assert_not_null(s, "%s", cards[i].slice);
        cr_expect_eq(s->mig_shape, cards[i].shape, "%s", cards[i].slice);
        catalog_free(cat);
    }
    /* Well-formed, but not the memory of the slots its compute slices take. */
    expect_error(CARD(94, "3g.30gb"), -EINVAL,
                 "t.yaml:2:5:", "MIG profile '3g.30gb' does not fit a 94 GB card");
    expect_error(CARD(94, "5g.60gb"), -EINVAL, "t.yaml:2:5:", "does not fit a 94 GB card");
    expect_error(CARD(94, "7g.120gb"), -EINVAL, "t.yaml:2:5:", "does not fit a 94 GB card");
    expect_error(CARD(94, "1g.12gb, 1g.11gb"), -EINVAL,
                 "t.yaml:2:5:", "'1g.12gb' and '1g.11gb' are one shape of slice");
}

Test(catalog, r2c_mig_profile_that_does_not_fit_the_card_memory_is_an_error) {
    expect_error(
            "classes:\n  - name: a100\n    vendor: nvidia\n    match: {pci: 10de:20f1}\n"
            "    memory_gb: 40\n    container_resource: nvidia.com/gpu\n    node_selector: a=b\n"
            "    mig_profiles: [1g.5gb, 1g.20gb]\n",
            -EINVAL, "t.yaml:2:5:", "MIG profile '1g.20gb' does not fit a 40 GB card");
    expect_error(H100 "    mig_profiles: [1g.10gb, 1g.10gb]\n", -EINVAL,
                 "t.yaml:2:5:", "listed twice");
    expect_error(H100 "    mig_profiles: [big]\n", -EINVAL,
                 "t.yaml:8:20:", "bad MIG profile 'big'");
    expect_error(H100 "  - name: s\n    vendor: nvidia\n    mig: {parent: nvidia-h100-80gb, "
                      "profile: 1g.10gb}\n"
                      "    container_resource: nvidia.com/mig-1g.10gb\n    node_selector: a=b\n",
                 -EINVAL, "t.yaml:8:5:", "not a card class that lists MIG profile '1g.10gb'");
}

Test(catalog, r8_explicit_mig_slice_class_replaces_the_derived_one) {
    Catalog *cat = NULL;
    Error err = {0};
    cr_assert_eq(parse(H100
                       "    mig_profiles: [1g.10gb]\n"
                       "  - name: nvidia-h100-80gb-mig-1g.10gb\n    vendor: nvidia\n"
                       "    mig: {parent: nvidia-h100-80gb, profile: 1g.10gb}\n"
                       "    container_resource: nvidia.com/mig-1g.10gb\n    node_selector: x=y\n"
                       "    internal_only: true\n",
                       &cat, &err),
                 0, "%s", err.message);
    cr_assert_eq(cat->n_classes, 3, "card, its slice, and cpu (R11: always offered)");
    const GpuClass *s = catalog_find(cat, "nvidia-h100-80gb-mig-1g.10gb");
    cr_expect(!s->derived && s->internal_only);
    cr_expect_eq(s->memory_gb, 10);
    cr_expect_eq(s->mig_parent_index, 0);
    catalog_free(cat);
}

Test(catalog, r2d_vgpu_class_is_refused_naming_the_alternatives) {
    expect_error(H100 "    vgpu: true\n", -EOPNOTSUPP,
                 "t.yaml:8:5:", "vGPU is not supported (R2d)");
    expect_error(
            "classes:\n  - name: nvidia-a100-vgpu-8q\n    vendor: nvidia\n", -EOPNOTSUPP,
            "t.yaml:2:5:", "VFIO passthrough to a VM, a whole GPU to a container, or a MIG slice");
}

Test(catalog, r10_apple_class_must_be_owner_only) {
    expect_error("classes:\n  - {name: apple-silicon-16gb, vendor: apple, match: {apple_memory_gb: "
                 "16}}\n",
                 -EINVAL, "t.yaml:2:5:", "owner_only: true (R10)");
}

Test(catalog, r8_yaml_syntax_error_has_position) {
    expect_error("classes:\n  - name: [unclosed\n", -EINVAL, "t.yaml:3:1:", "YAML syntax error");
    expect_error("", -EINVAL, "t.yaml:1:1:", "empty");
    expect_error("classes: []\n", -EINVAL, "t.yaml:1:1:", "no classes");
    expect_error("- a\n- b\n", -EINVAL, "t.yaml:1:1:", "must be a mapping");
    /* "\0" would end the C string early: "cpu\0evil" must not read as the class "cpu". */
    expect_error("classes:\n  - name: \"cpu\\u0000evil\"\n    vendor: cpu\n", -EINVAL,
                 "t.yaml:2:11:", "NUL byte");
    expect_error("classes:\n  - {\"name\\0x\": a, vendor: cpu}\n", -EINVAL,
                 "t.yaml:2:6:", "NUL byte");
}

Test(catalog, r8_unknown_vendor_and_bad_names_are_errors) {
    expect_error("classes:\n  - name: a\n    vendor: matrox\n", -EINVAL,
                 "t.yaml:3:13:", "unknown vendor 'matrox'");
    expect_error("classes:\n  - name: Big_Card\n    vendor: cpu\n", -EINVAL,
                 "t.yaml:2:5:", "class name 'Big_Card' is not valid");
    expect_error("classes:\n  - name: a\n    vendor: nvidia\n    match: {pci: 1002:744c}\n    "
                 "memory_gb: 8\n"
                 "    container_resource: nvidia.com/gpu\n    node_selector: a=b\n",
                 -EINVAL, "t.yaml:2:5:", "does not belong to vendor nvidia");
    expect_error("classes:\n  - name: a\n    vendor: nvidia\n    match: {pci: 10de:2330}\n    "
                 "memory_gb: 8\n"
                 "    container_resource: gpu\n    node_selector: a=b\n",
                 -EINVAL, "t.yaml:2:5:", "container_resource 'gpu' is not a resource name");
}

/* R6: KubeVirt-style names from Debian's real pci.ids. */
static void expect_vm_name(uint16_t device, const char *want, VmNameSource source) {
    char yaml[512];
    snprintf(yaml, sizeof(yaml),
             "classes:\n  - name: c\n    vendor: nvidia\n    match: {pci: 10de:%04x}\n    "
             "memory_gb: 8\n"
             "    container_resource: nvidia.com/gpu\n    node_selector: a=b\n",
             device);
    Catalog *cat = NULL;
    Error err = {0};
    cr_assert_eq(parse(yaml, &cat, &err), 0, "%s", err.message);
    cr_expect_str_eq(cat->classes[0].vm_device_name, want, "device %04x", device);
    cr_expect_eq(cat->classes[0].vm_device_name_source, source, "device %04x", device);
    catalog_free(cat);
}

Test(catalog, r6_vm_device_name_from_real_pci_ids) {
    expect_vm_name(0x2331, "nvidia.com/GH100_H100_PCIE", VM_NAME_PCI_IDS); /* GH100 [H100 PCIe] */
    expect_vm_name(0x20b2, "nvidia.com/GA100_A100_SXM4_80GB",
                   VM_NAME_PCI_IDS); /* GA100 [A100 SXM4 80GB] */
    expect_vm_name(0x20f1, "nvidia.com/GA100_A100_PCIE_40GB",
                   VM_NAME_PCI_IDS); /* GA100 [A100 PCIe 40GB] */
    expect_vm_name(0x2684, "nvidia.com/AD102_GEFORCE_RTX_4090",
                   VM_NAME_PCI_IDS); /* AD102 [GeForce RTX 4090] */
    expect_vm_name(0x26b5, "nvidia.com/AD102GL_L40", VM_NAME_PCI_IDS); /* AD102GL [L40] */
    expect_vm_name(0x2236, "nvidia.com/GA102GL_A10", VM_NAME_PCI_IDS); /* GA102GL [A10] */
    /* Debian 12's pci.ids writes "GH100[H100 SXM5 80GB]" without the space */
    expect_vm_name(0x2330, "nvidia.com/GH100H100_SXM5_80GB", VM_NAME_PCI_IDS);
    /* not in this pci.ids (H200, B200): the raw id, as the device plugin falls back */
    expect_vm_name(0x2335, "nvidia.com/2335", VM_NAME_RAW_ID);
    expect_vm_name(0x26b9, "nvidia.com/26b9", VM_NAME_RAW_ID);
}

Test(catalog, r6_vm_device_name_rule_on_literal_names) {
    struct {
        const char *in, *want;
    } cases[] = {
            {"GH100 [H100 SXM5 80GB]", "nvidia.com/GH100_H100_SXM5_80GB"},
            {"GA100 [A100-SXM4-40GB]", "nvidia.com/GA100_A100SXM440GB"},
            {"TU104GL [Tesla T4]", "nvidia.com/TU104GL_TESLA_T4"},
            {"GV100GL [Tesla V100 SXM2 32GB]", "nvidia.com/GV100GL_TESLA_V100_SXM2_32GB"},
            {"GP100GL [Tesla P100 PCIe 12/16GB]", "nvidia.com/GP100GL_TESLA_P100_PCIE_12_16GB"},
            {"AD102 [GeForce RTX 4090 D]", "nvidia.com/AD102_GEFORCE_RTX_4090_D"},
            {"GB202 [GeForce RTX 5090] (rev a1)", "nvidia.com/GB202_GEFORCE_RTX_5090_REV_A1"},
            {"Device 2.0", "nvidia.com/DEVICE_2_0"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *got = vm_device_name_derive(cases[i].in, 0);
        cr_expect_str_eq(got, cases[i].want, "'%s'", cases[i].in);
        free(got);
    }
    char *raw = vm_device_name_derive(NULL, 0x2b85);
    cr_expect_str_eq(raw, "nvidia.com/2b85"); /* the sysfs id as written: lower case */
    free(raw);
}

Test(catalog, r6_explicit_vm_device_name_wins) {
    Catalog *cat = NULL;
    Error err = {0};
    cr_assert_eq(parse(H100 "    vm_device_name: nvidia.com/H100_SXM\n", &cat, &err), 0, "%s",
                 err.message);
    cr_expect_str_eq(cat->classes[0].vm_device_name, "nvidia.com/H100_SXM");
    cr_expect_eq(cat->classes[0].vm_device_name_source, VM_NAME_CATALOG);
    catalog_free(cat);
}

Test(catalog, r6_stated_vm_device_name_is_checked_against_the_hosts_pci_ids) {
    Catalog *cat = NULL;
    Error err = {0};
    /* Debian 12 spells 10de:2330 "GH100[H100 SXM5 80GB]"; the plugin's newer pci.ids does not. */
    cr_assert_eq(parse(H100 "    vm_device_name: nvidia.com/GH100_H100_SXM5_80GB\n", &cat, &err), 0,
                 "%s", err.message);
    cr_expect_str_eq(cat->classes[0].vm_device_name, "nvidia.com/GH100_H100_SXM5_80GB",
                     "the catalog wins");
    cr_expect_eq(cat->classes[0].vm_device_name_source, VM_NAME_CATALOG);
    cr_expect_str_eq(cat->classes[0].vm_device_name_derived, "nvidia.com/GH100H100_SXM5_80GB",
                     "the host's derivation is kept for the warning");
    catalog_free(cat);
    cat = NULL;
    cr_assert_eq(parse("classes:\n  - name: c\n    vendor: nvidia\n    match: {pci: 10de:2331}\n"
                       "    memory_gb: 80\n    container_resource: nvidia.com/gpu\n    "
                       "node_selector: a=b\n"
                       "    vm_device_name: nvidia.com/GH100_H100_PCIE\n",
                       &cat, &err),
                 0, "%s", err.message);
    cr_expect_null(cat->classes[0].vm_device_name_derived, "the same name: nothing to warn about");
    catalog_free(cat);
}

Test(catalog, r6_shipped_datacenter_classes_state_the_device_plugins_names) {
    Catalog *cat = NULL;
    Error err = {0};
    cr_assert_eq(catalog_load_file(TEST_DATA "/catalog.yaml", ids, &cat, &err), 0, "%s",
                 err.message);
    static const struct {
        const char *cls, *name;
    } want[] = {
            {"nvidia-h100-80gb", "nvidia.com/GH100_H100_SXM5_80GB"},
            {"nvidia-h100-80gb-pcie", "nvidia.com/GH100_H100_PCIE"},
            {"nvidia-h200-141gb", "nvidia.com/GH100_H200_SXM_141GB"},
            {"nvidia-b200-180gb", "nvidia.com/GB100_B200"},
            {"nvidia-a100-80gb", "nvidia.com/GA100_A100_SXM4_80GB"},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const GpuClass *g = catalog_find(cat, want[i].cls);
        cr_assert_not_null(g, "%s", want[i].cls);
        cr_expect_str_eq(g->vm_device_name, want[i].name);
        cr_expect_eq(g->vm_device_name_source, VM_NAME_CATALOG, "%s", want[i].cls);
    }
    /* Every MIG-capable (datacenter) NVIDIA card states it. */
    for (size_t i = 0; i < cat->n_classes; i++) {
        const GpuClass *g = &cat->classes[i];
        if (g->vendor == VENDOR_NVIDIA && g->n_mig_profiles)
            cr_expect_eq(g->vm_device_name_source, VM_NAME_CATALOG, "%s", g->name);
    }
    catalog_free(cat);
}

Test(catalog, r8_matching_and_unclassified_devices) {
    Catalog *cat = NULL;
    Error err = {0};
    cr_assert_eq(catalog_load_file(TEST_DATA "/catalog.yaml", ids, &cat, &err), 0, "%s",
                 err.message);
    cr_expect_str_eq(catalog_match_pci(cat, 0x10de, 0x2330)->name, "nvidia-h100-80gb");
    cr_expect_str_eq(catalog_match_pci(cat, 0x1002, 0x74a1)->name, "amd-mi300x");
    cr_expect_null(catalog_match_pci(cat, 0x10de, 0x1eb8), "a T4 is in no class: unclassified");
    cr_expect_str_eq(catalog_match_nvml(cat, "NVIDIA H200")->name, "nvidia-h200-141gb");
    cr_expect_null(catalog_match_nvml(cat, "Tesla T4"));
    /* R10: a Mac gets the largest tier not above its unified memory */
    cr_expect_str_eq(catalog_match_apple(cat, 36)->name, "apple-silicon-32gb");
    cr_expect_str_eq(catalog_match_apple(cat, 16)->name, "apple-silicon-16gb");
    cr_expect_str_eq(catalog_match_apple(cat, 192)->name, "apple-silicon-128gb");
    cr_expect_null(catalog_match_apple(cat, 8), "an 8 GB Mac is below every tier: unclassified");
    catalog_free(cat);
}

Test(catalog, r8_loading_without_pci_ids_uses_raw_ids) {
    Catalog *cat = NULL;
    Error err = {0};
    const char *text = H100;
    cr_assert_eq(catalog_parse_yaml(text, strlen(text), "t.yaml", NULL, &cat, &err), 0);
    cr_expect_str_eq(cat->classes[0].vm_device_name, "nvidia.com/2330");
    catalog_free(cat);
}

/* R8: a device matches one class, by the first rule that hits: a PCI id, an NVML name or an
 * Apple tier listed by two classes, a class named as another's MIG slice, or named
 * "unclassified" or "cpu" without being the cpu class, would classify devices wrongly
 * without a word. Each is refused at the class that repeats it. */
Test(catalog, r8_a_catalog_that_would_classify_ambiguously_is_refused) {
    expect_error(H100 "  - name: other-h100\n    vendor: nvidia\n    match: {pci: 10de:2330}\n"
                      "    memory_gb: 80\n    container_resource: nvidia.com/gpu\n"
                      "    node_selector: a=b\n",
                 -EINVAL, "t.yaml:8:5:", "PCI id 10de:2330 is class 'nvidia-h100-80gb''s already");
    expect_error(H100 "  - name: cpu\n    vendor: nvidia\n    match: {pci: 10de:2331}\n"
                      "    memory_gb: 141\n    container_resource: nvidia.com/gpu\n"
                      "    node_selector: a=b\n",
                 -EINVAL, "t.yaml:8:5:", "the cpu class is named cpu");
    expect_error(H100 "  - name: unclassified\n    vendor: cpu\n", -EINVAL,
                 "t.yaml:8:5:", "is what every view shows");
    expect_error("classes:\n"
                 "  - {name: apple-a, vendor: apple, match: {apple_memory_gb: 16}, owner_only: "
                 "true}\n"
                 "  - {name: apple-b, vendor: apple, match: {apple_memory_gb: 16}, owner_only: "
                 "true}\n",
                 -EINVAL, "t.yaml:3:5:", "Apple tier 16 GB is class 'apple-a''s already");
    /* A whole card named as another card's derived slice class. */
    expect_error(H100 "    mig_profiles: [1g.10gb]\n"
                      "  - name: nvidia-h100-80gb-mig-1g.10gb\n    vendor: nvidia\n"
                      "    match: {pci: 10de:2331}\n    memory_gb: 141\n"
                      "    container_resource: nvidia.com/gpu\n    node_selector: a=b\n",
                 -EINVAL, "t.yaml:", "takes the name of class 'nvidia-h100-80gb''s MIG 1g.10gb");
}

/* R11: every machine offers cpu, also under a catalog that leaves the class out. */
Test(catalog, r11_a_catalog_without_cpu_still_has_the_cpu_class) {
    Catalog *cat = NULL;
    Error err = {0};
    cr_assert_eq(parse(H100, &cat, &err), 0, "%s", err.message);
    const GpuClass *cpu = catalog_find(cat, "cpu");
    cr_assert(cpu && cpu->vendor == VENDOR_CPU && cpu->derived);
    catalog_free(cat);
}

/* A second YAML document would be read by nobody: refused where it starts. */
Test(catalog, bad_input_a_second_yaml_document_is_refused) {
    expect_error(H100 "---\nclasses: []\n", -EINVAL,
                 "t.yaml:8:1:", "a second YAML document ('---') follows the first");
}
