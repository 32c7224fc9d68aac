// The checked tensor operations: every count, type, backend and device is verified here before a
// backend touches memory, and every output buffer is allocated here, sized from checked counts.
#include "core/tensor.hpp"

#include <algorithm>
#include <climits>
#include <limits>
#include <cstring>
#include <stdexcept>

#include "core/backend.hpp"
#include "core/chunk_plan.hpp"
#include "core/error.hpp"
#include "core/host_buffer.hpp"
#include "core/tensor_checks.hpp"

namespace accel {
using namespace detail;
namespace {

// The largest tensor Accel accepts: 2^48 bytes (256 TiB) keeps every size product below 2^63.
constexpr uint64_t kMaxBytes = uint64_t{1} << 48;

void check_supported(Backend& backend, int device, DType type) {
  if (!backend.supports(type, device))
    throw ArgumentError(std::string("type :") + dtype_name(type) + " is not supported on :" + backend.status().name +
                        " device " + std::to_string(device) + " (it has no double precision); use :f32");
}

// Reductions run in passes of partial results (a pass with groups == 1 writes the final ones). CPUs
// (the CPU backend, PoCL) get a few contiguous parts per core; GPUs enough interleaved parts to fill
// them, each over at least 64 elements of the axis. Every group is non-empty.
struct Pass {
  uint64_t groups, block;
};
Pass reduction_pass(const DeviceInfo& device, uint64_t outputs, uint64_t len) {
  if (device.type == "cpu") {
    const uint64_t want = uint64_t{device.compute_units} * 8 / std::max<uint64_t>(outputs, 1);
    const uint64_t groups = std::clamp<uint64_t>(want, 1, std::max<uint64_t>(len / 4096, 1));
    const uint64_t block = (len + groups - 1) / groups;
    return {(len + block - 1) / block, block};
  }
  const uint64_t want = (uint64_t{1} << 16) / std::max<uint64_t>(outputs, 1);
  return {std::clamp<uint64_t>(want, 1, std::max<uint64_t>(len / 64, 1)), 0};
}

}  // namespace

namespace detail {

std::string where(const Tensor& t) {
  return ":" + t.backend->status().name + " device " + std::to_string(t.device);
}

namespace {
Tensor tensor_over(Backend& backend, int device, DType type, uint64_t count, std::shared_ptr<DeviceBuffer> buffer) {
  Tensor t;
  t.backend = &backend;
  t.device = device;
  t.type = type;
  t.count = static_cast<size_t>(count);
  t.buffer = std::move(buffer);
  return t;
}
}  // namespace

Tensor allocate_like(Backend& backend, int device, DType type, uint64_t count) {
  check_supported(backend, device, type);
  return tensor_over(backend, device, type, count, backend.allocate(device, checked_bytes(count, type)));
}

const void* host_elements(const Tensor& t, HostBuffer& staged) {
  if (t.count == 0) return nullptr;
  if (const void* host = t.backend->host_view(*t.buffer)) return host;
  const size_t bytes = checked_bytes(t.count, t.type);
  staged = HostBuffer(bytes);
  t.backend->download(*t.buffer, staged.data(), bytes);
  return staged.data();
}

void* host_destination(const Tensor& t, HostBuffer& staged) {
  if (const void* host = t.backend->host_view(*t.buffer)) return const_cast<void*>(host);
  staged = HostBuffer(checked_bytes(t.count, t.type));
  return staged.data();
}

void upload_staged(const Tensor& t, const HostBuffer& staged) {
  if (staged.data() != nullptr && t.count != 0) t.backend->upload(*t.buffer, staged.data());
}

void check_same_place(const Tensor& a, const Tensor& b) {
  if (a.backend != b.backend || a.device != b.device)
    throw ArgumentError("tensors are on different devices (" + where(a) + " and " + where(b) +
                        "): move one with Accel.Tensor.transfer/2");
}

void check_same_type(const Tensor& a, const Tensor& b) {
  if (a.type != b.type)
    throw ArgumentError(std::string("tensor types differ: :") + dtype_name(a.type) + " and :" + dtype_name(b.type) +
                        "; convert one with Accel.Tensor.as_type/2");
}

// Checked product of unsigned counts.
uint64_t product(uint64_t a, uint64_t b, const char* what) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) throw ArgumentError(std::string(what) + " overflows");
  return a * b;
}

