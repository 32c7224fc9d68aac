// The CPU backend's elementwise, reduction and layout kernels (kernels/tensor_kernels.h compiled as
// host C++), one entry per Kernel number. They are built for the baseline x86-64 (SSE2) and, where
// the compiler can target them, for x86-64-v3 (AVX2, FMA: four f64 lanes, glibc's AVX2 vector math)
// and x86-64-v4 (AVX-512: its masks and registers, glibc's AVX-512 vector math; erf_inv and tanh
// 2x v3's), the widest the CPU supports chosen once at run time, as OpenBLAS and NumPy choose their
// kernels. Every build computes the same bits: no contraction into fma (-ffp-contract=off), and the
// vector math's f32 results are the scalar C library's rounded once at every vector width
// (c_src/test/host_math_test.cpp sweeps them; host_kernels_test.cpp compares the builds).
// ACCEL_HOST_ISA=x86-64 or x86-64-v3 in the environment caps the choice (to compare builds, or on
// a machine where a wider one misbehaves).
#pragma once

#include "core/kernel.hpp"

namespace accel::cpu {

// A sum, product, min or max over an axis with elements after it runs as rows of columns, up to
// this many columns at a time (host_kernels.inc's column_runs): the launch's tasks hold whole runs.
constexpr accel_u64 kColumnPiece = 256;

// Whether `kernel` is a sum kernel (accel_sum_*: sums and products) or a pick kernel
// (accel_pick_*: min and max), which run as rows of columns where p->size[2] (the inner extent)
// is at least 8 and p->size[4] (the block) is set.
bool column_kernel(Kernel kernel);

// (buffers 0..3, the launch record, the first and one past the last element)
using HostEntry = void (*)(void*, void*, void*, void*, const accel_params*, accel_u64, accel_u64);

// The table of kKernelCount entries for the baseline build, and for x86-64-v3 and x86-64-v4
// (nullptr where this build has none).
const HostEntry* host_entries_baseline();
const HostEntry* host_entries_v3();
const HostEntry* host_entries_v4();

// Whether this CPU runs code built for `isa` ("x86-64", "x86-64-v3", "x86-64-v4").
bool cpu_supports(const char* isa);

// The table the CPU backend runs, and its instruction set's name ("x86-64-v4", "x86-64-v3" or
// "x86-64"; "host" elsewhere): the widest build the CPU supports, unless ACCEL_HOST_ISA caps it.
struct HostKernels {
  const HostEntry* entries;
  const char* isa;
};
const HostKernels& host_kernels();

// The table launches read: host_kernels().entries, unless a test has replaced it (below).
const HostEntry* active_host_entries();

// For tests: the CPU backend launches from `entries` while this lives (one at a time).
class ScopedHostEntries {
 public:
  explicit ScopedHostEntries(const HostEntry* entries);
  ~ScopedHostEntries();
  ScopedHostEntries(const ScopedHostEntries&) = delete;
  ScopedHostEntries& operator=(const ScopedHostEntries&) = delete;
};

}  // namespace accel::cpu
