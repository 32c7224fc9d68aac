// The OpenCL backend, over the Khronos C++ bindings and the ICD loader: any vendor's devices, and
// PoCL's CPU device on machines without a GPU. Discovery happens once, on first use. Everything
// goes through the launch door: every kernel of kernels/tensor_kernels.h is launched the same way;
// tensor operations on the device's first queue, in order, and streamed calls (the logistic map,
// core/device_stream.hpp) on both queues, each chunk's commands in order on one of them. The
// door's calls on a device are serialised by its mutex. Every OpenCL error becomes accel::Error naming the
// call and the error code. (cl_support: errors and the SIGCHLD guard; cl_device: state and programs.)
#include <algorithm>
#include <string>
#include <utility>

#include "backends/opencl/cl_device.hpp"
#include "backends/opencl/cl_support.hpp"
#include "backends/opencl/opencl_backend.hpp"
#include "core/device_backend.hpp"
#include "core/error.hpp"

#ifdef ACCEL_WITH_CLBLAST
#include <clblast.h>
#endif

namespace accel::opencl {
namespace {

std::string type_name(cl_device_type type) {
  if (type & CL_DEVICE_TYPE_GPU) return "gpu";
  if (type & CL_DEVICE_TYPE_CPU) return "cpu";
  if (type & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
  return "other";
}

class OpenClBackend final : public DeviceBackend<DeviceState> {
 public:
  // ---- the launch door: tensor operations are queued on the device's first queue, in order; a
  // call returns once its commands are queued (clFlush), except downloads, which wait. ----

  std::shared_ptr<DeviceBuffer> allocate(int device, size_t bytes) override {
    return on_device(device, [&](DeviceState& d) -> std::shared_ptr<DeviceBuffer> {
      if (bytes > d.info.max_alloc)
        throw Error("out_of_memory", "a tensor of " + std::to_string(bytes) + " bytes exceeds " + d.info.name +
                                         "'s largest buffer (" + std::to_string(d.info.max_alloc) + " bytes)");
      cl::Buffer mem(d.context, CL_MEM_READ_WRITE, std::max<size_t>(bytes, 1));
      return std::make_shared<ClBuffer>(std::move(mem), bytes, device, d.health.life());
    });
  }

  // Large transfers of a GPU go through pinned slots (staging.hpp): to an OpenCL runtime all of
  // the caller's memory is pageable. The staged upload returns once the source has been read.
  void upload(DeviceBuffer& dst, const void* src) override {
    if (StagingPort* port = staging_for(dst.device(), dst.bytes())) return staged_upload(*port, dst, src, dst.bytes(), 0);
    on_device(dst.device(), [&](DeviceState& d) { d.queues[0].enqueueWriteBuffer(mem(dst), CL_TRUE, 0, dst.bytes(), src); });
  }

  void download(const DeviceBuffer& src, void* dst, size_t bytes) override {
    if (StagingPort* port = staging_for(src.device(), bytes)) return staged_download(*port, src, dst, bytes, 0);
    on_device(src.device(), [&](DeviceState& d) { d.queues[0].enqueueReadBuffer(mem(src), CL_TRUE, 0, bytes, dst); });
  }

  void copy(const DeviceBuffer& src, DeviceBuffer& dst, size_t bytes) override {
    on_device(src.device(), [&](DeviceState& d) {
      d.queues[0].enqueueCopyBuffer(mem(src), mem(dst), 0, 0, bytes);
      d.queues[0].flush();
    });
  }

  void zero(DeviceBuffer& dst) override {
    on_device(dst.device(), [&](DeviceState& d) {
      d.queues[0].enqueueFillBuffer(mem(dst), cl_uchar{0}, 0, dst.bytes());
      d.queues[0].flush();
    });
  }

  void launch(Kernel kernel, int device, const accel_params& params, const KernelBuffers& buffers, size_t,
              const Cancellation*, size_t queue) override {
    on_device(device, [&](DeviceState& d) {
      cl::Kernel& k = tensor_kernel(d, kernel);
      for (cl_uint i = 0; i < 4; ++i) k.setArg(i, buffers[i] != nullptr ? mem(*buffers[i]) : cl::Buffer());
      k.setArg(4, sizeof params, &params);
      cl::CommandQueue& q = queue_at(d, queue);
      q.enqueueNDRangeKernel(k, cl::NullRange, cl::NDRange(global_size(params.n)), cl::NullRange);
      q.flush();
    });
  }

  void launch_source(const SourceKernel& kernel, int device, uint64_t n, const std::vector<const DeviceBuffer*>& buffers,
                     const std::vector<uint64_t>& scalars, const Cancellation*, size_t queue) override {
    on_device(device, [&](DeviceState& d) {
      cl::Kernel& k = source_kernel(d, kernel);
      // An expert kernel's parameters are the user's: say what Accel passes where they differ.
      const cl_uint params = k.getInfo<CL_KERNEL_NUM_ARGS>();
      if (params != buffers.size() + 1 + scalars.size())
        throw ArgumentError("the OpenCL kernel " + kernel.entry + " has " + std::to_string(params) +
                            " parameters, but Accel passes " + std::to_string(buffers.size() + 1 + scalars.size()) +
                            ": the output, each input, n (ulong) and each scalar");
      cl_uint arg = 0;
      for (const DeviceBuffer* b : buffers) k.setArg(arg++, mem(*b));
      k.setArg(arg++, static_cast<cl_ulong>(n));
      for (size_t s = 0; s < scalars.size(); ++s) {
        try {
          k.setArg(arg++, kernel.scalar_sizes[s], &scalars[s]);
        } catch (const cl::Error& e) {
          if (e.err() != CL_INVALID_ARG_SIZE) throw;
          throw ArgumentError("scalar " + std::to_string(s) + " is " + std::to_string(kernel.scalar_sizes[s]) +
                              " bytes, which parameter " + std::to_string(arg - 1) + " of the OpenCL kernel " +
                              kernel.entry + " is not: do the kernel's scalar types match its parameters?");
        }
      }
      cl::CommandQueue& q = queue_at(d, queue);
      q.enqueueNDRangeKernel(k, cl::NullRange, cl::NDRange(global_size(n)), cl::NullRange);
      q.flush();
    });
  }

  size_t queues(int) override { return kQueues; }

  // Non-blocking, straight from and into the caller's memory (see Backend::queues); a staged
  // transfer returns once the caller's memory is read (upload) or written (download).
  void enqueue_upload(DeviceBuffer& dst, const void* src, size_t bytes, size_t queue) override {
    if (StagingPort* port = staging_for(dst.device(), bytes)) return staged_upload(*port, dst, src, bytes, queue);
    on_device(dst.device(), [&](DeviceState& d) {
      cl::CommandQueue& q = queue_at(d, queue);
      q.enqueueWriteBuffer(mem(dst), CL_FALSE, 0, bytes, src);
      q.flush();
    });
  }

  void enqueue_download(const DeviceBuffer& src, void* dst, size_t bytes, size_t queue) override {
    if (StagingPort* port = staging_for(src.device(), bytes)) return staged_download(*port, src, dst, bytes, queue);
    on_device(src.device(), [&](DeviceState& d) {
      cl::CommandQueue& q = queue_at(d, queue);
      q.enqueueReadBuffer(mem(src), CL_FALSE, 0, bytes, dst);
      q.flush();
    });
  }

  void finish(int device, size_t queue) override {
    on_device(device, [&](DeviceState& d) { queue_at(d, queue).finish(); });
  }

  // Keeps SIGCHLD's default disposition for the whole call, so that a CPU device's commands may
  // run ahead of the host as a GPU's do (see on_device), and waits for them all at the end.
  std::shared_ptr<void> hold(int device) override {
    struct Held {
      DeviceState& d;
      ChildWaitGuard child_wait;
      explicit Held(DeviceState& state) : d(state) {
        std::lock_guard<std::mutex> lock(d.mutex);
        ++d.streaming;
      }
      ~Held() {
        std::lock_guard<std::mutex> lock(d.mutex);
        drain(d);
        --d.streaming;
      }
    };
    return std::make_shared<Held>(device_at(device));
  }

  void matmul(DType type, const DeviceBuffer& a, const DeviceBuffer& b, DeviceBuffer& out, size_t batch, size_t m,
              size_t k, size_t n) override {
#ifdef ACCEL_WITH_CLBLAST
    on_device(a.device(), [&](DeviceState& d) {
      if (k == 0) {
        d.queues[0].enqueueFillBuffer(mem(out), cl_uchar{0}, 0, out.bytes());
        return;
      }
      cl_command_queue queue = d.queues[0]();
      const auto layout = clblast::Layout::kRowMajor;
      const auto no = clblast::Transpose::kNo;
      // one product: Gemm (CLBlast's tuned routine); several: one strided-batched call, product i
      // reading a and b, and writing out, i strides on
      const clblast::StatusCode status =
          batch == 1
              ? (type == DType::F32 ? clblast::Gemm<float>(layout, no, no, m, n, k, 1.0f, mem(a)(), 0, k, mem(b)(), 0, n,
                                                           0.0f, mem(out)(), 0, n, &queue)
                                    : clblast::Gemm<double>(layout, no, no, m, n, k, 1.0, mem(a)(), 0, k, mem(b)(), 0, n,
                                                            0.0, mem(out)(), 0, n, &queue))
          : type == DType::F32
              ? clblast::GemmStridedBatched<float>(layout, no, no, m, n, k, 1.0f, mem(a)(), 0, k, m * k, mem(b)(), 0, n,
                                                   k * n, 0.0f, mem(out)(), 0, n, m * n, batch, &queue)
              : clblast::GemmStridedBatched<double>(layout, no, no, m, n, k, 1.0, mem(a)(), 0, k, m * k, mem(b)(), 0, n,
                                                    k * n, 0.0, mem(out)(), 0, n, m * n, batch, &queue);
      if (status != clblast::StatusCode::kSuccess)
        throw Error(status == clblast::StatusCode::kOpenCLOutOfResources || status == clblast::StatusCode::kOpenCLOutOfHostMemory
                        ? "out_of_memory"
                        : "opencl_error",
                    "CLBlast Gemm failed with status " + std::to_string(static_cast<int>(status)));
      d.queues[0].flush();
    });
#else
    (void)type, (void)a, (void)b, (void)out, (void)batch, (void)m, (void)k, (void)n;
    throw ArgumentError("matmul on :opencl needs CLBlast, which this build did not find (run bin/setup, then rebuild)");
#endif
  }


  bool supports(DType type, int device) override { return type != DType::F64 || device_at(device).fp64; }

  int64_t allocated_bytes(int device) override {
    return device_at(device).health.life()->bytes.load(std::memory_order_relaxed);
  }

 private:
  std::string name() const override { return "opencl"; }

  std::string describe(const DeviceInfo& info) const override {
    return info.platform + ": " + info.name + " (" + info.type + ")";
  }

  std::string find_devices(std::vector<std::unique_ptr<DeviceState>>& out) override {
    ChildWaitGuard child_wait;
    try {
      std::vector<cl::Platform> platforms;
      cl::Platform::get(&platforms);
      for (const auto& platform : platforms) {
        std::vector<cl::Device> found;
        try {
          platform.getDevices(CL_DEVICE_TYPE_ALL, &found);
        } catch (const cl::Error&) {
          continue;  // a platform without devices
        }
        for (const auto& device : found) {
          auto state = std::make_unique<DeviceState>();
          state->device = device;
          DeviceInfo& info = state->info;
          info.backend = "opencl";
          info.platform = platform.getInfo<CL_PLATFORM_NAME>();
          info.name = device.getInfo<CL_DEVICE_NAME>();
          info.type = type_name(device.getInfo<CL_DEVICE_TYPE>());
          info.memory = device.getInfo<CL_DEVICE_GLOBAL_MEM_SIZE>();
          info.max_alloc = device.getInfo<CL_DEVICE_MAX_MEM_ALLOC_SIZE>();
          info.compute_units = device.getInfo<CL_DEVICE_MAX_COMPUTE_UNITS>();
          state->fp64 = device.getInfo<CL_DEVICE_DOUBLE_FP_CONFIG>() != 0;
          state->exact_divide =
              (device.getInfo<CL_DEVICE_SINGLE_FP_CONFIG>() & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
          out.push_back(std::move(state));
        }
      }
      return "OpenCL platforms found, but no devices";
    } catch (const cl::Error& e) {
      out.clear();
      return "no OpenCL platform found: " + cl_error_text(e);
    }
  }

  // A device's staging slots: buffers the runtime allocates in pinned host memory
  // (CL_MEM_ALLOC_HOST_PTR), mapped once, from and into which transfers run at the bus's speed
  // (NVIDIA's OpenCL guide). Each slot's last transfer is an event.
  class Slots final : public StagingPort {
   public:
    Slots(OpenClBackend& backend, DeviceState& d, int device)
        : StagingPort(kDeviceSlotBytes), backend_(backend), device_(device), queue_(d.queues[0]) {
      try {
        for (size_t i = 0; i < kDeviceSlots; ++i) {
          buffers_.emplace_back(d.context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, kDeviceSlotBytes);
          slot.push_back(static_cast<unsigned char*>(
              queue_.enqueueMapBuffer(buffers_[i], CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, kDeviceSlotBytes)));
        }
      } catch (...) {
        unmap();  // the slots mapped before the one that failed
        throw;
      }
      done_.resize(kDeviceSlots);
    }
    ~Slots() override { unmap(); }

    void to_device(size_t i, DeviceBuffer& dst, size_t offset, size_t bytes, size_t queue) override {
      backend_.on_device(device_, [&](DeviceState& d) {
        cl::CommandQueue& q = queue_at(d, queue);
        q.enqueueWriteBuffer(mem(dst), CL_FALSE, offset, bytes, slot[i], nullptr, &done_[i]);
        q.flush();
      });
    }
    void from_device(size_t i, const DeviceBuffer& src, size_t offset, size_t bytes, size_t queue) override {
      backend_.on_device(device_, [&](DeviceState& d) {
        cl::CommandQueue& q = queue_at(d, queue);
        q.enqueueReadBuffer(mem(src), CL_FALSE, offset, bytes, slot[i], nullptr, &done_[i]);
        q.flush();
      });
    }
    // Without the device's mutex: the other queue's commands are enqueued meanwhile.
    void wait(size_t i) override {
      if (done_[i]() == nullptr) return;
      try {
        done_[i].wait();
      } catch (const cl::Error& e) {
        done_[i] = cl::Event();
        DeviceState& d = backend_.device_at(device_);
        ChildWaitGuard child_wait;
        std::lock_guard<std::mutex> lock(d.mutex);
        throw failure(d, e);
      }
      done_[i] = cl::Event();
    }

   private:
    void unmap() noexcept {
      try {
        for (size_t i = 0; i < slot.size(); ++i) queue_.enqueueUnmapMemObject(buffers_[i], slot[i]);
        queue_.finish();
      } catch (...) {  // a device going away with its slots: nothing to report to
      }
    }

    OpenClBackend& backend_;
    int device_;
    cl::CommandQueue queue_;
    std::vector<cl::Buffer> buffers_;
    std::vector<cl::Event> done_;
  };

  // The device's slots where a transfer of `bytes` is staged (made on first use), else null: also
  // where the runtime will not give pinned memory for them, and the transfer goes straight.
  StagingPort* staging_for(int device, size_t bytes) {
    if (!staged(device, false, bytes)) return nullptr;
    return on_device(device, [&](DeviceState& d) {
      return d.staging.get<cl::Error>([&] { return std::make_unique<Slots>(*this, d, device); });
    });
  }

  // The error a call that met OpenCL's `e` on d fails with: where it may be a fault, the device is
  // probed, and rebuilt or fenced where the probe fails (core/device_health.hpp), and the call
  // fails with Error("device_fault") saying which. Caller holds d.mutex.
  static Error failure(DeviceState& d, const cl::Error& e) {
    const std::string what = cl_error_text(e);
    const std::string where = label(d) + ": ";
    if (may_be_fault(e.err())) {
      const auto outcome = d.health.recover(what, [&] { rebuild(d); }, [&] { return probe(d); });
      if (outcome != DeviceHealth::Outcome::transient)
        return Error("device_fault", where + what + "; " + DeviceHealth::describe(outcome));
    }
    return Error(reason_for(e.err()), where + what);
  }

  static std::string label(const DeviceState& d) {
    return "OpenCL device " + std::to_string(d.info.index) + " (" + d.info.name + ")";
  }

  // Runs f on the device's state under its mutex, with OpenCL errors turned into accel::Error (a
  // fault's recovery included: failure()); at once Error("device_failed") where the device is fenced.
  template <typename F>
  auto on_device(int device, F&& f) -> decltype(f(std::declval<DeviceState&>())) {
    DeviceState& d = device_at(device);
    ChildWaitGuard child_wait;
    std::lock_guard<std::mutex> lock(d.mutex);
    d.health.check_usable([&] { return label(d); });
    try {
      ready(d);
      if (d.health.take_simulated_failure()) throw cl::Error(CL_OUT_OF_RESOURCES, "clFinish (a simulated fault)");
      // On a CPU device (PoCL) a queued kernel may be compiled and linked only when it runs, by a
      // child process whose wait needs the SIGCHLD disposition ChildWaitGuard holds: so the work
      // must finish before the guard goes, unless a streamed call holds the device (hold()).
      struct FinishOnCpu {
        DeviceState& d;
        ~FinishOnCpu() {
          if (d.info.type == "cpu" && d.streaming == 0) drain(d);
        }
      } finish{d};
      return f(d);
    } catch (const cl::Error& e) {
      throw failure(d, e);
    }
  }

};

}  // namespace

std::unique_ptr<Backend> make_backend() { return std::make_unique<OpenClBackend>(); }

}  // namespace accel::opencl

// The plugin's entry point (accel_opencl.so), found by opencl_loader.cpp with dlsym.
extern "C" __attribute__((visibility("default"))) accel::Backend* accel_opencl_plugin_create() {
  return accel::opencl::make_backend().release();
}
