/* io/dump.h: activation dumps (HDF5), format "spanprobe-activations", version 1.0.
 *
 * A dump holds what one model computed on a fixed set of token sequences, layer by layer, so that
 * analyzers can work without the model, and so that activations of any other framework (written
 * with h5py, see docs/formats.md) can be analyzed the same way. rows = batch * seq_len; row r is
 * position r % seq_len of sequence r / seq_len.
 *
 *   /            attrs format, format_version "1.0", tool_version, created, source
 *   /config      attrs n_layers, d_model, n_streams (1 or 2), d_ff, vocab_size, batch, seq_len
 *                (int64), optional variant (string)
 *   /tokens      int32 [batch, seq_len]
 *   /hidden/<s>  [L+1, rows, d_model], s = 0 (the residual stream; X for siamese) and 1 (siamese Y);
 *                layer l is h_l: h_0 the block-0 input, h_L the last block output (before any final norm)
 *   /ffn_latent  [L, rows, d_ff], optional: the input of W_2 (after the nonlinearity)
 *   /presum/sum_a, /presum/sum_z  [L, rows, d_model], optional: the pre-normalization sums (a
 *                pre-norm model has none and omits /presum); the attribute "present" of each dataset,
 *                int32 [L], optional (absent: every layer), is 1 for the layers whose block has that
 *                sum (mixln's pre blocks have none; their rows read as NaN)
 *   /logits      [rows, vocab_size], optional
 * Activations are float32 or float16 (any float width is read), chunked one layer at a time so a
 * reader can stream a layer or a row range of it.
 *
 * The writer is atomic (io/atomic.h): nothing appears at the path until sp_dump_commit succeeds, and
 * commit checks that every row of every layer of /hidden (and of /ffn_latent, /logits when
 * declared) was written. The file is assembled in memory until commit (io/h5.h, sp_h5_create).
 */
#ifndef SP_DUMP_H
#define SP_DUMP_H

#include "core/common.h"

#define SP_DUMP_FORMAT "spanprobe-activations"
#define SP_DUMP_VERSION_MAJOR 1
#define SP_DUMP_VERSION_MINOR 0

/* The arrays of a dump. Layers run 0..L for hidden, 0..L-1 for the others; logits have no layer. */
typedef enum { SP_DUMP_HIDDEN, SP_DUMP_FFN_LATENT, SP_DUMP_SUM_A, SP_DUMP_SUM_Z, SP_DUMP_LOGITS, SP_DUMP_N_KINDS } sp_dump_kind;

typedef struct {
    int n_layers, d_model, n_streams, d_ff, vocab_size, batch, seq_len;
    int has_ffn_latent, has_sum_a, has_sum_z, has_logits; /* optional arrays present */
    int float16;              /* writer: store activations as float16 (reader: set when any is) */
    char variant[32];         /* optional, "" when absent */
    char source[512];         /* provenance: what produced the activations */
} sp_dump_info;

typedef struct sp_dump_writer sp_dump_writer;
typedef struct sp_dump sp_dump;

/* ---- writer ----
 * Creates the temporary file with every dataset declared by info (the variant and source strings are
 * copied) and writes tokens [batch * seq_len]. */
sp_status sp_dump_create(const char *path, const sp_dump_info *info, const int32_t *tokens, sp_dump_writer **out);
/* Writes rows [row0, row0 + n_rows) of one layer of one array from host memory [n_rows, width]
 * (stream only for SP_DUMP_HIDDEN, else 0; layer ignored for SP_DUMP_LOGITS). */
sp_status sp_dump_write(sp_dump_writer *w, sp_dump_kind kind, int stream, int layer, int64_t row0, int64_t n_rows,
                        const sp_real *data);
/* Checks completeness, closes and renames into place; frees w whatever the outcome. */
sp_status sp_dump_commit(sp_dump_writer *w);
/* Removes the temporary file and frees w (NULL is fine). */
void sp_dump_abort(sp_dump_writer *w);

/* ---- reader ----
 * Opens and validates the structure: format, version, /config values in range, every dataset's
 * presence, rank, shape and dtype class. Values are checked as they are read. */
sp_status sp_dump_open(const char *path, sp_dump **out);
const sp_dump_info *sp_dump_get_info(const sp_dump *d);
int64_t sp_dump_rows(const sp_dump *d);
int sp_dump_width(const sp_dump *d, sp_dump_kind kind); /* d_model, d_ff or vocab_size */
/* 1 when the array has this layer (0 for absent arrays and for the layers a presum array lacks). */
int sp_dump_has_layer(const sp_dump *d, sp_dump_kind kind, int stream, int layer);
/* Reads tokens [batch * seq_len], each checked to lie in [0, vocab_size). */
sp_status sp_dump_read_tokens(sp_dump *d, int32_t *tokens);
/* Reads rows [row0, row0 + n_rows) of one layer into out [n_rows, width]; NaN/Inf is SP_ERR_NUMERIC
 * naming the dataset, the layer and the count. */
sp_status sp_dump_read(sp_dump *d, sp_dump_kind kind, int stream, int layer, int64_t row0, int64_t n_rows,
                       sp_real *out);
void sp_dump_close(sp_dump *d);

#endif
