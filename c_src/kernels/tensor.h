/* The per-element math of the tensor operations, written once in the common subset of C++17, CUDA
 * C++ and OpenCL C (see dialect.h): one body per operation (registered in ops.h) and element family
 * (int: any integer type, widened to 64 bits; f32; f64), the dispatch from an operation code to its
 * body (generated from the registry), conversions, and the NaN-propagating min/max of reductions.
 * How elements are indexed is tensor_kernels.h's business; what one element becomes is decided
 * here, so every backend computes the same values.
 *
 * Semantics (documented for users in Accel.Tensor):
 *  - Integer operations are computed on 64-bit values and truncated by the store, which gives the
 *    same wrap-around for s32 and u8 as computing in their own width (two's complement, like Nx).
 *    Division truncates toward zero (Elixir's div/2 and rem/2); MIN / -1 wraps to MIN; a zero divisor
 *    or a negative integer exponent yields 0 here and raises a flag the host turns into an error.
 *  - Float operations are IEEE single or double precision; exp/log/tanh may differ from the host
 *    C library by a few ulp on devices (see Accel.Tensor for the tolerances tests use).
 *  - Float to integer conversion truncates toward zero and saturates at the target's range; NaN
 *    becomes 0. Integer to integer conversion wraps. */
#ifndef ACCEL_KERNELS_TENSOR_H
#define ACCEL_KERNELS_TENSOR_H

#include "kernels/dialect.h"
#include "kernels/ops.h"

/* Element types: the values core/tensor.hpp uses. */
#define ACCEL_F32_TYPE 0
#define ACCEL_F64_TYPE 1
#define ACCEL_S64_TYPE 2
#define ACCEL_S32_TYPE 3
#define ACCEL_U8_TYPE 4

#define ACCEL_REDUCE_SUM 0
#define ACCEL_REDUCE_MIN 1
#define ACCEL_REDUCE_MAX 2
#define ACCEL_PICK_OPS 3

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
/* Shifts by n >= 64 are defined here (C leaves them undefined): everything shifted out. */
ACCEL_FN accel_i64 accel_shl(accel_i64 a, accel_u64 n) { return n >= 64 ? 0 : (accel_i64)((accel_u64)a << n); }
ACCEL_FN accel_i64 accel_shr(accel_i64 a, accel_u64 n) { return n >= 64 ? (a < 0 ? -1 : 0) : a >> n; }
ACCEL_FN accel_i64 accel_int_left_shift(accel_i64 a, accel_i64 b, int* flag) {
  (void)flag;
  return b >= 0 ? accel_shl(a, (accel_u64)b) : accel_shr(a, (accel_u64)0 - (accel_u64)b);
}
ACCEL_FN accel_i64 accel_int_right_shift(accel_i64 a, accel_i64 b, int* flag) {
  (void)flag;
  return b >= 0 ? accel_shr(a, (accel_u64)b) : accel_shl(a, (accel_u64)0 - (accel_u64)b);
}

/* ---- f32 ---- */
ACCEL_FN float accel_f32_negate(float x) { return -x; }
ACCEL_FN float accel_f32_abs(float x) { return ACCEL_F32(fabs)(x); }
ACCEL_FN float accel_f32_exp(float x) { return ACCEL_F32(exp)(x); }
ACCEL_FN float accel_f32_log(float x) { return ACCEL_F32(log)(x); }
ACCEL_FN float accel_f32_sqrt(float x) { return ACCEL_F32(sqrt)(x); }
ACCEL_FN float accel_f32_tanh(float x) { return ACCEL_F32(tanh)(x); }
ACCEL_FN float accel_f32_sigmoid(float x) { return 1.0f / (1.0f + ACCEL_F32(exp)(-x)); }
ACCEL_FN float accel_f32_floor(float x) { return ACCEL_F32(floor)(x); }
ACCEL_FN float accel_f32_ceil(float x) { return ACCEL_F32(ceil)(x); }
ACCEL_FN float accel_f32_round(float x) { return ACCEL_F32(round)(x); }
ACCEL_FN float accel_f32_sign(float x) { return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x; }
ACCEL_FN float accel_f32_expm1(float x) { return ACCEL_F32(expm1)(x); }
ACCEL_FN float accel_f32_log1p(float x) { return ACCEL_F32(log1p)(x); }
ACCEL_FN float accel_f32_sin(float x) { return ACCEL_F32(sin)(x); }
ACCEL_FN float accel_f32_cos(float x) { return ACCEL_F32(cos)(x); }
ACCEL_FN float accel_f32_tan(float x) { return ACCEL_F32(tan)(x); }
ACCEL_FN float accel_f32_asin(float x) { return ACCEL_F32(asin)(x); }
ACCEL_FN float accel_f32_acos(float x) { return ACCEL_F32(acos)(x); }
ACCEL_FN float accel_f32_atan(float x) { return ACCEL_F32(atan)(x); }
ACCEL_FN float accel_f32_sinh(float x) { return ACCEL_F32(sinh)(x); }
ACCEL_FN float accel_f32_cosh(float x) { return ACCEL_F32(cosh)(x); }
ACCEL_FN float accel_f32_asinh(float x) { return ACCEL_F32(asinh)(x); }
ACCEL_FN float accel_f32_acosh(float x) { return ACCEL_F32(acosh)(x); }
ACCEL_FN float accel_f32_atanh(float x) { return ACCEL_F32(atanh)(x); }
ACCEL_FN float accel_f32_cbrt(float x) { return ACCEL_F32(cbrt)(x); }
ACCEL_FN float accel_f32_erf(float x) { return ACCEL_F32(erf)(x); }
ACCEL_FN float accel_f32_erfc(float x) { return ACCEL_F32(erfc)(x); }
ACCEL_FN float accel_f32_rsqrt(float x) { return 1.0f / ACCEL_F32(sqrt)(x); }
ACCEL_FN float accel_f32_add(float a, float b) { return a + b; }
ACCEL_FN float accel_f32_subtract(float a, float b) { return a - b; }
ACCEL_FN float accel_f32_multiply(float a, float b) { return a * b; }
ACCEL_FN float accel_f32_divide(float a, float b) { return a / b; }
ACCEL_FN float accel_f32_remainder(float a, float b) { return ACCEL_F32(fmod)(a, b); }
ACCEL_FN float accel_f32_pow(float a, float b) { return ACCEL_F32(pow)(a, b); }
ACCEL_FN float accel_f32_min(float a, float b) { return a != a ? a : b != b ? b : b < a ? b : a; }
ACCEL_FN float accel_f32_max(float a, float b) { return a != a ? a : b != b ? b : b > a ? b : a; }
ACCEL_FN float accel_f32_atan2(float a, float b) { return ACCEL_F32(atan2)(a, b); }

