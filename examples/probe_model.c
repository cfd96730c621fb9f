/* examples/probe_model.c: a program of your own built against the installed library (docs/install.md):
 *
 *     cc probe_model.c $(pkg-config --cflags --libs spanprobe) -o probe_model
 *     ./probe_model MODEL [TOKEN...]
 *
 * MODEL is anything spanprobe reads: its own checkpoint, a Hugging Face directory, a GGUF file or
 * nanoGPT's ckpt.pt. It runs one forward pass over the token ids (default 1 2 3 4 5 6 7 8), then
 * prints the next-token loss and the RMS of every layer output h_0 .. h_L: how much each block
 * moves the residual stream. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/model_source.h"
#include "kernels/backend.h"
#include "model/model.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [TOKEN...]\n", argv[0]);
        return 2;
    }
    int32_t tokens[64] = {1, 2, 3, 4, 5, 6, 7, 8}, targets[64];
    int n = 8;
    if (argc > 2)
        for (n = 0; n + 2 < argc && n < 64; n++)
            tokens[n] = (int32_t)atoi(argv[n + 2]);
    for (int t = 0; t < n; t++)
        targets[t] = t + 1 < n ? tokens[t + 1] : -1; /* the last position has no next token */

    sp_model *m = NULL;
    sp_ckpt_meta meta;
    if (sp_model_source_load(argv[1], sp_backend_cpu(), &m, &meta) != SP_OK) {
        fprintf(stderr, "probe_model: %s\n", sp_error_message());
        return 3;
    }
    const sp_config *cfg = sp_model_config(m);
    double loss = 0;
    if (sp_model_forward(m, tokens, targets, 1, n, &loss) != SP_OK) {
        fprintf(stderr, "probe_model: %s\n", sp_error_message());
        return 4;
    }
    printf("%s: %d layers, d_model %d; loss %.4f nats over %d tokens\n", argv[1], cfg->n_layers, cfg->d_model, loss,
           n - 1);
    for (int l = 0; l <= cfg->n_layers; l++) { /* the CPU backend's memory is host memory */
        const sp_real *h = sp_model_hidden(m, l, 0);
        double sum = 0;
        for (int i = 0; i < n * cfg->d_model; i++)
            sum += (double)h[i] * h[i];
        printf("h_%d rms %.4f\n", l, sqrt(sum / (n * cfg->d_model)));
    }
    sp_model_free(m);
    sp_ckpt_meta_free(&meta);
    return 0;
}
