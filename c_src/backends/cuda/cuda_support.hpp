// What every part of the CUDA backend shares: CUDA errors turned into accel::Error (the call, CUDA's
// error name, and the reason Elixir sees), launch geometry, cuBLAS loaded on first use, and the
// launch of a tensor kernel (cuda_tensor.cu, where kernels/tensor_kernels.h is compiled for CUDA).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "core/kernel.hpp"

namespace accel::cuda {

std::string cuda_error_text(cudaError_t e);
// Whether `e` is one of CUDA's sticky errors: a kernel's fault that leaves the context unusable
// (NVIDIA: "any further CUDA work will return the same error"). Reported as Error("device_fault").
bool is_sticky(cudaError_t e);
// Throws accel::Error naming `call` unless e is cudaSuccess (and clears CUDA's last error).
void check(cudaError_t e, const char* call);
#define ACCEL_CUDA(call) ::accel::cuda::check((call), #call)

constexpr int kThreads = 256;
// Blocks of kThreads for n items, capped: the kernels' grid-stride loops cover any n.
unsigned blocks_for(unsigned long long n);

// Runs `kernel` over params.n items on `stream`. buffers: b0..b3, null where unused.
void launch_tensor_kernel(Kernel kernel, cudaStream_t stream, const accel_params& params, void* const buffers[4]);

// cuBLAS, loaded with dlopen on first use: the NIF must load where libcublas is absent, and a
// static cuBLAS would add hundreds of megabytes. Only the entry points matmul needs.
struct Cublas {
  using Create = cublasStatus_t (*)(cublasHandle_t*);
  using Destroy = cublasStatus_t (*)(cublasHandle_t);
  using SetStream = cublasStatus_t (*)(cublasHandle_t, cudaStream_t);
  using Sgemm = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float*,
                                   const float*, int, const float*, int, const float*, float*, int);
  using Dgemm = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const double*,
                                   const double*, int, const double*, int, const double*, double*, int);
  Create create = nullptr;
  Destroy destroy = nullptr;
  SetStream set_stream = nullptr;
  Sgemm sgemm = nullptr;
  Dgemm dgemm = nullptr;
  std::string error;  // why it could not be loaded

  static const Cublas& get();
};

}  // namespace accel::cuda
