// Kernel names and operation counts, from the one list (kernels/kernel_list.h).
#include "core/kernel.hpp"

namespace accel {
namespace {

struct KernelEntry {
  const char* name;
  int ops;
};

#define ACCEL_KERNEL_ENTRY(name, ops) {#name, ops},
constexpr KernelEntry kKernels[] = {ACCEL_KERNEL_LIST(ACCEL_KERNEL_ENTRY)};
#undef ACCEL_KERNEL_ENTRY

}  // namespace

const char* kernel_name(Kernel kernel) { return kKernels[static_cast<int>(kernel)].name; }
int kernel_ops(Kernel kernel) { return kKernels[static_cast<int>(kernel)].ops; }

}  // namespace accel
