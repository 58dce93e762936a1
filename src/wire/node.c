/* node.c: the node description shape (node.h). */
#include "wire/node.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/mig.h"
#include "util/macro.h"
#include "wire/pci-address.h"

static_assert(sizeof(SiteKind) == sizeof(int) && sizeof(Platform) == sizeof(int) &&
                      sizeof(NodeMode) == sizeof(int) && sizeof(Binding) == sizeof(int),
              "WIRE_ENUM stores an int");

static int site_kind_parse(const char *s) {
    return (int)site_kind_from_string(s);
}

static int platform_parse(const char *s) {
    return (int)platform_from_string(s);
}

/* "none" is the core's absence, never a value a client names; vm-vgpu is named so that it
 * is refused with its own sentence below (R2d). */
static int mode_parse(const char *s) {
    NodeMode m = node_mode_from_string(s);
    return m == NODE_MODE_NONE ? -1 : (int)m;
}

static int binding_parse(const char *s) {
    return (int)binding_from_string(s);
}

/* nvidia.com/NAME, NAME of letters, digits, '.', '_', '-'. */
static bool device_resource_is_valid(const char *s) {
    if (strncmp(s, "nvidia.com/", 11) != 0 || !s[11])
        return false;
    for (const char *p = s + 11; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '_' || *p == '-'))
            return false;
    return true;
}

static const WireField mig_fields[] = {
        WIRE_F_STRING(ApiMigInstance, "profile", profile, true),
        /* Where the instance sits on the GPU's memory slots: 0 is a slot like any other, so a
         * missing one is refused rather than taken as slot 0 (docs/openapi.yaml). */
        WIRE_F_UINT_REQ(ApiMigInstance, "start", start, 0, 7),
        WIRE_F_BOOL(ApiMigInstance, "busy", busy),
};

/* Decoded by device_from_json itself, which knows the device's index for its sentences. */
static int decode_later(json_t *v, void *obj, Error *err) {
    return 0;
}

static const WireField device_fields[] = {
        WIRE_F_STRING(ApiDevice, "pci", pci, false),
        WIRE_F_STRING(ApiDevice, "class", cls, false),
        WIRE_F_STRING(ApiDevice, "pci_id", pci_id, false),
        WIRE_F_UINT(ApiDevice, "memory_gb", memory_gb, 0, 1u << 20),
        WIRE_F_ENUM(ApiDevice, "binding", binding, false, binding_parse, "host or vfio"),
        WIRE_F_BOOL(ApiDevice, "mig_enabled", mig_enabled),
        WIRE_F_CUSTOM("mig", decode_later),
        WIRE_F_CUSTOM("mig_profiles", decode_later),
        WIRE_F_BOOL(ApiDevice, "reset_verified", reset_verified),
        WIRE_F_STRING(ApiDevice, "quarantined", quarantine_reason, false),
};

