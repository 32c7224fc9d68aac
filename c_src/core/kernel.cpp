// Kernel names and operation counts, from the one list (kernels/kernel_list.h), and what the
// operation registry (kernels/ops.h) says of each operation.
#include "core/kernel.hpp"

#include <stdexcept>

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

#define ACCEL_OP_INFO(name, types, doc) {#name, ACCEL_ADMITS_##types},
#define ACCEL_ADMITS_ALL true, true
#define ACCEL_ADMITS_INT true, false
#define ACCEL_ADMITS_FLOAT false, true
constexpr OpInfo kUnary[] = {ACCEL_UNARY_OPS(ACCEL_OP_INFO)};
constexpr OpInfo kBinary[] = {ACCEL_BINARY_OPS(ACCEL_OP_INFO)};
constexpr OpInfo kCompare[] = {ACCEL_COMPARE_OPS(ACCEL_OP_INFO)};
#undef ACCEL_OP_INFO
static_assert(sizeof kUnary / sizeof kUnary[0] == ACCEL_UNARY_COUNT);

const char* kernel_name(Kernel kernel) { return kKernels[static_cast<int>(kernel)].name; }
int kernel_ops(Kernel kernel) { return kKernels[static_cast<int>(kernel)].ops; }

const OpInfo& op_info(OpFamily family, int code) {
  if (code < 0 || code >= op_count(family)) throw std::out_of_range("operation code out of range");
  return family == OpFamily::Unary ? kUnary[code] : family == OpFamily::Binary ? kBinary[code] : kCompare[code];
}

int op_count(OpFamily family) {
  switch (family) {
    case OpFamily::Unary:
      return ACCEL_UNARY_COUNT;
    case OpFamily::Binary:
      return ACCEL_BINARY_COUNT;
    default:
      return ACCEL_COMPARE_COUNT;
  }
}

}  // namespace accel
