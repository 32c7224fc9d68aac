// CpuBackend (see cpu_backend.hpp): splits a call into chunks over the pool.
#include "backends/cpu/cpu_backend.hpp"

#include <string>

namespace accel::cpu {

namespace {
// Large enough to amortise the pool's hand-off (a chunk of 10-step work takes ~0.1 ms), small
// enough that two threads finish together.
constexpr size_t kGrain = 16384;
}  // namespace

BackendStatus CpuBackend::status() const {
  return {"cpu", true, true, std::to_string(threads()) + " threads"};
}

void CpuBackend::logistic_map(const Int64Source& in, unsigned char* out, const LogisticMapPlan& plan) {
  pool_.parallel_for(in.count, kGrain,
                     [&](size_t begin, size_t end) { logistic_map_span(in, out, begin, end, plan); });
}

}  // namespace accel::cpu
