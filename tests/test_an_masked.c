/* The model passes and the whole analysis on the masked backend (tests/support/masked_backend.h)
 * against the CPU backend. The masked backend runs the CPU ops behind pointers that fault when the
 * host touches them, so this finds host code that reads or writes backend memory directly (fine on
 * the CPU, a crash or garbage on a GPU) without a GPU; and since the same ops run on the same
 * values, every result must be bit-identical to the CPU run's.
 * - the table wraps every op of kernels/backend.h and masks what it allocates;
 * - every variant, two option combinations: forward (loss, logits, every capture point), backward
 *   (every parameter gradient, the embedding gradient), each block's JVP, VJP, apply and
 *   Hessian-vector product, an AdamW step with accumulation and clipping (train/optimizer.h),
 *   checkpoints with the optimizer state written on one backend and loaded on the other, and the
 *   forward and backward passes again with a block skipped; the same for every tiny pretrained config (biases, q/k norms, RoPE tables,
 *   soft-caps, windows, embedding scale);
 * - `analyze` (every analyzer, the opt-in curvature too, through sp_analyze_run with the backend injected) on a checkpoint of
 *   every variant, under options that take the other code paths (centering, last token, debiased
 *   CKA, full singular values, a memory budget that cuts the batch), and on an activation dump:
 *   identical reports, every array and every summary scalar but the run's times. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "analyzers/driver.h"
#include "io/checkpoint.h"
#include "train/optimizer.h"
#include "support/act_dump.h"
#include "support/analyze_cli.h"
#include "support/masked_backend.h"
#include "support/model_fixture.h"
#include "support/report_view.h"
#include "support/scratch.h"
#include "support/vec_util.h"

enum { BATCH = 2, SEQ = 8, MAX_STREAMS = 2 };

/* ---- the table ---- */

static void test_table_masks_and_wraps_every_op(void **state)
{
    (void)state;
    const sp_backend *cpu = sp_backend_cpu(), *masked = masked_backend();
    assert_string_equal(masked->name, "masked");
    /* every field after the name is an op: each one is a wrapper of its own, none left NULL */
    typedef void (*op_ptr)(void);
    enum { N_OPS = (sizeof(sp_backend) - offsetof(sp_backend, alloc)) / sizeof(op_ptr) };
    op_ptr cpu_ops[N_OPS], masked_ops[N_OPS];
    memcpy(cpu_ops, (const char *)cpu + offsetof(sp_backend, alloc), sizeof cpu_ops);
    memcpy(masked_ops, (const char *)masked + offsetof(sp_backend, alloc), sizeof masked_ops);
    for (int i = 0; i < N_OPS; i++) {
        assert_non_null(masked_ops[i]);
        assert_true(masked_ops[i] != cpu_ops[i]);
    }
    /* alloc hands out a non-canonical address; the data still goes through upload and download */
    const sp_real host[3] = {1, -2, 3};
    sp_real back[3] = {0};
    sp_real *p = masked->alloc(sizeof host, "masked test buffer");
    assert_true((uintptr_t)p >> 63);
    masked->upload(p, host, sizeof host);
    masked->copy(p + 1, p, sizeof(sp_real)); /* pointer arithmetic on masked pointers works */
    masked->download(back, p, sizeof back);
    assert_true(back[0] == 1 && back[1] == 1 && back[2] == 3);
    masked->free(p);
    masked->free(NULL);
}

/* ---- model passes: the CPU model and its masked twin ---- */

typedef struct {
    sp_model *m[2]; /* [0] on the CPU, [1] the same parameters on the masked backend */
    const char *what;
} twin;

static void twin_create(twin *t, const sp_config *cfg, uint64_t seed, const char *what)
{
    t->what = what;
    t->m[0] = fixture_model(cfg, seed, 0.3);
    assert_int_equal(sp_model_create(cfg, masked_backend(), &t->m[1]), SP_OK);
    for (int i = 0; i < sp_model_n_params(t->m[0]); i++) {
        sp_real *host = vec_zeros(sp_param_numel(sp_model_param_spec(t->m[0], i)));
        sp_model_get_param(t->m[0], i, host);
        sp_model_set_param(t->m[1], i, host);
        free(host);
    }
}

