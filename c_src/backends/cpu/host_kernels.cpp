// The baseline build of the host kernels, and the choice between builds (see host_kernels.hpp).
#include "backends/cpu/host_kernels.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#define ACCEL_HOST_ENTRIES host_entries_baseline
#include "backends/cpu/host_kernels.inc"

namespace accel::cpu {

#ifndef ACCEL_HOST_V3
const HostEntry* host_entries_v3() { return nullptr; }
#endif
#ifndef ACCEL_HOST_V4
const HostEntry* host_entries_v4() { return nullptr; }
#endif

bool column_kernel(Kernel kernel) {
#define ACCEL_COLUMN_FLAG(name, ops) sum_kind(#name) != ColumnKind::none || pick_kind(#name) != ColumnKind::none,
  static constexpr bool kColumns[] = {ACCEL_KERNEL_LIST(ACCEL_COLUMN_FLAG)};
#undef ACCEL_COLUMN_FLAG
  const auto k = static_cast<size_t>(kernel);
  return k < sizeof kColumns / sizeof kColumns[0] && kColumns[k];
}

bool cpu_supports(const char* isa) {
#if (defined(ACCEL_HOST_V3) || defined(ACCEL_HOST_V4)) && defined(__x86_64__)
  __builtin_cpu_init();
  if (std::strcmp(isa, "x86-64-v4") == 0) return __builtin_cpu_supports("x86-64-v4");
  if (std::strcmp(isa, "x86-64-v3") == 0) return __builtin_cpu_supports("x86-64-v3");
#endif
  return std::strcmp(isa, "x86-64") == 0;
}

const HostKernels& host_kernels() {
  static const HostKernels chosen = [] {
    // the widest build this CPU runs, or no wider than ACCEL_HOST_ISA asks
    const char* asked = std::getenv("ACCEL_HOST_ISA");
    const std::string cap = asked != nullptr ? asked : "x86-64-v4";
    const bool v4_allowed = cap == "x86-64-v4", v3_allowed = v4_allowed || cap == "x86-64-v3";
    if (v4_allowed && host_entries_v4() != nullptr && cpu_supports("x86-64-v4"))
      return HostKernels{host_entries_v4(), "x86-64-v4"};
    if (v3_allowed && host_entries_v3() != nullptr && cpu_supports("x86-64-v3"))
      return HostKernels{host_entries_v3(), "x86-64-v3"};
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
