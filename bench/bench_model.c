/* bench_model: forward+backward (with --train also global-norm clipping and an AdamW step, as the
 * training loop takes them) tokens/s of a spanprobe model on the CPU backend (--device cuda: the
 * GPU, every array resident there). Prints one JSON line; bench/run_model_bench.sh,
 * bench/run_train_bench.sh and bench/run_gpu_train_bench.sh run it next to the same model in PyTorch
 * (bench/torch_model.py) and print the ratio. Model options: --d_model 768, --variant span, ...
 * The JSON line also holds the step's FLOPs, the FLOP/s reached (best step), the backend's sgemm
 * throughput on 2048^3 with the same threads (the roofline) and the fraction of it reached. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "core/rng.h"
#include "model/model.h"
#include "train/optimizer.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* FLOPs of one forward+backward of the model on batch x seq tokens: 6 per weight of every matrix a
 * token meets (forward 2, backward 4), and the attention scores and their weighted sums over the
 * causal half of the seq x seq pairs, 3 times 2 x 2 x d per pair. */
static double step_flops(const sp_config *c, int batch, int seq)
{
    const double d = c->d_model, L = c->n_layers, kv = (double)c->n_kv_heads / c->n_heads;
    const double ffn_mats = c->ffn == SP_FFN_SWIGLU ? 3 : 2;
    const double matrix_weights = L * ((2 + 2 * kv) * d * d + ffn_mats * d * c->d_ff) + (double)c->vocab_size * d;
    const double tokens = (double)batch * seq, pairs = (double)batch * L * seq * (seq + 1) / 2.0;
    return 6 * matrix_weights * tokens + 3 * 4 * d * pairs;
}

/* The machine's sgemm throughput through the backend's gemm with the current threads (FLOP/s, the
 * best of 5 products of two 2048 x 2048 matrices): the roofline the model's step is held to. */
