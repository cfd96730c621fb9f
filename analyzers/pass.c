#include "analyzers/pass.h"

#include <stdlib.h>
#include <string.h>

#include "analyzers/dev_bufs.h"
#include "analyzers/progress.h"
#include "analyzers/ranks.h"

int sp_batch_rows(const sp_act_batch *b) { return b->rows; }
int sp_batch_first_seq(const sp_act_batch *b) { return b->first_seq; }
int sp_batch_seq_len(const sp_act_batch *b) { return b->seq_len; }
const int32_t *sp_batch_targets(const sp_act_batch *b) { return b->targets; }

const sp_real *sp_batch_hidden(const sp_act_batch *b, int layer, int stream)
{
    if (layer < 0 || layer > b->n_layers || stream < 0 || stream >= b->n_streams)
        return NULL;
    return b->hidden[layer * b->n_streams + stream];
}

const sp_real *sp_batch_latent(const sp_act_batch *b, int layer)
{
    return layer >= 0 && layer < b->n_layers ? b->latent[layer] : NULL;
}

const sp_real *sp_batch_presum(const sp_act_batch *b, int layer, const char *name)
{
    if (layer < 0 || layer >= b->n_layers)
        return NULL;
    if (strcmp(name, "sum_a") == 0)
        return b->sum_a[layer];
    if (strcmp(name, "sum_z") == 0)
        return b->sum_z[layer];
    return NULL;
}

sp_status sp_analysis_replay(const sp_analysis *a, sp_batch_fn fn, void *ctx)
{
    if (!a->pass)
        return sp_error(SP_ERR_INTERNAL, "analyze: a replay of the evaluation set was asked for outside a driver run");
    return sp_pass_run(a, "second pass, batch", fn, ctx);
}

/* ---- dump reads ---- */

/* One array of one layer of a dump, as read into a backend buffer. */
typedef struct {
    sp_dump_kind kind;
    int stream, layer, width;
    const sp_real **slot; /* where the batch points at it */
} dump_array;

/* The arrays a pass reads from the dump: every hidden layer, and the optional ones that are both
 * needed and present. Writes at most max entries into out, returns the count. */
static int dump_arrays(const sp_analysis *a, const struct sp_pass *p, dump_array *out)
{
    const sp_act_batch *b = &p->batch;
    const int L = a->n_layers, S = a->n_streams;
    int n = 0;
    if (p->load & SP_NEEDS_ACTIVATIONS)
        for (int l = 0; l <= L; l++)
            for (int s = 0; s < S; s++)
                out[n++] = (dump_array){SP_DUMP_HIDDEN, s, l, a->d_model, &b->hidden[l * S + s]};
    for (int l = 0; l < L; l++) {
        if ((p->load & SP_NEEDS_LATENTS) && sp_dump_has_layer(a->dump, SP_DUMP_FFN_LATENT, 0, l))
            out[n++] = (dump_array){SP_DUMP_FFN_LATENT, 0, l, a->d_ff, &b->latent[l]};
        if ((p->load & SP_NEEDS_PRESUMS) && sp_dump_has_layer(a->dump, SP_DUMP_SUM_A, 0, l))
            out[n++] = (dump_array){SP_DUMP_SUM_A, 0, l, a->d_model, &b->sum_a[l]};
        if ((p->load & SP_NEEDS_PRESUMS) && sp_dump_has_layer(a->dump, SP_DUMP_SUM_Z, 0, l))
            out[n++] = (dump_array){SP_DUMP_SUM_Z, 0, l, a->d_model, &b->sum_z[l]};
    }
    return n;
}

static int max_dump_arrays(const sp_analysis *a) { return (a->n_layers + 1) * a->n_streams + 3 * a->n_layers; }

