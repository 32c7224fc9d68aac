// Tensor NIFs: each decodes its terms (tensor_terms.hpp), runs a checked operation from core/ and
// returns a new tensor. Scheduling: operations on
// device backends are submitted to the device's queue (device_jobs.hpp), so no scheduler waits on
// the device or its driver; CPU operations on at most kInlineTensorElements elements run inline, larger
// ones and every matmul and logistic map on dirty CPU. Every NIF that may reach a device takes the
// caller's reference last (Accel.Job). Every argument is checked: these functions are private, but
// nothing here trusts its caller.
#include "nif/tensor_nif.hpp"
#include "nif/tensor_terms.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <new>
#include <string>

#include "core/backend.hpp"
#include "core/tensor.hpp"
#include "nif/codecs.hpp"
#include "nif/device_jobs.hpp"
#include "nif/nif_util.hpp"
#include "nif/runtime.hpp"
#include "nif/tensor_scheduling.hpp"

namespace accel::nif {
namespace {

// ---- the operations ----

// A binary kept alive outside any process: a private environment holding a copy of its term
// (for a reference-counted binary, a new reference to the same bytes, not a copy of them).
struct HeldBinary {
  ErlNifEnv* env = enif_alloc_env();
  ErlNifBinary bin{};
  HeldBinary() = default;
  HeldBinary(const HeldBinary&) = delete;
  HeldBinary& operator=(const HeldBinary&) = delete;
  ~HeldBinary() { enif_free_env(env); }
};

// Binaries this large become CPU tensors without a copy, and CPU tensors this large binaries (the
// two share bytes, which no operation writes); smaller ones are copied, which costs less than
// holding them.
constexpr size_t kShareBinaryBytes = size_t{64} << 10;

// (binary, type, backend, device)
ERL_NIF_TERM from_binary_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  ErlNifBinary bin;
  if (!enif_inspect_binary(env, argv[0], &bin)) throw ArgumentError("expected a binary, got: " + describe_term(env, argv[0]));
  const DType type = decode_type(env, argv[1]);
  int device = 0;
  Backend& backend = decode_place(env, argv[2], argv[3], &device);
  if (bin.size < kShareBinaryBytes || backend.waits_on_device())
    return make_tensor(env, accel::tensor_from_bytes(backend, device, type, bin.data, bin.size));
  auto held = std::make_shared<HeldBinary>();
  if (held->env == nullptr || !enif_inspect_binary(held->env, enif_make_copy(held->env, argv[0]), &held->bin))
    throw Error("out_of_memory", "could not hold the binary");
  const unsigned char* data = held->bin.data;
  const size_t size = held->bin.size;
  return make_tensor(env, accel::tensor_from_bytes(backend, device, type, data, size, std::move(held)));
}

// (type, count, backend, device)
ERL_NIF_TERM iota_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  const DType type = decode_type(env, argv[0]);
  const uint64_t count = decode_count(env, argv[1], "count");
  int device = 0;
  Backend& backend = decode_place(env, argv[2], argv[3], &device);
  return make_tensor(env, tensor_iota(backend, device, type, count));
}

// (t, limit): the first `limit` elements (all when limit >= count) as a binary.
ERL_NIF_TERM to_binary_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  const Tensor t = get_tensor(env, argv[0]);
  const uint64_t count = std::min<uint64_t>(decode_count(env, argv[1], "limit"), t.count);
  const size_t bytes = count * dtype_size(t.type);
  // Host memory (the CPU backend): the binary shares the tensor's bytes, which nothing writes.
  if (bytes >= kShareBinaryBytes)
    if (const void* view = t.backend->host_view(*t.buffer)) return make_view_binary(env, t, view, bytes);
  unsigned char* out = nullptr;
  ERL_NIF_TERM result = make_output_binary(env, count * dtype_size(t.type), &out);
  accel::tensor_to_bytes(t, out, count);
  return result;
}

ERL_NIF_TERM cast_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  return make_tensor(env, accel::tensor_cast(get_tensor(env, argv[0]), decode_type(env, argv[1])));
}

// (op, a, b, a_shape, b_shape)
ERL_NIF_TERM binary_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  const int op = decode_op(env, OpFamily::Binary, argv[0]);
  Tensor a, b;
  const Operand x = decode_operand(env, argv[1], argv[3], &a), y = decode_operand(env, argv[2], argv[4], &b);
  return make_tensor(env, accel::tensor_binary(static_cast<BinaryOp>(op), x, y));
}

// (op, a, b, a_shape, b_shape)
ERL_NIF_TERM compare_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  const int op = decode_op(env, OpFamily::Compare, argv[0]);
  Tensor a, b;
  const Operand x = decode_operand(env, argv[1], argv[3], &a), y = decode_operand(env, argv[2], argv[4], &b);
  return make_tensor(env, accel::tensor_compare(static_cast<CompareOp>(op), x, y));
}

