/* Activation dumps: write layer by layer (in row pieces) and read back bit-exact (float32) or to
 * float16 precision, partial pre-normalization sums, chunking one layer per chunk, the writer's
 * completeness check and atomicity, and every kind of bad file or request. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "io/dump.h"
#include "io/h5.h"
#include "support/h5_edit.h"
#include "support/scratch.h"

enum { L = 3, D = 8, DFF = 12, V = 20, BATCH = 2, SEQ = 5, ROWS = BATCH * SEQ };

static sp_dump_info small_info(int float16)
{
    sp_dump_info info = {.n_layers = L, .d_model = D, .n_streams = 2, .d_ff = DFF, .vocab_size = V, .batch = BATCH,
                         .seq_len = SEQ, .has_ffn_latent = 1, .has_sum_a = 1, .has_sum_z = 1, .has_logits = 1,
                         .float16 = float16};
    snprintf(info.variant, sizeof info.variant, "siamese");
    snprintf(info.source, sizeof info.source, "test_dump");
    return info;
}

/* A distinct value for (array, stream, layer, row, column); multiples of 1/8 below 64 are exact in
 * float16 too. */
static sp_real value_at(int kind, int stream, int layer, int row, int col)
{
    return (sp_real)((kind * 7 + stream * 3 + layer * 5 + row * 2 + col) % 512) / 8 - 16;
}

static void fill(sp_real *buf, int kind, int stream, int layer, int row0, int n_rows, int width)
{
    for (int r = 0; r < n_rows; r++)
        for (int c = 0; c < width; c++)
            buf[r * width + c] = value_at(kind, stream, layer, row0 + r, c);
}

static void tokens_of(int32_t *tokens)
{
    for (int i = 0; i < ROWS; i++)
        tokens[i] = (i * 7) % V;
}

/* Writes a complete dump (sum_a only in layers 0 and 2, like a variant with some blocks lacking it),
 * hidden states in two row pieces. */
static void write_small(const char *path, int float16)
{
    sp_dump_info info = small_info(float16);
    int32_t tokens[ROWS];
    tokens_of(tokens);
    sp_dump_writer *w = NULL;
    sp_error_clear();
    assert_int_equal(sp_dump_create(path, &info, tokens, &w), SP_OK);
    sp_real buf[ROWS * V];
    for (int s = 0; s < 2; s++)
        for (int l = 0; l <= L; l++) {
            fill(buf, SP_DUMP_HIDDEN, s, l, 0, 4, D);
            assert_int_equal(sp_dump_write(w, SP_DUMP_HIDDEN, s, l, 0, 4, buf), SP_OK);
            fill(buf, SP_DUMP_HIDDEN, s, l, 4, ROWS - 4, D);
            assert_int_equal(sp_dump_write(w, SP_DUMP_HIDDEN, s, l, 4, ROWS - 4, buf), SP_OK);
        }
    for (int l = 0; l < L; l++) {
        fill(buf, SP_DUMP_FFN_LATENT, 0, l, 0, ROWS, DFF);
        assert_int_equal(sp_dump_write(w, SP_DUMP_FFN_LATENT, 0, l, 0, ROWS, buf), SP_OK);
        fill(buf, SP_DUMP_SUM_Z, 0, l, 0, ROWS, D);
        assert_int_equal(sp_dump_write(w, SP_DUMP_SUM_Z, 0, l, 0, ROWS, buf), SP_OK);
        if (l != 1) {
            fill(buf, SP_DUMP_SUM_A, 0, l, 0, ROWS, D);
            assert_int_equal(sp_dump_write(w, SP_DUMP_SUM_A, 0, l, 0, ROWS, buf), SP_OK);
        }
    }
    fill(buf, SP_DUMP_LOGITS, 0, 0, 0, ROWS, V);
    assert_int_equal(sp_dump_write(w, SP_DUMP_LOGITS, 0, 0, 0, ROWS, buf), SP_OK);
    assert_int_equal(sp_dump_commit(w), SP_OK);
}

static void check_layer(sp_dump *d, sp_dump_kind kind, int stream, int layer, int width, double tol)
{
    sp_real got[ROWS * V], want[ROWS * V];
    assert_int_equal(sp_dump_read(d, kind, stream, layer, 0, ROWS, got), SP_OK);
    fill(want, kind, stream, layer, 0, ROWS, width);
    for (int i = 0; i < ROWS * width; i++)
        if (tol == 0)
            assert_true(got[i] == want[i]);
        else
            assert_true(fabs(got[i] - want[i]) <= tol * fabs(want[i]));
}

