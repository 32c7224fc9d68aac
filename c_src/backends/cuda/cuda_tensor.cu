// The tensor kernels of kernels/tensor_kernels.h compiled as CUDA, and their launch: one table of
// entry points in Kernel-number order (kernels/kernel_list.h), each with the launch door's signature.
#include "backends/cuda/cuda_support.hpp"
#include "kernels/tensor_kernels.h"

namespace accel::cuda {
namespace {

using DeviceEntry = void (*)(void*, void*, void*, void*, accel_params);

#define ACCEL_DEVICE_ENTRY(name, ops) &::name,
const DeviceEntry kEntries[] = {ACCEL_KERNEL_LIST(ACCEL_DEVICE_ENTRY)};
#undef ACCEL_DEVICE_ENTRY
static_assert(sizeof kEntries / sizeof kEntries[0] == kKernelCount);

}  // namespace

void launch_tensor_kernel(Kernel kernel, cudaStream_t stream, const accel_params& params, void* const buffers[4]) {
  void* b[4] = {buffers[0], buffers[1], buffers[2], buffers[3]};
  accel_params p = params;
  void* args[] = {&b[0], &b[1], &b[2], &b[3], &p};
  ACCEL_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(kEntries[static_cast<int>(kernel)]), blocks_for(params.n),
                              kThreads, args, 0, stream));
}

}  // namespace accel::cuda
