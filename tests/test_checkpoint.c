/* Checkpoints: a bit-exact write/read round trip (parameters, optimizer state, training state,
 * tokenizer, provenance), and every kind of bad input made from valid files through the HDF5 API:
 * each must fail with the documented code and one line naming the file and the object, allocate
 * nothing absurd, and a failed write must leave neither the file nor a temporary file behind. */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "io/checkpoint.h"
#include "kernels/backend.h"
#include "support/h5_edit.h"
#include "support/scratch.h"

/* span (three norms in block 0), LayerNorm (biases), learned positions, untied head: every kind of
 * tensor, rank 1 and 2. */
static void tiny_config(sp_config *cfg)
{
    sp_config_defaults(cfg);
    cfg->variant = SP_VARIANT_SPAN;
    cfg->n_layers = 2;
    cfg->d_model = 16;
    cfg->n_heads = 2;
    cfg->n_kv_heads = 1;
    cfg->d_ff = 32;
    cfg->vocab_size = 11;
    cfg->max_seq_len = 8;
    cfg->tie_embeddings = 0;
    assert_int_equal(sp_config_resolve(cfg), SP_OK);
    assert_int_equal(sp_config_validate(cfg, "test"), SP_OK);
}

static sp_model *tiny_model(uint64_t seed)
{
    sp_config cfg;
    tiny_config(&cfg);
    sp_model *m = NULL;
    assert_int_equal(sp_model_create(&cfg, sp_backend_cpu(), &m), SP_OK);
    assert_int_equal(sp_model_init(m, seed), SP_OK);
    return m;
}

/* 11 pieces, one of them empty and one two-byte UTF-8 */
static const char *const pieces[] = {"<unk>", "<s>", "</s>", "a", "b", "ab", " ", " a", "\xc3\xa9", "xyz", ""};

static void vocab_tokenizer(sp_tokenizer *t)
{
    int v = (int)(sizeof pieces / sizeof pieces[0]);
    *t = (sp_tokenizer){.kind = SP_TOK_VOCAB, .vocab_size = v, .bos_id = 1, .eos_id = 2, .max_piece_len = 5};
    t->offsets = calloc((size_t)v + 1, sizeof *t->offsets);
    t->scores = calloc((size_t)v, sizeof *t->scores);
    t->bytes = malloc(64);
    for (int i = 0; i < v; i++) {
        size_t len = strlen(pieces[i]);
        memcpy(t->bytes + t->offsets[i], pieces[i], len);
        t->offsets[i + 1] = t->offsets[i] + (int64_t)len;
        t->scores[i] = -0.25f * (float)i;
    }
}

/* One backend buffer per parameter filled with distinct values. */
static sp_real **state_buffers(const sp_model *m, double offset)
{
    const sp_backend *be = sp_model_backend(m);
    int n = sp_model_n_params(m);
    sp_real **bufs = calloc((size_t)n, sizeof *bufs);
    for (int i = 0; i < n; i++) {
        size_t numel = sp_param_numel(sp_model_param_spec(m, i));
        sp_real *host = malloc(numel * sizeof *host);
        for (size_t j = 0; j < numel; j++)
            host[j] = (sp_real)(offset + 1e-3 * (double)(i * 1000 + (int)j) + 1.0 / 3.0);
        bufs[i] = be->alloc(numel * sizeof(sp_real), "test optimizer state");
        be->upload(bufs[i], host, numel * sizeof *host);
        free(host);
    }
    return bufs;
}

static void free_buffers(const sp_model *m, sp_real **bufs)
{
    for (int i = 0; i < sp_model_n_params(m); i++)
        sp_model_backend(m)->free(bufs[i]);
    free(bufs);
}

/* Writes a plain valid checkpoint (no optimizer, tokenizer or train state) at scratch/name. */
static void write_valid(const char *name, char *path, size_t len)
{
    scratch_path(path, len, name);
    sp_model *m = tiny_model(7);
    sp_ckpt_meta meta;
    sp_ckpt_meta_init(&meta);
    snprintf(meta.source, sizeof meta.source, "test");
    sp_error_clear();
    assert_int_equal(sp_ckpt_write(path, m, &meta, NULL, NULL), SP_OK);
    sp_ckpt_meta_free(&meta);
    sp_model_free(m);
}