// (pred, a, b, pred_shape, a_shape, b_shape)
ERL_NIF_TERM select_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  Tensor tensors[3];
  const Operand pred = decode_operand(env, argv[0], argv[3], &tensors[0]);
  const Operand a = decode_operand(env, argv[1], argv[4], &tensors[1]), b = decode_operand(env, argv[2], argv[5], &tensors[2]);
  return make_tensor(env, accel::tensor_select(pred, a, b));
}

// (op, a, b, a_shape, b_shape): complex products, quotients, sums and differences (an operand
// may be real, of the parts' type), and convert (a real a as complex; b is not read)
ERL_NIF_TERM complex_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  static constexpr std::array<std::pair<std::string_view, ComplexOp>, 5> ops{{{"multiply", ComplexOp::multiply},
                                                                               {"divide", ComplexOp::divide},
                                                                               {"add", ComplexOp::add},
                                                                               {"subtract", ComplexOp::subtract},
                                                                               {"convert", ComplexOp::convert}}};
  const std::string name = atom_text(env, argv[0]);
  const auto op = std::find_if(ops.begin(), ops.end(), [&](const auto& o) { return o.first == name; });
  if (op == ops.end())
    throw ArgumentError("unknown complex operation: " + describe_term(env, argv[0]) +
                        " (multiply, divide, add, subtract or convert)");
  Tensor a, b;
  const Operand x = decode_operand(env, argv[1], argv[3], &a), y = decode_operand(env, argv[2], argv[4], &b);
  return make_tensor(env, accel::tensor_complex(op->second, x, y));
}

ERL_NIF_TERM complex_abs_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  return make_tensor(env, accel::tensor_complex_abs(get_tensor(env, argv[0])));
}

// (op, tensor, variant): a complex function, one pass
ERL_NIF_TERM complex_fn_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  const int op = decode_op(env, OpFamily::Unary, argv[0]);
  int variant = 0;
  if (!enif_get_int(env, argv[2], &variant))
    throw ArgumentError("a complex function's library variant is an integer 0..3, got " + describe_term(env, argv[2]));
  return make_tensor(env, accel::tensor_complex_fn(static_cast<UnaryOp>(op), get_tensor(env, argv[1]), variant));
}

ERL_NIF_TERM unary_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  const int op = decode_op(env, OpFamily::Unary, argv[0]);
  return make_tensor(env, accel::tensor_unary(static_cast<UnaryOp>(op), get_tensor(env, argv[1])));
}

// An argmin/argmax's {name, nan, tie} (nan: first, last or ignored; tie: low or high).
ArgPolicy decode_arg_policy(ErlNifEnv* env, ERL_NIF_TERM op, std::string* name) {
  int arity = 0;
  const ERL_NIF_TERM* fields = nullptr;
  ArgPolicy policy;
  if (!enif_get_tuple(env, op, &arity, &fields)) {
    *name = atom_text(env, op);
    return policy;
  }
  if (arity != 3) throw ArgumentError("unknown reduction: " + describe_term(env, op));
  *name = atom_text(env, fields[0]);
  const std::string nan = atom_text(env, fields[1]), tie = atom_text(env, fields[2]);
  policy.nan = nan == "first" ? NanRank::First : nan == "last" ? NanRank::Last : nan == "ignored" ? NanRank::Ignored
               : throw ArgumentError("nan: must be :first, :last or :ignored, got: " + describe_term(env, fields[1]));
  policy.last = tie == "high" ? true : tie == "low" ? false
                : throw ArgumentError("tie_break: must be :low or :high, got: " + describe_term(env, fields[2]));
  return policy;
}

// (op, t, outer, len, inner): op sum, min, max, argmin or argmax (or {argmin or argmax, nan, tie}).
ERL_NIF_TERM reduce_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  std::string name;
  const ArgPolicy policy = decode_arg_policy(env, argv[0], &name);
  const bool arg = name == "argmin" || name == "argmax";
  const ReduceOp op = name == "sum"                       ? ReduceOp::Sum
                      : name == "product"                 ? ReduceOp::Product
                      : name == "min" || name == "argmin" ? ReduceOp::Min
                      : name == "max" || name == "argmax" ? ReduceOp::Max
                                                          : throw ArgumentError("unknown reduction: " + describe_term(env, argv[0]));
  const Tensor t = get_tensor(env, argv[1]);
  const uint64_t outer = decode_count(env, argv[2], "outer"), len = decode_count(env, argv[3], "len"),
                 inner = decode_count(env, argv[4], "inner");
  return make_tensor(env, arg ? accel::tensor_argreduce(op, t, outer, len, inner, policy)
                              : accel::tensor_reduce(op, t, outer, len, inner));
}

// (t, shape, start, length, step)
ERL_NIF_TERM slice_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  return make_tensor(env, accel::tensor_slice(get_tensor(env, argv[0]), decode_shape(env, argv[1]), decode_shape(env, argv[2]),
                                              decode_shape(env, argv[3]), decode_shape(env, argv[4])));
}

