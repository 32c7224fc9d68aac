/* The few definitions that let one kernel text compile as host C++17, CUDA C++ and OpenCL C:
 * integer types (8 to 64 bits), the function qualifier, the 64x64->high-64 multiply, whether doubles exist
 * (ACCEL_HAS_F64), round-to-nearest-integer (ACCEL_RINT), bit casts between floats and their bits
 * and single-precision math function names (ACCEL_F32: expf in C and CUDA, the overloaded exp in
 * OpenCL C). Nothing else. */
#ifndef ACCEL_KERNELS_DIALECT_H
#define ACCEL_KERNELS_DIALECT_H

#if defined(__OPENCL_VERSION__)
typedef long accel_i64;
typedef ulong accel_u64;
typedef int accel_i32;
typedef uint accel_u32;
typedef short accel_i16;
typedef ushort accel_u16;
typedef char accel_i8;
typedef uchar accel_u8;
/* No contraction of a * b + c into fma: a fused kernel must round each operation as the backend's
 * kernels do one at a time (OpenCL C lets compilers contract by default, and NVIDIA's does; CUDA
 * kernels are compiled with --fmad=false for the same reason). */
#pragma OPENCL FP_CONTRACT OFF
#define ACCEL_FN static inline
#define ACCEL_F32(fn) fn
#define ACCEL_HAS_INT128 0
#define accel_mulhi_u64(a, b) mul_hi((accel_u64)(a), (accel_u64)(b))
/* Whether generated kernels (kernels/user.h) take a signed product's high half from a 128-bit
 * product: on an OpenCL device on the host's CPU (the host passes -DACCEL_OPENCL_CPU=1) whose
 * compiler has __int128, where it is one multiply and PoCL's mul_hi(long) a library routine (a
 * checked user kernel ran 1.2x, one dividing by a captured value 1.7x slower with it). The
 * logistic map divides there instead (kernels/logistic_map.h's accel_lm_reduce). */
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
ACCEL_FN float accel_bits_f32(accel_u64 b) { return as_float((uint)b); }
ACCEL_FN accel_u32 accel_f32_bits(float f) { return as_uint(f); }
#if ACCEL_HAS_F64
ACCEL_FN double accel_bits_f64(accel_u64 b) { return as_double(b); }
ACCEL_FN accel_u64 accel_f64_bits(double f) { return as_ulong(f); }
#endif

#elif defined(__CUDACC__)
#if defined(__CUDACC_RTC__) /* NVRTC (generated kernels) has no C library headers */
typedef long long accel_i64;
typedef unsigned long long accel_u64;
typedef int accel_i32;
typedef unsigned int accel_u32;
typedef short accel_i16;
typedef unsigned short accel_u16;
typedef signed char accel_i8;
typedef unsigned char accel_u8;
#else
#include <stdint.h>
typedef int64_t accel_i64;
typedef uint64_t accel_u64;
typedef int32_t accel_i32;
typedef uint32_t accel_u32;
typedef int16_t accel_i16;
typedef uint16_t accel_u16;
typedef int8_t accel_i8;
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
ACCEL_FN float accel_bits_f32(accel_u64 b) {
  union { accel_u32 u; float f; } v;
  v.u = (accel_u32)b;
  return v.f;
}
ACCEL_FN accel_u32 accel_f32_bits(float f) {
  union { accel_u32 u; float f; } v;
  v.f = f;
  return v.u;
}
ACCEL_FN double accel_bits_f64(accel_u64 b) {
  union { accel_u64 u; double f; } v;
  v.u = b;
  return v.f;
}
ACCEL_FN accel_u64 accel_f64_bits(double f) {
  union { accel_u64 u; double f; } v;
  v.f = f;
  return v.u;
}

#else /* host C or C++ (GCC and Clang provide unsigned __int128 on 64-bit targets) */
#include <math.h>
#include <stdint.h>
#include <string.h>
typedef int64_t accel_i64;
typedef uint64_t accel_u64;
typedef int32_t accel_i32;
typedef uint32_t accel_u32;
typedef int16_t accel_i16;
typedef uint16_t accel_u16;
typedef int8_t accel_i8;
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
/* Bit casts (memcpy: the defined way in C++17; compilers make it a register move). */
ACCEL_FN float accel_bits_f32(accel_u64 b) {
  const accel_u32 u = (accel_u32)b;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
ACCEL_FN accel_u32 accel_f32_bits(float f) {
  accel_u32 u;
  memcpy(&u, &f, sizeof u);
  return u;
}
ACCEL_FN double accel_bits_f64(accel_u64 b) {
  double f;
  memcpy(&f, &b, sizeof f);
  return f;
}
ACCEL_FN accel_u64 accel_f64_bits(double f) {
  accel_u64 u;
  memcpy(&u, &f, sizeof u);
  return u;
}
#endif

#endif /* ACCEL_KERNELS_DIALECT_H */
