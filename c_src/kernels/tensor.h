/* The per-element math of the tensor operations, written once in the common subset of C++17, CUDA
 * C++ and OpenCL C (see dialect.h): one body per operation (registered in ops.h) and element family
 * (int: any integer type but u64, widened to 64 bits; uint: u64; f32; f64), the dispatch from an
 * operation code to its
 * body (generated from the registry), conversions, and the NaN-propagating min/max of reductions.
 * How elements are indexed is tensor_kernels.h's business; what one element becomes is decided
 * here, so every backend computes the same values.
 *
 * Semantics (documented for users in Accel.Tensor):
 *  - Integer operations are computed on 64-bit values and truncated by the store, which gives the
 *    same wrap-around for s32 and u8 as computing in their own width (two's complement, like Nx).
 *    Division truncates toward zero (Elixir's div/2 and rem/2); MIN / -1 wraps to MIN; a zero divisor
 *    or a negative integer exponent yields 0 here and raises a flag the host turns into an error, as
 *    does a negative shift amount (Nx raises for it).
 *  - Float operations are IEEE single or double precision; f32 functions compute in f64 and round
 *    where the device has doubles (below); f64 functions are the device's, within an ulp or two of
 *    the host C library's (see guides/nx.md for what Accel promises).
 *  - Float to integer conversion truncates toward zero and saturates at the target's range; NaN
 *    becomes 0. Integer to integer conversion wraps. f16 rounds to nearest even (as Erlang writes
 *    16-bit floats), bf16 is the high half of the value rounded to f32 (as Nx writes it), f8 the
 *    high byte of its f16, f8_e4m3fn as Nx.Floating writes it (below). */
#ifndef ACCEL_KERNELS_TENSOR_H
#define ACCEL_KERNELS_TENSOR_H

#include "kernels/dialect.h"
#include "kernels/ops.h"
#include "kernels/types.h"

#define ACCEL_REDUCE_SUM 0
#define ACCEL_REDUCE_MIN 1
#define ACCEL_REDUCE_MAX 2
#define ACCEL_PICK_OPS 3
/* the sum kernels' second operation (accel_sum_*) */
#define ACCEL_REDUCE_PRODUCT_OP 1
/* argmin/argmax: how NaN ranks (accel_params.count[0] of an argpick) */
#define ACCEL_NAN_FIRST 0
#define ACCEL_NAN_LAST 1
#define ACCEL_NAN_IGNORED 2
/* window reductions (accel_window_*) and scatters (accel_scatter_*), by operation code */
#define ACCEL_WINDOW_SUM 0
#define ACCEL_WINDOW_PRODUCT 1
#define ACCEL_WINDOW_MAX 2
#define ACCEL_WINDOW_MIN 3
#define ACCEL_WINDOW_SELECT_MAX 4
#define ACCEL_WINDOW_SELECT_MIN 5
#define ACCEL_WINDOW_OPS 6
#define ACCEL_SCATTER_PUT 0
#define ACCEL_SCATTER_ADD 1
#define ACCEL_SCATTER_OPS 2
/* sorts (accel_sort_*): op / 2 is the pass's kind (block, pair merge, element merge), op & 1 set
 * for descending */
#define ACCEL_SORT_OPS 6

/* ---- integers ---- */
ACCEL_FN accel_i64 accel_int_negate(accel_i64 x) { return (accel_i64)((accel_u64)0 - (accel_u64)x); }
ACCEL_FN accel_i64 accel_int_abs(accel_i64 x) { return x < 0 ? accel_int_negate(x) : x; }
ACCEL_FN accel_i64 accel_int_floor(accel_i64 x) { return x; }
ACCEL_FN accel_i64 accel_int_ceil(accel_i64 x) { return x; }
ACCEL_FN accel_i64 accel_int_round(accel_i64 x) { return x; }
ACCEL_FN accel_i64 accel_int_bitwise_not(accel_i64 x) { return ~x; }
ACCEL_FN accel_i64 accel_int_sign(accel_i64 x) { return (accel_i64)(x > 0) - (accel_i64)(x < 0); }

ACCEL_FN accel_i64 accel_int_add(accel_i64 a, accel_i64 b, int* flag) {
  (void)flag;
  return (accel_i64)((accel_u64)a + (accel_u64)b);
}
ACCEL_FN accel_i64 accel_int_subtract(accel_i64 a, accel_i64 b, int* flag) {
  (void)flag;
  return (accel_i64)((accel_u64)a - (accel_u64)b);
}
ACCEL_FN accel_i64 accel_int_multiply(accel_i64 a, accel_i64 b, int* flag) {
  (void)flag;
  return (accel_i64)((accel_u64)a * (accel_u64)b);
}
ACCEL_FN accel_i64 accel_int_divide(accel_i64 a, accel_i64 b, int* flag) {
  if (b == 0) {
    *flag = ACCEL_FLAG_ZERO_DIVISOR;
    return 0;
  }
  return b == -1 ? accel_int_negate(a) : a / b; /* MIN / -1 overflows: wrap */
}
ACCEL_FN accel_i64 accel_int_quotient(accel_i64 a, accel_i64 b, int* flag) { return accel_int_divide(a, b, flag); }
ACCEL_FN accel_i64 accel_int_remainder(accel_i64 a, accel_i64 b, int* flag) {
  if (b == 0) {
    *flag = ACCEL_FLAG_ZERO_DIVISOR;
    return 0;
  }
  return b == -1 ? 0 : a % b;
}
ACCEL_FN accel_i64 accel_int_pow(accel_i64 a, accel_i64 b, int* flag) {
  if (b < 0) {
    *flag = ACCEL_FLAG_NEGATIVE_EXPONENT;
    return 0;
  }
  accel_u64 result = 1, base = (accel_u64)a, e = (accel_u64)b; /* square and multiply, wrapping */
  while (e != 0) {
    if (e & 1) result *= base;
    base *= base;
    e >>= 1;
  }
  return (accel_i64)result;
}
ACCEL_FN accel_i64 accel_int_min(accel_i64 a, accel_i64 b, int* flag) {
  (void)flag;
  return b < a ? b : a;
}
ACCEL_FN accel_i64 accel_int_max(accel_i64 a, accel_i64 b, int* flag) {
  (void)flag;
  return b > a ? b : a;
}
ACCEL_FN accel_i64 accel_int_bitwise_and(accel_i64 a, accel_i64 b, int* flag) {
  (void)flag;
  return a & b;
}
ACCEL_FN accel_i64 accel_int_bitwise_or(accel_i64 a, accel_i64 b, int* flag) {
  (void)flag;
  return a | b;
}
ACCEL_FN accel_i64 accel_int_bitwise_xor(accel_i64 a, accel_i64 b, int* flag) {
  (void)flag;
  return a ^ b;
}
/* Shifts by n >= 64 are defined here (C leaves them undefined): everything shifted out. A negative
 * amount raises (Nx's "cannot left shift by -1"). */
