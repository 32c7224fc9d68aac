// The OpenCL backend, over the Khronos C++ bindings and the ICD loader: any vendor's devices, and
// PoCL's CPU device on machines without a GPU. Discovery happens once, on first use. Each device
// gets, lazily and once, a context, two in-order queues and a cache of built programs. A call's
// chunks alternate between the queues, each with its own buffer, so one chunk's transfers overlap
// the other's kernel (double buffering). Calls on a device are serialised by its mutex. Every
// OpenCL error becomes accel::Error naming the call and the error code.
#define CL_HPP_TARGET_OPENCL_VERSION 120
#define CL_HPP_MINIMUM_OPENCL_VERSION 120
#define CL_HPP_ENABLE_EXCEPTIONS
#include <CL/opencl.hpp>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "backends/opencl/opencl_backend.hpp"
#include "core/chunk_plan.hpp"
#include "core/device_backend.hpp"
#include "core/error.hpp"
#include "opencl_kernels.hpp"         // generated: kLogisticMapSource
#include "opencl_tensor_kernels.hpp"  // generated: kTensorSource

#ifdef ACCEL_WITH_CLBLAST
#include <clblast.h>
#endif

namespace accel::opencl {
namespace {

const char* error_name(cl_int code) {
  switch (code) {
    case CL_DEVICE_NOT_FOUND: return "CL_DEVICE_NOT_FOUND";
    case CL_DEVICE_NOT_AVAILABLE: return "CL_DEVICE_NOT_AVAILABLE";
    case CL_COMPILER_NOT_AVAILABLE: return "CL_COMPILER_NOT_AVAILABLE";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case CL_OUT_OF_RESOURCES: return "CL_OUT_OF_RESOURCES";
    case CL_OUT_OF_HOST_MEMORY: return "CL_OUT_OF_HOST_MEMORY";
    case CL_BUILD_PROGRAM_FAILURE: return "CL_BUILD_PROGRAM_FAILURE";
    case CL_INVALID_VALUE: return "CL_INVALID_VALUE";
    case CL_INVALID_DEVICE: return "CL_INVALID_DEVICE";
    case CL_INVALID_CONTEXT: return "CL_INVALID_CONTEXT";
    case CL_INVALID_COMMAND_QUEUE: return "CL_INVALID_COMMAND_QUEUE";
    case CL_INVALID_MEM_OBJECT: return "CL_INVALID_MEM_OBJECT";
    case CL_INVALID_BUILD_OPTIONS: return "CL_INVALID_BUILD_OPTIONS";
    case CL_INVALID_KERNEL_NAME: return "CL_INVALID_KERNEL_NAME";
    case CL_INVALID_KERNEL_ARGS: return "CL_INVALID_KERNEL_ARGS";
    case CL_INVALID_ARG_SIZE: return "CL_INVALID_ARG_SIZE";
    case CL_INVALID_WORK_GROUP_SIZE: return "CL_INVALID_WORK_GROUP_SIZE";
    case CL_INVALID_GLOBAL_WORK_SIZE: return "CL_INVALID_GLOBAL_WORK_SIZE";
    case CL_INVALID_BUFFER_SIZE: return "CL_INVALID_BUFFER_SIZE";
    case CL_INVALID_OPERATION: return "CL_INVALID_OPERATION";
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "an OpenCL error";
  }
}

std::string reason_for(cl_int code) {
  switch (code) {
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
    case CL_OUT_OF_RESOURCES:
    case CL_OUT_OF_HOST_MEMORY:
    case CL_INVALID_BUFFER_SIZE:
      return "out_of_memory";
    case CL_DEVICE_NOT_AVAILABLE:
    case CL_DEVICE_NOT_FOUND:
      return "device_unavailable";
    default:
      return "opencl_error";
  }
}

std::string cl_error_text(const cl::Error& e) {
  return std::string(e.what()) + " failed with " + error_name(e.err()) + " (" + std::to_string(e.err()) + ")";
}

// ERTS sets SIGCHLD to SIG_IGN, so the kernel reaps children by itself and waitpid() fails with
// ECHILD. Some OpenCL implementations (PoCL among them) compile kernels by running a linker and
// waiting for it, and abort the whole process when that wait fails. While any OpenCL call is in
// flight, SIGCHLD is restored to its default; the last call out puts back what was there. (The
// BEAM's only direct child is erl_child_setup, which lives as long as the VM.)
class ChildWaitGuard {
 public:
  ChildWaitGuard() {
    std::lock_guard<std::mutex> lock(mutex());
    if (depth()++ == 0) {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigemptyset(&dfl.sa_mask);
      sigaction(SIGCHLD, &dfl, &saved());
    }
  }
  ~ChildWaitGuard() {
    std::lock_guard<std::mutex> lock(mutex());
    if (--depth() == 0) sigaction(SIGCHLD, &saved(), nullptr);
  }
  ChildWaitGuard(const ChildWaitGuard&) = delete;
  ChildWaitGuard& operator=(const ChildWaitGuard&) = delete;

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static int& depth() {
    static int d = 0;
    return d;
  }
  static struct sigaction& saved() {
    static struct sigaction s {};
    return s;
  }
};

std::atomic<uint64_t> g_program_builds{0};

cl_ulong bits(double d) {
  cl_ulong u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

std::string type_name(cl_device_type type) {
  if (type & CL_DEVICE_TYPE_GPU) return "gpu";
  if (type & CL_DEVICE_TYPE_CPU) return "cpu";
  if (type & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
  return "other";
}

struct DeviceState {
  DeviceInfo info;
  cl::Device device;
  bool fp64 = false;  // doubles supported: the kernels' f64 path is compiled in
  std::mutex mutex;  // guards everything below and serialises calls on this device
  bool ready = false;
  cl::Context context;
  cl::CommandQueue queues[2];  // one per buffer slot
  std::map<std::string, cl::Program> programs;  // by source and build options: each built once
  std::map<std::string, cl::Kernel> kernels;     // tensor kernels by name, made once
  cl::Buffer zero_divisor;                        // an integer divide's flag (tensors)
  // Tensor bytes on this device; shared with each buffer, which may outlive a call.
  std::shared_ptr<std::atomic<int64_t>> tensor_bytes = std::make_shared<std::atomic<int64_t>>(0);
};

// A tensor's memory: released with clReleaseMemObject, which OpenCL defers until the commands
// queued on it have finished, so a tensor dropped while its kernels run is safe.
class ClBuffer final : public DeviceBuffer {
 public:
  ClBuffer(cl::Buffer mem, size_t bytes, int device, std::shared_ptr<std::atomic<int64_t>> counter)
      : DeviceBuffer(bytes, device), mem_(std::move(mem)), counter_(std::move(counter)) {
    counter_->fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  }
  ~ClBuffer() override { counter_->fetch_sub(static_cast<int64_t>(bytes()), std::memory_order_relaxed); }
  const cl::Buffer& mem() const { return mem_; }

 private:
  cl::Buffer mem_;
  std::shared_ptr<std::atomic<int64_t>> counter_;
};

const cl::Buffer& mem(const DeviceBuffer& b) { return static_cast<const ClBuffer&>(b).mem(); }

// The logistic map kernel's arguments other than the data, count, range and iterations (0-4, 11).
void set_logistic_constants(cl::Kernel& kernel, const LogisticMapPlan& plan, bool fp64) {
  const accel_lm_params& c = plan.exact;
  kernel.setArg(5, static_cast<cl_ulong>(c.p));
  kernel.setArg(6, static_cast<cl_ulong>(c.mu_mod));
  kernel.setArg(7, static_cast<cl_ulong>(c.barrett));
  kernel.setArg(8, static_cast<cl_long>(c.mu_neg));
  kernel.setArg(9, static_cast<cl_long>(c.mu_small));
  kernel.setArg(10, static_cast<cl_long>(c.int_fast));
  kernel.setArg(12, static_cast<cl_int>(fp64 && plan.f64_exact));
  kernel.setArg(13, bits(plan.f64.p));
  kernel.setArg(14, bits(plan.f64.inv_p));
  kernel.setArg(15, bits(plan.f64.mu));
}

size_t global_size(size_t n) { return (n + 255) / 256 * 256; }  // a multiple the runtime splits evenly

class OpenClBackend final : public DeviceBackend<DeviceState> {
 public:
  void logistic_map(const Int64Source& in, unsigned char* out, const LogisticMapPlan& plan,
                    const CallOptions& options) override {
    DeviceState& d = device_at(options.device);
    ChildWaitGuard child_wait;
    std::lock_guard<std::mutex> lock(d.mutex);
    try {
      ready(d);
      cl::Kernel kernel(program(d, kLogisticMapSource, d.fp64 ? "-DACCEL_FP64=1" : ""), "accel_logistic_map");
      if (in.count == 0) return;
      // A buffer may not exceed the device's largest allocation: larger inputs go through in chunks,
      // and only then is a second buffer worth having.
      const size_t chunk = chunk_elements(in.count, d.info.max_alloc / 8, options.chunk_elements);
      const size_t slots = chunk < in.count ? 2 : 1;
      cl::Buffer buffers[2];
      for (size_t s = 0; s < slots; ++s) buffers[s] = cl::Buffer(d.context, CL_MEM_READ_WRITE, chunk * 8);
      const bool from_range = in.kind == Int64Source::Kind::Range;
      const uint64_t budget = launch_budget(d.info.compute_units);
      cl::Event done[2];  // the last read enqueued on each slot
      try {
        for (const Chunk& part : plan_chunks(in.count, chunk, slots)) {
          // At most two chunks in flight: wait for this slot's previous chunk, which also gives a
          // cancelled call its chance to stop between chunks.
          if (done[part.slot]()) done[part.slot].wait();
          if (options.cancel != nullptr) options.cancel->throw_if_cancelled();
          const size_t offset = part.offset, m = part.count;
          cl::CommandQueue& queue = d.queues[part.slot];
          cl::Buffer& buffer = buffers[part.slot];
          // Non-blocking transfers straight from and into the caller's memory; each in-order queue
          // orders its slot's commands, and finish() below waits before that memory can go away.
          if (!from_range) queue.enqueueWriteBuffer(buffer, CL_FALSE, 0, m * 8, in.bytes + offset * 8);
          kernel.setArg(0, buffer);
          kernel.setArg(1, static_cast<cl_ulong>(m));
          kernel.setArg(3, static_cast<cl_long>(in.step));
          set_logistic_constants(kernel, plan, d.fp64);
          const size_t global = global_size(m);
          const int64_t batch = iterations_per_launch(logistic_map_cost(m, plan), plan.iterations, budget);
          // One launch unless the chunk's iterations would hold the device too long.
          run_launches(
              plan.iterations, batch, true, options.cancel,
              [&](int64_t now, bool first) {
                const bool generate = from_range && first;
                kernel.setArg(2, static_cast<cl_long>(generate ? in.at(offset) : 0));
                kernel.setArg(4, static_cast<cl_int>(generate));
                kernel.setArg(11, static_cast<cl_long>(now));
                queue.enqueueNDRangeKernel(kernel, cl::NullRange, cl::NDRange(global), cl::NullRange);
              },
              [&] { queue.finish(); });
          queue.enqueueReadBuffer(buffer, CL_FALSE, 0, m * 8, out + offset * 8, nullptr, &done[part.slot]);
        }
        for (auto& q : d.queues) q.finish();
      } catch (...) {
        drain(d);  // no transfer may outlive the caller's memory
        throw;
      }
    } catch (const cl::Error& e) {
      throw Error(reason_for(e.err()), "OpenCL device " + std::to_string(options.device) + " (" + d.info.name + "): " + cl_error_text(e));
    }
  }

  // ---- tensors: every operation is queued on the device's first queue, in order; a call returns
  // once its commands are queued (clFlush), except downloads and integer divides, which wait. ----

  std::shared_ptr<DeviceBuffer> allocate(int device, size_t bytes) override {
    return on_device(device, [&](DeviceState& d) -> std::shared_ptr<DeviceBuffer> {
      if (bytes > d.info.max_alloc)
        throw Error("out_of_memory", "a tensor of " + std::to_string(bytes) + " bytes exceeds " + d.info.name +
                                         "'s largest buffer (" + std::to_string(d.info.max_alloc) + " bytes)");
      cl::Buffer mem(d.context, CL_MEM_READ_WRITE, std::max<size_t>(bytes, 1));
      return std::make_shared<ClBuffer>(std::move(mem), bytes, device, d.tensor_bytes);
    });
  }

  void upload(DeviceBuffer& dst, const void* src) override {
    on_device(dst.device(), [&](DeviceState& d) { d.queues[0].enqueueWriteBuffer(mem(dst), CL_TRUE, 0, dst.bytes(), src); });
  }

  void download(const DeviceBuffer& src, void* dst, size_t bytes) override {
    on_device(src.device(), [&](DeviceState& d) { d.queues[0].enqueueReadBuffer(mem(src), CL_TRUE, 0, bytes, dst); });
  }

  void iota(DeviceBuffer& out, DType type, size_t n) override {
    on_device(out.device(), [&](DeviceState& d) {
      launch(d, std::string("accel_iota_") + dtype_name(type), n, mem(out), static_cast<cl_ulong>(n));
    });
  }

  void cast(const DeviceBuffer& in, DType from, DeviceBuffer& out, DType to, size_t n) override {
    on_device(in.device(), [&](DeviceState& d) {
      if (from == to) {
        d.queues[0].enqueueCopyBuffer(mem(in), mem(out), 0, 0, in.bytes());
        d.queues[0].flush();
        return;
      }
      launch(d, std::string("accel_cast_") + dtype_name(from) + "_" + dtype_name(to), n, mem(in), mem(out),
             static_cast<cl_ulong>(n));
    });
  }

  void binary(BinaryOp op, DType type, const Operand& a, const Operand& b, DeviceBuffer& out, size_t n) override {
    on_device(out.device(), [&](DeviceState& d) {
      const bool check_zero = op == BinaryOp::Divide && !is_float(type);
      if (!d.zero_divisor()) d.zero_divisor = cl::Buffer(d.context, CL_MEM_READ_WRITE, sizeof(cl_int));
      if (check_zero) d.queues[0].enqueueFillBuffer(d.zero_divisor, cl_int{0}, 0, sizeof(cl_int));
      cl::Kernel& k = kernel(d, std::string("accel_binary_") + dtype_name(type));
      k.setArg(0, static_cast<cl_int>(op));
      set_operand(k, 1, a, type);
      set_operand(k, 4, b, type);
      k.setArg(7, mem(out));
      k.setArg(8, static_cast<cl_ulong>(n));
      k.setArg(9, d.zero_divisor);
      d.queues[0].enqueueNDRangeKernel(k, cl::NullRange, cl::NDRange(global_size(n)), cl::NullRange);
      if (!check_zero) {
        d.queues[0].flush();
        return;
      }
      cl_int found = 0;
      d.queues[0].enqueueReadBuffer(d.zero_divisor, CL_TRUE, 0, sizeof found, &found);
      if (found != 0) throw ArgumentError("integer division by zero in Accel.Tensor.divide/2");
    });
  }

  void unary(UnaryOp op, DType type, const DeviceBuffer& in, DeviceBuffer& out, size_t n) override {
    on_device(in.device(), [&](DeviceState& d) {
      launch(d, std::string("accel_unary_") + dtype_name(type), n, static_cast<cl_int>(op), mem(in), mem(out),
             static_cast<cl_ulong>(n));
    });
  }

  void reduce(ReduceOp op, DType type, const DeviceBuffer& in, DeviceBuffer& out, size_t outer, size_t len,
              size_t inner) override {
    on_device(in.device(), [&](DeviceState& d) {
      // Passes of partial results until one per output remains (reduction_groups()).
      const DType result = op == ReduceOp::Sum ? sum_type(type) : type;
      const bool sum = op == ReduceOp::Sum;
      cl::Buffer src = mem(in);
      DType src_type = type;
      // CPU devices (PoCL) get a few contiguous parts per core; GPUs many interleaved ones.
      const bool cpu = d.info.type == "cpu";
      for (size_t l = len;;) {
        const size_t groups =
            cpu ? std::clamp<size_t>(d.info.compute_units * 8 / std::max<size_t>(outer * inner, 1), 1,
                                     std::max<size_t>(l / 4096, 1))
                : reduction_groups(outer * inner, l);
        cl::Buffer dst = groups == 1 ? mem(out) : cl::Buffer(d.context, CL_MEM_READ_WRITE, outer * groups * inner * dtype_size(result));
        const std::string name = std::string(sum ? "accel_sum_" : "accel_pick_") + dtype_name(src_type);
        const cl_ulong o = outer, ln = l, k = inner, g = groups, block = cpu ? (l + groups - 1) / groups : 0;
        if (sum)
          launch(d, name, outer * groups * inner, src, dst, o, ln, k, g, block);
        else
          launch(d, name, outer * groups * inner, static_cast<cl_int>(op), src, dst, o, ln, k, g, block);
        if (groups == 1) break;
        src = dst;  // the previous partials are released once their pass has run
        src_type = result;
        l = groups;
      }
    });
  }

  void transpose(size_t element_size, const DeviceBuffer& in, DeviceBuffer& out, size_t rows, size_t cols) override {
    on_device(in.device(), [&](DeviceState& d) {
      launch(d, "accel_transpose_" + std::to_string(element_size), rows * cols, mem(in), mem(out),
             static_cast<cl_ulong>(rows), static_cast<cl_ulong>(cols));
    });
  }

  void matmul(DType type, const DeviceBuffer& a, const DeviceBuffer& b, DeviceBuffer& out, size_t m, size_t k,
              size_t n) override {
#ifdef ACCEL_WITH_CLBLAST
    on_device(a.device(), [&](DeviceState& d) {
      if (k == 0) {
        d.queues[0].enqueueFillBuffer(mem(out), cl_uchar{0}, 0, out.bytes());
        return;
      }
      cl_command_queue queue = d.queues[0]();
      const auto layout = clblast::Layout::kRowMajor;
      const auto no = clblast::Transpose::kNo;
      const clblast::StatusCode status =
          type == DType::F32 ? clblast::Gemm<float>(layout, no, no, m, n, k, 1.0f, mem(a)(), 0, k, mem(b)(), 0, n, 0.0f,
                                                    mem(out)(), 0, n, &queue)
                             : clblast::Gemm<double>(layout, no, no, m, n, k, 1.0, mem(a)(), 0, k, mem(b)(), 0, n, 0.0,
                                                     mem(out)(), 0, n, &queue);
      if (status != clblast::StatusCode::kSuccess)
        throw Error(status == clblast::StatusCode::kOpenCLOutOfResources || status == clblast::StatusCode::kOpenCLOutOfHostMemory
                        ? "out_of_memory"
                        : "opencl_error",
                    "CLBlast Gemm failed with status " + std::to_string(static_cast<int>(status)));
      d.queues[0].flush();
    });
#else
    (void)type, (void)a, (void)b, (void)out, (void)m, (void)k, (void)n;
    throw ArgumentError("matmul on :opencl needs CLBlast, which this build did not find (run bin/setup, then rebuild)");
#endif
  }

  void logistic_map_buffer(const DeviceBuffer& in, DeviceBuffer& out, size_t n, const LogisticMapPlan& plan,
                           const CallOptions& options) override {
    on_device(in.device(), [&](DeviceState& d) {
      cl::CommandQueue& queue = d.queues[0];
      queue.enqueueCopyBuffer(mem(in), mem(out), 0, 0, n * 8);
      cl::Kernel k(program(d, kLogisticMapSource, d.fp64 ? "-DACCEL_FP64=1" : ""), "accel_logistic_map");
      k.setArg(0, mem(out));
      k.setArg(1, static_cast<cl_ulong>(n));
      k.setArg(2, cl_long{0});
      k.setArg(3, cl_long{0});
      k.setArg(4, cl_int{0});
      set_logistic_constants(k, plan, d.fp64);
      const int64_t batch = iterations_per_launch(logistic_map_cost(n, plan), plan.iterations,
                                                  launch_budget(d.info.compute_units));
      run_launches(  // bounded launches, as logistic_map() does; none when there is nothing to do
          plan.iterations, batch, false, options.cancel,
          [&](int64_t now, bool) {
            k.setArg(11, static_cast<cl_long>(now));
            queue.enqueueNDRangeKernel(k, cl::NullRange, cl::NDRange(global_size(n)), cl::NullRange);
          },
          [&] { queue.finish(); });
      queue.flush();
    });
  }

  bool supports(DType type, int device) override { return type != DType::F64 || device_at(device).fp64; }

  int64_t allocated_bytes(int device) override { return device_at(device).tensor_bytes->load(std::memory_order_relaxed); }

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
          out.push_back(std::move(state));
        }
      }
      return "OpenCL platforms found, but no devices";
    } catch (const cl::Error& e) {
      out.clear();
      return "no OpenCL platform found: " + cl_error_text(e);
    }
  }

