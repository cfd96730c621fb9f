/* Tests of the training loop: the lr schedule, the data split and order, AdamW with clipping
 * against a hand computation, gradient accumulation, options through JSON, the training log, and,
 * through the CLI, exact resume after SIGKILL, divergence and bad options. */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>
#include <cmocka.h>

#include "io/checkpoint.h"
#include "io/config_file.h"
#include "support/cli_expect.h"
#include "support/h5_edit.h"
#include "support/scratch.h"
#include "support/train_runs.h"
#include "support/tree.h"
#include "train/data.h"
#include "train/optimizer.h"
#include "train/options.h"
#include "train/schedule.h"
#include "train/trainlog.h"

/* ---- the learning-rate schedule ---- */

static void test_schedule_warmup_cosine_min(void **state)
{
    (void)state;
    sp_lr_schedule s = {.lr = 1e-3, .min_lr = 1e-4, .warmup_steps = 10, .total_steps = 110};
    for (int i = 0; i < 10; i++) /* linear: lr (s + 1) / warmup */
        assert_true(fabs(sp_lr_at(&s, i) - 1e-3 * (i + 1) / 10.0) < 1e-15);
    assert_true(fabs(sp_lr_at(&s, 10) - 1e-3) < 1e-15); /* peak after warm-up */
    /* cosine: half way from step 10 to the last step (110) the rate is the mean of lr and min_lr */
    sp_lr_schedule even = {.lr = 1e-3, .min_lr = 1e-4, .warmup_steps = 10, .total_steps = 111};
    assert_true(fabs(sp_lr_at(&even, 60) - 0.5 * (1e-3 + 1e-4)) < 1e-15);
    double quarter = 1e-4 + 0.5 * (1e-3 - 1e-4) * (1 + cos(3.14159265358979323846 * 0.25));
    assert_true(fabs(sp_lr_at(&even, 35) - quarter) < 1e-15);
    assert_true(fabs(sp_lr_at(&s, 109) - 1e-4) < 1e-15); /* the last step reaches min_lr */
    assert_true(fabs(sp_lr_at(&s, 500) - 1e-4) < 1e-15); /* and stays there */
    for (int i = 10; i < 109; i++)
        assert_true(sp_lr_at(&s, i + 1) < sp_lr_at(&s, i));
    sp_lr_schedule none = {.lr = 2e-3, .min_lr = 0, .warmup_steps = 0, .total_steps = 5};
    assert_true(fabs(sp_lr_at(&none, 0) - 2e-3) < 1e-15);
    assert_true(fabs(sp_lr_at(&none, 4)) < 1e-15);
}

/* ---- data ---- */

static void test_data_split_and_windows(void **state)
{
    (void)state;
    char *text = train_make_text(1000, 7);
    sp_train_data d;
    assert_int_equal(sp_train_data_init(text, 1000, 0.1, 16, 5, "test text", &d), SP_OK);
    assert_int_equal(d.n_tokens, 1000);
    assert_int_equal(d.n_train, 900); /* the last floor(0.1 * 1000) tokens are validation */
    assert_int_equal(d.n_train_windows, (900 - 1) / 16);
    assert_int_equal(d.n_val_windows, (100 - 1) / 16);
    int32_t in[4 * 16], tg[4 * 16];
    sp_train_data_batch(&d, 0, 4, in, tg);
    for (int b = 0; b < 4; b++) {
        int64_t start = sp_train_data_window(&d, b);
        assert_true(start % 16 == 0 && start + 17 <= d.n_train);
        for (int t = 0; t < 16; t++) {
            assert_int_equal(in[b * 16 + t], (unsigned char)text[start + t]);
            assert_int_equal(tg[b * 16 + t], (unsigned char)text[start + t + 1]);
        }
    }
    /* validation windows lie in the validation split, evenly spread, all distinct */
    int n_eval = sp_train_data_n_eval(&d, 100);
    assert_int_equal(n_eval, d.n_val_windows);
    sp_train_data_eval_batch(&d, n_eval, 0, 1, in, tg);
    assert_int_equal(in[0], (unsigned char)text[900]);
    assert_int_equal(sp_train_data_n_eval(&d, 2), 2);
    /* unigram entropy in nats of a two-symbol text with equal counts is ln 2 */
    sp_train_data two;
    assert_int_equal(sp_train_data_init("abababababababababab", 20, 0, 4, 1, "ab", &two), SP_OK);
    assert_true(fabs(sp_train_data_unigram_entropy(&two) - log(2.0)) < 1e-12);
    sp_train_data_free(&two);
    sp_train_data_free(&d);
    /* too short for one window: one line naming the source */
    assert_int_equal(sp_train_data_init(text, 10, 0.1, 16, 5, "short.txt", &d), SP_ERR_INPUT);
    assert_non_null(strstr(sp_error_message(), "short.txt"));
    sp_error_clear();
    sp_train_data_free(&d);
    free(text);
}

