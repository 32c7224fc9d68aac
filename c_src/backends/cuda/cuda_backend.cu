// The CUDA backend, over the CUDA runtime linked statically: the NIF loads wherever the toolkit's
// libraries are absent, and reports the driver's own reason where no driver or device exists.
// Discovery happens once, on first use. Each device gets, lazily and once, two streams: the launch
// door's queues. Everything goes through the door: every kernel of kernels/tensor_kernels.h
// (cuda_tensor.cu) is launched the same way; tensor operations on streams[0], in order, and streamed
// calls (the logistic map, core/device_stream.hpp) on both, each chunk's commands in order on one,
// so that one chunk's transfers overlap the other's kernel. The door's calls on a device are
// serialised by its mutex. A sticky error (a kernel's illegal address: cuda_support's is_sticky)
// ends the device's context: the device is rebuilt (cudaDeviceReset) or fenced, by the policy of
// core/device_health.hpp, once no command or wait is inside the old context (each holds it shared)
// and no staged transfer is using the slots the reset frees. (cuda_support: errors, geometry,
// cuBLAS.)
#include <algorithm>
#include <atomic>
#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/cuda_support.hpp"
#include "core/device_backend.hpp"
#include "core/device_health.hpp"
#include "core/error.hpp"
#include "core/host_buffer.hpp"
#include "core/source_kernel.hpp"
#include "core/staging.hpp"

namespace accel::cuda {
namespace {

constexpr size_t kSlots = 2;

struct DeviceState {
  DeviceInfo info;
  int ordinal = 0;
  std::mutex mutex;  // guards everything below and serialises calls on this device
  bool ready = false;
  cudaStream_t streams[kSlots] = {};  // the door's queues; streams[0] carries every tensor operation
  cublasHandle_t cublas = nullptr;  // created on the first matmul
  // Generated kernels (Accel.Kernel) by key, loaded on first use from the code NVRTC made.
  std::map<std::string, std::pair<cudaLibrary_t, cudaKernel_t>> source_kernels;
  // Pinned slots for large transfers of pageable memory (core/staging.hpp), made on first use
  // (none where CUDA gives no pinned memory: such transfers go the pageable way).
  LazyStaging staging;
  // Faults, the context's life (shared with each buffer made in it: it counts their bytes) and
  // fencing (core/device_health.hpp).
  DeviceHealth health;
  // Held shared by every command and wait in the context, exclusively by its rebuild.
  std::shared_mutex context;
  std::atomic<bool> faulted{false};  // a sticky error was met: rebuild before the next command
  std::string fault;                 // what it was
  DeviceHealth::Outcome outcome = DeviceHealth::Outcome::transient;  // of the last rebuild

  ~DeviceState() {
    if (!ready || health.fenced()) return;
    cudaSetDevice(ordinal);
    for (size_t s = 0; s < kSlots; ++s)
      if (streams[s] != nullptr) cudaStreamDestroy(streams[s]);
    if (cublas != nullptr) Cublas::get().destroy(cublas);
    for (auto& loaded : source_kernels) cudaLibraryUnload(loaded.second.first);
  }
};

// How many devices' contexts this thread holds (ContextHold): a buffer dropped inside a command
// must not take its device's context again.
thread_local int t_contexts_held = 0;

// A device's context held shared, for a command or a wait in it.
class ContextHold {
 public:
  explicit ContextHold(std::shared_mutex& context) : lock_(context) { ++t_contexts_held; }
  ~ContextHold() { --t_contexts_held; }
  ContextHold(const ContextHold&) = delete;
  ContextHold& operator=(const ContextHold&) = delete;

