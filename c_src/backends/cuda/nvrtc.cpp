// NVRTC, the CUDA toolkit's run-time compiler, loaded with dlopen on first use (the NIF must load
// where libnvrtc is absent: a machine with a driver but no toolkit), and the one thing Accel asks of
// it: a generated kernel's text (Accel.Kernel) compiled for one GPU architecture. Compiling needs
// no driver and no device, so it is tested on machines without either.
#include <dlfcn.h>
#include <nvrtc.h>

#include <algorithm>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.hpp"
#include "core/error.hpp"

namespace accel::cuda {
namespace {

struct Nvrtc {
  decltype(&nvrtcVersion) version = nullptr;
  decltype(&nvrtcGetErrorString) error_string = nullptr;
  decltype(&nvrtcGetNumSupportedArchs) num_archs = nullptr;
  decltype(&nvrtcGetSupportedArchs) archs = nullptr;
  decltype(&nvrtcCreateProgram) create = nullptr;
  decltype(&nvrtcDestroyProgram) destroy = nullptr;
  decltype(&nvrtcCompileProgram) compile = nullptr;
  decltype(&nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&nvrtcGetProgramLog) log = nullptr;
  decltype(&nvrtcGetCUBINSize) cubin_size = nullptr;
  decltype(&nvrtcGetCUBIN) cubin = nullptr;
  decltype(&nvrtcGetPTXSize) ptx_size = nullptr;
  decltype(&nvrtcGetPTX) ptx = nullptr;
  decltype(&nvrtcAddNameExpression) add_name = nullptr;
  decltype(&nvrtcGetLoweredName) lowered_name = nullptr;
  std::string error;              // why it could not be loaded
  std::string version_text;       // "13.0"
  std::vector<int> supported;     // the architectures it generates machine code for (90 = sm_90)
};

template <typename F>
void bind(void* handle, F& f, const char* name, std::string& error) {
  f = reinterpret_cast<F>(dlsym(handle, name));
  if (f == nullptr && error.empty()) error = std::string("libnvrtc lacks ") + name;
}

Nvrtc load() {
  Nvrtc n;
  void* handle = nullptr;
  for (const char* name : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so"})
    if ((handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
  if (handle == nullptr) {
    const char* why = dlerror();
    n.error = std::string("NVRTC (the CUDA toolkit's run-time compiler, which builds Accel.Kernel kernels for :cuda) "
                          "could not be loaded: ") +
              (why != nullptr ? why : "libnvrtc.so not found") + "; install the CUDA toolkit's libnvrtc";
    return n;
  }
  bind(handle, n.version, "nvrtcVersion", n.error);
  bind(handle, n.error_string, "nvrtcGetErrorString", n.error);
  bind(handle, n.num_archs, "nvrtcGetNumSupportedArchs", n.error);
  bind(handle, n.archs, "nvrtcGetSupportedArchs", n.error);
  bind(handle, n.create, "nvrtcCreateProgram", n.error);
  bind(handle, n.destroy, "nvrtcDestroyProgram", n.error);
  bind(handle, n.compile, "nvrtcCompileProgram", n.error);
  bind(handle, n.log_size, "nvrtcGetProgramLogSize", n.error);
  bind(handle, n.log, "nvrtcGetProgramLog", n.error);
  bind(handle, n.cubin_size, "nvrtcGetCUBINSize", n.error);
  bind(handle, n.cubin, "nvrtcGetCUBIN", n.error);
  bind(handle, n.ptx_size, "nvrtcGetPTXSize", n.error);
  bind(handle, n.ptx, "nvrtcGetPTX", n.error);
  bind(handle, n.add_name, "nvrtcAddNameExpression", n.error);
  bind(handle, n.lowered_name, "nvrtcGetLoweredName", n.error);
  if (!n.error.empty()) return n;  // the handle stays open: a process loads the library once
  int major = 0, minor = 0, count = 0;
  if (n.version(&major, &minor) != NVRTC_SUCCESS || n.num_archs(&count) != NVRTC_SUCCESS || count <= 0) {
    n.error = "libnvrtc did not report its version and architectures";
    return n;
  }
  n.version_text = std::to_string(major) + "." + std::to_string(minor);
  n.supported.resize(static_cast<size_t>(count));
  if (n.archs(n.supported.data()) != NVRTC_SUCCESS) n.error = "libnvrtc did not report its architectures";
  return n;
}

const Nvrtc& nvrtc() {
  static const Nvrtc lib = load();
  if (!lib.error.empty()) throw Error("no_compiler", lib.error);
  return lib;
}

}  // namespace

std::string kernel_compiler_version() { return "NVRTC " + nvrtc().version_text; }

DeviceCode compile_kernel_text(const std::string& source, int arch, const std::string& entry) {
  const Nvrtc& lib = nvrtc();
  if (arch < 10 || arch > 10000) throw ArgumentError("a CUDA architecture is a compute capability such as 90, got " + std::to_string(arch));
  // Machine code for the device's own architecture where NVRTC knows it; for a newer GPU, PTX for
  // the newest architecture NVRTC knows, which the driver compiles when it loads it.
  const bool native = std::find(lib.supported.begin(), lib.supported.end(), arch) != lib.supported.end();
  int target = arch;
  if (!native) {
    target = 0;
    for (int a : lib.supported)
      if (a <= arch) target = std::max(target, a);
    if (target == 0)
      throw Error("build_failed", "NVRTC " + lib.version_text + " generates code for none of the architectures up to sm_" +
                                      std::to_string(arch) + " (the oldest it knows is sm_" +
                                      std::to_string(lib.supported.front()) + ")");
  }
  nvrtcProgram program = nullptr;
  if (nvrtcResult r = lib.create(&program, source.c_str(), "accel_kernel.cu", 0, nullptr, nullptr); r != NVRTC_SUCCESS)
    throw Error(r == NVRTC_ERROR_OUT_OF_MEMORY ? "out_of_memory" : "build_failed",
                std::string("nvrtcCreateProgram failed: ") + lib.error_string(r));
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> owner(&program, [](nvrtcProgram* p) {
    // always destroyed, whatever happened: NVRTC keeps the text, the log and the code until then
    if (*p != nullptr) nvrtc().destroy(p);
  });
  // The entry must keep its name in the code (extern "C"): that name is what the loader looks up.
  if (nvrtcResult r = lib.add_name(program, entry.c_str()); r != NVRTC_SUCCESS)
    throw ArgumentError("the kernel's name " + entry + " was refused by NVRTC: " + lib.error_string(r));
  const std::string gpu = std::string("--gpu-architecture=") + (native ? "sm_" : "compute_") + std::to_string(target);
  // No fused multiply-adds (Elixir rounds each operation), IEEE division and square root, denormals kept.
  const char* options[] = {gpu.c_str(), "--std=c++17", "--fmad=false", "--prec-div=true", "--prec-sqrt=true",
                           "--ftz=false", "-w"};
  const nvrtcResult built = lib.compile(program, static_cast<int>(std::size(options)), options);
  if (built != NVRTC_SUCCESS) {
    size_t size = 0;
    std::string log;
    if (lib.log_size(program, &size) == NVRTC_SUCCESS && size > 1) {
      log.resize(size);
      if (lib.log(program, log.data()) != NVRTC_SUCCESS) log.clear();
      while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    }
    throw Error(built == NVRTC_ERROR_OUT_OF_MEMORY ? "out_of_memory" : "build_failed",
                "NVRTC " + lib.version_text + " could not compile the kernel for " + gpu.substr(19) + " (" +
                    lib.error_string(built) + "):\n" + log.substr(0, 4000));
  }
  const char* lowered = nullptr;
  if (lib.lowered_name(program, entry.c_str(), &lowered) != NVRTC_SUCCESS || lowered == nullptr)
    throw ArgumentError("the CUDA source has no __global__ function named " + entry);
  if (entry != lowered)
    throw ArgumentError("the CUDA kernel " + entry + " must be declared extern \"C\" (its compiled name is " + lowered + ")");
  DeviceCode code;
  code.machine_code = native;
  size_t size = 0;
  const nvrtcResult got = native ? lib.cubin_size(program, &size) : lib.ptx_size(program, &size);
  if (got != NVRTC_SUCCESS || size == 0) throw Error("build_failed", std::string("NVRTC gave no code: ") + lib.error_string(got));
  code.bytes.resize(size);  // PTX's size counts its NUL, which the loader needs
  if ((native ? lib.cubin(program, code.bytes.data()) : lib.ptx(program, code.bytes.data())) != NVRTC_SUCCESS)
    throw Error("build_failed", "NVRTC gave no code");
  code.target = (native ? "sm_" : "compute_") + std::to_string(target);
  return code;
}

}  // namespace accel::cuda
