// The elementwise operations of the registry (kernels/ops.h): unary, binary, compare and select,
// with Nx's broadcasting. Each checks its operands' types, places and shapes, chooses how each
// operand is read (launch.h's layouts: the output's shape, a scalar, a repeat, or strided), and
// launches one kernel; integer divisions and powers report a zero divisor or a negative exponent.
#include <algorithm>
#include <string>
#include <utility>

#include "core/backend.hpp"
#include "core/error.hpp"
#include "core/tensor_checks.hpp"

namespace accel {
using namespace detail;
namespace {

const char* family_suffix(OpFamily family) { return family == OpFamily::Unary ? "/1" : "/2"; }

// ArgumentError when the registry says this operation does not take the type.
void check_takes(OpFamily family, int code, DType type) {
  const OpInfo& op = op_info(family, code);
  check_computes(type, (std::string("Accel.Tensor.") + op.name + family_suffix(family)).c_str());
  if (is_float(type) ? op.floats : op.ints) return;
  throw ArgumentError(std::string("Accel.Tensor.") + op.name + family_suffix(family) + " needs " +
                      (op.floats ? "a float tensor (:f32 or :f64)" : "integer tensors (:s64, :s32, :u8, :u64 or :u32)") + ", got :" +
                      dtype_name(type) + "; convert with Accel.Tensor.as_type/2");
}

void check_shape(const Operand& o) {
  if (o.tensor != nullptr && shape_count(o.shape) != o.tensor->count)
    throw ArgumentError("a shape of " + shape_text(o.shape) + " does not match the tensor's " +
                        std::to_string(o.tensor->count) + " elements");
}

// The broadcast shape of the tensor operands (scalars take any shape).
std::vector<uint64_t> broadcast_shape(const std::vector<const Operand*>& operands) {
  size_t rank = 0;
  for (const Operand* o : operands)
    if (o->tensor != nullptr) rank = std::max(rank, o->shape.size());
  std::vector<uint64_t> out(rank, 1);
  for (const Operand* o : operands) {
    if (o->tensor == nullptr) continue;
    for (size_t k = 0; k < o->shape.size(); ++k) {
      uint64_t& d = out[rank - o->shape.size() + k];
      const uint64_t dim = o->shape[k];
      if (d == 1) {
        d = dim;
      } else if (dim != 1 && dim != d) {
        std::string shapes;
        for (const Operand* x : operands)
          if (x->tensor != nullptr) shapes += (shapes.empty() ? "" : " and ") + shape_text(x->shape);
        throw ArgumentError("shapes " + shapes + " do not broadcast (each dimension must be equal, or 1)");
      }
    }
  }
  return out;
}

// Operand j's strides over the output's shape: its own, 0 along the dimensions it broadcasts.
std::vector<uint64_t> broadcast_strides(const Operand& o, const std::vector<uint64_t>& out) {
  const std::vector<uint64_t> own = contiguous_strides(o.shape);
  const size_t skip = out.size() - o.shape.size();
  std::vector<uint64_t> strides(out.size(), 0);
  for (size_t d = skip; d < out.size(); ++d) strides[d] = o.shape[d - skip] == 1 ? 0 : own[d - skip];
  return strides;
}

// How each operand of an output of shape `out` is read (launch.h's layouts): a scalar, the output's
// layout, a repeat of a trailing shape, or strided over the output's dimensions, merged where every
// operand allows (merge_dimensions). An operand still strided over more than ACCEL_MAX_RANK
// dimensions is first broadcast to the output's shape by a copy, of any rank (`keep` holds it).
void set_layouts(accel_params& p, const std::vector<const Operand*>& ops, const std::vector<DType>& types,
                 const std::vector<uint64_t>& out, std::vector<Tensor>& keep) {
  std::vector<int> strided;
  for (size_t j = 0; j < ops.size(); ++j) {
    const Operand& o = *ops[j];
    if (o.tensor == nullptr) {
      p.layout[j] = ACCEL_LAYOUT_SCALAR;
      p.bits[j] = scalar_bits(o.scalar, types[j]);
      continue;
    }
    p.count[j] = o.tensor->count;
    if (o.tensor->count == p.n) {  // every dimension equal (no dimension is 0 in a launched call)
      p.layout[j] = ACCEL_LAYOUT_FULL;
      continue;
    }
    // Without its leading 1s, a suffix of the output's shape: it repeats every count elements.
    const auto first = std::find_if(o.shape.begin(), o.shape.end(), [](uint64_t d) { return d != 1; });
    const size_t tail = static_cast<size_t>(o.shape.end() - first);
    if (std::equal(first, o.shape.end(), out.end() - static_cast<std::ptrdiff_t>(tail))) {
      p.layout[j] = ACCEL_LAYOUT_REPEAT;
      continue;
    }
    strided.push_back(static_cast<int>(j));
  }
  if (strided.empty()) return;
  std::vector<uint64_t> shape = out;
  std::vector<std::vector<uint64_t>> strides(strided.size() + 1);
  strides[0] = contiguous_strides(out);  // the output's, so that merged dimensions stay its order
  std::vector<std::vector<uint64_t>*> layouts = {&strides[0]};
  for (size_t k = 0; k < strided.size(); ++k) {
    strides[k + 1] = broadcast_strides(*ops[static_cast<size_t>(strided[k])], out);
    layouts.push_back(&strides[k + 1]);
  }
  merge_dimensions(shape, layouts);
  for (size_t k = 0; k < strided.size(); ++k) {
    const size_t j = static_cast<size_t>(strided[k]);
    if (shape.size() > ACCEL_MAX_RANK) {
      const Tensor& t = *ops[j]->tensor;
      keep.push_back(tensor_view(t, out, std::vector<int64_t>(strides[k + 1].begin(), strides[k + 1].end()), 0));
      p.layout[j] = ACCEL_LAYOUT_FULL;
      p.count[j] = p.n;
      continue;
    }
    p.layout[j] = ACCEL_LAYOUT_STRIDED;
    p.rank = shape.size();
    std::copy(shape.begin(), shape.end(), p.shape);
    std::copy(strides[k + 1].begin(), strides[k + 1].end(), p.stride[j]);
  }
}

// The buffer operand j is read from: its broadcast copy where set_layouts made one.
const DeviceBuffer* buffer_of(const Operand& o, const accel_params& p, int j, const std::vector<Tensor>& keep, size_t* used) {
  if (o.tensor == nullptr) return nullptr;
  const bool copied = p.layout[j] == ACCEL_LAYOUT_FULL && o.tensor->count != p.n;
  return copied ? keep[(*used)++].buffer.get() : o.tensor->buffer.get();
}

// The buffers of two operands of one type, each read as set_layouts places it (broadcast copies,
// where it makes them, held by `keep`).
std::pair<const DeviceBuffer*, const DeviceBuffer*> pair_buffers(accel_params& p, const Operand& a, const Operand& b,
                                                                 DType type, const std::vector<uint64_t>& shape,
                                                                 std::vector<Tensor>& keep) {
  set_layouts(p, {&a, &b}, {type, type}, shape, keep);
  size_t used = 0;
  const DeviceBuffer* x = buffer_of(a, p, 0, keep, &used);
  return {x, buffer_of(b, p, 1, keep, &used)};
}

// The first tensor operand (where the result goes) and the type the value operands share.
struct Checked {
  const Tensor& lead;
  DType type;
};

// Checks the operands (the values, from first_value on, of one type; one place; shapes that
// broadcast) and sets p.n to the output's size. A first_value past the operands checks no types
// (the caller's own), and the type returned is the lead's.
Checked prepare(accel_params& p, const std::vector<const Operand*>& operands, int first_value,
                std::vector<uint64_t>* out_shape) {
  const Tensor* lead = nullptr;
  const Tensor* value = nullptr;
  for (size_t j = 0; j < operands.size(); ++j) {
    const Operand& o = *operands[j];
    check_shape(o);
    if (o.tensor == nullptr) continue;
    if (lead != nullptr) check_same_place(*lead, *o.tensor);
    if (lead == nullptr) lead = o.tensor;
    if (static_cast<int>(j) < first_value) continue;
    if (value != nullptr) check_same_type(*value, *o.tensor);
    value = o.tensor;
  }
  if (lead == nullptr) throw ArgumentError("at least one operand must be a tensor");
  const bool typed = static_cast<size_t>(first_value) < operands.size();
  if (typed && value == nullptr) throw ArgumentError("at least one of the values must be a tensor");
  *out_shape = broadcast_shape(operands);
  p.n = shape_count(*out_shape);
  return {*lead, typed ? value->type : lead->type};
}

// The first negative element of an integer operand (a shift's amount), read to the host: the one
// Nx names when it raises.
int64_t first_negative(const Operand& o) {
  if (o.tensor == nullptr) return o.scalar.i;
  const Tensor as_s64 = tensor_cast(*o.tensor, DType::S64);
  std::vector<int64_t> values(as_s64.count);
  tensor_to_bytes(as_s64, values.data(), as_s64.count);
  for (int64_t v : values)
    if (v < 0) return v;
  return 0;
}

}  // namespace

Tensor tensor_unary(UnaryOp op, const Tensor& t) {
  check_takes(OpFamily::Unary, static_cast<int>(op), t.type);
  Tensor out = allocate_like(*t.backend, t.device, t.type, t.count);
  if (t.count != 0)
    launch(t, typed_kernel(Kernel::accel_unary_f32, t.type), params_for(t.count, static_cast<int>(op)),
           {t.buffer.get(), out.buffer.get()}, 8);
  return out;
}

Tensor tensor_binary(BinaryOp op, const Operand& a, const Operand& b) {
  accel_params p = params_for(0, static_cast<int>(op));
  std::vector<uint64_t> shape;
  const auto [lead, type] = prepare(p, {&a, &b}, 0, &shape);
  check_takes(OpFamily::Binary, static_cast<int>(op), type);
  Tensor out = allocate_like(*lead.backend, lead.device, type, p.n);
  if (p.n == 0) return out;
  std::vector<Tensor> keep;
  const auto [x, y] = pair_buffers(p, a, b, type, shape, keep);
  KernelBuffers buffers{x, y, out.buffer.get(), nullptr};
  const Kernel kernel = typed_kernel(Kernel::accel_binary_f32, type);
  const bool may_flag = !is_float(type) && (op == BinaryOp::divide || op == BinaryOp::quotient ||
                                            op == BinaryOp::remainder || op == BinaryOp::pow ||
                                            op == BinaryOp::left_shift || op == BinaryOp::right_shift);
  if (!may_flag) {
    launch(lead, kernel, p, buffers);
    return out;
  }
  // The kernel raises a flag instead of a silent 0.
  const int32_t found = launch_flagged(lead, kernel, p, buffers);
  const std::string name = std::string("Accel.Tensor.") + op_info(OpFamily::Binary, static_cast<int>(op)).name + "/2";
  if (found == ACCEL_FLAG_ZERO_DIVISOR) throw ArgumentError("integer division by zero in " + name);
  if (found == ACCEL_FLAG_NEGATIVE_EXPONENT)
    throw ArgumentError("a negative exponent in " + name + " on integers (whose powers would be fractions); use floats");
  if (found == ACCEL_FLAG_NEGATIVE_SHIFT)
    throw ArgumentError(std::string("cannot ") + (op == BinaryOp::left_shift ? "left" : "right") + " shift by " +
                        std::to_string(first_negative(b)));  // Nx's message
  return out;
}

namespace {
void check_complex(DType type, const char* what) {
  if (type != DType::C64 && type != DType::C128)
    throw ArgumentError(std::string(what) + " takes :c64 or :c128 tensors, got :" + dtype_name(type));
}

// c128 needs doubles (its kernels are built only where the device has them)
void check_complex_place(const Tensor& t, DType type) {
  if (type == DType::C128 && !t.backend->supports(DType::F64, t.device))
    throw ArgumentError(std::string("type :c128 is not supported on :") + t.backend->status().name + " device " +
                        std::to_string(t.device) + " (it has no double precision)");
}
}  // namespace

Tensor tensor_complex(ComplexOp op, const Operand& a, const Operand& b) {
  if (a.tensor == nullptr || b.tensor == nullptr) throw ArgumentError("complex arithmetic takes two tensors");
  if (op == ComplexOp::convert) return tensor_complex_of_real(*a.tensor);
  const bool a_complex = a.tensor->type == DType::C64 || a.tensor->type == DType::C128;
  const DType type = a_complex ? a.tensor->type : b.tensor->type;
  const DType parts = type == DType::C128 ? DType::F64 : DType::F32;
  check_complex(type, "complex arithmetic");
  // p.size[0]: bit j set where operand j is real (its parts' type, read as x + 0i)
  accel_params p = params_for(0, static_cast<int>(op));
  const Operand* operands[2] = {&a, &b};
  for (int j = 0; j < 2; ++j) {
    const DType t = operands[j]->tensor->type;
    if (t == parts)
      p.size[0] |= uint64_t{1} << j;
    else if (t != type)
      throw ArgumentError(std::string("complex arithmetic on :") + dtype_name(type) + " takes operands of that type or :" +
                          dtype_name(parts) + ", got :" + dtype_name(t) + " as operand " + std::to_string(j + 1));
  }
  std::vector<uint64_t> shape;
  const Tensor& lead = prepare(p, {&a, &b}, 2, &shape).lead;
  check_complex_place(lead, type);
  Tensor out = allocate_like(*lead.backend, lead.device, type, p.n);
  if (p.n == 0) return out;
  std::vector<Tensor> keep;
  const auto [x, y] = pair_buffers(p, a, b, type, shape, keep);
  launch(lead, type == DType::C64 ? Kernel::accel_complex_c64 : Kernel::accel_complex_c128, p,
         {x, y, out.buffer.get(), nullptr});
  return out;
}

Tensor tensor_complex_of_real(const Tensor& real) {
  if (real.type != DType::F32 && real.type != DType::F64)
    throw ArgumentError(std::string("a complex conversion takes an :f32 or :f64 tensor, got :") + dtype_name(real.type));
  const DType type = real.type == DType::F64 ? DType::C128 : DType::C64;
  check_complex_place(real, type);
  Tensor out = allocate_like(*real.backend, real.device, type, real.count);
  if (real.count == 0) return out;
  accel_params p = params_for(real.count, static_cast<int>(ComplexOp::convert));
  p.size[0] = 3;  // both operands real (the second, the same buffer, is not read)
  launch(real, type == DType::C64 ? Kernel::accel_complex_c64 : Kernel::accel_complex_c128, p,
         {real.buffer.get(), real.buffer.get(), out.buffer.get(), nullptr});
  return out;
}

Tensor tensor_complex_abs(const Tensor& t) {
  check_complex(t.type, "a complex magnitude");
  check_complex_place(t, t.type);
  const DType real = t.type == DType::C64 ? DType::F32 : DType::F64;
  Tensor out = allocate_like(*t.backend, t.device, real, t.count);
  if (t.count != 0)
    launch(t, t.type == DType::C64 ? Kernel::accel_complex_abs_c64 : Kernel::accel_complex_abs_c128,
           params_for(t.count), {t.buffer.get(), out.buffer.get()}, 8);
  return out;
}

bool complex_fn(UnaryOp op) {
  switch (op) {
    case UnaryOp::exp: case UnaryOp::log: case UnaryOp::sqrt: case UnaryOp::rsqrt: case UnaryOp::expm1:
    case UnaryOp::log1p: case UnaryOp::sigmoid: case UnaryOp::sin: case UnaryOp::cos: case UnaryOp::tan:
    case UnaryOp::sinh: case UnaryOp::cosh: case UnaryOp::tanh: case UnaryOp::asin: case UnaryOp::acos:
    case UnaryOp::atan: case UnaryOp::asinh: case UnaryOp::acosh: case UnaryOp::atanh: case UnaryOp::cbrt:
      return true;
    default:
      return false;
  }
}

Tensor tensor_complex_fn(UnaryOp op, const Tensor& t, int variant) {
  check_complex(t.type, "a complex function");
  if (!complex_fn(op))
    throw ArgumentError(std::string("no complex function ") + op_info(OpFamily::Unary, static_cast<int>(op)).name);
  if (variant < 0 || variant > 3)  // (two bits)
    throw ArgumentError("a complex function's library variant is 0..3, got " + std::to_string(variant));
  check_complex_place(t, t.type);
  Tensor out = allocate_like(*t.backend, t.device, t.type, t.count);
  if (t.count == 0) return out;
  accel_params p = params_for(t.count, static_cast<int>(op));
  p.size[0] = static_cast<accel_u64>(variant);
  // (a few calls of the C library's functions per element)
  launch(t, t.type == DType::C64 ? Kernel::accel_complex_fn_c64 : Kernel::accel_complex_fn_c128, p,
         {t.buffer.get(), out.buffer.get()}, 64);
  return out;
}

Tensor tensor_compare(CompareOp op, const Operand& a, const Operand& b) {
  accel_params p = params_for(0, static_cast<int>(op));
  std::vector<uint64_t> shape;
  const auto [lead, type] = prepare(p, {&a, &b}, 0, &shape);
  check_takes(OpFamily::Compare, static_cast<int>(op), type);
  Tensor out = allocate_like(*lead.backend, lead.device, DType::U8, p.n);
  if (p.n == 0) return out;
  std::vector<Tensor> keep;
  const auto [x, y] = pair_buffers(p, a, b, type, shape, keep);
  launch(lead, typed_kernel(Kernel::accel_compare_f32, type), p, {x, y, out.buffer.get()});
  return out;
}

Tensor tensor_select(const Operand& pred, const Operand& a, const Operand& b) {
  if (pred.tensor == nullptr || pred.tensor->type != DType::U8)
    throw ArgumentError("select/3 needs a :u8 tensor as its predicate (see Accel.Tensor.not_equal/2)");
  accel_params p = params_for(0);
  std::vector<uint64_t> shape;
  const auto [lead, type] = prepare(p, {&pred, &a, &b}, 1, &shape);
  check_computes(type, "Accel.Tensor.select/3");
  Tensor out = allocate_like(*lead.backend, lead.device, type, p.n);
  if (p.n == 0) return out;
  std::vector<Tensor> keep;
  set_layouts(p, {&pred, &a, &b}, {DType::U8, type, type}, shape, keep);
  size_t used = 0;
  const DeviceBuffer* c = buffer_of(pred, p, 0, keep, &used);
  const DeviceBuffer* x = buffer_of(a, p, 1, keep, &used);
  const DeviceBuffer* y = buffer_of(b, p, 2, keep, &used);
  launch(lead, typed_kernel(Kernel::accel_select_f32, type), p, {c, x, y, out.buffer.get()});
  return out;
}

}  // namespace accel
