// Tensors in the core: element types, the operations, a device buffer owned by a backend, and the
// checked operations the NIF calls (tensor.cpp). Shapes are the Elixir side's business; here a
// tensor is a backend, a device, an element type and a count, and every operation checks that the
// counts it is given agree with the buffers it touches, so no call can read or write out of bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/logistic_map.hpp"
#include <vector>

#include "kernels/tensor.h"

namespace accel {

class Backend;
struct CallOptions;

// Element types, from the registry (kernels/types.h): compute types have kernels of their own;
// storage types are stored as themselves and converted to compute (the Nx backend's business).
enum class DType : int {
  F32 = ACCEL_F32_TYPE,
  F64 = ACCEL_F64_TYPE,
  S64 = ACCEL_S64_TYPE,
  S32 = ACCEL_S32_TYPE,
  U8 = ACCEL_U8_TYPE,
  U64 = ACCEL_U64_TYPE,
  U32 = ACCEL_U32_TYPE,
  S8 = ACCEL_S8_TYPE,
  S16 = ACCEL_S16_TYPE,
  U16 = ACCEL_U16_TYPE,
  F16 = ACCEL_F16_TYPE,
  BF16 = ACCEL_BF16_TYPE,
  C64 = ACCEL_C64_TYPE,
  C128 = ACCEL_C128_TYPE,
  S2 = ACCEL_S2_TYPE,
  S4 = ACCEL_S4_TYPE,
  U2 = ACCEL_U2_TYPE,
  U4 = ACCEL_U4_TYPE,
  F8 = ACCEL_F8_TYPE,
  F8E4M3FN = ACCEL_F8E4M3FN_TYPE,
};
constexpr int kTypeCount = ACCEL_TYPE_COUNT;
size_t dtype_size(DType type);
const char* dtype_name(DType type);  // "f32", ...
// The type of that name ("f32", ...), or false.
bool dtype_named(const std::string& name, DType* type);
// Whether the type has kernels of its own (f32, f64, s64, s32, u8, u64, u32).
inline bool computes(DType type) { return static_cast<int>(type) < ACCEL_COMPUTE_TYPES; }
inline bool is_float(DType type) { return type == DType::F32 || type == DType::F64; }
inline bool is_unsigned(DType type) { return type == DType::U8 || type == DType::U32 || type == DType::U64; }
inline bool is_complex(DType type) { return type == DType::C64 || type == DType::C128; }
// What sum/1 returns: s64 for signed integer types and u64 for unsigned ones (exact modulo 2^64, as
// Nx sums them), the same type for floats.
inline DType sum_type(DType type) { return is_float(type) ? type : is_unsigned(type) ? DType::U64 : DType::S64; }

// The registered operations (kernels/ops.h), one enumerator per registry line, and what the
// registry says of each: its name (the Elixir function's), and whether integers may take it.
#define ACCEL_ENUMERATOR(name, types, doc) name,
enum class UnaryOp : int { ACCEL_UNARY_OPS(ACCEL_ENUMERATOR) };
enum class BinaryOp : int { ACCEL_BINARY_OPS(ACCEL_ENUMERATOR) };
enum class CompareOp : int { ACCEL_COMPARE_OPS(ACCEL_ENUMERATOR) };
#undef ACCEL_ENUMERATOR
enum class OpFamily { Unary, Binary, Compare };
struct OpInfo {
  const char* name;
  bool ints;    // integer tensors may take it
  bool floats;  // float tensors may take it
};
const OpInfo& op_info(OpFamily family, int code);
int op_count(OpFamily family);

// Product is a sum kernel's second operation (its code there is 1); Min and Max are pick codes.
enum class ReduceOp : int { Sum = ACCEL_REDUCE_SUM, Min = ACCEL_REDUCE_MIN, Max = ACCEL_REDUCE_MAX, Product = 3 };

// Memory on one device of one backend. Subclasses own host memory (CPU), a cl_mem or a CUDA
// pointer, and release it in their destructor, which never throws and never waits for the device.
class DeviceBuffer {
 public:
  DeviceBuffer(size_t bytes, int device) : bytes_(bytes), device_(device) {}
  virtual ~DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  size_t bytes() const { return bytes_; }
  int device() const { return device_; }
  // True over memory the buffer did not allocate (Backend::wrap_host).
  virtual bool borrowed() const { return false; }

