// The NIF table: thin functions that decode terms, call core/ and the backends, and encode results.
// Scheduling is decided here, before anything large is decoded: calls that wait on a device are
// submitted to the device's queue (device_jobs.hpp) and no scheduler waits for them; small CPU
// calls run on the calling (normal) scheduler; every other CPU call is rescheduled onto a dirty CPU
// scheduler, where it computes (the CPU backend's own threads work beside it; it does not wait).
#include <erl_nif.h>

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cuda/cuda_backend.hpp"
#include "backends/opencl/opencl_backend.hpp"
#include "core/logistic_map.hpp"
#include "nif/call_plans.hpp"
#include "nif/codecs.hpp"
#include "nif/small_ints.hpp"
#include "nif/device_jobs.hpp"
#include "nif/kernel_nif.hpp"
#include "nif/nif_util.hpp"
#include "nif/runtime.hpp"
#include "nif/tensor_nif.hpp"
#include "nif/tensor_terms.hpp"

namespace accel::nif {
namespace {

// A call runs inline when it converts at most kInlineListElements elements (codecs.hpp) and its
// compute costs at most kInlineCost units (logistic_map_cost): a few hundred microseconds on any
// path, measured on the slowest one. Everything else goes to a dirty scheduler.
constexpr uint64_t kInlineCost = 400000;

bool runs_inline(size_t elements, uint64_t cost) { return elements <= kInlineListElements && cost <= kInlineCost; }

struct Target {
  Backend* backend = nullptr;  // nullptr: :auto, not resolved yet
  CallOptions options;
};

// (backend, device, chunk_size) arguments: device -1 picks the backend's default device.
Target select_target(ErlNifEnv* env, ERL_NIF_TERM name, ERL_NIF_TERM device, ERL_NIF_TERM chunk) {
  Runtime& rt = runtime();
  Target t;
  const int64_t index = decode_int64_arg(env, device, "device");
  const int64_t chunk_size = decode_int64_arg(env, chunk, "chunk_size");
  if (index < -1 || index > INT32_MAX) throw ArgumentError("no device " + std::to_string(index) + " (see Accel.devices/0)");
  if (chunk_size < 0) throw ArgumentError("chunk_size must be a positive integer, got: " + std::to_string(chunk_size));
  t.options.device = index < 0 ? 0 : static_cast<int>(index);
  t.options.chunk_elements = static_cast<size_t>(chunk_size);
  if (enif_is_identical(name, atoms.cpu)) {
    t.backend = rt.cpu.get();
  } else if (enif_is_identical(name, atoms.opencl)) {
    t.backend = rt.opencl.get();
  } else if (enif_is_identical(name, atoms.auto_)) {
    if (rt.auto_resolved) {
      int auto_device = 0;
      t.backend = rt.auto_target(&auto_device);
      if (index < 0) t.options.device = auto_device;
    }
  } else if (enif_is_identical(name, atoms.cuda)) {
    t.backend = rt.cuda.get();
  } else {
    throw ArgumentError("unknown backend: " + describe_term(env, name));
  }
  return t;
}

// The target once devices are discovered, its device checked against the backend's devices.
Target resolved_target(ErlNifEnv* env, const ERL_NIF_TERM argv[]) {
  Target t = select_target(env, argv[5], argv[6], argv[7]);
  if (t.backend == nullptr) {
    runtime().resolve_auto();
    t = select_target(env, argv[5], argv[6], argv[7]);
  }
  runtime().check_device(*t.backend, t.options.device);
  return t;
}

bool wants_list(ErlNifEnv* env, ERL_NIF_TERM as) {
  if (enif_is_identical(as, atoms.list)) return true;
  if (enif_is_identical(as, atoms.binary)) return false;
  throw ArgumentError("as must be :list or :binary, got: " + describe_term(env, as));
}

// ---- logistic map: (input, p, mu, iterations, as, backend, device, chunk_size, ref) ----

ERL_NIF_TERM logistic_map_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  const LogisticMapPlan plan = plan_logistic_map(decode_int64_arg(env, argv[1], "p"), decode_int64_arg(env, argv[2], "mu"),
                                                 decode_int64_arg(env, argv[3], "iterations"));
  const bool as_list = wants_list(env, argv[4]);
  Target target = resolved_target(env, argv);
  Backend& backend = *target.backend;
  // A call stops early when its caller dies (see core/cancel.hpp).
  const Cancellation cancel = caller_cancellation(env);
  target.options.cancel = &cancel;
  Int64Input in = decode_int64_input(env, argv[0]);
  const size_t n = in.source.count;

