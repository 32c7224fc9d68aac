// The CUDA backend's factory, and NVRTC's compilation of generated kernels (Accel.Kernel) for a GPU
// architecture. The real backend (cuda_backend.cu, nvrtc.cpp) is compiled when CMake finds nvcc;
// otherwise cuda_stub.cpp provides one that reports why it is absent. Callers never #ifdef.
#pragma once

#include <memory>
#include <string>

#include "core/backend.hpp"

namespace accel::cuda {

std::unique_ptr<Backend> make_backend();

// A kernel's code for a GPU: machine code (a cubin for `target`, "sm_90") or, for a GPU newer than
// the compiler, PTX for `target` ("compute_90", NUL-terminated) that the driver compiles on load.
struct DeviceCode {
  std::string bytes;
  std::string target;
  bool machine_code = true;
};

// "NVRTC 13.0": what the compiled code depends on besides the text and the architecture. Throws
// Error("no_compiler") where libnvrtc cannot be loaded.
std::string kernel_compiler_version();

// A kernel's text (CUDA C++; its entry point `entry`, declared extern "C") compiled for compute
// capability `arch` (90 for 9.0): no fused multiply-adds, IEEE division and square roots. Needs no
// driver. Throws Error("build_failed") with NVRTC's log, Error("no_compiler") without libnvrtc,
// ArgumentError where `entry` is missing or not extern "C".
DeviceCode compile_kernel_text(const std::string& source, int arch, const std::string& entry);

}  // namespace accel::cuda
