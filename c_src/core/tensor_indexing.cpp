// Operations that address elements through other elements or through windows: gather (Nx's take,
// take_along_axis and gather), scatter (indexed_put, indexed_add) and window reductions (Nx's
// window_* and product). Each plan is checked here against the buffers it touches: an index read
// from a tensor is checked by the kernel (the flag), every other address before the launch.
#include <algorithm>
#include <string>

#include "core/backend.hpp"
#include "core/error.hpp"
#include "core/tensor_checks.hpp"

namespace accel {
using namespace detail;
namespace {

constexpr size_t kMaxIndexedAxes = 6;  // accel_params.size holds each indexed axis's size
constexpr uint64_t kRun = 8;           // a last dimension this long is a loop in each work item

// The largest element index sum((shape[d] - 1) * strides[d]) reaches, or ArgumentError naming
// `what` when it reaches `limit` or beyond. shape has no zero (the caller returns first).
uint64_t reach(const std::vector<uint64_t>& shape, const std::vector<uint64_t>& strides, unsigned __int128 start,
               uint64_t limit, const char* what) {
  unsigned __int128 high = start;
  for (size_t d = 0; d < shape.size(); ++d) high += static_cast<unsigned __int128>(shape[d] - 1) * strides[d];
  if (high >= limit)
    throw ArgumentError(std::string(what) + " reaches element " + std::to_string(static_cast<uint64_t>(high)) +
                        " of a tensor of " + std::to_string(limit));
  return static_cast<uint64_t>(high);
}

void check_lengths(size_t expected, std::initializer_list<size_t> lengths, const char* what) {
  for (size_t length : lengths)
    if (length != expected) throw ArgumentError(std::string(what) + " needs one entry per dimension");
}

void check_index_axes(const IndexAxes& axes, const Tensor& indices) {
  if (indices.type != DType::S64) throw ArgumentError("indices must be :s64 (convert them first)");
  if (axes.sizes.empty() || axes.sizes.size() > kMaxIndexedAxes)
    throw ArgumentError("between 1 and " + std::to_string(kMaxIndexedAxes) + " indexed axes, got " +
                        std::to_string(axes.sizes.size()));
  check_lengths(axes.sizes.size(), {axes.strides.size()}, "indexed axes");
  for (uint64_t size : axes.sizes)
    if (size == 0) throw ArgumentError("an indexed axis is empty: no index is inside it");
}

// The indexed axes' part of the plan in the kernel's record.
void put_axes(accel_params& p, const IndexAxes& axes) {
  p.layout[0] = axes.sizes.size();
  for (size_t k = 0; k < axes.sizes.size(); ++k) {
    p.size[k] = axes.sizes[k];
    p.stride[2][k] = axes.strides[k];
  }
}

static_assert(static_cast<int>(Kernel::accel_gather_16) == static_cast<int>(Kernel::accel_gather_1) + 4);

}  // namespace

Tensor tensor_gather(const Tensor& t, const Tensor& indices, const GatherPlan& plan) {
  check_same_place(t, indices);
  check_index_axes(plan.axes, indices);
  const size_t rank = plan.shape.size();
  if (rank > ACCEL_MAX_RANK)
    throw ArgumentError("gather's result has at most " + std::to_string(ACCEL_MAX_RANK) + " dimensions here, got " +
                        std::to_string(rank));
  check_lengths(rank, {plan.in_strides.size(), plan.batch_strides.size()}, "gather");
  Tensor out = allocate_like(*t.backend, t.device, t.type, shape_count(plan.shape));
  if (out.count == 0) return out;
  // Every element read: the slice's furthest element plus the furthest index of each axis.
  std::vector<uint64_t> axis_shape = plan.axes.sizes;
  const uint64_t slice_reach = reach(plan.shape, plan.in_strides, 0, UINT64_MAX, "gather's slice");
  reach(axis_shape, plan.axes.strides, slice_reach, t.count, "gather");
  const uint64_t tuples = reach(plan.shape, plan.batch_strides, 0, UINT64_MAX, "gather's index tuples") + 1;
  if (product(tuples, plan.axes.sizes.size(), "the indices read") > indices.count)
    throw ArgumentError("gather reads " + std::to_string(tuples) + " index tuples of " + std::to_string(plan.axes.sizes.size()) +
                        " from " + std::to_string(indices.count) + " indices");
  // A last dimension that shares its index tuple (a row of a take) is a run per work item.
  const bool runs = !plan.shape.empty() && plan.shape.back() >= kRun && plan.batch_strides.back() == 0;
  accel_params p = params_for(runs ? out.count / plan.shape.back() : out.count);
  p.rank = runs ? rank - 1 : rank;
  std::copy(plan.shape.begin(), plan.shape.begin() + static_cast<std::ptrdiff_t>(p.rank), p.shape);
  std::copy(plan.in_strides.begin(), plan.in_strides.begin() + static_cast<std::ptrdiff_t>(p.rank), p.stride[0]);
  std::copy(plan.batch_strides.begin(), plan.batch_strides.begin() + static_cast<std::ptrdiff_t>(p.rank), p.stride[1]);
  if (runs) {
    p.count[0] = plan.shape.back();
    p.count[1] = plan.in_strides.back();
  }
  put_axes(p, plan.axes);
  // the kernel raises its flag for an index outside its axis
  if (launch_flagged(t, by_size(Kernel::accel_gather_1, t.type), p,
                     {t.buffer.get(), indices.buffer.get(), out.buffer.get(), nullptr},
                     plan.axes.sizes.size() + (runs ? plan.shape.back() : 1)) != 0)
    throw IndexOutOfBounds();
  return out;
}

Tensor tensor_scatter(ScatterOp op, const Tensor& target, const Tensor& indices, const Tensor& updates,
                      const ScatterPlan& plan) {
  check_computes(target.type, op == ScatterOp::Add ? "indexed_add" : "indexed_put");
  check_same_place(target, indices);
  check_same_place(target, updates);
  check_same_type(target, updates);
  check_index_axes(plan.axes, indices);
  if (op == ScatterOp::Add && target.type == DType::F32 && target.backend->supports(DType::F64, target.device)) {
    // f32 sums as Nx.BinaryBackend makes them: in f64, each element rounded to f32 once at the end
    // (in f32, every update would round: a gradient summing many rows into one drifts)
    return tensor_cast(tensor_scatter(op, tensor_cast(target, DType::F64), indices, tensor_cast(updates, DType::F64), plan),
                       DType::F32);
  }
  const size_t rank = plan.slice_shape.size();
  if (rank > ACCEL_MAX_RANK)
    throw ArgumentError("a scattered slice has at most " + std::to_string(ACCEL_MAX_RANK) + " dimensions here, got " +
                        std::to_string(rank));
  check_lengths(rank, {plan.out_strides.size(), plan.update_strides.size()}, "scatter");
  Tensor out = allocate_like(*target.backend, target.device, target.type, target.count);
  if (out.count != 0) target.backend->copy(*target.buffer, *out.buffer, checked_bytes(out.count, out.type));
  const uint64_t slice = shape_count(plan.slice_shape);
  if (out.count == 0 || slice == 0 || plan.updates == 0) return out;
  const uint64_t slice_reach = reach(plan.slice_shape, plan.out_strides, 0, UINT64_MAX, "the scattered slice");
  reach(plan.axes.sizes, plan.axes.strides, slice_reach, out.count, "scatter");
  reach({plan.updates}, {plan.update_step}, reach(plan.slice_shape, plan.update_strides, 0, UINT64_MAX, "an update"),
        updates.count, "the updates");
  if (product(plan.updates, plan.axes.sizes.size(), "the indices read") > indices.count)
    throw ArgumentError("scatter reads " + std::to_string(plan.updates) + " index tuples from " +
                        std::to_string(indices.count) + " indices");
  accel_params p = params_for(slice, op == ScatterOp::Add ? ACCEL_SCATTER_ADD : ACCEL_SCATTER_PUT);
  p.rank = rank;
  std::copy(plan.slice_shape.begin(), plan.slice_shape.end(), p.shape);
  std::copy(plan.out_strides.begin(), plan.out_strides.end(), p.stride[0]);
  std::copy(plan.update_strides.begin(), plan.update_strides.end(), p.stride[1]);
  p.count[0] = plan.updates;
  p.count[1] = plan.update_step;
  put_axes(p, plan.axes);
  if (launch_flagged(target, typed_kernel(Kernel::accel_scatter_f32, target.type), p,
                     {out.buffer.get(), indices.buffer.get(), updates.buffer.get(), nullptr},
                     static_cast<size_t>(std::min<uint64_t>(plan.updates, SIZE_MAX))) != 0)
    throw IndexOutOfBounds();
  return out;
}

namespace {

// A window's geometry as the kernels read it (rank, then seven numbers per dimension), checked:
// every size positive, every position a window reaches far inside the kernels' signed arithmetic,
// and the input inside t. `window` is the number of elements of one window.
std::vector<int64_t> window_geometry(const Tensor& t, const std::vector<WindowDim>& dims, uint64_t* window) {
  if (dims.size() > ACCEL_MAX_RANK)
    throw ArgumentError("a window has at most " + std::to_string(ACCEL_MAX_RANK) + " dimensions here, got " +
                        std::to_string(dims.size()));
  std::vector<uint64_t> in_shape, in_strides;
  std::vector<int64_t> geometry{static_cast<int64_t>(dims.size())};
  *window = 1;
  for (const WindowDim& d : dims) {
    if (d.window == 0 || d.stride == 0 || d.dilation == 0)
      throw ArgumentError("window sizes, strides and dilations must be positive");
    for (uint64_t v : {d.out, d.in, d.in_stride, d.window, d.stride, d.pad_low, d.dilation})
      if (v > static_cast<uint64_t>(INT64_MAX / 4)) throw ArgumentError("a window dimension is too large");
    if (d.out != 0 && static_cast<unsigned __int128>(d.out - 1) * d.stride +
                              static_cast<unsigned __int128>(d.window - 1) * d.dilation >
                          static_cast<unsigned __int128>(INT64_MAX / 2))
      throw ArgumentError("a window reaches too far");
    *window = product(*window, d.window, "the window's size");
    in_shape.push_back(d.in);
    in_strides.push_back(d.in_stride);
    for (uint64_t v : {d.out, d.in, d.in_stride, d.window, d.stride, d.pad_low, d.dilation})
      geometry.push_back(static_cast<int64_t>(v));
  }
  if (shape_count(in_shape) > t.count) throw ArgumentError("the window's input has more elements than the tensor");
  if (shape_count(in_shape) != 0) reach(in_shape, in_strides, 0, t.count, "the window's input");
  return geometry;
}

uint64_t out_count(const std::vector<WindowDim>& dims) {
  uint64_t count = 1;
  for (const WindowDim& d : dims) count = product(count, d.out, "the window's result");
  return count;
}

}  // namespace

Tensor tensor_window(WindowOp op, const Tensor& t, uint64_t identity_bits, const std::vector<WindowDim>& given) {
  check_computes(t.type, "a window reduction");
  // a scalar is a window of one element on one dimension (the kernel walks the last dimension)
  const std::vector<WindowDim> dims = given.empty() ? std::vector<WindowDim>{WindowDim{}} : given;
  uint64_t window = 1;
  const std::vector<int64_t> geometry = window_geometry(t, dims, &window);
  Tensor out = allocate_like(*t.backend, t.device, t.type, out_count(dims));
  if (out.count == 0) return out;
  const Tensor g = tensor_from_bytes(*t.backend, t.device, DType::S64, geometry.data(), geometry.size() * sizeof(int64_t));
  // each work item: the whole last dimension of the output
  const uint64_t run = dims.back().out;
  accel_params p = params_for(out.count / run, static_cast<int>(op));
  p.count[0] = run;
  p.bits[0] = identity_bits;
  // an empty input: every window lies in the padding, and no element is read
  launch(t, typed_kernel(Kernel::accel_window_f32, t.type), p,
         {t.count != 0 ? t.buffer.get() : g.buffer.get(), out.buffer.get(), g.buffer.get(), nullptr},
         static_cast<size_t>(std::min<uint64_t>(product(window, run, "the work per item"), SIZE_MAX)));
  return out;
}

Tensor tensor_window_scatter(WindowOp op, const Tensor& t, const Tensor& source, uint64_t init_bits,
                             const std::vector<WindowDim>& dims) {
  check_computes(t.type, "a window scatter");
  check_same_place(t, source);
  check_same_type(t, source);
  if (op != WindowOp::Max && op != WindowOp::Min) throw ArgumentError("a window scatter selects the max or the min");
  if (dims.empty()) throw ArgumentError("a window scatter needs at least one dimension");
  uint64_t window = 1, in = 1;
  for (const WindowDim& d : dims) {
    if (d.dilation != 1) throw ArgumentError("a window scatter's windows are not dilated");
    in = product(in, d.in, "the window's input");
  }
  const std::vector<int64_t> geometry = window_geometry(t, dims, &window);
  if (out_count(dims) != source.count)
    throw ArgumentError("the source has " + std::to_string(source.count) + " elements, one per window: " +
                        std::to_string(out_count(dims)) + " windows");
  Tensor out = allocate_like(*t.backend, t.device, t.type, in);
  if (out.count == 0) return out;
  const Tensor g = tensor_from_bytes(*t.backend, t.device, DType::S64, geometry.data(), geometry.size() * sizeof(int64_t));
  const uint64_t windows = out_count(dims);
  const uint64_t run = dims.back().out;
  // One pass over the windows (the select operation's): each window's selection written as its
  // position to `positions`, or with `into` set, as init + its source element at that position
  // of `into`.
  const auto select = [&](const DeviceBuffer* into, const DeviceBuffer* positions) {
    accel_params p = params_for(windows / run, op == WindowOp::Max ? ACCEL_WINDOW_SELECT_MAX : ACCEL_WINDOW_SELECT_MIN);
    p.count[0] = run;
    p.bits[0] = init_bits;
    p.size[0] = into != nullptr ? 1 : 0;
    launch(t, typed_kernel(Kernel::accel_window_f32, t.type), p,
           {t.buffer.get(), into, g.buffer.get(), into != nullptr ? source.buffer.get() : positions},
           static_cast<size_t>(std::min<uint64_t>(product(window, run, "the work per item"), SIZE_MAX)));
  };
  // Windows that do not overlap (pooling's): each element is selected by one window at most, so
  // that one pass writes init + source where each chose, into init everywhere (zeros).
  const bool apart = std::all_of(dims.begin(), dims.end(), [](const WindowDim& d) { return d.stride >= d.window; });
  if (apart && init_bits == 0 && windows != 0) {
    t.backend->zero(*out.buffer);
    select(out.buffer.get(), nullptr);
    return out;
  }
  // Else first each window's position, then each element's sum of the sources that selected it
  // (no window: every element is init).
  const std::shared_ptr<DeviceBuffer> selected =
      t.backend->allocate(t.device, checked_bytes(std::max<uint64_t>(windows, 1), DType::S64));
  if (windows != 0) select(nullptr, selected.get());
  // each work item: a run of the input's last dimension
  const uint64_t len = dims.back().in;
  accel_params p = params_for(out.count / len);
  p.count[0] = len;
  p.bits[0] = init_bits;
  launch(t, typed_kernel(Kernel::accel_window_scatter_f32, t.type), p,
         {selected.get(), source.count != 0 ? source.buffer.get() : g.buffer.get(), g.buffer.get(), out.buffer.get()},
         static_cast<size_t>(len));
  return out;
}

Tensor tensor_scan(WindowOp op, const Tensor& t, uint64_t outer, uint64_t len, uint64_t inner, bool reverse) {
  check_computes(t.type, "a cumulative operation");
  if (op != WindowOp::Sum && op != WindowOp::Product && op != WindowOp::Max && op != WindowOp::Min)
    throw ArgumentError("a cumulative operation sums, multiplies or picks the max or the min");
  if (product(product(outer, len, "the shape"), inner, "the shape") != t.count)
    throw ArgumentError(std::to_string(outer) + " x " + std::to_string(len) + " x " + std::to_string(inner) +
                        " is not a tensor of " + std::to_string(t.count));
  Tensor out = allocate_like(*t.backend, t.device, t.type, t.count);
  if (out.count == 0) return out;
  accel_params p = params_for(outer * inner, static_cast<int>(op));
  p.size[0] = len;
  p.size[1] = inner;
  p.size[2] = reverse ? 1 : 0;
  launch(t, typed_kernel(Kernel::accel_scan_f32, t.type), p, {t.buffer.get(), out.buffer.get()}, static_cast<size_t>(len));
  return out;
}

SortResult tensor_sort(const Tensor& t, uint64_t rows, uint64_t len, bool descending, bool indices, SortMerge merge) {
  check_computes(t.type, "sort");
  if (product(rows, len, "the rows") != t.count)
    throw ArgumentError(std::to_string(rows) + " rows of " + std::to_string(len) + " do not make a tensor of " +
                        std::to_string(t.count));
  SortResult result;
  result.values = allocate_like(*t.backend, t.device, t.type, t.count);
  if (indices) result.indices = allocate_like(*t.backend, t.device, DType::S64, t.count);
  if (t.count == 0) return result;
  // blocks sorted by insertion first, then merged in passes between two pairs of buffers (the
  // result's and a scratch pair), each pass from the other's last
  constexpr uint64_t kBlock = 32;
  const bool gpu = merge == SortMerge::Auto ? t.backend->devices().at(static_cast<size_t>(t.device)).type != "cpu"
                                            : merge == SortMerge::Search;
  uint64_t passes = 0;
  for (uint64_t width = kBlock; width < len; width *= 2) ++passes;
  std::shared_ptr<DeviceBuffer> values[2] = {result.values.buffer, nullptr}, index[2] = {result.indices.buffer, nullptr};
  if (passes != 0) {
    values[1] = t.backend->allocate(t.device, checked_bytes(t.count, t.type));
    if (indices) index[1] = t.backend->allocate(t.device, checked_bytes(t.count, DType::S64));
  }
  // the block pass writes where an even number of passes after it ends in the result's buffers
  int at = static_cast<int>(passes % 2);
  const int desc = descending ? 1 : 0;
  accel_params p = params_for(rows * ((len + kBlock - 1) / kBlock), desc);
  p.size[0] = len;
  p.size[1] = kBlock;
  p.count[1] = indices ? 1 : 0;
  p.count[2] = 1;
  const Kernel kernel = typed_kernel(Kernel::accel_sort_f32, t.type);
  launch(t, kernel, p, {t.buffer.get(), nullptr, values[at].get(), index[at].get()}, kBlock * kBlock / 4);
  p.count[2] = 0;
  for (uint64_t width = kBlock; width < len; width *= 2) {
    const uint64_t pairs = (len + 2 * width - 1) / (2 * width);
    p.op = (gpu ? 4 : 2) + desc;
    p.n = gpu ? t.count : rows * pairs;
    p.size[1] = width;
    launch(t, kernel, p, {values[at].get(), index[at].get(), values[1 - at].get(), index[1 - at].get()},
           gpu ? 64 : 2 * width);
    at = 1 - at;
  }
  return result;
}

}  // namespace accel
