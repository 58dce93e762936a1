/* test-json-text.c: the one-encoder JSON writer (wire/json-text.h) writes the bytes jansson's
 * json_dumps writes, and the tree jansson would hold, so that records and events written
 * without a tree read back as they always did (R16: the stored record is the answer). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"
#include "wire/json-text.h"
#include "wire/node.h"
#include "wire/placement.h"
#include "wire/request.h"

/* json_text of one string value, as text and as a tree; NULL text when it has none. */
static char *string_text(const char *s, json_t **ret_tree) {
    JsonText w = {0}, t = {.to_tree = true};
    json_text_string(&w, s);
    json_text_string(&t, s);
    *ret_tree = json_text_take_tree(&t);
    return json_text_take(&w);
}

static void expect_string_as_jansson(const char *s, const char *what) {
    json_t *tree = NULL, *want_tree = json_string(s);
    char *text = string_text(s, &tree);
    char *want = want_tree ? json_dumps(want_tree, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    cr_assert_not_null(want, "jansson refused %s", what);
    cr_expect(text && STREQ(text, want), "%s: wrote %s, jansson %s", what, text ? text : "(null)",
              want);
    cr_expect(json_equal(tree, want_tree), "%s: the tree differs", what);
    free(text);
    free(want);
    json_decref(tree);
    json_decref(want_tree);
}

Test(json_text, r16_every_ascii_character_is_escaped_as_jansson_escapes_it) {
    for (int c = 1; c < 0x80; c++) {
        char s[4] = {'a', (char)c, 'z', 0}, what[32];
        snprintf(what, sizeof(what), "character 0x%02x", c);
        expect_string_as_jansson(s, what);
    }
    expect_string_as_jansson("", "the empty string");
    expect_string_as_jansson("\"\\/\b\f\n\r\t\x01\x1f\x7f", "every escape at once");
}

/* Valid UTF-8 of every length, at the edges of each length's range. */
Test(json_text, r16_utf8_passes_as_jansson_writes_it) {
    const char *texts[] = {"\xc2\x80",           "\xdf\xbf",         "\xe0\xa0\x80",
                           "\xed\x9f\xbf",       "\xee\x80\x80",     "\xef\xbf\xbf",
                           "gr\xc3\xbc\xc3\x9f", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf",
                           "\xe2\x82\xac 5"};
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        char what[32];
        snprintf(what, sizeof(what), "UTF-8 text %zu", i);
        expect_string_as_jansson(texts[i], what);
    }
    /* And a fixed-seed stream of random code points among ASCII. */
    uint64_t x = 88172645463325252u;
    for (int round = 0; round < 2000; round++) {
        char s[64];
        size_t n = 0;
        while (n < sizeof(s) - 5) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint32_t cp = (uint32_t)(x % 4 == 0 ? x % 0x80 : (x >> 8) % 0x110000);
            if (cp == 0 || (cp >= 0xd800 && cp <= 0xdfff))
                continue;
            if (cp < 0x80)
                s[n++] = (char)cp;
            else if (cp < 0x800)
                s[n++] = (char)(0xc0 | cp >> 6), s[n++] = (char)(0x80 | (cp & 0x3f));
            else if (cp < 0x10000)
                s[n++] = (char)(0xe0 | cp >> 12), s[n++] = (char)(0x80 | ((cp >> 6) & 0x3f)),
                s[n++] = (char)(0x80 | (cp & 0x3f));
            else
                s[n++] = (char)(0xf0 | cp >> 18), s[n++] = (char)(0x80 | ((cp >> 12) & 0x3f)),
                s[n++] = (char)(0x80 | ((cp >> 6) & 0x3f)), s[n++] = (char)(0x80 | (cp & 0x3f));
        }
        s[n] = 0;
        expect_string_as_jansson(s, "a random string");
    }
}

/* jansson holds no string that is not UTF-8, so there is no text to write: the whole output
 * fails, in both forms, rather than store what could not be read back. */
