/* test-strings.c: the string rules the server relies on: numbers from outside are decimal only,
 * and a message made valid UTF-8 never carries half a sequence. */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "util/strutil.h"

Test(strings, bad_input_decimal_only_one_spelling_per_number) {
    uint64_t v = 0;
    cr_assert_eq(parse_decimal_uint64("0", UINT64_MAX, &v), 0);
    cr_assert_eq(v, 0);
    cr_assert_eq(parse_decimal_uint64("18446744073709551615", UINT64_MAX, &v), 0);
    cr_assert_eq(v, UINT64_MAX);
    cr_assert_eq(parse_decimal_uint64("18446744073709551616", UINT64_MAX, &v), -ERANGE);
    cr_assert_eq(parse_decimal_uint64("99999999999999999999999", UINT64_MAX, &v), -ERANGE);
    cr_assert_eq(parse_decimal_uint64("11", 10, &v), -ERANGE);
    v = 5;
    static const char *const bad[] = {"", "0x1", "01", "+1", "-1", " 1", "1 ", "1e3", "١"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_assert_eq(parse_decimal_uint64(bad[i], UINT64_MAX, &v), -EINVAL, "'%s'", bad[i]);
    cr_assert_eq(v, 5, "nothing written on failure");
}

Test(strings, bad_input_utf8_made_valid_and_truncation_never_cuts_a_sequence) {
    char s[64];
    snprintf(s, sizeof(s), "%s", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    cr_assert_str_eq(utf8_make_valid(s), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
                     "valid stays");
    /* A buffer's end cuts the euro sign after its first two bytes. */
    char cut[7];
    memcpy(cut, "abcd\xe2\x82\xac", 6);
    cut[6] = 0;
    cr_assert_str_eq(utf8_make_valid(cut), "abcd??");
    snprintf(s, sizeof(s), "%s", "r\x94lease \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xff");
    cr_assert_str_eq(utf8_make_valid(s), "r?lease ?? ??? ???? ?",
                     "invalid, overlong, surrogate, too big");
    /* A sentence cut to be kept: before the character the limit falls in, saying so. */
    char kept[12];
    str_copy_cut_utf8(kept, sizeof(kept), "abcdefg\xe2\x82\xac and more");
    cr_assert_str_eq(kept, "abcdefg...");
    str_copy_cut_utf8(kept, sizeof(kept), "short \xe2\x82\xac");
    cr_assert_str_eq(kept, "short \xe2\x82\xac", "what fits is kept whole");
    str_copy_cut_utf8(kept, sizeof(kept), "01234567890");
    cr_assert_str_eq(kept, "01234567890", "exactly the room");
    char tiny[4];
    str_copy_cut_utf8(tiny, sizeof(tiny), "ab\xc3\xa9");
    cr_assert_str_eq(tiny, "ab", "no room for dots: cut alone");
}

/* The error-sentence rule (docs/CODING_STYLE.md): the API turns a library's lower-case
 * fragment into a sentence, and leaves names, paths and finished sentences as written. */
Test(strings, error_style_fragments_become_one_sentence_at_the_outermost_layer) {
    char a[64] = "node 'a': no site named 'b'";
    cr_expect_str_eq(sentence_case(a, sizeof(a)), "Node 'a': no site named 'b'.");
    char b[64] = "Out of memory.";
    cr_expect_str_eq(sentence_case(b, sizeof(b)), "Out of memory.");
    char c[64] = "nvidia-h100-80gb is not a class";
    cr_expect_str_eq(sentence_case(c, sizeof(c)), "nvidia-h100-80gb is not a class.");
    char d[64] = "catalog.yaml:3:1: bad key";
    cr_expect_str_eq(sentence_case(d, sizeof(d)), "catalog.yaml:3:1: bad key.");
    char e[64] = "Is it?";
    cr_expect_str_eq(sentence_case(e, sizeof(e)), "Is it?");
    char f[4] = "abc"; /* no room for the stop: left as it is, never cut */
    cr_expect_str_eq(sentence_case(f, sizeof(f)), "Abc");
    char g[8] = "";
    cr_expect_str_eq(sentence_case(g, sizeof(g)), "");
}

/* The writer formats ids and copies reasons without printf: each must write the bytes
 * snprintf writes, including where the buffer cuts the text. */
Test(strings, r16_ids_and_copies_write_what_snprintf_writes) {
    const uint64_t ids[] = {0, 1, 9, 10, 99, 100, 12345, 4294967295u, 4294967296u, UINT64_MAX};
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        char got[DECIMAL_U64_SIZE], want[DECIMAL_U64_SIZE];
        size_t n = format_u64(got, ids[i]);
        snprintf(want, sizeof(want), "%" PRIu64, ids[i]);
        cr_expect_str_eq(got, want);
        cr_expect_eq(n, strlen(want));
    }
    const char *texts[] = {"", "a", "placed on n1: 1 GPU", "0123456789abcdef"};
    for (size_t t = 0; t < sizeof(texts) / sizeof(texts[0]); t++)
        for (size_t size = 1; size <= 20; size++) {
            char got[24], want[24];
            memset(got, 'x', sizeof(got));
            memset(want, 'x', sizeof(want));
            str_copy_cut(got, size, texts[t]);
            snprintf(want, size, "%s", texts[t]);
            cr_expect(memcmp(got, want, sizeof(got)) == 0, "'%s' into %zu bytes", texts[t], size);
        }
    char untouched = 'x';
    str_copy_cut(&untouched, 0, "abc");
    cr_expect_eq(untouched, 'x', "a size of 0 writes nothing");
}

/* A control byte (CR, LF, ESC, DEL) is what a header line or a terminal must never get. */
Test(strings, bad_input_control_bytes_are_found_and_masked) {
    cr_expect(string_has_control("abc\r\nX-Evil: 1"));
    cr_expect(string_has_control("a\x7f"));
    cr_expect(!string_has_control("plain text, ü and spaces"));
    char s[] = "RTX \x1b]0;x\x07 5090";
    cr_expect_str_eq(string_mask_control(s), "RTX ?]0;x? 5090");
}

/* The agent's state files: "<key> <value>" lines, the last of a key winning; a key is a whole
 * word (0000:01:00.0 is not 0000:01:00.1, nor "0000:01:00.0x"). */
Test(strings, r16_key_value_lines_give_the_last_value_of_a_whole_key) {
    const char *text =
            "0000:01:00.0 host\n0000:01:00.1 vfio\n0000:01:00.0 vfio\n0000:01:00.0x host\n"
            "bare\n";
    const char *v = NULL;
    size_t len = 0;
    cr_assert(text_key_value(text, "0000:01:00.0", &v, &len));
    cr_expect_eq(len, 4);
    cr_expect(!strncmp(v, "vfio", 4), "%.*s", (int)len, v);
    cr_assert(text_key_value(text, "0000:01:00.1", &v, &len));
    cr_expect(!strncmp(v, "vfio", len));
    cr_expect_not(text_key_value(text, "bare", &v, &len), "a line without a value has no key");
    cr_expect_not(text_key_value(text, "0000:02:00.0", &v, &len));
    cr_expect_not(text_key_value(NULL, "x", &v, &len));
    cr_expect_not(text_key_value("x", "x", &v, &len));
}
