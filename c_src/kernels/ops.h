/* The registry of elementwise tensor operations: the one list from which everything about an
 * operation is derived. From it come the operation codes (below), each element type's dispatch
 * (kernels/tensor.h, which holds the bodies), the NIF's atoms (made at load, nif/tensor_nif.cpp)
 * and Accel.Tensor's functions, specs and docs (lib/accel/tensor/ops.ex reads this file when it
 * compiles). Adding one: a line here, its body in kernels/tensor.h, a test.
 *
 * X(name, types, doc). types: ALL, FLOAT or INT, the element types it takes (an integer tensor
 * given to a FLOAT operation raises, naming it). doc: one sentence for the docs, in Elixir terms.
 * Families: unary (same type out), binary (two operands, same type out), compare (two operands,
 * :u8 out, 1 for true). Codes are positions, so a line may only be appended to its family. */
#ifndef ACCEL_KERNELS_OPS_H
#define ACCEL_KERNELS_OPS_H

#define ACCEL_UNARY_OPS(X)                                                                      \
  X(negate, ALL, "`-x`; integers wrap (the negation of the smallest value is itself)")          \
  X(abs, ALL, "`abs(x)`; integers wrap like `negate`")                                          \
  X(exp, FLOAT, "`:math.exp(x)`")                                                               \
  X(log, FLOAT, "`:math.log(x)`; NaN below zero, negative infinity at zero")                    \
  X(sqrt, FLOAT, "`:math.sqrt(x)`; NaN below zero")                                             \
  X(tanh, FLOAT, "`:math.tanh(x)`")                                                             \
  X(sigmoid, FLOAT, "`1 / (1 + :math.exp(-x))`")                                                \
  X(floor, ALL, "`Float.floor(x)` as a float; integers unchanged")                              \
  X(ceil, ALL, "`Float.ceil(x)` as a float; integers unchanged")                                \
  X(round, ALL, "`Float.round(x)` (halves away from zero) as a float; integers unchanged")      \
  X(bitwise_not, INT, "`Bitwise.bnot(x)` in the tensor's width")                                 \
  X(sign, ALL, "-1, 0 or 1 by the sign of `x` (a float NaN stays NaN)")                          \
  X(expm1, FLOAT, "`:math.exp(x) - 1`, exact near zero")                                         \
  X(log1p, FLOAT, "`:math.log(1 + x)`, exact near zero")                                         \
  X(sin, FLOAT, "`:math.sin(x)`")                                                                \
  X(cos, FLOAT, "`:math.cos(x)`")                                                                \
  X(tan, FLOAT, "`:math.tan(x)`")                                                                \
  X(asin, FLOAT, "`:math.asin(x)`; NaN outside -1..1")                                           \
  X(acos, FLOAT, "`:math.acos(x)`; NaN outside -1..1")                                           \
  X(atan, FLOAT, "`:math.atan(x)`")                                                              \
  X(sinh, FLOAT, "`:math.sinh(x)`")                                                              \
  X(cosh, FLOAT, "`:math.cosh(x)`")                                                              \
  X(asinh, FLOAT, "`:math.asinh(x)`")                                                            \
  X(acosh, FLOAT, "`:math.acosh(x)`; NaN below 1")                                               \
  X(atanh, FLOAT, "`:math.atanh(x)`; NaN outside -1..1")                                         \
  X(rsqrt, FLOAT, "`1 / :math.sqrt(x)`")                                                         \
  X(cbrt, FLOAT, "the cube root of `x`")                                                         \
  X(erf, FLOAT, "`:math.erf(x)`")                                                                \
  X(erfc, FLOAT, "`:math.erfc(x)`")                                                              \
  X(erf_inv, FLOAT, "the inverse of `:math.erf/1` (Giles' approximation, as Nx computes it); NaN outside -1..1")