static void test_data_order_is_deterministic(void **state)
{
    (void)state;
    char *text = train_make_text(4000, 3);
    sp_train_data a, b, c;
    assert_int_equal(sp_train_data_init(text, 4000, 0.1, 8, 11, "t", &a), SP_OK);
    assert_int_equal(sp_train_data_init(text, 4000, 0.1, 8, 11, "t", &b), SP_OK);
    assert_int_equal(sp_train_data_init(text, 4000, 0.1, 8, 12, "t", &c), SP_OK);
    int64_t n = a.n_train_windows;
    char *seen = calloc((size_t)n, 1);
    int differs_from_c = 0, differs_between_epochs = 0;
    /* each epoch visits every window once, in an order fixed by (seed, epoch) */
    for (int64_t p = 0; p < n; p++) {
        int64_t w = sp_train_data_window(&a, p) / 8;
        assert_int_equal(seen[w], 0);
        seen[w] = 1;
        differs_from_c |= w != sp_train_data_window(&c, p) / 8;
        differs_between_epochs |= w != sp_train_data_window(&a, p + n) / 8;
    }
    assert_true(differs_from_c && differs_between_epochs);
    /* random access: b reads positions backwards across epochs and agrees with a */
    for (int64_t p = 3 * n; p-- > 0;)
        assert_int_equal(sp_train_data_window(&b, p), sp_train_data_window(&a, p));
    uint64_t sa[4], sb[4];
    sp_train_data_rng_state(&a, 2 * n + 1, sa);
    sp_train_data_rng_state(&b, 2 * n + 5, sb); /* same epoch */
    assert_memory_equal(sa, sb, sizeof sa);
    sp_train_data_rng_state(&b, n, sb); /* another epoch */
    assert_memory_not_equal(sa, sb, sizeof sa);
    free(seen);
    sp_train_data_free(&a);
    sp_train_data_free(&b);
    sp_train_data_free(&c);
    free(text);
}

/* ---- AdamW with clipping ---- */

/* One AdamW step in double, written from the definition. */
static void adamw_reference(int n, double *p, const double *g, double *m, double *v, double lr, double b1,
                            double b2, double eps, double wd, int t)
{
    for (int i = 0; i < n; i++) {
        p[i] -= lr * wd * p[i];
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        double mhat = m[i] / (1 - pow(b1, t)), vhat = v[i] / (1 - pow(b2, t));
        p[i] -= lr * mhat / (sqrt(vhat) + eps);
    }
}

