/* kernels/cpu/cpu_math.h: exp and the logistic sigmoid in double, branch-free and inline, so loops
 * marked `omp simd` over them vectorize (a call to libm's exp or tanh cannot: GELU through libm's
 * tanh took 12% of the model's profile samples, under 3% now).
 *
 * exp: x = n ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2, so n ln2_hi is exact), e^r by its
 * Taylor polynomial to degree 13 (truncation below 1e-17 relative), times 2^n built from the
 * exponent bits. x is first clamped to [-709, 710], so n stays in [-1023, 1024] where 2^n is 0
 * (results below about 2^-1022 flush to 0) or inf (results above about 2^1023.5 overflow, a little
 * before libm's exp) and the exponent field never wraps. NaN passes the clamp (its comparisons are
 * false) and the polynomial. GCC turns the clamp into a branch-free select, as vectorizing needs,
 * only under -fno-trapping-math, which the Makefile sets for kernels/cpu (it changes no value). */
#ifndef SP_CPU_MATH_H
#define SP_CPU_MATH_H

#include <stdint.h>
#include <string.h>

/* Marks a function whose loops run sp_cpu_exp: GCC builds it for AVX-512, AVX2 and the x86-64
 * baseline, and the loader picks the widest the CPU has (8, 4 or 2 doubles a step; GELU forward
 * measured at about 1.2, 2.3 and 5 ns an element, 11 through libm's tanh). Elementwise loops give
 * the same bits in all three: the same IEEE operations in the same order, as ISO C mode (-std=c11)
 * contracts no multiply-add into an FMA. A sum over a simd loop (the softmax denominator) is added
 * in an order that depends on the vector width, so it may differ in the last bit from one CPU to
 * another (as OpenBLAS's kernels do); on one machine it is fixed. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SP_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SP_CPU_CLONES
#endif

/* e^x (see above) */
static inline double sp_cpu_exp(double x)
{
    const double shifter = 0x1.8p52; /* adding it rounds to an integer held in the low mantissa bits */
    const double ln2_hi = 0x1.62e42feep-1, ln2_lo = 0x1.a39ef35793c76p-33;
    x = x < -709.0 ? -709.0 : x;
    x = x > 710.0 ? 710.0 : x;
    const double t = x * 0x1.71547652b82fep0 + shifter; /* x / ln2 */
    const double n = t - shifter;
    const double r = (x - n * ln2_hi) - n * ln2_lo;
    double p = 1.0 / 6227020800.0; /* 1/13! */
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    /* the mantissa of t holds 2^51 + n: adding the bias and shifting leaves the exponent field n + 1023 */
    uint64_t bits;
    memcpy(&bits, &t, sizeof bits);
    bits = (bits + 1023) << 52;
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* 1 / (1 + e^-x): exactly 0 below x = -709.1 (e^-x = inf), exactly 1 above about x = 37. */
static inline double sp_cpu_sigmoid(double x) { return 1.0 / (1.0 + sp_cpu_exp(-x)); }

#endif
