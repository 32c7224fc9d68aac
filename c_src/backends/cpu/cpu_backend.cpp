// CpuBackend (see cpu_backend.hpp): splits a call into chunks over the pool.
#include "backends/cpu/cpu_backend.hpp"

#ifdef ACCEL_WITH_OPENBLAS
#include <cblas.h>
#endif

#include <algorithm>
#include <fstream>
#include <string>

#include "backends/cpu/host_kernels.hpp"
#include "core/error.hpp"
#include "core/host_buffer.hpp"

namespace accel::cpu {

namespace {
// Large enough to amortise the pool's hand-off (a chunk of 10-step work takes ~0.1 ms), small
// enough that two threads finish together.
constexpr size_t kGrain = 16384;

std::string cpu_model() {
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "host CPU";
}
}  // namespace

CpuBackend::CpuBackend(unsigned threads) : pool_(threads, kPoolSpin) {
#ifdef ACCEL_WITH_OPENBLAS
  // products run over this backend's threads (tensor_cpu.cpp), each on one OpenBLAS thread
  openblas_set_num_threads(1);
#endif
  device_.backend = "cpu";
  device_.platform = "host";
  device_.name = cpu_model();
  device_.type = "cpu";
  device_.memory = physical_memory_bytes();
  device_.max_alloc = physical_memory_bytes();
  device_.compute_units = pool_.threads();
  device_.capability = host_kernels().isa;  // the instruction set its kernels were built for
}

BackendStatus CpuBackend::status() {
  std::string detail = std::to_string(threads()) + " threads";
#ifdef ACCEL_WITH_OPENBLAS
  // the kernels OpenBLAS picked for this CPU (or OPENBLAS_CORETYPE named)
  detail += "; OpenBLAS " + std::string(openblas_get_corename());
#endif
  return {"cpu", true, true, detail};
}

void CpuBackend::logistic_map(const Int64Source& in, unsigned char* out, const LogisticMapPlan& plan,
                              const CallOptions& options) {
  if (options.device != 0)
    throw ArgumentError("the cpu backend has one device, 0; got device " + std::to_string(options.device));
  // Host memory needs no chunking; a requested chunk size only bounds the pool's grain.
  const size_t grain = options.chunk_elements != 0 ? std::min(options.chunk_elements, kGrain) : kGrain;
  pool_.parallel_for(in.count, grain,
                     [&](size_t begin, size_t end) { logistic_map_span(in, out, begin, end, plan, options.cancel); });
  if (options.cancel != nullptr) options.cancel->throw_if_cancelled();
}

}  // namespace accel::cpu