static void twin_free(twin *t)
{
    sp_model_free(t->m[0]);
    sp_model_free(t->m[1]);
}

/* n elements of backend memory, a of the CPU model and b of the masked one, are bit-identical. */
static void expect_same(const twin *t, const char *name, int index, const sp_real *a, const sp_real *b, size_t n)
{
    if (!a || !b) {
        if (a || b)
            fail_msg("%s: %s %d is NULL on one backend only", t->what, name, index);
        return;
    }
    sp_real *ha = fixture_download(t->m[0], a, n), *hb = fixture_download(t->m[1], b, n);
    for (size_t i = 0; i < n; i++)
        if (memcmp(&ha[i], &hb[i], sizeof ha[i]) != 0)
            fail_msg("%s: %s %d, entry %zu of %zu: CPU %.9g, masked %.9g", t->what, name, index, i, n, (double)ha[i],
                     (double)hb[i]);
    free(ha);
    free(hb);
}

static void expect_same_forward(twin *t, const int32_t *tokens, const int32_t *targets)
{
    const sp_config *cfg = sp_model_config(t->m[0]);
    const size_t rows = (size_t)BATCH * SEQ, n_hidden = rows * (size_t)cfg->d_model;
    double loss[2];
    for (int k = 0; k < 2; k++)
        assert_int_equal(sp_model_forward(t->m[k], tokens, targets, BATCH, SEQ, &loss[k]), SP_OK);
    if (memcmp(&loss[0], &loss[1], sizeof loss[0]) != 0)
        fail_msg("%s: loss: CPU %.17g, masked %.17g", t->what, loss[0], loss[1]);
    expect_same(t, "logits", 0, sp_model_logits(t->m[0]), sp_model_logits(t->m[1]), rows * (size_t)cfg->vocab_size);
    for (int l = 0; l <= cfg->n_layers; l++)
        for (int s = 0; s < sp_config_n_streams(cfg); s++)
            expect_same(t, "hidden state of layer", l, sp_model_hidden(t->m[0], l, s), sp_model_hidden(t->m[1], l, s),
                        n_hidden);
    for (int l = 0; l < cfg->n_layers; l++) {
        expect_same(t, "FFN latent of layer", l, sp_model_ffn_latent(t->m[0], l), sp_model_ffn_latent(t->m[1], l),
                    rows * (size_t)cfg->d_ff);
        expect_same(t, "sum_a of layer", l, sp_model_slot(t->m[0], l, "sum_a"), sp_model_slot(t->m[1], l, "sum_a"),
                    n_hidden);
    }
}

static void expect_same_backward(twin *t)
{
    const sp_config *cfg = sp_model_config(t->m[0]);
    for (int k = 0; k < 2; k++)
        assert_int_equal(sp_model_backward(t->m[k]), SP_OK);
    for (int i = 0; i < sp_model_n_params(t->m[0]); i++)
        expect_same(t, sp_model_param_spec(t->m[0], i)->name, i, sp_model_grad(t->m[0], i), sp_model_grad(t->m[1], i),
                    sp_param_numel(sp_model_param_spec(t->m[0], i)));
    expect_same(t, "embedding gradient", 0, sp_model_embed_grad(t->m[0]), sp_model_embed_grad(t->m[1]),
                (size_t)BATCH * SEQ * (size_t)cfg->d_model);
}