// (t, shape, strides, offset)
ERL_NIF_TERM view_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  return make_tensor(env, accel::tensor_view(get_tensor(env, argv[0]), decode_shape(env, argv[1]), decode_strides(env, argv[2]),
                                             decode_count(env, argv[3], "offset")));
}

// (base, shape, base_strides, part, part_shape, part_strides, offset)
ERL_NIF_TERM put_view_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  const Tensor base = get_tensor(env, argv[0]), part = get_tensor(env, argv[3]);
  return make_tensor(env, accel::tensor_put_view(base, decode_shape(env, argv[1]), decode_strides(env, argv[2]), part,
                                                 decode_shape(env, argv[4]), decode_strides(env, argv[5]),
                                                 decode_count(env, argv[6], "offset")));
}

// (tensors, shapes, axis)
ERL_NIF_TERM concatenate_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  unsigned n = 0, shapes = 0;
  if (!enif_get_list_length(env, argv[0], &n) || !enif_get_list_length(env, argv[1], &shapes) || n != shapes || n > 4096)
    throw ArgumentError("expected lists of at most 4096 tensors and as many shapes");
  std::vector<Tensor> tensors(n);
  std::vector<Operand> parts(n);
  ERL_NIF_TERM t_head, t_tail = argv[0], s_head, s_tail = argv[1];
  for (unsigned i = 0; enif_get_list_cell(env, t_tail, &t_head, &t_tail) && enif_get_list_cell(env, s_tail, &s_head, &s_tail); ++i)
    parts[i] = decode_operand(env, t_head, s_head, &tensors[i]);
  return make_tensor(env, accel::tensor_concatenate(parts, static_cast<size_t>(decode_count(env, argv[2], "axis"))));
}

ERL_NIF_TERM transpose_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  return make_tensor(env, accel::tensor_transpose(get_tensor(env, argv[0]), decode_count(env, argv[1], "rows"),
                                                  decode_count(env, argv[2], "cols")));
}

// (a, b, batch, m, k, n, transposes: 1 when a is stored transposed, 2 when b is, 3 both)
ERL_NIF_TERM matmul_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  const uint64_t transposes = decode_count(env, argv[6], "transposes");
  if (transposes > 3) throw ArgumentError("transposes must be 0 to 3 (1: a, 2: b), got " + std::to_string(transposes));
  return make_tensor(env, accel::tensor_matmul(get_tensor(env, argv[0]), get_tensor(env, argv[1]),
                                               decode_count(env, argv[2], "batch"), decode_count(env, argv[3], "m"),
                                               decode_count(env, argv[4], "k"), decode_count(env, argv[5], "n"),
                                               (transposes & 1) != 0, (transposes & 2) != 0));
}

// (input, kernel, [batch, channels, filters, plane], offsets, output sizes, plane strides):
// core/tensor.hpp's ShiftedConv
ERL_NIF_TERM conv_shifted_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  const std::vector<uint64_t> sizes = decode_shape(env, argv[2]);
  if (sizes.size() != 4) throw ArgumentError("a shifted convolution's sizes are [batch, channels, filters, plane]");
  accel::ShiftedConv conv;
  conv.batch = sizes[0];
  conv.channels = sizes[1];
  conv.filters = sizes[2];
  conv.plane = sizes[3];
  conv.offsets = decode_shape(env, argv[3]);
  conv.out_sizes = decode_shape(env, argv[4]);
  conv.plane_strides = decode_shape(env, argv[5]);
  return make_tensor(env, accel::tensor_conv_shifted(get_tensor(env, argv[0]), get_tensor(env, argv[1]), std::move(conv)));
}

// Indexed axes: (sizes, strides), two lists of one length.
IndexAxes decode_index_axes(ErlNifEnv* env, ERL_NIF_TERM sizes, ERL_NIF_TERM strides) {
  return IndexAxes{decode_shape(env, sizes), decode_shape(env, strides)};
}

// (t, indices, shape, in_strides, batch_strides, axis_sizes, axis_strides)
ERL_NIF_TERM gather_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  GatherPlan plan{decode_shape(env, argv[2]), decode_shape(env, argv[3]), decode_shape(env, argv[4]),
                  decode_index_axes(env, argv[5], argv[6])};
  return make_tensor(env, accel::tensor_gather(get_tensor(env, argv[0]), get_tensor(env, argv[1]), plan));
}

