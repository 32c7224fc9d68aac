// Stands in for the CUDA backend in builds without nvcc: reports it absent, refuses calls.
#include "backends/cuda/cuda_backend.hpp"
#include "core/error.hpp"

namespace accel::cuda {
namespace {

class AbsentBackend final : public Backend {
 public:
  BackendStatus status() override { return {"cuda", false, false, "not compiled into this build (CMake found no nvcc)"}; }
  std::vector<DeviceInfo> devices() override { return {}; }
  bool waits_on_device() const override { return true; }
  void logistic_map(const Int64Source&, unsigned char*, const LogisticMapPlan&, const CallOptions&) override {
    throw ArgumentError("backend :cuda is not compiled into this build of Accel");
  }
};

}  // namespace

std::unique_ptr<Backend> make_backend() { return std::make_unique<AbsentBackend>(); }

}  // namespace accel::cuda