/* JVP, VJP and apply of every block on the same random inputs. */
static void expect_same_block_maps(twin *t, sp_rng *rng)
{
    const sp_config *cfg = sp_model_config(t->m[0]);
    const int n_streams = sp_config_n_streams(cfg);
    const size_t n = (size_t)BATCH * SEQ * (size_t)cfg->d_model;
    sp_real *in[2][MAX_STREAMS], *out[2][MAX_STREAMS];
    for (int k = 0; k < 2; k++)
        for (int s = 0; s < n_streams; s++) {
            const sp_backend *be = sp_model_backend(t->m[k]);
            in[k][s] = be->alloc(n * sizeof(sp_real), "test block input");
            out[k][s] = be->alloc(n * sizeof(sp_real), "test block output");
            assert_true(in[k][s] && out[k][s]);
        }
    for (int l = 0; l < cfg->n_layers; l++)
        for (int map = 0; map < 3; map++) {
            for (int s = 0; s < n_streams; s++) {
                sp_real *host = vec_random(rng, n, 1.0);
                for (int k = 0; k < 2; k++)
                    sp_model_backend(t->m[k])->upload(in[k][s], host, n * sizeof *host);
                free(host);
            }
            for (int k = 0; k < 2; k++) {
                const sp_real *const *x = (const sp_real *const *)in[k];
                sp_status st = map == 0   ? sp_model_block_jvp(t->m[k], l, x, out[k])
                               : map == 1 ? sp_model_block_vjp(t->m[k], l, x, out[k])
                                          : sp_model_block_apply(t->m[k], l, x, out[k]);
                assert_int_equal(st, SP_OK);
            }
            static const char *const names[] = {"block JVP of layer", "block VJP of layer", "block apply of layer"};
            for (int s = 0; s < n_streams; s++)
                expect_same(t, names[map], l, out[0][s], out[1][s], n);
        }
    for (int k = 0; k < 2; k++)
        for (int s = 0; s < n_streams; s++) {
            sp_model_backend(t->m[k])->free(in[k][s]);
            sp_model_backend(t->m[k])->free(out[k][s]);
        }
}

/* The Hessian-vector product of every block on the same random vector. */
static void expect_same_hvps(twin *t, sp_rng *rng)
{
    for (int l = 0; l < sp_model_config(t->m[0])->n_layers; l++) {
        size_t offset, n;
        sp_model_block_param_range(t->m[0], l, &offset, &n);
        sp_real *host = vec_random(rng, n, 1.0), *v[2], *hv[2];
        for (int k = 0; k < 2; k++) {
            const sp_backend *be = sp_model_backend(t->m[k]);
            v[k] = be->alloc(n * sizeof(sp_real), "test HVP input");
            hv[k] = be->alloc(n * sizeof(sp_real), "test HVP output");
            assert_true(v[k] && hv[k]);
            be->upload(v[k], host, n * sizeof *host);
            assert_int_equal(sp_model_hvp(t->m[k], l, v[k], hv[k]), SP_OK);
        }
        expect_same(t, "Hessian-vector product of block", l, hv[0], hv[1], n);
        for (int k = 0; k < 2; k++) {
            sp_model_backend(t->m[k])->free(v[k]);
            sp_model_backend(t->m[k])->free(hv[k]);
        }
        free(host);
    }
}

/* Each twin's checkpoint (with the AdamW moments o[k]) loaded on the other backend: the CPU's file
 * on the masked backend, the masked one's on the CPU; the parameters and moments agree. */
static void expect_same_checkpoint_round_trip(twin *t, sp_optim *const o[2])
{
    const int n = sp_model_n_params(t->m[0]);
    char path[2][4200];
    for (int k = 0; k < 2; k++) {
        char file[160];
        snprintf(file, sizeof file, "round_trip_%d.h5", k);
        scratch_path(path[k], sizeof path[k], file);
        sp_ckpt_meta meta;
        sp_ckpt_meta_init(&meta);
        meta.cfg = *sp_model_config(t->m[k]);
        assert_int_equal(sp_ckpt_write(path[k], t->m[k], &meta, o[k]->m, o[k]->v), SP_OK);
        sp_ckpt_meta_free(&meta);
    }
    twin loaded = {.what = t->what};
    sp_real **moments[2][2]; /* [model][m or v] */
    for (int k = 0; k < 2; k++) {
        const sp_backend *be = sp_model_backend(t->m[k]);
        sp_ckpt_meta meta;
        assert_int_equal(sp_ckpt_load(path[1 - k], be, &loaded.m[k], &meta), SP_OK);
        sp_ckpt_meta_free(&meta);
        for (int mv = 0; mv < 2; mv++) {
            moments[k][mv] = calloc((size_t)n, sizeof(sp_real *));
            assert_non_null(moments[k][mv]);
            for (int i = 0; i < n; i++)
                assert_non_null(moments[k][mv][i] = be->alloc(o[k]->numel[i] * sizeof(sp_real), "test moment"));
        }
        assert_int_equal(sp_ckpt_load_optim(path[1 - k], loaded.m[k], moments[k][0], moments[k][1]), SP_OK);
    }
    for (int i = 0; i < n; i++) {
        expect_same(&loaded, "parameter loaded from the other backend's checkpoint", i, sp_model_param(loaded.m[0], i),
                    sp_model_param(loaded.m[1], i), o[0]->numel[i]);
        for (int mv = 0; mv < 2; mv++)
            expect_same(&loaded, mv ? "AdamW v loaded from a checkpoint" : "AdamW m loaded from a checkpoint", i,
                        moments[0][mv][i], moments[1][mv][i], o[0]->numel[i]);
    }
    for (int k = 0; k < 2; k++)
        for (int mv = 0; mv < 2; mv++) {
            for (int i = 0; i < n; i++)
                sp_model_backend(loaded.m[k])->free(moments[k][mv][i]);
            free(moments[k][mv]);
        }
    twin_free(&loaded);
}

