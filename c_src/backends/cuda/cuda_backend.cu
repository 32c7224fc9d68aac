// The CUDA backend, over the CUDA runtime linked statically: the NIF loads wherever the toolkit's
// libraries are absent, and reports the driver's own reason where no driver or device exists.
// Discovery happens once, on first use. Each device gets, lazily and once, two streams: the launch
// door's queues. Everything goes through the door: every kernel of kernels/tensor_kernels.h
// (cuda_tensor.cu) is launched the same way; tensor operations on streams[0], in order, and streamed
// calls (the logistic map, core/device_stream.hpp) on both, each chunk's commands in order on one,
// so that one chunk's transfers overlap the other's kernel. The door's calls on a device are
// serialised by its mutex. (cuda_support: errors, geometry, cuBLAS.)
#include <algorithm>
#include <atomic>
#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/cuda_support.hpp"
#include "core/device_backend.hpp"
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
  std::shared_ptr<std::atomic<int64_t>> tensor_bytes = std::make_shared<std::atomic<int64_t>>(0);
  // Pinned slots for large transfers of pageable memory (core/staging.hpp), made on first use
  // (none where CUDA gives no pinned memory: such transfers go the pageable way).
  LazyStaging staging;

  ~DeviceState() {
    if (!ready) return;
    cudaSetDevice(ordinal);
    for (size_t s = 0; s < kSlots; ++s)
      if (streams[s] != nullptr) cudaStreamDestroy(streams[s]);
    if (cublas != nullptr) Cublas::get().destroy(cublas);
    for (auto& loaded : source_kernels) cudaLibraryUnload(loaded.second.first);
  }
};

// A tensor's memory, from the stream-ordered allocator: freed on the tensor stream after the work
// queued before it, without waiting, from whichever thread drops the last reference.
class CudaBuffer final : public DeviceBuffer {
 public:
  CudaBuffer(void* ptr, size_t bytes, int device, int ordinal, cudaStream_t stream,
             std::shared_ptr<std::atomic<int64_t>> counter)
      : DeviceBuffer(bytes, device), ptr_(ptr), ordinal_(ordinal), stream_(stream), counter_(std::move(counter)) {
    counter_->fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  }
  ~CudaBuffer() override {
    cudaSetDevice(ordinal_);
    cudaFreeAsync(ptr_, stream_);
    counter_->fetch_sub(static_cast<int64_t>(bytes()), std::memory_order_relaxed);
  }
  void* ptr() const { return ptr_; }

 private:
  void* ptr_;
  int ordinal_;
  cudaStream_t stream_;
  std::shared_ptr<std::atomic<int64_t>> counter_;
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
      return std::make_shared<CudaBuffer>(p, bytes, device, d.ordinal, d.streams[0], d.tensor_bytes);
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

  // Waits without holding the device: the other queue's commands are enqueued meanwhile.
  void finish(int device, size_t queue) override {
    cudaStream_t stream = on_device(device, [&](DeviceState& d) { return stream_at(d, queue); });
    ACCEL_CUDA(cudaStreamSynchronize(stream));
  }

  void matmul(DType type, const DeviceBuffer& a, const DeviceBuffer& b, DeviceBuffer& out, size_t m, size_t k,
              size_t n) override {
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
      const int M = static_cast<int>(m), K = static_cast<int>(k), N = static_cast<int>(n);
      cublasStatus_t status;
      if (type == DType::F32) {
        const float one = 1, zero = 0;
        status = lib.sgemm(d.cublas, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, ptr<float>(b), N, ptr<float>(a), K, &zero,
                           ptr<float>(out), N);
      } else {
        const double one = 1, zero = 0;
        status = lib.dgemm(d.cublas, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, ptr<double>(b), N, ptr<double>(a), K, &zero,
                           ptr<double>(out), N);
      }
      if (status != CUBLAS_STATUS_SUCCESS)
        throw Error(status == CUBLAS_STATUS_ALLOC_FAILED ? "out_of_memory" : "cuda_error",
                    "cuBLAS gemm failed with status " + std::to_string(static_cast<int>(status)));
    });
  }


  int64_t allocated_bytes(int device) override { return device_at(device).tensor_bytes->load(std::memory_order_relaxed); }

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

    void to_device(size_t i, DeviceBuffer& dst, size_t offset, size_t bytes, size_t queue) override {
      backend_.on_device(device_, [&](DeviceState& d) {
        cudaStream_t stream = stream_at(d, queue);
        ACCEL_CUDA(cudaMemcpyAsync(ptr<unsigned char>(dst) + offset, slot[i], bytes, cudaMemcpyHostToDevice, stream));
        ACCEL_CUDA(cudaEventRecord(done_[i], stream));
      });
    }
    void from_device(size_t i, const DeviceBuffer& src, size_t offset, size_t bytes, size_t queue) override {
      backend_.on_device(device_, [&](DeviceState& d) {
        cudaStream_t stream = stream_at(d, queue);
        ACCEL_CUDA(cudaMemcpyAsync(slot[i], ptr<unsigned char>(src) + offset, bytes, cudaMemcpyDeviceToHost, stream));
        ACCEL_CUDA(cudaEventRecord(done_[i], stream));
      });
    }
    // Without the device's mutex, as finish(): the other stream's commands are enqueued meanwhile.
    // An event never recorded is complete.
    void wait(size_t i) override { ACCEL_CUDA(cudaEventSynchronize(done_[i])); }

   private:
    void release() noexcept {
      for (cudaEvent_t event : done_) cudaEventDestroy(event);
      for (unsigned char* memory : slot) cudaFreeHost(memory);
      done_.clear();
      slot.clear();
    }

    CudaBackend& backend_;
    int device_;
    std::vector<cudaEvent_t> done_;
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

  // Runs f under the device's mutex with the device current and its streams made.
  template <typename F>
  auto on_device(int device, F&& f) -> decltype(f(std::declval<DeviceState&>())) {
    DeviceState& d = device_at(device);
    std::lock_guard<std::mutex> lock(d.mutex);
    ACCEL_CUDA(cudaSetDevice(d.ordinal));
    ready(d);
    return f(d);
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