#define ACCEL_BINARY_OPS(X)                                                                     \
  X(add, ALL, "`a + b`; integers wrap modulo 2^bits")                                           \
  X(subtract, ALL, "`a - b`; integers wrap")                                                    \
  X(multiply, ALL, "`a * b`; integers wrap")                                                    \
  X(divide, ALL, "`a / b` for floats; integers truncate toward zero (`div/2`), a zero divisor raises") \
  X(quotient, INT, "`div(a, b)`: truncates toward zero; a zero divisor raises")                 \
  X(remainder, ALL, "`rem(a, b)`: the sign of `a`; a zero integer divisor raises; floats: C's `fmod`") \
  X(pow, ALL, "`a ** b`; integers wrap, a negative integer exponent raises")                    \
  X(min, ALL, "the smaller of `a` and `b`; NaN if either is")                                   \
  X(max, ALL, "the larger of `a` and `b`; NaN if either is")                                    \
  X(bitwise_and, INT, "`Bitwise.band(a, b)`")                                                   \
  X(bitwise_or, INT, "`Bitwise.bor(a, b)`")                                                     \
  X(bitwise_xor, INT, "`Bitwise.bxor(a, b)`")                                                   \
  X(left_shift, INT, "`Bitwise.bsl(a, b)` in the tensor's width: bits shifted out are lost; a negative `b` raises") \
  X(right_shift, INT, "`Bitwise.bsr(a, b)`: arithmetic (logical for unsigned types); a negative `b` raises") \
  X(atan2, FLOAT, "`:math.atan2(a, b)`: the angle of the point (b, a)")

#define ACCEL_COMPARE_OPS(X)                                                                    \
  X(equal, ALL, "`a == b`")                                                                     \
  X(not_equal, ALL, "`a != b`")                                                                 \
  X(less, ALL, "`a < b`")                                                                       \
  X(less_equal, ALL, "`a <= b`")                                                                \
  X(greater, ALL, "`a > b`")                                                                    \
  X(greater_equal, ALL, "`a >= b`")                                                             \
  X(logical_and, ALL, "both `a` and `b` are non-zero")                                          \
  X(logical_or, ALL, "`a` or `b` is non-zero")                                                  \
  X(logical_xor, ALL, "exactly one of `a` and `b` is non-zero")

#define ACCEL_UNARY_CODE(name, types, doc) ACCEL_UNARY_##name,
#define ACCEL_BINARY_CODE(name, types, doc) ACCEL_BINARY_##name,
#define ACCEL_COMPARE_CODE(name, types, doc) ACCEL_COMPARE_##name,
enum { ACCEL_UNARY_OPS(ACCEL_UNARY_CODE) ACCEL_UNARY_COUNT };
enum { ACCEL_BINARY_OPS(ACCEL_BINARY_CODE) ACCEL_BINARY_COUNT };
enum { ACCEL_COMPARE_OPS(ACCEL_COMPARE_CODE) ACCEL_COMPARE_COUNT };
#undef ACCEL_UNARY_CODE
#undef ACCEL_BINARY_CODE
#undef ACCEL_COMPARE_CODE

/* Which element families an operation's `types` admits: ACCEL_TAKES_<family>_<types>(code) keeps
 * `code` where the operation exists for that family. */
#define ACCEL_TAKES_INT_ALL(...) __VA_ARGS__
#define ACCEL_TAKES_INT_INT(...) __VA_ARGS__
#define ACCEL_TAKES_INT_FLOAT(...)
#define ACCEL_TAKES_FLOAT_ALL(...) __VA_ARGS__
#define ACCEL_TAKES_FLOAT_FLOAT(...) __VA_ARGS__
#define ACCEL_TAKES_FLOAT_INT(...)

/* What a kernel reports through its flag buffer (0: nothing). */
#define ACCEL_FLAG_ZERO_DIVISOR 1
#define ACCEL_FLAG_NEGATIVE_EXPONENT 2
#define ACCEL_FLAG_NEGATIVE_SHIFT 3

#endif /* ACCEL_KERNELS_OPS_H */
