// The host kernels built for x86-64-v4 (AVX-512), compiled with -march=x86-64-v4 where the
// compiler supports it (CMakeLists.txt); see host_kernels.hpp.
#define ACCEL_HOST_ENTRIES host_entries_v4
#include "backends/cpu/host_kernels.inc"
