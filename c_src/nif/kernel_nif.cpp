// The NIFs behind Accel.Kernel: loading a generated kernel's CPU code (a shared object the Elixir
// side compiled and cached, lib/accel/kernel/native.ex) and running a generated kernel over
// tensors through the launch door (core/source_kernel.hpp). Every term is checked: the kernel's
// text comes from Accel's own lowering, but nothing here trusts its caller.
#include "nif/kernel_nif.hpp"

#include <dlfcn.h>

#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.hpp"
#include "core/source_kernel.hpp"
#include "nif/codecs.hpp"
#include "nif/tensor_scheduling.hpp"

namespace accel::nif {
namespace {

// A loaded shared object and its entry point. The library stays loaded while any launch holds
// `handle` (SourceKernel::library), even after the resource is collected.
struct LibraryResource {
  std::shared_ptr<void> handle;
  HostKernelEntry entry = nullptr;
};

ErlNifResourceType* g_library_type = nullptr;

void destroy_library(ErlNifEnv*, void* object) { static_cast<LibraryResource*>(object)->~LibraryResource(); }

std::string binary_text(ErlNifEnv* env, ERL_NIF_TERM term, const char* what) {
  ErlNifBinary bin;
  if (!enif_inspect_binary(env, term, &bin)) throw ArgumentError(std::string(what) + " must be a binary, got: " + describe_term(env, term));
  return std::string(reinterpret_cast<const char*>(bin.data), bin.size);
}

// {key, source, uses_f64, code, [input type], output type, scalar sizes, entry, flag} and
// optionally [input count] (each input's element count, where it is not the output's; nil: each
// has n), then the words of resumable state per element (SourceKernel::resume_words), the input
// the output may overwrite, and the launch's work (see launch_work); code is the CPU backend's
// loaded library resource, NVRTC's code (a binary) for :cuda, or nil for OpenCL; scalar sizes a
// binary of one byte (1, 2, 4 or 8) per scalar.
SourceKernel decode_kernel(ErlNifEnv* env, ERL_NIF_TERM term) {
  int arity = 0;
  const ERL_NIF_TERM* fields = nullptr;
  if (!enif_get_tuple(env, term, &arity, &fields) || arity < 9 || arity > 13)
    throw ArgumentError("expected a compiled kernel, got: " + describe_term(env, term));
  SourceKernel k;
  k.key = binary_text(env, fields[0], "a kernel's key");
  // The text is read where it is compiled, OpenCL's per device (no code given): a CPU or CUDA
  // launch of a fused Nx region would otherwise copy its ~40 KB text on every call.
  if (!enif_is_binary(env, fields[1])) throw ArgumentError("a kernel's source must be a binary, got: " + describe_term(env, fields[1]));
  if (enif_is_identical(fields[3], atoms.nil)) k.source = binary_text(env, fields[1], "a kernel's source");
  k.uses_f64 = enif_is_identical(fields[2], atoms.true_);
  if (enif_is_binary(env, fields[3])) {
    k.device_code = binary_text(env, fields[3], "a kernel's device code");
  } else if (!enif_is_identical(fields[3], atoms.nil)) {
    LibraryResource* lib = nullptr;
    if (!enif_get_resource(env, fields[3], g_library_type, reinterpret_cast<void**>(&lib)))
      throw ArgumentError("expected a loaded kernel library, got: " + describe_term(env, fields[3]));
    k.host = lib->entry;
    k.library = lib->handle;
  }
  ERL_NIF_TERM head, tail = fields[4];
  while (enif_get_list_cell(env, tail, &head, &tail)) {
    if (k.input_types.size() == 32) throw ArgumentError("a kernel takes at most 32 inputs");
    k.input_types.push_back(decode_type(env, head));
  }
  if (!enif_is_empty_list(env, tail)) throw ArgumentError("a kernel's input types must be a list");
  k.out_type = decode_type(env, fields[5]);
  for (char size : binary_text(env, fields[6], "a kernel's scalar sizes")) {
    if (size != 1 && size != 2 && size != 4 && size != 8) throw ArgumentError("a kernel's scalars are 1, 2, 4 or 8 bytes");
    k.scalar_sizes.push_back(static_cast<uint8_t>(size));
  }
  k.entry = binary_text(env, fields[7], "a kernel's name");
  if (k.entry.empty() || k.entry.find('\0') != std::string::npos) throw ArgumentError("a kernel's name must be a non-empty name without NUL bytes");
  k.flag = !enif_is_identical(fields[8], atoms.false_);
  if (arity >= 10 && !enif_is_identical(fields[9], atoms.nil)) {
    tail = fields[9];
    while (enif_get_list_cell(env, tail, &head, &tail)) {
      if (k.input_counts.size() == k.input_types.size()) throw ArgumentError("a kernel's input counts must match its inputs");
      k.input_counts.push_back(decode_count(env, head, "an input's count"));
    }
    if (!enif_is_empty_list(env, tail) || k.input_counts.size() != k.input_types.size())
      throw ArgumentError("a kernel's input counts must be a list with one count per input");
  }
  if (arity >= 11) {
    const uint64_t words = decode_count(env, fields[10], "a kernel's resumable words");
    if (words > kMaxResumeWords)
      throw ArgumentError("a kernel keeps at most " + std::to_string(kMaxResumeWords) + " words of state per element");
    if (words > 0 && !k.flag) throw ArgumentError("only generated kernels (with a flag) resume from saved state");
    k.resume_words = static_cast<uint32_t>(words);
  }
  if (arity >= 12 && !enif_is_identical(fields[11], atoms.nil)) {
    const uint64_t into = decode_count(env, fields[11], "the input a kernel's output may overwrite");
    if (into >= k.input_types.size())
      throw ArgumentError("a kernel's output may overwrite one of its " + std::to_string(k.input_types.size()) +
                          " inputs, not input " + std::to_string(into));
    k.out_into = static_cast<int32_t>(into);
  }
  // (the launch's work only decides where the call runs: tensor_source_kernel reads it)
  if (arity == 13 && !enif_is_identical(fields[12], atoms.nil)) decode_count(env, fields[12], "a kernel's work");
  return k;
}

// (path, entry): the shared object at `path`, loaded, with its entry named `entry` (accel_user,
// or accel_user_<i> in a library of several kernels: Accel.Kernel.Native.build_together/1).
ERL_NIF_TERM kernel_load_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  const std::string path = binary_text(env, argv[0], "the path");
  if (path.find('\0') != std::string::npos) throw ArgumentError("the path holds a NUL byte");
  const std::string name = binary_text(env, argv[1], "the entry");
  const std::string digits = name.size() > 11 ? name.substr(11) : "";
  if (name != "accel_user" && (name.rfind("accel_user_", 0) != 0 || digits.empty() || digits.size() > 6 ||
                               digits.find_first_not_of("0123456789") != std::string::npos))
    throw ArgumentError("the entry must be accel_user or accel_user_<digits>, got: " + describe_term(env, argv[1]));
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw Error("load_failed", "could not load the kernel library " + path + ": " + (why ? why : "unknown error"));
  }
  std::shared_ptr<void> owner(handle, [](void* h) { dlclose(h); });
  void* entry = dlsym(handle, name.c_str());
  if (entry == nullptr) throw Error("load_failed", "the kernel library " + path + " has no " + name + " entry");
  void* memory = enif_alloc_resource(g_library_type, sizeof(LibraryResource));
  if (memory == nullptr) throw std::bad_alloc();
  auto* lib = new (memory) LibraryResource();
  lib->handle = std::move(owner);
  lib->entry = reinterpret_cast<HostKernelEntry>(entry);
  ERL_NIF_TERM term = enif_make_resource(env, lib);
  enif_release_resource(lib);
  return term;
}