// (:put | :add, target, indices, updates, slice_shape, out_strides, update_strides, {updates, step},
//  axis_sizes, axis_strides)
ERL_NIF_TERM scatter_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  const std::string name = atom_text(env, argv[0]);
  const ScatterOp op = name == "put" ? ScatterOp::Put
                       : name == "add" ? ScatterOp::Add
                                       : throw ArgumentError("unknown scatter: " + describe_term(env, argv[0]));
  const ERL_NIF_TERM* pair = nullptr;
  int arity = 0;
  if (!enif_get_tuple(env, argv[7], &arity, &pair) || arity != 2)
    throw ArgumentError("expected {updates, step}, got: " + describe_term(env, argv[7]));
  ScatterPlan plan;
  plan.slice_shape = decode_shape(env, argv[4]);
  plan.out_strides = decode_shape(env, argv[5]);
  plan.update_strides = decode_shape(env, argv[6]);
  plan.updates = decode_count(env, pair[0], "updates");
  plan.update_step = decode_count(env, pair[1], "step");
  plan.axes = decode_index_axes(env, argv[8], argv[9]);
  return make_tensor(env, accel::tensor_scatter(op, get_tensor(env, argv[1]), get_tensor(env, argv[2]),
                                                get_tensor(env, argv[3]), plan));
}

WindowOp decode_window_op(ErlNifEnv* env, ERL_NIF_TERM term) {
  const std::string name = atom_text(env, term);
  return name == "sum"       ? WindowOp::Sum
         : name == "product" ? WindowOp::Product
         : name == "max"     ? WindowOp::Max
         : name == "min"     ? WindowOp::Min
                             : throw ArgumentError("unknown window reduction: " + describe_term(env, term));
}

uint64_t decode_bits(ErlNifEnv* env, ERL_NIF_TERM term) {
  ErlNifUInt64 bits = 0;
  if (!enif_get_uint64(env, term, &bits)) throw ArgumentError("expected the bits of a value, got: " + describe_term(env, term));
  return bits;
}

// [out, in, in_stride, window, stride, pad_low, dilation, ...]: seven per dimension
std::vector<WindowDim> decode_window(ErlNifEnv* env, ERL_NIF_TERM term) {
  const std::vector<uint64_t> flat = decode_shape(env, term);
  if (flat.size() % 7 != 0) throw ArgumentError("a window needs seven numbers per dimension");
  std::vector<WindowDim> dims(flat.size() / 7);
  for (size_t d = 0; d < dims.size(); ++d) {
    const uint64_t* v = &flat[d * 7];
    dims[d] = WindowDim{v[0], v[1], v[2], v[3], v[4], v[5], v[6]};
  }
  return dims;
}

// (op, t, identity_bits, window)
ERL_NIF_TERM window_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  return make_tensor(env, accel::tensor_window(decode_window_op(env, argv[0]), get_tensor(env, argv[1]),
                                               decode_bits(env, argv[2]), decode_window(env, argv[3])));
}

// (:max | :min, t, source, init_bits, window)
ERL_NIF_TERM window_scatter_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  return make_tensor(env, accel::tensor_window_scatter(decode_window_op(env, argv[0]), get_tensor(env, argv[1]),
                                                       get_tensor(env, argv[2]), decode_bits(env, argv[3]),
                                                       decode_window(env, argv[4])));
}

// (op, t, outer, len, inner, reverse)
ERL_NIF_TERM scan_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  const std::string reverse = atom_text(env, argv[5]);
  if (reverse != "true" && reverse != "false") throw ArgumentError("expected a boolean, got: " + describe_term(env, argv[5]));
  return make_tensor(env, accel::tensor_scan(decode_window_op(env, argv[0]), get_tensor(env, argv[1]),
                                             decode_count(env, argv[2], "outer"), decode_count(env, argv[3], "len"),
                                             decode_count(env, argv[4], "inner"), reverse == "true"));
}

// (t, rows, len, :asc | :desc, :values | :indices): the sorted values, or their positions
ERL_NIF_TERM sort_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  const std::string direction = atom_text(env, argv[3]), what = atom_text(env, argv[4]);
  if (direction != "asc" && direction != "desc")
    throw ArgumentError("expected :asc or :desc, got: " + describe_term(env, argv[3]));
  if (what != "values" && what != "indices")
    throw ArgumentError("expected :values or :indices, got: " + describe_term(env, argv[4]));
  SortResult r = accel::tensor_sort(get_tensor(env, argv[0]), decode_count(env, argv[1], "rows"),
                                    decode_count(env, argv[2], "len"), direction == "desc", what == "indices");
  return make_tensor(env, what == "indices" ? std::move(r.indices) : std::move(r.values));
}

// A list of `count` non-negative integers named `what`.
std::vector<uint64_t> decode_counts(ErlNifEnv* env, ERL_NIF_TERM term, size_t count, const char* what) {
  unsigned length = 0;
  if (!enif_get_list_length(env, term, &length) || length != count)
    throw ArgumentError(std::string(what) + ": expected a list of " + std::to_string(count) + " integers, got: " +
                        describe_term(env, term));
  std::vector<uint64_t> out;
  ERL_NIF_TERM head;
  while (enif_get_list_cell(env, term, &head, &term)) out.push_back(decode_count(env, head, what));
  return out;
}