static void test_adamw_with_clipping_by_hand(void **state)
{
    (void)state;
    const sp_backend *be = sp_backend_cpu();
    /* a 3-element matrix (decayed) and a 2-element gain (not decayed) */
    size_t numel[2] = {3, 2};
    int decay[2] = {1, 0};
    sp_adamw_config cfg = {.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .grad_clip = 1.0};
    sp_optim *o;
    assert_int_equal(sp_optim_create(be, &cfg, 2, numel, decay, &o), SP_OK);
    sp_real w[3] = {0.5f, -1.0f, 2.0f}, gain[2] = {1.0f, 1.5f};
    double ref[2][3] = {{0.5, -1.0, 2.0}, {1.0, 1.5}}, rm[2][3] = {{0}}, rv[2][3] = {{0}};
    const double grads[2][2][3] = {{{3.0, -4.0, 0.0}, {0.0, 12.0}},  /* norm 13: clipped to 1 */
                                   {{0.1, 0.2, -0.2}, {0.1, 0.0}}}; /* norm 0.33: untouched */
    sp_real *params[2] = {w, gain};
    for (int t = 1; t <= 2; t++) {
        sp_real gw[3], gg[2];
        double ref_g[2][3], norm = 0;
        for (int i = 0; i < 3; i++)
            norm += grads[t - 1][0][i] * grads[t - 1][0][i];
        for (int i = 0; i < 2; i++)
            norm += grads[t - 1][1][i] * grads[t - 1][1][i];
        norm = sqrt(norm);
        double clip = norm > 1.0 ? 1.0 / norm : 1.0;
        for (int i = 0; i < 3; i++) {
            gw[i] = (sp_real)grads[t - 1][0][i];
            ref_g[0][i] = grads[t - 1][0][i] * clip;
        }
        for (int i = 0; i < 2; i++) {
            gg[i] = (sp_real)grads[t - 1][1][i];
            ref_g[1][i] = grads[t - 1][1][i] * clip;
        }
        sp_real *g[2] = {gw, gg};
        double per[2];
        double got_norm = sp_optim_grad_norm(o, g, per);
        assert_true(fabs(got_norm - norm) < 1e-6 * norm);
        assert_true(fabs(per[0] * per[0] + per[1] * per[1] - norm * norm) < 1e-6 * norm * norm);
        sp_optim_step(o, params, g, got_norm, 0.01);
        adamw_reference(3, ref[0], ref_g[0], rm[0], rv[0], 0.01, 0.9, 0.95, 1e-8, 0.1, t);
        adamw_reference(2, ref[1], ref_g[1], rm[1], rv[1], 0.01, 0.9, 0.95, 1e-8, 0.0, t);
        for (int i = 0; i < 3; i++)
            assert_true(fabs(w[i] - ref[0][i]) < 1e-6);
        for (int i = 0; i < 2; i++)
            assert_true(fabs(gain[i] - ref[1][i]) < 1e-6);
    }
    assert_int_equal(o->step, 2);
    sp_optim_free(o);
}

static void test_gradient_accumulation(void **state)
{
    (void)state;
    size_t numel[1] = {4};
    int decay[1] = {0};
    sp_adamw_config cfg = {0.9, 0.95, 1e-8, 0, 0};
    sp_optim *o;
    assert_int_equal(sp_optim_create(sp_backend_cpu(), &cfg, 1, numel, decay, &o), SP_OK);
    sp_real g1[4] = {1, 2, 3, 4}, g2[4] = {-1, 0, 1, 8};
    sp_real *a[1] = {g1}, *b[1] = {g2};
    assert_int_equal(sp_optim_accumulate(o, a, 0.5, 1), SP_OK);
    assert_int_equal(sp_optim_accumulate(o, b, 0.5, 0), SP_OK);
    for (int i = 0; i < 4; i++)
        assert_true(fabs(o->acc[0][i] - 0.5 * (g1[i] + g2[i])) < 1e-7);
    assert_int_equal(sp_optim_accumulate(o, b, 1.0, 1), SP_OK); /* first: overwrites */
    assert_memory_equal(o->acc[0], g2, sizeof g2);
    sp_optim_free(o);
}

/* ---- options ---- */