// (source, arch, entry) -> {code, target}: NVRTC's code for compute capability `arch` (90 for 9.0).
ERL_NIF_TERM cuda_kernel_code_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  const std::string source = binary_text(env, argv[0], "the kernel's source");
  const int64_t arch = decode_int64_arg(env, argv[1], "arch");
  const std::string entry = binary_text(env, argv[2], "the kernel's name");
  if (arch < 10 || arch > 10000) throw ArgumentError("arch must be a compute capability such as 90, got " + std::to_string(arch));
  const cuda::DeviceCode code = cuda::compile_kernel_text(source, static_cast<int>(arch), entry);
  ERL_NIF_TERM bytes;
  unsigned char* data = enif_make_new_binary(env, code.bytes.size(), &bytes);
  if (data == nullptr) throw std::bad_alloc();
  std::memcpy(data, code.bytes.data(), code.bytes.size());
  return enif_make_tuple2(env, bytes, make_string(env, code.target));
}

}  // namespace

std::vector<uint64_t> decode_slots(ErlNifEnv* env, ERL_NIF_TERM term) {
  ErlNifBinary bin;
  if (!enif_inspect_binary(env, term, &bin) || bin.size % 8 != 0)
    throw ArgumentError("scalars must be a binary of 8-byte slots, got: " + describe_term(env, term));
  std::vector<uint64_t> slots(bin.size / 8);
  if (!slots.empty()) std::memcpy(slots.data(), bin.data, bin.size);
  return slots;
}