/* "10de:2335": four lower-case hex digits, a colon, four more. */
static bool pci_id_is_valid(const char *s) {
    for (size_t i = 0; i < 9; i++)
        if (i == 4 ? s[i] != ':' : !((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return s[9] == 0;
}

static int device_from_json(json_t *j, size_t idx, ApiDevice *d, Error *err) {
    char what[48];
    snprintf(what, sizeof(what), "device %zu", idx);
    memset(d, 0, sizeof(*d)); /* all of it: a round trip compares the bytes */
    d->binding = BINDING_HOST;
    int k = wire_decode(j, what, device_fields, ARRAY_SIZE(device_fields), d, err);
    if (k < 0)
        return k;
    d->quarantined = json_object_get(j, "quarantined") != NULL;
    if (d->cls[0] && !wire_name_is_valid(d->cls))
        return error_set(err, -EINVAL, "device %zu: 'class' is not a valid class name", idx);
    if (d->pci_id[0] && !pci_id_is_valid(d->pci_id))
        return error_set(err, -EINVAL,
                         "device %zu: 'pci_id' must be the PCI vendor:device ids "
                         "in lower-case hex, such as 10de:2335",
                         idx);
    json_t *mig = json_object_get(j, "mig");
    if (mig) {
        if (!json_is_array(mig) || json_array_size(mig) > SPEC_MAX_MIG)
            return error_set(err, -EINVAL,
                             "device %zu: 'mig' must be a list of at most %d instances", idx,
                             SPEC_MAX_MIG);
        size_t i;
        json_t *v;
        json_array_foreach(mig, i, v) {
            ApiMigInstance *m = &d->mig[d->n_mig++];
            if ((k = wire_decode(v, "a MIG instance", mig_fields, ARRAY_SIZE(mig_fields), m, err)) <
                0)
                return k;
        }
        /* Instances mean MIG is on: said so by leaving mig_enabled out, or true. Said off
         * beside instances, the description contradicts itself and is refused, not taken
         * either way (R2c). */
        if (d->n_mig && json_is_false(json_object_get(j, "mig_enabled")))
            return error_set(err, -EINVAL,
                             "device %zu: 'mig_enabled' is false but 'mig' lists %zu instance(s)",
                             idx, d->n_mig);
        d->mig_enabled = d->mig_enabled || d->n_mig > 0;
    }
    json_t *profiles = json_object_get(j, "mig_profiles");
    if (profiles) {
        if (!json_is_array(profiles) || json_array_size(profiles) > SPEC_MAX_MIG_PROFILES)
            return error_set(err, -EINVAL,
                             "device %zu: 'mig_profiles' must be a list of at most %d MIG "
                             "profile names",
                             idx, SPEC_MAX_MIG_PROFILES);
        d->mig_profiles_given = true;
        size_t i;
        json_t *v;
        json_array_foreach(profiles, i, v) {
            const char *p = json_string_value(v);
            if (!p || strlen(p) >= sizeof(d->mig_profiles[0]))
                return error_set(err, -EINVAL,
                                 "device %zu: entry %zu of 'mig_profiles' is not a MIG profile "
                                 "name such as 1g.10gb",
                                 idx, i);
            strcpy(d->mig_profiles[d->n_mig_profiles++], p);
        }
    }
    return 0;
}

static int decode_caps(json_t *caps, void *obj, Error *err) {
    ApiNode *n = obj;
    if (!json_is_array(caps) || json_array_size(caps) > SPEC_MAX_CAPS)
        return error_set(err, -EINVAL, "field 'capabilities' must be a list of at most %d names",
                         SPEC_MAX_CAPS);
    size_t i;
    json_t *v;
    json_array_foreach(caps, i, v) {
        const char *s = json_string_value(v);
        if (!s || strlen(s) >= sizeof(n->caps[0]) || !wire_name_is_valid(s))
            return error_set(err, -EINVAL, "entry %zu of 'capabilities' is not a name", i);
        strcpy(n->caps[n->n_caps++], s);
    }
    return 0;
}

static int decode_devices(json_t *devs, void *obj, Error *err) {
    ApiNode *n = obj;
    if (!json_is_array(devs) || json_array_size(devs) > SPEC_MAX_DEVICES)
        return error_set(err, -EINVAL, "field 'devices' must be a list of at most %d devices",
                         SPEC_MAX_DEVICES);
    size_t i;
    json_t *v;
    json_array_foreach(devs, i, v) {
        int k = device_from_json(v, i, &n->devices[n->n_devices++], err);
        if (k < 0)
            return k;
        /* One PCI address is one device: a second entry would let the core hand the same GPU
         * to two workloads. A Kubernetes node's GPUs have no address (its device plugin picks
         * which one a Pod gets), so only addresses that are given count. */
        for (size_t d = 0; d + 1 < n->n_devices && n->devices[i].pci[0]; d++)
            if (STREQ(n->devices[d].pci, n->devices[i].pci))
                return error_set(err, -EINVAL, "devices %zu and %zu have the same PCI address %s",
                                 d, i, n->devices[i].pci);
    }
    return 0;
}

static const WireField node_fields[] = {
        WIRE_F_STRING(ApiNode, "name", name, true),
        WIRE_F_STRING(ApiNode, "site", site, true),
        WIRE_F_ENUM(ApiNode, "site_kind", site_kind, true, site_kind_parse,
                    "solo, lab or datacenter"),
        WIRE_F_ENUM(ApiNode, "platform", platform, true, platform_parse, "linux or macos"),
        WIRE_F_STRING(ApiNode, "owner", owner, true),
        WIRE_F_ENUM_OPT(ApiNode, "mode", mode, mode_parse, "container or vm-passthrough"),
        WIRE_F_BOOL(ApiNode, "cordoned", cordoned),
        WIRE_F_STRING(ApiNode, "cordon_reason", cordon_reason, false),
        WIRE_F_UINT(ApiNode, "cpus", cpus, 0, 1u << 16),
        WIRE_F_UINT(ApiNode, "time_slice_replicas", time_slice_replicas, 0, 64),
        WIRE_F_UINT(ApiNode, "apple_unified_memory_gb", apple_unified_memory_gb, 0, 1u << 16),
        WIRE_F_UINT(ApiNode, "apple_usable_memory_gb", apple_usable_memory_gb, 0, 1u << 16),
        WIRE_F_STRING(ApiNode, "device_resource", device_resource, false),
        WIRE_F_CUSTOM("capabilities", decode_caps),
        WIRE_F_CUSTOM("devices", decode_devices),
};

int api_node_from_json(json_t *j, ApiNode *ret, Error *err) {
    ApiNode *n = ret;
    memset(n, 0, sizeof(*n));
    n->mode = NODE_MODE_NONE;
    int k = wire_decode(j, "a node", node_fields, ARRAY_SIZE(node_fields), n, err);
    if (k < 0)
        return k;
    n->apple_usable_given = json_object_get(j, "apple_usable_memory_gb") != NULL;
    if (n->device_resource[0] && !device_resource_is_valid(n->device_resource))
        return error_set(
                err, -EINVAL,
                "field 'device_resource' must be a resource like nvidia.com/GH100_H100_SXM5_80GB");
    if (!wire_name_is_valid(n->site))
        return error_set(err, -EINVAL, "field 'site' must be 1-63 of a-z, 0-9, '.', '_', '-'");
    if (!wire_name_is_valid(n->name))
        return error_set(err, -EINVAL, "field 'name' must be 1-63 of a-z, 0-9, '.', '_', '-'");
    if (!wire_name_is_valid(n->owner))
        return error_set(err, -EINVAL, "field 'owner' is not a valid user name");
    if (n->mode == NODE_MODE_VM_VGPU)
        return error_set(err, -EINVAL,
                         "node mode vm-vgpu is not supported (R2d); use "
                         "vm-passthrough or container");
    if (n->site_kind == SITE_DATACENTER) {
        /* R3: a datacenter node's mode is never a silent default. */
        if (n->mode == NODE_MODE_NONE)
            return error_set(err, -EINVAL,
                             "a datacenter node needs 'mode' (container or "
                             "vm-passthrough, R3)");
        /* A GPU's binding left out is its node's mode's (R3), as the core takes it; one given
         * is what the machine has, which the control plane holds to the mode. */
        json_t *devs = json_object_get(j, "devices");
        for (size_t i = 0; i < n->n_devices && i < json_array_size(devs); i++)
            if (!json_object_get(json_array_get(devs, i), "binding"))
                n->devices[i].binding =
                        n->mode == NODE_MODE_VM_PASSTHROUGH ? BINDING_VFIO : BINDING_HOST;
    } else if (n->mode != NODE_MODE_NONE)
        return error_set(err, -EINVAL,
                         "field 'mode' applies to datacenter nodes only; lab and "
                         "solo machines switch per GPU (R7)");
    return 0;
}

int api_node_parse(const char *text, size_t len, ApiNode *ret, Error *err) {
    json_t *j;
    int r = wire_parse_text(text, len, &j, err);
    if (r < 0)
        return r;
    r = api_node_from_json(j, ret, err);
    json_decref(j);
    return r;
}

/* The memory slots a reported MIG instance takes and where it may start, from its profile
 * name ("3g.40gb", maybe with a suffix such as "+me"): on a card in the SPEC's table (by its
 * memory) the profile must be one of its row's, which also tells a double-memory 1g from a
 * plain one; a card outside the table (an A30, an H100 NVL) is measured by its compute
 * slices alone, so that real cards are not refused. */
static bool mig_instance_geometry(const char *profile, unsigned card_gb, unsigned *ret_slots,
                                  uint8_t *ret_starts) {
    char base[sizeof(((ApiMigInstance *)0)->profile)];
    snprintf(base, sizeof(base), "%.*s", (int)strcspn(profile, "+"), profile);
    if (!mig_profile_memory_gb(base))
        return false;
    const MigCardRow *row = mig_card_row_for_memory(card_gb);
    MigShape shape = mig_row_profile_shape(row, base);
    if (shape == _MIG_SHAPE_INVALID && row)
        return false; /* another card's profile (1g.5gb on an 80 GB card) */
    if (shape == _MIG_SHAPE_INVALID) {
        static const MigShape by_slices[] = {[1] = MIG_SHAPE_1G,
                                             [2] = MIG_SHAPE_2G,
                                             [3] = MIG_SHAPE_3G,
                                             [4] = MIG_SHAPE_4G,
                                             [7] = MIG_SHAPE_7G};
        unsigned g = (unsigned)(base[0] - '0');
        if (base[1] != 'g' || g >= ARRAY_SIZE(by_slices) || (g != 1 && !by_slices[g]))
            return false;
        shape = by_slices[g];
    }
    const MigShapeInfo *info = mig_shape_info(shape);
    *ret_slots = info->mem_slots;
    *ret_starts = info->start_mask;
    return true;
}

uint8_t api_mig_instance_slots(const ApiDevice *d, size_t m) {
    unsigned slots;
    uint8_t starts;
    if (m >= d->n_mig ||
        !mig_instance_geometry(d->mig[m].profile, (unsigned)d->memory_gb, &slots, &starts) ||
        d->mig[m].start >= MIG_SLOTS || slots > MIG_SLOTS - d->mig[m].start)
        return 0;
    return (uint8_t)(((1u << slots) - 1u) << d->mig[m].start);
}

bool api_mig_profile_fits(const char *profile, unsigned card_gb) {
    unsigned slots;
    uint8_t starts;
    return strlen(profile) < sizeof(((ApiMigInstance *)0)->profile) && !strchr(profile, '+') &&
           mig_instance_geometry(profile, card_gb, &slots, &starts);
}

/* The MIG profiles a device says NVML offers (R2c): profiles of this card, each once. */
static int check_mig_profiles(const ApiDevice *d, size_t idx, Error *err) {
    for (size_t i = 0; i < d->n_mig_profiles; i++) {
        const char *p = d->mig_profiles[i];
        if (!api_mig_profile_fits(p, d->memory_gb)) {
            const MigCardRow *row = mig_card_row_for_memory(d->memory_gb);
            return error_set(err, -EINVAL,
                             "device %zu: 'mig_profiles' entry '%s' is not a MIG profile of this "
                             "%u GB card (such as %s)",
                             idx, p, d->memory_gb, row ? row->profiles[MIG_SHAPE_3G] : "3g.40gb");
        }
        for (size_t k = 0; k < i; k++)
            if (STREQ(d->mig_profiles[k], p))
                return error_set(err, -EINVAL, "device %zu: MIG profile '%s' is listed twice", idx,
                                 p);
    }
    return 0;
}

/* The MIG instances a device reports fit one GPU's 8 memory slots (SPEC, "MIG profiles"):
 * known profile shapes, allowed start slots, no two on the same slot. */
static int check_mig_layout(const ApiDevice *d, size_t idx, Error *err) {
    const MigCardRow *row = mig_card_row_for_memory((unsigned)d->memory_gb);
    uint8_t used = 0;
    for (size_t m = 0; m < d->n_mig; m++) {
        unsigned slots, start = d->mig[m].start;
        uint8_t starts;
        if (!mig_instance_geometry(d->mig[m].profile, d->memory_gb, &slots, &starts))
            return error_set(err, -EINVAL,
                             "device %zu: MIG instance %zu: '%s' is not a MIG profile of this "
                             "%u GB card (such as %s)",
                             idx, m, d->mig[m].profile, (unsigned)d->memory_gb,
                             row ? row->profiles[MIG_SHAPE_3G] : "3g.40gb");
        if (!(starts & (1u << start)) || slots > MIG_SLOTS - start)
            return error_set(err, -EINVAL,
                             "device %zu: MIG instance %zu (%s) cannot start at memory slot %u",
                             idx, m, d->mig[m].profile, start);
        uint8_t mask = (uint8_t)(((1u << slots) - 1u) << start);
        if (used & mask)
            return error_set(err, -EINVAL,
                             "device %zu: MIG instance %zu (%s at slot %u) overlaps another "
                             "instance on the GPU's memory slots",
                             idx, m, d->mig[m].profile, start);
        used |= mask;
    }
    return 0;
}

/* The capabilities the control plane acts on; anything else would be kept and never honoured. */
static const char *const known_caps[] = {"kata", "mig_in_kata", "mig-in-kata", "k8s"};

int api_node_check_sent(const ApiNode *n, Error *err) {
    if (string_has_control(n->cordon_reason))
        return error_set(err, -EINVAL,
                         "field 'cordon_reason' is one line without control characters");
    for (size_t i = 0; i < n->n_caps; i++) {
        bool known = false;
        for (size_t k = 0; k < ARRAY_SIZE(known_caps) && !known; k++)
            known = STREQ(n->caps[i], known_caps[k]);
        if (!known)
            return error_set(err, -EINVAL,
                             "capability '%s' is not one the control plane acts on (kata, "
                             "mig_in_kata, k8s)",
                             n->caps[i]);
        for (size_t k = 0; k < i; k++)
            if (STREQ(n->caps[i], n->caps[k]))
                return error_set(err, -EINVAL, "capability '%s' is listed twice", n->caps[i]);
    }
    for (size_t i = 0; i < n->n_devices; i++) {
        int r = check_mig_layout(&n->devices[i], i, err);
        if (r < 0 || (r = check_mig_profiles(&n->devices[i], i, err)) < 0)
            return r;
        if (n->devices[i].pci[0] && !pci_bdf_is_valid(n->devices[i].pci))
            return error_set(err, -EINVAL,
                             "device %zu: 'pci' is not a PCI address like 0000:3b:00.0", i);
        if (n->devices[i].quarantined && !n->devices[i].quarantine_reason[0])
            return error_set(err, -EINVAL,
                             "device %zu: 'quarantined' is the reason shown for it (R9), and is "
                             "empty",
                             i);
    }
    /* R10: usable GPU memory is the GPU's wired limit less the owner's headroom, which the
     * Mac's memory bounds (the agent refuses a limit above it): more would let placements
     * promise memory the Mac does not have. */
    if (n->apple_usable_memory_gb > n->apple_unified_memory_gb)
        return error_set(err, -EINVAL,
                         "field 'apple_usable_memory_gb' (%u) is more than "
                         "'apple_unified_memory_gb' (%u): usable GPU memory is part of the "
                         "Mac's memory (R10)",
                         n->apple_usable_memory_gb, n->apple_unified_memory_gb);
    return 0;
}

bool api_node_has_cap(const ApiNode *n, const char *cap) {
    for (size_t i = 0; i < n->n_caps; i++)
        if (STREQ(n->caps[i], cap))
            return true;
    return false;
}

void api_node_write_ext(const ApiNode *n, JsonText *w, const ApiNodeExtras *x) {
    json_text_open(w, '{');
    json_text_member_string(w, "name", n->name);
    json_text_member_string(w, "site", n->site);
    json_text_member_string(w, "site_kind", site_kind_to_string(n->site_kind));
    json_text_member_string(w, "platform", platform_to_string(n->platform));
    json_text_member_string(w, "owner", n->owner);
    json_text_member_bool(w, "cordoned", n->cordoned);
    if (n->cordoned && n->cordon_reason[0])
        json_text_member_string(w, "cordon_reason", n->cordon_reason);
    if (n->mode != NODE_MODE_NONE)
        json_text_member_string(w, "mode", node_mode_to_string(n->mode));
    if (n->device_resource[0])
        json_text_member_string(w, "device_resource", n->device_resource);
    if (n->cpus)
        json_text_member_int(w, "cpus", n->cpus);
    if (n->time_slice_replicas)
        json_text_member_int(w, "time_slice_replicas", n->time_slice_replicas);
    if (n->apple_unified_memory_gb)
        json_text_member_int(w, "apple_unified_memory_gb", n->apple_unified_memory_gb);
    if (n->apple_usable_memory_gb || n->apple_usable_given)
        json_text_member_int(w, "apple_usable_memory_gb", n->apple_usable_memory_gb);
    json_text_key(w, "capabilities");
    json_text_open(w, '[');
    for (size_t i = 0; i < n->n_caps; i++)
        json_text_string(w, n->caps[i]);
    json_text_close(w, ']');
    json_text_key(w, "devices");
    json_text_open(w, '[');
    for (size_t i = 0; i < n->n_devices; i++) {
        const ApiDevice *d = &n->devices[i];
        json_text_open(w, '{');
        json_text_member_string(w, "pci", d->pci);
        json_text_member_string(w, "class", d->cls);
        json_text_member_int(w, "memory_gb", (int)d->memory_gb);
        json_text_member_string(w, "binding", binding_to_string(d->binding));
        if (d->pci_id[0])
            json_text_member_string(w, "pci_id", d->pci_id);
        if (d->mig_enabled) {
            json_text_member_bool(w, "mig_enabled", true);
            json_text_key(w, "mig");
            json_text_open(w, '[');
            for (size_t m = 0; m < d->n_mig; m++) {
                json_text_open(w, '{');
                json_text_member_string(w, "profile", d->mig[m].profile);
                json_text_member_int(w, "start", (int)d->mig[m].start);
                if (d->mig[m].busy)
                    json_text_member_bool(w, "busy", true);
                json_text_close(w, '}');
            }
            json_text_close(w, ']');
        }
        if (d->mig_profiles_given) {
            json_text_key(w, "mig_profiles");
            json_text_open(w, '[');
            for (size_t p = 0; p < d->n_mig_profiles; p++)
                json_text_string(w, d->mig_profiles[p]);
            json_text_close(w, ']');
        }
        if (d->reset_verified)
            json_text_member_bool(w, "reset_verified", true);
        if (d->quarantined)
            json_text_member_string(w, "quarantined", d->quarantine_reason);
        if (x && x->device)
            x->device(w, i, x->userdata);
        json_text_close(w, '}');
    }
    json_text_close(w, ']');
    if (x && x->node)
        x->node(w, x->userdata);
    json_text_close(w, '}');
}

void api_node_write(const ApiNode *n, JsonText *w) {
    api_node_write_ext(n, w, NULL);
}

json_t *api_node_to_json(const ApiNode *n) {
    JsonText w = {.to_tree = true};
    api_node_write(n, &w);
    return json_text_take_tree(&w);
}

char *api_node_text(const ApiNode *n) {
    JsonText w = {0};
    api_node_write(n, &w);
    return json_text_take(&w);
}