// A scalar as the bits of the tensor's element type (accel_params.bits): integers must fit the
// type, floats only combine with floats.
accel_u64 scalar_bits(const Scalar& v, DType type) {
  if (is_float(type)) {
    const double d = v.is_float ? v.f : static_cast<double>(v.i);
    if (type == DType::F64) {
      accel_u64 bits;
      std::memcpy(&bits, &d, sizeof bits);
      return bits;
    }
    const float f = static_cast<float>(d);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return bits;
  }
  if (v.is_float)
    throw ArgumentError(std::string("a float scalar cannot combine with a tensor of type :") + dtype_name(type) +
                        "; convert the tensor with Accel.Tensor.as_type/2");
  const int64_t lo = type == DType::S32 ? INT32_MIN : is_unsigned(type) ? 0 : INT64_MIN;
  const int64_t hi = type == DType::S32 ? INT32_MAX : type == DType::U8 ? 255 : type == DType::U32 ? UINT32_MAX : INT64_MAX;
  if (v.i < lo || v.i > hi)
    throw ArgumentError("scalar " + std::to_string(v.i) + " is out of range for type :" + dtype_name(type));
  return static_cast<accel_u64>(v.i);
}

void merge_dimensions(std::vector<uint64_t>& shape, const std::vector<std::vector<uint64_t>*>& strides) {
  std::vector<uint64_t> dims;
  std::vector<std::vector<uint64_t>> kept(strides.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merges = !dims.empty();
    for (size_t j = 0; merges && j < strides.size(); ++j) merges = kept[j].back() == (*strides[j])[d] * shape[d];
    if (merges) {
      dims.back() *= shape[d];
      for (size_t j = 0; j < strides.size(); ++j) kept[j].back() = (*strides[j])[d];
    } else {
      dims.push_back(shape[d]);
      for (size_t j = 0; j < strides.size(); ++j) kept[j].push_back((*strides[j])[d]);
    }
  }
  if (dims.empty()) {  // one element: one dimension of 1
    dims.push_back(1);
    for (auto& k : kept) k.push_back(0);
  }
  shape = std::move(dims);
  for (size_t j = 0; j < strides.size(); ++j) *strides[j] = std::move(kept[j]);
}

void check_computes(DType type, const char* what) {
  if (!computes(type))
    throw ArgumentError(std::string(what) + " has no kernel for :" + dtype_name(type) +
                        " (a storage type): convert it with Accel.Tensor.as_type/2 first");
}

accel_params params_for(uint64_t items, int op) {
  accel_params p{};
  p.n = items;
  p.op = op;
  return p;
}

// Through the door, with the one check every launch shares.
void launch(const Tensor& on, Kernel kernel, const accel_params& p, const KernelBuffers& buffers, size_t work,
            const Cancellation* cancel) {
  if (p.op < 0 || p.op >= kernel_ops(kernel))
    throw std::logic_error(std::string("operation ") + std::to_string(p.op) + " out of range for " + kernel_name(kernel));
  on.backend->launch(kernel, on.device, p, buffers, work, cancel, 0);
}

int32_t launch_flagged(const Tensor& on, Kernel kernel, const accel_params& p, KernelBuffers buffers, size_t work) {
  const std::shared_ptr<DeviceBuffer> flag = on.backend->allocate(on.device, sizeof(int32_t));
  on.backend->zero(*flag);
  buffers[3] = flag.get();
  launch(on, kernel, p, buffers, work);
  int32_t found = 0;
  on.backend->download(*flag, &found, sizeof found);
  return found;
}

Kernel by_size(Kernel one_byte, DType type) {
  const size_t size = dtype_size(type);
  const int step = size == 16 ? 4 : size == 8 ? 3 : size == 4 ? 2 : size == 2 ? 1 : 0;
  return static_cast<Kernel>(static_cast<int>(one_byte) + step);
}

std::vector<uint64_t> contiguous_strides(const std::vector<uint64_t>& shape) {
  std::vector<uint64_t> strides(shape.size());
  uint64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= shape[d];
  }
  return strides;
}

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string text = "{";
  for (size_t d = 0; d < shape.size(); ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + (shape.size() == 1 ? ",}" : "}");
}

