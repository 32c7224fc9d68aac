// Stands in for the CUDA backend in builds without nvcc.
#include "backends/absent_backend.hpp"
#include "backends/cuda/cuda_backend.hpp"

namespace accel::cuda {

std::unique_ptr<Backend> make_backend() {
  return std::make_unique<AbsentBackend>("cuda", false, "not compiled into this build (CMake found no nvcc)");
}

}  // namespace accel::cuda
