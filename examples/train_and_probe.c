/* examples/train_and_probe.c: your own training loop, probed every N steps through the C API
 * (include/spanprobe/spanprobe.h, docs/api.md):
 *
 *     cc train_and_probe.c $(pkg-config --cflags --libs spanprobe) -o train_and_probe
 *     ./train_and_probe [STEPS] [EVERY]
 *
 * A 4-layer SpanNorm model of width 32 learns a periodic token sequence; every EVERY steps the
 * loop runs two analyzers on the model as it is, in memory, printing how alike adjacent layers
 * are (similarity) and how the residual stream grows with depth (growth). */
#define _POSIX_C_SOURCE 200809L /* mkstemp, fdopen */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <spanprobe/spanprobe.h>

enum { BATCH = 8, SEQ = 32 };

static int fail(const char *what)
{
    fprintf(stderr, "train_and_probe: %s: %s\n", what, spanprobe_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    const int steps = argc > 1 ? atoi(argv[1]) : 60, every = argc > 2 ? atoi(argv[2]) : 20;
    if (spanprobe_api_version() != SPANPROBE_API_VERSION)
        return fail("the library's API version differs from this header's");
    spanprobe_model *m;
    if (spanprobe_model_new("{\"variant\": \"span\", \"n_layers\": 4, \"d_model\": 32, \"n_heads\": 4, "
                            "\"n_kv_heads\": 4, \"d_ff\": 64, \"max_seq_len\": 32, \"vocab_size\": 16}",
                            1, "cpu", &m) != 0)
        return fail("model");
    /* the data: token t of sequence b is (b + 3 t) mod 16, its target the next one */
    int32_t tokens[BATCH * SEQ], targets[BATCH * SEQ];
    for (int b = 0; b < BATCH; b++)
        for (int t = 0; t < SEQ; t++) {
            tokens[b * SEQ + t] = (b + 3 * t) % 16;
            targets[b * SEQ + t] = (b + 3 * (t + 1)) % 16;
        }
    /* the evaluation tokens, as a token id file (whitespace-separated ids) */
    char ids[] = "/tmp/train_and_probe-ids-XXXXXX";
    int fd_ids = mkstemp(ids);
    FILE *f = fd_ids >= 0 ? fdopen(fd_ids, "w") : NULL;
    if (!f)
        return fail("temporary file");
    for (int i = 0; i < 8 * SEQ; i++)
        fprintf(f, "%d%c", (5 + 3 * i) % 16, i % SEQ == SEQ - 1 ? '\n' : ' ');
    fclose(f);
    spanprobe_analysis *a;
    if (spanprobe_analysis_new(&a) != 0 || spanprobe_analysis_set(a, "metrics", "similarity,growth") != 0 ||
        spanprobe_analysis_set(a, "tokens", ids) != 0 || spanprobe_analysis_set(a, "n-tokens", "256") != 0 ||
        spanprobe_analysis_set(a, "device", "cpu") != 0)
        return fail("analysis");
    int status = 0;
    for (int step = 1; step <= steps && status == 0; step++) {
        double loss;
        if (spanprobe_model_train_step(m, tokens, targets, BATCH, SEQ, 3e-3, &loss) != 0) {
            status = fail("train step");
            break;
        }
        if (step % every)
            continue;
        spanprobe_report *r;
        double cos, growth;
        if (spanprobe_analysis_run_model(a, m, NULL, &r) != 0 ||
            spanprobe_report_scalar(r, "similarity", "adjacent_cosine_mean", &cos) != 0 ||
            spanprobe_report_scalar(r, "growth", "rms_last", &growth) != 0) {
            status = fail("probe");
            break;
        }
        printf("step %d: loss %.4f, adjacent cosine %.4f, rms of h_L %.4f\n", step, loss, cos, growth);
        spanprobe_report_close(r);
    }
    unlink(ids);
    spanprobe_analysis_free(a);
    spanprobe_model_free(m);
    return status;
}
