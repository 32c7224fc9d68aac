/* The tensor kernels, written once for every backend (see launch.h for how ACCEL_KERNEL becomes an
 * OpenCL, CUDA or host entry point; kernel_list.h lists them). What one element becomes is decided
 * by kernels/tensor.h; here is only which elements each work item reads and writes.
 *
 * Buffers by kernel: iota (out); binary (a, b, out, flag: ops.h's ACCEL_FLAG_*); compare (a, b,
 * :u8 out); select (pred, a, b, out); unary and casts (in, out); sum and pick (in, partials);
 * argpick (values, value partials, index partials, input indices); transpose, copy and convert
 * (in, out);
 * logistic map (data, in place).
 * f64 kernels exist where ACCEL_HAS_F64. */
#ifndef ACCEL_KERNELS_TENSOR_KERNELS_H
#define ACCEL_KERNELS_TENSOR_KERNELS_H

#include "kernels/launch.h"
#include "kernels/logistic_map.h"
#include "kernels/tensor.h"

/* The per-family element functions, by the K argument of the macros below. */
#define ACCEL_BINARY_INT(T, op, x, y, flag) ((T)accel_int_binary(op, (accel_i64)(x), (accel_i64)(y), flag))
#define ACCEL_UNARY_INT(T, op, x) ((T)accel_int_unary(op, (accel_i64)(x)))
#define ACCEL_PICK_INT(T, op, acc, x) ((T)accel_int_pick(op, (accel_i64)(acc), (accel_i64)(x)))
#define ACCEL_SCALAR_INT(T, bits) ((T)(accel_i64)(bits))
#define ACCEL_BINARY_F32(T, op, x, y, flag) accel_f32_binary(op, x, y)
#define ACCEL_UNARY_F32(T, op, x) accel_f32_unary(op, x)
#define ACCEL_PICK_F32(T, op, acc, x) accel_f32_pick(op, acc, x)
#define ACCEL_SCALAR_F32(T, bits) accel_bits_f32(bits)
#define ACCEL_BINARY_F64(T, op, x, y, flag) accel_f64_binary(op, x, y)
#define ACCEL_UNARY_F64(T, op, x) accel_f64_unary(op, x)
#define ACCEL_PICK_F64(T, op, acc, x) accel_f64_pick(op, acc, x)
#define ACCEL_SCALAR_F64(T, bits) accel_bits_f64(bits)
#define ACCEL_BINARY_UINT(T, op, x, y, flag) accel_uint_binary(op, x, y, flag)
#define ACCEL_UNARY_UINT(T, op, x) accel_uint_unary(op, x)
#define ACCEL_PICK_UINT(T, op, acc, x) accel_uint_pick(op, acc, x)
#define ACCEL_SCALAR_UINT(T, bits) ((T)(bits))
#define ACCEL_IS_NAN_INT(x) 0
#define ACCEL_IS_NAN_UINT(x) 0
#define ACCEL_IS_NAN_F32(x) ((x) != (x))
#define ACCEL_IS_NAN_F64(x) ((x) != (x))

/* Comparisons by operation code, for any element type (generated from the registry). */
#define ACCEL_COMPARE_CASE(name, types, doc) \
  if (op == ACCEL_COMPARE_##name) return ACCEL_COMPARE_BODY_##name(a, b) ? 1 : 0;

/* A reduction's work item i is partial (o, g, k) of in[outer][len][inner]: it combines elements
 * j = g, g + groups, ... (block 0: interleaved, coalesced on GPUs) or j in [g * block, (g + 1) *
 * block) (contiguous, for CPUs) of row (o, k). The host makes every group non-empty. */
#define ACCEL_REDUCTION_ITEM(T)                                                                    \
  const accel_u64 len = p->size[1], inner = p->size[2], groups = p->size[3], block = p->size[4];  \
  const accel_u64 first = block ? i / inner % groups * block : i / inner % groups;                \
  const accel_u64 end = block ? (first + block < len ? first + block : len) : len;                \
  const accel_u64 step = block ? 1 : groups;                                                      \
  ACCEL_GLOBAL const T* row = (ACCEL_GLOBAL const T*)b0 + i / (groups * inner) * len * inner + i % inner

/* Sums (op ACCEL_REDUCE_SUM) or products (op ACCEL_REDUCE_PRODUCT_OP) in ACC, four chains at a
 * time (latency), written as OUT. */
#define ACCEL_SUM_KERNEL(NAME, T, ACC, OUT)                                                         \
  ACCEL_KERNEL(NAME) {                                                                              \
    ACCEL_REDUCTION_ITEM(T);                                                                        \
    const int times = ACCEL_OP == ACCEL_REDUCE_PRODUCT_OP;                                          \
    ACC a0 = times ? 1 : 0, a1 = a0, a2 = a0, a3 = a0;                                              \
    accel_u64 j = first;                                                                            \
    if (times) {                                                                                    \
      for (; j + 3 * step < end; j += 4 * step) {                                                   \
        a0 *= (ACC)row[j * inner];                                                                  \
        a1 *= (ACC)row[(j + step) * inner];                                                         \
        a2 *= (ACC)row[(j + 2 * step) * inner];                                                     \
        a3 *= (ACC)row[(j + 3 * step) * inner];                                                     \
      }                                                                                             \
      for (; j < end; j += step) a0 *= (ACC)row[j * inner];                                         \
      ((ACCEL_GLOBAL OUT*)b1)[i] = (OUT)((a0 * a1) * (a2 * a3));                                    \
      return;                                                                                       \
    }                                                                                               \
    for (; j + 3 * step < end; j += 4 * step) {                                                     \
      a0 += (ACC)row[j * inner];                                                                    \
      a1 += (ACC)row[(j + step) * inner];                                                           \
      a2 += (ACC)row[(j + 2 * step) * inner];                                                       \
      a3 += (ACC)row[(j + 3 * step) * inner];                                                       \
    }                                                                                               \
    for (; j < end; j += step) a0 += (ACC)row[j * inner];                                           \
    ((ACCEL_GLOBAL OUT*)b1)[i] = (OUT)((a0 + a1) + (a2 + a3));                                      \
  }

/* One element type's kernels. S: suffix, T: type, K: function family. Sums are the caller's
 * (ACCEL_SUM_KERNEL), as their accumulator depends on the type. */
#define ACCEL_TYPED_KERNELS_OF(S, T, K)                                                             \
  ACCEL_KERNEL(accel_iota_##S) { ((ACCEL_GLOBAL T*)b0)[i] = (T)(accel_i64)i; }                      \
  /* Operand j of output element i (launch.h's layouts). */                                      \
  /* full: ACCEL_FULL, the layouts the host's vectorisable loops know (constants there). */        \
  ACCEL_FN T accel_operand_##S(ACCEL_GLOBAL const void* b, const accel_params* p, int j, accel_u64 i, int full) { \
    if (full == ACCEL_FULL_ALL || (full == ACCEL_FULL_SCALAR_B && j == 0) ||                         \
        (full == ACCEL_FULL_SCALAR_A && j == 1))                                                     \
      return ((ACCEL_GLOBAL const T*)b)[i];                                                         \
    if (full != ACCEL_FULL_NONE || p->layout[j] == ACCEL_LAYOUT_SCALAR) return ACCEL_SCALAR_##K(T, p->bits[j]); \
    return ((ACCEL_GLOBAL const T*)b)[accel_operand_index(p, j, i)];                                \
  }                                                                                                 \
  ACCEL_KERNEL(accel_binary_##S) {                                                                  \
    const T x = accel_operand_##S(b0, p, 0, i, ACCEL_FULL), y = accel_operand_##S(b1, p, 1, i, ACCEL_FULL);                \
    int flag = 0;                                                                                   \
    ((ACCEL_GLOBAL T*)b2)[i] = ACCEL_BINARY_##K(T, ACCEL_OP, x, y, &flag);                          \
    if (flag != 0) ACCEL_SET_FLAG((ACCEL_GLOBAL int*)b3, flag);                                     \
  }                                                                                                 \
  ACCEL_FN accel_u8 accel_compare_value_##S(int op, T a, T b) {                                     \
    ACCEL_COMPARE_OPS(ACCEL_COMPARE_CASE)                                                           \
    return 0;                                                                                       \
  }                                                                                                 \
  ACCEL_KERNEL(accel_compare_##S) {                                                                 \
    const T x = accel_operand_##S(b0, p, 0, i, ACCEL_FULL), y = accel_operand_##S(b1, p, 1, i, ACCEL_FULL);                \
    ((ACCEL_GLOBAL accel_u8*)b2)[i] = accel_compare_value_##S(ACCEL_OP, x, y);                      \
  }                                                                                                 \
  /* select(pred, a, b): pred is :u8 (operand 0), a and b operands 1 and 2. */                     \
  ACCEL_KERNEL(accel_select_##S) {                                                                  \
    const accel_u8 pred = ((ACCEL_GLOBAL const accel_u8*)b0)[ACCEL_FULL == ACCEL_FULL_ALL ? i : accel_operand_index(p, 0, i)]; \
    ((ACCEL_GLOBAL T*)b3)[i] =                                                                      \
        pred != 0 ? accel_operand_##S(b1, p, 1, i, ACCEL_FULL) : accel_operand_##S(b2, p, 2, i, ACCEL_FULL); \
  }                                                                                                 \
  ACCEL_KERNEL(accel_unary_##S) {                                                                   \
    ((ACCEL_GLOBAL T*)b1)[i] = ACCEL_UNARY_##K(T, ACCEL_OP, ((ACCEL_GLOBAL const T*)b0)[i]);        \
  }                                                                                                 \
  ACCEL_KERNEL(accel_pick_##S) {                                                                    \
    ACCEL_REDUCTION_ITEM(T);                                                                        \
    T acc = row[first * inner];                                                                     \
    for (accel_u64 j = first + step; j < end; j += step) acc = ACCEL_PICK_##K(T, ACCEL_OP, acc, row[j * inner]); \
    ((ACCEL_GLOBAL T*)b1)[i] = acc;                                                                 \
  }                                                                                                 \
  /* argmin/argmax partials: values (b1) and their indices along the axis (b2); a later pass reads */ \
  /* the indices of its input (b3) when size[5] is set. Of equal values the first wins (the last */  \
  /* where count[1] is set); NaN by count[0]: ACCEL_NAN_FIRST (the first NaN wins over any */       \
  /* number), ACCEL_NAN_LAST (the last NaN does) or ACCEL_NAN_IGNORED (any number wins over NaN). */ \
  ACCEL_KERNEL(accel_argpick_##S) {                                                                 \
    ACCEL_REDUCTION_ITEM(T);                                                                        \
    ACCEL_GLOBAL const accel_i64* indices =                                                         \
        p->size[5] ? (ACCEL_GLOBAL const accel_i64*)b3 + i / (groups * inner) * len * inner + i % inner : 0; \
    T best = row[first * inner];                                                                    \
    accel_i64 at = indices ? indices[first * inner] : (accel_i64)first;                             \
    const int nan_policy = (int)p->count[0], last = (int)p->count[1];                              \
    for (accel_u64 j = first + step; j < end; j += step) {                                          \
      const T x = row[j * inner];                                                                   \
      const accel_i64 xi = indices ? indices[j * inner] : (accel_i64)j;                             \
      const int x_nan = ACCEL_IS_NAN_##K(x), best_nan = ACCEL_IS_NAN_##K(best);                     \
      const int later = last ? xi > at : xi < at;                                                   \
      const int better = x_nan ? (nan_policy == ACCEL_NAN_IGNORED ? 0                               \
                                  : !best_nan || (nan_policy == ACCEL_NAN_LAST ? xi > at : xi < at)) \
                               : best_nan ? nan_policy == ACCEL_NAN_IGNORED                         \
                                          : (ACCEL_OP == ACCEL_REDUCE_MIN ? x < best : x > best);   \
      const int tie = !x_nan && !best_nan && x == best && later;                                    \
      if (better || tie) {                                                                          \
        best = x;                                                                                   \
        at = xi;                                                                                    \
      }                                                                                             \
    }                                                                                               \
    ((ACCEL_GLOBAL T*)b1)[i] = best;                                                                \
    ((ACCEL_GLOBAL accel_i64*)b2)[i] = at;                                                          \
  }

