// Term <-> buffer conversions (see codecs.hpp).
#include "nif/codecs.hpp"
#include "nif/small_ints.hpp"

#include <cstring>
#include <new>
#include <string>

#include "nif/nif_util.hpp"

namespace accel::nif {

namespace {

ErlNifResourceType* g_buffer_type = nullptr;

// Outputs below this size are ordinary VM binaries; larger ones are Accel-owned (see host_buffer.hpp).
constexpr size_t kOwnedBinaryMin = size_t{1} << 20;

void destroy_buffer(ErlNifEnv*, void* obj) { static_cast<HostBuffer*>(obj)->~HostBuffer(); }

struct RangeSpec {
  int64_t first = 0, step = 1;
  size_t count = 0;
};

bool get_int64(ErlNifEnv* env, ERL_NIF_TERM term, int64_t* out) {
  ErlNifSInt64 v;  // its own type: not necessarily the same as int64_t
  if (!enif_get_int64(env, term, &v)) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

bool get_map_int64(ErlNifEnv* env, ERL_NIF_TERM map, ERL_NIF_TERM key, int64_t* out) {
  ERL_NIF_TERM value;
  return enif_get_map_value(env, map, key, &value) && get_int64(env, value, out);
}

bool is_range(ErlNifEnv* env, ERL_NIF_TERM term) {
  ERL_NIF_TERM mod;
  return enif_is_map(env, term) && enif_get_map_value(env, term, atoms.struct_, &mod) &&
         enif_is_identical(mod, atoms.range_module);
}

RangeSpec decode_range(ErlNifEnv* env, ERL_NIF_TERM term) {
  RangeSpec r;
  int64_t last = 0;
  if (!get_map_int64(env, term, atoms.first, &r.first) || !get_map_int64(env, term, atoms.last, &last))
    throw ArgumentError("range bounds must be integers in the signed 64-bit range, got: " + describe_term(env, term));
  ERL_NIF_TERM step_term;
  if (!enif_get_map_value(env, term, atoms.step, &step_term)) {
    r.step = r.first <= last ? 1 : -1;  // ranges from before Elixir 1.12 carry no step
  } else if (!get_int64(env, step_term, &r.step) || r.step == 0) {
    throw ArgumentError("range step must be a non-zero integer in the signed 64-bit range, got: " +
                        describe_term(env, term));
  }
  // Unsigned differences are exact whenever the range is non-empty in its direction. The count of
  // the whole int64 range, 2^64, does not fit: it is refused rather than wrapped to 0.
  uint64_t steps = 0;
  bool empty = true;
  if (r.step > 0 && r.first <= last) {
    steps = (static_cast<uint64_t>(last) - static_cast<uint64_t>(r.first)) / static_cast<uint64_t>(r.step);
    empty = false;
  } else if (r.step < 0 && r.first >= last) {
    steps = (static_cast<uint64_t>(r.first) - static_cast<uint64_t>(last)) / (uint64_t{0} - static_cast<uint64_t>(r.step));
    empty = false;
  }
  if (!empty && steps == UINT64_MAX) throw Error("out_of_memory", "a range of 2^64 elements is too large to process");
  r.count = empty ? 0 : steps + 1;
  return r;
}

[[noreturn]] void bad_element(ErlNifEnv* env, size_t index, ERL_NIF_TERM value) {
  const bool is_integer = enif_term_type(env, value) == ERL_NIF_TERM_TYPE_INTEGER;
  throw ArgumentError("element at index " + std::to_string(index) +
                      (is_integer ? " is outside the signed 64-bit range: " : " is not an integer: ") +
                      describe_term(env, value));
}

[[noreturn]] void improper_list(ErlNifEnv* env, ERL_NIF_TERM list) {
  size_t index = 0;
  ERL_NIF_TERM head, tail = list;
  while (enif_get_list_cell(env, tail, &head, &tail)) ++index;
  throw ArgumentError("improper list: the tail after " + std::to_string(index) + " elements is " +
                      describe_term(env, tail) + ", not []");
}

void check_range_size(size_t count) {
  if (count > (SIZE_MAX >> 4))
    throw Error("out_of_memory", "a range of " + std::to_string(count) + " elements is too large to process");
}

}  // namespace

bool open_codec_resources(ErlNifEnv* env) {
  check_small_int_layout(env);
  auto flags = static_cast<ErlNifResourceFlags>(ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER);
  g_buffer_type = enif_open_resource_type(env, nullptr, "accel_host_buffer", destroy_buffer, flags, nullptr);
  return g_buffer_type != nullptr;
}

size_t count_int64_input(ErlNifEnv* env, ERL_NIF_TERM term, size_t limit) {
  ErlNifBinary bin;
  if (enif_is_binary(env, term) && enif_inspect_binary(env, term, &bin)) return bin.size / 8;
  if (enif_is_list(env, term)) {
    size_t n = 0;
    ERL_NIF_TERM head, tail = term;
    while (n <= limit && enif_get_list_cell(env, tail, &head, &tail)) ++n;
    return n;
  }
  if (is_range(env, term)) {
    try {
      return decode_range(env, term).count;
    } catch (const std::exception&) {
      return 0;  // decode_int64_input reports the problem
    }
  }
  return 0;
}

Int64Input decode_int64_input(ErlNifEnv* env, ERL_NIF_TERM term) {
  Int64Input input;
  ErlNifBinary bin;
  if (enif_is_binary(env, term)) {
    if (!enif_inspect_binary(env, term, &bin)) throw ArgumentError("could not read the input binary");
    if (bin.size % 8 != 0)
      throw ArgumentError("binary input must hold whole signed 64-bit integers: its size, " + std::to_string(bin.size) +
                          " bytes, is not a multiple of 8");
    input.kind = InputKind::Binary;
    input.source = Int64Source::of_bytes(bin.data, bin.size / 8);
    return input;
  }
  if (enif_is_list(env, term)) {
    unsigned length = 0;
    if (!enif_get_list_length(env, term, &length)) improper_list(env, term);
    input.kind = InputKind::List;
    input.storage = HostBuffer(size_t{length} * 8);
    unsigned char* out = input.storage.data();
    ERL_NIF_TERM head, tail = term;
    for (size_t i = 0; i < length;) {
      // Runs of small integers without a call per element (the buffer is 8-byte aligned); the
      // API for the rest: bignums within 64 bits, and the element that is not an integer.
      i += read_small_ints(tail, reinterpret_cast<int64_t*>(out) + i, length - i);
      if (i == length || !enif_get_list_cell(env, tail, &head, &tail)) break;
      ErlNifSInt64 v;
      if (!enif_get_int64(env, head, &v)) bad_element(env, i, head);
      store_i64(out + i * 8, v);
      ++i;
    }
    input.source = Int64Source::of_bytes(out, length);
    return input;
  }
  if (is_range(env, term)) {
    const RangeSpec r = decode_range(env, term);
    check_range_size(r.count);
    input.kind = InputKind::Range;
    input.source = Int64Source::of_range(r.first, r.step, r.count);
    return input;
  }
  throw ArgumentError("expected a list of integers, a Range or a binary of signed 64-bit integers, got: " +
                      describe_term(env, term));
}

int64_t decode_int64_arg(ErlNifEnv* env, ERL_NIF_TERM term, const char* name) {
  ErlNifSInt64 v;
  if (!enif_get_int64(env, term, &v))
    throw ArgumentError(std::string(name) + " must be an integer in the signed 64-bit range, got: " +
                        describe_term(env, term));
  return v;
}

// A list costs 16 bytes a cell on the process heap, on top of Accel's 8-byte scratch; the VM aborts
// rather than fail an allocation, so refuse lists that cannot fit in this machine's memory at all.
void check_list_output(size_t count) {
  const double physical = static_cast<double>(physical_memory_bytes());
  if (count > 0xFFFFFFFFull || (physical > 0 && static_cast<double>(count) * 24 > physical))
    throw Error("out_of_memory", "a list of " + std::to_string(count) + " integers would not fit in memory; use as: :binary");
}


ERL_NIF_TERM make_owned_binary(ErlNifEnv* env, HostBuffer&& buffer, size_t bytes) {
  if (bytes < kOwnedBinaryMin) {
    ERL_NIF_TERM term;
    unsigned char* data = enif_make_new_binary(env, bytes, &term);
    if (data == nullptr) throw Error("out_of_memory", "could not allocate a binary of " + std::to_string(bytes) + " bytes");
    if (bytes != 0) std::memcpy(data, buffer.data(), bytes);
    return term;
  }
  void* slot = enif_alloc_resource(g_buffer_type, sizeof(HostBuffer));
  if (slot == nullptr) throw std::bad_alloc();
  auto* owned = new (slot) HostBuffer(std::move(buffer));
  ERL_NIF_TERM term = enif_make_resource_binary(env, slot, owned->data(), bytes);
  enif_release_resource(slot);  // the binary term now owns the buffer
  return term;
}

void check_binary_output(size_t bytes) {
  const size_t physical = physical_memory_bytes();
  if (physical > 0 && bytes > physical)
    throw Error("out_of_memory", "a result of " + std::to_string(bytes) + " bytes would not fit in this machine's " +
                                     std::to_string(physical) + " bytes of memory");
}

ERL_NIF_TERM make_output_binary(ErlNifEnv* env, size_t bytes, unsigned char** data) {
  check_binary_output(bytes);
  if (bytes < kOwnedBinaryMin) {
    ERL_NIF_TERM term;
    *data = enif_make_new_binary(env, bytes, &term);
    if (*data == nullptr) throw Error("out_of_memory", "could not allocate a binary of " + std::to_string(bytes) + " bytes");
    return term;
  }
  HostBuffer buffer(bytes);
  *data = buffer.data();
  return make_owned_binary(env, std::move(buffer), bytes);
}

ERL_NIF_TERM encode_int64_list(ErlNifEnv* env, HostBuffer& buffer, size_t count) {
  static_assert(sizeof(ERL_NIF_TERM) == sizeof(int64_t), "terms are rewritten over their integers in place");
  check_list_output(count);
  auto* words = reinterpret_cast<uint64_t*>(buffer.data());
  int64s_to_terms(env, words, count);
  return enif_make_list_from_array(env, reinterpret_cast<const ERL_NIF_TERM*>(words), static_cast<unsigned>(count));
}

}  // namespace accel::nif