SourceLaunch launch_placed(const SourceKernel& kernel, Backend& backend, int device, const std::vector<const Tensor*>& inputs,
                           uint64_t n, const std::vector<uint64_t>& scalars, const Cancellation* cancel) {
  if (backend.waits_on_device() == false && kernel.host == nullptr)
    throw ArgumentError("this kernel was not compiled for the CPU backend");
  return tensor_source_kernel(kernel, backend, device, inputs, n, scalars, cancel);
}

namespace {

// (kernel, inputs, n, scalars, backend, device, ref) -> {tensor, flagged}. The place is
// the inputs' (all on one device); backend and device place a kernel without inputs.
ERL_NIF_TERM launch_decoded(ErlNifEnv* env, const SourceKernel& kernel, const ERL_NIF_TERM argv[]) {
  std::vector<Tensor> inputs;
  ERL_NIF_TERM head, tail = argv[1];
  while (enif_get_list_cell(env, tail, &head, &tail)) {
    if (inputs.size() == 32) throw ArgumentError("a kernel takes at most 32 inputs");
    inputs.push_back(get_tensor(env, head));
  }
  if (!enif_is_empty_list(env, tail)) throw ArgumentError("inputs must be a list of tensors");
  const uint64_t n = decode_count(env, argv[2], "n");
  const std::vector<uint64_t> scalars = decode_slots(env, argv[3]);
  int device = 0;
  Backend* backend = nullptr;
  if (inputs.empty()) {
    backend = &decode_place(env, argv[4], argv[5], &device);
  } else {
    backend = inputs[0].backend;
    device = inputs[0].device;
  }
  const Cancellation cancel = caller_cancellation(env);
  std::vector<const Tensor*> pointers;
  for (const Tensor& t : inputs) pointers.push_back(&t);
  SourceLaunch launched = launch_placed(kernel, *backend, device, pointers, n, scalars, &cancel);
  return enif_make_tuple2(env, make_tensor(env, std::move(launched.out)), launched.flagged ? atoms.true_ : atoms.false_);
}

ERL_NIF_TERM source_kernel_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  return launch_decoded(env, decode_kernel(env, argv[0]), argv);
}

// (kernel, binaries, n, scalars, backend, device, ref) -> {binary, flagged}: a generated kernel
// over binaries of n elements each, streamed through a device (Backend::map_source).
ERL_NIF_TERM map_source_run(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  const SourceKernel kernel = decode_kernel(env, argv[0]);
  const uint64_t n = decode_count(env, argv[2], "n");
  std::vector<const unsigned char*> inputs;
  ERL_NIF_TERM head, tail = argv[1];
  while (enif_get_list_cell(env, tail, &head, &tail)) {
    const size_t k = inputs.size();
    if (k == kernel.input_types.size())
      throw ArgumentError("this kernel takes " + std::to_string(kernel.input_types.size()) + " input(s), got more");
    ErlNifBinary bin;
    if (!enif_inspect_binary(env, head, &bin))
      throw ArgumentError("input " + std::to_string(k) + " must be a binary, got: " + describe_term(env, head));
    const size_t width = dtype_size(kernel.input_types[k]);
    if (bin.size / width != n || bin.size % width != 0)
      throw ArgumentError("input " + std::to_string(k) + " has " + std::to_string(bin.size) + " bytes, not " +
                          std::to_string(n) + " elements of :" + dtype_name(kernel.input_types[k]));
    inputs.push_back(bin.data);
  }
  if (!enif_is_empty_list(env, tail)) throw ArgumentError("inputs must be a list of binaries");
  const std::vector<uint64_t> scalars = decode_slots(env, argv[3]);
  int device = 0;
  Backend& backend = decode_place(env, argv[4], argv[5], &device);
  if (!backend.waits_on_device()) throw ArgumentError("kernels stream over host memory to devices only");
  const size_t out_bytes = dtype_size(kernel.out_type);
  if (n > SIZE_MAX / out_bytes) throw Error("out_of_memory", "a result of " + std::to_string(n) + " elements");
  check_binary_output(n * out_bytes);
  unsigned char* out = nullptr;
  const ERL_NIF_TERM result = make_output_binary(env, n * out_bytes, &out);
  const Cancellation cancel = caller_cancellation(env);
  CallOptions options;
  options.device = device;
  options.cancel = &cancel;
  const bool flagged = backend.map_source(kernel, inputs, n, scalars, out, options);
  return enif_make_tuple2(env, result, flagged ? atoms.true_ : atoms.false_);
}

}  // namespace

