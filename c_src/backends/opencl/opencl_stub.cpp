// Stands in for the OpenCL backend in builds without OpenCL (tests, benchmark and NIF alike).
#include "backends/absent_backend.hpp"
#include "backends/opencl/opencl_backend.hpp"

namespace accel::opencl {

namespace {
constexpr const char* kAbsent = "not compiled into this build (CMake found no OpenCL ICD loader or C++ headers)";
}

std::unique_ptr<Backend> make_backend() { return std::make_unique<AbsentBackend>("opencl", false, kAbsent); }

std::unique_ptr<Backend> load_backend(const std::string&) { return make_backend(); }

uint64_t program_builds() { return 0; }

}  // namespace accel::opencl
