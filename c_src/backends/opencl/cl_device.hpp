// One OpenCL device's state (made lazily, once: context, two in-order queues, built programs and
// kernels), a tensor's cl_mem, and the program cache: each program is built once per (device,
// name, options), where the original experiment rebuilt its kernel on every call.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/opencl/cl_support.hpp"
#include "core/backend.hpp"
#include "core/device_health.hpp"
#include "core/source_kernel.hpp"
#include "core/staging.hpp"

namespace accel::opencl {

constexpr size_t kQueues = 2;

struct DeviceState {
  DeviceInfo info;
  cl::Device device;
  bool fp64 = false;  // doubles supported: the kernels' f64 path is compiled in
  // f32 division and sqrt can be correctly rounded (CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT): programs
  // ask for it. OpenCL C allows 2.5 ulps otherwise, and NVIDIA's driver takes that licence (5 / 3
  // in f32 came out an ulp above the quotient Nx and every other backend give).
  bool exact_divide = false;
  std::mutex mutex;   // guards everything below and serialises calls on this device
  bool ready = false;
  cl::Context context;
  cl::CommandQueue queues[kQueues];             // the door's queues; queues[0] carries the tensors
  std::map<std::string, cl::Program> programs;  // by name and build options
  std::vector<cl::Kernel> kernels;              // tensor kernels by Kernel number, made on first use
  std::map<std::string, cl::Kernel> source_kernels;  // generated kernels (Accel.Kernel) by key
  int streaming = 0;                            // streamed calls holding the device (Backend::hold)
  // Faults, the context's life (shared with each buffer made in it, which may outlive a call: it
  // counts their bytes) and fencing (core/device_health.hpp).
  DeviceHealth health;
  // Pinned slots for large transfers (core/staging.hpp), made on first use (none where the runtime
  // gives no pinned memory: transfers go straight); destroyed first.
  LazyStaging staging;
};

// A tensor's memory: released with clReleaseMemObject, which OpenCL defers until the commands
// queued on it have finished, so a tensor dropped while its kernels run is safe (and so is one whose
// context was replaced: OpenCL counts references).
class ClBuffer final : public DeviceBuffer {
 public:
  ClBuffer(cl::Buffer mem, size_t bytes, int device, std::shared_ptr<DeviceContextLife> life)
      : DeviceBuffer(bytes, device), mem_(std::move(mem)), life_(std::move(life)) {
    life_->bytes.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  }
  ~ClBuffer() override { life_->bytes.fetch_sub(static_cast<int64_t>(bytes()), std::memory_order_relaxed); }
  // Throws Error("device_lost") where the buffer's context was replaced after a fault.
  const cl::Buffer& mem() const {
    check_alive(*life_, "OpenCL", device());
    return mem_;
  }

 private:
  cl::Buffer mem_;
  std::shared_ptr<DeviceContextLife> life_;
};

inline const cl::Buffer& mem(const DeviceBuffer& b) { return static_cast<const ClBuffer&>(b).mem(); }

// Makes the context and queues on first use. Caller holds d.mutex.
void ready(DeviceState& d);
// Whether OpenCL's `code` from a command may mean the device faulted or lost its context (NVIDIA's
// OpenCL reports a kernel's out-of-bounds access as CL_OUT_OF_RESOURCES): DeviceHealth::recover
// then probes it.
bool may_be_fault(cl_int code);
// Replaces the context, queues, programs and kernels with new ones (DeviceHealth::recover's
// reset); the staging slots stay, as mapped host memory. Caller holds d.mutex.
void rebuild(DeviceState& d);
// Runs a tiny command on each queue and waits for it: whether the context works. Caller holds d.mutex.
bool probe(DeviceState& d);
// The program `name` built from `source` for d (with -DACCEL_FP64=1 where it has doubles). Caller
// holds d.mutex. Throws Error("build_failed") with the build log.
cl::Program& program(DeviceState& d, const std::string& name, const char* source);
// The tensor kernel `kernel`, from the tensor program. Caller holds d.mutex.
cl::Kernel& tensor_kernel(DeviceState& d, Kernel kernel);
// The generated kernel `kernel` (core/source_kernel.hpp), built on first use. Caller holds d.mutex.
cl::Kernel& source_kernel(DeviceState& d, const SourceKernel& kernel);
// The door's queue `queue` (a caller's bug, never a user's, when out of range). Caller holds d.mutex.
cl::CommandQueue& queue_at(DeviceState& d, size_t queue);
// Waits for both queues, ignoring errors: no transfer may outlive the memory it reads or writes.
void drain(DeviceState& d) noexcept;

// A multiple of 256 work items at least n, which runtimes split evenly.
inline size_t global_size(size_t n) { return (n + 255) / 256 * 256; }

}  // namespace accel::opencl
