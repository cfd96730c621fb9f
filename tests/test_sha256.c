/* SHA-256 against the FIPS 180-4 / NIST example vectors, in one piece and fed in odd-sized parts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/sha256.h"

static void hash_in_parts(const char *msg, size_t len, size_t part, char hex[65])
{
    sp_sha256 h;
    unsigned char digest[32];
    assert_int_equal(sp_sha256_init(&h), SP_OK);
    for (size_t i = 0; i < len; i += part)
        sp_sha256_update(&h, msg + i, len - i < part ? len - i : part);
    sp_sha256_final(&h, digest);
    sp_sha256_hex(digest, hex);
}

static void test_known_vectors(void **state)
{
    (void)state;
    static const struct {
        const char *msg, *hex;
    } vectors[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    char hex[65];
    for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
        size_t len = strlen(vectors[i].msg);
        hash_in_parts(vectors[i].msg, len, len ? len : 1, hex);
        assert_string_equal(hex, vectors[i].hex);
        hash_in_parts(vectors[i].msg, len, 7, hex); /* blocks split across updates */
        assert_string_equal(hex, vectors[i].hex);
    }
}

static void test_million_a(void **state)
{
    (void)state;
    size_t len = 1000000;
    char *msg = malloc(len);
    assert_non_null(msg);
    memset(msg, 'a', len);
    char hex[65];
    hash_in_parts(msg, len, 4093, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(msg);
}

static void test_file(void **state)
{
    (void)state;
    char path[] = "/tmp/sp_sha256_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "abc", 3), 3);
    close(fd);
    char hex[65];
    int64_t n = 0;
    assert_int_equal(sp_sha256_file(path, hex, &n), SP_OK);
    assert_int_equal(n, 3);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    unlink(path);
    sp_error_clear();
    assert_int_equal(sp_sha256_file(path, hex, &n), SP_ERR_IO);
    assert_non_null(strstr(sp_error_message(), path));
    sp_error_clear();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_vectors),
        cmocka_unit_test(test_million_a),
        cmocka_unit_test(test_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
