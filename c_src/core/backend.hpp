// The interface every compute backend implements (cpu, opencl, cuda), the device and status records
// Accel.devices/0 and Accel.backends/0 report. Backends never see BEAM terms. The tensor half works
// through a small device API (the launch door: allocate, copy, launch kernel K) that each backend
// implements once; core/tensor.cpp checks every count before calling it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/cancel.hpp"
#include "core/int64_source.hpp"
#include "core/error.hpp"
#include "core/logistic_map.hpp"
#include "core/staging.hpp"
#include "core/kernel.hpp"
#include "core/tensor.hpp"

namespace accel {

struct SourceKernel;

struct BackendStatus {
  std::string name;        // "cpu", "opencl", "cuda"
  bool compiled = false;   // built into this NIF
  bool available = false;  // usable on this machine now
  std::string detail;      // what it runs on, or why it is unavailable
};

struct DeviceInfo {
  std::string backend;    // as BackendStatus::name
  int index = 0;          // position in the backend's device list: what `device:` selects
  std::string platform;   // OpenCL platform, "host" for the CPU backend
  std::string name;
  std::string type;       // "cpu", "gpu", "accelerator" or "other"
  uint64_t memory = 0;     // bytes
  uint64_t max_alloc = 0;  // largest single buffer, bytes
  uint32_t compute_units = 0;  // OpenCL compute units, CUDA multiprocessors, CPU threads
  std::string capability;      // CUDA compute capability ("9.0"); the CPU kernels' instruction set
                               // ("x86-64-v3"); empty elsewhere
};

// Per-call choices a caller may make.
struct CallOptions {
  int device = 0;             // index into Backend::devices()
  size_t chunk_elements = 0;  // split the input into chunks of at most this many; 0: the backend decides
  const Cancellation* cancel = nullptr;  // polled between blocks (CPU) or chunks (devices); may be null
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendStatus status() = 0;
  virtual std::vector<DeviceInfo> devices() = 0;

  // True when calls wait on a device (they belong on a dirty IO scheduler), false for host compute.
  virtual bool waits_on_device() const = 0;

  // Writes in.count native-endian int64 results to `out`, which may alias in.bytes exactly
  // (in place). Throws ArgumentError for a device index out of range. Thread-safe.
  virtual void logistic_map(const Int64Source& in, unsigned char* out, const LogisticMapPlan& plan,
                            const CallOptions& options) = 0;

  // Runs a generated kernel that completes in one launch (core/source_kernel.hpp) over host
  // inputs of n elements each into host `out` (n elements of its out_type), streamed through a
  // device in chunks as the logistic map is (core/device_stream.hpp). Returns whether an element
  // was flagged. Device backends only: the CPU backend runs kernels over tensors that share the
  // host's bytes already.
  virtual bool map_source(const SourceKernel& /*kernel*/, const std::vector<const unsigned char*>& /*inputs*/,
                          uint64_t /*n*/, const std::vector<uint64_t>& /*scalars*/, unsigned char* /*out*/,
                          const CallOptions& /*options*/) {
    throw ArgumentError("this backend does not stream kernels over host memory");
  }

  // ---- the launch door. Device backends may run these asynchronously, in order per queue; only
  // download() and finish() wait for the device. Everything above them is written once: tensor
  // operations (reductions in passes, broadcasting, checks) in core/tensor*.cpp, a device's
  // streamed calls (chunks, double buffering) in core/device_stream.hpp. ----

  // The defaults refuse: a backend without a device (AbsentBackend) never allocates, so the others
  // are never reached for it. Throws Error("out_of_memory") when the device is full, ArgumentError
  // for a bad device index.
  virtual std::shared_ptr<DeviceBuffer> allocate(int, size_t) { no_tensors(); }
  // A buffer over `bytes` of host memory at `data`, which `owner` keeps alive, where the device
  // computes on host memory (the CPU backend): a tensor made without a copy. Read only: no
  // operation writes into a tensor it did not allocate. Null where the device cannot (the caller
  // then allocates and uploads). `data` is aligned for the tensor's element type.
  virtual std::shared_ptr<DeviceBuffer> wrap_host(int /*device*/, const void* /*data*/, size_t /*bytes*/,
                                                  std::shared_ptr<const void> /*owner*/) {
    return nullptr;
  }
  // The buffer's bytes, readable in place, where they are host memory (the CPU backend); null
  // elsewhere. A tensor's buffer is written only while the operation making it runs.
  virtual const void* host_view(const DeviceBuffer&) { return nullptr; }
  virtual void upload(DeviceBuffer&, const void*) { no_tensors(); }  // dst.bytes() bytes
  virtual void download(const DeviceBuffer&, void*, size_t /*bytes: a prefix*/) { no_tensors(); }
  virtual void copy(const DeviceBuffer& /*src*/, DeviceBuffer& /*dst*/, size_t /*bytes*/) { no_tensors(); }
  virtual void zero(DeviceBuffer&) { no_tensors(); }  // every byte
  // Runs `kernel` (kernels/tensor_kernels.h) over params.n work items on `device`, where the
  // buffers live. work_per_item (elements each item reads) lets a CPU size its tasks. A backend that
  // computes rather than waits (the CPU) runs a launch to its end, and polls `cancel` (may be null)
  // inside it; devices are bounded per launch by the caller instead (core/tensor.cpp).
  // On `queue` (see queues(); tensor operations use 0).
  virtual void launch(Kernel /*kernel*/, int /*device*/, const accel_params&, const KernelBuffers&,
                      size_t /*work_per_item*/, const Cancellation* /*cancel*/, size_t /*queue*/) {
    no_tensors();
  }