/* A load must fail with `code` and one line holding every fragment (NULL-terminated). */
static void expect_load_failure(const char *path, sp_status code, ...)
{
    sp_error_clear();
    sp_model *m = (sp_model *)&m; /* must be reset to NULL */
    sp_ckpt_meta meta;
    sp_status st = sp_ckpt_load(path, sp_backend_cpu(), &m, &meta);
    const char *msg = sp_error_message();
    if (getenv("SP_TEST_VERBOSE"))
        printf("  %s\n", msg);
    if (st != code)
        fail_msg("expected code %d, found %d: %s", code, st, msg);
    assert_null(m);
    assert_null(strchr(msg, '\n'));
    assert_non_null(strstr(msg, path));
    va_list ap;
    va_start(ap, code);
    for (const char *frag; (frag = va_arg(ap, const char *)) != NULL;)
        if (!strstr(msg, frag))
            fail_msg("message lacks '%s': %s", frag, msg);
    va_end(ap);
    sp_error_clear();
}

static void assert_same_params(const sp_model *a, const sp_model *b)
{
    assert_int_equal(sp_model_n_params(a), sp_model_n_params(b));
    for (int i = 0; i < sp_model_n_params(a); i++) {
        size_t numel = sp_param_numel(sp_model_param_spec(a, i));
        assert_string_equal(sp_model_param_spec(a, i)->name, sp_model_param_spec(b, i)->name);
        sp_real *x = malloc(numel * sizeof *x), *y = malloc(numel * sizeof *y);
        sp_model_get_param(a, i, x);
        sp_model_get_param(b, i, y);
        assert_memory_equal(x, y, numel * sizeof *x);
        free(x);
        free(y);
    }
}

static void assert_same_buffers(const sp_model *m, sp_real **a, sp_real **b)
{
    for (int i = 0; i < sp_model_n_params(m); i++) {
        size_t bytes = sp_param_numel(sp_model_param_spec(m, i)) * sizeof(sp_real);
        sp_real *x = malloc(bytes), *y = malloc(bytes);
        sp_model_backend(m)->download(x, a[i], bytes);
        sp_model_backend(m)->download(y, b[i], bytes);
        assert_memory_equal(x, y, bytes);
        free(x);
        free(y);
    }
}

static void test_round_trip(void **state)
{
    (void)state;
    char path[4200];
    scratch_path(path, sizeof path, "full.h5");
    sp_model *m = tiny_model(42);
    sp_real **adam_m = state_buffers(m, 0.5), **adam_v = state_buffers(m, 2.0);
    sp_ckpt_meta meta;
    sp_ckpt_meta_init(&meta);
    meta.has_tokenizer = 1;
    vocab_tokenizer(&meta.tokenizer);
    snprintf(meta.source, sizeof meta.source, "round trip test");
    meta.train = (sp_train_state){.present = 1, .step = 123, .tokens_seen = 1 << 20, .data_position = 4567,
                                  .lr = 3e-4, .diverged_step = -1, .rng_state = {1, UINT64_MAX, 3, 1ull << 63}};
    snprintf(meta.train.status, sizeof meta.train.status, "running");
    meta.train.options_json = strdup("{\"lr\": 0.0003}");
    sp_error_clear();
    assert_int_equal(sp_ckpt_write(path, m, &meta, adam_m, adam_v), SP_OK);

    sp_model *back = NULL;
    sp_ckpt_meta got;
    assert_int_equal(sp_ckpt_load(path, sp_backend_cpu(), &back, &got), SP_OK);
    assert_same_params(m, back);
    char a[SP_FIELD_STRING_MAX], b[SP_FIELD_STRING_MAX];
    for (int i = 0; i < sp_n_config_fields; i++) {
        sp_config_format(sp_model_config(m), &sp_config_fields[i], a, sizeof a);
        sp_config_format(&got.cfg, &sp_config_fields[i], b, sizeof b);
        assert_string_equal(a, b);
    }
    assert_string_equal(got.source, "round trip test");
    assert_string_equal(got.tool_version, "spanprobe " SP_VERSION);
    assert_int_equal(strlen(got.created), 20); /* 2024-01-02T03:04:05Z */
    assert_true(got.has_tokenizer);
    assert_int_equal(got.tokenizer.kind, SP_TOK_VOCAB);
    assert_int_equal(got.tokenizer.vocab_size, 11);
    assert_int_equal(got.tokenizer.bos_id, 1);
    assert_int_equal(got.tokenizer.eos_id, 2);
    assert_int_equal(got.tokenizer.max_piece_len, 5);
    assert_memory_equal(got.tokenizer.offsets, meta.tokenizer.offsets, 12 * sizeof(int64_t));
    assert_memory_equal(got.tokenizer.scores, meta.tokenizer.scores, 11 * sizeof(float));
    assert_memory_equal(got.tokenizer.bytes, meta.tokenizer.bytes, (size_t)meta.tokenizer.offsets[11]);
    assert_true(got.train.present);
    assert_int_equal(got.train.step, 123);
    assert_int_equal(got.train.tokens_seen, 1 << 20);
    assert_int_equal(got.train.data_position, 4567);
    assert_true(got.train.lr == 3e-4);
    assert_int_equal(got.train.diverged_step, -1);
    assert_memory_equal(got.train.rng_state, meta.train.rng_state, sizeof meta.train.rng_state);
    assert_string_equal(got.train.status, "running");
    assert_string_equal(got.train.options_json, meta.train.options_json);

    sp_real **m2 = state_buffers(m, 9.0), **v2 = state_buffers(m, 9.0);
    assert_int_equal(sp_ckpt_load_optim(path, back, m2, v2), SP_OK);
    assert_same_buffers(m, adam_m, m2);
    assert_same_buffers(m, adam_v, v2);

    /* read_meta gives the same meta without the weights */
    sp_ckpt_meta only;
    assert_int_equal(sp_ckpt_read_meta(path, &only), SP_OK);
    assert_int_equal(only.train.step, 123);
    assert_int_equal(only.cfg.d_model, 16);
    sp_ckpt_meta_free(&only);

    free_buffers(m, m2);
    free_buffers(m, v2);
    free_buffers(m, adam_m);
    free_buffers(m, adam_v);
    sp_ckpt_meta_free(&got);
    sp_ckpt_meta_free(&meta);
    sp_model_free(back);
    sp_model_free(m);
}