ACCEL_FN accel_i64 accel_shl(accel_i64 a, accel_u64 n) { return n >= 64 ? 0 : (accel_i64)((accel_u64)a << n); }
ACCEL_FN accel_i64 accel_shr(accel_i64 a, accel_u64 n) { return n >= 64 ? (a < 0 ? -1 : 0) : a >> n; }
ACCEL_FN accel_i64 accel_int_left_shift(accel_i64 a, accel_i64 b, int* flag) {
  if (b < 0) {
    *flag = ACCEL_FLAG_NEGATIVE_SHIFT;
    return 0;
  }
  return accel_shl(a, (accel_u64)b);
}
ACCEL_FN accel_i64 accel_int_right_shift(accel_i64 a, accel_i64 b, int* flag) {
  if (b < 0) {
    *flag = ACCEL_FLAG_NEGATIVE_SHIFT;
    return 0;
  }
  return accel_shr(a, (accel_u64)b);
}

/* On OpenCL, a transcendental function of a NaN is that NaN, returned before the device's function
 * is reached: PoCL writes nothing at all from a kernel in which its compiler can prove the argument
 * of exp or expm1 NaN (a softmax over rows that a mask computed from iotas makes NaN throughout: the
 * output buffer kept what it held, the kernel run alone from a plain OpenCL host program), as if the
 * call were undefined there. Every function it guards returns NaN for NaN, so this changes no
 * result; it costs a compare and a select per call. Elsewhere, the call alone. */
#ifdef __OPENCL_VERSION__
#define ACCEL_NAN_PASSES(call, x) ((x) == (x) ? (call) : (x))
#else
#define ACCEL_NAN_PASSES(call, x) (call)
#endif

/* ---- f32 ----
 * Arithmetic, sqrt, rounding and conversions are IEEE single precision (correctly rounded). The
 * other functions, on devices with doubles, are the f64 function's value rounded once to f32: what
 * Nx.BinaryBackend computes (it computes in f64 and rounds), wherever this device's f64 function
 * and Erlang's agree to within f32's rounding, that is everywhere but within about 2^-29 of a
 * rounding midpoint. On devices without doubles they are the device's f32 functions (within the
 * OpenCL specification's bounds). */
#if ACCEL_HAS_F64
#define ACCEL_F32_VIA_F64(fn, x) ACCEL_NAN_PASSES((float)fn((double)(x)), x)
#else
#define ACCEL_F32_VIA_F64(fn, x) ACCEL_NAN_PASSES(ACCEL_F32(fn)(x), x)
#endif

#if defined(__x86_64__) && defined(__GLIBC__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__CUDACC__) && !defined(__OPENCL_VERSION__) && !defined(ACCEL_NO_VECTOR_LIBM)
/* On the host, with GCC and glibc: the f64 functions the f32 ones round are glibc's, called through
 * names declared with their SIMD variants (libmvec: _ZGVdN4v_exp and so on, what glibc's own
 * math-vector.h declares under -ffast-math), so that a loop over f32 elements vectorises: a loop
 * calling plain exp stays scalar. Only the f32 functions use them: libmvec's f64 results are within
 * 4 ulps of the scalar functions' (often not equal), which f32's rounding hides (swept against the
 * scalar functions in c_src/test/host_math_test.cpp), while f64 results keep the scalar functions.
 * What includes this links libmvec (-lmvec): CMake links the NIF with it, Accel.Kernel.Native each
 * generated kernel; where it is missing they define ACCEL_NO_VECTOR_LIBM, and loops stay scalar. */
