// Stands in for the CUDA backend and NVRTC in builds without nvcc.
#include "backends/absent_backend.hpp"
#include "backends/cuda/cuda_backend.hpp"
#include "core/error.hpp"

namespace accel::cuda {
namespace {

constexpr const char* kWhy = "not compiled into this build (CMake found no nvcc)";

}  // namespace

std::unique_ptr<Backend> make_backend() { return std::make_unique<AbsentBackend>("cuda", false, kWhy); }

std::string kernel_compiler_version() { throw ArgumentError(std::string("backend :cuda is ") + kWhy); }

DeviceCode compile_kernel_text(const std::string&, int, const std::string&) { throw ArgumentError(std::string("backend :cuda is ") + kWhy); }

}  // namespace accel::cuda