static void test_no_optional_groups(void **state)
{
    (void)state;
    char path[4200];
    write_valid("plain.h5", path, sizeof path);
    sp_model *m = NULL;
    sp_ckpt_meta meta;
    assert_int_equal(sp_ckpt_load(path, sp_backend_cpu(), &m, &meta), SP_OK);
    assert_false(meta.has_tokenizer);
    assert_false(meta.train.present);
    sp_real **bufs = state_buffers(m, 0);
    sp_error_clear();
    assert_int_equal(sp_ckpt_load_optim(path, m, bufs, bufs), SP_ERR_INPUT);
    assert_non_null(strstr(sp_error_message(), "/optim"));
    sp_error_clear();
    free_buffers(m, bufs);
    sp_ckpt_meta_free(&meta);
    sp_model_free(m);
}

static void test_missing_not_hdf5_truncated(void **state)
{
    (void)state;
    char path[4200];
    scratch_path(path, sizeof path, "absent.h5");
    expect_load_failure(path, SP_ERR_IO, "No such file", NULL);

    scratch_path(path, sizeof path, "text.h5");
    assert_int_equal(scratch_write_file(path, "just some text\n", 15), 0);
    expect_load_failure(path, SP_ERR_INPUT, "not an HDF5 file", NULL);

    write_valid("truncated.h5", path, sizeof path);
    size_t len = 0;
    free(scratch_read_file(path, &len));
    assert_int_equal(truncate(path, (off_t)(len / 2)), 0);
    expect_load_failure(path, SP_ERR_INPUT, "truncated or corrupt", NULL);
}

static void test_format_and_version(void **state)
{
    (void)state;
    char path[4200];
    write_valid("format.h5", path, sizeof path);
    h5_edit_set_str(path, "/", "format", "spanprobe-activations");
    expect_load_failure(path, SP_ERR_INPUT, "/format", "spanprobe-checkpoint", "spanprobe-activations", NULL);

    write_valid("major.h5", path, sizeof path);
    h5_edit_set_str(path, "/", "format_version", "2.0");
    expect_load_failure(path, SP_ERR_INPUT, "format_version", "2.0", "newer", NULL);

    write_valid("version.h5", path, sizeof path);
    h5_edit_set_str(path, "/", "format_version", "one");
    expect_load_failure(path, SP_ERR_INPUT, "MAJOR.MINOR", NULL);

    /* a newer minor is read, and the fields it may have added are ignored; at 1.0 they are errors */
    write_valid("minor.h5", path, sizeof path);
    h5_edit_set_int(path, "/config", "future_field", 3);
    expect_load_failure(path, SP_ERR_INPUT, "/config/future_field", "unknown", NULL);
    h5_edit_set_str(path, "/", "format_version", "1.7");
    sp_model *m = NULL;
    sp_ckpt_meta meta;
    sp_error_clear();
    assert_int_equal(sp_ckpt_load(path, sp_backend_cpu(), &m, &meta), SP_OK);
    sp_ckpt_meta_free(&meta);
    sp_model_free(m);

    write_valid("noformat.h5", path, sizeof path);
    h5_edit_delete_attr(path, "/", "format");
    expect_load_failure(path, SP_ERR_INPUT, "'format'", NULL);
}

