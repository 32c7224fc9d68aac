// The logistic map as a CUDA kernel: one thread per element, reading the input in place or
// generating it from a range (first + i * step) on the device. Shared by the backend and the
// bench/native CUDA probe, so the probe times exactly the kernel Accel launches.
#pragma once

#include "kernels/logistic_map.h"

namespace accel::cuda {

__global__ void logistic_map_kernel(long long* data, unsigned long long n, long long first, long long step,
                                    int from_range, accel_lm_params c, int use_f64, accel_lm_f64 f,
                                    long long iterations) {
  const unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const accel_i64 x = from_range ? static_cast<accel_i64>(static_cast<accel_u64>(first) + i * static_cast<accel_u64>(step))
                                 : static_cast<accel_i64>(data[i]);
  data[i] = use_f64 ? accel_lm_iterate_f64(x, iterations, c, f) : accel_lm_iterate(x, iterations, c);
}

}  // namespace accel::cuda