bool decode_flag(ErlNifEnv* env, ERL_NIF_TERM term) {
  const std::string text = atom_text(env, term);
  if (text != "true" && text != "false") throw ArgumentError("expected a boolean, got: " + describe_term(env, term));
  return text == "true";
}

// (op, a, [batch, m, n], eps): a list of the factors; eigh_nx07 takes [batch, n, n, iterations]
ERL_NIF_TERM decompose_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  static const char* const names[] = {"cholesky", "qr", "determinant", "eigh_nx07", "lu_nx07"};
  const std::string name = atom_text(env, argv[0]);
  const auto found = std::find(std::begin(names), std::end(names), name);
  if (found == std::end(names)) throw ArgumentError("unknown decomposition: " + describe_term(env, argv[0]));
  const LinalgOp op = static_cast<LinalgOp>(found - std::begin(names));
  const std::vector<uint64_t> dims = decode_counts(env, argv[2], op == LinalgOp::EighNx07 ? 4 : 3, "matrix dimensions");
  LinalgPlan plan;
  plan.batch = dims[0], plan.m = dims[1], plan.n = dims[2];
  // (no cancellation reaches the linear algebra's thread: a bound, not a 2^62-iteration hold)
  if (op == LinalgOp::EighNx07 && dims[3] > 1'000'000)
    throw ArgumentError("max_iter: at most 1000000 iterations, got: " + std::to_string(dims[3]));
  if (op == LinalgOp::EighNx07) plan.iterations = dims[3];
  if (!enif_get_double(env, argv[3], &plan.eps) || !(plan.eps >= 0))
    throw ArgumentError("eps: expected a non-negative float, got: " + describe_term(env, argv[3]));
  std::vector<Tensor> factors = accel::tensor_decompose(op, get_tensor(env, argv[1]), plan);
  ERL_NIF_TERM list = enif_make_list(env, 0);
  for (auto it = factors.rbegin(); it != factors.rend(); ++it) list = enif_make_list_cell(env, make_tensor(env, std::move(*it)), list);
  return list;
}

// (a, b, [batch, n, b_rows, b_cols], [left, lower, transpose, triangular, complex]): complex
// matrices are (re, im) pairs of the tensors' reals
ERL_NIF_TERM solve_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  const std::vector<uint64_t> dims = decode_counts(env, argv[2], 4, "solve dimensions");
  unsigned length = 0;
  if (!enif_get_list_length(env, argv[3], &length) || length != 5)
    throw ArgumentError("expected five booleans, got: " + describe_term(env, argv[3]));
  bool flags[5];
  ERL_NIF_TERM head, tail = argv[3];
  for (bool& flag : flags) {
    enif_get_list_cell(env, tail, &head, &tail);
    flag = decode_flag(env, head);
  }
  LinalgPlan plan;
  plan.batch = dims[0], plan.m = dims[1], plan.n = dims[1], plan.b_rows = dims[2], plan.b_cols = dims[3];
  plan.left = flags[0], plan.lower = flags[1], plan.transpose = flags[2], plan.complex = flags[4];
  return make_tensor(env, accel::tensor_solve(get_tensor(env, argv[0]), get_tensor(env, argv[1]), plan, flags[3]));
}

// (t, [rows, len, n], inverse, eps, out type)
ERL_NIF_TERM fft_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  const std::vector<uint64_t> dims = decode_counts(env, argv[1], 3, "fft dimensions");
  double eps = 0;
  if (!enif_get_double(env, argv[3], &eps) || !(eps >= 0))
    throw ArgumentError("eps: expected a non-negative float, got: " + describe_term(env, argv[3]));
  return make_tensor(env, accel::tensor_fft(get_tensor(env, argv[0]), dims[0], dims[1], dims[2], decode_flag(env, argv[2]),
                                            eps, decode_type(env, argv[4])));
}

// (t, p, mu, iterations)
ERL_NIF_TERM logistic_map_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  const Tensor t = get_tensor(env, argv[0]);
  const LogisticMapPlan plan = plan_logistic_map(decode_int64_arg(env, argv[1], "p"), decode_int64_arg(env, argv[2], "mu"),
                                                 decode_int64_arg(env, argv[3], "iterations"));
  const Cancellation cancel = caller_cancellation(env);
  CallOptions options;
  options.device = t.device;
  options.cancel = &cancel;
  return make_tensor(env, accel::tensor_logistic_map(t, plan, options));
}

// (t, backend, device)
ERL_NIF_TERM transfer_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  const Tensor t = get_tensor(env, argv[0]);
  int device = 0;
  Backend& backend = decode_place(env, argv[1], argv[2], &device);
  return make_tensor(env, accel::tensor_transfer(t, backend, device));
}

// ---- what a call's terms bound its work to, for where it runs (the entries below) ----

// The element count of a tensor term's tensor; 0 for any other term (the body reports it).
uint64_t tensor_count(ErlNifEnv* env, ERL_NIF_TERM term) {
  TensorResource* r = resource_of(env, term);
  if (r == nullptr) return 0;
  std::lock_guard<std::mutex> lock(r->mutex);
  return r->tensor.count;
}

