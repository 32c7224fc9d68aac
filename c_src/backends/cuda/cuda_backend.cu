// The CUDA backend, over the CUDA runtime linked statically: the NIF loads wherever the toolkit's
// libraries are absent, and reports the driver's own reason where no driver or device exists.
// Discovery happens once, on first use. Each device gets, lazily and once, two streams and two
// device buffers; a call's chunks alternate between them, so the transfers of one chunk overlap the
// kernel of the other (in-order within a stream). Tensors go through the launch door: every kernel
// of kernels/tensor_kernels.h (cuda_tensor.cu) is launched the same way, on streams[0], in order.
// Calls on a device are serialised by its mutex. (cuda_support: errors, geometry, cuBLAS.)
#include <algorithm>
#include <atomic>
#include <climits>
#include <memory>
#include <mutex>
#include <string>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/cuda_support.hpp"
#include "backends/cuda/logistic_map_kernel.cuh"
#include "core/chunk_plan.hpp"
#include "core/device_backend.hpp"
#include "core/error.hpp"

namespace accel::cuda {
namespace {

constexpr size_t kSlots = 2;

struct DeviceState {
  DeviceInfo info;
  int ordinal = 0;
  std::mutex mutex;  // guards everything below and serialises calls on this device
  bool ready = false;
  cudaStream_t streams[kSlots] = {};  // streams[0] also carries every tensor operation, in order
  long long* buffers[kSlots] = {};
  size_t buffer_elements = 0;
  cublasHandle_t cublas = nullptr;  // created on the first matmul
  std::shared_ptr<std::atomic<int64_t>> tensor_bytes = std::make_shared<std::atomic<int64_t>>(0);