sp_status sp_pass_init(struct sp_pass *p, const sp_analysis *a, unsigned load, int quiet)
{
    *p = (struct sp_pass){.load = load, .be = a->be, .quiet = quiet};
    const int L = a->n_layers, S = a->n_streams;
    sp_act_batch *b = &p->batch;
    *b = (sp_act_batch){.n_layers = L, .n_streams = S};
    size_t n_ptrs = (size_t)(L + 1) * (size_t)S + 3 * (size_t)L;
    const sp_real **ptrs = sp_calloc(n_ptrs, sizeof *ptrs, "analysis batch");
    if (!ptrs)
        return SP_ERR_NOMEM;
    b->hidden = ptrs;
    b->latent = ptrs + (size_t)(L + 1) * S;
    b->sum_a = b->latent + L;
    b->sum_z = b->sum_a + L;
    if (a->skip_positions > 0) {
        const int width = a->d_ff > a->d_model ? a->d_ff : a->d_model;
        p->kept = a->be->alloc((size_t)(a->seq_len - a->skip_positions) * (size_t)width * sizeof(sp_real),
                               "kept positions");
        p->kept_targets = a->targets ? sp_malloc((size_t)a->batch * (size_t)a->seq_len * sizeof(int32_t),
                                                 "kept targets")
                                     : NULL;
        if (!p->kept || (a->targets && !p->kept_targets)) {
            sp_pass_free(p);
            return SP_ERR_NOMEM;
        }
    }
    if (!a->dump)
        return SP_OK;

    dump_array *arrays = sp_malloc((size_t)max_dump_arrays(a) * sizeof *arrays, "analysis batch");
    if (!arrays) {
        sp_pass_free(p);
        return SP_ERR_NOMEM;
    }
    int n = dump_arrays(a, p, arrays), width = 1;
    for (int i = 0; i < n; i++)
        width = arrays[i].width > width ? arrays[i].width : width;
    free(arrays);
    size_t rows = (size_t)a->batch * (size_t)a->seq_len, cells;
    sp_status st = sp_size_mul3(rows, (size_t)width, sizeof(sp_real), &cells, "dump batch buffer");
    if (st == SP_OK) {
        p->bufs = sp_dev_bufs_alloc(a->be, n, cells, "dump batch buffers");
        p->n_bufs = p->bufs ? n : 0;
        p->staging = sp_malloc(cells, "dump batch staging");
        st = p->bufs && p->staging ? SP_OK : SP_ERR_NOMEM;
    }
    if (st != SP_OK)
        sp_pass_free(p);
    return st;
}

void sp_pass_free(struct sp_pass *p)
{
    sp_dev_bufs_free(p->be, p->bufs, p->n_bufs);
    if (p->kept)
        p->be->free(p->kept);
    free(p->kept_targets);
    free(p->batch.hidden);
    free(p->staging);
    *p = (struct sp_pass){0};
}

/* Reads sequences [s0, s0 + n_seq) of every needed dump array into the pass's buffers. */
static sp_status read_dump_batch(const sp_analysis *a, struct sp_pass *p, int s0, int n_seq)
{
    dump_array *arrays = sp_malloc((size_t)max_dump_arrays(a) * sizeof *arrays, "analysis batch");
    if (!arrays)
        return SP_ERR_NOMEM;
    int n = dump_arrays(a, p, arrays);
    const int64_t row0 = (int64_t)s0 * a->seq_len, rows = (int64_t)n_seq * a->seq_len;
    sp_status st = SP_OK;
    for (int i = 0; i < n && st == SP_OK; i++) {
        const dump_array *d = &arrays[i];
        st = sp_dump_read(a->dump, d->kind, d->stream, d->layer, row0, rows, p->staging);
        if (st == SP_OK) {
            a->be->upload(p->bufs[i], p->staging, (size_t)rows * (size_t)d->width * sizeof *p->staging);
            *d->slot = p->bufs[i];
        }
    }
    free(arrays);
    return st;
}

/* Points the batch at the capture points of a forward pass over sequences [s0, s0 + n_seq). */
static sp_status forward_batch(const sp_analysis *a, struct sp_pass *p, int s0, int n_seq)
{
    sp_model *m = a->model;
    SP_TRY(sp_model_forward(m, a->tokens + (size_t)s0 * a->seq_len, NULL, n_seq, a->seq_len, NULL));
    sp_act_batch *b = &p->batch;
    for (int l = 0; l <= a->n_layers; l++)
        for (int s = 0; s < a->n_streams; s++)
            b->hidden[l * a->n_streams + s] = sp_model_hidden(m, l, s);
    for (int l = 0; l < a->n_layers; l++) {
        b->latent[l] = sp_model_ffn_latent(m, l);
        b->sum_a[l] = sp_model_slot(m, l, "sum_a");
        b->sum_z[l] = sp_model_slot(m, l, "sum_z");
    }
    return SP_OK;
}