Test(json_text, bad_input_json_text_a_string_that_is_not_utf8_fails_the_output) {
    const char *bad[] = {"\x80",
                         "a\xc0\x80",
                         "\xc1\xbf",
                         "\xe0\x9f\xbf",
                         "\xed\xa0\x80",
                         "\xf4\x90\x80\x80",
                         "\xf5\x80\x80\x80",
                         "\xe2\x82",
                         "\xff",
                         "ok\xc3"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_expect_null(json_string(bad[i]), "jansson took bad text %zu", i);
        JsonText w = {0}, t = {.to_tree = true};
        json_text_open(&w, '{');
        json_text_open(&t, '{');
        json_text_member_string(&w, "k", bad[i]);
        json_text_member_string(&t, "k", bad[i]);
        json_text_close(&w, '}');
        json_text_close(&t, '}');
        char *text = json_text_take(&w);
        json_t *tree = json_text_take_tree(&t);
        cr_expect_null(text, "bad text %zu was written: %s", i, text);
        cr_expect_null(tree, "bad text %zu made a tree", i);
        free(text);
        json_decref(tree);
    }
    JsonText w = {0};
    json_text_string(&w, NULL);
    cr_expect_null(json_text_take(&w), "a NULL string was written");
}

Test(json_text, r16_numbers_nesting_and_separators_are_jansson_s) {
    const int64_t ints[] = {0, 1, -1, 9, 10, -10, 1234567890123, INT64_MAX, INT64_MIN};
    JsonText w = {0}, t = {.to_tree = true};
    for (int pass = 0; pass < 2; pass++) {
        JsonText *o = pass ? &t : &w;
        json_text_open(o, '{');
        json_text_key(o, "ints");
        json_text_open(o, '[');
        for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
            json_text_int(o, ints[i]);
        json_text_close(o, ']');
        json_text_member_bool(o, "yes", true);
        json_text_member_bool(o, "no", false);
        json_text_key(o, "empty");
        json_text_open(o, '{');
        json_text_close(o, '}');
        json_text_key(o, "list");
        json_text_open(o, '[');
        json_text_open(o, '{');
        json_text_member_string(o, "a", "b");
        json_text_close(o, '}');
        json_text_open(o, '[');
        json_text_close(o, ']');
        json_text_raw(o, "[\"x\",1]");
        json_text_close(o, ']');
        json_text_member_raw(o, "raw", "{\"k\":[true,null]}");
        json_text_close(o, '}');
    }
    char *text = json_text_take(&w);
    json_t *tree = json_text_take_tree(&t);
    cr_assert_not_null(text);
    cr_assert_not_null(tree);
    char *want = json_dumps(tree, JSON_COMPACT);
    cr_expect_str_eq(text, want);
    cr_expect_str_eq(text, "{\"ints\":[0,1,-1,9,10,-10,1234567890123,9223372036854775807,"
                           "-9223372036854775808],\"yes\":true,\"no\":false,\"empty\":{},"
                           "\"list\":[{\"a\":\"b\"},[],[\"x\",1]],\"raw\":{\"k\":[true,null]}}");
    free(text);
    free(want);
    json_decref(tree);
}

static char *request_text(const ApiRequest *r) {
    JsonText w = {0};
    api_request_write(r, &w);
    return json_text_take(&w);
}

/* One encoder's two outputs for case i of `what`: the text is the stored bytes and the bytes
 * jansson writes for the tree. Takes text and tree. */
static void expect_stored_bytes(char *text, json_t *tree, const char *stored, const char *what,
                                size_t i) {
    char *dumped = json_dumps(tree, JSON_COMPACT);
    cr_assert_not_null(text, "%s %zu has no text", what, i);
    cr_expect_str_eq(text, stored);
    cr_expect_str_eq(text, dumped, "%s %zu: text and tree differ", what, i);
    free(text);
    free(dumped);
    json_decref(tree);
}