#define ACCEL_VECTOR_LIBM 1
#ifdef __cplusplus
#define ACCEL_LIBM_LINKAGE extern "C"
#else
#define ACCEL_LIBM_LINKAGE extern
#endif
#define ACCEL_LIBM_SIMD(fn)                                                                        \
  ACCEL_LIBM_LINKAGE __attribute__((simd("notinbranch"), const, nothrow)) double accel_libm_##fn(double) \
      __asm__(#fn);
#define ACCEL_LIBM_SIMD2(fn)                                                                       \
  ACCEL_LIBM_LINKAGE __attribute__((simd("notinbranch"), const, nothrow)) double accel_libm_##fn(double, \
                                                                                                 double) \
      __asm__(#fn);
ACCEL_LIBM_SIMD(exp) ACCEL_LIBM_SIMD(expm1) ACCEL_LIBM_SIMD(log) ACCEL_LIBM_SIMD(log1p) ACCEL_LIBM_SIMD(tanh)
ACCEL_LIBM_SIMD(sin) ACCEL_LIBM_SIMD(cos) ACCEL_LIBM_SIMD(tan) ACCEL_LIBM_SIMD(asin) ACCEL_LIBM_SIMD(acos)
ACCEL_LIBM_SIMD(atan) ACCEL_LIBM_SIMD(sinh) ACCEL_LIBM_SIMD(cosh) ACCEL_LIBM_SIMD(asinh) ACCEL_LIBM_SIMD(acosh)
ACCEL_LIBM_SIMD(atanh) ACCEL_LIBM_SIMD(cbrt) ACCEL_LIBM_SIMD(erf) ACCEL_LIBM_SIMD(erfc) ACCEL_LIBM_SIMD2(pow)
ACCEL_LIBM_SIMD2(atan2)
#undef ACCEL_F32_VIA_F64
#define ACCEL_F32_VIA_F64(fn, x) ((float)accel_libm_##fn((double)(x)))
#define ACCEL_F32_LIBM(fn) accel_libm_##fn
#else
#define ACCEL_VECTOR_LIBM 0
#define ACCEL_F32_LIBM(fn) fn
#endif

ACCEL_FN float accel_f32_negate(float x) { return -x; }
ACCEL_FN float accel_f32_abs(float x) { return ACCEL_F32(fabs)(x); }
/* exp takes an argument below -200 as -200, and sigmoid exp's argument past +-200 as +-200 (with
 * Accel's own exp, below, the large side is a select of the result instead): the same f32 results
 * (exp(-200) rounds to +0, exp(200) is past f32's range; NaN passes), without
 * libmvec's special-case path, which computes each vector holding an argument past its range
 * (below about -708, above 709) lane by lane through the scalar function: a masked softmax's -1e9
 * or -inf made its exp 8-10x slower (c_src/test/host_math_test.cpp sweeps f32 inputs of every
 * exponent, the clamps' edges among them, against the unclamped functions). */
#define ACCEL_F32_EXP_ARG(x) ((x) < -200.0f ? -200.0f : (x))
#if defined(__x86_64__) && defined(__FMA__) && ACCEL_HAS_F64 && !defined(__CUDACC__) && !defined(__OPENCL_VERSION__)
/* On an x86-64 host with FMA, exp and tanh of f32 are code of Accel's rather than the C library's
 * (libmvec's, above): still the f64 function rounded once, equal to glibc's scalar function
 * rounded for every f32 input (swept over all 2^32 when written; NaN passes), faster than libmvec
 * (2^21 elements: exp 1.8 ms against 1.9-2.7, tanh 2.1-2.3 against 4.2-4.9) and vectorising
 * without it. Without FMA, fma() is a library call and the C library's functions the faster.
 * e^y = 2^k (1 + q), y = k ln2 + r (|r| <= ln2 / 2, ln2 in two parts), q = expm1(r) =
 * r + r^2 p(r), p of degree 8 the minimax polynomial for (expm1(r) - r) / r^2 relative to expm1
 * (Remez's exchange, in 60 digits), each coefficient rounded to f64: within 1.4e-15 of expm1 relative
 * to it, less exact than the Taylor series to r^13 it replaced (4e-18) but three fma fewer, and
 * exact enough: both functions still give the scalar functions' bits for every f32 (swept over all
 * 2^32 at x86-64-v3 and v4 when changed; c_src/test/host_math_test.cpp sweeps every input where
 * the result is neither a constant nor x itself), where degree 7 (3e-14) misses 24 exp results.
 * Softmax's row kernel over 4096 x 1024 f32: 2.51-2.62 ms against 2.81-2.92 with the series (5
 * alternating runs). The scale 2^k through *scale. */
#define ACCEL_OWN_F32_EXP 1
ACCEL_FN double accel_expm1_reduced(double y, double* scale) {
  const double shift = 6755399441055744.0; /* 1.5 * 2^52: adding it rounds to an integer */
  const double kd = fma(y, 1.4426950408889634, shift);
  const double k = kd - shift;
  double r = fma(k, -6.93147180369123816490e-01, y);
  r = fma(k, -1.90821492927058770002e-10, r);
  double p = 0x1.27dc620b26975p-22;
  p = fma(p, r, 0x1.72da337e68f47p-19);
  p = fma(p, r, 0x1.a01a78f5dc9ebp-16);
  p = fma(p, r, 0x1.a0199c0abfeefp-13);
  p = fma(p, r, 0x1.6c16c135903e8p-10);
  p = fma(p, r, 0x1.1111112131dc0p-7);
  p = fma(p, r, 0x1.5555555564b32p-5);
  p = fma(p, r, 0x1.5555555552270p-3);
  p = fma(p, r, 0x1.fffffffffffbfp-2);
  *scale = accel_bits_f64((accel_f64_bits(kd) - accel_f64_bits(shift) + 1023) << 52);
  return fma(p * r, r, r);
}
/* e^y in f64 for the f32 functions (exp, sigmoid): 2^k (1 + q) in one rounding */
ACCEL_FN double accel_exp_for_f32(double y) {
  double s;
  const double q = accel_expm1_reduced(y, &s);
  return fma(s, q, s);
}
/* x taken as -200 below it (the result rounds to +0 there); above 100 (where it is infinite) the
 * value computed is replaced, as is a NaN's: the polynomial's value for such an x is no number to
 * keep, but computing it costs nothing, where a second clamp of the argument costs a select of
 * each f64 half (GCC merges the two clamps and the conversion into compares and masked blends):
 * one select of the f32 result instead made softmax's row kernel 5-12% faster and a loop of exp
 * 13% (AVX-512) to 17% (AVX2), the same bits for every f32 but a signaling NaN, which comes back
 * quiet, as from the C library's exp (swept over all 2^32). x * inf: +inf above 100, x's NaN for
 * a NaN. */
ACCEL_FN float accel_f32_exp(float x) {
  const float v = (float)accel_exp_for_f32((double)ACCEL_F32_EXP_ARG(x));
  return x <= 100.0f ? v : x * (1.0f / 0.0f);
}
/* tanh(|x|) = e / (e + 2), e = expm1(2|x|) = 2^k q + (2^k - 1) in one rounding (no cancellation:
 * for k >= 1, e >= 0.41), x's sign copied on; |x| clamped at 10, where tanh rounds to 1; below
 * 2^-13 tanh(x) rounds to x itself (-0 too), and a NaN (which the clamp made 10) is x: one compare
 * for both (5-10% faster than two and the selects of the sign, the same bits for every f32). */
ACCEL_FN float accel_f32_tanh(float x) {
  const float a = ACCEL_F32(fabs)(x);
  double s;
  const double q = accel_expm1_reduced(2.0 * (double)(a < 10.0f ? a : 10.0f), &s);
  const double e = fma(s, q, s - 1.0);
  const float t = (float)(e / (e + 2.0));
  return a >= 0x1p-13f ? ACCEL_F32(copysign)(t, x) : x;
}
#else
#define ACCEL_OWN_F32_EXP 0
ACCEL_FN float accel_f32_exp(float x) { return ACCEL_F32_VIA_F64(exp, ACCEL_F32_EXP_ARG(x)); }
ACCEL_FN float accel_f32_tanh(float x) { return ACCEL_F32_VIA_F64(tanh, x); }
#endif
ACCEL_FN float accel_f32_log(float x) { return ACCEL_F32_VIA_F64(log, x); }
ACCEL_FN float accel_f32_sqrt(float x) { return ACCEL_F32(sqrt)(x); }
#if ACCEL_HAS_F64
#if !ACCEL_OWN_F32_EXP
ACCEL_FN double accel_exp_for_f32(double y) { return ACCEL_NAN_PASSES(ACCEL_F32_LIBM(exp)(y), y); }
#endif
/* 1 / (1 + e^-x) in f64 (x clamped to +-200), e^-x Accel's above where it has its own: for every
 * one of the 2^32 f32 inputs, the bits of that formula with glibc's scalar exp, rounded (swept at
 * x86-64-v3 and v4), without libmvec's call: 2^21 elements on one thread 1.9-2.2 ms against 2.6-2.8. */
ACCEL_FN float accel_f32_sigmoid(float x) {
#if ACCEL_OWN_F32_EXP
  /* (above 200 the result is 1: selected, as accel_f32_exp selects, rather than clamped: 7% (AVX-512)
   * to 21% (AVX2) faster, the same bits for every f32) */
  const float v = (float)(1.0 / (1.0 + accel_exp_for_f32(-(double)ACCEL_F32_EXP_ARG(x))));
  return x > 200.0f ? 1.0f : v;
#else
  const float a = x > 200.0f ? 200.0f : ACCEL_F32_EXP_ARG(x);
  return (float)(1.0 / (1.0 + accel_exp_for_f32(-(double)a)));
#endif
}
ACCEL_FN float accel_f32_rsqrt(float x) { return (float)(1.0 / sqrt((double)x)); }
/* b == 2: the product, which is what the exact square rounded once gives (the square of a float
 * fits a double exactly); a device's pow(double) need not be exact there (CUDA's and NVIDIA
 * OpenCL's were an ulp off on squares that are f32 rounding ties), and Accel.Nx.Compiler computes
 * x ** 2 as x * x. */
ACCEL_FN float accel_f32_pow(float a, float b) {
  return b == 2.0f ? a * a : (float)ACCEL_F32_LIBM(pow)((double)a, (double)b);
}
ACCEL_FN float accel_f32_atan2(float a, float b) { return (float)ACCEL_F32_LIBM(atan2)((double)a, (double)b); }
#else
ACCEL_FN float accel_f32_sigmoid(float x) { return ACCEL_NAN_PASSES(1.0f / (1.0f + ACCEL_F32(exp)(-x)), x); }
ACCEL_FN float accel_f32_rsqrt(float x) { return 1.0f / ACCEL_F32(sqrt)(x); }
ACCEL_FN float accel_f32_pow(float a, float b) { return b == 2.0f ? a * a : ACCEL_F32(pow)(a, b); }
ACCEL_FN float accel_f32_atan2(float a, float b) { return ACCEL_F32(atan2)(a, b); }
#endif
ACCEL_FN float accel_f32_floor(float x) { return ACCEL_F32(floor)(x); }
ACCEL_FN float accel_f32_ceil(float x) { return ACCEL_F32(ceil)(x); }
ACCEL_FN float accel_f32_round(float x) { return ACCEL_F32(round)(x); }
ACCEL_FN float accel_f32_sign(float x) { return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x; }
ACCEL_FN float accel_f32_expm1(float x) { return ACCEL_F32_VIA_F64(expm1, x); }
ACCEL_FN float accel_f32_log1p(float x) { return ACCEL_F32_VIA_F64(log1p, x); }
ACCEL_FN float accel_f32_sin(float x) { return ACCEL_F32_VIA_F64(sin, x); }
ACCEL_FN float accel_f32_cos(float x) { return ACCEL_F32_VIA_F64(cos, x); }
ACCEL_FN float accel_f32_tan(float x) { return ACCEL_F32_VIA_F64(tan, x); }
ACCEL_FN float accel_f32_asin(float x) { return ACCEL_F32_VIA_F64(asin, x); }
ACCEL_FN float accel_f32_acos(float x) { return ACCEL_F32_VIA_F64(acos, x); }
ACCEL_FN float accel_f32_atan(float x) { return ACCEL_F32_VIA_F64(atan, x); }
ACCEL_FN float accel_f32_sinh(float x) { return ACCEL_F32_VIA_F64(sinh, x); }
ACCEL_FN float accel_f32_cosh(float x) { return ACCEL_F32_VIA_F64(cosh, x); }
ACCEL_FN float accel_f32_asinh(float x) { return ACCEL_F32_VIA_F64(asinh, x); }
ACCEL_FN float accel_f32_acosh(float x) { return ACCEL_F32_VIA_F64(acosh, x); }
ACCEL_FN float accel_f32_atanh(float x) { return ACCEL_F32_VIA_F64(atanh, x); }
ACCEL_FN float accel_f32_cbrt(float x) { return ACCEL_F32_VIA_F64(cbrt, x); }
ACCEL_FN float accel_f32_erf(float x) { return ACCEL_F32_VIA_F64(erf, x); }
ACCEL_FN float accel_f32_erfc(float x) { return ACCEL_F32_VIA_F64(erfc, x); }
/* Giles' approximation ("Approximating the erfinv function", 2010), in R: what Nx computes (in
 * Elixir floats, then rounded to the type). NaN outside [-1, 1] and for NaN. Both polynomials are
 * computed and one chosen, with no branch, so that a loop over elements vectorises (the tail's
 * sqrt of an infinite w at +-1 is discarded by the last choice). The infinities at +-1 are
 * constants, not 1 / 0: a division that may trap is not speculated, and would keep the loop scalar. */
#define ACCEL_INF_F32 accel_bits_f32(0x7F800000u)
#define ACCEL_INF_F64 accel_bits_f64(0x7FF0000000000000ull)
#define ACCEL_ERF_INV(R, LOG, SQRT, INF, z)                                                          \
  {                                                                                                \
    const R w = -LOG(((R)1 - z) * ((R)1 + z));                                                     \
    const R v = w - (R)2.5;                                                                        \
    R p = (R)2.81022636e-08;                                                                       \
    p = p * v + (R)3.43273939e-07;                                                                 \
    p = p * v + (R)-3.5233877e-06;                                                                 \
    p = p * v + (R)-4.39150654e-06;                                                                \
    p = p * v + (R)0.00021858087;                                                                  \
    p = p * v + (R)-0.00125372503;                                                                 \
    p = p * v + (R)-0.00417768164;                                                                 \
    p = p * v + (R)0.246640727;                                                                    \
    p = p * v + (R)1.50140941;                                                                     \
    const R t = SQRT(w) - (R)3;                                                                    \
    R q = (R)-0.000200214257;                                                                      \
    q = q * t + (R)0.000100950558;                                                                 \
    q = q * t + (R)0.00134934322;                                                                  \
    q = q * t + (R)-0.00367342844;                                                                 \
    q = q * t + (R)0.00573950773;                                                                  \
    q = q * t + (R)-0.0076224613;                                                                  \
    q = q * t + (R)0.00943887047;                                                                  \
    q = q * t + (R)1.00167406;                                                                     \
    q = q * t + (R)2.83297682;                                                                     \
    const R r = (w < (R)5 ? p : q) * z;                                                            \
    return z == (R)1 ? INF : z == (R)-1 ? -INF : r;                                                \
  }
#if ACCEL_HAS_F64
ACCEL_FN double accel_erf_inv_f64(double z) ACCEL_ERF_INV(double, log, sqrt, ACCEL_INF_F64, z)
/* the f32 function's log may be a SIMD variant (ACCEL_F32_LIBM: f32's rounding hides its ulps) */
ACCEL_FN double accel_erf_inv_for_f32(double z) ACCEL_ERF_INV(double, ACCEL_F32_LIBM(log), sqrt, ACCEL_INF_F64, z)
ACCEL_FN float accel_f32_erf_inv(float x) { return (float)accel_erf_inv_for_f32((double)x); }
#else
ACCEL_FN float accel_f32_erf_inv(float z) ACCEL_ERF_INV(float, ACCEL_F32(log), ACCEL_F32(sqrt), ACCEL_INF_F32, z)
#endif
ACCEL_FN float accel_f32_add(float a, float b) { return a + b; }
ACCEL_FN float accel_f32_subtract(float a, float b) { return a - b; }
ACCEL_FN float accel_f32_multiply(float a, float b) { return a * b; }
ACCEL_FN float accel_f32_divide(float a, float b) { return a / b; }
ACCEL_FN float accel_f32_remainder(float a, float b) { return ACCEL_F32(fmod)(a, b); }
ACCEL_FN float accel_f32_min(float a, float b) { return a != a ? a : b != b ? b : b < a ? b : a; }
ACCEL_FN float accel_f32_max(float a, float b) { return a != a ? a : b != b ? b : b > a ? b : a; }

/* ---- f32, approximate (Accel.Nx.Compiler's `math: :fast`) ----
 * exp, sigmoid and tanh as XLA computes them: in single precision, within 1 ulp (exp, tanh) and 2
 * ulps (sigmoid) of the exact result rounded (swept in c_src/test/host_math_test.cpp), about 3x
 * faster than the f64 functions rounded once above, since a loop over them vectorises 8 lanes wide
 * with no call. On OpenCL and CUDA, the device's own single-precision functions. */
#if defined(__OPENCL_VERSION__) || defined(__CUDACC__)
ACCEL_FN float accel_f32_exp_fast(float x) { return ACCEL_NAN_PASSES(ACCEL_F32(exp)(x), x); }
ACCEL_FN float accel_f32_tanh_fast(float x) { return ACCEL_NAN_PASSES(ACCEL_F32(tanh)(x), x); }
#else
/* x = k ln2 + r (|r| <= ln2 / 2, ln2 in two parts), exp(r) = 1 + r + r^2 g(r) with g of degree 4
 * (fitted at Chebyshev nodes: 6.5e-8 off g), times 2^k in two steps (so that 2^128 and the
 * subnormal results need no case of their own); x taken as -104 below it (the result rounds to
 * 0), and the result above 89 (infinite) and for NaN selected as x times infinity, as the exact
 * exp above does: one clamp and one select, 15% (AVX-512) to 20% (AVX2) faster than clamping on
 * both sides, the same bits for every f32 but a signaling NaN, which comes back quiet. */
ACCEL_FN float accel_f32_exp_fast(float x) {
  const float xc = x < -104.0f ? -104.0f : x;
  const float shift = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
  const float kd = ACCEL_F32(fma)(xc, 1.44269504f, shift);
  const float k = kd - shift;
  float r = ACCEL_F32(fma)(k, -0.693145752f, xc);
  r = ACCEL_F32(fma)(k, -1.42860677e-6f, r);
  float g = ACCEL_F32(fma)(1.392618359e-3f, r, 8.363179053e-3f);
  g = ACCEL_F32(fma)(g, r, 4.166655462e-2f);
  g = ACCEL_F32(fma)(g, r, 1.666657699e-1f);
  g = ACCEL_F32(fma)(g, r, 0.5f);
  const float p = 1.0f + ACCEL_F32(fma)(r * r, g, r);
  const accel_i32 ki = (accel_i32)(accel_f32_bits(kd) - accel_f32_bits(shift));
  const accel_i32 k1 = ki >> 1, k2 = ki - k1;
  const float y = p * accel_bits_f32((accel_u32)(k1 + 127) << 23) * accel_bits_f32((accel_u32)(k2 + 127) << 23);
  return x <= 89.0f ? y : x * (1.0f / 0.0f);
}
/* |x| + |x|^3 P(x^2) below 0.625 (P of degree 4: 4.3e-8 off), 1 - 2 / (exp(2|x|) + 1) from there
 * (where 1 - ... loses at most a bit), x's sign put back (tanh(-0) is -0). */
ACCEL_FN float accel_f32_tanh_fast(float x) {
  const float a = accel_f32_abs(x), u = x * x;
  float q = ACCEL_F32(fma)(-6.096714166e-3f, u, 2.099717900e-2f);
  q = ACCEL_F32(fma)(q, u, -5.385090958e-2f);
  q = ACCEL_F32(fma)(q, u, 1.333276974e-1f);
  q = ACCEL_F32(fma)(q, u, -3.333332894e-1f);
  const float small = ACCEL_F32(fma)(a * u, q, a);
  const float big = 1.0f - 2.0f / (accel_f32_exp_fast(2.0f * a) + 1.0f);
  return accel_bits_f32(accel_f32_bits(a < 0.625f ? small : big) | (accel_f32_bits(x) & 0x80000000u));
}
#endif
/* e = exp(-|x|): 1 / (1 + e) or e / (1 + e), so that exp(-x) never overflows for x far below 0 */
ACCEL_FN float accel_f32_sigmoid_fast(float x) {
  const float e = accel_f32_exp_fast(-accel_f32_abs(x));
  return (x < 0.0f ? e : 1.0f) / (1.0f + e);
}

#if ACCEL_HAS_F64
/* ---- f64 ---- */
ACCEL_FN double accel_f64_negate(double x) { return -x; }
ACCEL_FN double accel_f64_abs(double x) { return fabs(x); }
ACCEL_FN double accel_f64_exp(double x) { return ACCEL_NAN_PASSES(exp(x), x); }
ACCEL_FN double accel_f64_log(double x) { return ACCEL_NAN_PASSES(log(x), x); }
ACCEL_FN double accel_f64_sqrt(double x) { return sqrt(x); }
ACCEL_FN double accel_f64_tanh(double x) { return ACCEL_NAN_PASSES(tanh(x), x); }
ACCEL_FN double accel_f64_sigmoid(double x) { return ACCEL_NAN_PASSES(1.0 / (1.0 + exp(-x)), x); }
ACCEL_FN double accel_f64_floor(double x) { return floor(x); }
ACCEL_FN double accel_f64_ceil(double x) { return ceil(x); }
ACCEL_FN double accel_f64_round(double x) { return round(x); }
ACCEL_FN double accel_f64_sign(double x) { return x > 0.0 ? 1.0 : x < 0.0 ? -1.0 : x; }
ACCEL_FN double accel_f64_expm1(double x) { return ACCEL_NAN_PASSES(expm1(x), x); }
ACCEL_FN double accel_f64_log1p(double x) { return ACCEL_NAN_PASSES(log1p(x), x); }
ACCEL_FN double accel_f64_sin(double x) { return ACCEL_NAN_PASSES(sin(x), x); }
ACCEL_FN double accel_f64_cos(double x) { return ACCEL_NAN_PASSES(cos(x), x); }
ACCEL_FN double accel_f64_tan(double x) { return ACCEL_NAN_PASSES(tan(x), x); }
ACCEL_FN double accel_f64_asin(double x) { return ACCEL_NAN_PASSES(asin(x), x); }
ACCEL_FN double accel_f64_acos(double x) { return ACCEL_NAN_PASSES(acos(x), x); }
ACCEL_FN double accel_f64_atan(double x) { return ACCEL_NAN_PASSES(atan(x), x); }
ACCEL_FN double accel_f64_sinh(double x) { return ACCEL_NAN_PASSES(sinh(x), x); }
ACCEL_FN double accel_f64_cosh(double x) { return ACCEL_NAN_PASSES(cosh(x), x); }
ACCEL_FN double accel_f64_asinh(double x) { return ACCEL_NAN_PASSES(asinh(x), x); }
ACCEL_FN double accel_f64_acosh(double x) { return ACCEL_NAN_PASSES(acosh(x), x); }
ACCEL_FN double accel_f64_atanh(double x) { return ACCEL_NAN_PASSES(atanh(x), x); }
ACCEL_FN double accel_f64_cbrt(double x) { return ACCEL_NAN_PASSES(cbrt(x), x); }
ACCEL_FN double accel_f64_erf(double x) { return ACCEL_NAN_PASSES(erf(x), x); }
ACCEL_FN double accel_f64_erfc(double x) { return ACCEL_NAN_PASSES(erfc(x), x); }
ACCEL_FN double accel_f64_erf_inv(double x) { return accel_erf_inv_f64(x); }
ACCEL_FN double accel_f64_rsqrt(double x) { return 1.0 / sqrt(x); }
ACCEL_FN double accel_f64_add(double a, double b) { return a + b; }
ACCEL_FN double accel_f64_subtract(double a, double b) { return a - b; }
ACCEL_FN double accel_f64_multiply(double a, double b) { return a * b; }
ACCEL_FN double accel_f64_divide(double a, double b) { return a / b; }
ACCEL_FN double accel_f64_remainder(double a, double b) { return fmod(a, b); }
ACCEL_FN double accel_f64_pow(double a, double b) { return pow(a, b); }
ACCEL_FN double accel_f64_min(double a, double b) { return a != a ? a : b != b ? b : b < a ? b : a; }
ACCEL_FN double accel_f64_max(double a, double b) { return a != a ? a : b != b ? b : b > a ? b : a; }
ACCEL_FN double accel_f64_atan2(double a, double b) { return atan2(a, b); }
#endif

/* ---- comparisons, for any element type: 1 when true ---- */
#define ACCEL_COMPARE_BODY_equal(a, b) ((a) == (b))
#define ACCEL_COMPARE_BODY_not_equal(a, b) ((a) != (b))
#define ACCEL_COMPARE_BODY_less(a, b) ((a) < (b))
#define ACCEL_COMPARE_BODY_less_equal(a, b) ((a) <= (b))
#define ACCEL_COMPARE_BODY_greater(a, b) ((a) > (b))
#define ACCEL_COMPARE_BODY_greater_equal(a, b) ((a) >= (b))
#define ACCEL_COMPARE_BODY_logical_and(a, b) ((a) != 0 && (b) != 0)
#define ACCEL_COMPARE_BODY_logical_or(a, b) ((a) != 0 || (b) != 0)
#define ACCEL_COMPARE_BODY_logical_xor(a, b) (((a) != 0) != ((b) != 0))

/* ---- dispatch by operation code, generated from the registry (ops.h) ---- */
#define ACCEL_INT_UNARY_CASE(name, types, doc) ACCEL_TAKES_INT_##types(if (op == ACCEL_UNARY_##name) return accel_int_##name(x);)
#define ACCEL_F32_UNARY_CASE(name, types, doc) ACCEL_TAKES_FLOAT_##types(if (op == ACCEL_UNARY_##name) return accel_f32_##name(x);)
#define ACCEL_F64_UNARY_CASE(name, types, doc) ACCEL_TAKES_FLOAT_##types(if (op == ACCEL_UNARY_##name) return accel_f64_##name(x);)
#define ACCEL_INT_BINARY_CASE(name, types, doc) \
  ACCEL_TAKES_INT_##types(if (op == ACCEL_BINARY_##name) return accel_int_##name(a, b, flag);)
#define ACCEL_F32_BINARY_CASE(name, types, doc) ACCEL_TAKES_FLOAT_##types(if (op == ACCEL_BINARY_##name) return accel_f32_##name(a, b);)
#define ACCEL_F64_BINARY_CASE(name, types, doc) ACCEL_TAKES_FLOAT_##types(if (op == ACCEL_BINARY_##name) return accel_f64_##name(a, b);)

ACCEL_FN accel_i64 accel_int_unary(int op, accel_i64 x) {
  ACCEL_UNARY_OPS(ACCEL_INT_UNARY_CASE)
  return 0;
}
ACCEL_FN accel_i64 accel_int_binary(int op, accel_i64 a, accel_i64 b, int* flag) {
  ACCEL_BINARY_OPS(ACCEL_INT_BINARY_CASE)
  return 0;
}
/* ---- u64: the int family's bits, but unsigned where the sign matters ---- */
ACCEL_FN accel_u64 accel_uint_unary(int op, accel_u64 x) {
  if (op == ACCEL_UNARY_abs) return x;
  if (op == ACCEL_UNARY_sign) return x != 0;
  return (accel_u64)accel_int_unary(op, (accel_i64)x); /* negate wraps, the rest are bit operations */
}
ACCEL_FN accel_u64 accel_uint_binary(int op, accel_u64 a, accel_u64 b, int* flag) {
  if (op == ACCEL_BINARY_divide || op == ACCEL_BINARY_quotient || op == ACCEL_BINARY_remainder) {
    if (b == 0) {
      *flag = ACCEL_FLAG_ZERO_DIVISOR;
      return 0;
    }
    return op == ACCEL_BINARY_remainder ? a % b : a / b;
  }
  if (op == ACCEL_BINARY_min) return b < a ? b : a;
  if (op == ACCEL_BINARY_max) return b > a ? b : a;
  if (op == ACCEL_BINARY_left_shift) return b >= 64 ? 0 : a << b;
  if (op == ACCEL_BINARY_right_shift) return b >= 64 ? 0 : a >> b;
  if (op == ACCEL_BINARY_pow) {
    accel_u64 result = 1, base = a, e = b; /* no exponent is negative */
    while (e != 0) {
      if (e & 1) result *= base;
      base *= base;
      e >>= 1;
    }
    return result;
  }
  return (accel_u64)accel_int_binary(op, (accel_i64)a, (accel_i64)b, flag); /* wrapping arithmetic, bits */
}
ACCEL_FN accel_u64 accel_uint_pick(int op, accel_u64 acc, accel_u64 x) {
  return (op == ACCEL_REDUCE_MIN ? x < acc : x > acc) ? x : acc;
}

ACCEL_FN float accel_f32_unary(int op, float x) {
  ACCEL_UNARY_OPS(ACCEL_F32_UNARY_CASE)
  return 0;
}
ACCEL_FN float accel_f32_binary(int op, float a, float b) {
  ACCEL_BINARY_OPS(ACCEL_F32_BINARY_CASE)
  return 0;
}
#if ACCEL_HAS_F64
ACCEL_FN double accel_f64_unary(int op, double x) {
  ACCEL_UNARY_OPS(ACCEL_F64_UNARY_CASE)
  return 0;
}
ACCEL_FN double accel_f64_binary(int op, double a, double b) {
  ACCEL_BINARY_OPS(ACCEL_F64_BINARY_CASE)
  return 0;
}
#endif

/* ---- conversions and the reductions' picks ---- */
/* An integer type's bounds as floats: the least value, and the first value above the greatest (a
 * power of two, exact in float and double, so no comparison rounds). */
ACCEL_FN float accel_int_low(int type) {
  return type == ACCEL_S64_TYPE ? -9223372036854775808.0f
         : type == ACCEL_S32_TYPE ? -2147483648.0f
         : type == ACCEL_S16_TYPE ? -32768.0f
         : type == ACCEL_S8_TYPE ? -128.0f
         : type == ACCEL_S4_TYPE ? -8.0f
         : type == ACCEL_S2_TYPE ? -2.0f
                                 : 0.0f;
}
ACCEL_FN float accel_int_high(int type) {
  return type == ACCEL_S64_TYPE ? 9223372036854775808.0f
         : type == ACCEL_U64_TYPE ? 18446744073709551616.0f
         : type == ACCEL_S32_TYPE ? 2147483648.0f
         : type == ACCEL_U32_TYPE ? 4294967296.0f
         : type == ACCEL_S16_TYPE ? 32768.0f
         : type == ACCEL_U16_TYPE ? 65536.0f
         : type == ACCEL_S8_TYPE ? 128.0f
         : type == ACCEL_S4_TYPE ? 8.0f
         : type == ACCEL_U4_TYPE ? 16.0f
         : type == ACCEL_S2_TYPE ? 2.0f
         : type == ACCEL_U2_TYPE ? 4.0f
                                 : 256.0f;
}
/* The integer type's greatest value, as the 64-bit pattern a store truncates. */
ACCEL_FN accel_i64 accel_int_greatest(int type) {
  return type == ACCEL_S64_TYPE ? (accel_i64)0x7fffffffffffffffLL
         : type == ACCEL_U64_TYPE ? (accel_i64)-1
         : type == ACCEL_S32_TYPE ? (accel_i64)2147483647
         : type == ACCEL_U32_TYPE ? (accel_i64)4294967295LL
         : type == ACCEL_S16_TYPE ? (accel_i64)32767
         : type == ACCEL_U16_TYPE ? (accel_i64)65535
         : type == ACCEL_S8_TYPE ? (accel_i64)127
         : type == ACCEL_S4_TYPE ? (accel_i64)7
         : type == ACCEL_U4_TYPE ? (accel_i64)15
         : type == ACCEL_S2_TYPE ? (accel_i64)1
         : type == ACCEL_U2_TYPE ? (accel_i64)3
                                 : (accel_i64)255;
}

/* Truncates toward zero, saturating at the integer type's range; NaN becomes 0. The result is the
 * value's 64-bit pattern (u64 values above 2^63 too), which the store truncates to the type. */
ACCEL_FN accel_i64 accel_f32_to_int(float x, int type) {
  if (x != x) return 0;
  if (x >= accel_int_high(type)) return accel_int_greatest(type);
  if (x <= accel_int_low(type)) return (accel_i64)accel_int_low(type);
  if (type == ACCEL_U64_TYPE && x >= 9223372036854775808.0f) return (accel_i64)(accel_u64)x;
  return (accel_i64)x;
}

#if ACCEL_HAS_F64
ACCEL_FN accel_i64 accel_f64_to_int(double x, int type) {
  if (x != x) return 0;
  if (x >= (double)accel_int_high(type)) return accel_int_greatest(type);
  if (x <= (double)accel_int_low(type)) return (accel_i64)accel_int_low(type);
  if (type == ACCEL_U64_TYPE && x >= 9223372036854775808.0) return (accel_i64)(accel_u64)x;
  return (accel_i64)x;
}
#endif

/* ---- 16-bit floats: f16 (IEEE half) and bf16 (as Nx stores it) ---- */
ACCEL_FN float accel_f16_to_f32(accel_u32 h) {
  const accel_u32 sign = (h & 0x8000u) << 16;
  const accel_u32 e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0x1Fu) return accel_bits_f32(sign | 0x7F800000u | (m << 13)); /* infinities, NaN */
  if (e != 0) return accel_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
  /* zero or a subnormal: m * 2^-24, exact in f32 (no loop, so that a loop over elements vectorises) */
  const float subnormal = (float)m * 5.9604644775390625e-8f;
  return sign != 0 ? -subnormal : subnormal;
}