/* Accumulates the gradients twice, takes their norm and one clipped AdamW step, on both models;
 * then checkpoints them across the backends. */
static void expect_same_optimizer_step(twin *t)
{
    const int n = sp_model_n_params(t->m[0]);
    size_t *numel = calloc((size_t)n, sizeof *numel);
    int *decay = calloc((size_t)n, sizeof *decay);
    sp_real **params = calloc((size_t)n, sizeof *params), **grads = calloc((size_t)n, sizeof *grads);
    assert_true(numel && decay && params && grads);
    const sp_adamw_config ac = {.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .grad_clip = 0.01};
    double norm[2];
    sp_optim *o[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < n; i++) {
            numel[i] = sp_param_numel(sp_model_param_spec(t->m[k], i));
            decay[i] = sp_model_param_spec(t->m[k], i)->decay;
            params[i] = sp_model_param(t->m[k], i);
            grads[i] = sp_model_grad(t->m[k], i);
        }
        assert_int_equal(sp_optim_create(sp_model_backend(t->m[k]), &ac, n, numel, decay, &o[k]), SP_OK);
        assert_int_equal(sp_optim_accumulate(o[k], grads, 0.5, 1), SP_OK);
        assert_int_equal(sp_optim_accumulate(o[k], grads, 0.5, 0), SP_OK);
        norm[k] = sp_optim_grad_norm(o[k], o[k]->acc, NULL);
        sp_optim_step(o[k], params, o[k]->acc, norm[k], 1e-2);
    }
    if (memcmp(&norm[0], &norm[1], sizeof norm[0]) != 0)
        fail_msg("%s: gradient norm: CPU %.17g, masked %.17g", t->what, norm[0], norm[1]);
    for (int i = 0; i < n; i++)
        expect_same(t, "parameter after an AdamW step", i, sp_model_param(t->m[0], i), sp_model_param(t->m[1], i),
                    numel[i]);
    expect_same_checkpoint_round_trip(t, o);
    sp_optim_free(o[0]);
    sp_optim_free(o[1]);
    free(numel);
    free(decay);
    free(params);
    free(grads);
}

/* Every model pass of cfg on the CPU and on its masked twin, then again with block 1 skipped. */
static void check_passes(const sp_config *cfg, uint64_t seed, uint64_t token_seed, const char *what)
{
    twin t;
    twin_create(&t, cfg, seed, what);
    sp_rng rng;
    sp_rng_seed(&rng, token_seed);
    int32_t tokens[BATCH * SEQ], targets[BATCH * SEQ];
    fixture_tokens(&rng, BATCH * SEQ, cfg->vocab_size, tokens);
    fixture_tokens(&rng, BATCH * SEQ, cfg->vocab_size, targets);
    targets[3] = -1; /* an ignored target */
    expect_same_forward(&t, tokens, targets);
    expect_same_backward(&t);
    expect_same_block_maps(&t, &rng);
    expect_same_hvps(&t, &rng);
    expect_same_optimizer_step(&t);
    /* a skipped block (pruning probes) on both */
    for (int k = 0; k < 2; k++)
        assert_int_equal(sp_model_set_block_skip(t.m[k], 1, 1), SP_OK);
    expect_same_forward(&t, tokens, targets);
    expect_same_backward(&t);
    twin_free(&t);
}