uint64_t shape_count(const std::vector<uint64_t>& shape) {
  uint64_t count = 1;
  for (uint64_t d : shape) count = product(count, d, "the shape");
  return count;
}

}  // namespace detail

namespace {

// The checks every reduction of axis `len` of [outer][len][inner] makes: the shape holds the tensor,
// and a pick (named `pick`; null for sums, whose empty sum is 0) has an element to pick.
void check_reduction(const Tensor& t, uint64_t outer, uint64_t len, uint64_t inner, const char* pick) {
  if (product(product(outer, len, "the reduced shape"), inner, "the reduced shape") != t.count)
    throw ArgumentError("a reduction over " + std::to_string(outer) + " x " + std::to_string(len) + " x " +
                        std::to_string(inner) + " elements does not match the tensor's " + std::to_string(t.count));
  if (pick != nullptr && len == 0 && outer * inner != 0)
    throw ArgumentError(std::string(pick) + " of an empty axis is undefined");
}

}  // namespace

size_t dtype_size(DType type) {
  switch (static_cast<int>(type)) {
#define ACCEL_TYPE_SIZE(name, code, bytes, kind, computes_in) \
  case code:                                                  \
    return bytes;
    ACCEL_TYPES(ACCEL_TYPE_SIZE)
#undef ACCEL_TYPE_SIZE
  }
  return 0;
}

const char* dtype_name(DType type) {
  switch (static_cast<int>(type)) {
#define ACCEL_TYPE_NAME(name, code, bytes, kind, computes_in) \
  case code:                                                  \
    return #name;
    ACCEL_TYPES(ACCEL_TYPE_NAME)
#undef ACCEL_TYPE_NAME
  }
  return "?";
}

bool dtype_named(const std::string& name, DType* type) {
  for (int code = 0; code < kTypeCount; ++code)
    if (name == dtype_name(static_cast<DType>(code))) {
      *type = static_cast<DType>(code);
      return true;
    }
  return false;
}

size_t checked_bytes(uint64_t count, DType type) {
  if (count > kMaxBytes / dtype_size(type))
    throw ArgumentError("a tensor of " + std::to_string(count) + " elements of type :" + dtype_name(type) +
                        " would exceed 2^48 bytes");
  return static_cast<size_t>(count * dtype_size(type));
}

Tensor tensor_from_bytes(Backend& backend, int device, DType type, const void* bytes, size_t size,
                         std::shared_ptr<const void> owner) {
  if (size % dtype_size(type) != 0)
    throw ArgumentError("a binary of " + std::to_string(size) + " bytes is not a whole number of :" + dtype_name(type) +
                        " elements (" + std::to_string(dtype_size(type)) + " bytes each)");
  const uint64_t count = size / dtype_size(type);
  // Without a copy where the device computes on host memory and the bytes are aligned for the type.
  if (owner != nullptr && size != 0 && reinterpret_cast<uintptr_t>(bytes) % dtype_size(type) == 0) {
    check_supported(backend, device, type);
    checked_bytes(count, type);
    if (auto wrapped = backend.wrap_host(device, bytes, size, owner))
      return tensor_over(backend, device, type, count, std::move(wrapped));
  }
  Tensor t = allocate_like(backend, device, type, count);
  if (size != 0) backend.upload(*t.buffer, bytes);
  return t;
}

Tensor tensor_iota(Backend& backend, int device, DType type, uint64_t count) {
  check_computes(type, "iota");
  Tensor t = allocate_like(backend, device, type, count);
  if (count != 0) launch(t, typed_kernel(Kernel::accel_iota_f32, type), params_for(count), {t.buffer.get()});
  return t;
}

void tensor_to_bytes(const Tensor& t, void* out, uint64_t count) {
  count = std::min<uint64_t>(count, t.count);
  if (count != 0) t.backend->download(*t.buffer, out, static_cast<size_t>(count) * dtype_size(t.type));
}

Tensor tensor_cast(const Tensor& t, DType to) {
  if (t.type != to && (is_complex(t.type) || is_complex(to)))
    throw ArgumentError(std::string("no conversion between :") + dtype_name(t.type) + " and :" + dtype_name(to) +
                        " (complex types convert only to themselves)");
  Tensor out = allocate_like(*t.backend, t.device, to, t.count);
  if (t.count == 0) return out;
  if (t.type == to) {
    t.backend->copy(*t.buffer, *out.buffer, t.buffer->bytes());
  } else if (computes(t.type) && computes(to)) {
    launch(t, cast_kernel(t.type, to), params_for(t.count), {t.buffer.get(), out.buffer.get()});
  } else {
    accel_params p = params_for(t.count);
    p.size[0] = static_cast<uint64_t>(t.type);
    p.size[1] = static_cast<uint64_t>(to);
    launch(t, Kernel::accel_convert, p, {t.buffer.get(), out.buffer.get()});
  }
  return out;
}

