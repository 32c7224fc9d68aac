/* The per-element math of the tensor kernels, written once in the common subset of C++17, CUDA C++
 * and OpenCL C (see dialect.h): elementwise binary and unary operations, type conversions, and the
 * NaN-propagating min/max of reductions. How elements are indexed and scheduled is each backend's
 * business; what one element becomes is decided here, so every backend computes the same values.
 *
 * Semantics (documented for users in Accel.Tensor):
 *  - Integer add/subtract/multiply/negate/abs wrap modulo 2^bits (two's complement), like C on
 *    unsigned types and like Nx. Integer divide truncates toward zero (Elixir's div/2); MIN / -1
 *    wraps to MIN; a zero divisor yields 0 here and the backend reports the call as an error.
 *  - Integer operations are computed on 64-bit values and truncated by the store, which gives the
 *    same wrap-around for s32 and u8 as computing in their own width.
 *  - Float operations are IEEE single or double precision; exp/log/tanh may differ from the host
 *    C library by a few ulp on devices (see Accel.Tensor for the tolerances tests use).
 *  - Float to integer conversion truncates toward zero and saturates at the target's range; NaN
 *    becomes 0. Integer to integer conversion wraps. */
#ifndef ACCEL_KERNELS_TENSOR_H
#define ACCEL_KERNELS_TENSOR_H

#include "kernels/dialect.h"

/* Element types and operation codes: the values core/tensor.hpp uses. */
#define ACCEL_F32_TYPE 0
#define ACCEL_F64_TYPE 1
#define ACCEL_S64_TYPE 2
#define ACCEL_S32_TYPE 3
#define ACCEL_U8_TYPE 4

#define ACCEL_OP_ADD 0
#define ACCEL_OP_SUBTRACT 1
#define ACCEL_OP_MULTIPLY 2
#define ACCEL_OP_DIVIDE 3

#define ACCEL_OP_NEGATE 0
#define ACCEL_OP_ABS 1
#define ACCEL_OP_EXP 2
#define ACCEL_OP_LOG 3
#define ACCEL_OP_SQRT 4
#define ACCEL_OP_TANH 5
#define ACCEL_OP_SIGMOID 6

#define ACCEL_REDUCE_SUM 0
#define ACCEL_REDUCE_MIN 1
#define ACCEL_REDUCE_MAX 2

/* How many codes each family's kernel serves (codes are 0 .. count - 1). */
#define ACCEL_BINARY_OPS 4
#define ACCEL_UNARY_OPS 7
#define ACCEL_PICK_OPS 3

/* Any integer type, widened to 64 bits. */
ACCEL_FN accel_i64 accel_int_binary(int op, accel_i64 a, accel_i64 b) {
  const accel_u64 ua = (accel_u64)a, ub = (accel_u64)b;
  if (op == ACCEL_OP_ADD) return (accel_i64)(ua + ub);
  if (op == ACCEL_OP_SUBTRACT) return (accel_i64)(ua - ub);
  if (op == ACCEL_OP_MULTIPLY) return (accel_i64)(ua * ub);
  if (b == 0) return 0;
  if (b == -1) return (accel_i64)((accel_u64)0 - ua); /* MIN / -1 overflows: wrap */
  return a / b;
}

ACCEL_FN accel_i64 accel_int_unary(int op, accel_i64 x) {
  if (op == ACCEL_OP_NEGATE || (op == ACCEL_OP_ABS && x < 0)) return (accel_i64)((accel_u64)0 - (accel_u64)x);
  return x;
}

ACCEL_FN float accel_f32_binary(int op, float a, float b) {
  if (op == ACCEL_OP_ADD) return a + b;
  if (op == ACCEL_OP_SUBTRACT) return a - b;
  if (op == ACCEL_OP_MULTIPLY) return a * b;
  return a / b;
}

ACCEL_FN float accel_f32_unary(int op, float x) {
  if (op == ACCEL_OP_NEGATE) return -x;
  if (op == ACCEL_OP_ABS) return ACCEL_F32(fabs)(x);
  if (op == ACCEL_OP_EXP) return ACCEL_F32(exp)(x);
  if (op == ACCEL_OP_LOG) return ACCEL_F32(log)(x);
  if (op == ACCEL_OP_SQRT) return ACCEL_F32(sqrt)(x);
  if (op == ACCEL_OP_TANH) return ACCEL_F32(tanh)(x);
  return 1.0f / (1.0f + ACCEL_F32(exp)(-x));
}

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
ACCEL_FN double accel_f64_binary(int op, double a, double b) {
  if (op == ACCEL_OP_ADD) return a + b;
  if (op == ACCEL_OP_SUBTRACT) return a - b;
  if (op == ACCEL_OP_MULTIPLY) return a * b;
  return a / b;
}

ACCEL_FN double accel_f64_unary(int op, double x) {
  if (op == ACCEL_OP_NEGATE) return -x;
  if (op == ACCEL_OP_ABS) return fabs(x);
  if (op == ACCEL_OP_EXP) return exp(x);
  if (op == ACCEL_OP_LOG) return log(x);
  if (op == ACCEL_OP_SQRT) return sqrt(x);
  if (op == ACCEL_OP_TANH) return tanh(x);
  return 1.0 / (1.0 + exp(-x));
}

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
