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

#include "backends/opencl/opencl_backend.hpp"
#include "core/chunk_plan.hpp"
#include "core/device_backend.hpp"
#include "core/error.hpp"
#include "opencl_kernels.hpp"  // generated: kLogisticMapSource

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
  std::map<std::string, cl::Program> programs;  // by build options: each built once
};

class OpenClBackend final : public DeviceBackend<DeviceState> {
 public:
  void logistic_map(const Int64Source& in, unsigned char* out, const LogisticMapPlan& plan,
                    const CallOptions& options) override {
    DeviceState& d = device_at(options.device);
    ChildWaitGuard child_wait;
    std::lock_guard<std::mutex> lock(d.mutex);
    try {
      ready(d);
      cl::Kernel kernel(program(d, d.fp64 ? "-DACCEL_FP64=1" : ""), "accel_logistic_map");
      if (in.count == 0) return;
      // A buffer may not exceed the device's largest allocation: larger inputs go through in chunks,
      // and only then is a second buffer worth having.
      const size_t chunk = chunk_elements(in.count, d.info.max_alloc / 8, options.chunk_elements);
      const size_t slots = chunk < in.count ? 2 : 1;
      cl::Buffer buffers[2];
      for (size_t s = 0; s < slots; ++s) buffers[s] = cl::Buffer(d.context, CL_MEM_READ_WRITE, chunk * 8);
      const accel_lm_params& c = plan.exact;
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
          kernel.setArg(5, static_cast<cl_ulong>(c.p));
          kernel.setArg(6, static_cast<cl_ulong>(c.mu_mod));
          kernel.setArg(7, static_cast<cl_ulong>(c.barrett));
          kernel.setArg(8, static_cast<cl_long>(c.mu_neg));
          kernel.setArg(9, static_cast<cl_long>(c.mu_small));
          kernel.setArg(10, static_cast<cl_long>(c.int_fast));
          kernel.setArg(12, static_cast<cl_int>(d.fp64 && plan.f64_exact));
          kernel.setArg(13, bits(plan.f64.p));
          kernel.setArg(14, bits(plan.f64.inv_p));
          kernel.setArg(15, bits(plan.f64.mu));
          const size_t global = (m + 255) / 256 * 256;  // a multiple the runtime can split evenly
          const int64_t batch = iterations_per_launch(logistic_map_cost(m, plan), plan.iterations, budget);
          int64_t ran = 0;
          do {  // one launch unless the chunk's iterations would hold the device too long
            const int64_t now = plan.iterations - ran < batch ? plan.iterations - ran : batch;
            const bool generate = from_range && ran == 0;
            kernel.setArg(2, static_cast<cl_long>(generate ? in.at(offset) : 0));
            kernel.setArg(4, static_cast<cl_int>(generate));
            kernel.setArg(11, static_cast<cl_long>(now));
            queue.enqueueNDRangeKernel(kernel, cl::NullRange, cl::NDRange(global), cl::NullRange);
            ran += now;
            if (ran < plan.iterations) {
              queue.finish();
              if (options.cancel != nullptr) options.cancel->throw_if_cancelled();
            }
          } while (ran < plan.iterations);
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

  static void ready(DeviceState& d) {
    if (d.ready) return;
    d.context = cl::Context(d.device);
    for (auto& q : d.queues) q = cl::CommandQueue(d.context, d.device);
    d.ready = true;
  }

  // Built once per (device, options) and reused by every later call: the original experiment
  // rebuilt its kernel on every call.
  static cl::Program& program(DeviceState& d, const std::string& options) {
    auto it = d.programs.find(options);
    if (it != d.programs.end()) return it->second;
    cl::Program program(d.context, std::string(kLogisticMapSource));
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
    return d.programs.emplace(options, std::move(program)).first->second;
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
