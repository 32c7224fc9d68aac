/* The launch door's kernel side: every tensor kernel has one signature, four buffers and one
 * accel_params record, so each backend launches any kernel the same way (by its Kernel number) and
 * the kernel's text is written once. ACCEL_KERNEL(name) { body } defines the body for one work item
 * `i` (reading p->...), and the entry point the dialect needs around it:
 *   OpenCL C:  __kernel name(b0..b3, params): one work item per i < p.n;
 *   CUDA C++:  __global__ name(b0..b3, params): a grid-stride loop over i < p.n;
 *   host C++:  template <int Op, int Full> name(b0..b3, &params, begin, end): a loop over
 *              [begin, end), with the operation code a compile-time constant, and Full the
 *              operands' layouts when they are the common ones (ACCEL_FULL_ALL: each has the
 *              output's; ACCEL_FULL_SCALAR_B / _A: operand 1 / 0 a scalar, the other the output's),
 *              so that those loops vectorise (CPU backend).
 * ACCEL_OP is the operation code inside a body, ACCEL_FULL that promise (0 on devices); ACCEL_SET_FLAG(int pointer, code) raises a flag that
 * many work items may raise at once. Also here: the one record every kernel takes, and how an
 * elementwise operand is indexed (broadcasting). */
#ifndef ACCEL_KERNELS_LAUNCH_H
#define ACCEL_KERNELS_LAUNCH_H

#include "kernels/dialect.h"

#define ACCEL_MAX_RANK 8

/* Only 8-byte fields, so that host C++, CUDA and OpenCL C lay it out identically. */
typedef struct accel_params {
  accel_u64 n;        /* work items */
  accel_i64 op;       /* the operation, for kernels that serve a family of them */
  accel_u64 size[6];  /* reductions (outer, len, inner, groups, block, has indices), transpose
                         (rows, cols, tile rows, tile cols), copies (source offset, target offset) */
  /* Elementwise operands j (a, b, and for select the third): layout[j] is 0 when it has the
   * output's shape, 1 for a scalar (bits[j], the bits of the element type), 2 when it repeats every
   * count[j] elements (a trailing-shape broadcast), 3 when it is read through stride[j] over the
   * output's shape (general broadcasting: stride 0 along a broadcast axis). Copies use shape and
   * stride[0] (source), stride[1] (target). */
  accel_u64 layout[3];
  accel_u64 count[3];
  accel_u64 bits[3];
  accel_u64 rank;
  accel_u64 shape[ACCEL_MAX_RANK];
  accel_u64 stride[3][ACCEL_MAX_RANK];
} accel_params;

/* ACCEL_FULL's values */
#define ACCEL_FULL_NONE 0
#define ACCEL_FULL_ALL 1
#define ACCEL_FULL_SCALAR_B 2
#define ACCEL_FULL_SCALAR_A 3

/* Element j of an operand for output element i: its index in the operand's buffer. */
#define ACCEL_LAYOUT_FULL 0
#define ACCEL_LAYOUT_SCALAR 1
#define ACCEL_LAYOUT_REPEAT 2
#define ACCEL_LAYOUT_STRIDED 3
ACCEL_FN accel_u64 accel_strided_index(const accel_params* p, int j, accel_u64 i) {
  accel_u64 index = 0;
  for (int d = (int)p->rank - 1; d >= 0; --d) {
    const accel_u64 dim = p->shape[d];
    index += i % dim * p->stride[j][d];
    i /= dim;
  }
  return index;
}
ACCEL_FN accel_u64 accel_operand_index(const accel_params* p, int j, accel_u64 i) {
  if (p->layout[j] == ACCEL_LAYOUT_FULL) return i;
  if (p->layout[j] == ACCEL_LAYOUT_REPEAT) return i % p->count[j];
  return accel_strided_index(p, j, i);
}