static void test_datasets(void **state)
{
    (void)state;
    char path[4200];
    write_valid("missing.h5", path, sizeof path);
    h5_edit_delete(path, "/params/blocks/1/attn/wq");
    expect_load_failure(path, SP_ERR_INPUT, "/params/blocks/1/attn/wq", "missing dataset", NULL);

    write_valid("nogroup.h5", path, sizeof path);
    h5_edit_delete(path, "/config");
    expect_load_failure(path, SP_ERR_INPUT, "/config", "missing group", NULL);

    int64_t wrong_shape[2] = {16, 17}, flat[1] = {256}, vec[2] = {16, 1};
    write_valid("shape.h5", path, sizeof path);
    h5_edit_replace(path, "/params/blocks/0/attn/wq", H5T_IEEE_F32LE, 2, wrong_shape);
    expect_load_failure(path, SP_ERR_INPUT, "/params/blocks/0/attn/wq", "expected shape [16, 16], found [16, 17]",
                        NULL);

    write_valid("rank.h5", path, sizeof path);
    h5_edit_replace(path, "/params/blocks/0/attn/wq", H5T_IEEE_F32LE, 1, flat);
    expect_load_failure(path, SP_ERR_INPUT, "/params/blocks/0/attn/wq", "expected rank 2, found rank 1", NULL);

    write_valid("vector.h5", path, sizeof path);
    h5_edit_replace(path, "/params/blocks/1/n2/gain", H5T_IEEE_F32LE, 2, vec);
    expect_load_failure(path, SP_ERR_INPUT, "/params/blocks/1/n2/gain", "expected rank 1", NULL);

    int64_t square[2] = {16, 16};
    write_valid("dtype.h5", path, sizeof path);
    h5_edit_replace(path, "/params/blocks/0/attn/wq", H5T_STD_I32LE, 2, square);
    expect_load_failure(path, SP_ERR_INPUT, "/params/blocks/0/attn/wq", "expected a float dataset, found int32", NULL);

    write_valid("extra.h5", path, sizeof path);
    h5_edit_replace(path, "/params/blocks/0/attn/wz", H5T_IEEE_F32LE, 2, square);
    expect_load_failure(path, SP_ERR_INPUT, "/params/blocks/0/attn/wz", "unexpected dataset", NULL);

    /* any float width is accepted and converted */
    write_valid("float64.h5", path, sizeof path);
    h5_edit_replace(path, "/params/blocks/0/attn/wq", H5T_IEEE_F64LE, 2, square);
    sp_model *m = NULL;
    sp_ckpt_meta meta;
    sp_error_clear();
    assert_int_equal(sp_ckpt_load(path, sp_backend_cpu(), &m, &meta), SP_OK);
    sp_real wq[256];
    sp_model_get_param(m, sp_model_find_param(m, "blocks/0/attn/wq"), wq);
    for (int i = 0; i < 256; i++)
        assert_true(wq[i] == 1);
    sp_ckpt_meta_free(&meta);
    sp_model_free(m);
}

static void test_nonfinite(void **state)
{
    (void)state;
    char path[4200];
    write_valid("nan.h5", path, sizeof path);
    h5_edit_poison(path, "/params/blocks/1/ffn/w2", 3, NAN);
    expect_load_failure(path, SP_ERR_NUMERIC, "/params/blocks/1/ffn/w2", "3 of 512 values are NaN or Inf", NULL);
    /* the meta reader does not read values */
    sp_ckpt_meta meta;
    sp_error_clear();
    assert_int_equal(sp_ckpt_read_meta(path, &meta), SP_OK);
    sp_ckpt_meta_free(&meta);

    write_valid("inf.h5", path, sizeof path);
    h5_edit_poison(path, "/params/embed/tok", 1, -INFINITY);
    expect_load_failure(path, SP_ERR_NUMERIC, "/params/embed/tok", "1 of 176 values", NULL);
}