Tensor tensor_reinterpret(const Tensor& t, DType to) {
  const size_t bytes = t.count * dtype_size(t.type);
  if (bytes % dtype_size(to) != 0)
    throw ArgumentError(std::string("a tensor of ") + std::to_string(t.count) + " :" + dtype_name(t.type) +
                        " elements is not a whole number of :" + dtype_name(to) + " elements");
  check_supported(*t.backend, t.device, to);
  Tensor out = t;
  out.type = to;
  out.count = bytes / dtype_size(to);
  return out;
}

// Sums accumulate in 64 bits whatever the type: integers wrap modulo 2^64, f32 accumulates in f64
// (Kahan-compensated f32 on a device without doubles) and is rounded once, at the end. So every
// backend agrees to about 1e-7 relative on f32 sums of 10^8 elements.
Tensor tensor_reduce(ReduceOp op, const Tensor& t, uint64_t outer, uint64_t len, uint64_t inner) {
  const char* name = op == ReduceOp::Sum ? "sum" : op == ReduceOp::Product ? "product" : op == ReduceOp::Min ? "min" : "max";
  check_computes(t.type, name);
  const bool sum = op == ReduceOp::Sum || op == ReduceOp::Product;  // the sum kernels' family
  check_reduction(t, outer, len, inner, sum ? nullptr : name);
  const DType result = sum ? sum_type(t.type) : t.type;
  Tensor out = allocate_like(*t.backend, t.device, result, outer * inner);
  if (out.count == 0) return out;
  if (len == 0 && op == ReduceOp::Sum) {  // sums of empty axes
    t.backend->zero(*out.buffer);
    return out;
  }
  if (len == 0)  // Accel.Tensor makes a product of an empty axis (ones) without a kernel
    throw ArgumentError("a product over an empty axis is 1 everywhere; no kernel computes it");
  const DType partial = !sum ? t.type : t.type == DType::F32 && !t.backend->supports(DType::F64, t.device) ? DType::F32
                                       : is_float(t.type)                                                ? DType::F64
                                                                                                         : result;
  const DeviceInfo device = t.backend->devices().at(static_cast<size_t>(t.device));
  const Kernel family = sum ? Kernel::accel_sum_f32 : Kernel::accel_pick_f32;
  Kernel kernel = typed_kernel(family, t.type);
  std::shared_ptr<DeviceBuffer> src = t.buffer;
  for (uint64_t l = len;;) {
    const Pass pass = reduction_pass(device, out.count, l);
    const bool last = pass.groups == 1;
    std::shared_ptr<DeviceBuffer> dst =
        last && partial == result ? out.buffer
                                  : t.backend->allocate(t.device, checked_bytes(product(out.count, pass.groups, "partials"), partial));
    accel_params p = params_for(out.count * pass.groups, op == ReduceOp::Product ? ACCEL_REDUCE_PRODUCT_OP
                                                         : sum                   ? 0
                                                                                 : static_cast<int>(op));
    const uint64_t sizes[] = {outer, l, inner, pass.groups, pass.block};
    std::copy(std::begin(sizes), std::end(sizes), p.size);
    launch(t, kernel, p, {src.get(), dst.get()}, static_cast<size_t>((l + pass.groups - 1) / pass.groups));
    if (last) {
      if (dst != out.buffer) launch(t, cast_kernel(partial, result), params_for(out.count), {dst.get(), out.buffer.get()});
      return out;
    }
    src = std::move(dst);  // the previous partials go once their pass has run (backends keep them alive)
    kernel = typed_kernel(family, partial);
    l = pass.groups;
  }
}

