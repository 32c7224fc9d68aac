// Operations that move elements without computing: transpose, slice, concatenate and strided views
// (the gather and scatter behind Nx's transpose, broadcast, reverse, slice, put_slice and pad). All
// but transpose are strided copies of a region (accel_copy_*), checked here against the shapes.
#include <algorithm>
#include <string>

#include "core/backend.hpp"
#include "core/error.hpp"
#include "core/tensor_checks.hpp"

namespace accel {
using namespace detail;
namespace {

// by_size (tensor_checks.hpp) picks within these families by element size
static_assert(static_cast<int>(Kernel::accel_copy_16) == static_cast<int>(Kernel::accel_copy_1) + 4);
static_assert(static_cast<int>(Kernel::accel_transpose_16) == static_cast<int>(Kernel::accel_transpose_1) + 4);

// Innermost dimensions at least this long are copied as runs (see copy_region).
constexpr uint64_t kCopyRun = 8;

// Copies the region `shape` from `in` (strides `from`, offset from_at) into `out` (strides `to`,
// offset to_at), of any rank: dimensions of 1 are dropped and neighbours both layouts step through
// as one are merged (a transpose of a contiguous tensor keeps a few); a region still of more than
// ACCEL_MAX_RANK dimensions is copied one launch per index of its leading ones.
void copy_region(const Tensor& in, const Tensor& out, std::vector<uint64_t> shape, std::vector<uint64_t> from,
                 uint64_t from_at, std::vector<uint64_t> to, uint64_t to_at) {
  if (shape_count(shape) == 0) return;
  merge_dimensions(shape, {&from, &to});
  // A long innermost dimension is a run each work item copies in a loop: its coordinates are found
  // once per run, not once per element (a strided view of many dimensions divides per dimension).
  // A short one goes with the dimension before it: rows of runs (im2col's patches, 3 x 3).
  uint64_t run = 0, run_from = 0, run_to = 0, rows = 0, rows_from = 0, rows_to = 0;
  const auto take_last = [&](uint64_t& n, uint64_t& step_from, uint64_t& step_to) {
    n = shape.back();
    step_from = from.back();
    step_to = to.back();
    shape.pop_back();
    from.pop_back();
    to.pop_back();
  };
  if (!shape.empty() && shape.back() >= kCopyRun) {
    take_last(run, run_from, run_to);
  } else if (shape.size() >= 2 && shape.back() > 1 && shape.back() * shape[shape.size() - 2] >= kCopyRun) {
    take_last(run, run_from, run_to);
    take_last(rows, rows_from, rows_to);
  }
  const size_t lead = shape.size() > ACCEL_MAX_RANK ? shape.size() - ACCEL_MAX_RANK : 0;
  accel_params p = params_for(shape_count(std::vector<uint64_t>(shape.begin() + static_cast<std::ptrdiff_t>(lead), shape.end())));
  p.rank = shape.size() - lead;
  p.count[0] = run;
  p.count[1] = run_from;
  p.count[2] = run_to;
  p.size[2] = rows;
  p.size[3] = rows_from;
  p.size[4] = rows_to;
  std::copy(shape.begin() + static_cast<std::ptrdiff_t>(lead), shape.end(), p.shape);
  std::copy(from.begin() + static_cast<std::ptrdiff_t>(lead), from.end(), p.stride[0]);
  std::copy(to.begin() + static_cast<std::ptrdiff_t>(lead), to.end(), p.stride[1]);
  // each index of the leading dimensions, in order (none: one launch)
  std::vector<uint64_t> index(lead, 0);
  for (;;) {
    p.size[0] = from_at;
    p.size[1] = to_at;
    for (size_t d = 0; d < lead; ++d) {
      p.size[0] += index[d] * from[d];  // wraps modulo 2^64 as the kernel's strides do
      p.size[1] += index[d] * to[d];
    }
    launch(in, by_size(Kernel::accel_copy_1, in.type), p, {in.buffer.get(), out.buffer.get()},
           run ? run * std::max<uint64_t>(rows, 1) : 1);
    size_t d = lead;
    while (d > 0 && ++index[d - 1] == shape[d - 1]) index[--d] = 0;
    if (d == 0) return;
  }
}

// The smallest and largest index a view of `shape` with `strides` from `offset` reads, or false
// when some index falls outside [0, count). Each term is bounded by count before it is added, so
// nothing overflows: the sums stay below rank * 2^63, far inside 128 bits.
bool view_fits(const std::vector<uint64_t>& shape, const std::vector<int64_t>& strides, uint64_t offset, uint64_t count) {
  if (offset >= count) return false;
  __int128 low = offset, high = offset;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] <= 1 || strides[d] == 0) continue;
    const __int128 span = static_cast<__int128>(shape[d] - 1) * strides[d];
    if (span >= static_cast<__int128>(count) || -span >= static_cast<__int128>(count)) return false;
    (span < 0 ? low : high) += span;
  }
  return low >= 0 && high < static_cast<__int128>(count);
}