// A product that saturates past kInlineWork: only "at most kInlineWork or not" matters (for
// scheduled_by_work and the like).
uint64_t saturated_product(std::initializer_list<uint64_t> factors) {
  if (std::find(factors.begin(), factors.end(), uint64_t{0}) != factors.end()) return 0;
  uint64_t product = 1;
  for (uint64_t f : factors) product = f > kInlineWork || product > kInlineWork / f ? kInlineWork + 1 : product * f;
  return product;
}

// ceil(log2(n)), at least 1: a merge's or a transform's passes over n elements.
uint64_t log2_steps(uint64_t n) {
  uint64_t steps = 1;
  while (steps < 64 && (uint64_t{1} << steps) < n) ++steps;
  return steps;
}

// The non-negative integers of a list term of at most `max` of them into out: how many, or 0 where
// the term is no such list.
unsigned list_counts(ErlNifEnv* env, ERL_NIF_TERM list, uint64_t* out, unsigned max) {
  unsigned n = 0;
  ErlNifUInt64 value = 0;
  ERL_NIF_TERM head, tail = list;
  while (enif_get_list_cell(env, tail, &head, &tail)) {
    if (n == max || !enif_get_uint64(env, head, &value)) return 0;
    out[n++] = value;
  }
  return enif_is_empty_list(env, tail) ? n : 0;
}

// A window's visits: the product of each dimension's outputs and window (positions 0 and 3 of
// its seven numbers; a window of 0, which the body refuses, as 1: the outputs bound what it
// writes); a term that is no such list counts as more than kInlineWork.
uint64_t window_work(ErlNifEnv* env, ERL_NIF_TERM window) {
  uint64_t work = 1, dim[7];
  ERL_NIF_TERM head, tail = window;
  ErlNifUInt64 value = 0;
  unsigned n = 0;
  while (enif_get_list_cell(env, tail, &head, &tail)) {
    if (!enif_get_uint64(env, head, &value)) return kInlineWork + 1;
    dim[n++] = value;
    if (n == 7) {
      work = saturated_product({work, dim[0], std::max<uint64_t>(dim[3], 1)});
      n = 0;
    }
  }
  return n == 0 && enif_is_empty_list(env, tail) ? work : kInlineWork + 1;
}

}  // namespace

ERL_NIF_TERM tensor_upload(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  ErlNifBinary bin;
  const size_t count = enif_inspect_binary(env, argv[0], &bin) ? bin.size / 8 : 0;
  return scheduled_new<from_binary_run, 2>(env, argc, argv, count);
}

ERL_NIF_TERM tensor_iota(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  ErlNifUInt64 count = 0;
  if (!enif_get_uint64(env, argv[1], &count)) count = 0;  // iota_run reports it
  return scheduled_new<iota_run, 2>(env, argc, argv, count);
}

ERL_NIF_TERM tensor_download(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  return scheduled<to_binary_run, 0, false>(env, argc, argv);
}

ERL_NIF_TERM tensor_cast(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  return scheduled<cast_run, 0, false>(env, argc, argv);
}

// (t, type): the same buffer read as another type; no device work, so inline.
ERL_NIF_TERM reinterpret_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  return make_tensor(env, accel::tensor_reinterpret(get_tensor(env, argv[0]), decode_type(env, argv[1])));
}

ERL_NIF_TERM tensor_reinterpret(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  return run_inline(reinterpret_run, env, argc, argv);
}

ERL_NIF_TERM tensor_binary(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  return scheduled<binary_run, 1, false>(env, argc, argv);
}

ERL_NIF_TERM tensor_compare(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  return scheduled<compare_run, 1, false>(env, argc, argv);
}

ERL_NIF_TERM tensor_select(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  return scheduled<select_run, 0, false>(env, argc, argv);
}

ERL_NIF_TERM tensor_slice(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  return scheduled<slice_run, 0, false>(env, argc, argv);
}

// A view's output may be far larger than its inputs (a broadcast, a pad of a scalar): it runs
// dirty when the output shape (argv[1] of both) is large, by its tensors' place otherwise.
template <NifFn Run>
ERL_NIF_TERM scheduled_view(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  if (shape_count_up_to(env, argv[1], kInlineTensorElements) > kInlineTensorElements)
    return scheduled<Run, 0, true>(env, argc, argv);
  return scheduled<Run, 0, false>(env, argc, argv);
}

ERL_NIF_TERM tensor_view(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) { return scheduled_view<view_run>(env, argc, argv); }

ERL_NIF_TERM tensor_put_view(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  return scheduled_view<put_view_run>(env, argc, argv);
}