static void test_model_passes(void **state)
{
    const int variant = (int)(intptr_t)*state;
    const int combos[2][3] = {{SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED},
                              {SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE}};
    for (int c = 0; c < 2; c++) {
        sp_config cfg;
        fixture_tiny_config(&cfg, variant, combos[c][0], combos[c][1], combos[c][2]);
        cfg.tie_embeddings = c; /* the tied head's gradient sums two contributions */
        char what[96];
        snprintf(what, sizeof what, "%s/%s/%s/%s", sp_variant_names[variant], sp_norm_names[combos[c][0]],
                 sp_ffn_names[combos[c][1]], sp_pos_names[combos[c][2]]);
        check_passes(&cfg, 31u + (uint64_t)(variant * 2 + c), 7u + (uint64_t)c, what);
    }
}

/* The options of pretrained architectures (biases, RoPE tables in backend memory, windows,
 * soft-caps, ...) through the masked backend too. */
static void test_pretrained_passes(void **state)
{
    (void)state;
    for (int i = 0; i < FIXTURE_N_PRETRAINED; i++) {
        sp_config cfg;
        const char *name = fixture_pretrained_config(i, &cfg);
        check_passes(&cfg, 61u + (uint64_t)i, 9u + (uint64_t)i, name);
    }
}

/* ---- the analysis: identical reports ---- */

static int is_timing_key(const char *group, const char *key)
{
    return strcmp(group, "run") == 0 && (strncmp(key, "seconds", 7) == 0 || strcmp(key, "peak_rss_mib") == 0);
}

/* The two name lists (sp_report_list) are equal. */
static void expect_same_names(const char *what, char **a, int n_a, char **b, int n_b)
{
    if (n_a != n_b)
        fail_msg("%s: %d names on the CPU, %d masked", what, n_a, n_b);
    for (int i = 0; i < n_a; i++)
        if (strcmp(a[i], b[i]) != 0)
            fail_msg("%s: name %d: CPU %s, masked %s", what, i, a[i], b[i]);
}

static void expect_same_arrays(const char *who, const report_view *v[2], const char *analyzer)
{
    char **names[2] = {NULL, NULL};
    int n[2] = {0, 0};
    for (int k = 0; k < 2; k++)
        assert_int_equal(sp_report_list(v[k]->reader, analyzer, &names[k], &n[k]), SP_OK);
    char what[256];
    snprintf(what, sizeof what, "%s: arrays of %s", who, analyzer);
    expect_same_names(what, names[0], n[0], names[1], n[1]);
    assert_true(n[0] > 0);
    for (int i = 0; i < n[0]; i++) {
        int rank[2];
        int64_t shape[2][4] = {{0}};
        double *data[2];
        for (int k = 0; k < 2; k++)
            data[k] = report_view_array(v[k], analyzer, names[0][i], &rank[k], shape[k]);
        if (rank[0] != rank[1] || memcmp(shape[0], shape[1], sizeof shape[0]) != 0)
            fail_msg("%s: %s/%s: the shapes differ", who, analyzer, names[0][i]);
        size_t numel = 1;
        for (int d = 0; d < rank[0]; d++)
            numel *= (size_t)shape[0][d];
        for (size_t j = 0; j < numel; j++)
            if (memcmp(&data[0][j], &data[1][j], sizeof(double)) != 0)
                fail_msg("%s: %s/%s entry %zu of %zu: CPU %.17g, masked %.17g", who, analyzer, names[0][i], j, numel,
                         data[0][j], data[1][j]);
        free(data[0]);
        free(data[1]);
    }
    sp_report_names_free(names[0], n[0]);
    sp_report_names_free(names[1], n[1]);
}