 private:
  std::shared_lock<std::shared_mutex> lock_;
};

// A tensor's memory, from the stream-ordered allocator: freed on the tensor stream after the work
// queued before it, without waiting, from whichever thread drops the last reference; not at all
// where its context was rebuilt, which freed it (and the stream).
class CudaBuffer final : public DeviceBuffer {
 public:
  CudaBuffer(void* ptr, size_t bytes, int device, DeviceState& state, cudaStream_t stream)
      : DeviceBuffer(bytes, device), ptr_(ptr), state_(state), stream_(stream), life_(state.health.life()) {
    life_->bytes.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  }
  ~CudaBuffer() override {
    std::shared_lock<std::shared_mutex> context(state_.context, std::defer_lock);
    if (t_contexts_held == 0) context.lock();
    if (!life_->lost.load(std::memory_order_acquire)) {
      cudaSetDevice(state_.ordinal);
      cudaFreeAsync(ptr_, stream_);
    }
    life_->bytes.fetch_sub(static_cast<int64_t>(bytes()), std::memory_order_relaxed);
  }
  // Throws Error("device_lost") where the context it was made in was rebuilt.
  void* ptr() const {
    check_alive(*life_, "CUDA", device());
    return ptr_;
  }

 private:
  void* ptr_;
  DeviceState& state_;
  cudaStream_t stream_;
  std::shared_ptr<DeviceContextLife> life_;
};

// Accel's host mappings, page-locked on their first transfer (HostBuffer::ensure_pinned), so that
// the copy engines move them at the bus's speed: 268 MB in 5 ms each way on the H100 host, against
// 20-38 ms pageable. Portable: pinned for every device's copies.
bool pin_host(void* data, size_t bytes) {
  if (cudaHostRegister(data, bytes, cudaHostRegisterPortable) == cudaSuccess) return true;
  cudaGetLastError();
  return false;
}

void unpin_host(void* data) {
  if (cudaHostUnregister(data) != cudaSuccess) cudaGetLastError();
}

template <typename T>
T* ptr(const DeviceBuffer& b) {
  return static_cast<T*>(static_cast<const CudaBuffer&>(b).ptr());
}

class CudaBackend final : public DeviceBackend<DeviceState> {
 public:
  // ---- tensors, the launch door: queued on streams[0] in order; only downloads wait ----

  std::shared_ptr<DeviceBuffer> allocate(int device, size_t bytes) override {
    return on_device(device, [&](DeviceState& d) -> std::shared_ptr<DeviceBuffer> {
      void* p = nullptr;
      ACCEL_CUDA(cudaMallocAsync(&p, std::max<size_t>(bytes, 1), d.streams[0]));
      return std::make_shared<CudaBuffer>(p, bytes, device, d, d.streams[0]);
    });
  }

  void upload(DeviceBuffer& dst, const void* src) override {
    // staged: the source is read on return, the slots' copies ordered before later work
    if (StagingPort* port = staging_for(dst.device(), src, dst.bytes()))
      return staged_upload(*port, dst, src, dst.bytes(), 0);
    on_device(dst.device(), [&](DeviceState& d) {
      ACCEL_CUDA(cudaMemcpyAsync(ptr<void>(dst), src, dst.bytes(), cudaMemcpyHostToDevice, d.streams[0]));
      ACCEL_CUDA(cudaStreamSynchronize(d.streams[0]));  // the source may go away on return
    });
  }

  void download(const DeviceBuffer& src, void* dst, size_t bytes) override {
    if (StagingPort* port = staging_for(src.device(), dst, bytes)) return staged_download(*port, src, dst, bytes, 0);
    on_device(src.device(), [&](DeviceState& d) {
      ACCEL_CUDA(cudaMemcpyAsync(dst, ptr<void>(src), bytes, cudaMemcpyDeviceToHost, d.streams[0]));
      ACCEL_CUDA(cudaStreamSynchronize(d.streams[0]));
    });
  }

  void copy(const DeviceBuffer& src, DeviceBuffer& dst, size_t bytes) override {
    on_device(src.device(), [&](DeviceState& d) {
      ACCEL_CUDA(cudaMemcpyAsync(ptr<void>(dst), ptr<void>(src), bytes, cudaMemcpyDeviceToDevice, d.streams[0]));
    });
  }

  void zero(DeviceBuffer& dst) override {
    on_device(dst.device(), [&](DeviceState& d) { ACCEL_CUDA(cudaMemsetAsync(ptr<void>(dst), 0, dst.bytes(), d.streams[0])); });
  }