// Scheduled by the first tensor of the list (all must share its place; concatenate_run checks),
// inline on the CPU where the parts hold kInlineTensorElements or fewer in all (each counted by
// its tensor and by its shape, whichever is larger: a part is written once).
ERL_NIF_TERM tensor_concatenate(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  uint64_t total = 0;
  ERL_NIF_TERM part, parts = argv[0], shape, shapes = argv[1];
  while (total <= kInlineTensorElements && enif_get_list_cell(env, parts, &part, &parts)) {
    const uint64_t by_shape = enif_get_list_cell(env, shapes, &shape, &shapes)
                                  ? shape_count_up_to(env, shape, kInlineTensorElements)
                                  : kInlineTensorElements + 1;
    total += std::max<uint64_t>(by_shape, tensor_count(env, part));
  }
  return scheduled_if<concatenate_run, 0>(env, argc, argv, [total](size_t) { return total <= kInlineTensorElements; });
}

ERL_NIF_TERM tensor_unary(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  return scheduled<unary_run, 1, false>(env, argc, argv);
}

ERL_NIF_TERM tensor_complex(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  return scheduled<complex_run, 1, false>(env, argc, argv);
}

ERL_NIF_TERM tensor_complex_fn(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  // (tens to hundreds of nanoseconds an element: inline up to 1024 of them, a fraction of a millisecond)
  return scheduled_if<complex_fn_run, 1>(env, argc, argv, [](size_t count) { return count <= 1024; });
}

ERL_NIF_TERM tensor_complex_abs(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  return scheduled<complex_abs_run, 0, false>(env, argc, argv);
}

ERL_NIF_TERM tensor_reduce(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  return scheduled<reduce_run, 1, false>(env, argc, argv);
}

// Indexing, concatenation, scans, sorts, windows and FFTs run inline on the CPU where their
// arguments bound the work small, each figure from terms read before anything runs (one that is
// no such term counts as large: the body, on a dirty scheduler, reports it); dirty otherwise, by
// the tensors' place elsewhere. A call through a dirty scheduler and back took 27-89 us on the 2-core
// development VM where the work of a small one takes 1-5 us (a take of 2 rows of a 30 x 5 tensor,
// a concatenate of two: Scholar's loops make thousands).
//
// A gather reads one element per output element and index axis, whatever the size of the tensor it
// reads from (an embedding table): by its output and index count.
ERL_NIF_TERM tensor_gather(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  const uint64_t out = shape_count_up_to(env, argv[2], kInlineTensorElements);
  const uint64_t indices = tensor_count(env, argv[1]);
  return scheduled_if<gather_run, 0>(env, argc, argv, [out, indices](size_t) {
    return out <= kInlineTensorElements && indices <= kInlineTensorElements;
  });
}

// A scatter copies its target and reads each update and index once: by the largest of the three.
ERL_NIF_TERM tensor_scatter(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  return scheduled<scatter_run, 1, false>(env, argc, argv);
}

// A window reduction, or its scatter (pooling's gradient), visits each window's elements once:
// the product over its dimensions of outputs x window (decode_window's terms, seven a dimension:
// out, in, in_stride, window, ...), at most kInlineWork inline.
ERL_NIF_TERM tensor_window(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  const uint64_t work = window_work(env, argv[3]);
  return scheduled_by_work<window_run, 1>(env, argc, argv, work);
}

ERL_NIF_TERM tensor_window_scatter(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  const uint64_t work = window_work(env, argv[4]);
  return scheduled_by_work<window_scatter_run, 1>(env, argc, argv, work);
}

// A scan reads and writes each element once.
ERL_NIF_TERM tensor_scan(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  return scheduled<scan_run, 1, false>(env, argc, argv);
}

// A merge sort of rows of `len` (argv[2]): count x log2(len) steps.
ERL_NIF_TERM tensor_sort(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  ErlNifUInt64 len = 0;
  const uint64_t steps = enif_get_uint64(env, argv[2], &len) ? log2_steps(len) : kInlineWork + 1;
  // (steps >= 1: a product within kInlineWork bounds the tensor too)
  return scheduled_if<sort_run, 0>(env, argc, argv, [steps](size_t count) { return saturated_product({count, steps}) <= kInlineWork; });
}

// The linear algebra runs on Accel's one arithmetic thread (core/tensor_linalg.cpp: OpenBLAS's
// stack and its threaded routines), where a large factorization may hold it for seconds: its
// caller always waits on a dirty scheduler, however small its own matrices.
ERL_NIF_TERM tensor_decompose(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  return scheduled<decompose_run, 1, true>(env, argc, argv);
}

// Transforms of length n of `rows` rows (dims, argv[1]: [rows, len, n], n the result's length, a
// row padded or cut to it): each a power-of-two transform of at most 4n points (Bluestein's, where
// n has large prime factors) of log2(4n) passes.
ERL_NIF_TERM tensor_fft(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  uint64_t dims[3] = {0, 0, 0};
  const bool read = list_counts(env, argv[1], dims, 3) == 3;
  const uint64_t points = saturated_product({dims[2], 4});
  const uint64_t work = read ? saturated_product({dims[0], points, log2_steps(points)}) : kInlineWork + 1;
  return scheduled_by_work<fft_run, 0>(env, argc, argv, work);
}