/* Moves positions skip..T-1 of each sequence of one array [n_seq * T, width] to the front, in place,
 * sequence by sequence through p->kept (a backend copy must not overlap itself). */
static void keep_rows(const sp_analysis *a, struct sp_pass *p, sp_real *x, int width, int n_seq)
{
    const int T = a->seq_len, skip = a->skip_positions;
    const size_t bytes = (size_t)(T - skip) * (size_t)width * sizeof *x;
    for (int s = 0; s < n_seq; s++) {
        a->be->copy(p->kept, x + ((size_t)s * T + (size_t)skip) * (size_t)width, bytes);
        a->be->copy(x + (size_t)s * (size_t)(T - skip) * (size_t)width, p->kept, bytes);
    }
}

/* --skip-positions: leaves each array of the batch, and its targets, with the kept positions of each
 * sequence only. The arrays are the pass's buffers or the model's capture points, which the next
 * forward pass rewrites anyway (hence the casts); an array reached twice is moved once. */
static void keep_positions(const sp_analysis *a, struct sp_pass *p, int s0, int n_seq)
{
    sp_act_batch *b = &p->batch;
    const int n_hidden = (a->n_layers + 1) * a->n_streams, n_ptrs = n_hidden + 3 * a->n_layers;
    for (int i = 0; i < n_ptrs; i++) {
        const sp_real *x = b->hidden[i]; /* hidden, latent, sum_a and sum_z are one pointer table */
        int seen = !x;
        for (int j = 0; j < i && !seen; j++)
            seen = b->hidden[j] == x;
        const int width = i >= n_hidden && i < n_hidden + a->n_layers ? a->d_ff : a->d_model;
        if (!seen)
            keep_rows(a, p, (sp_real *)x, width, n_seq);
    }
    if (!a->targets)
        return;
    const int T = a->seq_len, kept = T - a->skip_positions;
    for (int s = 0; s < n_seq; s++)
        for (int t = 0; t < kept; t++)
            p->kept_targets[s * kept + t] = a->targets[(size_t)(s0 + s) * T + (size_t)(a->skip_positions + t)];
    b->targets = p->kept_targets;
}

sp_status sp_pass_run(const sp_analysis *a, const char *label, sp_batch_fn fn, void *ctx)
{
    struct sp_pass *p = a->pass;
    int first, end; /* this rank's share of the batches (analyzers/ranks.h): all of them alone */
    sp_analysis_share(a, (a->n_seqs + a->batch - 1) / a->batch, &first, &end);
    sp_progress progress;
    sp_progress_start(&progress, label, p->quiet);
    sp_status st = SP_OK;
    for (int i = first; i < end && st == SP_OK; i++) {
        int s0 = i * a->batch, n_seq = a->n_seqs - s0 < a->batch ? a->n_seqs - s0 : a->batch;
        double t0 = sp_clock_seconds();
        st = a->model ? forward_batch(a, p, s0, n_seq) : read_dump_batch(a, p, s0, n_seq);
        a->be->sync();
        p->seconds_input += sp_clock_seconds() - t0;
        p->batch.seq_len = a->seq_len - a->skip_positions;
        p->batch.rows = n_seq * p->batch.seq_len;
        p->batch.first_seq = s0;
        p->batch.targets = a->targets ? a->targets + (size_t)s0 * a->seq_len : NULL;
        if (st == SP_OK && a->skip_positions > 0)
            keep_positions(a, p, s0, n_seq);
        if (st == SP_OK)
            st = fn(a, ctx, &p->batch);
        sp_progress_update(&progress, i + 1 - first, end - first);
    }
    sp_progress_end(&progress);
    return st;
}
