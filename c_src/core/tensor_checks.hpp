// What the checked tensor operations (tensor.cpp, tensor_elementwise.cpp, tensor_layout.cpp) share:
// allocation of results, the checks every operation makes, shapes, and the one launch helper.
// Internal to core/: the NIF and the backends never include it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cancel.hpp"
#include "core/kernel.hpp"
#include "core/tensor.hpp"

namespace accel {
class HostBuffer;
}

namespace accel::detail {

std::string where(const Tensor& t);  // ":opencl device 0"
// A new tensor of `count` elements on (backend, device); ArgumentError for a type the device lacks.
Tensor allocate_like(Backend& backend, int device, DType type, uint64_t count);
void check_same_place(const Tensor& a, const Tensor& b);
void check_same_type(const Tensor& a, const Tensor& b);
// a * b, or ArgumentError naming `what` when it overflows.
uint64_t product(uint64_t a, uint64_t b, const char* what);
uint64_t shape_count(const std::vector<uint64_t>& shape);
std::vector<uint64_t> contiguous_strides(const std::vector<uint64_t>& shape);
std::string shape_text(const std::vector<uint64_t>& shape);  // "{2, 3}"
// A number as the bits of `type` (accel_params.bits); ArgumentError when it does not fit.
accel_u64 scalar_bits(const Scalar& v, DType type);
accel_params params_for(uint64_t items, int op = 0);
// Drops the dimensions of 1 of `shape` and merges neighbours d, d + 1 that every layout in
// `strides` steps through as one (strides[d] == strides[d + 1] * shape[d + 1]); the strides follow.
// The same elements in the same order, in as few dimensions as the layouts allow.
void merge_dimensions(std::vector<uint64_t>& shape, const std::vector<std::vector<uint64_t>*>& strides);
// ArgumentError naming `what` for a storage type (kernels/types.h), which has no kernels of its own.
void check_computes(DType type, const char* what);
// Through the door, with the one check every launch shares.
void launch(const Tensor& on, Kernel kernel, const accel_params& p, const KernelBuffers& buffers, size_t work = 1,
            const Cancellation* cancel = nullptr);
// Through the door with a zeroed flag buffer as b3: the code a work item raised there (ACCEL_SET_FLAG),
// or 0. Reading it waits for the device.
int32_t launch_flagged(const Tensor& on, Kernel kernel, const accel_params& p, KernelBuffers buffers, size_t work = 1);
// For work done on the host (the linear algebra, the FFT): a tensor's elements there, its own memory
// where its backend computes on host memory, else a copy downloaded into `staged` (nullptr for an
// empty tensor).
const void* host_elements(const Tensor& t, HostBuffer& staged);
// Where to write a new tensor's elements on the host: its own memory (which nothing else holds
// yet) where its backend computes on host memory, else `staged`, which upload_staged() then copies
// to the device.
void* host_destination(const Tensor& t, HostBuffer& staged);
void upload_staged(const Tensor& t, const HostBuffer& staged);
// The member of a family of 1-, 2-, 4-, 8- and 16-byte kernels (copy, transpose, gather) for the
// type's size.
Kernel by_size(Kernel one_byte, DType type);

}  // namespace accel::detail