  void launch(Kernel kernel, int device, const accel_params& params, const KernelBuffers& buffers, size_t,
              const Cancellation*, size_t queue) override {
    on_device(device, [&](DeviceState& d) {
      void* b[4];
      for (size_t i = 0; i < 4; ++i) b[i] = buffers[i] != nullptr ? ptr<void>(*buffers[i]) : nullptr;
      launch_tensor_kernel(kernel, stream_at(d, queue), params, b);
    });
  }

  // A generated or expert kernel (Accel.Kernel): its NVRTC code loaded once per device, then
  // launched like every kernel, on `queue`, with its buffers' pointers, n (64 bits) and its scalars
  // by value (each read from the start of its 8-byte slot, which is how a 4-byte scalar is passed).
  void launch_source(const SourceKernel& kernel, int device, uint64_t n, const std::vector<const DeviceBuffer*>& buffers,
                     const std::vector<uint64_t>& scalars, const Cancellation*, size_t queue) override {
    on_device(device, [&](DeviceState& d) {
      auto found = d.source_kernels.find(kernel.key);
      if (found == d.source_kernels.end()) {
        if (kernel.device_code.empty()) throw std::logic_error("a source kernel reached :cuda without its NVRTC code");
        cudaLibrary_t library = nullptr;
        ACCEL_CUDA(cudaLibraryLoadData(&library, kernel.device_code.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
        cudaKernel_t entry = nullptr;
        if (const cudaError_t e = cudaLibraryGetKernel(&entry, library, kernel.entry.c_str()); e != cudaSuccess) {
          cudaLibraryUnload(library);
          check(e, "cudaLibraryGetKernel");
        }
        found = d.source_kernels.emplace(kernel.key, std::make_pair(library, entry)).first;
      }
      std::vector<void*> pointers;
      for (const DeviceBuffer* b : buffers) pointers.push_back(ptr<void>(*b));
      unsigned long long count = n;
      std::vector<unsigned long long> slots(scalars.begin(), scalars.end());
      std::vector<void*> args;
      for (void*& p : pointers) args.push_back(&p);
      args.push_back(&count);
      for (unsigned long long& s : slots) args.push_back(&s);
      ACCEL_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(found->second.second), blocks_for(n), kThreads,
                                  args.data(), 0, stream_at(d, queue)));
    });
  }

  size_t queues(int) override { return kSlots; }

  // Straight from and into the caller's memory where it is a mapping of Accel's (a binary Accel
  // made, a result's buffer: pinned), or small; else through the device's pinned slots (a binary
  // the VM made), returning once the caller's memory is read (upload) or written (download).
  void enqueue_upload(DeviceBuffer& dst, const void* src, size_t bytes, size_t queue) override {
    if (StagingPort* port = staging_for(dst.device(), src, bytes)) return staged_upload(*port, dst, src, bytes, queue);
    on_device(dst.device(), [&](DeviceState& d) {
      ACCEL_CUDA(cudaMemcpyAsync(ptr<void>(dst), src, bytes, cudaMemcpyHostToDevice, stream_at(d, queue)));
    });
  }

  void enqueue_download(const DeviceBuffer& src, void* dst, size_t bytes, size_t queue) override {
    if (StagingPort* port = staging_for(src.device(), dst, bytes)) return staged_download(*port, src, dst, bytes, queue);
    on_device(src.device(), [&](DeviceState& d) {
      ACCEL_CUDA(cudaMemcpyAsync(dst, ptr<void>(src), bytes, cudaMemcpyDeviceToHost, stream_at(d, queue)));
    });
  }

  // Waits without holding the device's mutex: the other queue's commands are enqueued meanwhile.
  void finish(int device, size_t queue) override {
    DeviceState& d = device_at(device);
    in_context(d, true, [&] {
      cudaStream_t stream;
      {
        std::lock_guard<std::mutex> lock(d.mutex);
        make_current(d);
        stream = stream_at(d, queue);
      }
      ACCEL_CUDA(cudaStreamSynchronize(stream));
    });
  }

