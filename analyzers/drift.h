/* analyzers/drift.h: `spanprobe drift REF MODEL` as a library call: where, layer by layer, a model
 * (a quantized, pruned or fine-tuned copy) departs from a reference model of the same shape.
 *
 * Both models are loaded through io/model_source.h (any source: checkpoint, Hugging Face directory,
 * GGUF file) onto one backend and run on the same evaluation set, built as `analyze` builds it
 * (analyzers/evalset.h; text is tokenized with REF's tokenizer). The report (io/report.h) holds the
 * group "drift" (docs/metrics.md, "drift"):
 *   per layer output h_l, l = 0..L (stream 0, the residual stream):
 *     rel_error  ||H_l - H_ref,l||_F / ||H_ref,l||_F over the evaluation tokens
 *     cosine     mean over tokens of cos(h_l,t, h_ref,l,t)
 *     cka        linear CKA(H_l, H_ref,l) (centered, biased HSIC, as the cka analyzer)
 *   per block matrix (wq, wk, wv, wo, w1, w2, w3) and for tok_embed, pos_embed, head:
 *     ||W - W_ref|| / ||W_ref|| in the Frobenius and the spectral norm (fp64)
 *   at the output, per token t: KL(p_ref,t || p_t) of the next-token distributions (nats) and
 *     whether their argmax agrees; summaries kl_mean, kl_p50, kl_p99, kl_max, top1_agreement.
 * The report is written atomically: nothing appears unless everything finished. */
#ifndef SP_DRIFT_H
#define SP_DRIFT_H

#include "kernels/backend.h"

#define SP_DRIFT_GROUP "drift"

typedef struct {
    const char *ref;      /* the reference model */
    const char *model;    /* the model judged against it (the report's input) */
    const char *out;      /* the report (.h5); the JSON summary goes beside it */
    const char *data;     /* evaluation text (NULL: SP_ANALYZE_DEFAULT_DATA) */
    const char *tokens;   /* a token id file instead (NULL: none) */
    const char *device;   /* "cpu", "cuda" or "auto" (NULL: auto) */
    const sp_backend *backend; /* this table instead of selecting by device (tests); NULL: device */
    int64_t n_tokens;     /* evaluation tokens */
    int seq_len;          /* 0: min(max_seq_len of both, 256) */
    int batch;            /* sequences per forward pass (cut to fit max_memory_gib) */
    int64_t seed;         /* evaluation windows */
    double max_memory_gib; /* the activations of both models take at most half of it */
    int quiet;            /* no progress lines, no summary on stdout */
} sp_drift_job;

/* analyze's defaults for the evaluation set, batch and memory budget. */
void sp_drift_job_defaults(sp_drift_job *job);
/* Usage errors (SP_ERR_USAGE), an output that would replace an input (SP_ERR_USAGE), models of
 * different shapes or vocabularies (SP_ERR_INPUT), then the run. */
sp_status sp_drift_run(const sp_drift_job *job);

#endif