/* Stored records of earlier versions hold these bytes: the text form must not drift. */
Test(json_text, r16_a_request_is_written_as_it_was_stored_before) {
    const char *texts[] = {
            "{\"kind\":\"vm\",\"class\":\"nvidia-h100-80gb\",\"count\":2,\"guest_os\":\"macos\","
            "\"fallback\":[\"cpu\"],\"wait_s\":60,\"wait_for_nodes\":true}",
            "{\"kind\":\"endpoint\",\"count\":1,\"memory_gb\":24,\"share\":true,"
            "\"runtime\":\"llama.cpp\",\"image\":\"img:1\",\"command\":[\"serve\",\"--x "
            "\\\"q\\\"\"],"
            "\"env\":[\"A=1\",\"B=\\u00e9\"],\"model\":\"m\",\"ports\":[8080,9090]}",
            "{\"kind\":\"notebook\",\"class\":\"cpu\",\"count\":1}",
    };
    /* what the old tree encoder wrote for each (members in the tree's insertion order) */
    const char *stored[] = {
            texts[0],
            "{\"kind\":\"endpoint\",\"count\":1,\"memory_gb\":24,\"share\":true,"
            "\"runtime\":\"llama.cpp\",\"image\":\"img:1\",\"command\":[\"serve\",\"--x "
            "\\\"q\\\"\"],"
            "\"env\":[\"A=1\",\"B=\xc3\xa9\"],\"model\":\"m\",\"ports\":[8080,9090]}",
            texts[2],
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        ApiRequest r;
        Error err = {0};
        cr_assert_eq(api_request_parse(texts[i], strlen(texts[i]), &r, &err), 0, "%s", err.message);
        expect_stored_bytes(request_text(&r), api_request_to_json(&r), stored[i], "request", i);
    }
}