static void test_options_json_round_trip(void **state)
{
    (void)state;
    sp_config cfg;
    sp_train_options opt;
    sp_config_defaults(&cfg);
    sp_train_options_defaults(&opt);
    cfg.variant = SP_VARIANT_SPAN;
    cfg.d_model = 48;
    opt.lr = 3.25e-4;
    opt.batch_size = 7;
    opt.steps = 1234;
    opt.device = SP_DEVICE_CPU;
    snprintf(opt.data, sizeof opt.data, "some dir/text.txt");
    char *json = sp_train_options_to_json(&cfg, &opt);
    assert_non_null(json);
    char path[4096];
    scratch_path(path, sizeof path, "options.json");
    assert_int_equal(scratch_write_file(path, json, strlen(json)), 0);

    sp_config cfg2;
    sp_train_options opt2;
    sp_config_defaults(&cfg2);
    sp_train_options_defaults(&opt2);
    const sp_field_table *tables[] = {&sp_config_table, &sp_train_options_table};
    void *objs[] = {&cfg2, &opt2};
    assert_int_equal(sp_fields_load_json_tables(path, 2, tables, objs), SP_OK);
    char a[SP_FIELD_STRING_MAX], b[SP_FIELD_STRING_MAX];
    assert_null(sp_train_options_diff(&cfg, &opt, &cfg2, &opt2, NULL, a, b, sizeof a));
    /* and from text, as resume reads a checkpoint's options */
    sp_config cfg3;
    sp_train_options opt3;
    sp_config_defaults(&cfg3);
    sp_train_options_defaults(&opt3);
    assert_int_equal(sp_train_options_from_json(json, "checkpoint", &cfg3, &opt3), SP_OK);
    assert_null(sp_train_options_diff(&cfg, &opt, &cfg3, &opt3, NULL, a, b, sizeof a));
    /* every double reads back as the same bits (a derived DeepNorm alpha, (2 * 32)^(1/4), included) */
    cfg.deepnorm_alpha = pow(64.0, 0.25);
    free(json);
    json = sp_train_options_to_json(&cfg, &opt);
    assert_non_null(json);
    assert_int_equal(sp_train_options_from_json(json, "checkpoint", &cfg3, &opt3), SP_OK);
    assert_true(memcmp(&cfg3.deepnorm_alpha, &cfg.deepnorm_alpha, sizeof(double)) == 0);
    /* a record of 15 digits (written before records kept every bit) matches; a real change does not */
    cfg3.deepnorm_alpha = 2.82842712474619;
    assert_null(sp_train_options_diff(&cfg, &opt, &cfg3, &opt3, NULL, a, b, sizeof a));
    cfg3.deepnorm_alpha = 2.8284271;
    assert_non_null(sp_train_options_diff(&cfg, &opt, &cfg3, &opt3, NULL, a, b, sizeof a));
    cfg3.deepnorm_alpha = cfg.deepnorm_alpha;
    /* a difference is found and named; allowed fields are skipped */
    opt3.lr = 1e-2;
    const sp_field *f = sp_train_options_diff(&cfg, &opt, &cfg3, &opt3, NULL, a, b, sizeof a);
    assert_non_null(f);
    assert_string_equal(f->name, "lr");
    const char *const allowed[] = {"lr", NULL};
    assert_null(sp_train_options_diff(&cfg, &opt, &cfg3, &opt3, allowed, a, b, sizeof a));
    /* an unknown key is an error naming the key */
    assert_int_equal(sp_train_options_from_json("{\"learning_rate\": 1}", "x.json", &cfg3, &opt3), SP_ERR_INPUT);
    assert_non_null(strstr(sp_error_message(), "learning_rate"));
    sp_error_clear();
    free(json);
    unlink(path);
}

static void test_options_resolve(void **state)
{
    (void)state;
    sp_config cfg;
    sp_train_options opt;
    sp_config_defaults(&cfg);
    sp_config_resolve(&cfg);
    sp_train_options_defaults(&opt);
    opt.tokens = 10000;
    opt.batch_size = 4;
    opt.grad_accum = 2;
    assert_int_equal(sp_train_options_resolve(&opt, &cfg, "t"), SP_OK);
    assert_int_equal(opt.seq_len, cfg.max_seq_len);
    assert_int_equal(opt.steps, (10000 + 1023) / 1024); /* ceil(tokens / (4 * 128 * 2)) */
    assert_int_equal(opt.tokens, 0);
    opt.steps = -1;
    assert_int_equal(sp_train_options_resolve(&opt, &cfg, "t"), SP_ERR_USAGE);
    assert_non_null(strstr(sp_error_message(), "steps"));
    sp_error_clear();
    sp_train_options_defaults(&opt);
    opt.seq_len = cfg.max_seq_len + 1;
    assert_int_equal(sp_train_options_resolve(&opt, &cfg, "t"), SP_ERR_USAGE);
    sp_error_clear();
}

/* ---- the training log ---- */