bool open_kernel_resources(ErlNifEnv* env) {
  auto flags = static_cast<ErlNifResourceFlags>(ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER);
  g_library_type = enif_open_resource_type(env, nullptr, "accel_kernel_library", destroy_library, flags, nullptr);
  return g_library_type != nullptr;
}

ERL_NIF_TERM kernel_load(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) { return kernel_load_run(env, argc, argv); }

ERL_NIF_TERM cuda_kernel_compiler(ErlNifEnv* env, int, const ERL_NIF_TERM[]) {
  return make_string(env, cuda::kernel_compiler_version());
}

// NVRTC takes ~0.1-1 s: always on a dirty CPU scheduler (the function table says so).
ERL_NIF_TERM cuda_kernel_code(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  return cuda_kernel_code_run(env, argc, argv);
}

// The work a kernel term says its launch does (the 13th field: its element operations over the
// whole launch, which Accel.Nx.Compiler gives its fused kernels, whose loops are rows of their
// inputs), or false where it does not say (a kernel that may loop).
bool launch_work(ErlNifEnv* env, ERL_NIF_TERM kernel, uint64_t* work) {
  int arity = 0;
  const ERL_NIF_TERM* fields = nullptr;
  ErlNifUInt64 w = 0;
  if (!enif_get_tuple(env, kernel, &arity, &fields) || arity != 13 || !enif_get_uint64(env, fields[12], &w)) return false;
  *work = w;
  return true;
}

bool is_source_kernel_run(NifFn run) { return run == source_kernel_run; }

std::shared_ptr<const SourceKernel> decode_source_kernel(ErlNifEnv* env, ERL_NIF_TERM term) {
  return std::make_shared<const SourceKernel>(decode_kernel(env, term));
}

ERL_NIF_TERM source_kernel_with(ErlNifEnv* env, const SourceKernel& kernel, const ERL_NIF_TERM argv[]) {
  return launch_decoded(env, kernel, argv);
}

// A generated kernel's cost per element is unknown unless its term says (it may loop): on the CPU
// such a kernel runs on a dirty CPU scheduler, one whose work is known and small inline; on a
// device it is queued there like every tensor operation.
ERL_NIF_TERM tensor_source_kernel(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  if (!enif_is_empty_list(env, argv[1])) {
    uint64_t work = 0;
    if (launch_work(env, argv[0], &work)) return scheduled_by_work<source_kernel_run, 1>(env, argc, argv, work);
    return scheduled<source_kernel_run, 1, true>(env, argc, argv);
  }
  Runtime& rt = runtime();
  if (!rt.auto_resolved) return schedule_dirty_io(env, "kernel", guarded<after_discovery<tensor_source_kernel>>, argc, argv);
  int device = 0;
  Backend& backend = decode_place(env, argv[4], argv[5], &device);
  if (backend.waits_on_device()) return submit_now(env, rt.queue(backend, device), source_kernel_run, argc, argv);
  return schedule_dirty_cpu(env, "kernel", recorded_dirty<source_kernel_run>, argc, argv);
}

// Queued on the device's own thread like every device call (after discovery, once per VM).
ERL_NIF_TERM map_source(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  Runtime& rt = runtime();
  if (!rt.auto_resolved) return schedule_dirty_io(env, "kernel", guarded<after_discovery<map_source>>, argc, argv);
  int device = 0;
  Backend& backend = decode_place(env, argv[4], argv[5], &device);
  if (!backend.waits_on_device()) return map_source_run(env, argc, argv);  // raises the precise error
  return submit_now(env, rt.queue(backend, device), map_source_run, argc, argv);
}

}  // namespace accel::nif