  if (!as_list) {
    if (in.kind == InputKind::List) {
      // A decoded list is transformed in place and becomes the result: one fresh buffer, not two.
      backend.logistic_map(in.source, in.storage.data(), plan, target.options);
      return make_owned_binary(env, std::move(in.storage), n * 8);
    }
    unsigned char* out;
    ERL_NIF_TERM result = make_output_binary(env, n * 8, &out);
    backend.logistic_map(in.source, out, plan, target.options);
    return result;
  }
  check_list_output(n);
  // A decoded list is transformed in place; other inputs get a scratch buffer.
  HostBuffer buffer = in.kind == InputKind::List ? std::move(in.storage) : HostBuffer(n * 8);
  backend.logistic_map(in.source, buffer.data(), plan, target.options);
  return encode_int64_list(env, buffer, n);
}

// A device call: a place in the device's queue first, then the input decoded (here, on the calling
// scheduler or a dirty CPU one), then the job. The job always returns a binary: a list result is
// built by Accel.logistic_map/2 afterwards (int64_list/1), on a dirty CPU scheduler, rather than
// on the device's thread, which has the next device call to run.
ERL_NIF_TERM logistic_map_submit(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  const Target target = resolved_target(env, argv);
  JobQueue& queue = runtime().queue(*target.backend, target.options.device);
  JobQueue::Ticket ticket = reserve_place(env, queue, argv[argc - 1]);
  if (!ticket) return atoms.accel_busy;
  ERL_NIF_TERM args[9];
  std::copy(argv, argv + argc, args);
  if (enif_is_list(env, argv[0])) {
    Int64Input in = decode_int64_input(env, argv[0]);
    args[0] = make_owned_binary(env, std::move(in.storage), in.source.count * 8);
  } else if (wants_list(env, argv[4])) {  // the list asked for is refused as the CPU backend refuses it
    check_list_output(decode_int64_input(env, argv[0]).source.count);
  }
  args[4] = atoms.binary;
  return submit(env, std::move(ticket), queue, logistic_map_run, argc, args);
}

ERL_NIF_TERM logistic_map(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  ErlNifSInt64 p, mu, iterations;
  if (!enif_get_int64(env, argv[1], &p) || !enif_get_int64(env, argv[2], &mu) || !enif_get_int64(env, argv[3], &iterations) ||
      p < 1 || iterations < 0)
    return logistic_map_run(env, argc, argv);  // raises the precise error
  const Target target = select_target(env, argv[5], argv[6], argv[7]);
  // Device discovery, once per VM, may take a while: on a dirty IO scheduler.
  if (target.backend == nullptr || (target.backend->waits_on_device() && !runtime().auto_resolved))
    return schedule_dirty_io(env, "logistic_map", guarded<after_discovery<logistic_map>>, argc, argv);
  const size_t n = count_int64_input(env, argv[0], kInlineListElements);
  if (target.backend->waits_on_device()) {
    if (enif_is_list(env, argv[0]) && n > kInlineListElements)
      return schedule_dirty_cpu(env, "logistic_map", guarded<logistic_map_submit>, argc, argv);
    return logistic_map_submit(env, argc, argv);
  }
  if (runs_inline(n, logistic_map_cost(n, plan_logistic_map(p, mu, iterations)))) return logistic_map_run(env, argc, argv);
  return schedule_dirty_cpu(env, "logistic_map", guarded<logistic_map_run>, argc, argv);
}

// ---- crossing costs: the same conversions as logistic_map, with no compute ----

ERL_NIF_TERM noop(ErlNifEnv*, int, const ERL_NIF_TERM[]) { return atoms.ok; }

// Whether lists of small integers are read without a call per element here (nif/small_ints.hpp).
ERL_NIF_TERM fast_list_reader(ErlNifEnv* env, int, const ERL_NIF_TERM[]) {
  return enif_make_atom(env, small_int_layout_checked() ? "true" : "false");
}

ERL_NIF_TERM list_round_trip_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  if (!enif_is_list(env, argv[0])) throw ArgumentError("expected a list of integers, got: " + describe_term(env, argv[0]));
  Int64Input in = decode_int64_input(env, argv[0]);
  const size_t n = in.source.count;
  check_list_output(n);
  return encode_int64_list(env, in.storage, n);
}

