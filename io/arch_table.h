/* io/arch_table.h: shorthands for the tensor tables of io/hf_arch.c and io/gguf_arch.c (one
 * sp_hf_tensor each); included by those two files only. */
#ifndef SP_ARCH_TABLE_H
#define SP_ARCH_TABLE_H

#include "io/hf_arch.h"

#define T(param, tensor) {param, tensor, 0, SP_HF_ROWS_PLAIN, 0, 0, 0, 0}
#define T_ROPE(param, tensor) {param, tensor, 0, SP_HF_ROWS_PLAIN, 0, 1, 0, 0}
#define T_GAIN(param, tensor) {param, tensor, 0, SP_HF_ROWS_PLAIN, 0, 0, 1, 0}
#define T_ROPE_GAIN(param, tensor) {param, tensor, 0, SP_HF_ROWS_PLAIN, 0, 1, 1, 0}
#define T_CONV(param, tensor) {param, tensor, 1, SP_HF_ROWS_PLAIN, 0, 0, 0, 0}
#define T_CONV_PART(param, tensor, part) {param, tensor, 1, SP_HF_ROWS_PART, part, 0, 0, 0}
#define T_PART(param, tensor, part) {param, tensor, 0, SP_HF_ROWS_PART, part, 0, 0, 0}
#define T_NEOX(param, tensor, part, rope) {param, tensor, 0, SP_HF_ROWS_NEOX_QKV, part, rope, 0, 0}
#define T_PART_ROPE(param, tensor, part) {param, tensor, 0, SP_HF_ROWS_PART, part, 1, 0, 0}
#define T_PART_IF_ROPE(param, tensor, part, rope) {param, tensor, 0, SP_HF_ROWS_PART, part, rope, 0, 0}
#define T_ZERO_IF_ABSENT(param, tensor) {param, tensor, 0, SP_HF_ROWS_PLAIN, 0, 0, 0, 1}
#define T_END {NULL, NULL, 0, SP_HF_ROWS_PLAIN, 0, 0, 0, 0}

#endif
