// The OpenCL backend's factory. The real backend (opencl_backend.cpp) is compiled when CMake finds
// OpenCL; otherwise opencl_stub.cpp provides one that reports why it is absent. Callers never #ifdef.
#pragma once

#include <cstdint>
#include <memory>

#include "core/backend.hpp"

namespace accel::opencl {

std::unique_ptr<Backend> make_backend();

// OpenCL programs built so far by every OpenCL backend of this process (0 without OpenCL): each is
// built once per (device, build options) and cached, which tests check with this.
uint64_t program_builds();

}  // namespace accel::opencl