  void matmul(DType type, const DeviceBuffer& a, const DeviceBuffer& b, DeviceBuffer& out, size_t batch, size_t m,
              size_t k, size_t n) override {
    const Cublas& lib = Cublas::get();
    if (!lib.error.empty()) throw Error("device_unavailable", lib.error);
    if (m > INT_MAX || k > INT_MAX || n > INT_MAX) throw ArgumentError("matmul dimensions must each be below 2^31 for cuBLAS");
    on_device(a.device(), [&](DeviceState& d) {
      if (k == 0) {
        ACCEL_CUDA(cudaMemsetAsync(ptr<void>(out), 0, out.bytes(), d.streams[0]));
        return;
      }
      if (d.cublas == nullptr) {
        if (lib.create(&d.cublas) != CUBLAS_STATUS_SUCCESS) throw Error("cuda_error", "cublasCreate failed");
        lib.set_stream(d.cublas, d.streams[0]);
      }
      // Row-major C = A B is column-major C^T = B^T A^T: the same memory, operands swapped.
      // One call per product, queued on the stream (cuBLAS returns before the product is done).
      const int M = static_cast<int>(m), K = static_cast<int>(k), N = static_cast<int>(n);
      cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
      for (size_t i = 0; i < batch && status == CUBLAS_STATUS_SUCCESS; ++i) {
        if (type == DType::F32) {
          const float one = 1, zero = 0;
          status = lib.sgemm(d.cublas, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, ptr<float>(b) + i * k * n, N,
                             ptr<float>(a) + i * m * k, K, &zero, ptr<float>(out) + i * m * n, N);
        } else {
          const double one = 1, zero = 0;
          status = lib.dgemm(d.cublas, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, ptr<double>(b) + i * k * n, N,
                             ptr<double>(a) + i * m * k, K, &zero, ptr<double>(out) + i * m * n, N);
        }
      }
      if (status != CUBLAS_STATUS_SUCCESS)
        throw Error(status == CUBLAS_STATUS_ALLOC_FAILED ? "out_of_memory" : "cuda_error",
                    "cuBLAS gemm failed with status " + std::to_string(static_cast<int>(status)));
    });
  }


  int64_t allocated_bytes(int device) override {
    return device_at(device).health.life()->bytes.load(std::memory_order_relaxed);
  }

 private:
  std::string name() const override { return "cuda"; }

  std::string describe(const DeviceInfo& info) const override {
    return info.name + " (compute capability " + info.capability + ")";
  }

  std::string find_devices(std::vector<std::unique_ptr<DeviceState>>& out) override {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return "no usable CUDA device: cudaGetDeviceCount failed with " + cuda_error_text(e);
    }
    for (int i = 0; i < count; ++i) {
      cudaDeviceProp prop;
      if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
      auto state = std::make_unique<DeviceState>();
      state->ordinal = i;
      DeviceInfo& info = state->info;
      info.backend = "cuda";
      info.platform = "CUDA";
      info.name = prop.name;
      info.type = "gpu";
      info.memory = prop.totalGlobalMem;
      info.max_alloc = prop.totalGlobalMem;
      info.compute_units = static_cast<uint32_t>(prop.multiProcessorCount);
      info.capability = std::to_string(prop.major) + "." + std::to_string(prop.minor);
      out.push_back(std::move(state));
    }
    if (!out.empty()) HostBuffer::set_pinning(&pin_host, &unpin_host);
    return "the CUDA driver reports no devices";
  }

  // A device's staging slots (core/staging.hpp): page-locked host memory of CUDA's, and an event
  // per slot for its last copy.
  class Slots final : public StagingPort {
   public:
    Slots(CudaBackend& backend, int device) : StagingPort(kDeviceSlotBytes), backend_(backend), device_(device) {
      try {
        for (size_t i = 0; i < kDeviceSlots; ++i) {
          void* memory = nullptr;
          ACCEL_CUDA(cudaHostAlloc(&memory, kDeviceSlotBytes, cudaHostAllocPortable));
          slot.push_back(static_cast<unsigned char*>(memory));
          cudaEvent_t event = nullptr;
          ACCEL_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
          done_.push_back(event);
        }
      } catch (...) {
        release();
        throw;
      }
    }
    ~Slots() override { release(); }