/* Integer sums wrap modulo 2^64 and are written as s64 (signed types) or u64 (unsigned ones, as Nx
 * sums them). */
ACCEL_TYPED_KERNELS_OF(s64, accel_i64, INT)
ACCEL_SUM_KERNEL(accel_sum_s64, accel_i64, accel_u64, accel_i64)
ACCEL_TYPED_KERNELS_OF(s32, accel_i32, INT)
ACCEL_SUM_KERNEL(accel_sum_s32, accel_i32, accel_u64, accel_i64)
ACCEL_TYPED_KERNELS_OF(u8, accel_u8, INT)
ACCEL_SUM_KERNEL(accel_sum_u8, accel_u8, accel_u64, accel_u64)
ACCEL_TYPED_KERNELS_OF(u64, accel_u64, UINT)
ACCEL_SUM_KERNEL(accel_sum_u64, accel_u64, accel_u64, accel_u64)
ACCEL_TYPED_KERNELS_OF(u32, accel_u32, INT)
ACCEL_SUM_KERNEL(accel_sum_u32, accel_u32, accel_u64, accel_u64)
ACCEL_TYPED_KERNELS_OF(f32, float, F32)
#if ACCEL_HAS_F64
/* f32 sums accumulate and write their partials in double: the host rounds to f32 once, at the end. */
ACCEL_SUM_KERNEL(accel_sum_f32, float, double, double)
ACCEL_TYPED_KERNELS_OF(f64, double, F64)
ACCEL_SUM_KERNEL(accel_sum_f64, double, double, double)
#else
/* Devices without doubles: compensated (Kahan) sums in float, partials in float; products in float. */
ACCEL_KERNEL(accel_sum_f32) {
  ACCEL_REDUCTION_ITEM(float);
  if (ACCEL_OP == ACCEL_REDUCE_PRODUCT_OP) {
    float prod = 1.0f;
    for (accel_u64 j = first; j < end; j += step) prod *= row[j * inner];
    ((ACCEL_GLOBAL float*)b1)[i] = prod;
    return;
  }
  float sum = 0.0f, lost = 0.0f;
  for (accel_u64 j = first; j < end; j += step) {
    const float y = row[j * inner] - lost;
    const float t = sum + y;
    lost = (t - sum) - y;
    sum = t;
  }
  ((ACCEL_GLOBAL float*)b1)[i] = sum;
}
#endif

/* Conversions F -> T between compute types. TO_FLOAT: a plain C conversion; FROM_F32/FROM_F64:
 * truncate and saturate (tensor.h); INT_TO_INT: wrap modulo 2^bits. */