Tensor tensor_argreduce(ReduceOp op, const Tensor& t, uint64_t outer, uint64_t len, uint64_t inner, ArgPolicy policy) {
  if (op == ReduceOp::Sum) throw std::logic_error("an argreduce picks; it does not sum");
  check_computes(t.type, op == ReduceOp::Min ? "argmin" : "argmax");
  check_reduction(t, outer, len, inner, op == ReduceOp::Min ? "argmin" : "argmax");
  Tensor out = allocate_like(*t.backend, t.device, DType::S64, outer * inner);
  if (out.count == 0) return out;
  const DeviceInfo device = t.backend->devices().at(static_cast<size_t>(t.device));
  // Passes as tensor_reduce's, carrying each partial's value and its index along the axis.
  std::shared_ptr<DeviceBuffer> values = t.buffer, indices;
  for (uint64_t l = len;;) {
    const Pass pass = reduction_pass(device, out.count, l);
    const uint64_t partials = product(out.count, pass.groups, "partials");
    const bool last = pass.groups == 1;
    std::shared_ptr<DeviceBuffer> value_out = t.backend->allocate(t.device, checked_bytes(partials, t.type));
    std::shared_ptr<DeviceBuffer> index_out = last ? out.buffer : t.backend->allocate(t.device, checked_bytes(partials, DType::S64));
    accel_params p = params_for(partials, static_cast<int>(op));
    const uint64_t sizes[] = {outer, l, inner, pass.groups, pass.block, indices ? 1u : 0u};
    std::copy(std::begin(sizes), std::end(sizes), p.size);
    p.count[0] = static_cast<uint64_t>(policy.nan);
    p.count[1] = policy.last ? 1 : 0;
    launch(t, typed_kernel(Kernel::accel_argpick_f32, t.type), p, {values.get(), value_out.get(), index_out.get(), indices.get()},
           static_cast<size_t>((l + pass.groups - 1) / pass.groups));
    if (last) return out;
    values = std::move(value_out);
    indices = std::move(index_out);
    l = pass.groups;
  }
}

Tensor tensor_matmul(const Tensor& a, const Tensor& b, uint64_t batch, uint64_t m, uint64_t k, uint64_t n,
                     bool trans_a, bool trans_b) {
  check_same_place(a, b);
  check_same_type(a, b);
  check_computes(a.type, "matmul");
  const uint64_t rows = product(batch, m, "the shape");
  if (product(rows, k, "the shape") != a.count || product(product(batch, k, "the shape"), n, "the shape") != b.count)
    throw ArgumentError("matmul of " + std::to_string(batch) + " x " + std::to_string(m) + " x " + std::to_string(k) +
                        " by " + std::to_string(k) + " x " + std::to_string(n) + " does not match tensors of " +
                        std::to_string(a.count) + " and " + std::to_string(b.count) + " elements");
  if ((trans_a || trans_b) && (!is_float(a.type) || !a.backend->transposed_operands()))
    throw ArgumentError("transposed matmul operands are read by the cpu backend's BLAS only (floats); transpose first");
  Tensor out = allocate_like(*a.backend, a.device, a.type, product(rows, n, "the result shape"));
  if (out.count == 0) return out;
  if (trans_a || trans_b) {
    a.backend->matmul_transposed(a.type, *a.buffer, *b.buffer, *out.buffer, batch, m, k, n, trans_a, trans_b);
  } else if (is_float(a.type)) {
    a.backend->matmul(a.type, *a.buffer, *b.buffer, *out.buffer, batch, m, k, n);
  } else if (batch != 1) {
    throw ArgumentError("a batched matmul takes floats (integer products are one at a time)");
  } else if (k == 0) {
    a.backend->zero(*out.buffer);
  } else {
    // integers: no BLAS takes them; one work item per result element, wrapping as Nx's dot does
    accel_params p = params_for(out.count);
    p.size[0] = m;
    p.size[1] = k;
    p.size[2] = n;
    launch(a, typed_kernel(Kernel::accel_matmul_f32, a.type), p, {a.buffer.get(), b.buffer.get(), out.buffer.get()},
           static_cast<size_t>(k));
  }
  return out;
}

