// The native CPU backend: the shared kernels run over every core through one ThreadPool that lives
// as long as the NIF is loaded. It has one device, the host; its tensors live in host memory
// (tensor_cpu.cpp) and its matmul is OpenBLAS's, where the build found it.
#pragma once

#include <atomic>
#include <chrono>

#include "core/backend.hpp"
#include "core/thread_pool.hpp"

namespace accel::cpu {

// How long the pool's threads poll before they sleep (ThreadPool): a compiled function's kernels
// and products come microseconds apart, and a worker that slept between them is woken for each
// (a futex wake and a context switch: on the 2-core EPYC VM a job of two 20 us chunks took 50-55
// us with a sleeping worker, 25 with a polling one, bench/results/pool_handoff.md). Compiled
// training steps there, 6 alternating VMs, medians of their medians: 128 x 784 -> 256 -> 10
// 790 us against 926 (14% less), the CNN step of bench/nx_xla.exs 2.92 ms against 3.34 (13%);
// softmax, layer norm, GELU MLP and attention within 4% either way. A worker idle for longer
// sleeps, so an idle VM's cores stay idle.
constexpr std::chrono::microseconds kPoolSpin{200};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(unsigned threads = 0);

  BackendStatus status() override;
  std::vector<DeviceInfo> devices() override { return {device_}; }
  bool waits_on_device() const override { return false; }
  void logistic_map(const Int64Source& in, unsigned char* out, const LogisticMapPlan& plan, const CallOptions& options) override;

  std::shared_ptr<DeviceBuffer> allocate(int device, size_t bytes) override;
  std::shared_ptr<DeviceBuffer> wrap_host(int device, const void* data, size_t bytes,
                                          std::shared_ptr<const void> owner) override;
  const void* host_view(const DeviceBuffer& b) override;
  void upload(DeviceBuffer& dst, const void* src) override;
  void download(const DeviceBuffer& src, void* dst, size_t bytes) override;
  void copy(const DeviceBuffer& src, DeviceBuffer& dst, size_t bytes) override;
  void zero(DeviceBuffer& dst) override;
  void launch(Kernel kernel, int device, const accel_params& params, const KernelBuffers& buffers,
              size_t work_per_item, const Cancellation* cancel, size_t queue) override;
  void launch_source(const SourceKernel& kernel, int device, uint64_t n, const std::vector<const DeviceBuffer*>& buffers,
                     const std::vector<uint64_t>& scalars, const Cancellation* cancel, size_t queue) override;
  // One queue, and host memory: transfers are copies, done on return.
  void enqueue_upload(DeviceBuffer& dst, const void* src, size_t bytes, size_t queue) override;
  void enqueue_download(const DeviceBuffer& src, void* dst, size_t bytes, size_t queue) override;
  void finish(int device, size_t queue) override;
  void matmul(DType type, const DeviceBuffer& a, const DeviceBuffer& b, DeviceBuffer& out, size_t batch, size_t m,
              size_t k, size_t n) override {
    matmul_transposed(type, a, b, out, batch, m, k, n, false, false);
  }
  bool transposed_operands() const override { return true; }
  void matmul_transposed(DType type, const DeviceBuffer& a, const DeviceBuffer& b, DeviceBuffer& out, size_t batch,
                         size_t m, size_t k, size_t n, bool trans_a, bool trans_b) override;
  void conv_shifted(DType type, const DeviceBuffer& input, const DeviceBuffer& kernel, DeviceBuffer& out,
                    const ShiftedConv& conv) override;
  int64_t allocated_bytes(int) override { return tensor_bytes_->load(std::memory_order_relaxed); }

  unsigned threads() const { return pool_.threads(); }

 private:
  void copy_bytes(void* dst, const void* src, size_t bytes);

  ThreadPool pool_;
  DeviceInfo device_;
  // Shared with every buffer, which may outlive the backend (a tensor held at unload).
  std::shared_ptr<std::atomic<int64_t>> tensor_bytes_ = std::make_shared<std::atomic<int64_t>>(0);
};

// One thread's share of a logistic-map call: elements [begin, end). Exposed for tests and the
// standalone benchmark, which time it single-threaded. Stops early (leaving `out` partly written)
// once `cancel` is set; the caller then throws.
void logistic_map_span(const Int64Source& in, unsigned char* out, size_t begin, size_t end,
                       const LogisticMapPlan& plan, const Cancellation* cancel = nullptr);

}  // namespace accel::cpu