static void test_config_contradictions(void **state)
{
    (void)state;
    char path[4200];
    write_valid("heads.h5", path, sizeof path);
    h5_edit_set_int(path, "/config", "n_heads", 3);
    expect_load_failure(path, SP_ERR_INPUT, "/config", "n_heads = 3 does not divide d_model = 16", NULL);

    write_valid("kvheads.h5", path, sizeof path);
    h5_edit_set_int(path, "/config", "n_heads", 4);
    h5_edit_set_int(path, "/config", "n_kv_heads", 3);
    expect_load_failure(path, SP_ERR_INPUT, "/config", "n_kv_heads = 3 does not divide n_heads = 4", NULL);

    write_valid("variant.h5", path, sizeof path);
    h5_edit_set_str(path, "/config", "variant", "sandwich");
    expect_load_failure(path, SP_ERR_INPUT, "/config/variant", "sandwich", "pre|post|span", NULL);

    write_valid("norm.h5", path, sizeof path);
    h5_edit_set_str(path, "/config", "norm", "batchnorm");
    expect_load_failure(path, SP_ERR_INPUT, "/config/norm", "batchnorm", "layernorm|rmsnorm", NULL);

    write_valid("notint.h5", path, sizeof path);
    h5_edit_set_str(path, "/config", "d_model", "sixteen");
    expect_load_failure(path, SP_ERR_INPUT, "/config/d_model", "sixteen", NULL);

    /* the variant's parameters must match: pre has no n0 and no sum norms named like span's */
    write_valid("othervariant.h5", path, sizeof path);
    h5_edit_set_str(path, "/config", "variant", "pre");
    expect_load_failure(path, SP_ERR_INPUT, "/params/", NULL);
}

static void test_absurd_sizes(void **state)
{
    (void)state;
    char path[4200];
    write_valid("negative.h5", path, sizeof path);
    h5_edit_set_int(path, "/config", "d_model", -16);
    expect_load_failure(path, SP_ERR_INPUT, "d_model = -16 is out of range", NULL);

    write_valid("huge.h5", path, sizeof path);
    h5_edit_set_int(path, "/config", "d_model", (int64_t)1 << 40);
    expect_load_failure(path, SP_ERR_INPUT, "/config/d_model", "1099511627776", NULL);

    /* each size within its own limit, the product absurd: rejected before any allocation */
    write_valid("product.h5", path, sizeof path);
    h5_edit_set_int(path, "/config", "vocab_size", 1 << 22);
    h5_edit_set_int(path, "/config", "d_model", 1 << 20);
    expect_load_failure(path, SP_ERR_INPUT, "2^32 weights", "embed/tok", NULL);

    write_valid("layers.h5", path, sizeof path);
    h5_edit_set_int(path, "/config", "n_layers", 0);
    expect_load_failure(path, SP_ERR_INPUT, "n_layers = 0 is out of range", NULL);
}

static void test_bad_tokenizer_and_train(void **state)
{
    (void)state;
    char path[4200];
    scratch_path(path, sizeof path, "tok.h5");
    sp_model *m = tiny_model(1);
    sp_ckpt_meta meta;
    sp_ckpt_meta_init(&meta);
    meta.has_tokenizer = 1;
    vocab_tokenizer(&meta.tokenizer);
    meta.train.present = 1;
    snprintf(meta.train.status, sizeof meta.train.status, "done");
    sp_error_clear();
    assert_int_equal(sp_ckpt_write(path, m, &meta, NULL, NULL), SP_OK);
    char bad[4200];
    scratch_path(bad, sizeof bad, "tok-bad.h5");

    int64_t short_offsets[1] = {11};
    h5_edit_copy(path, bad);
    h5_edit_replace(bad, "/tokenizer/offsets", H5T_STD_I64LE, 1, short_offsets);
    expect_load_failure(bad, SP_ERR_INPUT, "/tokenizer/offsets", "expected shape [12], found [11]", NULL);

    int64_t offsets[1] = {12}; /* all ones: not starting at 0 */
    h5_edit_copy(path, bad);
    h5_edit_replace(bad, "/tokenizer/offsets", H5T_STD_I64LE, 1, offsets);
    expect_load_failure(bad, SP_ERR_INPUT, "/tokenizer/offsets", NULL);

    h5_edit_copy(path, bad);
    h5_edit_set_str(bad, "/tokenizer", "kind", "sentencepiece");
    expect_load_failure(bad, SP_ERR_INPUT, "/tokenizer/kind", "sentencepiece", NULL);

    h5_edit_copy(path, bad);
    h5_edit_set_str(bad, "/tokenizer", "kind", "bytes"); /* vocab_size is 11 */
    expect_load_failure(bad, SP_ERR_INPUT, "/tokenizer", "vocab_size 256", NULL);

    h5_edit_copy(path, bad);
    h5_edit_set_int(bad, "/tokenizer", "bos_id", 11);
    expect_load_failure(bad, SP_ERR_INPUT, "/tokenizer", "bos_id 11", NULL);

    h5_edit_copy(path, bad);
    h5_edit_set_str(bad, "/train", "status", "exploded");
    expect_load_failure(bad, SP_ERR_INPUT, "/train/status", "exploded", NULL);

    h5_edit_copy(path, bad);
    h5_edit_set_int(bad, "/train", "step", -5);
    expect_load_failure(bad, SP_ERR_INPUT, "/train", "-5", NULL);

    h5_edit_copy(path, bad);
    h5_edit_delete_attr(bad, "/train", "rng_state");
    expect_load_failure(bad, SP_ERR_INPUT, "/train/rng_state", "missing attribute", NULL);

    sp_ckpt_meta_free(&meta);
    sp_model_free(m);
}

