/* The few definitions that let one kernel text compile as host C++17, CUDA C++ and OpenCL C:
 * integer types, the function qualifier, the 64x64->high-64 multiply, whether doubles exist
 * (ACCEL_HAS_F64), round-to-nearest-integer (ACCEL_RINT) and single-precision math function names
 * (ACCEL_F32: expf in C and CUDA, the overloaded exp in OpenCL C). Nothing else. */
#ifndef ACCEL_KERNELS_DIALECT_H
#define ACCEL_KERNELS_DIALECT_H

#if defined(__OPENCL_VERSION__)
typedef long accel_i64;
typedef ulong accel_u64;
typedef int accel_i32;
typedef uchar accel_u8;
#define ACCEL_FN static inline
#define ACCEL_F32(fn) fn
#define ACCEL_HAS_INT128 0
#define accel_mulhi_u64(a, b) mul_hi((accel_u64)(a), (accel_u64)(b))
/* Whether generated kernels (kernels/user.h) take a signed product's high half from a 128-bit
 * product: on an OpenCL device on the host's CPU (the host passes -DACCEL_OPENCL_CPU=1) whose
 * compiler has __int128, where it is one multiply and PoCL's mul_hi(long) a library routine (a
 * checked user kernel ran 1.2x, one dividing by a captured value 1.7x slower with it). The
 * logistic map's unsigned Barrett step measured no faster so, and keeps mul_hi. */
#if defined(ACCEL_OPENCL_CPU) && defined(__SIZEOF_INT128__)
#define ACCEL_CL_WIDE_MUL 1
#else
#define ACCEL_CL_WIDE_MUL 0
#endif
#ifdef ACCEL_FP64 /* the host passes -DACCEL_FP64=1 to devices with cl_khr_fp64 */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define ACCEL_HAS_F64 1
/* Adding and subtracting 1.5 * 2^52 rounds to nearest (OpenCL's default mode; Accel never passes
 * -cl-fast-relaxed-math): exact for the quotients of the f64 path, which stay below 2^48, and plain
 * arithmetic where some compilers call out for rint(). */
#define ACCEL_RINT(x) (((x) + 6755399441055744.0) - 6755399441055744.0)
#else
#define ACCEL_HAS_F64 0
#endif

#elif defined(__CUDACC__)
#if defined(__CUDACC_RTC__) /* NVRTC (generated kernels) has no C library headers */
typedef long long accel_i64;
typedef unsigned long long accel_u64;
typedef int accel_i32;
typedef unsigned char accel_u8;
#else
#include <stdint.h>
typedef int64_t accel_i64;
typedef uint64_t accel_u64;
typedef int32_t accel_i32;
typedef uint8_t accel_u8;
#endif
#define ACCEL_FN __host__ __device__ static inline
#define ACCEL_F32(fn) fn##f
#define ACCEL_HAS_INT128 0
#define ACCEL_HAS_F64 1
#define ACCEL_RINT(x) rint(x)
ACCEL_FN accel_u64 accel_mulhi_u64(accel_u64 a, accel_u64 b) {
#ifdef __CUDA_ARCH__
  return __umul64hi(a, b);
#else
  return (accel_u64)(((unsigned __int128)a * b) >> 64);
#endif
}

#else /* host C or C++ (GCC and Clang provide unsigned __int128 on 64-bit targets) */
#include <math.h>
#include <stdint.h>
typedef int64_t accel_i64;
typedef uint64_t accel_u64;
typedef int32_t accel_i32;
typedef uint8_t accel_u8;
#define ACCEL_FN static inline
#define ACCEL_F32(fn) fn##f
#ifndef ACCEL_HAS_INT128 /* a test may define it 0 to exercise the portable fallbacks on the host */
#define ACCEL_HAS_INT128 1
#endif
#define ACCEL_HAS_F64 1
/* Inlined by GCC (roundsd/vroundpd, or an exact add-and-subtract on plain SSE2) when built with
 * -fno-trapping-math, as the CPU backend is; rounds to nearest in the default mode. */
#define ACCEL_RINT(x) __builtin_rint(x)
ACCEL_FN accel_u64 accel_mulhi_u64(accel_u64 a, accel_u64 b) {
  return (accel_u64)(((unsigned __int128)a * b) >> 64);
}
#endif

#endif /* ACCEL_KERNELS_DIALECT_H */
