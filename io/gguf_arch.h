/* io/gguf_arch.h: the GGUF architectures spanprobe reads, as data (docs/import.md, "GGUF models").
 *
 * An architecture is one `general.architecture` value of llama.cpp. It shares its recipe and model
 * options (variant, norm, FFN, GELU, positions) with a Hugging Face family (io/hf_arch.h); what
 * differs is how llama.cpp's converter (convert_hf_to_gguf.py) stores it: sizes under `<arch>.*`
 * keys, llama.cpp's tensor names, q/k rows of "NORM"-RoPE architectures (llama) already permuted
 * into neighbouring pairs (spanprobe's layout) while "NEOX"-RoPE ones keep rotate_half order, Gemma
 * norm gains stored with the 1 of (1 + w) added, GPT-2's Conv1D weights stored transposed back,
 * GPT-NeoX's fused q/k/v de-interleaved into q, k, v parts. Adding an architecture is one entry of
 * gguf_arch.c. */
#ifndef SP_GGUF_ARCH_H
#define SP_GGUF_ARCH_H

#include "io/hf_arch.h"

typedef struct {
    const char *arch;             /* general.architecture */
    const char *hf_architecture;  /* the Hugging Face family it shares recipe and options with */
    int rope_neox;                /* q/k rows in rotate_half order (NEOX RoPE): reordered on load */
    const char *norm_eps_key;     /* below "<arch>.": the required norm epsilon */
    int qk_norm;                  /* sp_qk_norm of the family (olmo2's recipe sets its own) */
    int embed_scale_sqrt_d;       /* h_0 = sqrt(d_model) e (Gemma) */
    double attn_softcap, final_softcap; /* defaults of the soft-cap keys; both 0: the keys are not read */
    int window_pattern;           /* -1: no windowed attention (the key is rejected); else sp_config's pattern */
    int default_window;           /* sliding window without `<arch>.attention.sliding_window` */
    double local_theta;           /* RoPE base of windowed layers (0: as the others) */
    int parallel_key;             /* `<arch>.use_parallel_residual` picks parallel (default) or sequential */
    int scale_by_d_model_layers;  /* llama.cpp's Gemma 27B rule: with this many layers, scores scale by
                                     1/sqrt(d_model / n_heads) instead of 1/sqrt(head_dim); 0: never */
    const sp_hf_tensor *tensors;  /* NULL-terminated by param; names with .weight/.bias, "%d" the layer */
} sp_gguf_arch;

/* The entry of a general.architecture value, NULL when spanprobe does not read it. */
const sp_gguf_arch *sp_gguf_arch_find(const char *arch);
/* "llama, qwen2, ..." for error messages. */
const char *sp_gguf_arch_list(void);

#endif