  ~DeviceState() {
    if (!ready) return;
    cudaSetDevice(ordinal);
    for (size_t s = 0; s < kSlots; ++s) {
      if (buffers[s] != nullptr) cudaFree(buffers[s]);
      if (streams[s] != nullptr) cudaStreamDestroy(streams[s]);
    }
    if (cublas != nullptr) Cublas::get().destroy(cublas);
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

template <typename T>
T* ptr(const DeviceBuffer& b) {
  return static_cast<T*>(static_cast<const CudaBuffer&>(b).ptr());
}

class CudaBackend final : public DeviceBackend<DeviceState> {
 public:
  void logistic_map(const Int64Source& in, unsigned char* out, const LogisticMapPlan& plan,
                    const CallOptions& options) override {
    DeviceState& d = device_at(options.device);
    std::lock_guard<std::mutex> lock(d.mutex);
    ACCEL_CUDA(cudaSetDevice(d.ordinal));  // per calling thread: dirty schedulers come and go
    if (in.count == 0) return;
    // Two buffers must fit at once, within a quarter of the device's memory.
    const size_t chunk = chunk_elements(in.count, d.info.memory / 8 / 8, options.chunk_elements);
    ready(d, chunk);
    const bool from_range = in.kind == Int64Source::Kind::Range;
    const int use_f64 = plan.f64_exact ? 1 : 0;
    const uint64_t budget = launch_budget(d.info.compute_units);
    try {
      for (const Chunk& part : plan_chunks(in.count, chunk, kSlots)) {
        cudaStream_t stream = d.streams[part.slot];
        // At most two chunks in flight: wait for this slot's previous chunk, which also gives a
        // cancelled call its chance to stop between chunks.
        ACCEL_CUDA(cudaStreamSynchronize(stream));
        if (options.cancel != nullptr) options.cancel->throw_if_cancelled();
        long long* buffer = d.buffers[part.slot];
        if (!from_range)
          ACCEL_CUDA(cudaMemcpyAsync(buffer, in.bytes + part.offset * 8, part.count * 8, cudaMemcpyHostToDevice, stream));
        const unsigned blocks = static_cast<unsigned>((part.count + kThreads - 1) / kThreads);
        const int64_t batch = iterations_per_launch(logistic_map_cost(part.count, plan), plan.iterations, budget);
        // One launch unless the chunk's iterations would hold the device too long.
        run_launches(
            plan.iterations, batch, true, options.cancel,
            [&](int64_t now, bool first) {
              const bool generate = from_range && first;
              logistic_map_kernel<<<blocks, kThreads, 0, stream>>>(buffer, part.count,
                                                                   generate ? in.at(part.offset) : 0, in.step, generate,
                                                                   plan.exact, use_f64, plan.f64, now);
              ACCEL_CUDA(cudaGetLastError());
            },
            [&] { ACCEL_CUDA(cudaStreamSynchronize(stream)); });
        ACCEL_CUDA(cudaMemcpyAsync(out + part.offset * 8, buffer, part.count * 8, cudaMemcpyDeviceToHost, stream));
      }
      for (size_t s = 0; s < kSlots; ++s) ACCEL_CUDA(cudaStreamSynchronize(d.streams[s]));
    } catch (...) {
      for (size_t s = 0; s < kSlots; ++s) cudaStreamSynchronize(d.streams[s]);  // no copy may outlive `out`
      throw;
    }
  }

  // ---- tensors, the launch door: queued on streams[0] in order; only downloads wait ----

  std::shared_ptr<DeviceBuffer> allocate(int device, size_t bytes) override {
    return on_device(device, [&](DeviceState& d) -> std::shared_ptr<DeviceBuffer> {
      void* p = nullptr;
      ACCEL_CUDA(cudaMallocAsync(&p, std::max<size_t>(bytes, 1), d.streams[0]));
      return std::make_shared<CudaBuffer>(p, bytes, device, d.ordinal, d.streams[0], d.tensor_bytes);
    });
  }

  void upload(DeviceBuffer& dst, const void* src) override {
    on_device(dst.device(), [&](DeviceState& d) {
      ACCEL_CUDA(cudaMemcpyAsync(ptr<void>(dst), src, dst.bytes(), cudaMemcpyHostToDevice, d.streams[0]));
      ACCEL_CUDA(cudaStreamSynchronize(d.streams[0]));  // the source may go away on return
    });
  }

  void download(const DeviceBuffer& src, void* dst, size_t bytes) override {
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
              const Cancellation*) override {
    on_device(device, [&](DeviceState& d) {
      void* b[4];
      for (size_t i = 0; i < 4; ++i) b[i] = buffers[i] != nullptr ? ptr<void>(*buffers[i]) : nullptr;
      launch_tensor_kernel(kernel, d.streams[0], params, b);
    });
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
    return "the CUDA driver reports no devices";
  }

  // Runs f under the device's mutex with the device current and its streams made.
  template <typename F>
  auto on_device(int device, F&& f) -> decltype(f(std::declval<DeviceState&>())) {
    DeviceState& d = device_at(device);
    std::lock_guard<std::mutex> lock(d.mutex);
    ACCEL_CUDA(cudaSetDevice(d.ordinal));
    ready(d, 0);
    return f(d);
  }

  // Streams once per device; buffers grown to the largest chunk seen, then reused by every call.
  static void ready(DeviceState& d, size_t chunk) {
    if (!d.ready) {
      for (size_t s = 0; s < kSlots; ++s) ACCEL_CUDA(cudaStreamCreateWithFlags(&d.streams[s], cudaStreamNonBlocking));
      d.ready = true;
    }
    if (d.buffer_elements >= chunk) return;
    for (size_t s = 0; s < kSlots; ++s) {
      if (d.buffers[s] != nullptr) ACCEL_CUDA(cudaFree(d.buffers[s]));
      d.buffers[s] = nullptr;
    }
    d.buffer_elements = 0;
    for (size_t s = 0; s < kSlots; ++s) ACCEL_CUDA(cudaMalloc(reinterpret_cast<void**>(&d.buffers[s]), chunk * 8));
    d.buffer_elements = chunk;
  }

};

}  // namespace

std::unique_ptr<Backend> make_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace accel::cuda
