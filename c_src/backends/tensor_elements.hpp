// kernels/tensor.h's per-element functions as templates over the element's C++ type, for the
// backends written in C++ (CPU) and CUDA C++; the OpenCL backend gets one kernel per type from
// kernels/tensor.cl instead. visit_type() turns a runtime DType into a compile-time type.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/tensor.hpp"
#include "kernels/tensor.h"

#if defined(__CUDACC__)
#define ACCEL_TFN __host__ __device__ inline
#else
#define ACCEL_TFN inline
#endif

namespace accel {

template <typename T>
constexpr int type_code() {
  if constexpr (std::is_same_v<T, float>) return ACCEL_F32_TYPE;
  if constexpr (std::is_same_v<T, double>) return ACCEL_F64_TYPE;
  if constexpr (std::is_same_v<T, int64_t>) return ACCEL_S64_TYPE;
  if constexpr (std::is_same_v<T, int32_t>) return ACCEL_S32_TYPE;
  return ACCEL_U8_TYPE;
}

template <typename F>
decltype(auto) visit_type(DType type, F&& f) {
  switch (type) {
    case DType::F32:
      return f(float{});
    case DType::F64:
      return f(double{});
    case DType::S64:
      return f(int64_t{});
    case DType::S32:
      return f(int32_t{});
    default:
      return f(uint8_t{});
  }
}

template <typename T>
ACCEL_TFN T element_binary(int op, T a, T b) {
  if constexpr (std::is_same_v<T, float>) {
    return accel_f32_binary(op, a, b);
  } else if constexpr (std::is_same_v<T, double>) {
    return accel_f64_binary(op, a, b);
  } else {
    return static_cast<T>(accel_int_binary(op, static_cast<accel_i64>(a), static_cast<accel_i64>(b)));
  }
}

template <typename T>
ACCEL_TFN T element_unary(int op, T x) {
  if constexpr (std::is_same_v<T, float>) {
    return accel_f32_unary(op, x);
  } else if constexpr (std::is_same_v<T, double>) {
    return accel_f64_unary(op, x);
  } else {
    return static_cast<T>(accel_int_unary(op, static_cast<accel_i64>(x)));
  }
}

template <typename From, typename To>
ACCEL_TFN To element_cast(From x) {
  if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(x);
  } else if constexpr (std::is_same_v<From, float>) {
    return static_cast<To>(accel_f32_to_int(x, type_code<To>()));
  } else if constexpr (std::is_same_v<From, double>) {
    return static_cast<To>(accel_f64_to_int(x, type_code<To>()));
  } else {  // integer to integer wraps modulo 2^bits
    return static_cast<To>(static_cast<accel_u64>(static_cast<accel_i64>(x)));
  }
}

template <typename T>
ACCEL_TFN T element_pick(int op, T acc, T x) {
  if constexpr (std::is_same_v<T, float>) {
    return accel_f32_pick(op, acc, x);
  } else if constexpr (std::is_same_v<T, double>) {
    return accel_f64_pick(op, acc, x);
  } else {
    return static_cast<T>(accel_int_pick(op, static_cast<accel_i64>(acc), static_cast<accel_i64>(x)));
  }
}

// The type sum/1 accumulates and returns in: s64 (wrapping) for integers.
template <typename T>
using sum_type_t = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;

}  // namespace accel
