// The CUDA tensor kernels: templates over the element type around backends/tensor_elements.hpp,
// so each element's value is the CPU backend's. Grid-stride loops: any n fits any grid.
#pragma once

#include "backends/tensor_elements.hpp"

namespace accel::cuda {

#define ACCEL_GRID_STRIDE(i, n) \
  for (unsigned long long i = blockIdx.x * 1ULL * blockDim.x + threadIdx.x; i < (n); i += 1ULL * blockDim.x * gridDim.x)

template <typename T>
__global__ void iota_kernel(T* out, unsigned long long n) {
  ACCEL_GRID_STRIDE(i, n) out[i] = element_cast<int64_t, T>(static_cast<int64_t>(i));
}

template <typename F, typename T>
__global__ void cast_kernel(const F* in, T* out, unsigned long long n) {
  ACCEL_GRID_STRIDE(i, n) out[i] = element_cast<F, T>(in[i]);
}

// count 0: the scalar; count < n: the operand repeats (trailing-shape broadcasting).
template <typename T>
__device__ inline T operand_at(const T* p, unsigned long long count, T scalar, unsigned long long i,
                               unsigned long long n) {
  return count == 0 ? scalar : p[count == n ? i : i % count];
}

template <typename T>
__global__ void binary_kernel(int op, const T* a, unsigned long long a_count, T a_scalar, const T* b,
                              unsigned long long b_count, T b_scalar, T* out, unsigned long long n, int* zero_divisor) {
  ACCEL_GRID_STRIDE(i, n) {
    const T x = operand_at(a, a_count, a_scalar, i, n), y = operand_at(b, b_count, b_scalar, i, n);
    if constexpr (!std::is_floating_point_v<T>) {
      if (op == ACCEL_OP_DIVIDE && y == 0) *zero_divisor = 1;
    }
    out[i] = element_binary<T>(op, x, y);
  }
}

template <typename T>
__global__ void unary_kernel(int op, const T* in, T* out, unsigned long long n) {
  ACCEL_GRID_STRIDE(i, n) out[i] = element_unary<T>(op, in[i]);
}

// Partial reductions, as the OpenCL kernels: out[o][g][k] over in[o][j][k], j = g, g + groups, ...
template <typename T, typename Out>
__global__ void sum_kernel(const T* in, Out* out, unsigned long long outer, unsigned long long len,
                           unsigned long long inner, unsigned long long groups) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, T, uint64_t>;
  ACCEL_GRID_STRIDE(idx, outer * groups * inner) {
    const unsigned long long o = idx / (groups * inner), g = idx / inner % groups, k = idx % inner;
    Acc acc = 0;
    for (unsigned long long j = g; j < len; j += groups) acc += static_cast<Acc>(in[(o * len + j) * inner + k]);
    out[idx] = static_cast<Out>(acc);
  }
}

template <typename T>
__global__ void pick_kernel(int op, const T* in, T* out, unsigned long long outer, unsigned long long len,
                            unsigned long long inner, unsigned long long groups) {
  ACCEL_GRID_STRIDE(idx, outer * groups * inner) {
    const unsigned long long o = idx / (groups * inner), g = idx / inner % groups, k = idx % inner;
    T acc = in[(o * len + g) * inner + k];
    for (unsigned long long j = g + groups; j < len; j += groups) acc = element_pick<T>(op, acc, in[(o * len + j) * inner + k]);
    out[idx] = acc;
  }
}

template <typename U>
__global__ void transpose_kernel(const U* in, U* out, unsigned long long rows, unsigned long long cols) {
  ACCEL_GRID_STRIDE(i, rows * cols) out[(i % cols) * rows + i / cols] = in[i];
}

}  // namespace accel::cuda