static void test_trainlog_round_trip(void **state)
{
    (void)state;
    const char *names[] = {"embed/tok", "blocks/0/attn/wq"};
    sp_trainlog log;
    assert_int_equal(sp_trainlog_init(&log, 2, names, 3), SP_OK);
    for (int r = 0; r < 5; r++) {
        double s[SP_LOG_N_SCALARS] = {10.0 * (r + 1), 640.0 * (r + 1), 5.0 - r * 0.1, r % 2 ? 4.5 : NAN, 1e-3,
                                      0.5 + r, 1234.5, 2.0 - r * 0.25, 3.0 + r};
        double tg[2] = {r, r + 0.5}, ur[2] = {1e-3 * r, 2e-3}, hr[3] = {1, 2, 3.0 + r};
        assert_int_equal(sp_trainlog_append(&log, s, tg, ur, hr), SP_OK);
    }
    log.unigram_entropy = 3.1;
    log.options_json = strdup("{\"lr\": 0.001}");
    char path[4096];
    scratch_path(path, sizeof path, "log.h5");
    assert_int_equal(sp_trainlog_write(&log, path), SP_OK);
    sp_trainlog back;
    assert_int_equal(sp_trainlog_read(path, &back), SP_OK);
    assert_int_equal(back.n_rows, 5);
    assert_int_equal(back.n_tensors, 2);
    assert_int_equal(back.n_hidden, 3);
    assert_string_equal(back.tensor_names[1], "blocks/0/attn/wq");
    for (int c = 0; c < SP_LOG_N_SCALARS; c++)
        for (int r = 0; r < 5; r++)
            assert_true(back.col[c][r] == log.col[c][r] || (isnan(back.col[c][r]) && isnan(log.col[c][r])));
    assert_memory_equal(back.hidden_rms, log.hidden_rms, 15 * sizeof(double));
    assert_memory_equal(back.update_ratio, log.update_ratio, 10 * sizeof(double));
    assert_string_equal(back.status, "running");
    assert_true(back.unigram_entropy == 3.1 && isnan(back.final_val_loss));
    sp_trainlog_truncate(&back, 30); /* rows with step <= 30 stay */
    assert_int_equal(back.n_rows, 3);
    sp_trainlog_free(&back);
    /* a 1.0 log, written before the attention columns, reads with those columns NaN */
    char old[4096];
    scratch_path(old, sizeof old, "log-1.0.h5");
    h5_edit_copy(path, old);
    h5_edit_set_str(old, "/", "format_version", "1.0");
    h5_edit_delete(old, "/attn_entropy_min");
    h5_edit_delete(old, "/attn_max_logit");
    assert_int_equal(sp_trainlog_read(old, &back), SP_OK);
    for (int r = 0; r < 5; r++)
        assert_true(isnan(back.col[SP_LOG_ATTN_ENTROPY_MIN][r]) && isnan(back.col[SP_LOG_ATTN_MAX_LOGIT][r]) &&
                    back.col[SP_LOG_TRAIN_LOSS][r] == log.col[SP_LOG_TRAIN_LOSS][r]);
    sp_trainlog_free(&back);
    /* a 1.1 log without them is damaged */
    h5_edit_set_str(old, "/", "format_version", "1.1");
    assert_int_not_equal(sp_trainlog_read(old, &back), SP_OK);
    sp_error_clear();
    unlink(old);
    sp_trainlog_free(&log);
    /* a file that is not a training log is refused with its name */
    char other[4096];
    train_write_text("not-a-log.txt", 100, other, sizeof other);
    assert_int_not_equal(sp_trainlog_read(other, &back), SP_OK);
    assert_non_null(strstr(sp_error_message(), "not-a-log.txt"));
    sp_error_clear();
    unlink(other);
    unlink(path);
}

/* ---- through the CLI ---- */

static void assert_same_losses(const char *log_a, const char *log_b)
{
    train_expect_same_logs(log_a, log_b);
    sp_trainlog a;
    assert_int_equal(sp_trainlog_read(log_a, &a), SP_OK);
    assert_true(a.n_rows >= 7);
    int n_val = 0;
    for (int64_t r = 0; r < a.n_rows; r++)
        n_val += isfinite(a.col[SP_LOG_VAL_LOSS][r]);
    assert_true(n_val >= 4); /* eval every 5 steps and at the end */
    /* attention columns on every row: an entropy between 0 and that of uniform attention over the
     * longest window (ln seq_len, read from the run's options) */
    cJSON *opts = cJSON_Parse(a.options_json);
    const double seq_len = cJSON_GetNumberValue(cJSON_GetObjectItem(opts, "seq_len"));
    cJSON_Delete(opts);
    assert_true(seq_len >= 2);
    for (int64_t r = 0; r < a.n_rows; r++)
        assert_true(a.col[SP_LOG_ATTN_ENTROPY_MIN][r] > 0 && a.col[SP_LOG_ATTN_ENTROPY_MIN][r] <= log(seq_len) &&
                    isfinite(a.col[SP_LOG_ATTN_MAX_LOGIT][r]));
    assert_string_equal(a.status, "done");
    assert_true(isfinite(a.final_val_loss));
    sp_trainlog_free(&a);
}