  // Runs f on the device's state under its mutex, with OpenCL errors turned into accel::Error.
  template <typename F>
  auto on_device(int device, F&& f) -> decltype(f(std::declval<DeviceState&>())) {
    DeviceState& d = device_at(device);
    ChildWaitGuard child_wait;
    std::lock_guard<std::mutex> lock(d.mutex);
    try {
      ready(d);
      // On a CPU device (PoCL) a queued kernel may be compiled and linked only when it runs, by a
      // child process whose wait needs the SIGCHLD disposition ChildWaitGuard holds: so the work
      // must finish before the guard goes. Async queues would buy nothing there anyway.
      struct FinishOnCpu {
        DeviceState& d;
        ~FinishOnCpu() {
          if (d.info.type == "cpu") drain(d);
        }
      } finish{d};
      return f(d);
    } catch (const cl::Error& e) {
      throw Error(reason_for(e.err()), "OpenCL device " + std::to_string(device) + " (" + d.info.name + "): " + cl_error_text(e));
    }
  }

  static cl::Kernel& kernel(DeviceState& d, const std::string& name) {
    auto it = d.kernels.find(name);
    if (it != d.kernels.end()) return it->second;
    cl::Program& p = program(d, kTensorSource, d.fp64 ? "-DACCEL_FP64=1" : "");
    return d.kernels.emplace(name, cl::Kernel(p, name.c_str())).first->second;
  }