static double sgemm_roofline(const sp_backend *be)
{
    const int n = 2048;
    const size_t bytes = (size_t)n * n * sizeof(sp_real);
    sp_real *a = be->alloc(bytes, "roofline A"), *b = be->alloc(bytes, "roofline B"), *c = be->alloc(bytes, "roofline C");
    if (!a || !b || !c) {
        be->free(a);
        be->free(b);
        be->free(c);
        return 0;
    }
    sp_real *host = malloc(bytes);
    for (size_t i = 0; host && i < (size_t)n * n; i++)
        host[i] = (sp_real)((double)(i % 97) / 97.0 - 0.5);
    if (host) {
        be->upload(a, host, bytes);
        be->upload(b, host, bytes);
    }
    free(host);
    double best = 1e30;
    for (int r = -1; r < 5; r++) { /* r = -1 warms up */
        double t0 = now_s();
        be->gemm(0, 0, n, n, n, 1, a, n, b, n, 0, c, n);
        be->sync();
        const double t = now_s() - t0;
        if (r >= 0 && t < best)
            best = t;
    }
    be->free(a);
    be->free(b);
    be->free(c);
    return 2.0 * n * n * n / best;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    sp_config cfg;
    sp_config_defaults(&cfg);
    cfg.variant = SP_VARIANT_PRE;
    cfg.d_model = 256;
    cfg.n_layers = 8;
    cfg.n_heads = 8;
    cfg.n_kv_heads = 8;
    cfg.d_ff = 1024;
    cfg.vocab_size = 256;
    int seq = 256, batch = 8, steps = 5, train = 0;
    const char *device = "cpu";
    for (int i = 1; i < argc; i += 2) {
        if (strcmp(argv[i], "--train") == 0) {
            train = 1;
            i--;
        } else if (i + 1 >= argc) {
            fprintf(stderr, "bench_model: %s needs a value\n", argv[i]);
            return 2;
        } else if (strcmp(argv[i], "--steps") == 0)
            steps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--seq") == 0)
            seq = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--batch") == 0)
            batch = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--device") == 0)
            device = argv[i + 1];
        else if (sp_config_set(&cfg, argv[i] + 2, argv[i + 1], argv[i]) != SP_OK) {
            fprintf(stderr, "bench_model: %s\n", sp_error_message());
            return 2;
        }
    }
    cfg.max_seq_len = seq;
    sp_model *m = NULL;
    const sp_backend *be = NULL;
    if (sp_backend_select(device, &be) || sp_config_resolve(&cfg) || sp_config_validate(&cfg, "bench") ||
        sp_model_create(&cfg, be, &m) || sp_model_init(m, 1)) {
        fprintf(stderr, "bench_model: %s\n", sp_error_message());
        return 1;
    }
    size_t rows = (size_t)batch * seq;
    int32_t *ids = malloc(rows * sizeof *ids), *targets = malloc(rows * sizeof *targets);
    sp_rng rng;
    sp_rng_seed(&rng, 7);
    for (size_t i = 0; i < rows; i++) {
        ids[i] = (int32_t)sp_rng_below(&rng, (uint64_t)cfg.vocab_size);
        targets[i] = (int32_t)sp_rng_below(&rng, (uint64_t)cfg.vocab_size);
    }
    /* the optimizer of torch_model.py --train: AdamW (0.9, 0.95), decay 0.1 on matrices, clip 1.0 */
    int n_params = sp_model_n_params(m);
    size_t *numel = malloc((size_t)n_params * sizeof *numel);
    int *decay = malloc((size_t)n_params * sizeof *decay);
    sp_real **params = malloc((size_t)n_params * sizeof *params), **grads = malloc((size_t)n_params * sizeof *grads);
    for (int i = 0; i < n_params; i++) {
        numel[i] = sp_param_numel(sp_model_param_spec(m, i));
        decay[i] = sp_model_param_spec(m, i)->decay;
        params[i] = sp_model_param(m, i);
        grads[i] = sp_model_grad(m, i);
    }
    sp_adamw_config adamw = {0.9, 0.95, 1e-8, 0.1, 1.0};
    sp_optim *opt = NULL;
    if (train && sp_optim_create(be, &adamw, n_params, numel, decay, &opt)) {
        fprintf(stderr, "bench_model: %s\n", sp_error_message());
        return 1;
    }
    double loss = 0, *times = malloc((size_t)(steps > 0 ? steps : 1) * sizeof *times);
    for (int s = -1; s < steps; s++) { /* step -1 is the warm-up */
        double t0 = now_s();
        if (sp_model_forward(m, ids, targets, batch, seq, &loss) || sp_model_backward(m)) {
            fprintf(stderr, "bench_model: %s\n", sp_error_message());
            return 1;
        }
        if (train)
            sp_optim_step(opt, params, grads, sp_optim_grad_norm(opt, grads, NULL), 3e-4);
        if (sp_model_sync(m)) { /* the step's queued device work ends inside the timing */
            fprintf(stderr, "bench_model: %s\n", sp_error_message());
            return 1;
        }
        if (s >= 0)
            times[s] = now_s() - t0;
    }
    qsort(times, (size_t)steps, sizeof *times, cmp_double);
    const double flops = step_flops(&cfg, batch, seq), roofline = sgemm_roofline(be);
    printf("{\"impl\": \"spanprobe %s %s\", \"mode\": \"%s\", \"tokens_per_s\": %.1f, \"median_s\": %.4f, "
           "\"best_s\": %.4f, \"loss\": %.4f, \"n_params\": %zu, \"step_gflop\": %.2f, \"gflops\": %.1f, "
           "\"sgemm_gflops\": %.1f, \"of_sgemm\": %.3f}\n",
           SP_VERSION, be->name, train ? "train" : "fwd+bwd", rows / times[0], times[steps / 2], times[0], loss,
           sp_model_n_weights(m), flops / 1e9, flops / times[0] / 1e9, roofline / 1e9,
           roofline > 0 ? flops / times[0] / roofline : 0.0);
    sp_optim_free(opt);
    free(numel);
    free(decay);
    free(params);
    free(grads);
    free(times);
    free(ids);
    free(targets);
    sp_model_free(m);
    return 0;
}
