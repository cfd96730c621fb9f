/* bench_model: forward+backward (and optionally an AdamW step) tokens/s of a spanprobe model on the
 * CPU backend. Prints one JSON line; bench/run_model_bench.sh runs it next to the same model in
 * PyTorch (bench/torch_model.py) and prints the ratio. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "core/rng.h"
#include "model/model.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
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
    int seq = 256, batch = 8, steps = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--steps") == 0)
            steps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--seq") == 0)
            seq = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--batch") == 0)
            batch = atoi(argv[i + 1]);
        else if (sp_config_set(&cfg, argv[i] + 2, argv[i + 1], argv[i]) != SP_OK) {
            fprintf(stderr, "bench_model: %s\n", sp_error_message());
            return 2;
        }
    }
    cfg.max_seq_len = seq;
    sp_model *m = NULL;
    if (sp_config_resolve(&cfg) || sp_config_validate(&cfg, "bench") || sp_model_create(&cfg, sp_backend_cpu(), &m) ||
        sp_model_init(m, 1)) {
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
    double loss = 0, *times = malloc((size_t)(steps > 0 ? steps : 1) * sizeof *times);
    for (int s = -1; s < steps; s++) { /* step -1 is the warm-up */
        double t0 = now_s();
        if (sp_model_forward(m, ids, targets, batch, seq, &loss) || sp_model_backward(m)) {
            fprintf(stderr, "bench_model: %s\n", sp_error_message());
            return 1;
        }
        if (s >= 0)
            times[s] = now_s() - t0;
    }
    qsort(times, (size_t)steps, sizeof *times, cmp_double);
    printf("{\"impl\": \"spanprobe %s cpu\", \"mode\": \"fwd+bwd\", \"tokens_per_s\": %.1f, \"median_s\": %.4f, "
           "\"best_s\": %.4f, \"loss\": %.4f}\n",
           SP_VERSION, rows / times[0], times[steps / 2], times[0], loss);
    free(times);
    free(ids);
    free(targets);
    sp_model_free(m);
    return 0;
}