static void test_resume_after_sigkill_is_bit_identical(void **state)
{
    (void)state;
    if (!getenv("SPANPROBE_BIN"))
        skip();
    char text[4096], dir_a[4096], dir_b[4096];
    train_write_text("resume.txt", 20000, text, sizeof text);
    scratch_path(dir_a, sizeof dir_a, "run_straight");
    scratch_path(dir_b, sizeof dir_b, "run_killed");
    /* gradient accumulation and evaluation on, so their state is covered too */
    const char *straight[] = {"train", TINY_RUN_ARGS, "--data", text, "--steps", "20", "--ckpt-every", "10",
                              "--log-every", "3", "--eval-every", "5", "--grad-accum", "2", "--out", dir_a, NULL};
    cli_expect_exit(0, straight, NULL, NULL);

    const char *killed[] = {"train", TINY_RUN_ARGS, "--data", text, "--steps", "20", "--ckpt-every", "10",
                            "--log-every", "3", "--eval-every", "5", "--grad-accum", "2", "--out", dir_b, NULL};
    pid_t pid = scratch_spawn_cli(killed);
    assert_true(pid > 0);
    char ckpt10[8192], ckpt20[8192];
    snprintf(ckpt10, sizeof ckpt10, "%s/ckpt_00000010.h5", dir_b);
    snprintf(ckpt20, sizeof ckpt20, "%s/ckpt_00000020.h5", dir_b);
    int status = 0;
    pid_t done = 0;
    while (!scratch_file_exists(ckpt10) && (done = waitpid(pid, &status, WNOHANG)) == 0)
        nanosleep(&(struct timespec){0, 200000}, NULL);
    assert_int_equal(done, 0); /* the run was still going when its step-10 checkpoint appeared */
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status)) {
        assert_int_equal(WTERMSIG(status), SIGKILL);
    } else {
        /* it finished between our look and the kill: drop its last checkpoint, which leaves the
         * state of a kill just before that checkpoint was renamed into place */
        print_message("note: the run finished before SIGKILL landed; resuming from step 10 regardless\n");
        unlink(ckpt20);
    }
    if (scratch_file_exists(ckpt20)) /* killed after the end: nothing would be resumed */
        unlink(ckpt20);
    const char *resume[] = {"train", "--resume", dir_b, NULL};
    cli_expect_exit(0, resume, NULL, NULL);

    char log_a[8192], log_b[8192], final_a[8192];
    snprintf(log_a, sizeof log_a, "%s/trainlog.h5", dir_a);
    snprintf(log_b, sizeof log_b, "%s/trainlog.h5", dir_b);
    snprintf(final_a, sizeof final_a, "%s/ckpt_00000020.h5", dir_a);
    assert_same_losses(log_a, log_b);
    train_expect_same_checkpoints(final_a, ckpt20);

    /* the CSV was rewritten from the log on resume: same rows (throughput aside) */
    snprintf(log_a, sizeof log_a, "%s/trainlog.csv", dir_a);
    snprintf(log_b, sizeof log_b, "%s/trainlog.csv", dir_b);
    char *csv_a = scratch_read_file(log_a, NULL), *csv_b = scratch_read_file(log_b, NULL);
    assert_non_null(csv_a);
    assert_non_null(csv_b);
    assert_int_equal(scratch_count_lines(csv_a), scratch_count_lines(csv_b));
    free(csv_a);
    free(csv_b);

    /* a resumed run may extend --steps but not change what it computes */
    const char *changed[] = {"train", "--resume", dir_b, "--lr", "0.5", NULL};
    cli_expect_error(SP_ERR_USAGE, changed, (const char *[]){"lr", NULL});
    const char *extend[] = {"train", "--resume", dir_b, "--steps", "22", NULL};
    cli_expect_exit(0, extend, NULL, NULL);
    char ckpt22[8192];
    snprintf(ckpt22, sizeof ckpt22, "%s/ckpt_00000022.h5", dir_b);
    assert_true(scratch_file_exists(ckpt22));
    /* a fresh run into a directory that holds one is refused */
    cli_expect_error(SP_ERR_USAGE, straight, (const char *[]){"--resume", NULL});
    assert_int_equal(tree_remove(dir_a), 0);
    assert_int_equal(tree_remove(dir_b), 0);
    unlink(text);
}

/* A kill between the last checkpoint's commit and the pruning of an old one leaves one checkpoint
 * too many; resuming the finished run removes it. */