// (count): a list of `count` zeros, made the cheapest way a NIF can return a list (one term array,
// one enif_make_list_from_array): the floor under every list a NIF returns.
ERL_NIF_TERM zeros_list_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  ErlNifUInt64 n = 0;
  if (!enif_get_uint64(env, argv[0], &n)) throw ArgumentError("count must be a non-negative integer, got: " + describe_term(env, argv[0]));
  check_list_output(static_cast<size_t>(n));
  HostBuffer terms(static_cast<size_t>(n) * sizeof(ERL_NIF_TERM));
  auto* cells = reinterpret_cast<ERL_NIF_TERM*>(terms.data());
  std::fill(cells, cells + n, enif_make_int64(env, 0));
  return enif_make_list_from_array(env, cells, static_cast<unsigned>(n));
}

ERL_NIF_TERM zeros_list(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  ErlNifUInt64 n = 0;
  if (enif_get_uint64(env, argv[0], &n) && runs_inline(static_cast<size_t>(n), static_cast<size_t>(n)))
    return zeros_list_run(env, argc, argv);
  return schedule_dirty_cpu(env, "crossing", guarded<zeros_list_run>, argc, argv);
}

ERL_NIF_TERM range_to_list_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  Int64Input in = decode_int64_input(env, argv[0]);
  if (in.kind != InputKind::Range) throw ArgumentError("expected a Range, got: " + describe_term(env, argv[0]));
  const size_t n = in.source.count;
  check_list_output(n);
  HostBuffer buffer(n * 8);
  for (size_t i = 0; i < n; ++i) store_i64(buffer.data() + i * 8, in.source.at(i));
  return encode_int64_list(env, buffer, n);
}

ERL_NIF_TERM binary_round_trip_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  if (!enif_is_binary(env, argv[0])) throw ArgumentError("expected a binary, got: " + describe_term(env, argv[0]));
  Int64Input in = decode_int64_input(env, argv[0]);
  unsigned char* out;
  ERL_NIF_TERM result = make_output_binary(env, in.source.count * 8, &out);
  if (in.source.count != 0) std::memcpy(out, in.source.bytes, in.source.count * 8);
  return result;
}

// ---- int64 lists <-> binaries: a device result as a list, and a list decoded once up front ----

ERL_NIF_TERM int64_list_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  if (!enif_is_binary(env, argv[0])) throw ArgumentError("expected a binary, got: " + describe_term(env, argv[0]));
  const Int64Input in = decode_int64_input(env, argv[0]);
  const size_t n = in.source.count;
  check_list_output(n);
  HostBuffer scratch(n * 8);  // encode_int64_list writes terms over its integers
  if (n != 0) std::memcpy(scratch.data(), in.source.bytes, n * 8);
  return encode_int64_list(env, scratch, n);
}

ERL_NIF_TERM int64_binary_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  if (!enif_is_list(env, argv[0])) throw ArgumentError("expected a list of integers, got: " + describe_term(env, argv[0]));
  Int64Input in = decode_int64_input(env, argv[0]);
  return make_owned_binary(env, std::move(in.storage), in.source.count * 8);
}

// (binary or range, as) -> its element count, once the input and the output it asks for have been
// checked as logistic_map checks them: for splitting one call over several devices.
ERL_NIF_TERM int64_output_count(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  if (enif_is_list(env, argv[0])) throw ArgumentError("expected a binary or a Range (decode lists with int64_binary/1)");
  const Int64Input in = decode_int64_input(env, argv[0]);
  if (wants_list(env, argv[1]))
    check_list_output(in.source.count);
  else
    check_binary_output(in.source.count * 8);
  return enif_make_uint64(env, in.source.count);
}

// binary -> whether it lies in one of Accel's host mappings, which GPU transfers pin (the binaries
// Accel makes of 2 MiB and more): for the placement model, whose upload cost differs.
ERL_NIF_TERM host_owned(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  ErlNifBinary bin;
  if (!enif_inspect_binary(env, argv[0], &bin)) throw ArgumentError("expected a binary, got: " + describe_term(env, argv[0]));
  return enif_make_atom(env, bin.size > 0 && HostBuffer::owns(bin.data, bin.size) ? "true" : "false");
}

