// The native CPU backend: the shared kernels run over every core through one ThreadPool that lives
// as long as the NIF is loaded. It has one device, the host.
#pragma once

#include "core/backend.hpp"
#include "core/thread_pool.hpp"

namespace accel::cpu {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(unsigned threads = 0);

  BackendStatus status() override;
  std::vector<DeviceInfo> devices() override { return {device_}; }
  bool waits_on_device() const override { return false; }
  void logistic_map(const Int64Source& in, unsigned char* out, const LogisticMapPlan& plan, const CallOptions& options) override;

  unsigned threads() const { return pool_.threads(); }

 private:
  ThreadPool pool_;
  DeviceInfo device_;
};

// One thread's share of a logistic-map call: elements [begin, end). Exposed for tests and the
// standalone benchmark, which time it single-threaded. Stops early (leaving `out` partly written)
// once `cancel` is set; the caller then throws.
void logistic_map_span(const Int64Source& in, unsigned char* out, size_t begin, size_t end,
                       const LogisticMapPlan& plan, const Cancellation* cancel = nullptr);

}  // namespace accel::cpu
