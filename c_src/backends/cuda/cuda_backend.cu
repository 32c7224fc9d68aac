// The CUDA backend, over the CUDA runtime linked statically: the NIF loads wherever the toolkit's
// libraries are absent, and reports the driver's own reason where no driver or device exists.
// Discovery happens once, on first use. Each device gets, lazily and once, two streams and two
// device buffers; a call's chunks alternate between them, so the transfers of one chunk overlap the
// kernel of the other (in-order within a stream). Calls on a device are serialised by its mutex.
// The math is kernels/logistic_map.h, compiled here as device code.
#include <cuda_runtime.h>

#include <mutex>
#include <string>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/logistic_map_kernel.cuh"
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

struct DeviceState {
  DeviceInfo info;
  int ordinal = 0;
  std::mutex mutex;  // guards everything below and serialises calls on this device
  bool ready = false;
  cudaStream_t streams[kSlots] = {};
  long long* buffers[kSlots] = {};
  size_t buffer_elements = 0;

  ~DeviceState() {
    if (!ready) return;
    cudaSetDevice(ordinal);
    for (size_t s = 0; s < kSlots; ++s) {
      if (buffers[s] != nullptr) cudaFree(buffers[s]);
      if (streams[s] != nullptr) cudaStreamDestroy(streams[s]);
    }
  }
};

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
        int64_t ran = 0;
        do {  // one launch unless the chunk's iterations would hold the device too long
          const int64_t now = plan.iterations - ran < batch ? plan.iterations - ran : batch;
          const bool generate = from_range && ran == 0;
          logistic_map_kernel<<<blocks, kThreads, 0, stream>>>(buffer, part.count, generate ? in.at(part.offset) : 0,
                                                               in.step, generate, plan.exact, use_f64, plan.f64, now);
          ACCEL_CUDA(cudaGetLastError());
          ran += now;
          if (ran < plan.iterations) {
            ACCEL_CUDA(cudaStreamSynchronize(stream));
            if (options.cancel != nullptr) options.cancel->throw_if_cancelled();
          }
        } while (ran < plan.iterations);
        ACCEL_CUDA(cudaMemcpyAsync(out + part.offset * 8, buffer, part.count * 8, cudaMemcpyDeviceToHost, stream));
      }
      for (size_t s = 0; s < kSlots; ++s) ACCEL_CUDA(cudaStreamSynchronize(d.streams[s]));
    } catch (...) {
      for (size_t s = 0; s < kSlots; ++s) cudaStreamSynchronize(d.streams[s]);  // no copy may outlive `out`
      throw;
    }
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
    return "the CUDA driver reports no devices";
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
