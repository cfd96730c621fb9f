/* io/param_fill.h: filling spanprobe parameters from stored tensors, for every model format that
 * maps onto the architecture tables (Hugging Face safetensors in io/hf_dir.c, GGUF in
 * io/gguf_model.c). A format describes each stored tensor as a view (its shape and a reader of
 * consecutive elements); a table entry (io/hf_arch.h's sp_hf_tensor) says how the parameter's rows
 * are taken from it: plain, one part of a fused q/k/v, GPT-NeoX's per-head interleave, transposed
 * (Conv1D), with q/k rows reordered from rotate_half pairs, with a norm-gain offset. The shape is
 * checked against the parameter before any model memory exists; NaN/Inf values are SP_ERR_NUMERIC. */
#ifndef SP_PARAM_FILL_H
#define SP_PARAM_FILL_H

#include "io/hf_arch.h"
#include "model/model.h"

#define SP_TENSOR_VIEW_MAX_RANK 8 /* safetensors allows 8, GGUF 4 */

/* A stored tensor. shape is outermost first (row-major); read converts `count` elements from
 * element `first` into dst. A reader may require whole rows (GGUF's blocks): param_fill reads whole
 * rows of every tensor that is not transposed. release (may be NULL) lets the tensor's pages go. */
typedef struct {
    const char *file, *name;
    const char *dtype; /* as the format names it ("BF16", "float32"); NULL where not told */
    size_t nbytes;     /* stored bytes (0 where not told) */
    int rank;
    int64_t shape[SP_TENSOR_VIEW_MAX_RANK];
    const void *tensor;
    sp_status (*read)(const void *tensor, size_t first, size_t count, sp_real *dst);
    void (*release)(const void *tensor);
} sp_tensor_view;

/* One parameter's source: the table entry, the view, and the layout numbers they imply. */
typedef struct {
    const sp_hf_tensor *entry;
    sp_tensor_view src;
    int64_t rows, cols;    /* of the spanprobe parameter ([dim, 1] for vectors) */
    int64_t head_dim, rot; /* rot 0: rows are not reordered */
    sp_real gain_offset;   /* added to a norm gain's values */
} sp_param_source;

/* How a format's rows relate to spanprobe's. */
typedef struct {
    int rope_half_split;   /* q/k rows are in rotate_half order: reorder them to neighbouring pairs */
    double gain_offset;    /* added to every norm gain */
    const char *implied_by; /* what implies the shapes, for errors: "config.json", "the GGUF metadata" */
    const char *arch;       /* the architecture, for errors */
} sp_param_layout_rules;

/* Sets up ps for spec from entry and its tensor src, checking src's shape against what cfg implies
 * (SP_ERR_INPUT naming the tensor, both shapes and the parameter). */
sp_status sp_param_source_init(sp_param_source *ps, const sp_hf_tensor *entry, const sp_tensor_view *src,
                               const sp_config *cfg, const sp_param_spec *spec, const sp_param_layout_rules *rules);

/* Fills every parameter of m (specs[i] from sources[i]), releasing each source after its read. On
 * the CPU backend parameters are written in place; elsewhere one at a time through a host buffer. */
sp_status sp_param_fill_model(sp_model *m, const sp_param_spec *specs, const sp_param_source *sources, int n);
/* The model of cfg on be, filled so and synced; *model is NULL on failure. */
sp_status sp_param_model_create(const sp_config *cfg, const sp_backend *be, const sp_param_spec *specs,
                                const sp_param_source *sources, int n, sp_model **model);

#endif
