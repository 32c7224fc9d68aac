// The tensor NIFs' terms: the tensor resource (a core Tensor whose buffer lives on its backend's
// device; free/1 drops the buffer early, and any later use raises), and the decoding of types,
// counts, places, shapes, operands and the registry's operation atoms. Every term is checked:
// the NIFs are private, but nothing here trusts its caller.
#include "nif/tensor_terms.hpp"

#include <atomic>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "nif/call_plans.hpp"
#include "nif/codecs.hpp"
#include "nif/device_jobs.hpp"
#include "nif/nif_util.hpp"
#include "nif/tensor_nif.hpp"
#include "nif/runtime.hpp"

namespace accel::nif {

thread_local TensorScope* t_tensor_scope = nullptr;

namespace {

ErlNifResourceType* g_tensor_type = nullptr;
// Tensor bytes allocated since the last collection the Elixir side ran (tensor_take_pressure).
std::atomic<uint64_t> g_bytes_since_gc{0};

// The processes that made tensors since that collection: dropped tensors wait in their heaps, so
// these are the ones to collect. Past kMaxMakers distinct processes, every process is.
constexpr size_t kMaxMakers = 4096;
std::mutex g_makers_mutex;
std::vector<ErlNifPid> g_makers;
bool g_makers_overflow = false;

// A pid's term (erl_nif.h's enif_make_pid macro casts to a const type, which -Werror refuses).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-qualifiers"
ERL_NIF_TERM pid_term(ErlNifEnv* env, const ErlNifPid& pid) { return enif_make_pid(env, &pid); }
#pragma GCC diagnostic pop

void note_maker(ErlNifEnv* env) {
  ErlNifPid pid;
  if (!calling_process(env, &pid)) return;
  std::lock_guard<std::mutex> lock(g_makers_mutex);
  if (g_makers_overflow) return;
  for (const ErlNifPid& seen : g_makers)
    if (enif_compare_pids(&seen, &pid) == 0) return;
  if (g_makers.size() == kMaxMakers) {
    g_makers_overflow = true;
    g_makers.clear();
    return;
  }
  g_makers.push_back(pid);
}


void destroy_tensor(ErlNifEnv*, void* object) { static_cast<TensorResource*>(object)->~TensorResource(); }

// A new resource holding `tensor`; the caller makes its term, then releases it (the term owns it).
TensorResource* new_resource(Tensor tensor) {
  void* memory = enif_alloc_resource(g_tensor_type, sizeof(TensorResource));
  if (memory == nullptr) throw std::bad_alloc();
  auto* resource = new (memory) TensorResource();
  resource->tensor = std::move(tensor);
  return resource;
}

}  // namespace

// {resource, backend, device, bytes allocated since the last collection}: everything Accel.Tensor
// needs about a new tensor in the one call that made it.
ERL_NIF_TERM make_tensor_resource(ErlNifEnv* env, Tensor tensor, uint64_t* since_gc) {
  // Borrowed memory (a binary's, shared) was allocated, and is collected, as the binary.
  const uint64_t bytes = tensor.buffer && !tensor.buffer->borrowed() ? tensor.buffer->bytes() : 0;
  *since_gc = g_bytes_since_gc.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  if (bytes != 0) note_maker(env);
  TensorResource* resource = new_resource(std::move(tensor));
  ERL_NIF_TERM term = enif_make_resource(env, resource);
  enif_release_resource(resource);  // the term owns it now
  return term;
}

ERL_NIF_TERM make_tensor(ErlNifEnv* env, Tensor tensor) {
  const ERL_NIF_TERM place[] = {runtime().atom_of(tensor.backend), enif_make_int(env, tensor.device)};
  uint64_t since_gc = 0;
  if (t_tensor_scope != nullptr && t_tensor_scope->take(tensor))
    return enif_make_tuple4(env, atoms.nil, place[0], place[1], enif_make_uint64(env, since_gc));
  const ERL_NIF_TERM term = make_tensor_resource(env, std::move(tensor), &since_gc);
  return enif_make_tuple4(env, term, place[0], place[1], enif_make_uint64(env, since_gc));
}

ERL_NIF_TERM make_view_binary(ErlNifEnv* env, const Tensor& tensor, const void* data, size_t bytes) {
  TensorResource* resource = new_resource(tensor);  // a reference to the buffer, which the binary keeps alive
  ERL_NIF_TERM term = enif_make_resource_binary(env, resource, data, bytes);
  enif_release_resource(resource);
  return term;
}

TensorResource* resource_of(ErlNifEnv* env, ERL_NIF_TERM term) {
  void* object = nullptr;
  return enif_get_resource(env, term, g_tensor_type, &object) ? static_cast<TensorResource*>(object) : nullptr;
}

// A copy of the tensor (sharing its buffer, which stays alive while this call uses it).
Tensor get_tensor(ErlNifEnv* env, ERL_NIF_TERM term) {
  if (t_tensor_scope != nullptr)
    if (const Tensor* held = t_tensor_scope->find(env, term)) return *held;
  TensorResource* r = resource_of(env, term);
  if (r == nullptr && enif_is_ref(env, term))
    throw ArgumentError("expected an Accel.Tensor, got a reference that names no tensor of this VM: " + describe_term(env, term) +
                        " (a tensor cannot be sent to another node: send Accel.Tensor.to_binary/1 and rebuild it there)");
  if (r == nullptr) throw ArgumentError("expected an Accel.Tensor, got: " + describe_term(env, term));
  std::lock_guard<std::mutex> lock(r->mutex);
  if (r->freed) throw ArgumentError("the tensor was freed with Accel.Tensor.free/1 and cannot be used");
  return r->tensor;
}

std::string atom_text(ErlNifEnv* env, ERL_NIF_TERM term) {
  char text[32];
  if (enif_get_atom(env, term, text, sizeof text, ERL_NIF_LATIN1) <= 0) return {};
  return text;
}

DType decode_type(ErlNifEnv* env, ERL_NIF_TERM term) {
  DType type;
  if (dtype_named(atom_text(env, term), &type)) return type;
  std::string names;
  for (int code = 0; code < kTypeCount; ++code) names += std::string(code ? ", :" : ":") + dtype_name(static_cast<DType>(code));
  throw ArgumentError("type must be one of " + names + ", got: " + describe_term(env, term));
}

uint64_t decode_count(ErlNifEnv* env, ERL_NIF_TERM term, const char* name) {
  const int64_t v = decode_int64_arg(env, term, name);
  if (v < 0) throw ArgumentError(std::string(name) + " must be non-negative, got: " + std::to_string(v));
  return static_cast<uint64_t>(v);
}

Backend* backend_named(Runtime& rt, const std::string& name) {
  if (name == "cpu") return rt.cpu.get();
  if (name == "opencl") return rt.opencl.get();
  if (name == "cuda") return rt.cuda.get();
  return nullptr;
}

// (backend atom, device index or -1 for the backend's default) -> where a new tensor goes.
Backend& decode_place(ErlNifEnv* env, ERL_NIF_TERM name, ERL_NIF_TERM device_term, int* device) {
  Runtime& rt = runtime();
  const int64_t index = decode_int64_arg(env, device_term, "device");
  const std::string text = atom_text(env, name);
  Backend* backend = backend_named(rt, text);
  *device = index < 0 ? 0 : static_cast<int>(index);
  if (text == "auto") {
    rt.resolve_auto();
    int auto_device = 0;
    backend = rt.auto_target(&auto_device);
    if (index < 0) *device = auto_device;
  }
  if (backend == nullptr) throw ArgumentError("unknown backend: " + describe_term(env, name));
  if (index != -1) rt.check_device(*backend, index);  // every caller has discovered the devices
  return *backend;
}

namespace {

// The registry's operation names as atoms, made once at load (open_tensor_resources).
ERL_NIF_TERM g_op_atoms[3][64];

void make_op_atoms(ErlNifEnv* env) {
  for (OpFamily family : {OpFamily::Unary, OpFamily::Binary, OpFamily::Compare})
    for (int code = 0; code < op_count(family); ++code)
      g_op_atoms[static_cast<int>(family)][code] = enif_make_atom(env, op_info(family, code).name);
}
static_assert(ACCEL_UNARY_COUNT <= 64 && ACCEL_BINARY_COUNT <= 64 && ACCEL_COMPARE_COUNT <= 64);

}  // namespace

int decode_op(ErlNifEnv* env, OpFamily family, ERL_NIF_TERM term) {
  for (int code = 0; code < op_count(family); ++code)
    if (enif_is_identical(term, g_op_atoms[static_cast<int>(family)][code])) return code;
  throw ArgumentError("unknown operation: " + describe_term(env, term));
}

namespace {
// A proper list of at most 64 elements, each decoded by `decode(env, element)`; `what` names the
// list in the error for anything else.
template <typename T, typename Decode>
std::vector<T> decode_list(ErlNifEnv* env, ERL_NIF_TERM term, const char* what, Decode decode) {
  unsigned length = 0;
  if (!enif_get_list_length(env, term, &length) || length > 64)
    throw ArgumentError(std::string("expected ") + what + ", got: " + describe_term(env, term));
  std::vector<T> out;
  out.reserve(length);
  ERL_NIF_TERM head, tail = term;
  while (enif_get_list_cell(env, tail, &head, &tail)) out.push_back(decode(env, head));
  return out;
}
}  // namespace

// A shape: a list of non-negative integers (at most 64 of them).
std::vector<uint64_t> decode_shape(ErlNifEnv* env, ERL_NIF_TERM term) {
  return decode_list<uint64_t>(env, term, "a shape (a list of at most 64 non-negative integers)",
                               [](ErlNifEnv* e, ERL_NIF_TERM t) { return decode_count(e, t, "a dimension"); });
}

// Strides: a list of signed 64-bit integers (at most 64 of them).
std::vector<int64_t> decode_strides(ErlNifEnv* env, ERL_NIF_TERM term) {
  return decode_list<int64_t>(env, term, "strides (a list of at most 64 integers)",
                              [](ErlNifEnv* e, ERL_NIF_TERM t) { return decode_int64_arg(e, t, "a stride"); });
}

// The element count of a shape term, saturated at `limit + 1` (a malformed shape counts as that:
// whatever runs it reports the error).
uint64_t shape_count_up_to(ErlNifEnv* env, ERL_NIF_TERM term, uint64_t limit) {
  uint64_t count = 1;
  ErlNifUInt64 dim = 0;
  ERL_NIF_TERM head, tail = term;
  while (count <= limit && enif_get_list_cell(env, tail, &head, &tail))
    count = enif_get_uint64(env, head, &dim) && dim <= limit ? count * dim : limit + 1;
  return enif_is_list(env, term) ? count : limit + 1;
}

// A tensor with its shape, or a number.
Operand decode_operand(ErlNifEnv* env, ERL_NIF_TERM term, ERL_NIF_TERM shape, Tensor* storage) {
  Operand o;
  const Tensor* held = t_tensor_scope != nullptr ? t_tensor_scope->find(env, term) : nullptr;
  if (held != nullptr || resource_of(env, term) != nullptr) {
    *storage = held != nullptr ? *held : get_tensor(env, term);
    o.tensor = storage;
    o.shape = decode_shape(env, shape);
    return o;
  }
  ErlNifSInt64 i;
  double f;
  if (enif_get_int64(env, term, &i)) {
    o.scalar.i = i;
  } else if (enif_get_double(env, term, &f)) {
    o.scalar.is_float = true;
    o.scalar.f = f;
  } else {
    throw ArgumentError("expected an Accel.Tensor or a number in the signed 64-bit range, got: " + describe_term(env, term));
  }
  return o;
}

bool open_tensor_resources(ErlNifEnv* env) {
  auto flags = static_cast<ErlNifResourceFlags>(ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER);
  g_tensor_type = enif_open_resource_type(env, nullptr, "accel_tensor", destroy_tensor, flags, nullptr);
  make_op_atoms(env);
  return g_tensor_type != nullptr;
}

namespace {
ERL_NIF_TERM free_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  TensorResource* r = resource_of(env, argv[0]);
  if (r == nullptr) throw ArgumentError("expected an Accel.Tensor, got: " + describe_term(env, argv[0]));
  std::shared_ptr<DeviceBuffer> released;
  bool already = false;
  {
    std::lock_guard<std::mutex> lock(r->mutex);
    already = r->freed;
    r->freed = true;
    released = std::move(r->tensor.buffer);
  }
  // `released` goes here, or with the last operation still using it.
  return already ? enif_make_atom(env, "already_freed") : atoms.ok;
}
}  // namespace