/* metrics.* and skipped.* of both summaries: the same keys, equal values (the run's times aside). */
static void expect_same_summaries(const char *who, const report_view *v[2])
{
    for (int top = 0; top < 2; top++) {
        const char *top_name = top ? "skipped" : "metrics";
        const cJSON *g[2] = {cJSON_GetObjectItemCaseSensitive(v[0]->summary, top_name),
                             cJSON_GetObjectItemCaseSensitive(v[1]->summary, top_name)};
        assert_int_equal(cJSON_GetArraySize(g[0]), cJSON_GetArraySize(g[1]));
        const cJSON *item;
        cJSON_ArrayForEach(item, g[0])
        {
            const cJSON *other = cJSON_GetObjectItemCaseSensitive(g[1], item->string);
            if (!other)
                fail_msg("%s: %s.%s is missing from the masked summary", who, top_name, item->string);
            if (top) {
                if (strcmp(item->valuestring, other->valuestring) != 0)
                    fail_msg("%s: skipped.%s: CPU '%s', masked '%s'", who, item->string, item->valuestring,
                             other->valuestring);
                continue;
            }
            assert_int_equal(cJSON_GetArraySize(item), cJSON_GetArraySize(other));
            const cJSON *key;
            cJSON_ArrayForEach(key, item)
            {
                const cJSON *o = cJSON_GetObjectItemCaseSensitive(other, key->string);
                if (!o)
                    fail_msg("%s: metrics.%s.%s is missing from the masked summary", who, item->string, key->string);
                if (is_timing_key(item->string, key->string))
                    continue;
                const int same = cJSON_IsNumber(key) ? cJSON_IsNumber(o) && key->valuedouble == o->valuedouble
                                                     : cJSON_IsNull(key) && cJSON_IsNull(o);
                if (!same)
                    fail_msg("%s: metrics.%s.%s: CPU %.17g, masked %.17g", who, item->string, key->string,
                             key->valuedouble, o->valuedouble);
            }
        }
    }
}

/* Every analyzer ran or was skipped, in both reports alike. */
static void expect_same_reports(const char *who, const char *cpu_path, const char *masked_path)
{
    report_view views[2];
    report_view_open(&views[0], cpu_path);
    report_view_open(&views[1], masked_path);
    const report_view *v[2] = {&views[0], &views[1]};
    for (int k = 0; k < 2; k++) { /* the driver ran on the injected backend */
        const cJSON *input = cJSON_GetObjectItemCaseSensitive(v[k]->summary, "input");
        const cJSON *device = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(input, "options"),
                                                               "device");
        assert_true(cJSON_IsString(device));
        assert_string_equal(device->valuestring, k ? "masked" : "cpu");
    }
    char **groups[2] = {NULL, NULL};
    int n[2] = {0, 0};
    for (int k = 0; k < 2; k++)
        assert_int_equal(sp_report_list(v[k]->reader, NULL, &groups[k], &n[k]), SP_OK);
    char what[160];
    snprintf(what, sizeof what, "%s: analyzers with arrays", who);
    expect_same_names(what, groups[0], n[0], groups[1], n[1]);
    for (int i = 0; i < n[0]; i++)
        expect_same_arrays(who, v, groups[0][i]);
    for (int i = 0; i < sp_n_analyzers; i++) {
        const char *name = sp_analyzers[i]->name;
        int has_arrays = 0;
        for (int j = 0; j < n[0]; j++)
            has_arrays |= strcmp(groups[0][j], name) == 0;
        if (!has_arrays && !report_view_skipped(v[0], name) &&
            !cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(v[0]->summary, "metrics"), name))
            fail_msg("%s: %s neither ran nor was skipped", who, name);
    }
    expect_same_summaries(who, v);
    sp_report_names_free(groups[0], n[0]);
    sp_report_names_free(groups[1], n[1]);
    report_view_close(&views[0]);
    report_view_close(&views[1]);
}

/* `analyze` of input (with the token file, NULL for a dump) on the CPU and on the masked backend,
 * then the two reports compared. */
