// The host kernels built for x86-64-v3 (AVX2, FMA), compiled with -march=x86-64-v3 where the
// compiler supports it (CMakeLists.txt); see host_kernels.hpp.
#define ACCEL_HOST_ENTRIES host_entries_v3
#include "backends/cpu/host_kernels.inc"