#define ACCEL_CAST_KERNEL(FS, F, TS, T, HOW) \
  ACCEL_KERNEL(accel_cast_##FS##_##TS) { ((ACCEL_GLOBAL T*)b1)[i] = HOW(T, ((ACCEL_GLOBAL const F*)b0)[i], ACCEL_##TS##_CODE); }
#define ACCEL_TO_FLOAT(T, x, code) ((T)(x))
#define ACCEL_FROM_F32(T, x, code) ((T)accel_f32_to_int(x, code))
#define ACCEL_FROM_F64(T, x, code) ((T)accel_f64_to_int(x, code))
#define ACCEL_INT_TO_INT(T, x, code) ((T)(accel_u64)(x))
#define ACCEL_f32_CODE ACCEL_F32_TYPE
#define ACCEL_f64_CODE ACCEL_F64_TYPE
#define ACCEL_s64_CODE ACCEL_S64_TYPE
#define ACCEL_s32_CODE ACCEL_S32_TYPE
#define ACCEL_u8_CODE ACCEL_U8_TYPE
#define ACCEL_u64_CODE ACCEL_U64_TYPE
#define ACCEL_u32_CODE ACCEL_U32_TYPE
/* Signed sources widen with their sign, unsigned ones with zeros: (accel_u64)(x) does both. */
#define ACCEL_CASTS_FROM_INT(FS, F)                          \
  ACCEL_CAST_KERNEL(FS, F, f32, float, ACCEL_TO_FLOAT)       \
  ACCEL_CAST_KERNEL(FS, F, s64, accel_i64, ACCEL_INT_TO_INT) \
  ACCEL_CAST_KERNEL(FS, F, s32, accel_i32, ACCEL_INT_TO_INT) \
  ACCEL_CAST_KERNEL(FS, F, u8, accel_u8, ACCEL_INT_TO_INT)   \
  ACCEL_CAST_KERNEL(FS, F, u64, accel_u64, ACCEL_INT_TO_INT) \
  ACCEL_CAST_KERNEL(FS, F, u32, accel_u32, ACCEL_INT_TO_INT)
ACCEL_CASTS_FROM_INT(s64, accel_i64)
ACCEL_CASTS_FROM_INT(s32, accel_i32)
ACCEL_CASTS_FROM_INT(u8, accel_u8)
ACCEL_CASTS_FROM_INT(u64, accel_u64)
ACCEL_CASTS_FROM_INT(u32, accel_u32)
ACCEL_CAST_KERNEL(f32, float, f32, float, ACCEL_TO_FLOAT)
ACCEL_CAST_KERNEL(f32, float, s64, accel_i64, ACCEL_FROM_F32)
ACCEL_CAST_KERNEL(f32, float, s32, accel_i32, ACCEL_FROM_F32)
ACCEL_CAST_KERNEL(f32, float, u8, accel_u8, ACCEL_FROM_F32)
ACCEL_CAST_KERNEL(f32, float, u64, accel_u64, ACCEL_FROM_F32)
ACCEL_CAST_KERNEL(f32, float, u32, accel_u32, ACCEL_FROM_F32)
#if ACCEL_HAS_F64
ACCEL_CAST_KERNEL(s64, accel_i64, f64, double, ACCEL_TO_FLOAT)
ACCEL_CAST_KERNEL(s32, accel_i32, f64, double, ACCEL_TO_FLOAT)
ACCEL_CAST_KERNEL(u8, accel_u8, f64, double, ACCEL_TO_FLOAT)
ACCEL_CAST_KERNEL(u64, accel_u64, f64, double, ACCEL_TO_FLOAT)
ACCEL_CAST_KERNEL(u32, accel_u32, f64, double, ACCEL_TO_FLOAT)
ACCEL_CAST_KERNEL(f32, float, f64, double, ACCEL_TO_FLOAT)
ACCEL_CAST_KERNEL(f64, double, f64, double, ACCEL_TO_FLOAT)
ACCEL_CAST_KERNEL(f64, double, f32, float, ACCEL_TO_FLOAT)
ACCEL_CAST_KERNEL(f64, double, s64, accel_i64, ACCEL_FROM_F64)
ACCEL_CAST_KERNEL(f64, double, s32, accel_i32, ACCEL_FROM_F64)
ACCEL_CAST_KERNEL(f64, double, u8, accel_u8, ACCEL_FROM_F64)
ACCEL_CAST_KERNEL(f64, double, u64, accel_u64, ACCEL_FROM_F64)
ACCEL_CAST_KERNEL(f64, double, u32, accel_u32, ACCEL_FROM_F64)
#endif

/* Conversions from or to a storage type (types.h), of any pair but complex ones: the element read as
 * a 64-bit integer or a float (a double where the device has them), then written as the target
 * type. size[0] and size[1] are the source's and the target's codes, the same for every item. */
#if ACCEL_HAS_F64
typedef double accel_wide_float;
#else
typedef float accel_wide_float;
#endif
ACCEL_FN int accel_is_float_type(int t) {
  return t == ACCEL_F32_TYPE || t == ACCEL_F64_TYPE || t == ACCEL_F16_TYPE || t == ACCEL_BF16_TYPE ||
         t == ACCEL_F8_TYPE || t == ACCEL_F8E4M3FN_TYPE;
}
ACCEL_FN accel_i64 accel_load_int(ACCEL_GLOBAL const void* b, accel_u64 i, int t) {
  switch (t) {
    case ACCEL_S64_TYPE:
    case ACCEL_U64_TYPE: return ((ACCEL_GLOBAL const accel_i64*)b)[i];
    case ACCEL_S32_TYPE: return ((ACCEL_GLOBAL const accel_i32*)b)[i];
    case ACCEL_U32_TYPE: return ((ACCEL_GLOBAL const accel_u32*)b)[i];
    case ACCEL_S16_TYPE: return ((ACCEL_GLOBAL const accel_i16*)b)[i];
    case ACCEL_U16_TYPE: return ((ACCEL_GLOBAL const accel_u16*)b)[i];
    case ACCEL_S8_TYPE:
    case ACCEL_S4_TYPE:
    case ACCEL_S2_TYPE: return ((ACCEL_GLOBAL const accel_i8*)b)[i];
    default: return ((ACCEL_GLOBAL const accel_u8*)b)[i]; /* u8, u4, u2 */
  }
}
ACCEL_FN accel_wide_float accel_load_float(ACCEL_GLOBAL const void* b, accel_u64 i, int t) {
  switch (t) {
#if ACCEL_HAS_F64
    case ACCEL_F64_TYPE: return ((ACCEL_GLOBAL const double*)b)[i];
#endif
    case ACCEL_F32_TYPE: return ((ACCEL_GLOBAL const float*)b)[i];
    case ACCEL_F16_TYPE: return accel_f16_to_f32(((ACCEL_GLOBAL const accel_u16*)b)[i]);
    case ACCEL_F8_TYPE: return accel_f8_to_f32(((ACCEL_GLOBAL const accel_u8*)b)[i]);
    case ACCEL_F8E4M3FN_TYPE: return accel_f8e4m3_to_f32(((ACCEL_GLOBAL const accel_u8*)b)[i]);
    default: return accel_bits_f32((accel_u64)((ACCEL_GLOBAL const accel_u16*)b)[i] << 16); /* bf16 */
  }
}
ACCEL_FN void accel_store_int(ACCEL_GLOBAL void* b, accel_u64 i, int t, accel_i64 v) {
  switch (t) {
    case ACCEL_S64_TYPE:
    case ACCEL_U64_TYPE: ((ACCEL_GLOBAL accel_i64*)b)[i] = v; return;
    case ACCEL_S32_TYPE:
    case ACCEL_U32_TYPE: ((ACCEL_GLOBAL accel_u32*)b)[i] = (accel_u32)(accel_u64)v; return;
    case ACCEL_S16_TYPE:
    case ACCEL_U16_TYPE: ((ACCEL_GLOBAL accel_u16*)b)[i] = (accel_u16)(accel_u64)v; return;
    /* sub-byte types wrap to their width (a signed one sign-extended into its byte) */
    case ACCEL_S4_TYPE: ((ACCEL_GLOBAL accel_i8*)b)[i] = (accel_i8)(((accel_i32)(v & 0xF) ^ 8) - 8); return;
    case ACCEL_U4_TYPE: ((ACCEL_GLOBAL accel_u8*)b)[i] = (accel_u8)(v & 0xF); return;
    case ACCEL_S2_TYPE: ((ACCEL_GLOBAL accel_i8*)b)[i] = (accel_i8)(((accel_i32)(v & 3) ^ 2) - 2); return;
    case ACCEL_U2_TYPE: ((ACCEL_GLOBAL accel_u8*)b)[i] = (accel_u8)(v & 3); return;
    default: ((ACCEL_GLOBAL accel_u8*)b)[i] = (accel_u8)(accel_u64)v; return;
  }
}
ACCEL_FN void accel_store_float(ACCEL_GLOBAL void* b, accel_u64 i, int t, accel_wide_float x) {
  switch (t) {
#if ACCEL_HAS_F64
    case ACCEL_F64_TYPE: ((ACCEL_GLOBAL double*)b)[i] = x; return;
    case ACCEL_F16_TYPE: ((ACCEL_GLOBAL accel_u16*)b)[i] = (accel_u16)accel_f64_to_f16(x); return;
    case ACCEL_F8_TYPE: ((ACCEL_GLOBAL accel_u8*)b)[i] = (accel_u8)(accel_f64_to_f16(x) >> 8); return;
#else
    case ACCEL_F16_TYPE: ((ACCEL_GLOBAL accel_u16*)b)[i] = (accel_u16)accel_f32_to_f16(x); return;
    case ACCEL_F8_TYPE: ((ACCEL_GLOBAL accel_u8*)b)[i] = (accel_u8)accel_f32_to_f8(x); return;
#endif
    case ACCEL_F8E4M3FN_TYPE: ((ACCEL_GLOBAL accel_u8*)b)[i] = (accel_u8)accel_to_f8e4m3(x); return;
    case ACCEL_F32_TYPE: ((ACCEL_GLOBAL float*)b)[i] = (float)x; return;
    default: ((ACCEL_GLOBAL accel_u16*)b)[i] = (accel_u16)accel_f32_to_bf16((float)x); return; /* bf16 */
  }
}
/* Element i of b0 (type `from`) converted into b1 (type `to`): the kernel below, and the CPU
 * backend's loops for the commonest pairs (host_kernels.inc), where the types are constants. */
#if defined(__GNUC__) && !defined(__OPENCL_VERSION__) && !defined(__CUDACC__)
#define ACCEL_CONVERT_FN ACCEL_FN __attribute__((always_inline)) /* (the host's loops fold the types) */
#else
#define ACCEL_CONVERT_FN ACCEL_FN
#endif
ACCEL_CONVERT_FN void accel_convert_one(ACCEL_GLOBAL const void* b0, ACCEL_GLOBAL void* b1, accel_u64 i, int from, int to) {
  /* f32 into a narrower float from the f32 itself (the f64 path's value: one rounding either way) */
  if (from == ACCEL_F32_TYPE && (to == ACCEL_F16_TYPE || to == ACCEL_F8_TYPE || to == ACCEL_F8E4M3FN_TYPE)) {
    const float x = ((ACCEL_GLOBAL const float*)b0)[i];
    if (to == ACCEL_F16_TYPE)
      ((ACCEL_GLOBAL accel_u16*)b1)[i] = (accel_u16)accel_f32_to_f16(x);
    else
      ((ACCEL_GLOBAL accel_u8*)b1)[i] = (accel_u8)(to == ACCEL_F8_TYPE ? accel_f32_to_f16(x) >> 8 : accel_f32_to_f8e4m3(x));
    return;
  }
  if (accel_is_float_type(from)) {
    const accel_wide_float x = accel_load_float(b0, i, from);
    if (accel_is_float_type(to)) {
      accel_store_float(b1, i, to, x);
    } else {
#if ACCEL_HAS_F64
      accel_store_int(b1, i, to, accel_f64_to_int(x, to));
#else
      accel_store_int(b1, i, to, accel_f32_to_int(x, to));
#endif
    }
    return;
  }
  const accel_i64 v = accel_load_int(b0, i, from);
  if (!accel_is_float_type(to)) {
    accel_store_int(b1, i, to, v);
  } else if (to != ACCEL_F64_TYPE) {
    /* one rounding to f32 (f16's and f8's values are below 2^24, exact there, or beyond their range) */
    const float f = from == ACCEL_U64_TYPE ? (float)(accel_u64)v : (float)v;
    accel_store_float(b1, i, to, f);
  } else {
    accel_store_float(b1, i, to, from == ACCEL_U64_TYPE ? (accel_wide_float)(accel_u64)v : (accel_wide_float)v);
  }
}
ACCEL_KERNEL(accel_convert) { accel_convert_one(b0, b1, i, (int)p->size[0], (int)p->size[1]); }

#if !defined(__OPENCL_VERSION__) && !defined(__CUDACC__) && defined(__cplusplus)
#define ACCEL_HOST_WINDOW_ROWS 1
/* The host's loop over the windows of a run of m outputs along the last dimension whose windows
 * lie inside the input and span two dimensions at most (pooling's): the window's elements outer,
 * the outputs inner, in blocks of 64, so that the inner loop vectorises (a step of Step elements
 * between outputs when it is not 0, else step). Output r's window starts at at + r * step, its
 * element (a, c) a * s0 + c * s1 further. Each output is what the kernel's loop computes for it,
 * in the same order: a sum or product in W from 0 or 1, a pick from init, or (select) the position
 * of the last greatest or least element, first element taken; pick(acc, x) is the kernel's. */
template <int Op, accel_u64 Step, typename T, typename W, typename Pick>
static inline void accel_window_rows(const T* in, accel_u64 at, accel_u64 step, accel_u64 m, accel_i64 n0,
                                     accel_u64 s0, accel_i64 n1, accel_u64 s1, T init, T* out, accel_i64* chosen,
                                     Pick pick) {
  const accel_u64 by = Step != 0 ? Step : step;
  for (accel_u64 b = 0; b < m; b += 64) {
    const accel_u64 k = m - b < 64 ? m - b : 64;
    W acc[64];
    T best[64];
    accel_i64 where[64];
    for (accel_u64 j = 0; j < k; ++j) {
      acc[j] = Op == ACCEL_WINDOW_PRODUCT ? (W)1 : (W)0;
      best[j] = init;
      where[j] = -1;
    }
    for (accel_i64 a = 0; a < n0; ++a)
      for (accel_i64 c = 0; c < n1; ++c) {
        const accel_u64 off = at + b * by + (accel_u64)a * s0 + (accel_u64)c * s1;
        const T* x = in + off;
        const int first = a == 0 && c == 0;
        for (accel_u64 j = 0; j < k; ++j) {
          const T v = x[j * by];
          if (Op == ACCEL_WINDOW_SUM) acc[j] += (W)v;
          else if (Op == ACCEL_WINDOW_PRODUCT) acc[j] *= (W)v;
          else if (Op == ACCEL_WINDOW_SELECT_MAX || Op == ACCEL_WINDOW_SELECT_MIN) {
            const int take = first || (Op == ACCEL_WINDOW_SELECT_MAX ? v >= best[j] : v <= best[j]);
            best[j] = take ? v : best[j];
            where[j] = take ? (accel_i64)(off + j * by) : where[j];
          } else best[j] = pick(best[j], v);
        }
      }
    for (accel_u64 j = 0; j < k; ++j) {
      if (Op == ACCEL_WINDOW_SELECT_MAX || Op == ACCEL_WINDOW_SELECT_MIN) chosen[b + j] = where[j];
      else out[b + j] = Op <= ACCEL_WINDOW_PRODUCT ? (T)acc[j] : best[j];
    }
  }
}
#else
#define ACCEL_HOST_WINDOW_ROWS 0
#endif

/* Window reductions and scatters, one element type's (instantiated below per compute type). W is
 * the type sums and products accumulate in (64-bit modular integers, doubles for f32 where the
 * device has them: as Nx.BinaryBackend accumulates in Elixir numbers), K the function family.
 *
 * Window (in, out, geometry): work item i is output element i; geometry (b2, s64) holds the rank
 * r (at most ACCEL_MAX_RANK), then per dimension d (7 each): output size, input size, input stride, window size, window
 * stride, low padding, window dilation. The window's elements in the padding are skipped (they are
 * the operation's identity, as Nx pads); max and min start from the identity given as bits[0]. */
#define ACCEL_WINDOW_GEOMETRY 7
/* On the host: the run's outputs whose windows lie inside the input (all of them without
 * padding), through accel_window_rows in blocks; the kernel's loop skips them. */
#if ACCEL_HOST_WINDOW_ROWS
#define ACCEL_WINDOW_HOST_ROWS(S, T, W, K)                                                            \
  if (lead_inside && nspans <= 2 && run >= 8) {                                                       \
    /* outputs r0 <= r < r1: first[last] + r * stride >= 0 and its window's end below the limit */   \
    const accel_i64 f0 = first[last], span = (size[last] - 1) * dil[last];                            \
    const accel_i64 lo = f0 >= 0 ? 0 : (-f0 + stride - 1) / stride;                                   \
    const accel_i64 room = limit[last] - span - f0; /* first + r * stride < room */                  \
    accel_i64 hi = room <= 0 ? 0 : (room - 1) / stride + 1;                                          \
    if (hi > (accel_i64)run) hi = (accel_i64)run;                                                     \
    if (hi - lo >= 8) {                                                                               \
      skip_from = (accel_u64)lo;                                                                      \
      skip_to = (accel_u64)hi;                                                                        \
      const int d0 = nspans > 0 ? spans[0] : 0, d1 = nspans > 1 ? spans[1] : 0;                      \
      const accel_i64 n0 = nspans > 0 ? size[d0] : 1, n1 = nspans > 1 ? size[d1] : 1;                \
      const accel_u64 s0 = nspans > 0 ? (accel_u64)(dil[d0] * step[d0]) : 0;                          \
      const accel_u64 s1 = nspans > 1 ? (accel_u64)(dil[d1] * step[d1]) : 0;                          \
      const accel_u64 by = (accel_u64)stride * (accel_u64)step[last];                                 \
      const accel_u64 at = base + (accel_u64)(f0 + lo * stride) * (accel_u64)step[last];              \
      T* const out = select ? nullptr : (T*)b1 + i * run + lo;                                        \
      const accel_u64 m = (accel_u64)(hi - lo);                                                       \
      accel_i64 picked[64];                                                                           \
      const auto pick = [](T a, T x) {                                                                \
        return ACCEL_PICK_##K(T, ACCEL_OP == ACCEL_WINDOW_MIN ? ACCEL_REDUCE_MIN : ACCEL_REDUCE_MAX, a, x); \
      };                                                                                              \
      for (accel_u64 b0_ = 0; b0_ < m; b0_ += (scatter ? 64 : m)) {                                   \
        const accel_u64 mm = scatter ? (m - b0_ < 64 ? m - b0_ : 64) : m;                             \
        accel_i64* const where = scatter ? picked : chosen_at + lo;                                   \
        const accel_u64 from = at + b0_ * by;                                                         \
        if (by == 1)                                                                                  \
          accel_window_rows<ACCEL_OP, 1, T, W>(in, from, by, mm, n0, s0, n1, s1, init, out, where, pick); \
        else if (by == 2)                                                                             \
          accel_window_rows<ACCEL_OP, 2, T, W>(in, from, by, mm, n0, s0, n1, s1, init, out, where, pick); \
        else                                                                                          \
          accel_window_rows<ACCEL_OP, 0, T, W>(in, from, by, mm, n0, s0, n1, s1, init, out, where, pick); \
        for (accel_u64 j = 0; scatter && j < mm; ++j)                                                 \
          ((T*)b1)[picked[j]] = (T)(init + ((const T*)b3)[i * run + lo + b0_ + j]);                   \
      }                                                                                               \
    }                                                                                                 \
  }
#else
#define ACCEL_WINDOW_HOST_ROWS(S, T, W, K)
#endif
#define ACCEL_INDEXED_KERNELS_OF(S, T, W, K)                                                          \
  /* Item i is a run of count[0] outputs along the last dimension (its whole length): the */       \
  /* coordinates are found once per run. A window wholly inside the input is walked by offsets */    \
  /* alone; one that reaches into the padding checks each position. The select operations */         \
  /* (ACCEL_WINDOW_SELECT_MAX/MIN, pooling's gradient) write instead, to b3 (s64), the position in */ \
  /* the input of the window's last greatest (least) element, padding read as bits[0] and chosen */  \
  /* as -1: what Nx's window_scatter_max/min select. */                                               \
  ACCEL_KERNEL(accel_window_##S) {                                                                    \
    ACCEL_GLOBAL const accel_i64* g = (ACCEL_GLOBAL const accel_i64*)b2;                             \
    const int rank = (int)g[0];                                                                       \
    ACCEL_GLOBAL const T* in = (ACCEL_GLOBAL const T*)b0;                                             \
    const int op = ACCEL_OP, select = op >= ACCEL_WINDOW_SELECT_MAX;                                  \
    /* per dimension: the window's first position, size, dilation, input size and stride */         \
    accel_i64 first[ACCEL_MAX_RANK], k[ACCEL_MAX_RANK], size[ACCEL_MAX_RANK], dil[ACCEL_MAX_RANK];   \
    accel_i64 limit[ACCEL_MAX_RANK], step[ACCEL_MAX_RANK];                                           \
    accel_u64 rest = i;                                                                               \
    int empty = 0;                                                                                    \
    for (int d = rank - 1; d >= 0; --d) {                                                            \
      ACCEL_GLOBAL const accel_i64* gd = g + 1 + d * ACCEL_WINDOW_GEOMETRY;                          \
      const accel_i64 o = d == rank - 1 ? 0 : (accel_i64)(rest % (accel_u64)gd[0]);                  \
      if (d != rank - 1) rest /= (accel_u64)gd[0];                                                    \
      first[d] = o * gd[4] - gd[5];                                                                   \
      size[d] = gd[3];                                                                                \
      dil[d] = gd[6];                                                                                 \
      limit[d] = gd[1];                                                                               \
      step[d] = gd[2];                                                                                \
      k[d] = 0;                                                                                       \
      if (gd[1] == 0) empty = 1;                                                                      \
    }                                                                                                 \
    const accel_u64 run = p->count[0];                                                                \
    const accel_i64 stride = g[1 + (rank - 1) * ACCEL_WINDOW_GEOMETRY + 4];                          \
    const T init = ACCEL_SCALAR_##K(T, p->bits[0]);                                                   \
    /* the dimensions a window spans (size above 1), each with its step in the input, and what */   \
    /* the leading dimensions contribute to the offset and to being inside, once per run */         \
    int spans[ACCEL_MAX_RANK], nspans = 0;                                                            \
    accel_u64 base = 0;                                                                               \
    int lead_inside = !empty;                                                                         \
    for (int d = 0; d < rank; ++d) {                                                                  \
      if (size[d] > 1) spans[nspans++] = d;                                                           \
      if (d == rank - 1) continue;                                                                    \
      if (first[d] < 0 || first[d] + (size[d] - 1) * dil[d] >= limit[d]) lead_inside = 0;             \
      base += (accel_u64)first[d] * (accel_u64)step[d];                                               \
    }                                                                                                 \
    const int last = rank - 1;                                                                        \
    /* Select operations with size[0] set write, instead of positions, out[position] = init + */       \
    /* source (b1 out, filled with init, b3 source): the scatter of windows that do not overlap. */    \
    const int scatter = select && p->size[0] != 0;                                                    \
    ACCEL_GLOBAL accel_i64* chosen_at = select && !scatter ? (ACCEL_GLOBAL accel_i64*)b3 + i * run : 0; \
    accel_u64 skip_from = run, skip_to = run; /* outputs the host's loop below has computed */         \
    ACCEL_WINDOW_HOST_ROWS(S, T, W, K)                                                                \
    for (accel_u64 r = 0; r < run; ++r, first[last] += stride) {                                      \
      if (r == skip_from) {                                                                           \
        first[last] += (accel_i64)(skip_to - 1 - r) * stride;                                         \
        r = skip_to - 1;                                                                              \
        continue;                                                                                     \
      }                                                                                               \
      W acc = op == ACCEL_WINDOW_PRODUCT ? (W)1 : (W)0;                                               \
      T pick = init;                                                                                  \
      accel_i64 chosen = -1;                                                                          \
      const int inside_all = lead_inside && first[last] >= 0 && first[last] + (size[last] - 1) * dil[last] < limit[last]; \
      accel_u64 at = base + (accel_u64)first[last] * (accel_u64)step[last];                           \
      if (inside_all && nspans <= 2) {                                                                \
        /* pooling's windows (two spanned dimensions at most): two plain loops, in window order */   \
        const int d0 = nspans > 0 ? spans[0] : 0, d1 = nspans > 1 ? spans[1] : 0;                    \
        const accel_i64 n0 = nspans > 0 ? size[d0] : 1, n1 = nspans > 1 ? size[d1] : 1;              \
        const accel_u64 s0 = nspans > 0 ? (accel_u64)(dil[d0] * step[d0]) : 0;                        \
        const accel_u64 s1 = nspans > 1 ? (accel_u64)(dil[d1] * step[d1]) : 0;                        \
        for (accel_i64 a = 0; a < n0; ++a)                                                            \
          for (accel_i64 c = 0; c < n1; ++c) {                                                        \
            const accel_u64 off = at + (accel_u64)a * s0 + (accel_u64)c * s1;                         \
            const T x = in[off];                                                                      \
            if (op == ACCEL_WINDOW_SUM) acc += (W)x;                                                  \
            else if (op == ACCEL_WINDOW_PRODUCT) acc *= (W)x;                                         \
            else if (select) {                                                                        \
              /* (the last greatest or least: chosen without a branch on the data) */                  \
              const int take = (a == 0 && c == 0) || (op == ACCEL_WINDOW_SELECT_MAX ? x >= pick : x <= pick); \
              pick = take ? x : pick;                                                                 \
              chosen = take ? (accel_i64)off : chosen;                                                \
            } else pick = ACCEL_PICK_##K(T, op == ACCEL_WINDOW_MAX ? ACCEL_REDUCE_MAX : ACCEL_REDUCE_MIN, pick, x); \
          }                                                                                           \
      } else if (inside_all) {                                                                        \
        /* by offsets: each spanned coordinate's step, undone when it wraps */                       \
        for (accel_i64 e = 0;; ++e) {                                                                 \
          const T x = in[at];                                                                         \
          if (op == ACCEL_WINDOW_SUM) acc += (W)x;                                                    \
          else if (op == ACCEL_WINDOW_PRODUCT) acc *= (W)x;                                           \
          else if (select) {                                                                          \
            /* (chosen without a branch: which element wins is data, and mispredicted) */              \
            const int take = e == 0 || (op == ACCEL_WINDOW_SELECT_MAX ? x >= pick : x <= pick);       \
            pick = take ? x : pick;                                                                   \
            chosen = take ? (accel_i64)at : chosen;                                                   \
          } else pick = ACCEL_PICK_##K(T, op == ACCEL_WINDOW_MAX ? ACCEL_REDUCE_MAX : ACCEL_REDUCE_MIN, pick, x); \
          int s = nspans - 1;                                                                         \
          for (; s >= 0; --s) {                                                                       \
            const int d = spans[s];                                                                   \
            at += (accel_u64)(dil[d] * step[d]);                                                      \
            if (++k[d] < size[d]) break;                                                              \
            at -= (accel_u64)(size[d] * dil[d] * step[d]);                                            \
            k[d] = 0;                                                                                 \
          }                                                                                           \
          if (s < 0) break;                                                                           \
        }                                                                                             \
      } else {                                                                                        \
        for (int more = !empty || select, e = 0; more; ++e) {                                         \
          at = 0;                                                                                     \
          int inside = !empty;                                                                        \
          for (int d = 0; d < rank; ++d) {                                                            \
            const accel_i64 pos = first[d] + k[d] * dil[d];                                           \
            if (pos < 0 || pos >= limit[d]) inside = 0;                                               \
            at += (accel_u64)pos * (accel_u64)step[d];                                                \
          }                                                                                           \
          if (select) {                                                                               \
            const T x = inside ? in[at] : init;                                                       \
            if (e == 0 || (op == ACCEL_WINDOW_SELECT_MAX ? x >= pick : x <= pick)) {                  \
              pick = x;                                                                               \
              chosen = inside ? (accel_i64)at : -1;                                                   \
            }                                                                                         \
          } else if (inside) {                                                                        \
            const T x = in[at];                                                                       \
            if (op == ACCEL_WINDOW_SUM) acc += (W)x;                                                  \
            else if (op == ACCEL_WINDOW_PRODUCT) acc *= (W)x;                                         \
            else pick = ACCEL_PICK_##K(T, op == ACCEL_WINDOW_MAX ? ACCEL_REDUCE_MAX : ACCEL_REDUCE_MIN, pick, x); \
          }                                                                                           \
          int d = rank - 1;                                                                           \
          while (d >= 0 && ++k[d] == size[d]) k[d--] = 0;                                             \
          more = d >= 0;                                                                              \
        }                                                                                             \
      }                                                                                               \
      if (scatter) {                                                                                  \
        if (chosen >= 0)                                                                              \
          ((ACCEL_GLOBAL T*)b1)[chosen] = (T)(init + ((ACCEL_GLOBAL const T*)b3)[i * run + r]);       \
      } else if (select) chosen_at[r] = chosen;                                                       \
      else ((ACCEL_GLOBAL T*)b1)[i * run + r] = op <= ACCEL_WINDOW_PRODUCT ? (T)acc : pick;           \
    }                                                                                                 \
  }                                                                                                   \
  /* Window scatter (selections, source, geometry as a window's, out): out has the input's shape */ \
  /* (contiguous); work item i is a run of count[0] out elements along the last dimension (its */     \
  /* whole length: the leading coordinates and their windows' ranges found once per run), each */    \
  /* element init (bits[0]) plus, in window order, the source element of each window whose */         \
  /* selection (the select operation's, s64) is that element, each sum rounded to T as Nx adds. */   \
  ACCEL_KERNEL(accel_window_scatter_##S) {                                                           \
    ACCEL_GLOBAL const accel_i64* g = (ACCEL_GLOBAL const accel_i64*)b2;                            \
    ACCEL_GLOBAL const accel_i64* selected = (ACCEL_GLOBAL const accel_i64*)b0;                      \
    ACCEL_GLOBAL const T* source = (ACCEL_GLOBAL const T*)b1;                                        \
    const int rank = (int)g[0], last = rank - 1;                                                     \
    const accel_u64 run = p->count[0];                                                               \
    /* the range of windows [lo, hi] holding the run's elements on each leading dimension (padded */ \
    /* coordinates) */                                                                               \
    accel_i64 lo[ACCEL_MAX_RANK], hi[ACCEL_MAX_RANK], w[ACCEL_MAX_RANK];                             \
    accel_u64 rest = i;                                                                              \
    int lead = 1;                                                                                    \
    for (int d = last - 1; d >= 0; --d) {                                                            \
      ACCEL_GLOBAL const accel_i64* gd = g + 1 + d * ACCEL_WINDOW_GEOMETRY;                         \
      const accel_i64 q = (accel_i64)(rest % (accel_u64)gd[1]) + gd[5];                              \
      rest /= (accel_u64)gd[1];                                                                      \
      const accel_i64 first = q - gd[3] + 1;                                                         \
      lo[d] = first <= 0 ? 0 : (first + gd[4] - 1) / gd[4];                                          \
      hi[d] = q / gd[4];                                                                             \
      if (hi[d] > gd[0] - 1) hi[d] = gd[0] - 1;                                                      \
      if (lo[d] > hi[d]) lead = 0;                                                                   \
    }                                                                                                \
    ACCEL_GLOBAL const accel_i64* gl = g + 1 + last * ACCEL_WINDOW_GEOMETRY;                        \
    const T init = ACCEL_SCALAR_##K(T, p->bits[0]);                                                  \
    /* (a walk over the windows ends with each leading w[d] back at lo[d]: set once per run) */       \
    for (int d = 0; d < last; ++d) w[d] = lo[d];                                                     \
    /* The last dimension's windows holding element x, from q = x + low padding (never negative): */ \
    /* hi = floor(q / stride), lo = ceil((q - window + 1) / stride) (at least 0), each quotient and */ \
    /* remainder stepped with x rather than divided again (two 64-bit divisions an element). */     \
    const accel_i64 ls = gl[4], q0 = gl[5], f0 = q0 - gl[3] + 1;                                     \
    accel_i64 hd = q0 / ls, hm = q0 % ls;                                                            \
    accel_i64 fd = f0 >= 0 ? f0 / ls : -((-f0 + ls - 1) / ls), fm = f0 - fd * ls;                    \
    /* Windows that do not overlap (pooling's: one window at most on each leading dimension, a */   \
    /* stride at least the window on the last): element x is in window floor(q / stride) where */   \
    /* q's remainder is below the window's size, the only one that can have selected it. */          \
    int single = lead && ls >= gl[3];                                                                \
    accel_u64 lead_at = 0;                                                                           \
    for (int d = 0; d < last; ++d) {                                                                 \
      if (lo[d] != hi[d]) single = 0;                                                                \
      lead_at = lead_at * (accel_u64)g[1 + d * ACCEL_WINDOW_GEOMETRY] + (accel_u64)lo[d];            \
    }                                                                                                \
    for (accel_u64 x = 0; single && x < run; ++x) {                                                  \
      const accel_u64 e = i * run + x, at = lead_at * (accel_u64)gl[0] + (accel_u64)hd;              \
      T acc = init;                                                                                  \
      /* (whether the window chose x is data: taken without a branch, one in four in a 2 x 2 pool) */ \
      if (hm < gl[3] && hd < gl[0]) {                                                                \
        /* (an index, not a conditional: compilers turn the latter back into a branch) */            \
        const T pair[2] = {init, (T)(init + source[at])};                                            \
        acc = pair[selected[at] == (accel_i64)e];                                                    \
      }                                                                                              \
      ((ACCEL_GLOBAL T*)b3)[e] = acc;                                                                \
      if (++hm == ls) hm = 0, ++hd;                                                                  \
    }                                                                                                \
    for (accel_u64 x = 0; !single && x < run; ++x) {                                                 \
      const accel_u64 e = i * run + x;                                                               \
      lo[last] = fd + (fm != 0);                                                                     \
      if (lo[last] < 0) lo[last] = 0;                                                                \
      hi[last] = hd;                                                                                 \
      if (hi[last] > gl[0] - 1) hi[last] = gl[0] - 1;                                                \
      if (++hm == ls) hm = 0, ++hd;                                                                  \
      if (++fm == ls) fm = 0, ++fd;                                                                  \
      T acc = init;                                                                                  \
      int any = lead && lo[last] <= hi[last];                                                        \
      w[last] = lo[last];                                                                            \
      while (any) {                                                                                  \
        accel_u64 at = 0;                                                                            \
        for (int d = 0; d < rank; ++d) at = at * (accel_u64)g[1 + d * ACCEL_WINDOW_GEOMETRY] + (accel_u64)w[d]; \
        if (selected[at] == (accel_i64)e) acc = (T)(acc + source[at]);                               \
        int d = last;                                                                                \
        for (; d >= 0; --d) {                                                                        \
          if (w[d] < hi[d]) {                                                                        \
            ++w[d];                                                                                  \
            break;                                                                                   \
          }                                                                                          \
          w[d] = lo[d];                                                                              \
        }                                                                                            \
        if (d < 0) any = 0;                                                                          \
      }                                                                                              \
      ((ACCEL_GLOBAL T*)b3)[e] = acc;                                                                \
    }                                                                                                \
  }                                                                                                  \
  /* Scan (in, out): work item i is line i of in[outer][len][inner] (size[0] = len, size[1] = */      \
  /* inner), each element the sum, product, max or min (ACCEL_WINDOW_* codes) of those before it */   \
  /* and itself, from the end with size[2] set; accumulated in W, written as T: Nx's cumulative_*. */ \
  ACCEL_KERNEL(accel_scan_##S) {                                                                      \
    const accel_u64 len = p->size[0], inner = p->size[1], reverse = p->size[2];                       \
    const accel_u64 base = i / inner * len * inner + i % inner;                                       \
    ACCEL_GLOBAL const T* in = (ACCEL_GLOBAL const T*)b0;                                             \
    ACCEL_GLOBAL T* out = (ACCEL_GLOBAL T*)b1;                                                        \
    const int op = ACCEL_OP;                                                                          \
    W acc = op == ACCEL_WINDOW_PRODUCT ? (W)1 : (W)0;                                                 \
    T pick = (T)0;                                                                                    \
    for (accel_u64 j = 0; j < len; ++j) {                                                             \
      const accel_u64 at = base + (reverse ? len - 1 - j : j) * inner;                                \
      const T x = in[at];                                                                             \
      if (op == ACCEL_WINDOW_SUM) {                                                                   \
        acc += (W)x;                                                                                  \
        out[at] = (T)acc;                                                                             \
      } else if (op == ACCEL_WINDOW_PRODUCT) {                                                        \
        acc *= (W)x;                                                                                  \
        out[at] = (T)acc;                                                                             \
      } else {                                                                                        \
        pick = j == 0 ? x : ACCEL_PICK_##K(T, op == ACCEL_WINDOW_MAX ? ACCEL_REDUCE_MAX : ACCEL_REDUCE_MIN, pick, x); \
        out[at] = pick;                                                                               \
      }                                                                                               \
    }                                                                                                 \
  }                                                                                                   \
  /* Matrix product (a, b, out) of m x k by k x n (size[0..2]) where no BLAS serves the type */    \
  /* (integers): work item i is out element i, its row of a by its column of b summed in W (for */    \
  /* integers modulo 2^64, so the result wraps in T as Nx's integer dot does). */                    \
  ACCEL_KERNEL(accel_matmul_##S) {                                                                    \
    const accel_u64 k = p->size[1], n = p->size[2];                                                   \
    ACCEL_GLOBAL const T* a = (ACCEL_GLOBAL const T*)b0 + i / n * k;                                  \
    ACCEL_GLOBAL const T* b = (ACCEL_GLOBAL const T*)b1 + i % n;                                      \
    W acc = (W)0;                                                                                     \
    for (accel_u64 j = 0; j < k; ++j) acc += (W)a[j] * (W)b[j * n];                                   \
    ((ACCEL_GLOBAL T*)b2)[i] = (T)acc;                                                                \
  }                                                                                                   \
  /* Scatter (out in place, indices, updates, flag): work item i is element i of the slice each */  \
  /* update writes (shape, rank; stride[0] in out, stride[1] in an update). Updates b < count[0], */ \
  /* count[1] elements apart, are applied in order: out[offset(b) + slice(i)] is replaced (put) or */ \
  /* added to (add); offset(b) is the sum over the layout[0] indexed axes k of indices[b * layout[0] */ \
  /* + k] * stride[2][k], each index below size[k]. An update whose index lies outside is skipped */  \
  /* and raises the flag. */                                                                         \
  ACCEL_KERNEL(accel_scatter_##S) {                                                                   \
    ACCEL_GLOBAL T* out = (ACCEL_GLOBAL T*)b0;                                                        \
    ACCEL_GLOBAL const accel_i64* indices = (ACCEL_GLOBAL const accel_i64*)b1;                       \
    ACCEL_GLOBAL const T* updates = (ACCEL_GLOBAL const T*)b2;                                        \
    const accel_u64 slice = accel_strided_index(p, 0, i), from = accel_strided_index(p, 1, i);       \
    const accel_u64 axes = p->layout[0];                                                              \
    for (accel_u64 b = 0; b < p->count[0]; ++b) {                                                     \
      accel_u64 at = slice;                                                                           \
      int inside = 1;                                                                                 \
      for (accel_u64 k = 0; k < axes; ++k) {                                                          \
        const accel_i64 index = indices[b * axes + k];                                                \
        if (index < 0 || (accel_u64)index >= p->size[k]) inside = 0;                                  \
        at += (accel_u64)index * p->stride[2][k];                                                     \
      }                                                                                               \
      if (!inside) {                                                                                  \
        ACCEL_SET_FLAG((ACCEL_GLOBAL int*)b3, 1);                                                     \
        continue;                                                                                     \
      }                                                                                               \
      const T u = updates[b * p->count[1] + from];                                                    \
      if (ACCEL_OP == ACCEL_SCATTER_PUT) out[at] = u;                                                 \
      else out[at] = (T)((W)out[at] + (W)u);                                                          \
    }                                                                                                 \
  }
/* Stable sorts of rows (values b0 -> b2, with count[1] set their indices b1 -> b3 as well, or with
 * count[2] set too, each element's position as its index), size[0] the row length. The order is
 * Nx's: ascending with NaN last, or descending (op odd) with NaN first; equal elements keep their
 * order. Operations, by op / 2: 0, item i sorts block i of a row (size[1] elements) by insertion; 1,
 * item i merges pair i of sorted runs of size[1] in a row (for CPUs: one sequential pass); 2, item i
 * places element i by binary search in the other run of its pair (for GPUs). */
#define ACCEL_SORT_KERNELS_OF(S, T, K)                                                                \
  ACCEL_FN int accel_before_##S(T a, T b, int desc) {                                                  \
    const int a_nan = ACCEL_IS_NAN_##K(a), b_nan = ACCEL_IS_NAN_##K(b);                                \
    if (desc) return a_nan ? !b_nan : !b_nan && a > b;                                                 \
    return a_nan ? 0 : b_nan || a < b;                                                                 \
  }                                                                                                    \
  ACCEL_KERNEL(accel_sort_##S) {                                                                       \
    ACCEL_GLOBAL const T* in = (ACCEL_GLOBAL const T*)b0;                                              \
    ACCEL_GLOBAL T* out = (ACCEL_GLOBAL T*)b2;                                                         \
    ACCEL_GLOBAL const accel_i64* in_index = (ACCEL_GLOBAL const accel_i64*)b1;                        \
    ACCEL_GLOBAL accel_i64* out_index = (ACCEL_GLOBAL accel_i64*)b3;                                   \
    const int desc = ACCEL_OP & 1, mode = ACCEL_OP >> 1;                                               \
    const int carry = p->count[1] != 0, implicit = p->count[2] != 0;                                   \
    const accel_u64 len = p->size[0], width = p->size[1];                                              \
    if (mode == 0) {                                                                                   \
      const accel_u64 blocks = (len + width - 1) / width;                                              \
      const accel_u64 row = i / blocks * len, start = i % blocks * width;                             \
      const accel_u64 end = start + width < len ? start + width : len;                                 \
      for (accel_u64 j = start; j < end; ++j) {                                                        \
        const T x = in[row + j];                                                                       \
        const accel_i64 xi = carry ? (implicit ? (accel_i64)j : in_index[row + j]) : 0;                \
        accel_u64 k = j;                                                                               \
        while (k > start && accel_before_##S(x, out[row + k - 1], desc)) {                             \
          out[row + k] = out[row + k - 1];                                                             \
          if (carry) out_index[row + k] = out_index[row + k - 1];                                      \
          --k;                                                                                         \
        }                                                                                              \
        out[row + k] = x;                                                                              \
        if (carry) out_index[row + k] = xi;                                                            \
      }                                                                                                \
    } else if (mode == 1) {                                                                            \
      const accel_u64 pairs = (len + 2 * width - 1) / (2 * width);                                     \
      const accel_u64 row = i / pairs * len, a = i % pairs * 2 * width;                               \
      const accel_u64 a_end = a + width < len ? a + width : len;                                       \
      const accel_u64 b_end = a_end + width < len ? a_end + width : len;                               \
      accel_u64 x = a, y = a_end, k = a;                                                               \
      while (k < b_end) {                                                                              \
        /* the right run's element first only when strictly before: stability */                     \
        const int right = x == a_end || (y < b_end && accel_before_##S(in[row + y], in[row + x], desc)); \
        const accel_u64 from = right ? y++ : x++;                                                      \
        out[row + k] = in[row + from];                                                                 \
        if (carry) out_index[row + k] = in_index[row + from];                                          \
        ++k;                                                                                           \
      }                                                                                                \
    } else {                                                                                           \
      const accel_u64 row = i / len * len, j = i % len, run = j / width;                              \
      const accel_u64 start = run * width, other = (run ^ 1) * width;                                 \
      accel_u64 to = j;                                                                                \
      if (other < len) {                                                                               \
        const accel_u64 other_end = other + width < len ? other + width : len;                         \
        const T x = in[row + j];                                                                       \
        /* how many of the other run come first: strictly before x when x is on the left, */          \
        /* not after it when on the right */                                                           \
        accel_u64 lo = other, hi = other_end;                                                          \
        while (lo < hi) {                                                                              \
          const accel_u64 mid = lo + (hi - lo) / 2;                                                    \
          const int first = (run & 1) == 0 ? accel_before_##S(in[row + mid], x, desc)                  \
                                           : !accel_before_##S(x, in[row + mid], desc);                \
          if (first) lo = mid + 1;                                                                     \
          else hi = mid;                                                                               \
        }                                                                                              \
        to = (start < other ? start : other) + (j - start) + (lo - other);                            \
      }                                                                                                \
      out[row + to] = in[row + j];                                                                     \
      if (carry) out_index[row + to] = in_index[row + j];                                              \
    }                                                                                                  \
  }
ACCEL_SORT_KERNELS_OF(f32, float, F32)
ACCEL_SORT_KERNELS_OF(s64, accel_i64, INT)
ACCEL_SORT_KERNELS_OF(s32, accel_i32, INT)
ACCEL_SORT_KERNELS_OF(u8, accel_u8, INT)
ACCEL_SORT_KERNELS_OF(u64, accel_u64, UINT)
ACCEL_SORT_KERNELS_OF(u32, accel_u32, INT)
#if ACCEL_HAS_F64
ACCEL_SORT_KERNELS_OF(f64, double, F64)
#endif

ACCEL_INDEXED_KERNELS_OF(f32, float, accel_wide_float, F32)
ACCEL_INDEXED_KERNELS_OF(s64, accel_i64, accel_u64, INT)
ACCEL_INDEXED_KERNELS_OF(s32, accel_i32, accel_u64, INT)
ACCEL_INDEXED_KERNELS_OF(u8, accel_u8, accel_u64, INT)
ACCEL_INDEXED_KERNELS_OF(u64, accel_u64, accel_u64, UINT)
ACCEL_INDEXED_KERNELS_OF(u32, accel_u32, accel_u64, INT)
#if ACCEL_HAS_F64
ACCEL_INDEXED_KERNELS_OF(f64, double, double, F64)
#endif

/* Gather, by element size (in, indices, out, flag): work item i is output element i, at
 * coordinates c of p->shape (rank dimensions). It reads in[sum(c_d * stride[0][d]) + sum over the
 * layout[0] indexed axes k of indices[b * layout[0] + k] * stride[2][k]], where b = sum(c_d *
 * stride[1][d]) is its index tuple: take, take_along_axis and gather in one. An index outside
 * [0, size[k]) raises the flag and reads index 0 instead. With count[0] set, item i is a run of
 * count[0] elements along a last dimension the shape leaves out, one index tuple for the run, read
 * count[1] apart (an embedding's row). */
#define ACCEL_GATHER_KERNEL(BYTES, U)                                                              \
  ACCEL_KERNEL(accel_gather_##BYTES) {                                                             \
    accel_u64 at = 0, b = 0, rest = i;                                                             \
    for (int d = (int)p->rank - 1; d >= 0; --d) {                                                  \
      const accel_u64 c = rest % p->shape[d];                                                      \
      rest /= p->shape[d];                                                                         \
      at += c * p->stride[0][d];                                                                   \
      b += c * p->stride[1][d];                                                                    \
    }                                                                                              \
    ACCEL_GLOBAL const accel_i64* indices = (ACCEL_GLOBAL const accel_i64*)b1 + b * p->layout[0]; \
    for (accel_u64 k = 0; k < p->layout[0]; ++k) {                                                 \
      const accel_i64 index = indices[k];                                                          \
      if (index < 0 || (accel_u64)index >= p->size[k]) ACCEL_SET_FLAG((ACCEL_GLOBAL int*)b3, 1);   \
      else at += (accel_u64)index * p->stride[2][k];                                               \
    }                                                                                              \
    ACCEL_GLOBAL const U* in = (ACCEL_GLOBAL const U*)b0;                                          \
    ACCEL_GLOBAL U* out = (ACCEL_GLOBAL U*)b2;                                                     \
    const accel_u64 run = p->count[0], step = p->count[1];                                         \
    if (run == 0) out[i] = in[at];                                                                 \
    else if (step == 1) for (accel_u64 j = 0; j < run; ++j) out[i * run + j] = in[at + j];         \
    else for (accel_u64 j = 0; j < run; ++j) out[i * run + j] = in[at + j * step];                 \
  }
ACCEL_GATHER_KERNEL(1, accel_u8)
ACCEL_GATHER_KERNEL(2, accel_u16)
ACCEL_GATHER_KERNEL(4, accel_i32)
ACCEL_GATHER_KERNEL(8, accel_i64)

/* Transpose by element size, in tiles of size[2] x size[3] (at most 32 x 32) so that the reads and
 * the writes of neighbouring work items stay within a few cache lines; items cover whole tiles. */
#define ACCEL_TRANSPOSE_KERNEL(BYTES, U)                                                           \
  ACCEL_KERNEL(accel_transpose_##BYTES) {                                                          \
    const accel_u64 rows = p->size[0], cols = p->size[1], th = p->size[2], tw = p->size[3];        \
    const accel_u64 col_tiles = (cols + tw - 1) / tw, tile = i / (th * tw), w = i % (th * tw);     \
    const accel_u64 r = tile / col_tiles * th + w / tw, c = tile % col_tiles * tw + w % tw;        \
    if (r < rows && c < cols) ((ACCEL_GLOBAL U*)b1)[c * rows + r] = ((ACCEL_GLOBAL const U*)b0)[r * cols + c]; \
  }
/* 16-byte elements (c128) move as a pair of 8-byte words. */
typedef struct accel_b16 {
  accel_u64 lo, hi;
} accel_b16;
ACCEL_GATHER_KERNEL(16, accel_b16)
ACCEL_TRANSPOSE_KERNEL(1, accel_u8)
ACCEL_TRANSPOSE_KERNEL(2, accel_u16)
ACCEL_TRANSPOSE_KERNEL(4, accel_i32)
ACCEL_TRANSPOSE_KERNEL(8, accel_i64)
ACCEL_TRANSPOSE_KERNEL(16, accel_b16)

/* A region of p->shape copied between two strided layouts, by element size: element i of the
 * region is source[size[0] + sum(c_d * stride[0][d])] and target[size[1] + sum(c_d * stride[1][d])],
 * c its coordinates. slice (a strided source) and concatenate (an offset target) are copies. With
 * count[0] set, item i is a run of count[0] elements along an innermost dimension the shape leaves
 * out, count[1] apart in the source and count[2] in the target; with size[2] set too, size[2] such
 * runs along the dimension before it (also left out), size[3] apart in the source and size[4] in
 * the target (short innermost dimensions: im2col's patches). */
#define ACCEL_COPY_KERNEL(BYTES, U)                                                                \
  ACCEL_KERNEL(accel_copy_##BYTES) {                                                               \
    const accel_u64 from = p->size[0] + accel_strided_index(p, 0, i);                              \
    const accel_u64 to = p->size[1] + accel_strided_index(p, 1, i);                                \
    ACCEL_GLOBAL const U* in = (ACCEL_GLOBAL const U*)b0;                                          \
    ACCEL_GLOBAL U* out = (ACCEL_GLOBAL U*)b1;                                                     \
    const accel_u64 run = p->count[0], step_in = p->count[1], step_out = p->count[2];              \
    const accel_u64 rows = p->size[2] ? p->size[2] : 1;                                            \
    if (run == 0) {                                                                                \
      out[to] = in[from];                                                                          \
      return;                                                                                      \
    }                                                                                              \
    for (accel_u64 r = 0; r < rows; ++r) {                                                         \
      const accel_u64 f = from + r * p->size[3], t = to + r * p->size[4];                          \
      if (step_in == 1 && step_out == 1)                                                           \
        for (accel_u64 j = 0; j < run; ++j) out[t + j] = in[f + j];                                \
      else                                                                                         \
        for (accel_u64 j = 0; j < run; ++j) out[t + j * step_out] = in[f + j * step_in];           \
    }                                                                                              \
  }
ACCEL_COPY_KERNEL(1, accel_u8)
ACCEL_COPY_KERNEL(2, accel_u16)
ACCEL_COPY_KERNEL(4, accel_i32)
ACCEL_COPY_KERNEL(8, accel_i64)
ACCEL_COPY_KERNEL(16, accel_b16)

/* The logistic map over b0 in place (an :s64 tensor, or a streamed chunk), p->count[1] iterations:
 * size[0..5] are the plan's exact constants (accel_lm_params, in order); count[0] set selects the
 * f64 path, whose constants (p, 1 / p, mu) are bits[0..2]. count[2] set: the input is not read but
 * generated, element i being shape[0] + i * shape[1] (a range, in wrapping arithmetic: every element
 * lies between the range's ends, so it is exact). The math is kernels/logistic_map.h's. */
ACCEL_KERNEL(accel_logistic_map) {
  accel_lm_params c;
  c.p = p->size[0];
  c.mu_mod = p->size[1];
  c.barrett = p->size[2];
  c.mu_neg = (accel_i64)p->size[3];
  c.mu_small = (accel_i64)p->size[4];
  c.int_fast = (accel_i64)p->size[5];
  ACCEL_GLOBAL accel_i64* x = (ACCEL_GLOBAL accel_i64*)b0;
  const accel_i64 iterations = (accel_i64)p->count[1];
  const accel_i64 x0 = p->count[2] ? (accel_i64)(p->shape[0] + i * p->shape[1]) : x[i];
#if ACCEL_HAS_F64
  if (p->count[0]) {
    accel_lm_f64 f;
    f.p = accel_bits_f64(p->bits[0]);
    f.inv_p = accel_bits_f64(p->bits[1]);
    f.mu = accel_bits_f64(p->bits[2]);
    x[i] = accel_lm_iterate_f64(x0, iterations, c, f);
    return;
  }
#endif
  x[i] = accel_lm_iterate(x0, iterations, c);
}

/* Complex arithmetic (Accel.Nx.Complex), each element a pair of parts (T), computed in accel_cw
 * (double where the device has one: what Nx.BinaryBackend computes, rounded once) as accel_cz,
 * with the Complex library's formulas and its special case: a finite number over an infinite real
 * one is 0. accel_complex: b0 (operand 0) op b1 (operand 1) -> b2, operands placed by launch.h's
 * layouts in elements; op 0 multiplies, 1 divides, 2 adds, 3 subtracts, 4 converts (operand 0 as
 * it is read: a real one as x + 0i). Bit j of size[0] set: operand j is real (one T an element,
 * read as x + 0i), else pairs. accel_complex_abs: b0 -> b1 (T). */
/* Each product rounded on its own: on the host, GCC 12's SLP vectoriser recognises a complex
 * product and emits fmaddsub (fused, one rounding fewer) even under -ffp-contract=off; a product
 * held in a register of its own (an empty asm) is out of its reach. */
#if !defined(__OPENCL_VERSION__) && !defined(__CUDACC__) && defined(__GNUC__) && defined(__x86_64__)
#define ACCEL_ROUNDED(x) ({ __typeof__(x) accel_rounded_ = (x); __asm__("" : "+x"(accel_rounded_)); accel_rounded_; })
#elif !defined(__OPENCL_VERSION__) && !defined(__CUDACC__) && defined(__GNUC__)
#define ACCEL_ROUNDED(x) ({ __typeof__(x) accel_rounded_ = (x); __asm__("" : "+m"(accel_rounded_)); accel_rounded_; })
#else
#define ACCEL_ROUNDED(x) (x)
#endif
#if ACCEL_HAS_F64
typedef double accel_cw;
#define accel_cz_sign accel_f64_sign
#else
typedef float accel_cw;
#define accel_cz_sign accel_f32_sign
#endif
typedef struct {
  accel_cw re, im;
} accel_cz;
#define ACCEL_CZ_EXP_SIGNS 1
#define ACCEL_CZ_HALVES 2
ACCEL_FN accel_cz accel_cz_of(accel_cw re, accel_cw im) {
  accel_cz z;
  z.re = re;
  z.im = im;
  return z;
}
ACCEL_FN int accel_cz_finite(accel_cw x) { return x - x == 0; }
ACCEL_FN int accel_cz_infinite(accel_cw x) { return x == x && !(x - x == 0); }
ACCEL_FN accel_cz accel_cz_nan(void) {
  const accel_cw inf = (accel_cw)INFINITY;
  return accel_cz_of(inf - inf, inf - inf);
}
ACCEL_FN accel_cz accel_cz_one(void) { return accel_cz_of((accel_cw)1, (accel_cw)0); }
ACCEL_FN accel_cz accel_cz_add(accel_cz a, accel_cz b) { return accel_cz_of(a.re + b.re, a.im + b.im); }
ACCEL_FN accel_cz accel_cz_sub(accel_cz a, accel_cz b) { return accel_cz_of(a.re - b.re, a.im - b.im); }
ACCEL_FN accel_cz accel_cz_mul(accel_cz a, accel_cz b) {
  return accel_cz_of(ACCEL_ROUNDED(a.re * b.re) - ACCEL_ROUNDED(a.im * b.im),
                     ACCEL_ROUNDED(a.im * b.re) + ACCEL_ROUNDED(a.re * b.im));
}
/* The quotient's special case: a finite dividend over an infinite real divisor is 0. */
ACCEL_FN int accel_cz_div_zero(accel_cz a, accel_cz b) {
  return accel_cz_infinite(b.re) && b.im == 0 && accel_cz_finite(a.re) && accel_cz_finite(a.im);
}
ACCEL_FN accel_cz accel_cz_div(accel_cz a, accel_cz b) {
  if (accel_cz_div_zero(a, b)) return accel_cz_of((accel_cw)0, (accel_cw)0);
  const accel_cw den = ACCEL_ROUNDED(b.re * b.re) + ACCEL_ROUNDED(b.im * b.im);
  return accel_cz_of((ACCEL_ROUNDED(a.re * b.re) + ACCEL_ROUNDED(a.im * b.im)) / den,
                     (ACCEL_ROUNDED(a.im * b.re) - ACCEL_ROUNDED(a.re * b.im)) / den);
}
/* Complex.abs/1: NaN when both parts are, infinity when either is not finite; else the larger
 * magnitude times sqrt(1 + (smaller / larger)^2), or the other when one is 0 (which the formula
 * gives, bit for bit, unless both are). Every case computed and selected, without branches, so
 * that the host's loops vectorise; the precedence is the library's. */
ACCEL_FN accel_cw accel_cz_abs(accel_cz z) {
  const accel_cw x = z.re < 0 ? -z.re : z.re, y = z.im < 0 ? -z.im : z.im;
  const accel_cw big = x > y ? x : y, small = x > y ? y : x;
  const accel_cw q = small / big;
  accel_cw r = big * sqrt((accel_cw)1 + q * q);
  r = x == 0 ? y : r;
  r = (accel_cz_finite(x) && accel_cz_finite(y)) ? r : (accel_cw)INFINITY;
  return (x != x && y != y) ? x : r;
}
#define ACCEL_COMPLEX_KERNELS_OF(S, T)                                                                \
  ACCEL_KERNEL(accel_complex_##S) {                                                                   \
    const accel_u64 x = accel_operand_index(p, 0, i), y = accel_operand_index(p, 1, i);              \
    const int real_a = (int)(p->size[0] & 1), real_b = (int)(p->size[0] >> 1 & 1);                   \
    ACCEL_GLOBAL const T* a = (ACCEL_GLOBAL const T*)b0 + (real_a ? x : 2 * x);                       \
    ACCEL_GLOBAL const T* b = (ACCEL_GLOBAL const T*)b1 + (real_b ? y : 2 * y);                       \
    const accel_cz u = accel_cz_of((accel_cw)a[0], real_a ? (accel_cw)0 : (accel_cw)a[1]);            \
    const accel_cz v = accel_cz_of((accel_cw)b[0], real_b ? (accel_cw)0 : (accel_cw)b[1]);            \
    const accel_cz r = ACCEL_OP == 0   ? accel_cz_mul(u, v)                                           \
                       : ACCEL_OP == 1 ? accel_cz_div(u, v)                                           \
                       : ACCEL_OP == 2 ? accel_cz_add(u, v)                                           \
                       : ACCEL_OP == 3 ? accel_cz_sub(u, v)                                           \
                                       : u;                                                           \
    ACCEL_GLOBAL T* out = (ACCEL_GLOBAL T*)b2 + 2 * i;                                                \
    out[0] = (T)r.re;                                                                                 \
    out[1] = (T)r.im;                                                                                 \
  }                                                                                                   \
  ACCEL_KERNEL(accel_complex_abs_##S) {                                                               \
    ACCEL_GLOBAL const T* z = (ACCEL_GLOBAL const T*)b0 + 2 * i;                                      \
    ((ACCEL_GLOBAL T*)b1)[i] = (T)accel_cz_abs(accel_cz_of((accel_cw)z[0], (accel_cw)z[1]));           \
  }

/* Complex functions, one pass: accel_complex_fn: b0 -> b1, both of the complex type (pairs of T),
 * the function the unary operation code ACCEL_OP names (ops.h), with the Complex library's
 * formulas, operation for operation (each rounding the binary backend's), and its special cases.
 * p->size[0] names which of the two Complex 0.6.0 libraries to follow (Nx 0.7's and
 * Nx 0.13's dependencies): bit 0, exp(inf + yi) with the signs of cos(y) and sin(y); bit 1, sinh's
 * and cosh's halving part by part (else the quotient by 2 + 0i). The composition in Elixir that
 * these replace took one device pass per operation of the formula. */
ACCEL_FN accel_cz accel_cz_half(accel_cz z, int variant) {
  if (variant & ACCEL_CZ_HALVES) return accel_cz_of(z.re / 2, z.im / 2);
  return accel_cz_div(z, accel_cz_of((accel_cw)2, (accel_cw)0));
}
/* exp(re) (cos(im) + i sin(im)); by precedence: re = -inf gives 0; re = +inf with im not infinite
 * gives the infinities of the library's variant; a NaN part or an infinite im gives NaN + NaNi */
ACCEL_FN accel_cz accel_cz_exp(accel_cz z, int variant) {
  const accel_cw inf = (accel_cw)INFINITY;
  if (z.re == -inf) return accel_cz_of((accel_cw)0, (accel_cw)0);
  if (z.re == inf && !accel_cz_infinite(z.im)) {
    if (variant & ACCEL_CZ_EXP_SIGNS)
      return accel_cz_of(z.im != z.im ? inf : inf * accel_cz_sign(cos(z.im)), inf * accel_cz_sign(sin(z.im)));
    return accel_cz_of(inf, inf * z.im);
  }
  if (z.re != z.re || !accel_cz_finite(z.im)) return accel_cz_nan();
  const accel_cw rho = exp(z.re);
  return accel_cz_of(rho * cos(z.im), rho * sin(z.im));
}
/* IEEE's atan2, but a finite y over an infinite x is 0 (x = +inf) or pi (x = -inf) */
ACCEL_FN accel_cw accel_cz_atan2(accel_cw y, accel_cw x) {
  if (accel_cz_infinite(x) && accel_cz_finite(y)) return x > 0 ? (accel_cw)0 : (accel_cw)3.141592653589793;
  return atan2(y, x);
}
ACCEL_FN accel_cz accel_cz_log(accel_cz z) { return accel_cz_of(log(accel_cz_abs(z)), accel_cz_atan2(z.im, z.re)); }
/* sin(re) cosh(im) + cos(re) sinh(im) i; a finite re with an infinite im gives re im + im i */
ACCEL_FN accel_cz accel_cz_sin(accel_cz z) {
  if (accel_cz_finite(z.re) && accel_cz_infinite(z.im)) return accel_cz_of(z.re * z.im, z.im);
  return accel_cz_of(sin(z.re) * cosh(z.im), cos(z.re) * sinh(z.im));
}
/* cos(re) cosh(im) - sin(re) sinh(im) i; a finite re with an infinite im gives inf - (im re) i */
ACCEL_FN accel_cz accel_cz_cos(accel_cz z) {
  if (accel_cz_finite(z.re) && accel_cz_infinite(z.im)) return accel_cz_of((accel_cw)INFINITY, -z.im * z.re);
  return accel_cz_of(cos(z.re) * cosh(z.im), -sin(z.re) * sinh(z.im));
}
/* Complex.sqrt/1: x = |re|, y = |im|, w from the larger; the library's cases by precedence */
ACCEL_FN accel_cz accel_cz_sqrt(accel_cz z) {
  const accel_cw inf = (accel_cw)INFINITY, re = z.re, im = z.im;
  if (re != re || im != im) return accel_cz_nan();
  if (im == inf) return accel_cz_of(inf, inf);
  if (im == -inf) return accel_cz_of(inf, -inf);
  if (re == inf) return accel_cz_of(inf, (accel_cw)0);
  if (re == -inf) return accel_cz_of((accel_cw)0, inf);
  if (re == 0 && im == 0) return z;
  const accel_cw x = fabs(re), y = fabs(im), yx = y / x, xy = x / y;
  const accel_cw w = x >= y ? sqrt(x) * sqrt((sqrt(yx * yx + (accel_cw)1) + (accel_cw)1) * (accel_cw)0.5)
                            : sqrt(y) * sqrt((sqrt(xy * xy + (accel_cw)1) + xy) * (accel_cw)0.5);
  const accel_cw v = im >= 0 ? w : -w;
  if (re >= 0) return accel_cz_of(w, im / (w * 2));
  return accel_cz_of(im / (v * 2), v);
}
ACCEL_FN accel_cz accel_cz_negate(accel_cz z) { return accel_cz_of(-z.re, -z.im); }
ACCEL_FN int accel_cz_not_finite(accel_cz z) { return !(accel_cz_finite(z.re) && accel_cz_finite(z.im)); }
/* 0 + 1i, and its negation -0 - 1i */
ACCEL_FN accel_cz accel_cz_i(void) { return accel_cz_of((accel_cw)0, (accel_cw)1); }
ACCEL_FN accel_cz accel_cz_minus_i(void) { return accel_cz_of(-(accel_cw)0, (accel_cw)-1); }
ACCEL_FN accel_cz accel_cz_sinh(accel_cz z, int v) {
  return accel_cz_half(accel_cz_sub(accel_cz_exp(z, v), accel_cz_exp(accel_cz_negate(z), v)), v);
}
ACCEL_FN accel_cz accel_cz_cosh(accel_cz z, int v) {
  return accel_cz_half(accel_cz_add(accel_cz_exp(z, v), accel_cz_exp(accel_cz_negate(z), v)), v);
}
/* Complex.cbrt/1: from_polar(abs(z)^(1/3), phase(z) / 3), r + 0i where the angle is 0; the phase of
 * -inf - inf i is 5 pi / 4 */
ACCEL_FN accel_cz accel_cz_cbrt(accel_cz z) {
  const accel_cw r = pow(accel_cz_abs(z), (accel_cw)(1.0 / 3));
  const accel_cw theta = z.re == -(accel_cw)INFINITY && z.im == z.re ? (accel_cw)(5 * 3.141592653589793 / 4)
                                                                    : accel_cz_atan2(z.im, z.re);
  const accel_cw phi = theta / 3;
  if (phi == 0) return accel_cz_of(r, (accel_cw)0);
  return accel_cz_mul(accel_cz_of(r, (accel_cw)0), accel_cz_of(cos(phi), sin(phi)));
}
ACCEL_FN accel_cz accel_cz_apply(int op, accel_cz z, int v) {
  const accel_cz one = accel_cz_one();
  switch (op) {
    case ACCEL_UNARY_exp: return accel_cz_exp(z, v);
    case ACCEL_UNARY_log: return accel_cz_log(z);
    case ACCEL_UNARY_sqrt: return accel_cz_sqrt(z);
    case ACCEL_UNARY_rsqrt: return accel_cz_div(one, accel_cz_sqrt(z));
    case ACCEL_UNARY_expm1: return accel_cz_sub(accel_cz_exp(z, v), one);
    case ACCEL_UNARY_log1p: return accel_cz_log(accel_cz_add(z, one));
    case ACCEL_UNARY_sigmoid: return accel_cz_div(one, accel_cz_add(accel_cz_exp(accel_cz_negate(z), v), one));
    case ACCEL_UNARY_sin: return accel_cz_sin(z);
    case ACCEL_UNARY_cos: return accel_cz_cos(z);
    case ACCEL_UNARY_tan: return accel_cz_div(accel_cz_sin(z), accel_cz_cos(z));
    case ACCEL_UNARY_sinh: return accel_cz_sinh(z, v);
    case ACCEL_UNARY_cosh: return accel_cz_cosh(z, v);
    case ACCEL_UNARY_tanh: return accel_cz_div(accel_cz_sinh(z, v), accel_cz_cosh(z, v));
    /* asin(z) = -i log(iz + sqrt(1 - z^2)), acos(z) = -i log(z + sqrt(z^2 - 1)): NaN + NaNi
     * where a part is not finite; atan(z) = (0.5 i)(log(1 - iz) - log(1 + iz)) */
    case ACCEL_UNARY_asin:
      if (accel_cz_not_finite(z)) return accel_cz_nan();
      return accel_cz_mul(accel_cz_minus_i(),
                          accel_cz_log(accel_cz_add(accel_cz_mul(accel_cz_i(), z),
                                                    accel_cz_sqrt(accel_cz_sub(one, accel_cz_mul(z, z))))));
    case ACCEL_UNARY_acos:
      if (accel_cz_not_finite(z)) return accel_cz_nan();
      return accel_cz_mul(accel_cz_minus_i(),
                          accel_cz_log(accel_cz_add(z, accel_cz_sqrt(accel_cz_sub(accel_cz_mul(z, z), one)))));
    case ACCEL_UNARY_atan: {
      const accel_cz iz = accel_cz_mul(accel_cz_i(), z);
      const accel_cz half_i = accel_cz_mul(accel_cz_of((accel_cw)0.5, (accel_cw)0), accel_cz_i());
      return accel_cz_mul(half_i, accel_cz_sub(accel_cz_log(accel_cz_sub(one, iz)), accel_cz_log(accel_cz_add(one, iz))));
    }
    /* asinh(z) = log(z + sqrt(z^2 + 1)), acosh(z) = log(z + sqrt(z^2 - 1)),
     * atanh(z) = 0.5 log((1 + z) / (1 - z)) */
    case ACCEL_UNARY_asinh: return accel_cz_log(accel_cz_add(z, accel_cz_sqrt(accel_cz_add(accel_cz_mul(z, z), one))));
    case ACCEL_UNARY_acosh: return accel_cz_log(accel_cz_add(z, accel_cz_sqrt(accel_cz_sub(accel_cz_mul(z, z), one))));
    case ACCEL_UNARY_atanh:
      return accel_cz_mul(accel_cz_of((accel_cw)0.5, (accel_cw)0),
                          accel_cz_log(accel_cz_div(accel_cz_add(one, z), accel_cz_sub(one, z))));
    case ACCEL_UNARY_cbrt: return accel_cz_cbrt(z);
    default: return accel_cz_nan(); /* (the host checks the operation) */
  }
}
#define ACCEL_COMPLEX_FN_KERNEL_OF(S, T)                                                              \
  ACCEL_KERNEL(accel_complex_fn_##S) {                                                                \
    const ACCEL_GLOBAL T* in = (ACCEL_GLOBAL const T*)b0 + 2 * i;                                    \
    const accel_cz r = accel_cz_apply(ACCEL_OP, accel_cz_of((accel_cw)in[0], (accel_cw)in[1]), (int)p->size[0]); \
    ACCEL_GLOBAL T* out = (ACCEL_GLOBAL T*)b1 + 2 * i;                                                \
    out[0] = (T)r.re;                                                                                 \
    out[1] = (T)r.im;                                                                                 \
  }

#if ACCEL_HAS_F64
ACCEL_COMPLEX_KERNELS_OF(c64, float)
ACCEL_COMPLEX_KERNELS_OF(c128, double)
ACCEL_COMPLEX_FN_KERNEL_OF(c128, double)
#if ACCEL_VECTOR_LIBM
/* On the host, c64's exp, log, sin and cos through glibc's vector math (libmvec, tensor.h), whose
 * f64 results are within 4 ulps of the scalar functions' rather than equal to them, and still the
 * scalar functions' bits: an element whose parts, moved by 2^-40 of themselves either way (far
 * more than the few ulps between the two computations), round to the same f32 has the scalar
 * computation's f32 (rounding is monotonic); where one does not, or a part of the operand is not
 * finite (the library's special cases) or, for log, zero, its block of 64 is computed again by the
 * scalar functions above (about one block in 250 at random). The other functions, and c64 off the
 * host, take the scalar functions. */
template <int Op>
static inline void accel_cz_vector_c64(const float* in, float* out, accel_u64 begin, accel_u64 end, int variant) {
  const double lo = 1.0 - 0x1p-40, hi = 1.0 + 0x1p-40;
  int unsure = 0;
  for (accel_u64 i = begin; i < end; ++i) {
    const double re = in[2 * i], im = in[2 * i + 1];
    double r0, r1;
    int finite = accel_cz_finite(re) & accel_cz_finite(im);
    if constexpr (Op == ACCEL_UNARY_exp) {
      const double rho = accel_libm_exp(re);
      r0 = rho * accel_libm_cos(im);
      r1 = rho * accel_libm_sin(im);
    } else if constexpr (Op == ACCEL_UNARY_sin) {
      r0 = accel_libm_sin(re) * accel_libm_cosh(im);
      r1 = accel_libm_cos(re) * accel_libm_sinh(im);
    } else if constexpr (Op == ACCEL_UNARY_cos) {
      r0 = accel_libm_cos(re) * accel_libm_cosh(im);
      r1 = -accel_libm_sin(re) * accel_libm_sinh(im);
    } else {
      /* log (both parts finite and not zero) */
      finite &= (re != 0) & (im != 0);
      r0 = accel_libm_log(accel_cz_abs(accel_cz_of(re, im)));
      r1 = accel_libm_atan2(im, re);
    }
    const float f0 = (float)r0, f1 = (float)r1;
    unsure |= !finite | ((float)(r0 * lo) != (float)(r0 * hi)) | ((float)(r1 * lo) != (float)(r1 * hi));
    out[2 * i] = f0;
    out[2 * i + 1] = f1;
  }
  if (unsure)
    for (accel_u64 i = begin; i < end; ++i) {
      const accel_cz r = accel_cz_apply(Op, accel_cz_of(in[2 * i], in[2 * i + 1]), variant);
      out[2 * i] = (float)r.re;
      out[2 * i + 1] = (float)r.im;
    }
}
template <int Op, int Full>
static void accel_complex_fn_c64(ACCEL_KERNEL_ARGS, const accel_params* params, accel_u64 begin, accel_u64 end) {
  const float* in = (const float*)b0;
  float* out = (float*)b1;
  const int variant = (int)params->size[0];
  if constexpr (Op == ACCEL_UNARY_exp || Op == ACCEL_UNARY_log || Op == ACCEL_UNARY_sin || Op == ACCEL_UNARY_cos) {
    for (accel_u64 start = begin; start < end; start += 64)
      accel_cz_vector_c64<Op>(in, out, start, end - start < 64 ? end : start + 64, variant);
  } else {
    for (accel_u64 i = begin; i < end; ++i) {
      const accel_cz r = accel_cz_apply(Op, accel_cz_of(in[2 * i], in[2 * i + 1]), variant);
      out[2 * i] = (float)r.re;
      out[2 * i + 1] = (float)r.im;
    }
  }
}
#else
ACCEL_COMPLEX_FN_KERNEL_OF(c64, float)
#endif
#else
ACCEL_COMPLEX_KERNELS_OF(c64, float)
ACCEL_COMPLEX_FN_KERNEL_OF(c64, float)
#endif

#endif /* ACCEL_KERNELS_TENSOR_KERNELS_H */