/* The f16 nearest (ties to even) to the finite, non-zero (-1)^sign * m * 2^(e - mbits), m having its
 * leading 1 at bit mbits: the exponent field and the kept bits add up (a carry rounds into the next
 * binade, or to infinity). */
ACCEL_FN accel_u32 accel_round_f16(accel_u32 sign, int e, accel_u64 m, int mbits) {
  if (e > 15) return sign | 0x7C00u;
  const int shift = mbits - 10 + (e < -14 ? -14 - e : 0);
  if (shift >= 64) return sign;
  accel_u32 h = (e >= -14 ? (accel_u32)(e + 14) << 10 : 0u) + (accel_u32)(m >> shift);
  if (shift > 0) {
    const accel_u64 rest = m & (((accel_u64)1 << shift) - 1), halfway = (accel_u64)1 << (shift - 1);
    if (rest > halfway || (rest == halfway && (h & 1u))) ++h;
  }
  return sign | h;
}

/* (Without a branch on the exponent's range, so that a loop over elements vectorises: where the
 * f16 is a normal number the f32's bits are rebiased and rounded by an add, ties to the even
 * neighbour; below f16's normals an add of 2^-1 (aligning the f16's subnormal bits at the bottom
 * of a float) rounds in the FPU, to nearest even as every Accel device rounds; from 65520 up,
 * infinity.) */
