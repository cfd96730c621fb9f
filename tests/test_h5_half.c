/* float16 datasets read into float32 and float64 (io/h5.c reads the raw halves and widens them
 * itself, libhdf5's conversion being slow): every one of the 65536 bit patterns, stored little- and
 * big-endian, read whole and as a slab, equals libhdf5's own conversion of the same halves
 * (H5Tconvert), NaN for NaN. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "io/h5.h"
#include "support/scratch.h"

enum { N = 65536 };

/* libhdf5's conversion of every pattern into mem_type (float or double, N elements). */
static void reference(hid_t half_type, hid_t mem_type, void *out)
{
    const size_t size = H5Tget_size(mem_type);
    unsigned char *buf = malloc(N * size);
    assert_non_null(buf);
    for (uint32_t i = 0; i < N; i++) { /* the patterns in the half type's byte order */
        const uint16_t v = (uint16_t)i;
        const int big = H5Tget_order(half_type) == H5T_ORDER_BE;
        buf[2 * i] = (unsigned char)(big ? v >> 8 : v & 0xFF);
        buf[2 * i + 1] = (unsigned char)(big ? v & 0xFF : v >> 8);
    }
    assert_true(H5Tconvert(half_type, mem_type, N, buf, NULL, H5P_DEFAULT) >= 0);
    memcpy(out, buf, N * size);
    free(buf);
}

static void expect_same(const double *got, const double *want, size_t n, size_t first, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        const double g = got[i], w = want[first + i];
        if ((isnan(g) != isnan(w)) || (!isnan(w) && g != w) || (!isnan(w) && signbit(g) != signbit(w)))
            fail_msg("%s: pattern 0x%04zx read as %a, libhdf5 converts it to %a", what, first + i, g, w);
    }
}

static void test_every_half_pattern(void **state)
{
    (void)state;
    for (int big = 0; big < 2; big++) {
        char path[4200];
        scratch_path(path, sizeof path, big ? "half_be.h5" : "half_le.h5");
        hid_t half_type = sp_h5_float_type(SP_H5_F16);
        H5Tset_order(half_type, big ? H5T_ORDER_BE : H5T_ORDER_LE);
        hsize_t dims[2] = {256, 256};
        hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        hid_t space = H5Screate_simple(2, dims, NULL);
        hid_t dset = H5Dcreate2(file, "h", half_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        unsigned char *raw = malloc(2 * N);
        assert_non_null(raw);
        for (uint32_t i = 0; i < N; i++) {
            raw[2 * i] = (unsigned char)(big ? i >> 8 : i & 0xFF);
            raw[2 * i + 1] = (unsigned char)(big ? i & 0xFF : i >> 8);
        }
        assert_true(H5Dwrite(dset, half_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) >= 0);
        free(raw);
        H5Dclose(dset);
        H5Sclose(space);
        H5Fclose(file);

        double *want = malloc(N * sizeof *want), *got = malloc(N * sizeof *got);
        float *want_f = malloc(N * sizeof *want_f), *got_f = malloc(N * sizeof *got_f);
        assert_true(want && got && want_f && got_f);
        reference(half_type, H5T_NATIVE_DOUBLE, want);
        reference(half_type, H5T_NATIVE_FLOAT, want_f);
        H5Tclose(half_type);

        sp_error_clear();
        assert_int_equal(sp_h5_open(path, &file), SP_OK);
        dset = H5Dopen2(file, "h", H5P_DEFAULT);
        assert_true(dset >= 0);
        assert_int_equal(sp_h5_read(dset, H5T_NATIVE_DOUBLE, NULL, NULL, got), SP_OK);
        expect_same(got, want, N, 0, big ? "big-endian, float64" : "little-endian, float64");
        assert_int_equal(sp_h5_read(dset, H5T_NATIVE_FLOAT, NULL, NULL, got_f), SP_OK);
        for (size_t i = 0; i < N; i++) {
            got[i] = got_f[i];
            want[i] = want_f[i];
        }
        expect_same(got, want, N, 0, big ? "big-endian, float32" : "little-endian, float32");
        /* a slab: rows 100..102, columns 7..16 */
        const int64_t start[2] = {100, 7}, count[2] = {3, 10};
        float slab[30];
        assert_int_equal(sp_h5_read(dset, H5T_NATIVE_FLOAT, start, count, slab), SP_OK);
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 10; c++) {
                const size_t at = (size_t)(100 + r) * 256 + 7 + (size_t)c;
                const double g = slab[r * 10 + c];
                expect_same(&g, want, 1, at, "slab");
            }
        H5Dclose(dset);
        H5Fclose(file);
        free(want);
        free(got);
        free(want_f);
        free(got_f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_half_pattern),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