static void test_round_trip(void **state)
{
    (void)state;
    char path[4200];
    scratch_path(path, sizeof path, "dump.h5");
    write_small(path, 0);
    sp_dump *d = NULL;
    assert_int_equal(sp_dump_open(path, &d), SP_OK);
    const sp_dump_info *info = sp_dump_get_info(d);
    assert_int_equal(info->n_layers, L);
    assert_int_equal(info->n_streams, 2);
    assert_int_equal(info->d_ff, DFF);
    assert_true(info->has_ffn_latent && info->has_sum_a && info->has_sum_z && info->has_logits);
    assert_false(info->float16);
    assert_string_equal(info->variant, "siamese");
    assert_string_equal(info->source, "test_dump");
    assert_int_equal(sp_dump_rows(d), ROWS);
    assert_int_equal(sp_dump_width(d, SP_DUMP_FFN_LATENT), DFF);
    assert_int_equal(sp_dump_width(d, SP_DUMP_LOGITS), V);

    int32_t tokens[ROWS], want[ROWS];
    tokens_of(want);
    assert_int_equal(sp_dump_read_tokens(d, tokens), SP_OK);
    assert_memory_equal(tokens, want, sizeof tokens);
    for (int s = 0; s < 2; s++)
        for (int l = 0; l <= L; l++)
            check_layer(d, SP_DUMP_HIDDEN, s, l, D, 0);
    for (int l = 0; l < L; l++) {
        check_layer(d, SP_DUMP_FFN_LATENT, 0, l, DFF, 0);
        check_layer(d, SP_DUMP_SUM_Z, 0, l, D, 0);
    }
    check_layer(d, SP_DUMP_SUM_A, 0, 2, D, 0);
    check_layer(d, SP_DUMP_LOGITS, 0, 0, V, 0);

    /* a row range of one layer */
    sp_real rows[3 * D];
    assert_int_equal(sp_dump_read(d, SP_DUMP_HIDDEN, 1, 2, 6, 3, rows), SP_OK);
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < D; c++)
            assert_true(rows[r * D + c] == value_at(SP_DUMP_HIDDEN, 1, 2, 6 + r, c));

    /* sum_a lacks layer 1 */
    assert_true(sp_dump_has_layer(d, SP_DUMP_SUM_A, 0, 0));
    assert_false(sp_dump_has_layer(d, SP_DUMP_SUM_A, 0, 1));
    assert_true(sp_dump_has_layer(d, SP_DUMP_SUM_Z, 0, 1));
    assert_false(sp_dump_has_layer(d, SP_DUMP_HIDDEN, 2, 0));
    sp_error_clear();
    assert_int_equal(sp_dump_read(d, SP_DUMP_SUM_A, 0, 1, 0, ROWS, rows), SP_ERR_USAGE);
    assert_non_null(strstr(sp_error_message(), "/presum/sum_a: layer 1"));
    sp_dump_close(d);
    sp_error_clear();
}

static void test_float16_and_chunks(void **state)
{
    (void)state;
    char path[4200];
    scratch_path(path, sizeof path, "dump16.h5");
    write_small(path, 1);
    sp_dump *d = NULL;
    assert_int_equal(sp_dump_open(path, &d), SP_OK);
    assert_true(sp_dump_get_info(d)->float16);
    check_layer(d, SP_DUMP_HIDDEN, 0, 3, D, 0); /* the values are exact in float16 */
    check_layer(d, SP_DUMP_LOGITS, 0, 0, V, 0);
    sp_dump_close(d);

    /* stored as IEEE half, chunked one layer at a time */
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), ds = H5Dopen2(f, "hidden/0", H5P_DEFAULT);
    hid_t type = H5Dget_type(ds), dcpl = H5Dget_create_plist(ds);
    assert_int_equal(H5Tget_size(type), 2);
    hsize_t chunk[3];
    assert_int_equal(H5Pget_chunk(dcpl, 3, chunk), 3);
    assert_int_equal(chunk[0], 1);
    assert_int_equal(chunk[1], ROWS);
    assert_int_equal(chunk[2], D);
    H5Pclose(dcpl);
    H5Tclose(type);
    H5Dclose(ds);
    H5Fclose(f);

    /* values that are not exact in float16 come back within its precision */
    sp_dump_info info = {.n_layers = 1, .d_model = 4, .n_streams = 1, .vocab_size = 3, .batch = 1, .seq_len = 2,
                         .float16 = 1};
    int32_t tokens[2] = {0, 2};
    sp_real in[8] = {0.1f, -3.14159f, 1000.5f, 1e-3f, 7.0f, -0.3333f, 65000.0f, 2.5e-5f}, out[8];
    sp_dump_writer *w;
    assert_int_equal(sp_dump_create(path, &info, tokens, &w), SP_OK);
    for (int l = 0; l < 2; l++)
        assert_int_equal(sp_dump_write(w, SP_DUMP_HIDDEN, 0, l, 0, 2, in), SP_OK);
    assert_int_equal(sp_dump_commit(w), SP_OK);
    assert_int_equal(sp_dump_open(path, &d), SP_OK);
    assert_int_equal(sp_dump_read(d, SP_DUMP_HIDDEN, 0, 1, 0, 2, out), SP_OK);
    for (int i = 0; i < 8; i++)
        assert_true(fabs(out[i] - in[i]) <= 1e-3 * fabs(in[i]) + 1e-7); /* 11-bit mantissa; subnormals */
    sp_dump_close(d);
}

