// The CUDA backend's factory. The real backend (cuda_backend.cu) is compiled when CMake finds nvcc;
// otherwise cuda_stub.cpp provides one that reports why it is absent. Callers never #ifdef.
#pragma once

#include <memory>

#include "core/backend.hpp"

namespace accel::cuda {

std::unique_ptr<Backend> make_backend();

}  // namespace accel::cuda