    // Inside a staged transfer, which holds the port's mutex: a fault's rebuild waits for the
    // transfer to end (it frees the slots' memory), so these never rebuild.
    void to_device(size_t i, DeviceBuffer& dst, size_t offset, size_t bytes, size_t queue) override {
      check_kept();
      backend_.on_device(
          device_,
          [&](DeviceState& d) {
            cudaStream_t stream = stream_at(d, queue);
            ACCEL_CUDA(cudaMemcpyAsync(ptr<unsigned char>(dst) + offset, slot[i], bytes, cudaMemcpyHostToDevice, stream));
            ACCEL_CUDA(cudaEventRecord(done_[i], stream));
          },
          false);
    }
    void from_device(size_t i, const DeviceBuffer& src, size_t offset, size_t bytes, size_t queue) override {
      check_kept();
      backend_.on_device(
          device_,
          [&](DeviceState& d) {
            cudaStream_t stream = stream_at(d, queue);
            ACCEL_CUDA(cudaMemcpyAsync(slot[i], ptr<unsigned char>(src) + offset, bytes, cudaMemcpyDeviceToHost, stream));
            ACCEL_CUDA(cudaEventRecord(done_[i], stream));
          },
          false);
    }
    // Without the device's mutex, as finish(): the other stream's commands are enqueued meanwhile.
    // An event never recorded is complete. Every use of a slot's memory follows a wait.
    void wait(size_t i) override {
      check_kept();
      backend_.in_context(backend_.device_at(device_), false, [&] { ACCEL_CUDA(cudaEventSynchronize(done_[i])); });
    }

    // The device's context was rebuilt, and took the slots' memory and events with it: this port
    // is left (never destroyed), and refuses every use.
    void abandon() { abandoned_.store(true, std::memory_order_release); }

   private:
    void check_kept() const {
      if (abandoned_.load(std::memory_order_acquire))
        throw Error("device_lost", "CUDA device " + std::to_string(device_) +
                                       "'s context was rebuilt after a fault during this transfer");
    }

    void release() noexcept {
      for (cudaEvent_t event : done_) cudaEventDestroy(event);
      for (unsigned char* memory : slot) cudaFreeHost(memory);
      done_.clear();
      slot.clear();
    }

    CudaBackend& backend_;
    int device_;
    std::vector<cudaEvent_t> done_;
    std::atomic<bool> abandoned_{false};
  };

  // The device's slots where a transfer of `bytes` from or into `host` is staged: large, and not in
  // a mapping of Accel's (which is pinned instead, HostBuffer::ensure_pinned). Null otherwise, and
  // where CUDA gives no pinned memory for them.
  StagingPort* staging_for(int device, const void* host, size_t bytes) {
    if (!staged(device, HostBuffer::ensure_pinned(host, bytes), bytes)) return nullptr;
    return on_device(device, [&](DeviceState& d) {
      return d.staging.get<Error>([&] { return std::make_unique<Slots>(*this, device); });
    });
  }

  // Runs f under the device's mutex with the device current and its streams made (in_context).
  // `may_rebuild`: false inside a staged transfer.
  template <typename F>
  auto on_device(int device, F&& f, bool may_rebuild = true) -> decltype(f(std::declval<DeviceState&>())) {
    DeviceState& d = device_at(device);
    return in_context(d, may_rebuild, [&]() -> decltype(f(d)) {
      std::lock_guard<std::mutex> lock(d.mutex);
      if (d.health.take_simulated_failure()) check(cudaErrorIllegalAddress, "a kernel (a simulated fault)");
      make_current(d);
      return f(d);
    });
  }

  static std::string label(const DeviceState& d) {
    return "CUDA device " + std::to_string(d.info.index) + " (" + d.info.name + ")";
  }

  // Runs f holding the device's context shared, at once Error("device_failed") where the device is
  // fenced. A sticky error inside marks the device faulted; the call then fails with
  // Error("device_fault"), after rebuilding the device where `may_rebuild` (the thread is in no
  // staged transfer; else the next call rebuilds it). A device that faulted is rebuilt first.
  template <typename F>
  auto in_context(DeviceState& d, bool may_rebuild, F&& f) -> decltype(f()) {
    if (may_rebuild) rebuild_if_faulted(d);
    std::string fault;
    {
      ContextHold hold(d.context);
      d.health.check_usable([&] { return label(d); });
      try {
        return f();
      } catch (const Error& e) {
        if (e.reason() != "device_fault") throw;
        fault = e.what();
        std::lock_guard<std::mutex> lock(d.mutex);
        d.fault = fault;
        d.faulted.store(true, std::memory_order_release);
      }
    }
    const std::string where = label(d) + ": " + fault + "; ";
    if (!may_rebuild) throw Error("device_fault", where + "its context is rebuilt before the device's next call");
    throw Error("device_fault", where + DeviceHealth::describe(rebuild_if_faulted(d)));
  }