ACCEL_FN accel_u32 accel_f32_to_f16(float x) {
  const accel_u32 bits = accel_f32_bits(x), sign = (bits >> 16) & 0x8000u, mag = bits & 0x7FFFFFFFu;
  const accel_u32 normal = (mag - ((127u - 15u) << 23) + 0xFFFu + ((mag >> 13) & 1u)) >> 13;
  const accel_u32 subnormal = accel_f32_bits(accel_bits_f32(mag) + 0.5f) - 0x3F000000u;
  const accel_u32 h = mag >= 0x47800000u ? (mag > 0x7F800000u ? 0x7E00u : 0x7C00u) /* NaN, beyond 65520 */
                      : mag < 0x38800000u ? subnormal                               /* below 2^-14 */
                                          : normal;
  return sign | h;
}

/* bf16 as Nx writes it: the f32 value's high half (NaN kept a NaN). */
ACCEL_FN accel_u32 accel_f32_to_bf16(float x) {
  const accel_u32 bits = accel_f32_bits(x);
  return x != x ? ((bits >> 16) & 0x8000u) | 0x7FC0u : bits >> 16;
}

#if ACCEL_HAS_F64
ACCEL_FN accel_u32 accel_f64_to_f16(double x) {
  const accel_u64 bits = accel_f64_bits(x);
  const accel_u32 sign = (accel_u32)(bits >> 48) & 0x8000u;
  const int e = (int)((bits >> 52) & 0x7FF);
  const accel_u64 m = bits & 0xFFFFFFFFFFFFFull;
  if (e == 0x7FF) return sign | 0x7C00u | (m ? 0x200u : 0u);
  if (e == 0) return sign;
  return accel_round_f16(sign, e - 1023, m | 0x10000000000000ull, 52);
}
#endif