static void test_writer_errors(void **state)
{
    (void)state;
    char path[4200];
    scratch_path(path, sizeof path, "incomplete.h5");
    sp_dump_info info = small_info(0);
    int32_t tokens[ROWS];
    tokens_of(tokens);
    sp_real buf[ROWS * V] = {0};
    sp_dump_writer *w = NULL;

    /* bad requests */
    assert_int_equal(sp_dump_create(path, &info, tokens, &w), SP_OK);
    sp_error_clear();
    assert_int_equal(sp_dump_write(w, SP_DUMP_HIDDEN, 0, L + 1, 0, ROWS, buf), SP_ERR_USAGE);
    assert_non_null(strstr(sp_error_message(), "layer 4 is out of range"));
    sp_error_clear();
    assert_int_equal(sp_dump_write(w, SP_DUMP_HIDDEN, 0, 0, 8, 3, buf), SP_ERR_USAGE);
    assert_non_null(strstr(sp_error_message(), "rows [8, 11)"));
    sp_error_clear();
    assert_int_equal(sp_dump_write(w, SP_DUMP_HIDDEN, 2, 0, 0, 1, buf), SP_ERR_USAGE);
    sp_error_clear();
    /* an incomplete dump cannot be committed, and leaves nothing */
    for (int l = 0; l < L; l++) /* h_L missing */
        assert_int_equal(sp_dump_write(w, SP_DUMP_HIDDEN, 0, l, 0, ROWS, buf), SP_OK);
    assert_int_equal(scratch_count_entries("incomplete.h5*"), 1); /* the temporary file */
    assert_int_equal(sp_dump_commit(w), SP_ERR_USAGE);
    assert_non_null(strstr(sp_error_message(), "/hidden/0: layer 3 has 0 of 10 rows written"));
    assert_int_equal(scratch_count_entries("incomplete.h5*"), 0);
    sp_error_clear();

    /* abort leaves nothing */
    assert_int_equal(sp_dump_create(path, &info, tokens, &w), SP_OK);
    sp_dump_abort(w);
    assert_int_equal(scratch_count_entries("incomplete.h5*"), 0);

    /* bad tokens and bad shapes are refused before anything is created */
    tokens[3] = V;
    assert_int_equal(sp_dump_create(path, &info, tokens, &w), SP_ERR_INPUT);
    assert_non_null(strstr(sp_error_message(), "token 3 is 20"));
    assert_null(w);
    assert_int_equal(scratch_count_entries("incomplete.h5*"), 0);
    sp_error_clear();
    tokens_of(tokens);
    info.batch = 1 << 20;
    info.seq_len = 1 << 20;
    assert_int_equal(sp_dump_create(path, &info, tokens, &w), SP_ERR_INPUT);
    assert_non_null(strstr(sp_error_message(), "absurd"));
    sp_error_clear();
    info = small_info(0);
    info.n_streams = 3;
    assert_int_equal(sp_dump_create(path, &info, tokens, &w), SP_ERR_INPUT);
    assert_non_null(strstr(sp_error_message(), "n_streams"));
    sp_error_clear();

    scratch_path(path, sizeof path, "missing-dir/dump.h5");
    info = small_info(0);
    assert_int_equal(sp_dump_create(path, &info, tokens, &w), SP_ERR_IO);
    assert_non_null(strstr(sp_error_message(), path));
    sp_error_clear();
}

static void expect_open_failure(const char *path, sp_status code, const char *fragment)
{
    sp_error_clear();
    sp_dump *d = (sp_dump *)&d;
    sp_status st = sp_dump_open(path, &d);
    const char *msg = sp_error_message();
    if (st != code || !strstr(msg, fragment) || !strstr(msg, path) || strchr(msg, '\n'))
        fail_msg("expected code %d and '%s', found %d: %s", code, fragment, st, msg);
    assert_null(d);
    sp_error_clear();
}