 private:
  size_t bytes_;
  int device_;
};

struct Tensor {
  Backend* backend = nullptr;
  int device = 0;
  DType type = DType::F32;
  size_t count = 0;
  std::shared_ptr<DeviceBuffer> buffer;  // shared: an operation in flight keeps it alive past free/1
};

// A number given where a tensor could be (add(t, 2)), before conversion to the tensor's type.
struct Scalar {
  bool is_float = false;
  int64_t i = 0;
  double f = 0;
};

// The operations, each checked (ArgumentError naming what disagrees) before a backend runs it.
// `owner`, when given, keeps `bytes` alive and unchanged for as long as it lives: a backend that
// computes on host memory then makes the tensor without a copy (Backend::wrap_host).
Tensor tensor_from_bytes(Backend& backend, int device, DType type, const void* bytes, size_t size,
                         std::shared_ptr<const void> owner = nullptr);
Tensor tensor_iota(Backend& backend, int device, DType type, uint64_t count);
// The first `count` elements (at most t.count) into `out`.
void tensor_to_bytes(const Tensor& t, void* out, uint64_t count);
Tensor tensor_transfer(const Tensor& t, Backend& backend, int device);
// Elements converted to another type: integers wrap, floats truncate and saturate into integers,
// f16 rounds to nearest even, bf16 as Nx writes it (kernels/tensor.h). Complex types convert to
// none but themselves.
Tensor tensor_cast(const Tensor& t, DType to);
// The same memory read as another type of a size that divides its bytes (Nx's bitcast; no copy).
Tensor tensor_reinterpret(const Tensor& t, DType to);

// An elementwise operand: a tensor with its shape (the Elixir side's; its product must be the
// tensor's count), or a number (tensor null). Shapes broadcast as in Nx and NumPy: aligned at the
// end, each dimension equal or 1; the output has the larger of each.
struct Operand {
  const Tensor* tensor = nullptr;
  std::vector<uint64_t> shape;
  Scalar scalar;
};
// Two operands of one type (at least one a tensor); the result has their type (binary) or :u8
// (compare). Throws ArgumentError for an integer zero divisor or negative exponent.
Tensor tensor_binary(BinaryOp op, const Operand& a, const Operand& b);
Tensor tensor_compare(CompareOp op, const Operand& a, const Operand& b);
// pred (:u8, a tensor) chooses a (non-zero) or b (zero), elementwise; a and b share a type.
Tensor tensor_select(const Operand& pred, const Operand& a, const Operand& b);
Tensor tensor_unary(UnaryOp op, const Tensor& t);
// Complex arithmetic with Nx's broadcasting: products, quotients, sums and differences of two
// tensors, one of them c64 or c128 and the other of that type or of its parts' type (f32 or f64: a
// real x read as x + 0i, without making it complex first), and `convert`, a real tensor of the
// parts' type as that complex type (x + 0i; b is not read); and magnitudes (a c64 or c128 tensor to
// f32 or f64): the Complex library's formulas as Nx.BinaryBackend computes them (in double where the
// device has one, rounded once). The op codes are accel_complex's.
enum class ComplexOp : int { multiply, divide, add, subtract, convert };
Tensor tensor_complex(ComplexOp op, const Operand& a, const Operand& b);
Tensor tensor_complex_of_real(const Tensor& real);
Tensor tensor_complex_abs(const Tensor& t);
// A complex function of one complex tensor (exp, log, sqrt, the trigonometric and hyperbolic
// functions and their inverses, rsqrt, expm1, log1p, sigmoid, cbrt), one pass with the Complex
// library's formulas and cases; `variant` names the library's (bits: ACCEL_CZ_EXP_SIGNS,
// ACCEL_CZ_HALVES, kernels/tensor_kernels.h).
Tensor tensor_complex_fn(UnaryOp op, const Tensor& t, int variant);
bool complex_fn(UnaryOp op);
// Reduces axis `len` of a tensor laid out as [outer][len][inner]: outer * inner results. Sums and
// products of integers are s64 or u64 (sum_type), as Nx's; products of an empty axis are refused
// (the caller knows they are 1).
Tensor tensor_reduce(ReduceOp op, const Tensor& t, uint64_t outer, uint64_t len, uint64_t inner);
// How argmin/argmax rank NaN (ACCEL_NAN_* in kernels/tensor.h) and which of equal values they pick.
enum class NanRank : int { First = ACCEL_NAN_FIRST, Last = ACCEL_NAN_LAST, Ignored = ACCEL_NAN_IGNORED };
struct ArgPolicy {
  NanRank nan = NanRank::First;  // the first NaN wins over any number
  bool last = false;             // of equal values, the last (Nx's tie_break: :high)
};
// The index along that axis of the smallest (Min) or largest (Max) element, as :s64, by `policy`.
Tensor tensor_argreduce(ReduceOp op, const Tensor& t, uint64_t outer, uint64_t len, uint64_t inner,
                        ArgPolicy policy = {});
// Elements start[d] + k * step[d], k < length[d], of t (of `shape`), as a tensor of shape `length`.
Tensor tensor_slice(const Tensor& t, const std::vector<uint64_t>& shape, const std::vector<uint64_t>& start,
                    const std::vector<uint64_t>& length, const std::vector<uint64_t>& step);
// Element offset + sum(c[d] * strides[d]) of t at each coordinate c of `shape`, as a tensor of
// `shape`: transposes, broadcasts (stride 0), reversals (negative strides) and slices in one.
// ArgumentError when any element read lies outside t.
Tensor tensor_view(const Tensor& t, const std::vector<uint64_t>& shape, const std::vector<int64_t>& strides, uint64_t offset);
// The view (shape, base_strides, offset 0) of base, whose elements at the positions
// offset + sum(c[d] * part_strides[d]) for each coordinate c of part's shape are part's instead:
// put_slice (base_strides contiguous) and pad (base a scalar, base_strides 0) in one pass each.
// `part_shape` is part's shape.
Tensor tensor_put_view(const Tensor& base, const std::vector<uint64_t>& shape, const std::vector<int64_t>& base_strides,
                       const Tensor& part, const std::vector<uint64_t>& part_shape, const std::vector<int64_t>& part_strides,
                       uint64_t offset);
// The parts (tensors with their shapes, of one type and place) joined along `axis`.
Tensor tensor_concatenate(const std::vector<Operand>& parts, size_t axis);
// Indexed axes of a tensor: each index read is checked against its axis's size and steps by its
// stride in elements.
struct IndexAxes {
  std::vector<uint64_t> sizes;
  std::vector<uint64_t> strides;
};
// The result's element at coordinates c of `shape` is t's at sum(c[d] * in_strides[d]) plus, for
// each indexed axis k, indices[b * K + k] * axes.strides[k], where b = sum(c[d] * batch_strides[d])
// and K the number of axes (at most 6): Nx's take, take_along_axis and gather. indices are :s64;
// IndexOutOfBounds when one lies outside its axis.
struct GatherPlan {
  std::vector<uint64_t> shape, in_strides, batch_strides;
  IndexAxes axes;
};
Tensor tensor_gather(const Tensor& t, const Tensor& indices, const GatherPlan& plan);
// A copy of target in which, for each update b < updates in order, the elements at
// sum(indices[b * K + k] * axes.strides[k]) + sum(c[d] * out_strides[d]) for each coordinate c of
// slice_shape are replaced by (Put) or added to (Add) updates[b * update_step + sum(c[d] *
// update_strides[d])]: Nx's indexed_put and indexed_add. IndexOutOfBounds as gather's.
enum class ScatterOp : int { Put = ACCEL_SCATTER_PUT, Add = ACCEL_SCATTER_ADD };
struct ScatterPlan {
  std::vector<uint64_t> slice_shape, out_strides, update_strides;
  uint64_t updates = 0, update_step = 0;
  IndexAxes axes;
};
Tensor tensor_scatter(ScatterOp op, const Tensor& target, const Tensor& indices, const Tensor& updates,
                      const ScatterPlan& plan);
// Output element c (of the dims' `out` sizes) combines t's elements at positions c[d] * stride +
// k[d] * dilation - pad_low, for each window coordinate k < window, that lie inside [0, in) on
// every dimension (t read through in_stride): sum, product, max or min (these two from
// identity_bits, the bits in t's type of the value Nx pads with). Nx's window_* and, with windows the size of the reduced axes, product.
enum class WindowOp : int { Sum = ACCEL_WINDOW_SUM, Product = ACCEL_WINDOW_PRODUCT, Max = ACCEL_WINDOW_MAX, Min = ACCEL_WINDOW_MIN };
struct WindowDim {
  uint64_t out = 1, in = 1, in_stride = 1, window = 1, stride = 1, pad_low = 0, dilation = 1;
};
Tensor tensor_window(WindowOp op, const Tensor& t, uint64_t identity_bits, const std::vector<WindowDim>& dims);
// Nx's window_scatter_max/min (pooling's gradient): a tensor of t's shape, init_bits (bits in t's
// type) plus at each element the source elements (one per window, in window order) of the windows
// whose last greatest (Max) or least (Min) element it is, padding read as init. At most 8
// dimensions, no dilation.
Tensor tensor_window_scatter(WindowOp op, const Tensor& t, const Tensor& source, uint64_t init_bits,
                             const std::vector<WindowDim>& dims);
// Along the middle axis of t as [outer][len][inner], each element the sum, product, max or min of
// those before it and itself (from the end when `reverse`): Nx's cumulative_* operations. Sums and
// products accumulate as window sums do (f32 in f64 where the device has doubles).
Tensor tensor_scan(WindowOp op, const Tensor& t, uint64_t outer, uint64_t len, uint64_t inner, bool reverse);
// t as `rows` rows of `len`, each sorted stably in Nx's order (ascending with NaN last, or
// descending with NaN first), and with `indices` each element's position in its row (:s64).
struct SortResult {
  Tensor values, indices;
};
// How merge passes run: Auto picks Sequential on CPU devices (one item merges a pair of runs) and
// Search elsewhere (one item places one element by binary search: the parallelism GPUs need).
enum class SortMerge { Auto, Sequential, Search };
SortResult tensor_sort(const Tensor& t, uint64_t rows, uint64_t len, bool descending, bool indices,
                       SortMerge merge = SortMerge::Auto);
Tensor tensor_transpose(const Tensor& t, uint64_t rows, uint64_t cols);
Tensor tensor_matmul(const Tensor& a, const Tensor& b, uint64_t batch, uint64_t m, uint64_t k, uint64_t n,
                     bool trans_a = false, bool trans_b = false);
// A convolution of stride 1 without dilation or groups, as the products of each kernel position's
// filters with the padded input shifted by that position (no patch matrix): `input` is the padded
// input, batch x channels x plane (each channel's plane row-major, its strides `plane_strides`, the
// last 1); `kernel` is positions x filters x channels; `offsets` holds each position's offset into
// a plane (where it meets the first output position); the result is batch x filters x the output's
// spatial sizes. :f32 or :f64, on a backend whose BLAS reads strided operands (the CPU backend's).
struct ShiftedConv {
  uint64_t batch = 0, channels = 0, filters = 0, plane = 0;
  std::vector<uint64_t> offsets, out_sizes, plane_strides;
  uint64_t span = 0;  // columns of one product: from the first output position's to the last's, + 1
};
Tensor tensor_conv_shifted(const Tensor& input, const Tensor& kernel, ShiftedConv conv);
Tensor tensor_logistic_map(const Tensor& t, const LogisticMapPlan& plan, const CallOptions& options);
// The linear algebra (core/tensor_linalg.cpp), :f32 or :f64, over `batch` matrices of m x n
// stored one after another, row-major; through LAPACK on the host, whatever a's device. The
// operations whose result is unique, and QR in Nx's signs (Nx differentiates a decomposition
// through its own composition, so a factor in other signs would make gradients wrong).
enum class LinalgOp : int { Cholesky, QR, Determinant, EighNx07, LuNx07 };
struct LinalgPlan {
  uint64_t batch = 1, m = 0, n = 0;
  double eps = 1e-10;  // QR: magnitudes at or below it are written as zeros, as Nx's
  uint64_t iterations = 0;  // EighNx07: at most this many QR iterations
  // solves: B is b_rows x b_cols per matrix; X A = B when not `left`; A's lower or upper
  // triangle, transposed or not (triangular_solve)
  uint64_t b_rows = 0, b_cols = 0;
  bool left = true, lower = true, transpose = false;
  // solves: the tensors hold complex matrices, each element two reals (re, im) of the tensor's type
  bool complex = false;
};
// Cholesky: [L], A = L L^T from A's lower triangle (NaN from the first pivot that is not positive
// on); QR: [Q m x k, R k x n] (k = min(m, n)); Determinant: [det]; EighNx07: [eigenvalues n,
// eigenvectors n x n] as Nx 0.7's binary backend computes them (ArgumentError for a matrix that
// is not symmetric within eps); LuNx07: [P, L, U] as Nx 0.7's binary backend computes them. A
// matrix holding NaN or an infinity gets NaN factors.
std::vector<Tensor> tensor_decompose(LinalgOp op, const Tensor& a, const LinalgPlan& plan);
// X of b's shape with A X = B (or X A = B); ArgumentError "can't solve for singular matrix" for a
// zero pivot (triangular: a zero on A's diagonal), as Nx raises.
Tensor tensor_solve(const Tensor& a, const Tensor& b, const LinalgPlan& plan, bool triangular);
// The discrete Fourier transform (or its inverse, 1/n scaled) of each of `rows` rows of `len`
// elements (f32, f64, c64 or c128), each padded with zeros or cut to n, as Nx.fft computes it:
// rows x n of out_type (c64 or c128), parts of magnitude at most eps written as zeros.
Tensor tensor_fft(const Tensor& t, uint64_t rows, uint64_t len, uint64_t n, bool inverse, double eps, DType out_type);

// count * size in bytes, or ArgumentError when that overflows or exceeds what any machine holds.
size_t checked_bytes(uint64_t count, DType type);

}  // namespace accel