  // Runs a kernel compiled from text (core/source_kernel.hpp) over n elements: its buffers in the
  // entry point's order, then its 8-byte scalar slots. Compiled once per device (by kernel.key) on
  // first use; the CPU backend runs kernel.host over its pool, polling `cancel` between tasks.
  virtual void launch_source(const SourceKernel& /*kernel*/, int /*device*/, uint64_t /*n*/,
                             const std::vector<const DeviceBuffer*>& /*buffers*/,
                             const std::vector<uint64_t>& /*scalars*/, const Cancellation* /*cancel*/,
                             size_t /*queue*/) {
    no_tensors();
  }

  // Streaming: a device has queues() in-order command queues; queue 0 carries every tensor
  // operation above. Commands on one queue run in order; commands on two may overlap (one chunk's
  // transfers with another's kernel). The enqueue_ transfers return once queued: the host memory
  // they name must stay valid and untouched until finish(device, queue) has returned. A buffer
  // from allocate() may be used on another queue once finish(device, 0) has returned.
  virtual size_t queues(int) { return 1; }
  virtual void enqueue_upload(DeviceBuffer&, const void* /*src*/, size_t /*bytes*/, size_t /*queue*/) { no_tensors(); }
  virtual void enqueue_download(const DeviceBuffer&, void* /*dst*/, size_t /*bytes*/, size_t /*queue*/) {
    no_tensors();
  }
  virtual void finish(int /*device*/, size_t /*queue*/) { no_tensors(); }
  // A streamed call holds what this returns while its commands are in flight, so that a backend
  // may keep state across them (OpenCL: SIGCHLD's default disposition, which PoCL's linker
  // children need; without it a CPU device's commands must finish one by one).
  virtual std::shared_ptr<void> hold(int /*device*/) { return nullptr; }

  // ---- beyond the door: the vendors' BLAS ----

  // Row-major out[i][m][n] = a[i][m][k] * b[i][k][n] for each i below batch (contiguous, one after
  // another: batched attention, grouped convolution), F32 or F64, through the backend's BLAS.
  virtual void matmul(DType, const DeviceBuffer&, const DeviceBuffer&, DeviceBuffer&, size_t /*batch*/, size_t /*m*/,
                      size_t /*k*/, size_t /*n*/) {
    no_tensors();
  }
  // The same with either operand stored transposed (a[i] as k x m, b[i] as n x k), where
  // transposed_operands() says the backend reads them so (the CPU backend's BLAS); the others are
  // never asked (core/tensor.cpp refuses).
  virtual bool transposed_operands() const { return false; }
  virtual void matmul_transposed(DType, const DeviceBuffer&, const DeviceBuffer&, DeviceBuffer&, size_t /*batch*/,
                                 size_t /*m*/, size_t /*k*/, size_t /*n*/, bool /*trans_a*/, bool /*trans_b*/) {
    no_tensors();
  }
  // core/tensor.hpp's tensor_conv_shifted, its sizes checked (`out` is batch x filters x the
  // output's positions), where transposed_operands() says the backend's BLAS reads strided operands.
  virtual void conv_shifted(DType, const DeviceBuffer& /*input*/, const DeviceBuffer& /*kernel*/, DeviceBuffer& /*out*/,
                            const ShiftedConv&) {
    no_tensors();
  }
  // False for F64 on a device without doubles.
  virtual bool supports(DType, int) { return true; }
  // Bytes of tensor memory allocated on the device and not yet released.
  virtual int64_t allocated_bytes(int) { return 0; }

  // The devices fenced after a fault they did not recover from (core/device_health.hpp): they
  // take no more calls. Never discovers devices.
  virtual std::vector<int> fenced_devices() { return {}; }

  // For tests of fault recovery (core/device_health.hpp): the device's next command fails as a
  // kernel's fault would; `kind` is 1 for a context the rebuild restores, 2 for one that stays
  // broken. Device backends only.
  virtual void simulate_fault(int /*device*/, int /*kind*/) {
    throw ArgumentError("backend :" + status().name + " has no device faults to simulate");
  }

  // How a device backend moves large transfers of pageable memory (core/staging.hpp); set once,
  // when the NIF loads, before any call.
  virtual void set_staging(StagingMode) {}

 protected:
  [[noreturn]] void no_tensors() {
    const BackendStatus s = status();
    throw ArgumentError("backend :" + s.name + " is unavailable: " + s.detail);
  }
};

}  // namespace accel