static void analyze_both(const char *name, const char *input, const char *tokens, const sp_analyze_options *opts)
{
    char path[2][4200];
    const sp_backend *backends[2] = {sp_backend_cpu(), masked_backend()};
    for (int k = 0; k < 2; k++) {
        char file[128];
        snprintf(file, sizeof file, "%s_%s.h5", name, backends[k]->name);
        scratch_path(path[k], sizeof path[k], file);
        sp_analyze_job job = {.input = input, .out = path[k], .tokens = tokens, .backend = backends[k], .quiet = 1,
                              .opts = *opts};
        sp_error_clear();
        backends[k]->mem_reset_peak(); /* both count in the CPU backend's totals, over the whole process */
        if (sp_analyze_run(&job) != SP_OK)
            fail_msg("%s: analyze on %s: %s", name, backends[k]->name, sp_error_message());
    }
    expect_same_reports(name, path[0], path[1]);
}

/* Small enough to run in well under a second per backend; every analyzer, the opt-in ones too. */
static void small_options(sp_analyze_options *o)
{
    sp_analyze_options_defaults(o);
    for (int i = 0; i < sp_n_analyzers; i++) {
        strcat(o->metrics, i ? "," : "");
        strcat(o->metrics, sp_analyzers[i]->name);
    }
    o->curv_seqs = 1;
    o->curv_iters = 8;
    o->hutchinson_samples = 3;
    o->n_tokens = 12 * SEQ;
    o->seq_len = SEQ;
    o->batch = 4;
    o->topk = 3;
    o->power_iters = 20;
    o->jac_tokens = 2;
    o->jac_seq = 6;
    o->grad_batches = 2;
    o->prune_batches = 2;
}

/* A checkpoint of the tiny model (model_fixture.h) with the given options, analyzed both ways. */
static void check_checkpoint(int variant, int norm, int ffn, int pos, int tied, const sp_analyze_options *opts)
{
    sp_config cfg;
    fixture_tiny_config(&cfg, variant, norm, ffn, pos);
    cfg.tie_embeddings = tied;
    sp_model *m = fixture_model(&cfg, 100u + (uint64_t)variant, 0.3);
    sp_ckpt_meta meta;
    sp_ckpt_meta_init(&meta);
    meta.cfg = cfg;
    snprintf(meta.source, sizeof meta.source, "test_an_masked");
    char name[64], ckpt[4200], tokens[4200];
    snprintf(name, sizeof name, "%s.ckpt.h5", sp_variant_names[variant]);
    scratch_path(ckpt, sizeof ckpt, name);
    assert_int_equal(sp_ckpt_write(ckpt, m, &meta, NULL, NULL), SP_OK);
    sp_ckpt_meta_free(&meta);
    sp_model_free(m);
    analyze_cli_tokens("tokens.txt", 400, cfg.vocab_size, 9, tokens, sizeof tokens);
    analyze_both(sp_variant_names[variant], ckpt, tokens, opts);
}

static void test_analyze_pre(void **state)
{
    (void)state;
    sp_analyze_options o;
    small_options(&o);
    check_checkpoint(SP_VARIANT_PRE, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED, 1, &o);
}

/* with the options that take other code paths: centered cosines (a second pass), debiased CKA,
 * every singular value of the weights */
static void test_analyze_span(void **state)
{
    (void)state;
    sp_analyze_options o;
    small_options(&o);
    o.center = 1;
    o.cka_debiased = 1;
    o.singular_values = 1;
    check_checkpoint(SP_VARIANT_SPAN, SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE, 0, &o);
}

static void test_analyze_siamese(void **state)
{
    (void)state;
    sp_analyze_options o;
    small_options(&o);
    o.last_token = 1;
    o.embed_uncentered = 1;
    check_checkpoint(SP_VARIANT_SIAMESE, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED, 0, &o);
}

static void test_analyze_olmo2_hybrid(void **state)
{
    (void)state;
    sp_analyze_options o;
    small_options(&o);
    check_checkpoint(SP_VARIANT_OLMO2, SP_NORM_RMSNORM, SP_FFN_SWIGLU, SP_POS_ROPE, 0, &o);
    check_checkpoint(SP_VARIANT_HYBRID, SP_NORM_LAYERNORM, SP_FFN_GELU, SP_POS_LEARNED, 1, &o);
}

