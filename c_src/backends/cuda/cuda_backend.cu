// The CUDA backend, over the CUDA runtime linked statically: the NIF loads wherever the toolkit's
// libraries are absent, and reports the driver's own reason where no driver or device exists.
// Discovery happens once, on first use. Each device gets, lazily and once, two streams and two
// device buffers; a call's chunks alternate between them, so the transfers of one chunk overlap the
// kernel of the other (in-order within a stream). Calls on a device are serialised by its mutex.
// The math is kernels/logistic_map.h, compiled here as device code.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <memory>
#include <mutex>
#include <string>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/logistic_map_kernel.cuh"
#include "backends/cuda/tensor_kernels.cuh"
#include "core/chunk_plan.hpp"
#include "core/device_backend.hpp"
#include "core/error.hpp"

namespace accel::cuda {
namespace {

std::string reason_for(cudaError_t e) {
  switch (e) {
    case cudaErrorMemoryAllocation:
      return "out_of_memory";
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorDeviceUninitialized:
      return "device_unavailable";
    default:
      return "cuda_error";
  }
}

std::string cuda_error_text(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

// Every runtime call goes through here: the error names the call and CUDA's own error name.
#define ACCEL_CUDA(call) check((call), #call)
void check(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a sticky-free error so the next call starts clean
  throw Error(reason_for(e), std::string(call) + " failed with " + cuda_error_text(e));
}

constexpr int kThreads = 256;
constexpr size_t kSlots = 2;

// cuBLAS, loaded on first use with dlopen: the NIF must load where libcublas is absent, and a
// static cuBLAS would add hundreds of megabytes. Only the four entry points matmul needs.
struct Cublas {
  using Create = cublasStatus_t (*)(cublasHandle_t*);
  using SetStream = cublasStatus_t (*)(cublasHandle_t, cudaStream_t);
  using Sgemm = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float*,
                                   const float*, int, const float*, int, const float*, float*, int);
  using Dgemm = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const double*,
                                   const double*, int, const double*, int, const double*, double*, int);
  Create create = nullptr;
  SetStream set_stream = nullptr;
  Sgemm sgemm = nullptr;
  Dgemm dgemm = nullptr;
  std::string error;  // why it could not be loaded

  static const Cublas& get() {
    static const Cublas lib = load();
    return lib;
  }

