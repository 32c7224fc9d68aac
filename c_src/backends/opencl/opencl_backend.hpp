// The OpenCL backend's factories. The real backend (opencl_backend.cpp) is compiled when CMake finds
// OpenCL, into the tests and the benchmark directly and into the plugin accel_opencl.so, which the
// NIF loads at run time (opencl_loader.cpp) so that it never links the ICD loader itself. Without
// OpenCL, opencl_stub.cpp provides both factories, reporting why. Callers never #ifdef.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/backend.hpp"

namespace accel::opencl {

std::unique_ptr<Backend> make_backend();

// The backend from the plugin in `dir`, or one reporting why the plugin could not be loaded.
std::unique_ptr<Backend> load_backend(const std::string& dir);

// OpenCL programs built so far by every OpenCL backend of this process (0 without OpenCL): each is
// built once per (device, build options) and cached, which tests check with this.
uint64_t program_builds();

}  // namespace accel::opencl