#if defined(__OPENCL_VERSION__)
#define ACCEL_GLOBAL __global
#define ACCEL_OP ((int)p->op)
#define ACCEL_FULL ACCEL_FULL_NONE
#define ACCEL_SET_FLAG(flag, code) (*(flag) = (code))
#define ACCEL_KERNEL_ARGS __global void *b0, __global void *b1, __global void *b2, __global void *b3
#define ACCEL_KERNEL(name)                                                         \
  static inline void name##_at(ulong i, ACCEL_KERNEL_ARGS, const accel_params* p); \
  __kernel void name(ACCEL_KERNEL_ARGS, const accel_params params) {               \
    const ulong i = get_global_id(0);                                              \
    if (i < params.n) name##_at(i, b0, b1, b2, b3, &params);                       \
  }                                                                                \
  static inline void name##_at(ulong i, ACCEL_KERNEL_ARGS, const accel_params* p)

#elif defined(__CUDACC__)
#define ACCEL_GLOBAL
#define ACCEL_OP ((int)p->op)
#define ACCEL_FULL ACCEL_FULL_NONE
#define ACCEL_SET_FLAG(flag, code) (*(flag) = (code))
#define ACCEL_KERNEL_ARGS void *b0, void *b1, void *b2, void *b3
#define ACCEL_KERNEL(name)                                                                                  \
  __device__ static inline void name##_at(accel_u64 i, ACCEL_KERNEL_ARGS, const accel_params* p);           \
  __global__ void name(ACCEL_KERNEL_ARGS, const accel_params params) {                                      \
    for (accel_u64 i = blockIdx.x * 1ULL * blockDim.x + threadIdx.x; i < params.n; i += 1ULL * blockDim.x * gridDim.x) \
      name##_at(i, b0, b1, b2, b3, &params);                                                                \
  }                                                                                                         \
  __device__ static inline void name##_at(accel_u64 i, ACCEL_KERNEL_ARGS, const accel_params* p)

#else /* host C++: the CPU backend */
#define ACCEL_GLOBAL
#define ACCEL_OP Op
#define ACCEL_FULL Full
#define ACCEL_SET_FLAG(flag, code) __atomic_store_n((flag), (code), __ATOMIC_RELAXED) /* threads may race */
#define ACCEL_KERNEL_ARGS [[maybe_unused]] void *b0, [[maybe_unused]] void *b1, [[maybe_unused]] void *b2, [[maybe_unused]] void *b3
/* The record is copied to a local first: stores through a u8 pointer may alias anything, and the
 * loop must not reload the sizes after each one. Each loop is a function of its own (noinline, one
 * call per block of elements or row): inlined into its entry's dispatch over every operation and
 * layout (backends/cpu/host_kernels.inc), GCC 12 left some loops scalar that it vectorises alone,
 * exp's, log's and sqrt's among them (4096 x 1024 f32 on 2 threads: exp 12-16 ms against 1.9, log
 * 13-15 against 3.0-3.3, sqrt 3.3-5.9 against 0.9-1.1, erf_inv 9.6-9.9 against 6.0-6.7; the same
 * code, so the same bits). */
#define ACCEL_KERNEL(name)                                                                                 \
  template <int Op, int Full>                                                                             \
  static inline void name##_at(accel_u64 i, ACCEL_KERNEL_ARGS, [[maybe_unused]] const accel_params* p);    \
  template <int Op, int Full>                                                                             \
  __attribute__((noinline)) static void name(ACCEL_KERNEL_ARGS, const accel_params* params, accel_u64 begin, \
                                             accel_u64 end) {                                              \
    const accel_params local = *params;                                                                    \
    for (accel_u64 i = begin; i < end; ++i) name##_at<Op, Full>(i, b0, b1, b2, b3, &local);                \
  }                                                                                                        \
  template <int Op, int Full>                                                                             \
  static inline void name##_at(accel_u64 i, ACCEL_KERNEL_ARGS, [[maybe_unused]] const accel_params* p)
#endif

#endif /* ACCEL_KERNELS_LAUNCH_H */
