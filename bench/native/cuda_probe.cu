// What the CUDA rows of bench/logistic_map.exs are measured against: the PCIe copy time of the
// workload's bytes (host to device and back, from pageable and from pinned memory) and the device
// time of Accel's own logistic-map kernel (accel_logistic_map, kernels/tensor_kernels.h), timed with CUDA
// events. The kernel's output is checked against the CPU backend. Prints `name,seconds` lines,
// one per run. Usage: cuda_probe [elements] [runs]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "kernels/tensor_kernels.h"
#include "core/logistic_map.hpp"

namespace {

#define PROBE_CUDA(call) check((call), #call)
void check(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "%s failed: %s\n", call, cudaGetErrorString(e));
  std::exit(2);
}

// Times `enqueue` on the default stream with events: device time, in seconds.
template <typename F>
double device_seconds(F enqueue) {
  cudaEvent_t start, stop;
  PROBE_CUDA(cudaEventCreate(&start));
  PROBE_CUDA(cudaEventCreate(&stop));
  PROBE_CUDA(cudaEventRecord(start));
  enqueue();
  PROBE_CUDA(cudaEventRecord(stop));
  PROBE_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  PROBE_CUDA(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / 1000.0;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 0x2000000;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 5;
  const size_t bytes = n * 8;
  const auto plan = accel::plan_logistic_map(6700417, 22, 10);

  std::vector<long long> pageable(n);
  for (size_t i = 0; i < n; ++i) pageable[i] = static_cast<long long>(i) + 1;
  long long* pinned = nullptr;
  long long* device = nullptr;
  PROBE_CUDA(cudaMallocHost(reinterpret_cast<void**>(&pinned), bytes));
  PROBE_CUDA(cudaMalloc(reinterpret_cast<void**>(&device), bytes));
  std::memcpy(pinned, pageable.data(), bytes);

  std::vector<long long> expected(n);
  accel::cpu::CpuBackend cpu(0);
  cpu.logistic_map(accel::Int64Source::of_range(1, 1, n), reinterpret_cast<unsigned char*>(expected.data()), plan, {});

  // As the backend launches it (cuda_support's blocks_for): the launch door's record, a grid-stride loop.
  const unsigned threads = 256;
  const unsigned blocks = static_cast<unsigned>(std::clamp<size_t>((n + threads - 1) / threads, 1, size_t{1} << 20));
  const accel_params in_place = [&] {
    accel_params p = accel::logistic_map_params(plan, true, plan.iterations);
    p.n = n;
    return p;
  }();
  accel_params range = in_place;  // generates 1, 2, ..., n
  range.count[2] = 1;
  range.shape[0] = 1;
  range.shape[1] = 1;
  auto range_kernel = [&] { accel_logistic_map<<<blocks, threads>>>(device, nullptr, nullptr, nullptr, range); };
  range_kernel();  // warm-up: module load
  PROBE_CUDA(cudaDeviceSynchronize());

  for (int r = 0; r < runs; ++r) {
    std::printf("h2d_pageable,%.6f\n", device_seconds([&] {
      PROBE_CUDA(cudaMemcpy(device, pageable.data(), bytes, cudaMemcpyHostToDevice));
    }));
    std::printf("h2d_pinned,%.6f\n", device_seconds([&] {
      PROBE_CUDA(cudaMemcpy(device, pinned, bytes, cudaMemcpyHostToDevice));
    }));
    std::printf("kernel_in_place,%.6f\n", device_seconds([&] {
      accel_logistic_map<<<blocks, threads>>>(device, nullptr, nullptr, nullptr, in_place);
    }));
    PROBE_CUDA(cudaGetLastError());
    PROBE_CUDA(cudaMemset(device, 0xff, bytes));  // poison: the range kernel must write every element
    std::printf("kernel_range,%.6f\n", device_seconds(range_kernel));
    PROBE_CUDA(cudaGetLastError());
    std::printf("d2h_pageable,%.6f\n", device_seconds([&] {
      PROBE_CUDA(cudaMemcpy(pageable.data(), device, bytes, cudaMemcpyDeviceToHost));
    }));
    std::printf("d2h_pinned,%.6f\n", device_seconds([&] {
      PROBE_CUDA(cudaMemcpy(pinned, device, bytes, cudaMemcpyDeviceToHost));
    }));
    if (std::memcmp(pageable.data(), expected.data(), bytes) != 0 || std::memcmp(pinned, expected.data(), bytes) != 0) {
      std::fprintf(stderr, "the CUDA kernel's result differs from the CPU backend's\n");
      return 1;
    }
    std::fflush(stdout);
  }
  cudaFree(device);
  cudaFreeHost(pinned);
  return 0;
}