#if ACCEL_HAS_F64
/* ---- f64 ---- */
ACCEL_FN double accel_f64_negate(double x) { return -x; }
ACCEL_FN double accel_f64_abs(double x) { return fabs(x); }
ACCEL_FN double accel_f64_exp(double x) { return exp(x); }
ACCEL_FN double accel_f64_log(double x) { return log(x); }
ACCEL_FN double accel_f64_sqrt(double x) { return sqrt(x); }
ACCEL_FN double accel_f64_tanh(double x) { return tanh(x); }
ACCEL_FN double accel_f64_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
ACCEL_FN double accel_f64_floor(double x) { return floor(x); }
ACCEL_FN double accel_f64_ceil(double x) { return ceil(x); }
ACCEL_FN double accel_f64_round(double x) { return round(x); }
ACCEL_FN double accel_f64_sign(double x) { return x > 0.0 ? 1.0 : x < 0.0 ? -1.0 : x; }
ACCEL_FN double accel_f64_expm1(double x) { return expm1(x); }
ACCEL_FN double accel_f64_log1p(double x) { return log1p(x); }
ACCEL_FN double accel_f64_sin(double x) { return sin(x); }
ACCEL_FN double accel_f64_cos(double x) { return cos(x); }
ACCEL_FN double accel_f64_tan(double x) { return tan(x); }
ACCEL_FN double accel_f64_asin(double x) { return asin(x); }
ACCEL_FN double accel_f64_acos(double x) { return acos(x); }
ACCEL_FN double accel_f64_atan(double x) { return atan(x); }
ACCEL_FN double accel_f64_sinh(double x) { return sinh(x); }
ACCEL_FN double accel_f64_cosh(double x) { return cosh(x); }
ACCEL_FN double accel_f64_asinh(double x) { return asinh(x); }
ACCEL_FN double accel_f64_acosh(double x) { return acosh(x); }
ACCEL_FN double accel_f64_atanh(double x) { return atanh(x); }
ACCEL_FN double accel_f64_cbrt(double x) { return cbrt(x); }
ACCEL_FN double accel_f64_erf(double x) { return erf(x); }
ACCEL_FN double accel_f64_erfc(double x) { return erfc(x); }
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
/* Truncates toward zero, saturating at the integer type's range; NaN becomes 0. The bounds are
 * powers of two, exact in float, so no comparison rounds. */
ACCEL_FN accel_i64 accel_f32_to_int(float x, int type) {
  if (x != x) return 0;
  if (type == ACCEL_S64_TYPE) {
    if (x >= 9223372036854775808.0f) return (accel_i64)0x7fffffffffffffffLL;
    if (x <= -9223372036854775808.0f) return (accel_i64)(-0x7fffffffffffffffLL - 1);
  } else if (type == ACCEL_S32_TYPE) {
    if (x >= 2147483648.0f) return 2147483647;
    if (x <= -2147483648.0f) return -2147483647 - 1;
  } else {
    if (x >= 255.0f) return 255;
    if (x <= 0.0f) return 0;
  }
  return (accel_i64)x;
}

/* NaN-propagating min and max: once a NaN is seen, the result stays NaN. */
ACCEL_FN float accel_f32_pick(int op, float acc, float x) {
  if (x != x) return x;
  return (op == ACCEL_REDUCE_MIN ? x < acc : x > acc) ? x : acc;
}

ACCEL_FN accel_i64 accel_int_pick(int op, accel_i64 acc, accel_i64 x) {
  return (op == ACCEL_REDUCE_MIN ? x < acc : x > acc) ? x : acc;
}

#if ACCEL_HAS_F64
ACCEL_FN accel_i64 accel_f64_to_int(double x, int type) {
  if (x != x) return 0;
  if (type == ACCEL_S64_TYPE) {
    if (x >= 9223372036854775808.0) return (accel_i64)0x7fffffffffffffffLL;
    if (x <= -9223372036854775808.0) return (accel_i64)(-0x7fffffffffffffffLL - 1);
  } else if (type == ACCEL_S32_TYPE) {
    if (x >= 2147483647.0) return 2147483647;
    if (x <= -2147483648.0) return -2147483647 - 1;
  } else {
    if (x >= 255.0) return 255;
    if (x <= 0.0) return 0;
  }
  return (accel_i64)x;
}

ACCEL_FN double accel_f64_pick(int op, double acc, double x) {
  if (x != x) return x;
  return (op == ACCEL_REDUCE_MIN ? x < acc : x > acc) ? x : acc;
}
#endif

#endif /* ACCEL_KERNELS_TENSOR_H */