/* ---- 8-bit floats (Nx 0.9+) ----
 * f8 (E5M2) as Nx writes it: the high byte of the value's f16 (rounded to nearest even, then the
 * low byte dropped), read as that f16 with a zero low byte (IEEE E5M2: its subnormals included). */
ACCEL_FN float accel_f8_to_f32(accel_u32 b) { return accel_f16_to_f32((b & 0xFFu) << 8); }
ACCEL_FN accel_u32 accel_f32_to_f8(float x) { return accel_f32_to_f16(x) >> 8; }

/* f8_e4m3fn (sign, 4 exponent bits biased by 7, 3 mantissa bits; S.1111.111 is NaN and there are no
 * infinities) as Nx's Nx.Floating writes it: the value clamped to +-448, its exponent floor(log2),
 * the mantissa rounded half away from zero and capped at 7 (no carry into the exponent), below
 * 2^-6 a subnormal; infinities saturate, NaN is 0x7F. */
ACCEL_FN float accel_f8e4m3_to_f32(accel_u32 b) {
  const float sign = (b & 0x80u) ? -1.0f : 1.0f;
  const int e = (int)((b >> 3) & 0xFu), m = (int)(b & 7u);
  if (e == 15 && m == 7) return sign * (0.0f / 0.0f);
  if (e == 0) return sign * (float)m * 0.001953125f; /* m / 8 * 2^-6 */
  const float scale = e >= 7 ? (float)(1 << (e - 7)) : 1.0f / (float)(1 << (7 - e));
  return sign * scale * (1.0f + (float)m * 0.125f);
}
/* The same from a float's bits: its exponent is floor(log2) exactly (a float's log2 never rounds
 * up to the next integer), the mantissa rounds as (m + 2^19) >> 20. */
