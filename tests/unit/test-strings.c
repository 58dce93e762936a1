/* test-strings.c: the string rules the server relies on: numbers from outside are decimal only,
 * and a message made valid UTF-8 never carries half a sequence. */
#include <criterion/criterion.h>
#include <errno.h>
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