// A view (shape, strides, offset) of `count` elements: ArgumentError unless every index is inside.
void check_view(uint64_t count, const std::vector<uint64_t>& shape, const std::vector<int64_t>& strides, uint64_t offset,
                const char* what) {
  if (strides.size() != shape.size())
    throw ArgumentError(std::string(what) + " needs one stride per dimension of " + shape_text(shape));
  if (shape_count(shape) != 0 && !view_fits(shape, strides, offset, count))
    throw ArgumentError(std::string(what) + " of shape " + shape_text(shape) + " from offset " + std::to_string(offset) +
                        " reaches outside the tensor's " + std::to_string(count) + " elements");
}

// Signed strides as the kernel's unsigned ones: index arithmetic wraps modulo 2^64, so a negative
// stride (2^64 - s) steps back by s.
std::vector<uint64_t> wrapped(const std::vector<int64_t>& strides) {
  std::vector<uint64_t> out(strides.size());
  std::transform(strides.begin(), strides.end(), out.begin(), [](int64_t s) { return static_cast<uint64_t>(s); });
  return out;
}

}  // namespace

Tensor tensor_view(const Tensor& t, const std::vector<uint64_t>& shape, const std::vector<int64_t>& strides, uint64_t offset) {
  check_view(t.count, shape, strides, offset, "a view");
  Tensor out = allocate_like(*t.backend, t.device, t.type, shape_count(shape));
  copy_region(t, out, shape, wrapped(strides), offset, contiguous_strides(shape), 0);
  return out;
}

Tensor tensor_put_view(const Tensor& base, const std::vector<uint64_t>& shape, const std::vector<int64_t>& base_strides,
                       const Tensor& part, const std::vector<uint64_t>& part_shape, const std::vector<int64_t>& part_strides,
                       uint64_t offset) {
  check_same_place(base, part);
  check_same_type(base, part);
  if (shape_count(part_shape) != part.count)
    throw ArgumentError("a shape of " + shape_text(part_shape) + " does not match the part's " + std::to_string(part.count) +
                        " elements");
  check_view(base.count, shape, base_strides, 0, "a put's base");
  check_view(shape_count(shape), part_shape, part_strides, offset, "a put");
  Tensor out = allocate_like(*base.backend, base.device, base.type, shape_count(shape));
  copy_region(base, out, shape, wrapped(base_strides), 0, contiguous_strides(shape), 0);
  copy_region(part, out, part_shape, contiguous_strides(part_shape), 0, wrapped(part_strides), offset);
  return out;
}