static void test_unwritable_output(void **state)
{
    (void)state;
    char path[4200];
    scratch_path(path, sizeof path, "no/such/dir/out.h5");
    sp_model *m = tiny_model(1);
    sp_ckpt_meta meta;
    sp_ckpt_meta_init(&meta);
    sp_error_clear();
    assert_int_equal(sp_ckpt_write(path, m, &meta, NULL, NULL), SP_ERR_IO);
    assert_non_null(strstr(sp_error_message(), path));
    assert_non_null(strstr(sp_error_message(), "No such file or directory"));

    scratch_path(path, sizeof path, "");
    sp_error_clear();
    assert_int_equal(sp_ckpt_write(path, m, &meta, NULL, NULL), SP_ERR_IO);
    assert_non_null(strstr(sp_error_message(), "is a directory"));
    sp_error_clear();
    sp_ckpt_meta_free(&meta);
    sp_model_free(m);
}

/* A write that fails half way (the file size limit makes write() fail with EFBIG) leaves no
 * temporary file, and an older checkpoint at the same path untouched. */
static void test_failed_write_leaves_nothing(void **state)
{
    (void)state;
    char path[4200];
    scratch_path(path, sizeof path, "partial.h5");
    sp_model *m = tiny_model(1), *other = tiny_model(2);
    sp_ckpt_meta meta;
    sp_ckpt_meta_init(&meta);
    struct rlimit old_limit, small = {.rlim_cur = 8192, .rlim_max = RLIM_INFINITY};
    getrlimit(RLIMIT_FSIZE, &old_limit);
    small.rlim_max = old_limit.rlim_max;
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);

    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    sp_error_clear();
    sp_status st = sp_ckpt_write(path, m, &meta, NULL, NULL);
    setrlimit(RLIMIT_FSIZE, &old_limit);
    assert_int_equal(st, SP_ERR_IO);
    assert_null(strchr(sp_error_message(), '\n'));
    assert_int_equal(scratch_count_entries("partial.h5*"), 0);

    /* an existing checkpoint survives a failed overwrite */
    sp_error_clear();
    assert_int_equal(sp_ckpt_write(path, m, &meta, NULL, NULL), SP_OK);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    st = sp_ckpt_write(path, other, &meta, NULL, NULL);
    setrlimit(RLIMIT_FSIZE, &old_limit);
    signal(SIGXFSZ, old_handler);
    assert_int_equal(st, SP_ERR_IO);
    assert_int_equal(scratch_count_entries("partial.h5*"), 1);
    sp_model *back = NULL;
    sp_ckpt_meta got;
    sp_error_clear();
    assert_int_equal(sp_ckpt_load(path, sp_backend_cpu(), &back, &got), SP_OK);
    assert_same_params(m, back);
    sp_ckpt_meta_free(&got);
    sp_model_free(back);
    sp_ckpt_meta_free(&meta);
    sp_model_free(m);
    sp_model_free(other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_no_optional_groups),
        cmocka_unit_test(test_missing_not_hdf5_truncated),
        cmocka_unit_test(test_format_and_version),
        cmocka_unit_test(test_datasets),
        cmocka_unit_test(test_nonfinite),
        cmocka_unit_test(test_config_contradictions),
        cmocka_unit_test(test_absurd_sizes),
        cmocka_unit_test(test_bad_tokenizer_and_train),
        cmocka_unit_test(test_unwritable_output),
        cmocka_unit_test(test_failed_write_leaves_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