 private:
  static Cublas load() {
    Cublas c;
    void* handle = nullptr;
    for (const char* name : {"libcublas.so.13", "libcublas.so", "/usr/local/cuda/lib64/libcublas.so.13"})
      if ((handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    if (handle == nullptr) {
      const char* why = dlerror();
      c.error = std::string("cuBLAS could not be loaded: ") + (why != nullptr ? why : "libcublas.so.13 not found");
      return c;
    }
    c.create = reinterpret_cast<Create>(dlsym(handle, "cublasCreate_v2"));
    c.set_stream = reinterpret_cast<SetStream>(dlsym(handle, "cublasSetStream_v2"));
    c.sgemm = reinterpret_cast<Sgemm>(dlsym(handle, "cublasSgemm_v2"));
    c.dgemm = reinterpret_cast<Dgemm>(dlsym(handle, "cublasDgemm_v2"));
    if (!c.create || !c.set_stream || !c.sgemm || !c.dgemm) c.error = "libcublas lacks the cublas*_v2 entry points";
    return c;
  }
};

struct DeviceState {
  DeviceInfo info;
  int ordinal = 0;
  std::mutex mutex;  // guards everything below and serialises calls on this device
  bool ready = false;
  cudaStream_t streams[kSlots] = {};  // streams[0] also carries every tensor operation, in order
  long long* buffers[kSlots] = {};
  size_t buffer_elements = 0;
  int* zero_divisor = nullptr;      // an integer divide's flag (tensors)
  cublasHandle_t cublas = nullptr;  // created on the first matmul
  std::shared_ptr<std::atomic<int64_t>> tensor_bytes = std::make_shared<std::atomic<int64_t>>(0);

  ~DeviceState() {
    if (!ready) return;
    cudaSetDevice(ordinal);
    for (size_t s = 0; s < kSlots; ++s) {
      if (buffers[s] != nullptr) cudaFree(buffers[s]);
      if (streams[s] != nullptr) cudaStreamDestroy(streams[s]);
    }
    if (zero_divisor != nullptr) cudaFree(zero_divisor);
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

unsigned blocks_for(unsigned long long n) {
  return static_cast<unsigned>(std::clamp<unsigned long long>((n + kThreads - 1) / kThreads, 1, 1ULL << 20));
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

  // ---- tensors: queued on streams[0] in order; only downloads and integer divides wait ----

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

  void iota(DeviceBuffer& out, DType type, size_t n) override {
    on_device(out.device(), [&](DeviceState& d) {
      visit_type(type, [&](auto tag) {
        using T = decltype(tag);
        iota_kernel<T><<<blocks_for(n), kThreads, 0, d.streams[0]>>>(ptr<T>(out), n);
      });
      ACCEL_CUDA(cudaGetLastError());
    });
  }

  void cast(const DeviceBuffer& in, DType from, DeviceBuffer& out, DType to, size_t n) override {
    on_device(in.device(), [&](DeviceState& d) {
      visit_type(from, [&](auto f) {
        visit_type(to, [&](auto t) {
          using F = decltype(f);
          using T = decltype(t);
          cast_kernel<F, T><<<blocks_for(n), kThreads, 0, d.streams[0]>>>(ptr<F>(in), ptr<T>(out), n);
        });
      });
      ACCEL_CUDA(cudaGetLastError());
    });
  }

  void binary(BinaryOp op, DType type, const Operand& a, const Operand& b, DeviceBuffer& out, size_t n) override {
    on_device(out.device(), [&](DeviceState& d) {
      const bool check_zero = op == BinaryOp::Divide && !is_float(type);
      if (d.zero_divisor == nullptr) ACCEL_CUDA(cudaMalloc(reinterpret_cast<void**>(&d.zero_divisor), sizeof(int)));
      if (check_zero) ACCEL_CUDA(cudaMemsetAsync(d.zero_divisor, 0, sizeof(int), d.streams[0]));
      visit_type(type, [&](auto tag) {
        using T = decltype(tag);
        auto scalar = [](const Operand& o) {
          return std::is_floating_point_v<T> ? static_cast<T>(o.scalar.f) : static_cast<T>(o.scalar.i);
        };
        binary_kernel<T><<<blocks_for(n), kThreads, 0, d.streams[0]>>>(
            static_cast<int>(op), a.buffer ? ptr<T>(*a.buffer) : nullptr, a.buffer ? a.count : 0, scalar(a),
            b.buffer ? ptr<T>(*b.buffer) : nullptr, b.buffer ? b.count : 0, scalar(b), ptr<T>(out), n, d.zero_divisor);
      });
      ACCEL_CUDA(cudaGetLastError());
      if (!check_zero) return;
      int found = 0;
      ACCEL_CUDA(cudaMemcpyAsync(&found, d.zero_divisor, sizeof found, cudaMemcpyDeviceToHost, d.streams[0]));
      ACCEL_CUDA(cudaStreamSynchronize(d.streams[0]));
      if (found != 0) throw ArgumentError("integer division by zero in Accel.Tensor.divide/2");
    });
  }

  void unary(UnaryOp op, DType type, const DeviceBuffer& in, DeviceBuffer& out, size_t n) override {
    on_device(in.device(), [&](DeviceState& d) {
      visit_type(type, [&](auto tag) {
        using T = decltype(tag);
        unary_kernel<T><<<blocks_for(n), kThreads, 0, d.streams[0]>>>(static_cast<int>(op), ptr<T>(in), ptr<T>(out), n);
      });
      ACCEL_CUDA(cudaGetLastError());
    });
  }

  void reduce(ReduceOp op, DType type, const DeviceBuffer& in, DeviceBuffer& out, size_t outer, size_t len,
              size_t inner) override {
    on_device(in.device(), [&](DeviceState& d) {
      visit_type(type, [&](auto tag) {
        using T = decltype(tag);
        using Out = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;
        cudaStream_t stream = d.streams[0];
        const bool sum = op == ReduceOp::Sum;
        // Passes of partial results until one per output remains (reduction_groups()).
        const void* src = ptr<void>(in);
        bool first = true;
        std::shared_ptr<void> scratch[2];
        size_t l = len;
        for (size_t pass = 0;; ++pass) {
          const size_t groups = reduction_groups(outer * inner, l);
          void* dst = ptr<void>(out);
          if (groups > 1) {
            void* p = nullptr;
            ACCEL_CUDA(cudaMallocAsync(&p, outer * groups * inner * (sum ? sizeof(Out) : sizeof(T)), stream));
            scratch[pass % 2] = std::shared_ptr<void>(p, [stream](void* q) { cudaFreeAsync(q, stream); });
            dst = p;
          }
          const unsigned blocks = blocks_for(outer * groups * inner);
          if (sum && first)
            sum_kernel<T, Out><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(src), static_cast<Out*>(dst), outer, l, inner, groups);
          else if (sum)
            sum_kernel<Out, Out><<<blocks, kThreads, 0, stream>>>(static_cast<const Out*>(src), static_cast<Out*>(dst), outer, l, inner, groups);
          else
            pick_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<int>(op), static_cast<const T*>(src), static_cast<T*>(dst), outer, l, inner, groups);
          ACCEL_CUDA(cudaGetLastError());
          if (groups == 1) break;
          src = dst;
          first = false;
          l = groups;
        }
      });
    });
  }

  void transpose(size_t element_size, const DeviceBuffer& in, DeviceBuffer& out, size_t rows, size_t cols) override {
    on_device(in.device(), [&](DeviceState& d) {
      auto run = [&](auto tag) {
        using U = decltype(tag);
        transpose_kernel<U><<<blocks_for(rows * cols), kThreads, 0, d.streams[0]>>>(ptr<U>(in), ptr<U>(out), rows, cols);
      };
      if (element_size == 8) run(uint64_t{});
      else if (element_size == 4) run(uint32_t{});
      else run(uint8_t{});
      ACCEL_CUDA(cudaGetLastError());
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

  void logistic_map_buffer(const DeviceBuffer& in, DeviceBuffer& out, size_t n, const LogisticMapPlan& plan,
                           const CallOptions& options) override {
    on_device(in.device(), [&](DeviceState& d) {
      cudaStream_t stream = d.streams[0];
      ACCEL_CUDA(cudaMemcpyAsync(ptr<void>(out), ptr<void>(in), n * 8, cudaMemcpyDeviceToDevice, stream));
      const int64_t batch = iterations_per_launch(logistic_map_cost(n, plan), plan.iterations, launch_budget(d.info.compute_units));
      run_launches(  // bounded launches, as logistic_map() does; none when there is nothing to do
          plan.iterations, batch, false, options.cancel,
          [&](int64_t now, bool) {
            logistic_map_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
                ptr<long long>(out), n, 0, 0, 0, plan.exact, plan.f64_exact ? 1 : 0, plan.f64, now);
            ACCEL_CUDA(cudaGetLastError());
          },
          [&] { ACCEL_CUDA(cudaStreamSynchronize(stream)); });
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