ACCEL_FN accel_u32 accel_f32_to_f8e4m3(float x) {
  const accel_u32 bits = accel_f32_bits(x), sign = (bits >> 24) & 0x80u;
  accel_u32 mag = bits & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return 0x7Fu;     /* NaN */
  if (mag > 0x43E00000u) mag = 0x43E00000u; /* beyond 448, infinities too: 448 */
  const int e = (int)(mag >> 23) - 120;     /* 127 less E4M3's bias, 7 */
  if (e <= 0) { /* below 2^-6: m = round(|x| * 512) (below 8 here), at most 7 */
#if ACCEL_HAS_F64
    const accel_u32 m = (accel_u32)((double)accel_bits_f32(mag) * 512.0 + 0.5);
#else
    const accel_u32 m = (accel_u32)ACCEL_F32(floor)(accel_bits_f32(mag) * 512.0f + 0.5f);
#endif
    return sign | (m > 7u ? 7u : m);
  }
  const accel_u32 m = ((mag & 0x7FFFFFu) + 0x80000u) >> 20;
  return sign | (accel_u32)e << 3 | (m > 7u ? 7u : m);
}
#if ACCEL_HAS_F64
typedef double accel_f8_float;
#define ACCEL_F8_FN(fn) fn
#else
typedef float accel_f8_float;
#define ACCEL_F8_FN(fn) ACCEL_F32(fn)
#endif
ACCEL_FN accel_u32 accel_to_f8e4m3(accel_f8_float x) {
  if ((accel_f8_float)(float)x == x) return accel_f32_to_f8e4m3((float)x);
  if (x != x) return 0x7Fu;
  if (x == 0) return accel_f32_bits((float)x) >> 24 & 0x80u; /* the zero's sign */
  const accel_u32 sign = x < 0 ? 0x80u : 0u;
  accel_f8_float a = x < 0 ? -x : x;
  if (a > 448) a = 448;
  const int unbiased = (int)ACCEL_F8_FN(floor)(ACCEL_F8_FN(log2)(a));
  const int e = unbiased + 7;
  if (e <= 0) {
    const accel_f8_float m = ACCEL_F8_FN(round)(a / (accel_f8_float)0.015625 * 8);
    return sign | (accel_u32)(m > 7 ? 7 : m);
  }
  if (e > 15) return sign | 0x7Eu;
  const accel_f8_float power = ACCEL_F8_FN(pow)((accel_f8_float)2, (accel_f8_float)unbiased);
  accel_f8_float m = ACCEL_F8_FN(round)((a / power - 1) * 8);
  m = m < 0 ? 0 : m > 7 ? 7 : m;
  if (e == 15 && m >= 7) return sign | 0x7Eu;
  return sign | (accel_u32)e << 3 | (accel_u32)m;
}

/* NaN-propagating min and max: once a NaN is seen, the result stays NaN. The comparison's choice
 * comes first, in the form x86's max and min instructions compute (no branch to mispredict on
 * data: a 2 x 2 max-pool's windows took 1.6 ms over 401,408 f32 with the branch), NaN (rare, so
 * well predicted) after it. */
ACCEL_FN float accel_f32_pick(int op, float acc, float x) {
  const float m = (op == ACCEL_REDUCE_MIN ? x < acc : x > acc) ? x : acc;
  return x != x ? x : m;
}

ACCEL_FN accel_i64 accel_int_pick(int op, accel_i64 acc, accel_i64 x) {
  return (op == ACCEL_REDUCE_MIN ? x < acc : x > acc) ? x : acc;
}

#if ACCEL_HAS_F64
ACCEL_FN double accel_f64_pick(int op, double acc, double x) {
  const double m = (op == ACCEL_REDUCE_MIN ? x < acc : x > acc) ? x : acc;
  return x != x ? x : m;
}
#endif

#endif /* ACCEL_KERNELS_TENSOR_H */