/* The remaining variants under the options that take the edge paths: the whole sequence for the
 * Jacobians, one sequence per pass, more gradient and pruning batches than the set has, topk at
 * d_model, one power iteration, last-token centered cosines (post, peri); and a memory budget that
 * cuts the batch and the Jacobian's copies (mixln, lns, deepnorm). */
static void test_analyze_edge_options(void **state)
{
    (void)state;
    const int few[] = {SP_VARIANT_POST, SP_VARIANT_PERI};
    const int tight[] = {SP_VARIANT_MIXLN, SP_VARIANT_LNS, SP_VARIANT_DEEPNORM};
    sp_analyze_options o;
    small_options(&o);
    o.seq_len = 0;
    o.jac_seq = 0;
    o.batch = 1;
    o.topk = 8;
    o.power_iters = 1;
    o.jac_tokens = 8;
    o.grad_batches = 20;
    o.prune_batches = 20;
    o.last_token = 1;
    o.center = 1;
    o.cka_debiased = 1;
    for (size_t i = 0; i < SP_ARRAY_LEN(few); i++)
        check_checkpoint(few[i], SP_NORM_RMSNORM, SP_FFN_GELU, SP_POS_ROPE, 0, &o);
    small_options(&o);
    o.max_memory_gib = 8e-5; /* one sequence per pass (of 12 asked), 2 of the 3 Jacobian copies */
    o.batch = 12;
    o.singular_values = 1;
    o.embed_uncentered = 1;
    for (size_t i = 0; i < SP_ARRAY_LEN(tight); i++)
        check_checkpoint(tight[i], SP_NORM_LAYERNORM, SP_FFN_SWIGLU, SP_POS_LEARNED, 1, &o);
}

/* A two-stream dump with latents and both pre-normalization sums (none in block 0). */
static void test_analyze_dump(void **state)
{
    (void)state;
    enum { L = 3, D = 8, S = 2, F = 12, B = 6 };
    const size_t rows = (size_t)B * SEQ;
    sp_rng rng;
    sp_rng_seed(&rng, 3);
    sp_real *hidden[(L + 1) * S], *latent[L], *sum_a[L], *sum_z[L];
    for (int i = 0; i < (L + 1) * S; i++)
        hidden[i] = vec_random(&rng, rows * D, 1.0 + i);
    for (int l = 0; l < L; l++) {
        latent[l] = vec_random(&rng, rows * F, 1.0);
        sum_a[l] = vec_random(&rng, rows * D, 2.0);
        sum_z[l] = l ? vec_random(&rng, rows * D, 3.0) : NULL;
    }
    char dump[4200];
    scratch_path(dump, sizeof dump, "dump.h5");
    act_dump_write(dump, &(act_dump_spec){.n_layers = L, .d_model = D, .n_streams = S, .d_ff = F, .batch = B,
                                          .seq_len = SEQ, .hidden = hidden, .latent = latent, .sum_a = sum_a,
                                          .sum_z = sum_z});
    sp_analyze_options o;
    small_options(&o);
    o.seq_len = 0;
    o.center = 1;
    analyze_both("dump", dump, NULL, &o);
    for (int i = 0; i < (L + 1) * S; i++)
        free(hidden[i]);
    for (int l = 0; l < L; l++) {
        free(latent[l]);
        free(sum_a[l]);
        free(sum_z[l]);
    }
}

int main(void)
{
    struct CMUnitTest tests[SP_N_VARIANTS + 8];
    int n = 0;
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_table_masks_and_wraps_every_op);
    for (int v = 0; v < SP_N_VARIANTS; v++)
        tests[n++] = (struct CMUnitTest){.name = sp_variant_names[v], .test_func = test_model_passes,
                                         .initial_state = (void *)(intptr_t)v};
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_pretrained_passes);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_analyze_pre);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_analyze_span);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_analyze_siamese);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_analyze_olmo2_hybrid);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_analyze_edge_options);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_analyze_dump);
    assert_true(n == (int)(sizeof tests / sizeof tests[0]));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
