// The launch door's host side: kernels numbered from kernels/kernel_list.h, the record they take
// (accel_params, kernels/launch.h) and the buffers they get. Backend::launch runs kernel K over
// params.n work items; everything above it (core/tensor.cpp) is written once for every backend.
#pragma once

#include <array>

#include "core/tensor.hpp"
#include "kernels/kernel_list.h"
#include "kernels/launch.h"

namespace accel {

enum class Kernel : int {
#define ACCEL_KERNEL_NUMBER(name, ops) name,
  ACCEL_KERNEL_LIST(ACCEL_KERNEL_NUMBER)
#undef ACCEL_KERNEL_NUMBER
};

#define ACCEL_KERNEL_ONE(name, ops) +1
constexpr int kKernelCount = 0 ACCEL_KERNEL_LIST(ACCEL_KERNEL_ONE);
#undef ACCEL_KERNEL_ONE

// A kernel's name (its entry point's name in every dialect) and how many operation codes it serves.
const char* kernel_name(Kernel kernel);
int kernel_ops(Kernel kernel);

// The member of a typed family (given by its f32 member) for an element type.
constexpr Kernel typed_kernel(Kernel f32_member, DType type) {
  return static_cast<Kernel>(static_cast<int>(f32_member) + static_cast<int>(type) * ACCEL_TYPED_KERNELS);
}
// Between two compute types (tensor_cast converts the rest with accel_convert).
constexpr Kernel cast_kernel(DType from, DType to) {
  return static_cast<Kernel>(static_cast<int>(Kernel::accel_cast_f32_f32) +
                             static_cast<int>(from) * ACCEL_COMPUTE_TYPES + static_cast<int>(to));
}
static_assert(typed_kernel(Kernel::accel_binary_f32, DType::U8) == Kernel::accel_binary_u8);
static_assert(typed_kernel(Kernel::accel_pick_f32, DType::S64) == Kernel::accel_pick_s64);
static_assert(typed_kernel(Kernel::accel_argpick_f32, DType::U32) == Kernel::accel_argpick_u32);
static_assert(cast_kernel(DType::F64, DType::S32) == Kernel::accel_cast_f64_s32);
static_assert(cast_kernel(DType::U8, DType::U8) == Kernel::accel_cast_u8_u8);
static_assert(static_cast<int>(cast_kernel(DType::U32, DType::U32)) + 1 == static_cast<int>(Kernel::accel_convert));
static_assert(sizeof(accel_params) == 50 * 8, "accel_params must have the same layout in every dialect");

// b0..b3 of the kernel (null where it takes fewer), all on the launch's device.
using KernelBuffers = std::array<const DeviceBuffer*, 4>;

}  // namespace accel
