/* io/gguf_types.c: the ggml tensor types with their block sizes (gguf 0.19.0's GGML_QUANT_SIZES),
 * the dequantizer of each readable one, and the metadata value type names. */
#include "io/gguf_dequant.h"

#define QK_K 256 /* elements per K-quant (and IQ) super-block */

static const gguf_type_info types[SP_GGML_N_TYPES] = {
    [SP_GGML_F32] = {"F32", 1, 4, gguf_dequant_f32},
    [SP_GGML_F16] = {"F16", 1, 2, gguf_dequant_f16},
    [SP_GGML_Q4_0] = {"Q4_0", 32, 2 + 16, gguf_dequant_q4_0},
    [SP_GGML_Q4_1] = {"Q4_1", 32, 2 + 2 + 16, gguf_dequant_q4_1},
    [SP_GGML_Q5_0] = {"Q5_0", 32, 2 + 4 + 16, gguf_dequant_q5_0},
    [SP_GGML_Q5_1] = {"Q5_1", 32, 2 + 2 + 4 + 16, gguf_dequant_q5_1},
    [SP_GGML_Q8_0] = {"Q8_0", 32, 2 + 32, gguf_dequant_q8_0},
    [SP_GGML_Q8_1] = {"Q8_1", 32, 4 + 4 + 32, NULL},
    [SP_GGML_Q2_K] = {"Q2_K", QK_K, 2 + 2 + QK_K / 16 + QK_K / 4, gguf_dequant_q2_k},
    [SP_GGML_Q3_K] = {"Q3_K", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12, gguf_dequant_q3_k},
    [SP_GGML_Q4_K] = {"Q4_K", QK_K, 2 + 2 + QK_K / 2 + 12, gguf_dequant_q4_k},
    [SP_GGML_Q5_K] = {"Q5_K", QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12, gguf_dequant_q5_k},
    [SP_GGML_Q6_K] = {"Q6_K", QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16, gguf_dequant_q6_k},
    [SP_GGML_Q8_K] = {"Q8_K", QK_K, 4 + QK_K + QK_K / 8, NULL},
    [SP_GGML_IQ2_XXS] = {"IQ2_XXS", QK_K, 2 + QK_K / 4, NULL},
    [SP_GGML_IQ2_XS] = {"IQ2_XS", QK_K, 2 + QK_K / 4 + QK_K / 32, NULL},
    [SP_GGML_IQ3_XXS] = {"IQ3_XXS", QK_K, 2 + QK_K / 4 + QK_K / 8, NULL},
    [SP_GGML_IQ1_S] = {"IQ1_S", QK_K, 2 + QK_K / 8 + QK_K / 16, NULL},
    [SP_GGML_IQ4_NL] = {"IQ4_NL", 32, 2 + 16, NULL},
    [SP_GGML_IQ3_S] = {"IQ3_S", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4, NULL},
    [SP_GGML_IQ2_S] = {"IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 16, NULL},
    [SP_GGML_IQ4_XS] = {"IQ4_XS", QK_K, 2 + 2 + QK_K / 2 + QK_K / 64, NULL},
    [SP_GGML_I8] = {"I8", 1, 1, NULL},
    [SP_GGML_I16] = {"I16", 1, 2, NULL},
    [SP_GGML_I32] = {"I32", 1, 4, NULL},
    [SP_GGML_I64] = {"I64", 1, 8, NULL},
    [SP_GGML_F64] = {"F64", 1, 8, NULL},
    [SP_GGML_IQ1_M] = {"IQ1_M", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32, NULL},
    [SP_GGML_BF16] = {"BF16", 1, 2, gguf_dequant_bf16},
    [SP_GGML_TQ1_0] = {"TQ1_0", QK_K, 2 + 4 * 13, NULL},
    [SP_GGML_TQ2_0] = {"TQ2_0", QK_K, 2 + 64, NULL},
    [SP_GGML_MXFP4] = {"MXFP4", 32, 1 + 16, NULL},
    [SP_GGML_NVFP4] = {"NVFP4", 64, 4 + 32, NULL},
    [SP_GGML_Q1_0] = {"Q1_0", 128, 2 + 16, NULL},
};

const gguf_type_info *gguf_type(sp_ggml_type type)
{
    return (unsigned)type < SP_GGML_N_TYPES && types[type].name ? &types[type] : NULL;
}

const char *sp_ggml_type_name(sp_ggml_type type)
{
    const gguf_type_info *info = gguf_type(type);
    return info ? info->name : "?";
}

int sp_ggml_type_is_readable(sp_ggml_type type)
{
    const gguf_type_info *info = gguf_type(type);
    return info && info->dequant;
}

const char *sp_gguf_value_type_name(sp_gguf_value_type type)
{
    static const char *const names[SP_GGUF_N_VALUE_TYPES] = {
        "UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32", "BOOL", "STRING", "ARRAY", "UINT64", "INT64",
        "FLOAT64",
    };
    return (unsigned)type < SP_GGUF_N_VALUE_TYPES ? names[type] : "?";
}
