/* io/safetensors_dtype.c: the element types safetensors names, with their sizes. */
#include <string.h>

#include "io/safetensors_shard.h"

static const struct {
    const char *name;
    int bits;
} dtypes[SP_ST_N_DTYPES] = {
    [SP_ST_F64] = {"F64", 64},         [SP_ST_F32] = {"F32", 32},
    [SP_ST_F16] = {"F16", 16},         [SP_ST_BF16] = {"BF16", 16},
    [SP_ST_I64] = {"I64", 64},         [SP_ST_I32] = {"I32", 32},
    [SP_ST_I16] = {"I16", 16},         [SP_ST_I8] = {"I8", 8},
    [SP_ST_U64] = {"U64", 64},         [SP_ST_U32] = {"U32", 32},
    [SP_ST_U16] = {"U16", 16},         [SP_ST_U8] = {"U8", 8},
    [SP_ST_BOOL] = {"BOOL", 8},        [SP_ST_F8_E5M2] = {"F8_E5M2", 8},
    [SP_ST_F8_E4M3] = {"F8_E4M3", 8},  [SP_ST_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 8},
    [SP_ST_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 8}, [SP_ST_F8_E8M0] = {"F8_E8M0", 8},
    [SP_ST_F6_E2M3] = {"F6_E2M3", 6},  [SP_ST_F6_E3M2] = {"F6_E3M2", 6},
    [SP_ST_F4] = {"F4", 4},            [SP_ST_C64] = {"C64", 64},
};

const char *sp_st_dtype_name(sp_st_dtype dtype) { return dtypes[dtype].name; }

int sp_st_dtype_bits(sp_st_dtype dtype) { return dtypes[dtype].bits; }

int sp_st_dtype_is_readable(sp_st_dtype dtype)
{
    return dtype == SP_ST_F64 || dtype == SP_ST_F32 || dtype == SP_ST_F16 || dtype == SP_ST_BF16;
}

int sp_st_dtype_parse(const char *name, sp_st_dtype *out)
{
    for (int d = 0; d < SP_ST_N_DTYPES; d++)
        if (strcmp(name, dtypes[d].name) == 0) {
            *out = (sp_st_dtype)d;
            return 1;
        }
    return 0;
}
