// Stands in for the OpenCL backend in builds without OpenCL: reports it absent, refuses calls.
#include "backends/opencl/opencl_backend.hpp"
#include "core/error.hpp"

namespace accel::opencl {
namespace {

class AbsentBackend final : public Backend {
 public:
  BackendStatus status() override {
    return {"opencl", false, false, "not compiled into this build (CMake found no OpenCL ICD loader or C++ headers)"};
  }
  std::vector<DeviceInfo> devices() override { return {}; }
  bool waits_on_device() const override { return true; }
  void logistic_map(const Int64Source&, unsigned char*, const LogisticMapPlan&, const CallOptions&) override {
    throw ArgumentError("backend :opencl is not compiled into this build of Accel");
  }
};

}  // namespace

std::unique_ptr<Backend> make_backend() { return std::make_unique<AbsentBackend>(); }

uint64_t program_builds() { return 0; }

}  // namespace accel::opencl