template <NifFn Run>
ERL_NIF_TERM sized_by_input(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  const size_t n = count_int64_input(env, argv[0], kInlineListElements);
  if (runs_inline(n, n)) return Run(env, argc, argv);
  return schedule_dirty_cpu(env, "crossing", guarded<Run>, argc, argv);
}

// ---- introspection ----

ERL_NIF_TERM status_tuple(ErlNifEnv* env, const BackendStatus& s) {
  return enif_make_tuple4(env, enif_make_atom(env, s.name.c_str()), s.compiled ? atoms.true_ : atoms.false_,
                          s.available ? atoms.true_ : atoms.false_, make_string(env, s.detail));
}

// These run on dirty IO (see nif_funcs): the first may wait for device discovery.
ERL_NIF_TERM backends(ErlNifEnv* env, int, const ERL_NIF_TERM[]) {
  Runtime& rt = runtime();
  ERL_NIF_TERM list = enif_make_list(env, 0);
  for (size_t i = 3; i-- > 0;) list = enif_make_list_cell(env, status_tuple(env, rt.all[i]->status()), list);
  return list;
}

// `backend`'s devices, prepended to `list` back to front (so they read in its order).
ERL_NIF_TERM prepend_devices(ErlNifEnv* env, Backend* backend, ERL_NIF_TERM list) {
  const auto found = backend->devices();
  for (auto it = found.rbegin(); it != found.rend(); ++it) {
    ERL_NIF_TERM fields[] = {enif_make_atom(env, it->backend.c_str()),
                             enif_make_int(env, it->index),
                             make_string(env, it->platform),
                             make_string(env, it->name),
                             enif_make_atom(env, it->type.c_str()),
                             enif_make_uint64(env, it->memory),
                             enif_make_uint64(env, it->max_alloc),
                             enif_make_uint(env, it->compute_units),
                             it->capability.empty() ? atoms.nil : make_string(env, it->capability)};
    list = enif_make_list_cell(env, enif_make_tuple_from_array(env, fields, 9), list);
  }
  return list;
}

ERL_NIF_TERM devices(ErlNifEnv* env, int, const ERL_NIF_TERM[]) {
  Runtime& rt = runtime();
  ERL_NIF_TERM list = enif_make_list(env, 0);
  // Built back to front: CUDA devices first, then OpenCL, then the host.
  for (Backend* backend : rt.all) list = prepend_devices(env, backend, list);
  return list;
}

// One backend's devices: only that backend is discovered (the CPU backend's instruction set,
// asked where a kernel is built for it, need not wait for an OpenCL or CUDA runtime to start).
ERL_NIF_TERM backend_devices(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  Runtime& rt = runtime();
  for (Backend* backend : rt.all)
    if (enif_is_identical(argv[0], rt.atom_of(backend))) return prepend_devices(env, backend, enif_make_list(env, 0));
  throw ArgumentError("unknown backend: " + describe_term(env, argv[0]) + " (one of :cpu, :opencl, :cuda)");
}

ERL_NIF_TERM host_memory(ErlNifEnv* env, int, const ERL_NIF_TERM[]) {
  return enif_make_tuple2(env, enif_make_int64(env, HostBuffer::live_bytes()), enif_make_int64(env, HostBuffer::cached_bytes()));
}

ERL_NIF_TERM trim_host_cache(ErlNifEnv*, int, const ERL_NIF_TERM[]) {
  HostBuffer::trim_cache();
  return atoms.ok;
}

ERL_NIF_TERM auto_device(ErlNifEnv* env, int, const ERL_NIF_TERM[]) {
  Runtime& rt = runtime();
  rt.resolve_auto();
  int device = 0;
  Backend* backend = rt.auto_target(&device);
  return enif_make_tuple2(env, enif_make_atom(env, rt.name_of(backend)), enif_make_int(env, device));
}

// [{backend, device, places in use, limit}] for every device queue made so far.
ERL_NIF_TERM device_queues(ErlNifEnv* env, int, const ERL_NIF_TERM[]) {
  Runtime& rt = runtime();
  ERL_NIF_TERM list = enif_make_list(env, 0);
  for (const Runtime::QueueState& q : rt.queue_states()) {
    list = enif_make_list_cell(env,
                               enif_make_tuple4(env, enif_make_atom(env, rt.name_of(q.backend)), enif_make_int(env, q.device),
                                                enif_make_uint64(env, q.in_use), enif_make_uint64(env, q.capacity)),
                               list);
  }
  return list;
}