Tensor tensor_transpose(const Tensor& t, uint64_t rows, uint64_t cols) {
  if (product(rows, cols, "the shape") != t.count)
    throw ArgumentError("a " + std::to_string(rows) + " x " + std::to_string(cols) + " transpose does not match the tensor's " +
                        std::to_string(t.count) + " elements");
  Tensor out = allocate_like(*t.backend, t.device, t.type, t.count);
  if (t.count == 0) return out;
  const uint64_t th = std::min<uint64_t>(rows, 32), tw = std::min<uint64_t>(cols, 32);
  accel_params p = params_for(((rows + th - 1) / th) * ((cols + tw - 1) / tw) * th * tw);
  const uint64_t sizes[] = {rows, cols, th, tw};
  std::copy(std::begin(sizes), std::end(sizes), p.size);
  launch(t, by_size(Kernel::accel_transpose_1, t.type), p, {t.buffer.get(), out.buffer.get()});
  return out;
}

Tensor tensor_slice(const Tensor& t, const std::vector<uint64_t>& shape, const std::vector<uint64_t>& start,
                    const std::vector<uint64_t>& length, const std::vector<uint64_t>& step) {
  if (shape_count(shape) != t.count)
    throw ArgumentError("a shape of " + shape_text(shape) + " does not match the tensor's " + std::to_string(t.count) + " elements");
  if (start.size() != shape.size() || length.size() != shape.size() || step.size() != shape.size())
    throw ArgumentError("slice/4 needs one start, length and stride per dimension of " + shape_text(shape));
  for (size_t d = 0; d < shape.size(); ++d) {
    if (step[d] == 0) throw ArgumentError("slice/4: strides must be positive, got 0 for axis " + std::to_string(d));
    const bool fits = length[d] == 0 ? start[d] <= shape[d]
                                     : start[d] < shape[d] && (length[d] - 1) <= (shape[d] - 1 - start[d]) / step[d];
    if (!fits)
      throw ArgumentError("slice/4: axis " + std::to_string(d) + " of size " + std::to_string(shape[d]) + " has no " +
                          std::to_string(length[d]) + " elements from " + std::to_string(start[d]) + " in steps of " +
                          std::to_string(step[d]));
  }
  Tensor out = allocate_like(*t.backend, t.device, t.type, shape_count(length));
  const std::vector<uint64_t> strides = contiguous_strides(shape);
  std::vector<uint64_t> from(shape.size());
  uint64_t at = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    from[d] = strides[d] * step[d];
    at += start[d] * strides[d];
  }
  copy_region(t, out, length, from, at, contiguous_strides(length), 0);
  return out;
}

Tensor tensor_concatenate(const std::vector<Operand>& parts, size_t axis) {
  if (parts.empty() || parts[0].tensor == nullptr) throw ArgumentError("concatenate/2 needs a non-empty list of tensors");
  const Tensor& first = *parts[0].tensor;
  std::vector<uint64_t> shape = parts[0].shape;
  if (axis >= shape.size())
    throw ArgumentError("concatenate/2: axis " + std::to_string(axis) + " out of range for " + shape_text(shape));
  uint64_t along = 0;
  for (const Operand& part : parts) {
    if (part.tensor == nullptr) throw ArgumentError("concatenate/2 needs tensors, not numbers");
    if (shape_count(part.shape) != part.tensor->count)
      throw ArgumentError("a shape of " + shape_text(part.shape) + " does not match the tensor's " +
                          std::to_string(part.tensor->count) + " elements");
    check_same_place(first, *part.tensor);
    check_same_type(first, *part.tensor);
    bool same = part.shape.size() == shape.size();
    for (size_t d = 0; same && d < shape.size(); ++d) same = d == axis || part.shape[d] == shape[d];
    if (!same)
      throw ArgumentError("concatenate/2: shapes " + shape_text(shape) + " and " + shape_text(part.shape) +
                          " differ outside axis " + std::to_string(axis));
    along += part.shape[axis];
  }
  shape[axis] = along;
  Tensor out = allocate_like(*first.backend, first.device, first.type, shape_count(shape));
  const std::vector<uint64_t> to = contiguous_strides(shape);
  uint64_t offset = 0;
  for (const Operand& part : parts) {
    copy_region(*part.tensor, out, part.shape, contiguous_strides(part.shape), 0, to, offset * to[axis]);
    offset += part.shape[axis];
  }
  return out;
}

}  // namespace accel
