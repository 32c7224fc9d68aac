// The baseline build of the host kernels, and the choice between builds (see host_kernels.hpp).
#include "backends/cpu/host_kernels.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>

#define ACCEL_HOST_ENTRIES host_entries_baseline
#include "backends/cpu/host_kernels.inc"

namespace accel::cpu {

#ifndef ACCEL_HOST_V3
const HostEntry* host_entries_v3() { return nullptr; }
#endif

namespace {
bool cpu_has_v3() {
#if defined(ACCEL_HOST_V3) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("x86-64-v3");
#else
  return false;
#endif
}
}  // namespace

const HostKernels& host_kernels() {
  static const HostKernels chosen = [] {
    const char* asked = std::getenv("ACCEL_HOST_ISA");
    const bool baseline = asked != nullptr && std::strcmp(asked, "x86-64") == 0;
    if (!baseline && host_entries_v3() != nullptr && cpu_has_v3()) return HostKernels{host_entries_v3(), "x86-64-v3"};
#if defined(__x86_64__)
    return HostKernels{host_entries_baseline(), "x86-64"};
#else
    return HostKernels{host_entries_baseline(), "host"};
#endif
  }();
  return chosen;
}

namespace {
std::atomic<const HostEntry*> replaced{nullptr};
}

const HostEntry* active_host_entries() {
  const HostEntry* entries = replaced.load(std::memory_order_acquire);
  return entries != nullptr ? entries : host_kernels().entries;
}

ScopedHostEntries::ScopedHostEntries(const HostEntry* entries) { replaced.store(entries, std::memory_order_release); }
ScopedHostEntries::~ScopedHostEntries() { replaced.store(nullptr, std::memory_order_release); }

}  // namespace accel::cpu