// ---- load / upgrade / unload ----

Runtime* g_runtime = nullptr;  // see runtime.hpp: made by the first load, never destroyed
std::mutex g_runtime_mutex;

// Keeps this library mapped until the OS process exits. ERTS closes a NIF library once its module
// is purged and its resources are gone, but the runtime's threads (the CPU pool, the device queues)
// still run its code then: an extra reference that is never dropped keeps that code in place.
void pin_library() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&pin_library), &info) != 0 && info.dli_fname != nullptr)
    dlopen(info.dli_fname, RTLD_NOW | RTLD_NODELETE);  // the handle is deliberately never closed
}

// load_info: {cpu threads (0: one per hardware thread), the priv directory (plugins live there),
// device queue limit, staged transfers (auto, always or never)}, validated by Accel.Config before
// load_nif. Returns 0, or 2 when the runtime could not start (Accel.NIF.load/0 turns that into a
// message).
int load(ErlNifEnv* env, void** priv, ERL_NIF_TERM load_info) {
  make_atoms(env);
  if (!open_codec_resources(env) || !open_tensor_resources(env) || !open_kernel_resources(env) ||
      !open_call_plan_resources(env))
    return 1;
  std::lock_guard<std::mutex> lock(g_runtime_mutex);
  if (g_runtime == nullptr) {  // the first load; a reload or upgrade shares the same runtime
    unsigned threads = 0, queue_limit = 64;
    char priv_dir[4096] = ".";
    int arity = 0;
    const ERL_NIF_TERM* info = nullptr;
    char staging[8] = "";
    if (!enif_get_tuple(env, load_info, &arity, &info) || arity != 4 || !enif_get_uint(env, info[0], &threads) ||
        enif_get_string(env, info[1], priv_dir, sizeof priv_dir, ERL_NIF_LATIN1) <= 0 ||
        !enif_get_uint(env, info[2], &queue_limit) || queue_limit == 0 ||
        enif_get_atom(env, info[3], staging, sizeof staging, ERL_NIF_LATIN1) <= 0)
      return 3;
    const std::string mode = staging;
    if (mode != "auto" && mode != "always" && mode != "never") return 3;
    try {
      auto rt = std::make_unique<Runtime>();
      rt->cpu = std::make_unique<cpu::CpuBackend>(threads);
      rt->opencl = opencl::load_backend(priv_dir);  // device backends discover on first use, not here
      rt->cuda = cuda::make_backend();
      for (Backend* device_backend : {rt->opencl.get(), rt->cuda.get()})
        device_backend->set_staging(mode == "always"  ? StagingMode::always
                                    : mode == "never" ? StagingMode::never
                                                      : StagingMode::automatic);
      rt->all[0] = rt->cpu.get();
      rt->all[1] = rt->opencl.get();
      rt->all[2] = rt->cuda.get();
      rt->queue_limit = queue_limit;
      g_runtime = rt.release();
    } catch (...) {
      return 2;
    }
    pin_library();
  }
  *priv = g_runtime;
  return 0;
}

int upgrade(ErlNifEnv* env, void** priv, void**, ERL_NIF_TERM load_info) { return load(env, priv, load_info); }

// The runtime stays: tensors and result binaries made by this instance may still be in use.
void unload(ErlNifEnv*, void*) { HostBuffer::trim_cache(); }