  // Where the device met a sticky error: once no command, wait or staged transfer is inside its
  // context, rebuilds or fences it (DeviceHealth::recover). Returns the outcome of the last rebuild.
  DeviceHealth::Outcome rebuild_if_faulted(DeviceState& d) {
    while (d.faulted.load(std::memory_order_acquire)) {
      StagingPort* port = nullptr;
      {
        std::lock_guard<std::mutex> lock(d.mutex);
        port = d.staging.current();
      }
      std::unique_lock<std::mutex> staged;
      if (port != nullptr) staged = std::unique_lock<std::mutex>(port->mutex);
      std::unique_lock<std::shared_mutex> exclusive(d.context);
      std::lock_guard<std::mutex> lock(d.mutex);
      if (d.staging.current() != port) continue;  // slots made meanwhile: wait for them too
      if (!d.faulted.load(std::memory_order_acquire)) break;  // another thread rebuilt it
      d.outcome = d.health.recover(d.fault, [&] { reset(d); }, [&] { return probe(d); });
      d.faulted.store(false, std::memory_order_release);
    }
    std::lock_guard<std::mutex> lock(d.mutex);
    return d.outcome;
  }

  // A new primary context for the device. What was made in the old one (streams, the cuBLAS handle,
  // loaded kernels, the staging slots' pinned memory and events) went with it, or may have: it is
  // forgotten, never destroyed, as destroying it may crash. Caller holds the context exclusively.
  static void reset(DeviceState& d) {
    if (StagingPort* old = d.staging.abandon()) static_cast<Slots*>(old)->abandon();
    d.cublas = nullptr;
    d.source_kernels.clear();
    for (auto& stream : d.streams) stream = nullptr;
    d.ready = false;
    ACCEL_CUDA(cudaSetDevice(d.ordinal));
    cudaDeviceReset();  // the probe says whether it worked
    cudaGetLastError();
    ready(d);
  }

  // A tiny allocation, fill and free on the device, waited for on both streams.
  static bool probe(DeviceState& d) {
    make_current(d);
    void* p = nullptr;
    ACCEL_CUDA(cudaMallocAsync(&p, 256, d.streams[0]));
    ACCEL_CUDA(cudaMemsetAsync(p, 0, 256, d.streams[0]));
    ACCEL_CUDA(cudaFreeAsync(p, d.streams[0]));
    for (cudaStream_t stream : d.streams) ACCEL_CUDA(cudaStreamSynchronize(stream));
    return true;
  }

  // The device current on this thread, its streams made. Caller holds d.mutex.
  static void make_current(DeviceState& d) {
    ACCEL_CUDA(cudaSetDevice(d.ordinal));
    ready(d);
  }

  static cudaStream_t stream_at(DeviceState& d, size_t queue) {
    if (queue >= kSlots) throw std::logic_error("CUDA queue " + std::to_string(queue) + " out of range");
    return d.streams[queue];
  }

  // Streams once per device. The stream-ordered pool keeps up to an eighth of the device's memory
  // when it is freed (a streamed call's chunk buffers, a chain's temporaries), rather than
  // returning it to the driver at every synchronisation and allocating it again on the next call.
  static void ready(DeviceState& d) {
    if (d.ready) return;
    for (size_t s = 0; s < kSlots; ++s) ACCEL_CUDA(cudaStreamCreateWithFlags(&d.streams[s], cudaStreamNonBlocking));
    cudaMemPool_t pool;
    ACCEL_CUDA(cudaDeviceGetDefaultMemPool(&pool, d.ordinal));
    uint64_t keep = d.info.memory / 8;
    ACCEL_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    d.ready = true;
  }
};

}  // namespace

std::unique_ptr<Backend> make_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace accel::cuda