bool is_free_run(NifFn run) { return run == free_run; }

// (a call plan replays a free as it replays the call that made the tensor)
ERL_NIF_TERM tensor_free(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) { return run_inline(free_run, env, argc, argv); }

// (threshold bytes): once that many tensor bytes were allocated VM-wide since the last time, the
// processes that made tensors meanwhile (a list of pids, or the atom all when there were too many
// to list), and the count restarts; false before. The Elixir side then collects those processes'
// garbage, which is where dropped tensors wait: their size is invisible to the VM's own GC
// heuristics, and one process's threshold would let garbage grow with the number of processes.
ERL_NIF_TERM tensor_take_pressure(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  const uint64_t threshold = decode_count(env, argv[0], "threshold");
  uint64_t seen = g_bytes_since_gc.load(std::memory_order_relaxed);
  while (seen >= threshold) {
    if (g_bytes_since_gc.compare_exchange_weak(seen, 0, std::memory_order_relaxed)) {
      std::lock_guard<std::mutex> lock(g_makers_mutex);
      ERL_NIF_TERM makers = enif_make_list(env, 0);
      if (g_makers_overflow) {
        makers = enif_make_atom(env, "all");
      } else {
        for (const ErlNifPid& pid : g_makers) makers = enif_make_list_cell(env, pid_term(env, pid), makers);
      }
      g_makers.clear();
      g_makers_overflow = false;
      return makers;
    }
  }
  return atoms.false_;
}

}  // namespace accel::nif
