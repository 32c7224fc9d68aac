/* The few definitions that let one kernel text compile as host C++17, CUDA C++ and OpenCL C:
 * 64-bit integer types, the function qualifier and the 64x64->high-64 multiply. Nothing else. */
#ifndef ACCEL_KERNELS_DIALECT_H
#define ACCEL_KERNELS_DIALECT_H

#if defined(__OPENCL_VERSION__)
typedef long accel_i64;
typedef ulong accel_u64;
#define ACCEL_FN static inline
#define ACCEL_HAS_INT128 0
#define accel_mulhi_u64(a, b) mul_hi((accel_u64)(a), (accel_u64)(b))

#elif defined(__CUDACC__)
#include <stdint.h>
typedef int64_t accel_i64;
typedef uint64_t accel_u64;
#define ACCEL_FN __host__ __device__ static inline
#define ACCEL_HAS_INT128 0
ACCEL_FN accel_u64 accel_mulhi_u64(accel_u64 a, accel_u64 b) {
#ifdef __CUDA_ARCH__
  return __umul64hi(a, b);
#else
  return (accel_u64)(((unsigned __int128)a * b) >> 64);
#endif
}

#else /* host C or C++ (GCC and Clang provide unsigned __int128 on 64-bit targets) */
#include <stdint.h>
typedef int64_t accel_i64;
typedef uint64_t accel_u64;
#define ACCEL_FN static inline
#ifndef ACCEL_HAS_INT128 /* a test may define it 0 to exercise the portable fallbacks on the host */
#define ACCEL_HAS_INT128 1
#endif
ACCEL_FN accel_u64 accel_mulhi_u64(accel_u64 a, accel_u64 b) {
  return (accel_u64)(((unsigned __int128)a * b) >> 64);
}
#endif

#endif /* ACCEL_KERNELS_DIALECT_H */
