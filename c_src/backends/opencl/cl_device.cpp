// The OpenCL device state's lazy parts: context and queues, the program cache, tensor kernels.
#include "backends/opencl/cl_device.hpp"

#include <stdexcept>
#include <string>

#include "backends/opencl/opencl_backend.hpp"
#include "core/error.hpp"
#include "opencl_tensor_kernels.hpp"  // generated: kTensorSource

namespace accel::opencl {

std::atomic<uint64_t> g_program_builds{0};

void ready(DeviceState& d) {
  if (d.ready) return;
  d.context = cl::Context(d.device);
  for (auto& q : d.queues) q = cl::CommandQueue(d.context, d.device);
  d.kernels.resize(kKernelCount);
  d.ready = true;
}

bool may_be_fault(cl_int code) {
  switch (code) {
    case CL_OUT_OF_RESOURCES:
    case CL_DEVICE_NOT_AVAILABLE:
    case CL_INVALID_CONTEXT:
    case CL_INVALID_COMMAND_QUEUE:
    case CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST:
      return true;
    default:
      return false;
  }
}

void rebuild(DeviceState& d) {
  drain(d);
  d.ready = false;
  d.source_kernels.clear();
  d.kernels.clear();
  d.programs.clear();
  for (auto& q : d.queues) q = cl::CommandQueue();
  d.context = cl::Context();
  ready(d);
}

bool probe(DeviceState& d) {
  ready(d);
  cl::Buffer scratch(d.context, CL_MEM_READ_WRITE, 64);
  for (auto& q : d.queues) {
    q.enqueueFillBuffer(scratch, cl_uchar{0}, 0, 64);
    q.finish();
  }
  return true;
}

cl::Program& program(DeviceState& d, const std::string& name, const char* source) {
  const std::string options = std::string(d.fp64 ? "-DACCEL_FP64=1" : "") +
                              (d.info.type == "cpu" ? " -DACCEL_OPENCL_CPU=1" : "") +
                              (d.exact_divide ? " -cl-fp32-correctly-rounded-divide-sqrt" : "");
  const std::string key = name + " " + options;
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
    throw Error("build_failed", "OpenCL program " + name + " failed to build on " + d.info.name + ": " +
                                    cl_error_text(e) + "\n" + log);
  }
  return d.programs.emplace(key, std::move(program)).first->second;
}

cl::Kernel& tensor_kernel(DeviceState& d, Kernel kernel) {
  cl::Kernel& k = d.kernels.at(static_cast<size_t>(kernel));
  if (k() == nullptr) k = cl::Kernel(program(d, "tensor", kTensorSource), kernel_name(kernel));
  return k;
}

cl::Kernel& source_kernel(DeviceState& d, const SourceKernel& kernel) {
  auto it = d.source_kernels.find(kernel.key);
  if (it == d.source_kernels.end()) {
    cl::Program& built = program(d, "user " + kernel.key, kernel.source.c_str());
    cl::Kernel made;
    try {
      made = cl::Kernel(built, kernel.entry.c_str());
    } catch (const cl::Error& e) {
      if (e.err() == CL_INVALID_KERNEL_NAME) throw ArgumentError("the OpenCL program has no __kernel named " + kernel.entry);
      throw;
    }
    it = d.source_kernels.emplace(kernel.key, std::move(made)).first;
  }
  return it->second;
}

cl::CommandQueue& queue_at(DeviceState& d, size_t queue) {
  if (queue >= kQueues) throw std::logic_error("OpenCL queue " + std::to_string(queue) + " out of range");
  return d.queues[queue];
}

void drain(DeviceState& d) noexcept {
  for (auto& q : d.queues) {
    try {
      q.finish();
    } catch (...) {
    }
  }
}

uint64_t program_builds() { return g_program_builds.load(std::memory_order_relaxed); }

}  // namespace accel::opencl