static void test_bad_files(void **state)
{
    (void)state;
    char good[4200], path[4200];
    scratch_path(good, sizeof good, "good.h5");
    scratch_path(path, sizeof path, "bad.h5");
    write_small(good, 0);

    expect_open_failure("no-such-dump.h5", SP_ERR_IO, "cannot open");
    h5_edit_copy(good, path);
    h5_edit_set_str(path, "/", "format", "spanprobe-checkpoint");
    expect_open_failure(path, SP_ERR_INPUT, "expected \"spanprobe-activations\"");
    h5_edit_copy(good, path);
    h5_edit_set_str(path, "/", "format_version", "3.1");
    expect_open_failure(path, SP_ERR_INPUT, "newer");
    h5_edit_copy(good, path);
    h5_edit_delete(path, "/hidden/0");
    expect_open_failure(path, SP_ERR_INPUT, "/hidden/0: missing dataset");
    int64_t short_hidden[3] = {L, ROWS, D}, int_logits[2] = {ROWS, V}, tokens_shape[2] = {SEQ, BATCH};
    h5_edit_copy(good, path);
    h5_edit_replace(path, "/hidden/1", H5T_IEEE_F32LE, 3, short_hidden);
    expect_open_failure(path, SP_ERR_INPUT, "/hidden/1: expected shape [4, 10, 8], found [3, 10, 8]");
    h5_edit_copy(good, path);
    h5_edit_replace(path, "/logits", H5T_STD_I16LE, 2, int_logits);
    expect_open_failure(path, SP_ERR_INPUT, "/logits: expected a float dataset, found int16");
    h5_edit_copy(good, path);
    h5_edit_replace(path, "/tokens", H5T_STD_I32LE, 2, tokens_shape);
    expect_open_failure(path, SP_ERR_INPUT, "/tokens: expected shape [2, 5], found [5, 2]");
    h5_edit_copy(good, path);
    h5_edit_set_int(path, "/config", "d_model", -8);
    expect_open_failure(path, SP_ERR_INPUT, "/config/d_model: -8 is out of range");
    h5_edit_copy(good, path);
    h5_edit_set_int(path, "/config", "n_streams", 1);
    expect_open_failure(path, SP_ERR_INPUT, "/hidden/1: unexpected dataset");
    h5_edit_copy(good, path);
    h5_edit_set_int(path, "/config", "batch", 1 << 20);
    h5_edit_set_int(path, "/config", "seq_len", 1 << 20);
    expect_open_failure(path, SP_ERR_INPUT, "absurd");
    h5_edit_copy(good, path);
    h5_edit_delete_attr(path, "/config", "d_ff");
    expect_open_failure(path, SP_ERR_INPUT, "/config/d_ff: missing attribute");

    /* NaN in one layer: that layer's reads fail with the count, the others are fine */
    h5_edit_copy(good, path);
    h5_edit_poison(path, "/ffn_latent", 5, NAN); /* the first 5 values of layer 0 */
    sp_dump *d = NULL;
    assert_int_equal(sp_dump_open(path, &d), SP_OK);
    sp_real buf[ROWS * DFF];
    sp_error_clear();
    assert_int_equal(sp_dump_read(d, SP_DUMP_FFN_LATENT, 0, 0, 0, ROWS, buf), SP_ERR_NUMERIC);
    assert_non_null(strstr(sp_error_message(), "/ffn_latent: layer 0, rows [0, 10): 5 of 120 values are NaN or Inf"));
    sp_error_clear();
    assert_int_equal(sp_dump_read(d, SP_DUMP_FFN_LATENT, 0, 0, 1, 9, buf), SP_OK); /* row 0 holds them all */
    assert_int_equal(sp_dump_read(d, SP_DUMP_FFN_LATENT, 0, 1, 0, ROWS, buf), SP_OK);
    sp_dump_close(d);

    /* token ids out of range are caught when the dump is opened, so every reader (inspect too) agrees */
    h5_edit_copy(good, path);
    h5_edit_poison(path, "/tokens", 1, V + 5);
    expect_open_failure(path, SP_ERR_INPUT, "/tokens: token 0 is 25");

    /* /config is as strict as a checkpoint's: unknown fields (typos) and unknown variants are refused */
    h5_edit_copy(good, path);
    h5_edit_set_int(path, "/config", "n_layer", 2);
    expect_open_failure(path, SP_ERR_INPUT, "/config/n_layer: unknown field");
    h5_edit_copy(good, path);
    h5_edit_set_str(path, "/config", "variant", "prenorm");
    expect_open_failure(path, SP_ERR_INPUT, "/config/variant: \"prenorm\" is not a variant spanprobe knows");
    h5_edit_copy(good, path);
    h5_edit_set_str(path, "/config", "variant", "siamese");
    assert_int_equal(sp_dump_open(path, &d), SP_OK);
    sp_dump_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_float16_and_chunks),
        cmocka_unit_test(test_writer_errors),
        cmocka_unit_test(test_bad_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
