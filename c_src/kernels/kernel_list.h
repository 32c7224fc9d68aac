/* Every tensor kernel, in Kernel-number order (core/kernel.hpp numbers them from this list, each
 * backend builds its table of entry points from it): X(name, ops), where ops is how many operation
 * codes the kernel serves. Typed kernels come in blocks of ACCEL_TYPED_KERNELS, one block per
 * compute type in type-code order (kernels/types.h: f32, f64, s64, s32, u8, u64, u32); casts
 * from-major in the same order; conversions involving storage types are one kernel, accel_convert. */
#ifndef ACCEL_KERNELS_KERNEL_LIST_H
#define ACCEL_KERNELS_KERNEL_LIST_H

#include "kernels/tensor.h"

#define ACCEL_TYPED_KERNELS 14
#define ACCEL_TYPED_KERNEL_LIST(X, S)                                                                  \
  X(accel_iota_##S, 1) X(accel_binary_##S, ACCEL_BINARY_COUNT) X(accel_unary_##S, ACCEL_UNARY_COUNT) \
  X(accel_sum_##S, 2) X(accel_pick_##S, ACCEL_PICK_OPS) X(accel_compare_##S, ACCEL_COMPARE_COUNT)    \
  X(accel_select_##S, 1) X(accel_argpick_##S, ACCEL_PICK_OPS) X(accel_window_##S, ACCEL_WINDOW_OPS) \
  X(accel_window_scatter_##S, 1) X(accel_scatter_##S, ACCEL_SCATTER_OPS)   \
  X(accel_sort_##S, ACCEL_SORT_OPS) X(accel_scan_##S, ACCEL_WINDOW_OPS) X(accel_matmul_##S, 1)
#define ACCEL_CASTS_FROM(X, F)                                                                  \
  X(accel_cast_##F##_f32, 1) X(accel_cast_##F##_f64, 1) X(accel_cast_##F##_s64, 1) \
  X(accel_cast_##F##_s32, 1) X(accel_cast_##F##_u8, 1) X(accel_cast_##F##_u64, 1) X(accel_cast_##F##_u32, 1)

#define ACCEL_KERNEL_LIST(X)                                                                          \
  ACCEL_TYPED_KERNEL_LIST(X, f32) ACCEL_TYPED_KERNEL_LIST(X, f64) ACCEL_TYPED_KERNEL_LIST(X, s64)    \
  ACCEL_TYPED_KERNEL_LIST(X, s32) ACCEL_TYPED_KERNEL_LIST(X, u8) ACCEL_TYPED_KERNEL_LIST(X, u64)     \
  ACCEL_TYPED_KERNEL_LIST(X, u32)                                                                    \
  ACCEL_CASTS_FROM(X, f32) ACCEL_CASTS_FROM(X, f64) ACCEL_CASTS_FROM(X, s64) ACCEL_CASTS_FROM(X, s32) \
  ACCEL_CASTS_FROM(X, u8) ACCEL_CASTS_FROM(X, u64) ACCEL_CASTS_FROM(X, u32)                          \
  X(accel_convert, 1)                                                                                \
  X(accel_transpose_1, 1) X(accel_transpose_2, 1) X(accel_transpose_4, 1) X(accel_transpose_8, 1)   \
  X(accel_transpose_16, 1)                                                                           \
  X(accel_copy_1, 1) X(accel_copy_2, 1) X(accel_copy_4, 1) X(accel_copy_8, 1) X(accel_copy_16, 1)   \
  X(accel_gather_1, 1) X(accel_gather_2, 1) X(accel_gather_4, 1) X(accel_gather_8, 1) X(accel_gather_16, 1) \
  X(accel_logistic_map, 1)                                                                          \
  X(accel_complex_c64, 5) X(accel_complex_c128, 5) X(accel_complex_abs_c64, 1) X(accel_complex_abs_c128, 1) \
  X(accel_complex_fn_c64, ACCEL_UNARY_COUNT) X(accel_complex_fn_c128, ACCEL_UNARY_COUNT)

#endif /* ACCEL_KERNELS_KERNEL_LIST_H */
