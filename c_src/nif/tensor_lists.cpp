// Nested lists <-> the bytes of a tensor, natively: Accel.Tensor.from_list/2 and to_list/1 at the
// speed of the logistic map's list codec (an Elixir version is ~100x slower). The decoder
// is a fast path only: any list it does not accept whole (improper, ragged, a non-number, a value
// that does not fit the type, a bignum, more than 64 levels) gives :error, and Accel.Tensor then
// runs its Elixir definition, which accepts exactly the same lists and words the error.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/tensor.hpp"
#include "nif/codecs.hpp"
#include "nif/nif_util.hpp"
#include "nif/runtime.hpp"
#include "nif/small_ints.hpp"
#include "nif/tensor_nif.hpp"
#include "nif/tensor_terms.hpp"

namespace accel::nif {
namespace {

constexpr size_t kMaxRank = 64;

struct Rejected {};  // the list is not one the fast path takes: the caller answers :error

// An integer that fits T, written as T; rejected otherwise.
template <typename T>
void put_int(int64_t i, unsigned char* out) {
  if (i < static_cast<int64_t>(std::numeric_limits<T>::min()) || i > static_cast<int64_t>(std::numeric_limits<T>::max()))
    throw Rejected{};
  const T v = static_cast<T>(i);
  std::memcpy(out, &v, sizeof v);
}

// Writes one number as `type`, or rejects it (the Elixir definition's rules: integers must fit,
// floats only into float types and finite in them; a bignum is left to the Elixir path).
void put(ErlNifEnv* env, ERL_NIF_TERM x, DType type, bool infer, unsigned char* out, bool* saw_float) {
  ErlNifSInt64 i;
  double f;
  if (enif_get_int64(env, x, &i)) {
    switch (type) {
      case DType::S64: std::memcpy(out, &i, 8); return;
      case DType::U64:
        if (i < 0) throw Rejected{};
        std::memcpy(out, &i, 8);
        return;
      case DType::S32: put_int<int32_t>(i, out); return;
      case DType::U32: put_int<uint32_t>(i, out); return;
      case DType::S16: put_int<int16_t>(i, out); return;
      case DType::U16: put_int<uint16_t>(i, out); return;
      case DType::S8: put_int<int8_t>(i, out); return;
      case DType::U8: put_int<uint8_t>(i, out); return;
      case DType::F64: { const double v = static_cast<double>(i); std::memcpy(out, &v, 8); return; }
      case DType::F32: { const float v = static_cast<float>(i); std::memcpy(out, &v, 4); return; }
      default: throw Rejected{};  // f16, bf16, sub-byte, f8, complex: the Elixir definition's
    }
  }
  if (!enif_get_double(env, x, &f)) throw Rejected{};
  *saw_float = true;
  if (type == DType::F64) {
    std::memcpy(out, &f, 8);
  } else if (type == DType::F32) {
    const float v = static_cast<float>(f);
    if (!std::isfinite(v)) throw Rejected{};
    std::memcpy(out, &v, 4);
  } else if (!infer) {  // a float given an integer type (inferring, the caller starts again as f64)
    throw Rejected{};
  }
}

// Walks `list` at `depth` of `shape`, writing its numbers in order; `type` S64 with `infer` set
// stops (returns false) at the first float so that the caller retries as f64.
bool walk(ErlNifEnv* env, ERL_NIF_TERM list, size_t depth, const std::vector<uint64_t>& shape, DType type, bool infer,
          unsigned char*& out, size_t width) {
  // shape_of measured the outer list; every inner one must have its row's length (not ragged).
  unsigned length = static_cast<unsigned>(shape[depth]);
  if (depth != 0 && (!enif_get_list_length(env, list, &length) || length != shape[depth])) throw Rejected{};
  ERL_NIF_TERM head, tail = list;
  const bool leaves = depth + 1 == shape.size();
  // Runs of small integers without a call per element (a binary's data is 8-byte aligned).
  if (leaves && type == DType::S64 && reinterpret_cast<uintptr_t>(out) % alignof(int64_t) == 0)
    out += read_small_ints(tail, reinterpret_cast<int64_t*>(out), length) * width;
  while (enif_get_list_cell(env, tail, &head, &tail)) {
    if (!leaves) {
      if (!walk(env, head, depth + 1, shape, type, infer, out, width)) return false;
      continue;
    }
    bool saw_float = false;
    put(env, head, type, infer, out, &saw_float);
    if (infer && saw_float) return false;
    out += width;
  }
  return true;
}

// The shape the first elements describe (as the Elixir definition reads it).
bool shape_of(ErlNifEnv* env, ERL_NIF_TERM list, std::vector<uint64_t>* shape) {
  for (ERL_NIF_TERM t = list;;) {
    unsigned length = 0;
    if (!enif_get_list_length(env, t, &length) || shape->size() == kMaxRank) return false;
    shape->push_back(length);
    ERL_NIF_TERM head, tail;
    if (!enif_get_list_cell(env, t, &head, &tail) || !enif_is_list(env, head)) return true;
    t = head;
  }
}

ERL_NIF_TERM make_shape(ErlNifEnv* env, const std::vector<uint64_t>& shape) {
  std::vector<ERL_NIF_TERM> dims;
  for (uint64_t d : shape) dims.push_back(enif_make_uint64(env, d));
  return enif_make_list_from_array(env, dims.data(), static_cast<unsigned>(dims.size()));
}

// (list, type or nil) -> {shape, type, binary} or :error
ERL_NIF_TERM list_bytes_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  const bool infer = enif_is_identical(argv[1], atoms.nil);
  DType type = infer ? DType::S64 : decode_type(env, argv[1]);
  std::vector<uint64_t> shape;
  if (!enif_is_list(env, argv[0]) || !shape_of(env, argv[0], &shape)) return enif_make_atom(env, "error");
  uint64_t count = 1;
  for (uint64_t d : shape) {
    if (d != 0 && count > std::numeric_limits<uint64_t>::max() / d) return enif_make_atom(env, "error");
    count *= d;
  }
  try {
    for (;;) {
      const size_t width = dtype_size(type);
      unsigned char* data = nullptr;
      ERL_NIF_TERM bin = make_output_binary(env, static_cast<size_t>(count) * width, &data);
      unsigned char* out = data;
      if (walk(env, argv[0], 0, shape, type, infer && type == DType::S64, out, width))
        return enif_make_tuple3(env, make_shape(env, shape), enif_make_atom(env, dtype_name(type)), bin);
      type = DType::F64;  // an integer pass met a float: every element as f64
    }
  } catch (const Rejected&) {
    return enif_make_atom(env, "error");
  } catch (const Error&) {
    // A size no memory holds: the first elements promised a shape the rest cannot have (a list
    // that exists holds more bytes than its elements' binary), so the definition will say where.
    return enif_make_atom(env, "error");
  }
}

// (binary, type, shape) -> nested lists of the elements; non-finite floats as :nan, :infinity and
// :neg_infinity (Elixir floats cannot hold them).
template <typename T>
T read_as(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

ERL_NIF_TERM number(ErlNifEnv* env, const unsigned char* p, DType type) {
  double v;
  switch (type) {
    case DType::S64: return enif_make_int64(env, read_as<int64_t>(p));
    case DType::U64: return enif_make_uint64(env, read_as<uint64_t>(p));
    case DType::S32: return enif_make_int(env, read_as<int32_t>(p));
    case DType::U32: return enif_make_uint(env, read_as<uint32_t>(p));
    case DType::S16: return enif_make_int(env, read_as<int16_t>(p));
    case DType::U16: return enif_make_uint(env, read_as<uint16_t>(p));
    case DType::S8:
    case DType::S4:
    case DType::S2: return enif_make_int(env, read_as<int8_t>(p));
    case DType::U8:
    case DType::U4:
    case DType::U2: return enif_make_uint(env, *p);
    case DType::F64: v = read_as<double>(p); break;
    case DType::F32: v = read_as<float>(p); break;
    case DType::F16: v = accel_f16_to_f32(read_as<uint16_t>(p)); break;
    case DType::BF16: v = accel_bits_f32(uint64_t{read_as<uint16_t>(p)} << 16); break;
    case DType::F8: v = accel_f8_to_f32(*p); break;
    case DType::F8E4M3FN: v = accel_f8e4m3_to_f32(*p); break;
    default: throw ArgumentError(std::string("a :") + dtype_name(type) + " tensor has no list form; read it with to_binary/1");
  }
  if (std::isnan(v)) return enif_make_atom(env, "nan");
  if (std::isinf(v)) return enif_make_atom(env, v > 0 ? "infinity" : "neg_infinity");
  return enif_make_double(env, v);
}

ERL_NIF_TERM nest(ErlNifEnv* env, const unsigned char*& p, DType type, const std::vector<uint64_t>& shape, size_t depth) {
  const size_t n = static_cast<size_t>(shape[depth]);
  // Accel's host memory (reused pages, not zeroed) for the terms of a long row.
  HostBuffer storage(n * sizeof(ERL_NIF_TERM));
  auto* cells = reinterpret_cast<ERL_NIF_TERM*>(storage.data());
  if (depth + 1 == shape.size() && type == DType::S64) {  // in place, as the list codec does
    if (n != 0) std::memcpy(cells, p, n * 8);
    int64s_to_terms(env, reinterpret_cast<uint64_t*>(cells), n);
    p += n * 8;
    return enif_make_list_from_array(env, cells, static_cast<unsigned>(n));
  }
  for (size_t i = 0; i < n; ++i) {
    if (depth + 1 == shape.size()) {
      cells[i] = number(env, p, type);
      p += dtype_size(type);
    } else {
      cells[i] = nest(env, p, type, shape, depth + 1);
    }
  }
  return enif_make_list_from_array(env, cells, static_cast<unsigned>(n));
}

ERL_NIF_TERM nested_list_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  ErlNifBinary bin;
  if (!enif_inspect_binary(env, argv[0], &bin)) throw ArgumentError("expected a binary, got: " + describe_term(env, argv[0]));
  const DType type = decode_type(env, argv[1]);
  const std::vector<uint64_t> shape = decode_shape(env, argv[2]);
  uint64_t count = 1, cells = 0;
  for (uint64_t d : shape) {
    if (d != 0 && count > (uint64_t{1} << 40) / d) throw ArgumentError("a shape of more than 2^40 elements cannot be a list");
    count *= d;
    cells += count;
  }
  if (count * dtype_size(type) != bin.size)
    throw ArgumentError("a binary of " + std::to_string(bin.size) + " bytes does not hold " + std::to_string(count) + " :" +
                        dtype_name(type) + " elements");
  check_list_output(static_cast<size_t>(cells));
  const unsigned char* p = bin.data;
  if (shape.empty()) return number(env, p, type);
  return nest(env, p, type, shape, 0);
}

// Inline when small, dirty CPU otherwise: by the first elements' shape (the nested total).
template <NifFn Run>
ERL_NIF_TERM sized_by_shape(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  uint64_t elements = 1;
  ErlNifBinary bin;
  if (enif_inspect_binary(env, argv[0], &bin)) {
    elements = bin.size;
  } else {
    std::vector<uint64_t> shape;
    shape_of(env, argv[0], &shape);
    for (uint64_t d : shape) elements = std::min<uint64_t>(elements * std::min<uint64_t>(d, kInlineListElements + 1), kInlineListElements + 1);
  }
  if (elements <= kInlineListElements) return Run(env, argc, argv);
  return schedule_dirty_cpu(env, "tensor", guarded<Run>, argc, argv);
}

}  // namespace

ERL_NIF_TERM tensor_list_bytes(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  return sized_by_shape<list_bytes_run>(env, argc, argv);
}

ERL_NIF_TERM tensor_nested_list(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  return sized_by_shape<nested_list_run>(env, argc, argv);
}

}  // namespace accel::nif