Test(json_text, r16_a_placement_is_written_as_it_was_stored_before) {
    Placement mig = {.node = "n1",
                     .class_name = "nvidia-a100-80gb",
                     .method = METHOD_MIG,
                     .container_runtime = CONTAINER_RUNTIME_KATA,
                     .endpoint_runtime = ENDPOINT_RUNTIME_VLLM,
                     .n_devices = 2,
                     .devices = {3, 5},
                     .mig_start = 4,
                     .mig_slots = 2,
                     .fallback_index = 1};
    const char *addrs[] = {"0000:17:00.0", NULL};
    Placement cpu = {.node = "n2",
                     .class_name = "cpu",
                     .method = METHOD_CPU,
                     .cpu_cores = 8,
                     .memory_gb = 16,
                     .fallback_index = -1};
    struct {
        const Placement *p;
        const char *const *addrs;
        const char *stored;
    } cases[] = {
            {&mig, addrs,
             "{\"node\":\"n1\",\"class\":\"nvidia-a100-80gb\",\"method\":\"mig\","
             "\"container_runtime\":\"kata\",\"endpoint_runtime\":\"vllm\",\"devices\":[3,5],"
             "\"addresses\":[\"0000:17:00.0\"],\"fallback_index\":1,\"mig_start\":4,"
             "\"mig_slots\":2}"},
            {&cpu, NULL,
             "{\"node\":\"n2\",\"class\":\"cpu\",\"method\":\"cpu\",\"container_runtime\":\"none\","
             "\"endpoint_runtime\":\"none\",\"devices\":[],\"addresses\":[],"
             "\"fallback_index\":-1,\"cpu_cores\":8,\"memory_gb\":16}"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        JsonText w = {0};
        wire_placement_write(cases[i].p, cases[i].addrs, &w);
        expect_stored_bytes(json_text_take(&w), wire_placement_to_json(cases[i].p, cases[i].addrs),
                            cases[i].stored, "placement", i);
    }
}

/* A node's stored row and ETag come from its text: the bytes the tree encoder wrote before. */
Test(json_text, r16_a_node_is_written_as_it_was_stored_before) {
    const char *stored[] = {
            "{\"name\":\"n1\",\"site\":\"dc1\",\"site_kind\":\"datacenter\",\"platform\":"
            "\"linux\",\"owner\":\"ops\",\"cordoned\":true,\"mode\":\"vm-passthrough\","
            "\"device_resource\":\"nvidia.com/GH100\",\"cpus\":64,\"capabilities\":[\"kata\","
            "\"rdma\"],\"devices\":[{\"pci\":\"0000:17:00.0\",\"class\":\"nvidia-h100-80gb\","
            "\"memory_gb\":80,\"binding\":\"vfio\",\"pci_id\":\"10de:2330\",\"reset_verified\":"
            "true,\"quarantined\":\"fell off the bus\"},{\"pci\":\"0000:18:00.0\",\"class\":"
            "\"nvidia-a100-80gb\",\"memory_gb\":80,\"binding\":\"host\",\"mig_enabled\":true,"
            "\"mig\":[{\"profile\":\"1g.10gb\",\"start\":0},{\"profile\":\"3g.40gb\","
            "\"start\":4}]}]}",
            "{\"name\":\"m1\",\"site\":\"home\",\"site_kind\":\"solo\",\"platform\":"
            "\"macos\",\"owner\":\"ana\",\"cordoned\":false,\"time_slice_replicas\":4,"
            "\"apple_unified_memory_gb\":64,\"apple_usable_memory_gb\":48,\"capabilities\":[],"
            "\"devices\":[]}",
    };
    for (size_t i = 0; i < sizeof(stored) / sizeof(stored[0]); i++) {
        ApiNode *n = calloc(1, sizeof(*n));
        Error err = {0};
        cr_assert_eq(api_node_parse(stored[i], strlen(stored[i]), n, &err), 0, "%s", err.message);
        expect_stored_bytes(api_node_text(n), api_node_to_json(n), stored[i], "node", i);
        free(n);
    }
}

/* A shape without an encoder of its own goes in as its tree: the text is jansson's dump of it,
 * the tree is that tree, and no value fails the whole output. */
Test(json_text, r16_a_tree_value_is_written_as_jansson_dumps_it) {
    JsonText w = {0}, t = {.to_tree = true};
    for (JsonText *x = &w; x; x = x == &w ? &t : NULL) {
        json_text_open(x, '{');
        json_text_key(x, "switch");
        json_text_value(x, json_pack("{s:s, s:[i,i], s:{}}", "step", "drain \"now\"", "gpus", 1, 2,
                                     "empty"));
        json_text_member_int(x, "after", 7);
        json_text_close(x, '}');
    }
    char *text = json_text_take(&w);
    json_t *tree = json_text_take_tree(&t);
    expect_stored_bytes(text, tree,
                        "{\"switch\":{\"step\":\"drain \\\"now\\\"\",\"gpus\":[1,2],"
                        "\"empty\":{}},\"after\":7}",
                        "tree value", 0);
    JsonText bad = {0};
    json_text_open(&bad, '[');
    json_text_value(&bad, NULL);
    json_text_close(&bad, ']');
    cr_expect_null(json_text_take(&bad), "a missing tree was written");
}

/* A reserve is a size hint only: a text shorter than it, one longer (which grows past it) and
 * one reserved after it began all write what no reserve writes, and a tree ignores it. */
Test(json_text, r16_a_reserved_text_writes_the_same_bytes_whatever_its_hint) {
    const size_t hints[] = {0, 1, 8, 40, 4096};
    char *plain = NULL;
    for (size_t h = 0; h <= ARRAY_SIZE(hints); h++) {
        JsonText w = {0};
        if (h < ARRAY_SIZE(hints))
            json_text_reserve(&w, hints[h]);
        json_text_open(&w, '{');
        json_text_member_string(&w, "a", "0123456789012345678901234567890123456789");
        json_text_reserve(&w, 3); /* after it began: room for what comes, not a reset */
        json_text_member_int(&w, "b", -7);
        json_text_close(&w, '}');
        char *text = json_text_take(&w);
        cr_assert(text);
        if (!plain)
            plain = text;
        else {
            cr_expect_str_eq(text, plain, "hint %zu", hints[h]);
            free(text);
        }
    }
    cr_expect_str_eq(plain, "{\"a\":\"0123456789012345678901234567890123456789\",\"b\":-7}");
    free(plain);
    JsonText t = {.to_tree = true};
    json_text_reserve(&t, 100);
    json_text_open(&t, '[');
    json_text_int(&t, 1);
    json_text_close(&t, ']');
    json_t *tree = json_text_take_tree(&t);
    cr_assert(json_is_array(tree) && json_array_size(tree) == 1);
    json_decref(tree);
}

/* A key is written as one piece where it fits a small buffer, in three past it: both the
 * bytes json_dumps writes for the same object. */
Test(json_text, r16_a_key_of_any_length_is_written_as_jansson_writes_it) {
    char long_key[100];
    memset(long_key, 'k', sizeof(long_key) - 1);
    long_key[sizeof(long_key) - 1] = '\0';
    const char *keys[] = {"a", "reason_code", long_key};
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
        JsonText w = {0};
        json_text_open(&w, '{');
        json_text_member_int(&w, keys[i], 1);
        json_text_member_string(&w, "z", "v");
        json_text_close(&w, '}');
        char *text = json_text_take(&w);
        json_t *j = json_pack("{s:i, s:s}", keys[i], 1, "z", "v");
        char *want = json_dumps(j, JSON_COMPACT);
        cr_expect_str_eq(text, want);
        free(text);
        free(want);
        json_decref(j);
    }
}