static void test_finished_resume_prunes_leftover(void **state)
{
    (void)state;
    if (!getenv("SPANPROBE_BIN"))
        skip();
    char text[4096], dir[4096];
    train_write_text("prune.txt", 6000, text, sizeof text);
    scratch_path(dir, sizeof dir, "run_prune");
    const char *args[] = {"train", TINY_RUN_ARGS, "--data", text, "--steps", "4", "--ckpt-every", "2",
                          "--keep", "1", "--out", dir, NULL};
    cli_expect_exit(0, args, NULL, NULL);
    char last[8192], leftover[8192];
    snprintf(last, sizeof last, "%s/ckpt_00000004.h5", dir);
    snprintf(leftover, sizeof leftover, "%s/ckpt_00000002.h5", dir);
    assert_false(scratch_file_exists(leftover));
    assert_int_equal(link(last, leftover), 0); /* what the kill left: an old checkpoint, unpruned */
    char *err = NULL;
    cli_expect_exit(0, (const char *[]){"train", "--resume", dir, NULL}, NULL, &err);
    assert_non_null(strstr(err, "nothing to do"));
    free(err);
    assert_false(scratch_file_exists(leftover));
    assert_true(scratch_file_exists(last));
    assert_int_equal(tree_remove(dir), 0);
    unlink(text);
}

static void test_divergence_is_a_recorded_result(void **state)
{
    (void)state;
    if (!getenv("SPANPROBE_BIN"))
        skip();
    char text[4096], dir[4096];
    train_write_text("diverge.txt", 6000, text, sizeof text);
    scratch_path(dir, sizeof dir, "run_diverge");
    const char *args[] = {"train", TINY_RUN_ARGS, "--data", text, "--steps", "30", "--lr", "1e6",
                          "--warmup-steps", "0", "--min-lr", "0", "--log-every", "1", "--out", dir, NULL};
    char *err = NULL;
    cli_expect_exit(SP_ERR_DIVERGED, args, NULL, &err);
    assert_non_null(strstr(err, "diverged at step"));
    free(err);
    char path[8192];
    snprintf(path, sizeof path, "%s/trainlog.h5", dir);
    sp_trainlog log;
    assert_int_equal(sp_trainlog_read(path, &log), SP_OK);
    assert_string_equal(log.status, "diverged");
    assert_true(log.diverged_step >= 1 && log.diverged_step <= 30);
    int64_t at = log.diverged_step;
    for (int64_t r = 0; r < log.n_rows; r++) /* every logged step before it was finite */
        assert_true(log.col[SP_LOG_STEP][r] < (double)at && isfinite(log.col[SP_LOG_TRAIN_LOSS][r]));
    sp_trainlog_free(&log);
    /* the last checkpoint holds the last finite weights, status diverged and the step */
    snprintf(path, sizeof path, "%s/ckpt_%08lld.h5", dir, (long long)(at - 1));
    sp_model *m;
    sp_ckpt_meta meta;
    assert_int_equal(sp_ckpt_load(path, sp_backend_cpu(), &m, &meta), SP_OK); /* load rejects NaN/Inf */
    assert_string_equal(meta.train.status, "diverged");
    assert_int_equal(meta.train.diverged_step, at);
    assert_int_equal(meta.train.step, at - 1);
    sp_ckpt_meta_free(&meta);
    sp_model_free(m);
    /* a diverged run is not resumed */
    const char *resume[] = {"train", "--resume", dir, NULL};
    cli_expect_error(SP_ERR_USAGE, resume, NULL);
    assert_int_equal(tree_remove(dir), 0);
    unlink(text);
}

