// CUDA errors, launch geometry and the cuBLAS loader (cuda_support.hpp).
#include "backends/cuda/cuda_support.hpp"

#include <dlfcn.h>

#include <algorithm>

#include "core/error.hpp"

namespace accel::cuda {

bool is_sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorECCUncorrectable:
    case cudaErrorContained:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorExternalDevice:
      return true;
    default:
      return false;
  }
}

namespace {

std::string reason_for(cudaError_t e) {
  if (is_sticky(e)) return "device_fault";
  switch (e) {
    case cudaErrorMemoryAllocation:
      return "out_of_memory";
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorDeviceUninitialized:
      return "device_unavailable";
    default:
      return "cuda_error";
  }
}

Cublas load_cublas() {
  Cublas c;
  void* handle = nullptr;
  for (const char* name : {"libcublas.so.13", "libcublas.so", "/usr/local/cuda/lib64/libcublas.so.13"})
    if ((handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
  if (handle == nullptr) {
    const char* why = dlerror();
    c.error = std::string("cuBLAS could not be loaded: ") + (why != nullptr ? why : "libcublas.so.13 not found");
    return c;
  }
  c.create = reinterpret_cast<Cublas::Create>(dlsym(handle, "cublasCreate_v2"));
  c.destroy = reinterpret_cast<Cublas::Destroy>(dlsym(handle, "cublasDestroy_v2"));
  c.set_stream = reinterpret_cast<Cublas::SetStream>(dlsym(handle, "cublasSetStream_v2"));
  c.sgemm = reinterpret_cast<Cublas::Sgemm>(dlsym(handle, "cublasSgemm_v2"));
  c.dgemm = reinterpret_cast<Cublas::Dgemm>(dlsym(handle, "cublasDgemm_v2"));
  if (!c.create || !c.destroy || !c.set_stream || !c.sgemm || !c.dgemm)
    c.error = "libcublas lacks the cublas*_v2 entry points";
  return c;
}

}  // namespace

std::string cuda_error_text(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

void check(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  throw Error(reason_for(e), std::string(call) + " failed with " + cuda_error_text(e));
}

unsigned blocks_for(unsigned long long n) {
  return static_cast<unsigned>(std::clamp<unsigned long long>((n + kThreads - 1) / kThreads, 1, 1ULL << 20));
}

const Cublas& Cublas::get() {
  static const Cublas lib = load_cublas();
  return lib;
}

}  // namespace accel::cuda
