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

/* Sums in ACC, four chains at a time (latency), written as OUT. */
#define ACCEL_SUM_KERNEL(NAME, T, ACC, OUT)                                                         \
  ACCEL_KERNEL(NAME) {                                                                              \
    ACCEL_REDUCTION_ITEM(T);                                                                        \
    ACC a0 = 0, a1 = 0, a2 = 0, a3 = 0;                                                             \
    accel_u64 j = first;                                                                            \
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
  /* full: every operand has the output's layout (the host's vectorisable loop). */               \
  ACCEL_FN T accel_operand_##S(ACCEL_GLOBAL const void* b, const accel_params* p, int j, accel_u64 i, int full) { \
    if (full) return ((ACCEL_GLOBAL const T*)b)[i];                                                 \
    if (p->layout[j] == ACCEL_LAYOUT_SCALAR) return ACCEL_SCALAR_##K(T, p->bits[j]);                 \
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
    const accel_u8 pred = ((ACCEL_GLOBAL const accel_u8*)b0)[ACCEL_FULL ? i : accel_operand_index(p, 0, i)]; \
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
/* Devices without doubles: compensated (Kahan) sums in float, partials in float. */
ACCEL_KERNEL(accel_sum_f32) {
  ACCEL_REDUCTION_ITEM(float);
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
  return t == ACCEL_F32_TYPE || t == ACCEL_F64_TYPE || t == ACCEL_F16_TYPE || t == ACCEL_BF16_TYPE;
}
ACCEL_FN accel_i64 accel_load_int(ACCEL_GLOBAL const void* b, accel_u64 i, int t) {
  switch (t) {
    case ACCEL_S64_TYPE:
    case ACCEL_U64_TYPE: return ((ACCEL_GLOBAL const accel_i64*)b)[i];
    case ACCEL_S32_TYPE: return ((ACCEL_GLOBAL const accel_i32*)b)[i];
    case ACCEL_U32_TYPE: return ((ACCEL_GLOBAL const accel_u32*)b)[i];
    case ACCEL_S16_TYPE: return ((ACCEL_GLOBAL const accel_i16*)b)[i];
    case ACCEL_U16_TYPE: return ((ACCEL_GLOBAL const accel_u16*)b)[i];
    case ACCEL_S8_TYPE: return ((ACCEL_GLOBAL const accel_i8*)b)[i];
    default: return ((ACCEL_GLOBAL const accel_u8*)b)[i];
  }
}
ACCEL_FN accel_wide_float accel_load_float(ACCEL_GLOBAL const void* b, accel_u64 i, int t) {
  switch (t) {
#if ACCEL_HAS_F64
    case ACCEL_F64_TYPE: return ((ACCEL_GLOBAL const double*)b)[i];
#endif
    case ACCEL_F32_TYPE: return ((ACCEL_GLOBAL const float*)b)[i];
    case ACCEL_F16_TYPE: return accel_f16_to_f32(((ACCEL_GLOBAL const accel_u16*)b)[i]);
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
    default: ((ACCEL_GLOBAL accel_u8*)b)[i] = (accel_u8)(accel_u64)v; return;
  }
}
ACCEL_FN void accel_store_float(ACCEL_GLOBAL void* b, accel_u64 i, int t, accel_wide_float x) {
  switch (t) {
#if ACCEL_HAS_F64
    case ACCEL_F64_TYPE: ((ACCEL_GLOBAL double*)b)[i] = x; return;
    case ACCEL_F16_TYPE: ((ACCEL_GLOBAL accel_u16*)b)[i] = (accel_u16)accel_f64_to_f16(x); return;
#else
    case ACCEL_F16_TYPE: ((ACCEL_GLOBAL accel_u16*)b)[i] = (accel_u16)accel_f32_to_f16(x); return;
#endif
    case ACCEL_F32_TYPE: ((ACCEL_GLOBAL float*)b)[i] = (float)x; return;
    default: ((ACCEL_GLOBAL accel_u16*)b)[i] = (accel_u16)accel_f32_to_bf16((float)x); return; /* bf16 */
  }
}
ACCEL_KERNEL(accel_convert) {
  const int from = (int)p->size[0], to = (int)p->size[1];
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
  } else if (to == ACCEL_F32_TYPE || to == ACCEL_F16_TYPE || to == ACCEL_BF16_TYPE) {
    /* one rounding to f32 (f16's values are below 2^24, exact there, or beyond its range) */
    const float f = from == ACCEL_U64_TYPE ? (float)(accel_u64)v : (float)v;
    accel_store_float(b1, i, to, f);
  } else {
    accel_store_float(b1, i, to, from == ACCEL_U64_TYPE ? (accel_wide_float)(accel_u64)v : (accel_wide_float)v);
  }
}

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
ACCEL_TRANSPOSE_KERNEL(1, accel_u8)
ACCEL_TRANSPOSE_KERNEL(2, accel_u16)
ACCEL_TRANSPOSE_KERNEL(4, accel_i32)
ACCEL_TRANSPOSE_KERNEL(8, accel_i64)
ACCEL_TRANSPOSE_KERNEL(16, accel_b16)

/* A region of p->shape copied between two strided layouts, by element size: element i of the
 * region is source[size[0] + sum(c_d * stride[0][d])] and target[size[1] + sum(c_d * stride[1][d])],
 * c its coordinates. slice (a strided source) and concatenate (an offset target) are copies. */
#define ACCEL_COPY_KERNEL(BYTES, U)                                                                \
  ACCEL_KERNEL(accel_copy_##BYTES) {                                                               \
    ((ACCEL_GLOBAL U*)b1)[p->size[1] + accel_strided_index(p, 1, i)] =                             \
        ((ACCEL_GLOBAL const U*)b0)[p->size[0] + accel_strided_index(p, 0, i)];                    \
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

#endif /* ACCEL_KERNELS_TENSOR_KERNELS_H */