ErlNifFunc nif_funcs[] = {
    {"logistic_map", 9, guarded<logistic_map>, 0},
    {"int64_list", 1, guarded<sized_by_input<int64_list_run>>, 0},
    {"int64_binary", 1, guarded<sized_by_input<int64_binary_run>>, 0},
    {"int64_output_count", 2, guarded<int64_output_count>, 0},
    {"host_owned", 1, guarded<host_owned>, 0},
    {"backends", 0, guarded<backends>, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"devices", 0, guarded<devices>, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"devices", 1, guarded<backend_devices>, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"auto_device", 0, guarded<auto_device>, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"host_memory", 0, guarded<host_memory>, 0},
    {"device_queues", 0, guarded<device_queues>, 0},
    {"trim_host_cache", 0, guarded<trim_host_cache>, 0},
    {"noop", 0, noop, 0},
    {"fast_list_reader", 0, fast_list_reader, 0},
    {"noop_dirty_cpu", 0, noop, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    {"noop_dirty_io", 0, noop, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"list_round_trip", 1, guarded<sized_by_input<list_round_trip_run>>, 0},
    {"range_to_list", 1, guarded<sized_by_input<range_to_list_run>>, 0},
    {"zeros_list", 1, guarded<zeros_list>, 0},
    {"binary_round_trip", 1, guarded<sized_by_input<binary_round_trip_run>>, 0},
    {"tensor_upload", 5, guarded<tensor_upload>, 0},
    {"tensor_iota", 5, guarded<tensor_iota>, 0},
    {"tensor_download", 3, guarded<tensor_download>, 0},
    {"tensor_free", 1, guarded<tensor_free>, 0},
    {"tensor_cast", 3, guarded<tensor_cast>, 0},
    {"tensor_reinterpret", 2, guarded<tensor_reinterpret>, 0},
    {"tensor_binary", 6, guarded<tensor_binary>, 0},
    {"tensor_compare", 6, guarded<tensor_compare>, 0},
    {"tensor_select", 7, guarded<tensor_select>, 0},
    {"tensor_unary", 3, guarded<tensor_unary>, 0},
    {"tensor_complex", 6, guarded<tensor_complex>, 0},
    {"tensor_complex_abs", 2, guarded<tensor_complex_abs>, 0},
    {"tensor_complex_fn", 4, guarded<tensor_complex_fn>, 0},
    {"tensor_slice", 6, guarded<tensor_slice>, 0},
    {"tensor_view", 5, guarded<tensor_view>, 0},
    {"tensor_put_view", 8, guarded<tensor_put_view>, 0},
    {"tensor_concatenate", 4, guarded<tensor_concatenate>, 0},
    {"tensor_reduce", 6, guarded<tensor_reduce>, 0},
    {"tensor_transpose", 4, guarded<tensor_transpose>, 0},
    {"tensor_matmul", 8, guarded<tensor_matmul>, 0},
    {"tensor_conv_shifted", 7, guarded<tensor_conv_shifted>, 0},
    {"tensor_gather", 8, guarded<tensor_gather>, 0},
    {"tensor_scatter", 11, guarded<tensor_scatter>, 0},
    {"tensor_window", 5, guarded<tensor_window>, 0},
    {"tensor_sort", 6, guarded<tensor_sort>, 0},
    {"tensor_scan", 7, guarded<tensor_scan>, 0},
    {"tensor_decompose", 5, guarded<tensor_decompose>, 0},
    {"tensor_solve", 5, guarded<tensor_solve>, 0},
    {"tensor_fft", 6, guarded<tensor_fft>, 0},
    {"tensor_window_scatter", 6, guarded<tensor_window_scatter>, 0},
    {"tensor_logistic_map", 5, guarded<tensor_logistic_map>, 0},
    {"tensor_transfer", 4, guarded<tensor_transfer>, 0},
    {"tensor_memory", 2, guarded<tensor_memory>, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"fenced_devices", 0, guarded<fenced_devices>, 0},
    {"simulate_device_fault", 3, guarded<simulate_device_fault>, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"tensor_take_pressure", 1, guarded<tensor_take_pressure, false>, 0},
    {"tensor_list_bytes", 2, guarded<tensor_list_bytes>, 0},
    {"tensor_nested_list", 3, guarded<tensor_nested_list>, 0},
    {"kernel_load", 2, guarded<kernel_load>, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"plan_cell", 0, guarded<plan_cell>, 0},
    {"plan_record_start", 1, guarded<plan_record_start>, 0},
    {"plan_record_finish", 5, guarded<plan_record_finish>, 0},
    {"plan_record_stop", 1, guarded<plan_record_stop>, 0},
    {"plan_replay", 3, guarded<plan_replay>, 0},
    {"tensor_source_kernel", 7, guarded<tensor_source_kernel>, 0},
    {"map_source", 7, guarded<map_source>, 0},
    {"cuda_kernel_compiler", 0, guarded<cuda_kernel_compiler>, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"cuda_kernel_code", 3, guarded<cuda_kernel_code>, ERL_NIF_DIRTY_JOB_CPU_BOUND},
};

}  // namespace

Runtime* runtime_or_null() { return g_runtime; }

}  // namespace accel::nif

ERL_NIF_INIT(Elixir.Accel.NIF, accel::nif::nif_funcs, accel::nif::load, nullptr, accel::nif::upgrade, accel::nif::unload)
