// Where a tensor NIF runs its work: on the device's queue (device_jobs.hpp) when the tensor is on
// a device, inline for small CPU work, on a dirty CPU scheduler otherwise. Shared by the tensor
// NIFs (tensor_nif.cpp) and the generated kernels' NIFs (kernel_nif.cpp).
#pragma once

#include <erl_nif.h>

#include <algorithm>
#include <mutex>
#include <string>

#include "core/backend.hpp"
#include "nif/call_plans.hpp"
#include "nif/device_jobs.hpp"
#include "nif/nif_util.hpp"
#include "nif/runtime.hpp"
#include "nif/tensor_terms.hpp"

namespace accel::nif {

constexpr size_t kInlineTensorElements = 16384;  // ~10-50 us for the slowest elementwise kernel

// Decides from the tensors in argv[Arg .. Arg + 2] (an elementwise operation's operands; any may be
// a scalar; a list counts by its first element, for concatenate): on a device, queued there; on
// the CPU backend inline where small(count) says so for the largest one's size (a broadcast output
// is at least as large as that), on a dirty CPU scheduler otherwise.
template <NifFn Run, int Arg, typename Small>
ERL_NIF_TERM scheduled_if(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[], Small small) {
  Backend* backend = nullptr;
  int device = 0;
  size_t count = 0;
  bool freed = false;
  for (int i = Arg; i < argc && i <= Arg + 2; ++i) {
    ERL_NIF_TERM term = argv[i], tail;
    if (enif_is_list(env, term) && !enif_get_list_cell(env, term, &term, &tail)) continue;
    TensorResource* r = resource_of(env, term);
    if (r == nullptr) continue;
    std::lock_guard<std::mutex> lock(r->mutex);
    freed = freed || r->freed;
    backend = r->tensor.backend;
    device = r->tensor.device;
    count = std::max(count, r->tensor.count);
  }
  // Run raises the precise error (not a tensor, or freed) and takes the locks itself: call it here,
  // with none held.
  if (backend == nullptr || freed) return Run(env, argc, argv);
  // A device tensor exists, so its devices were discovered when it was made.
  if (backend->waits_on_device()) return submit_now(env, runtime().queue(*backend, device), Run, argc, argv);
  if (small(count)) return run_inline(Run, env, argc, argv);
  return schedule_dirty_cpu(env, "tensor", recorded_dirty<Run>, argc, argv);
}

// Inline up to kInlineTensorElements (never, where AlwaysDirty: work whose cost the size does not
// bound).
template <NifFn Run, int Arg, bool AlwaysDirty>
ERL_NIF_TERM scheduled(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  return scheduled_if<Run, Arg>(env, argc, argv, [](size_t count) { return !AlwaysDirty && count <= kInlineTensorElements; });
}

// Inline where `work`, the call's operations (a product's multiply-adds, a generated kernel's
// element operations), is at most kInlineWork: a scheduler hands a call to a dirty one and back in
// tens of microseconds on a busy VM, more than a small product or a small fused kernel takes. Its
// tensors must be as small (a work figure that understates them is not believed).
constexpr uint64_t kInlineWork = uint64_t{1} << 17;
template <NifFn Run, int Arg>
ERL_NIF_TERM scheduled_by_work(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[], uint64_t work) {
  return scheduled_if<Run, Arg>(env, argc, argv, [work](size_t count) { return work <= kInlineWork && count <= kInlineWork; });
}

// A new tensor on a device: queued there (a CPU placement, from :auto, runs here).
template <NifFn Run, int Place>
ERL_NIF_TERM submit_new(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  int device = 0;
  Backend& backend = decode_place(env, argv[Place], argv[Place + 1], &device);
  if (!backend.waits_on_device()) return run_inline(Run, env, argc, argv);
  return submit_now(env, runtime().queue(backend, device), Run, argc, argv);
}

// For new tensors: by the backend atom in argv[Place] and the element count.
template <NifFn Run, int Place>
ERL_NIF_TERM scheduled_new(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[], size_t count) {
  const std::string name = atom_text(env, argv[Place]);
  Runtime& rt = runtime();
  int auto_device = 0;
  const bool cpu = name == "cpu" || (name == "auto" && rt.auto_resolved && rt.auto_target(&auto_device) == rt.cpu.get());
  if (!cpu) {
    if (!rt.auto_resolved) return schedule_dirty_io(env, "tensor", guarded<after_discovery<submit_new<Run, Place>>>, argc, argv);
    return submit_new<Run, Place>(env, argc, argv);
  }
  if (count <= kInlineTensorElements) return run_inline(Run, env, argc, argv);
  return schedule_dirty_cpu(env, "tensor", recorded_dirty<Run>, argc, argv);
}

}  // namespace accel::nif