  // One work-item per element of n; arguments in order.
  template <typename... Args>
  static void launch(DeviceState& d, const std::string& name, size_t n, const Args&... args) {
    cl::Kernel& k = kernel(d, name);
    cl_uint index = 0;
    (k.setArg(index++, args), ...);
    d.queues[0].enqueueNDRangeKernel(k, cl::NullRange, cl::NDRange(global_size(n)), cl::NullRange);
    d.queues[0].flush();
  }

  // A binary operand as (buffer, count, scalar) arguments; count 0 marks a scalar.
  static void set_operand(cl::Kernel& k, cl_uint at, const Operand& o, DType type) {
    k.setArg(at, o.buffer != nullptr ? mem(*o.buffer) : cl::Buffer());
    k.setArg(at + 1, static_cast<cl_ulong>(o.buffer != nullptr ? o.count : 0));
    switch (type) {
      case DType::F32: k.setArg(at + 2, static_cast<cl_float>(o.scalar.f)); break;
      case DType::F64: k.setArg(at + 2, static_cast<cl_double>(o.scalar.f)); break;
      case DType::S64: k.setArg(at + 2, static_cast<cl_long>(o.scalar.i)); break;
      case DType::S32: k.setArg(at + 2, static_cast<cl_int>(o.scalar.i)); break;
      case DType::U8: k.setArg(at + 2, static_cast<cl_uchar>(o.scalar.i)); break;
    }
  }