static void test_config_file_reaches_the_checkpoint(void **state)
{
    (void)state;
    if (!getenv("SPANPROBE_BIN"))
        skip();
    char text[4096], dir[4096], cfg_path[4096], json[8192];
    train_write_text("config.txt", 6000, text, sizeof text);
    scratch_path(dir, sizeof dir, "run_config");
    scratch_path(cfg_path, sizeof cfg_path, "run.json");
    snprintf(json, sizeof json,
             "{\"variant\": \"span\", \"d_model\": 16, \"n_layers\": 2, \"n_heads\": 2, \"n_kv_heads\": 2, "
             "\"d_ff\": 24, \"max_seq_len\": 16, \"data\": \"%s\", \"batch_size\": 3, \"steps\": 4, "
             "\"lr\": 0.002, \"weight_decay\": 0.05, \"device\": \"cpu\"}", text);
    assert_int_equal(scratch_write_file(cfg_path, json, strlen(json)), 0);
    /* the command line overrides the file */
    const char *args[] = {"train", "--config", cfg_path, "--steps", "3", "--out", dir, NULL};
    cli_expect_exit(0, args, NULL, NULL);
    char path[8192];
    snprintf(path, sizeof path, "%s/ckpt_00000003.h5", dir);
    sp_ckpt_meta meta;
    sp_ckpt_meta_init(&meta);
    assert_int_equal(sp_ckpt_read_meta(path, &meta), SP_OK);
    assert_int_equal(meta.cfg.variant, SP_VARIANT_SPAN);
    assert_int_equal(meta.cfg.d_ff, 24);
    sp_config cfg;
    sp_train_options opt;
    sp_config_defaults(&cfg);
    sp_train_options_defaults(&opt);
    assert_non_null(meta.train.options_json);
    assert_int_equal(sp_train_options_from_json(meta.train.options_json, "ckpt", &cfg, &opt), SP_OK);
    assert_int_equal(cfg.variant, SP_VARIANT_SPAN);
    assert_int_equal(opt.batch_size, 3);
    assert_int_equal(opt.steps, 3);
    assert_int_equal(opt.seq_len, 16); /* resolved from max_seq_len */
    assert_true(opt.lr == 0.002 && opt.weight_decay == 0.05);
    assert_string_equal(opt.data, text);
    sp_ckpt_meta_free(&meta);
    assert_int_equal(tree_remove(dir), 0);
    unlink(cfg_path);
    unlink(text);
}

static void test_bad_options_fail_with_one_line(void **state)
{
    (void)state;
    if (!getenv("SPANPROBE_BIN"))
        skip();
    char text[4096], dir[4096], missing[4096];
    train_write_text("bad.txt", 3000, text, sizeof text);
    scratch_path(dir, sizeof dir, "run_bad");
    scratch_path(missing, sizeof missing, "no-such-text.txt");
    struct {
        const char *args[24];
        int code;
        const char *mentions;
    } cases[] = {
        {{"train", "--data", text, "--steps", "-5", "--out", dir, NULL}, SP_ERR_USAGE, "steps"},
        {{"train", "--data", text, "--learning-rate", "1", "--out", dir, NULL}, SP_ERR_USAGE, "--learning-rate"},
        {{"train", "--data", missing, "--device", "cpu", "--out", dir, NULL}, SP_ERR_IO, "no-such-text.txt"},
        {{"train", "--data", text, NULL}, SP_ERR_USAGE, "--out"},
        {{"train", "--data", text, "--batch-size", "many", "--out", dir, NULL}, SP_ERR_USAGE, "batch"},
        {{"train", "--data", text, "--seq-len", "4096", "--out", dir, NULL}, SP_ERR_USAGE, "seq_len"},
        {{"train", "--data", text, "--n-heads", "3", "--out", dir, NULL}, SP_ERR_USAGE, "n_heads"},
        {{"train", "--resume", dir, NULL}, SP_ERR_INPUT, dir},
    };
    for (size_t i = 0; i < SP_ARRAY_LEN(cases); i++)
        cli_expect_error(cases[i].code, cases[i].args, (const char *[]){cases[i].mentions, NULL});
    assert_false(scratch_file_exists(dir)); /* a failed start leaves no output directory */
    unlink(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schedule_warmup_cosine_min),
        cmocka_unit_test(test_data_split_and_windows),
        cmocka_unit_test(test_data_order_is_deterministic),
        cmocka_unit_test(test_adamw_with_clipping_by_hand),
        cmocka_unit_test(test_gradient_accumulation),
        cmocka_unit_test(test_options_json_round_trip),
        cmocka_unit_test(test_options_resolve),
        cmocka_unit_test(test_trainlog_round_trip),
        cmocka_unit_test(test_resume_after_sigkill_is_bit_identical),
        cmocka_unit_test(test_finished_resume_prunes_leftover),
        cmocka_unit_test(test_divergence_is_a_recorded_result),
        cmocka_unit_test(test_config_file_reaches_the_checkpoint),
        cmocka_unit_test(test_bad_options_fail_with_one_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