Tensor tensor_conv_shifted(const Tensor& input, const Tensor& kernel, ShiftedConv c) {
  check_same_place(input, kernel);
  check_same_type(input, kernel);
  if (!(is_float(input.type) || is_complex(input.type)) || !input.backend->transposed_operands())
    throw ArgumentError("a shifted convolution takes floats or complex numbers on the cpu backend");
  const size_t rank = c.out_sizes.size();
  if (rank == 0 || c.plane_strides.size() != rank || c.offsets.empty())
    throw ArgumentError("a shifted convolution needs one plane stride per output axis and one offset per kernel position");
  if (c.plane_strides[rank - 1] != 1) throw ArgumentError("a shifted convolution's plane must be contiguous along its last axis");
  if (c.batch == 0 || c.channels == 0 || c.filters == 0)
    throw ArgumentError("a shifted convolution needs a batch, channels and filters");
  // the columns one product spans: the last output position's offset in the plane, + 1
  uint64_t last = 0, out_size = 1;
  for (size_t d = 0; d < rank; ++d) {
    if (c.out_sizes[d] == 0) throw ArgumentError("a shifted convolution's output sizes must be positive");
    const uint64_t step = product(c.out_sizes[d] - 1, c.plane_strides[d], "the plane");
    if (step >= c.plane - last) throw ArgumentError("a shifted convolution's output positions leave its plane");
    last += step;
    out_size = product(out_size, c.out_sizes[d], "the output");
  }
  c.span = last + 1;
  for (uint64_t offset : c.offsets)
    if (offset > c.plane - c.span)
      throw ArgumentError("a kernel position's offset " + std::to_string(offset) + " reads past a plane of " +
                          std::to_string(c.plane) + " elements");
  if (product(product(c.batch, c.channels, "the input"), c.plane, "the input") != input.count ||
      product(product(c.offsets.size(), c.filters, "the kernel"), c.channels, "the kernel") != kernel.count)
    throw ArgumentError("a shifted convolution's sizes do not match tensors of " + std::to_string(input.count) +
                        " and " + std::to_string(kernel.count) + " elements");
  const uint64_t int_max = static_cast<uint64_t>(INT_MAX);
  if (c.filters > int_max || c.channels > int_max || c.plane > int_max)
    throw ArgumentError("a shifted convolution's sizes must each be below 2^31 for BLAS");
  Tensor out = allocate_like(*input.backend, input.device, input.type,
                             product(product(c.batch, c.filters, "the result shape"), out_size, "the result shape"));
  input.backend->conv_shifted(input.type, *input.buffer, *kernel.buffer, *out.buffer, c);
  return out;
}

// The logistic map through the door: the input copied, then iterated in place. A device runs the
// iterations in launches of bounded time (iterations_per_launch), waiting and checking for
// cancellation between two; the CPU backend runs one launch and checks inside it.
Tensor tensor_logistic_map(const Tensor& t, const LogisticMapPlan& plan, const CallOptions& options) {
  if (t.type != DType::S64)
    throw ArgumentError(std::string("Accel.logistic_map/2 needs an :s64 tensor, got :") + dtype_name(t.type));
  Tensor out = allocate_like(*t.backend, t.device, t.type, t.count);
  if (t.count == 0) return out;
  t.backend->copy(*t.buffer, *out.buffer, t.buffer->bytes());
  accel_params p = logistic_map_params(plan, t.backend->supports(DType::F64, t.device), 0);
  p.n = t.count;
  const bool device = t.backend->waits_on_device();
  const int64_t batch =
      device ? iterations_per_launch(logistic_map_cost(t.count, plan), plan.iterations,
                                     launch_budget(t.backend->devices().at(static_cast<size_t>(t.device)).compute_units))
             : plan.iterations;
  run_launches(
      plan.iterations, batch, false, options.cancel,
      [&](int64_t now, bool) {
        p.count[1] = static_cast<uint64_t>(now);
        launch(t, Kernel::accel_logistic_map, p, {out.buffer.get()}, static_cast<size_t>(now) + 1, options.cancel);
      },
      [&] {  // reading an element waits for the device
        int64_t first = 0;
        t.backend->download(*out.buffer, &first, sizeof first);
      });
  return out;
}

Tensor tensor_transfer(const Tensor& t, Backend& backend, int device) {
  if (&backend == t.backend && device == t.device) return t;
  Tensor out = allocate_like(backend, device, t.type, t.count);
  if (t.count == 0) return out;
  // Through host memory: backends share no address space. One staging copy, freed on return.
  HostBuffer staging(t.buffer->bytes());
  t.backend->download(*t.buffer, staging.data(), t.buffer->bytes());
  backend.upload(*out.buffer, staging.data());
  return out;
}

}  // namespace accel