// (on the arithmetic thread too, as tensor_decompose)
ERL_NIF_TERM tensor_solve(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  return scheduled<solve_run, 0, true>(env, argc, argv);
}

ERL_NIF_TERM tensor_transpose(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  return scheduled<transpose_run, 0, false>(env, argc, argv);
}

// By its multiply-adds (batch * m * k * n; unknown where a count does not decode: matmul_run raises).
ERL_NIF_TERM tensor_matmul(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  ErlNifUInt64 d[4] = {0, 0, 0, 0};
  bool read = argc > 5;
  for (int i = 0; read && i < 4; ++i) read = enif_get_uint64(env, argv[i + 2], &d[i]);
  const uint64_t work = read ? saturated_product({d[0], d[1], d[2], d[3]}) : kInlineWork + 1;
  return scheduled_by_work<matmul_run, 0>(env, argc, argv, work);
}

// By its multiply-adds, about batch * channels * filters * plane * kernel positions (unknown where
// the sizes do not decode: conv_shifted_run raises).
ERL_NIF_TERM tensor_conv_shifted(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  uint64_t sizes[4] = {0, 0, 0, 0};
  unsigned positions = 0;
  const uint64_t work =
      enif_get_list_length(env, argv[3], &positions) && list_counts(env, argv[2], sizes, 4) == 4
          ? saturated_product({positions, sizes[0], sizes[1], sizes[2], sizes[3]})
          : kInlineWork + 1;
  return scheduled_by_work<conv_shifted_run, 0>(env, argc, argv, work);
}

ERL_NIF_TERM tensor_logistic_map(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  return scheduled<logistic_map_run, 0, true>(env, argc, argv);
}

// (t, backend, device, ref): on the queue of whichever end is a device, the source's first.
ERL_NIF_TERM tensor_transfer(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  Runtime& rt = runtime();
  if (resource_of(env, argv[0]) == nullptr) return transfer_run(env, argc, argv);  // raises
  if (!rt.auto_resolved) return schedule_dirty_io(env, "tensor", guarded<after_discovery<tensor_transfer>>, argc, argv);
  const Tensor t = get_tensor(env, argv[0]);
  int device = 0;
  Backend& to = decode_place(env, argv[1], argv[2], &device);
  if (t.backend->waits_on_device()) return submit_now(env, rt.queue(*t.backend, t.device), transfer_run, argc, argv);
  if (to.waits_on_device()) return submit_now(env, rt.queue(to, device), transfer_run, argc, argv);
  return schedule_dirty_cpu(env, "tensor", guarded<transfer_run>, argc, argv);
}

// (backend, device): tensor bytes allocated there.
ERL_NIF_TERM tensor_memory(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  Runtime& rt = runtime();
  Backend* backend = backend_named(rt, atom_text(env, argv[0]));
  if (backend == nullptr) throw ArgumentError("unknown backend: " + describe_term(env, argv[0]));
  const int64_t device = decode_int64_arg(env, argv[1], "device");
  rt.resolve_auto();  // this NIF runs on dirty IO: discovery may happen here
  rt.check_device(*backend, device);
  return enif_make_int64(env, backend->allocated_bytes(static_cast<int>(device)));
}

// (): [{backend, device}] fenced after a fault (Backend::fenced_devices): a few atomic reads.
ERL_NIF_TERM fenced_devices(ErlNifEnv* env, int, const ERL_NIF_TERM[]) {
  ERL_NIF_TERM list = enif_make_list(env, 0);
  Runtime& rt = runtime();
  for (Backend* backend : rt.all)
    for (int device : backend->fenced_devices())
      list = enif_make_list_cell(
          env, enif_make_tuple2(env, enif_make_atom(env, rt.name_of(backend)), enif_make_int(env, device)), list);
  return list;
}

// (backend, device, kind): for tests, the device's next command fails as a fault would
// (Backend::simulate_fault; kind 1: the rebuild restores it, 2: it stays broken).
ERL_NIF_TERM simulate_device_fault(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  Runtime& rt = runtime();
  Backend* backend = backend_named(rt, atom_text(env, argv[0]));
  if (backend == nullptr) throw ArgumentError("unknown backend: " + describe_term(env, argv[0]));
  const int64_t device = decode_int64_arg(env, argv[1], "device");
  const int64_t kind = decode_int64_arg(env, argv[2], "kind");
  if (kind != 1 && kind != 2) throw ArgumentError("kind must be 1 or 2, got: " + describe_term(env, argv[2]));
  rt.resolve_auto();
  rt.check_device(*backend, device);
  backend->simulate_fault(static_cast<int>(device), static_cast<int>(kind));
  return enif_make_atom(env, "ok");
}

}  // namespace accel::nif