  static void ready(DeviceState& d) {
    if (d.ready) return;
    d.context = cl::Context(d.device);
    for (auto& q : d.queues) q = cl::CommandQueue(d.context, d.device);
    d.ready = true;
  }

  // Built once per (device, options) and reused by every later call: the original experiment
  // rebuilt its kernel on every call.
  static cl::Program& program(DeviceState& d, const char* source, const std::string& options) {
    const std::string key = std::string(source == kTensorSource ? "tensor " : "logistic_map ") + options;
    auto it = d.programs.find(key);
    if (it != d.programs.end()) return it->second;
    cl::Program program(d.context, std::string(source));
    g_program_builds.fetch_add(1, std::memory_order_relaxed);
    try {
      program.build(std::vector<cl::Device>{d.device}, options.c_str());
    } catch (const cl::Error& e) {
      std::string log;
      try {
        log = program.getBuildInfo<CL_PROGRAM_BUILD_LOG>(d.device);
      } catch (const cl::Error&) {
        log = "(no build log)";
      }
      throw Error("build_failed", "OpenCL program build failed on " + d.info.name + ": " + cl_error_text(e) + "\n" + log);
    }
    return d.programs.emplace(key, std::move(program)).first->second;
  }

  static void drain(DeviceState& d) noexcept {
    for (auto& q : d.queues) {
      try {
        q.finish();
      } catch (...) {
      }
    }
  }

};

}  // namespace

std::unique_ptr<Backend> make_backend() { return std::make_unique<OpenClBackend>(); }

uint64_t program_builds() { return g_program_builds.load(std::memory_order_relaxed); }

}  // namespace accel::opencl

// The plugin's entry point (accel_opencl.so), found by opencl_loader.cpp with dlsym.
extern "C" __attribute__((visibility("default"))) accel::Backend* accel_opencl_plugin_create() {
  return accel::opencl::make_backend().release();
}
