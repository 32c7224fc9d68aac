// Call plans (call_plans.hpp): recording a process's inline tensor NIF calls, and replaying them.
#include "nif/call_plans.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/source_kernel.hpp"
#include "nif/device_jobs.hpp"
#include "nif/kernel_nif.hpp"
#include "nif/runtime.hpp"
#include "nif/tensor_nif.hpp"
#include "nif/tensor_terms.hpp"

namespace accel::nif {

std::atomic<int> g_recording_processes{0};

namespace {

constexpr size_t kMaxRecordedCalls = 4096;
constexpr int kRecordAttempts = 3;                // calls recorded before a function is given up on
constexpr double kInlineReplaySeconds = 0.0005;  // longer replays run on a dirty CPU scheduler

// How a replay passes a recorded argument: copied into the call's environment, rebuilt with the
// call's tensors in the marked places, or as it is (an atom or a small integer: an immediate, the
// same word in every environment).
enum class ArgKind : uint8_t { copy, marked, immediate };

// An atom, a small integer (below 2^59 in magnitude, so never a bignum) or []: the term is its word.
bool immediate(ErlNifEnv* env, ERL_NIF_TERM term) {
  ErlNifSInt64 v = 0;
  return enif_is_atom(env, term) || enif_is_empty_list(env, term) ||
         (enif_get_int64(env, term, &v) && v > -(ErlNifSInt64{1} << 59) && v < (ErlNifSInt64{1} << 59));
}

// How a replay runs a recorded call: through its NIF body over terms, or (a generated kernel's
// launch over tensors, a free) on the tensors it holds, with no terms.
enum class StepKind : uint8_t { nif, launch, drop };

// One recorded call, its terms in the plan's environment; an argument that holds tensors has them
// replaced by {marker, slot}.
struct PlanCall {
  NifFn run = nullptr;
  std::vector<ERL_NIF_TERM> args;
  std::vector<ArgKind> kinds;
  ERL_NIF_TERM result = 0;                                 // as recorded, for the replay's check
  bool made = false;  // the result is a made tensor, {tensor, backend, device, count}: checked at once
  std::vector<std::pair<size_t, std::vector<int>>> yields;  // slot <- the tensor at this path
  std::shared_ptr<const SourceKernel> kernel;  // a generated kernel's launch: its kernel decoded once
  // launch: the kernel over the tensors of `inputs` (n and the scalars decoded once) into slot
  // `out`, not flagged (as recorded); drop: the tensor of inputs[0] freed.
  StepKind kind = StepKind::nif;
  bool scoped = false;  // a NIF body whose result is one made tensor: run in the replay's scope
  std::vector<size_t> inputs;
  uint64_t n = 0;
  std::vector<uint64_t> scalars;
  size_t out = 0;
};

struct CallPlan {
  ErlNifEnv* env = nullptr;  // owns every term below (and so the external tensors)
  ERL_NIF_TERM marker = 0, signature = 0, meta = 0;
  size_t params = 0, slots = 0;
  std::vector<std::pair<size_t, ERL_NIF_TERM>> externals;  // tensors from outside the call
  std::vector<PlanCall> calls;
  std::vector<size_t> outputs;
  bool inline_replay = true;
  ~CallPlan() {
    if (env != nullptr) enif_free_env(env);
  }
};

struct PlanCell {
  std::mutex mutex;
  std::shared_ptr<const CallPlan> plan;
  int calls = 0, attempts = 0;  // calls seen (0 or 1), recordings asked for
};

struct RecordedCall {
  NifFn run;
  std::vector<ERL_NIF_TERM> args;
  ERL_NIF_TERM result;
};

struct Recording {
  ErlNifPid pid{};
  ErlNifEnv* env = nullptr;
  PlanCell* cell = nullptr;  // kept (enif_keep_resource) while the recording lives
  std::vector<RecordedCall> calls;
  uint64_t seen = 0;  // NIF calls the process made while recording (this one's finish included)
  bool spoiled = false;
  double seconds = 0;
};

ErlNifResourceType* g_cell_type = nullptr;
ErlNifResourceType* g_recording_type = nullptr;

std::mutex g_registry_mutex;
std::vector<Recording*> g_registry;  // the recordings under way (a handful at most)

void unregister(Recording* r) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  auto it = std::find(g_registry.begin(), g_registry.end(), r);
  if (it == g_registry.end()) return;
  g_registry.erase(it);
  g_recording_processes.store(static_cast<int>(g_registry.size()), std::memory_order_relaxed);
}

// The recording of `pid`, if any; call with g_registry_mutex held.
Recording* registered(const ErlNifPid& pid) {
  for (Recording* r : g_registry)
    if (enif_compare_pids(&r->pid, &pid) == 0) return r;
  return nullptr;
}

Recording* recording_of(ErlNifEnv* env) {
  ErlNifPid self;
  if (enif_self(env, &self) == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  return registered(self);
}

void destroy_cell(ErlNifEnv*, void* object) { static_cast<PlanCell*>(object)->~PlanCell(); }

void destroy_recording(ErlNifEnv*, void* object) {
  auto* r = static_cast<Recording*>(object);
  unregister(r);
  if (r->env != nullptr) enif_free_env(r->env);
  if (r->cell != nullptr) enif_release_resource(r->cell);
  r->~Recording();
}

PlanCell* cell_of(ErlNifEnv* env, ERL_NIF_TERM term) {
  void* object = nullptr;
  if (!enif_get_resource(env, term, g_cell_type, &object)) throw ArgumentError("expected a plan cell, got: " + describe_term(env, term));
  return static_cast<PlanCell*>(object);
}

Recording* recording_arg(ErlNifEnv* env, ERL_NIF_TERM term) {
  void* object = nullptr;
  if (!enif_get_resource(env, term, g_recording_type, &object))
    throw ArgumentError("expected a plan recording, got: " + describe_term(env, term));
  return static_cast<Recording*>(object);
}

std::vector<ERL_NIF_TERM> list_items(ErlNifEnv* env, ERL_NIF_TERM list, const char* what) {
  std::vector<ERL_NIF_TERM> items;
  unsigned n = 0;
  if (!enif_get_list_length(env, list, &n) || n > kMaxRecordedCalls * 4) throw ArgumentError(std::string(what) + " must be a list");
  items.reserve(n);
  ERL_NIF_TERM head, tail = list;
  while (enif_get_list_cell(env, tail, &head, &tail)) items.push_back(head);
  return items;
}

// ---- building a plan from a recording ----

// Reads a recording's terms (in `from`) and writes the plan's (in the plan's environment, `to`):
// only what a replay reads, so the recorded call's tensors are not kept alive by the plan (but
// for externals, which it needs).
struct Builder {
  ErlNifEnv* from;
  ErlNifEnv* to;
  CallPlan* plan;
  std::unordered_map<const TensorResource*, size_t> slot_of;

  size_t new_slot() { return plan->slots++; }

  // An argument, copied with each tensor replaced by {marker, slot} (a tensor no call made and no
  // parameter is an external: the plan keeps it); *marked where it held one.
  ERL_NIF_TERM argument(ERL_NIF_TERM term, bool* marked) {
    return rebuild(term, [&](const TensorResource* r, ERL_NIF_TERM tensor) {
      auto it = slot_of.find(r);
      size_t slot;
      if (it != slot_of.end()) {
        slot = it->second;
      } else {
        slot = new_slot();
        slot_of.emplace(r, slot);
        plan->externals.emplace_back(slot, enif_make_copy(to, tensor));
      }
      *marked = true;
      return enif_make_tuple2(to, plan->marker, enif_make_uint64(to, slot));
    });
  }

  // A call's result, copied with each tensor replaced by the marker (what a replay checks), each
  // tensor a new slot (at its path in the result); *host where it holds a binary: data read back to
  // the host, which no plan replays.
  ERL_NIF_TERM outcome(ERL_NIF_TERM term, PlanCall& call, bool* host) {
    std::vector<int> path;
    return outcome_at(term, path, call, host);
  }

 private:
  ERL_NIF_TERM outcome_at(ERL_NIF_TERM term, std::vector<int>& path, PlanCall& call, bool* host) {
    if (const TensorResource* r = resource_of(from, term)) {
      const size_t slot = new_slot();
      slot_of[r] = slot;
      call.yields.emplace_back(slot, path);
      return plan->marker;
    }
    if (enif_is_binary(from, term)) *host = true;
    int arity = 0;
    const ERL_NIF_TERM* items = nullptr;
    if (enif_get_tuple(from, term, &arity, &items)) {
      std::vector<ERL_NIF_TERM> out(static_cast<size_t>(arity));
      for (int i = 0; i < arity; ++i) {
        path.push_back(i);
        out[static_cast<size_t>(i)] = outcome_at(items[i], path, call, host);
        path.pop_back();
      }
      return enif_make_tuple_from_array(to, out.data(), static_cast<unsigned>(arity));
    }
    unsigned length = 0;
    if (enif_get_list_length(from, term, &length) && length > 0) {
      std::vector<ERL_NIF_TERM> out = list_items(from, term, "a result");
      for (size_t i = 0; i < out.size(); ++i) {
        path.push_back(static_cast<int>(i));
        out[i] = outcome_at(out[i], path, call, host);
        path.pop_back();
      }
      return enif_make_list_from_array(to, out.data(), static_cast<unsigned>(out.size()));
    }
    return enif_make_copy(to, term);
  }

  template <typename OnTensor>
  ERL_NIF_TERM rebuild(ERL_NIF_TERM term, OnTensor on_tensor) {
    if (const TensorResource* r = resource_of(from, term)) return on_tensor(r, term);
    int arity = 0;
    const ERL_NIF_TERM* items = nullptr;
    if (enif_get_tuple(from, term, &arity, &items)) {
      std::vector<ERL_NIF_TERM> out(static_cast<size_t>(arity));
      for (int i = 0; i < arity; ++i) out[static_cast<size_t>(i)] = rebuild(items[i], on_tensor);
      return enif_make_tuple_from_array(to, out.data(), static_cast<unsigned>(arity));
    }
    unsigned length = 0;
    if (enif_get_list_length(from, term, &length) && length > 0) {
      std::vector<ERL_NIF_TERM> out = list_items(from, term, "an argument");
      for (auto& item : out) item = rebuild(item, on_tensor);
      return enif_make_list_from_array(to, out.data(), static_cast<unsigned>(out.size()));
    }
    return enif_make_copy(to, term);
  }
};

// The slot of a marked term ({marker, slot}, in `env`), or false.
bool marked_slot(ErlNifEnv* env, ERL_NIF_TERM marker, ERL_NIF_TERM term, size_t* slot) {
  int arity = 0;
  const ERL_NIF_TERM* items = nullptr;
  ErlNifUInt64 v = 0;
  if (!enif_get_tuple(env, term, &arity, &items) || arity != 2 || !enif_is_identical(items[0], marker) ||
      !enif_get_uint64(env, items[1], &v))
    return false;
  *slot = static_cast<size_t>(v);
  return true;
}

bool marked_slot(const CallPlan& plan, ERL_NIF_TERM term, size_t* slot) { return marked_slot(plan.env, plan.marker, term, slot); }

// How a replay runs a built call. A NIF body whose result is one made tensor runs in the replay's
// scope (scoped: its tensor arguments and result need no terms). A generated kernel's launch over
// tensors of the plan (at least one: they place it) whose recorded result is one tensor, unflagged
// ({tensor, false}), is a launch step; a free of a tensor of the plan that freed it (ok), a drop
// step. Any other stays a NIF call over terms.
void type_step(const CallPlan& plan, PlanCall& call) {
  int arity = 0;
  const ERL_NIF_TERM* items = nullptr;
  size_t slot = 0;
  if (call.made && !call.kernel && call.yields.size() == 1 && call.yields[0].second == std::vector<int>{0}) {
    call.scoped = true;
    return;
  }
  if (is_free_run(call.run)) {
    if (call.args.size() == 1 && marked_slot(plan, call.args[0], &slot) && enif_is_identical(call.result, atoms.ok)) {
      call.inputs = {slot};
      call.kind = StepKind::drop;
    }
    return;
  }
  if (!call.kernel || call.args.size() < 4 || call.yields.size() != 1 || call.yields[0].second != std::vector<int>{0, 0} ||
      !enif_get_tuple(plan.env, call.result, &arity, &items) || arity != 2 ||
      !enif_is_identical(items[1], atoms.false_))
    return;
  std::vector<size_t> inputs;
  ERL_NIF_TERM head, tail = call.args[1];
  while (enif_get_list_cell(plan.env, tail, &head, &tail)) {
    if (!marked_slot(plan, head, &slot)) return;
    inputs.push_back(slot);
  }
  ErlNifUInt64 n = 0;
  ErlNifBinary scalars;
  if (inputs.empty() || !enif_is_empty_list(plan.env, tail) || !enif_get_uint64(plan.env, call.args[2], &n) ||
      !enif_inspect_binary(plan.env, call.args[3], &scalars) || scalars.size % 8 != 0)
    return;
  call.scalars = decode_slots(plan.env, call.args[3]);
  call.inputs = std::move(inputs);
  call.n = n;
  call.out = call.yields[0].first;
  call.kind = StepKind::launch;
}

// ---- replaying ----

ERL_NIF_TERM at_path(ErlNifEnv* env, ERL_NIF_TERM term, const std::vector<int>& path) {
  for (int index : path) {
    int arity = 0;
    const ERL_NIF_TERM* items = nullptr;
    if (enif_get_tuple(env, term, &arity, &items)) {
      if (index >= arity) throw Error("internal", "a replayed result lost its shape");
      term = items[index];
      continue;
    }
    ERL_NIF_TERM head, tail = term;
    for (int i = 0;; ++i) {
      if (!enif_get_list_cell(env, tail, &head, &tail)) throw Error("internal", "a replayed result lost its shape");
      if (i == index) break;
    }
    term = head;
  }
  return term;
}

// A replay's values: each slot a term, a tensor, or both. A tensor made within the replay (by a
// launch step, or a NIF body run in the replay's scope) has a resource and a term only once an
// output or a body outside the scope needs one: most are made, read and freed within the replay
// as tensors alone. A term read as a tensor is decoded once.
struct Slots final : TensorScope {
  ErlNifEnv* env;
  ERL_NIF_TERM marker;  // the plan's, in env: {marker, slot} passes a slot's tensor to a body
  std::vector<ERL_NIF_TERM> terms;  // 0: none
  std::vector<Tensor> tensors;
  std::vector<char> held;  // tensors[slot] is the slot's tensor
  ErlNifUInt64 since_gc = 0;
  Tensor made;  // what a body in the scope made (takes: how many times it made one)
  int takes = 0;

  Slots(ErlNifEnv* e, const CallPlan& plan)
      : env(e), marker(enif_make_copy(e, plan.marker)), terms(plan.slots, 0), tensors(plan.slots), held(plan.slots, 0) {}

  const Tensor* find(ErlNifEnv* e, ERL_NIF_TERM term) override {
    size_t slot = 0;
    if (!marked_slot(e, marker, term, &slot) || slot >= held.size() || !held[slot]) return nullptr;
    return &tensors[slot];
  }

  bool take(Tensor& tensor) override {
    if (takes++ > 0) return false;  // (a second tensor: a resource, and the replay mismatches)
    made = std::move(tensor);
    return true;
  }

  // The slot's value is `tensor`, with no term yet (a launch's result, a scoped body's).
  void hold(size_t slot, Tensor tensor) {
    tensors[slot] = std::move(tensor);
    held[slot] = 1;
    terms[slot] = 0;
  }

  // A marked argument: in the scope, a tensor's own term where it has no resource's.
  ERL_NIF_TERM pass(size_t slot, bool scoped) {
    if (scoped && terms[slot] == 0 && held[slot]) return enif_make_tuple2(env, marker, enif_make_uint64(env, slot));
    return term(slot);
  }

  // The slot's term, made from its tensor where it has none yet.
  ERL_NIF_TERM term(size_t slot) {
    if (terms[slot] == 0 && held[slot]) {
      uint64_t count = 0;
      terms[slot] = make_tensor_resource(env, tensors[slot], &count);
      since_gc = std::max<ErlNifUInt64>(since_gc, count);
    }
    return terms[slot];
  }

  // The slot's tensor (ArgumentError where its term is no live tensor, as the NIF bodies raise).
  const Tensor& tensor(size_t slot) {
    if (!held[slot]) {
      if (terms[slot] == 0) throw ArgumentError("a replayed tensor was freed");
      tensors[slot] = get_tensor(env, terms[slot]);
      held[slot] = 1;
    }
    return tensors[slot];
  }
};

// The recorded term (in the plan's environment) in `env`, with {marker, slot} read from `slots`.
ERL_NIF_TERM substitute(ErlNifEnv* env, const CallPlan& plan, ERL_NIF_TERM term, Slots& slots, bool scoped) {
  int arity = 0;
  const ERL_NIF_TERM* items = nullptr;
  size_t slot = 0;
  if (marked_slot(plan, term, &slot)) return slots.pass(slot, scoped);
  if (enif_get_tuple(plan.env, term, &arity, &items)) {
    std::vector<ERL_NIF_TERM> out(arity);
    for (int i = 0; i < arity; ++i) out[i] = substitute(env, plan, items[i], slots, scoped);
    return enif_make_tuple_from_array(env, out.data(), static_cast<unsigned>(arity));
  }
  unsigned length = 0;
  if (enif_get_list_length(plan.env, term, &length) && length > 0) {
    std::vector<ERL_NIF_TERM> out;
    out.reserve(length);
    ERL_NIF_TERM head, tail = term;
    while (enif_get_list_cell(plan.env, tail, &head, &tail)) out.push_back(substitute(env, plan, head, slots, scoped));
    return enif_make_list_from_array(env, out.data(), length);
  }
  return enif_make_copy(env, term);
}

bool is_tensor_term(ErlNifEnv* env, ERL_NIF_TERM term) { return resource_of(env, term) != nullptr; }

// True where `actual` (a replayed call's result) is the recorded one (its copy in the plan, each
// tensor there the marker) but for its tensors and the bytes-since-collection count of each made
// tensor ({tensor, backend, device, count}), whose largest is kept in *since_gc.
bool same_outcome(ErlNifEnv* env, const CallPlan& plan, ERL_NIF_TERM recorded, ERL_NIF_TERM actual, ErlNifUInt64* since_gc) {
  if (enif_is_identical(recorded, plan.marker)) return is_tensor_term(env, actual);
  int arity = 0, actual_arity = 0;
  const ERL_NIF_TERM *items = nullptr, *actual_items = nullptr;
  if (enif_get_tuple(plan.env, recorded, &arity, &items)) {
    if (!enif_get_tuple(env, actual, &actual_arity, &actual_items) || arity != actual_arity) return false;
    const bool made = arity == 4 && enif_is_identical(items[0], plan.marker);
    for (int i = 0; i < arity; ++i) {
      if (made && i == 3) {
        ErlNifUInt64 count = 0;
        if (!enif_get_uint64(env, actual_items[i], &count)) return false;
        *since_gc = std::max(*since_gc, count);
        continue;
      }
      if (!same_outcome(env, plan, items[i], actual_items[i], since_gc)) return false;
    }
    return true;
  }
  unsigned length = 0, actual_length = 0;
  if (enif_get_list_length(plan.env, recorded, &length) && length > 0) {
    if (!enif_get_list_length(env, actual, &actual_length) || length != actual_length) return false;
    ERL_NIF_TERM head, tail = recorded, actual_head, actual_tail = actual;
    while (enif_get_list_cell(plan.env, tail, &head, &tail) && enif_get_list_cell(env, actual_tail, &actual_head, &actual_tail))
      if (!same_outcome(env, plan, head, actual_head, since_gc)) return false;
    return true;
  }
  return enif_compare(recorded, actual) == 0;
}

// same_outcome for the commonest result, a made tensor ({tensor, backend, device, count}): the
// same place (the tensor itself is what make_tensor puts first).
bool made_tensor(ErlNifEnv* env, const CallPlan& plan, ERL_NIF_TERM recorded, ERL_NIF_TERM actual, ErlNifUInt64* since_gc) {
  int arity = 0, actual_arity = 0;
  const ERL_NIF_TERM *items = nullptr, *actual_items = nullptr;
  ErlNifUInt64 count = 0;
  if (!enif_get_tuple(plan.env, recorded, &arity, &items) || !enif_get_tuple(env, actual, &actual_arity, &actual_items) ||
      actual_arity != 4 || !enif_is_identical(items[1], actual_items[1]) || !enif_is_identical(items[2], actual_items[2]) ||
      !enif_get_uint64(env, actual_items[3], &count))
    return false;
  *since_gc = std::max(*since_gc, count);
  return true;
}

// Sets the thread's tensor scope (get_tensor's, make_tensor's) for one body, and clears it.
struct ScopeGuard {
  explicit ScopeGuard(TensorScope* scope) { t_tensor_scope = scope; }
  ~ScopeGuard() { t_tensor_scope = nullptr; }
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;
};

// A launch step: the kernel over the slots' tensors, its result a tensor of the slots; false where
// it raised its flag (the recorded launch did not: the caller's own run raises what it raises).
// (The inputs by pointer into the slots, which hold them through the launch: a copy of a tensor
// takes a share of its buffer, an atomic increment and a decrement for every input of every step.)
bool launch_step(const PlanCall& call, Slots& slots, std::vector<const Tensor*>& inputs, const Cancellation& cancel) {
  inputs.clear();
  for (size_t slot : call.inputs) inputs.push_back(&slots.tensor(slot));
  SourceLaunch launched = launch_placed(*call.kernel, *inputs[0]->backend, inputs[0]->device, inputs, call.n, call.scalars, &cancel);
  if (launched.flagged) return false;
  slots.hold(call.out, std::move(launched.out));
  return true;
}

// A drop step: a tensor only the replay holds is let go (its memory back to the backend's caches);
// one with a term is freed through it, as recorded.
bool drop_step(const PlanCall& call, Slots& slots) {
  const size_t slot = call.inputs[0];
  const bool term = slots.terms[slot] != 0;
  if (!term && !slots.held[slot]) return false;  // (freed twice: not what was recorded)
  if (term && !enif_is_identical(call.run(slots.env, 1, &slots.terms[slot]), atoms.ok)) return false;
  slots.tensors[slot] = Tensor{};
  slots.held[slot] = 0;
  return true;
}

// The plan over the call's parameters: {outputs, since_gc, meta}, or mismatch.
ERL_NIF_TERM replay(ErlNifEnv* env, const CallPlan& plan, const std::vector<ERL_NIF_TERM>& params) {
  Slots slots(env, plan);
  for (size_t i = 0; i < params.size(); ++i) {
    if (!is_tensor_term(env, params[i])) return atoms.mismatch;
    slots.terms[i] = params[i];
  }
  for (const auto& [slot, term] : plan.externals) slots.terms[slot] = enif_make_copy(env, term);
  ErlNifUInt64& since_gc = slots.since_gc;
  const Cancellation cancel = caller_cancellation(env);
  std::vector<const Tensor*> inputs;
  std::vector<ERL_NIF_TERM> argv;
  for (const PlanCall& call : plan.calls) {
    // (a long replay, on a dirty scheduler, stops between steps once its caller is gone)
    if (!plan.inline_replay && cancel.cancelled()) return atoms.mismatch;
    if (call.kind != StepKind::nif) {
      try {
        if (!(call.kind == StepKind::launch ? launch_step(call, slots, inputs, cancel) : drop_step(call, slots)))
          return atoms.mismatch;
      } catch (...) {
        return atoms.mismatch;
      }
      continue;
    }
    argv.resize(call.args.size());
    // (a decoded kernel's term is not read: not copied either)
    if (call.kernel) argv[0] = atoms.nil;
    for (size_t i = call.kernel ? 1 : 0; i < call.args.size(); ++i) {
      switch (call.kinds[i]) {
        case ArgKind::immediate: argv[i] = call.args[i]; break;
        case ArgKind::marked: argv[i] = substitute(env, plan, call.args[i], slots, call.scoped); break;
        case ArgKind::copy: argv[i] = enif_make_copy(env, call.args[i]); break;
      }
    }
    ERL_NIF_TERM result;
    slots.takes = 0;
    try {
      const ScopeGuard scope(call.scoped ? &slots : nullptr);
      result = call.kernel ? source_kernel_with(env, *call.kernel, argv.data())
                           : call.run(env, static_cast<int>(argv.size()), argv.data());
    } catch (...) {
      return atoms.mismatch;  // (the caller's own run raises what it raises)
    }
    if (call.scoped) {
      // (one tensor made, and given back where the recording had it)
      int arity = 0;
      const ERL_NIF_TERM* items = nullptr;
      if (slots.takes != 1 || !enif_get_tuple(env, result, &arity, &items) || arity < 1 || !enif_is_identical(items[0], atoms.nil) ||
          !made_tensor(env, plan, call.result, result, &since_gc))
        return atoms.mismatch;
      slots.hold(call.yields[0].first, std::move(slots.made));
      continue;
    }
    if (call.made ? !made_tensor(env, plan, call.result, result, &since_gc) : !same_outcome(env, plan, call.result, result, &since_gc))
      return atoms.mismatch;
    for (const auto& [slot, path] : call.yields) {
      slots.terms[slot] = at_path(env, result, path);
      slots.held[slot] = 0;
    }
  }
  std::vector<ERL_NIF_TERM> outputs;
  outputs.reserve(plan.outputs.size());
  for (size_t slot : plan.outputs) outputs.push_back(slots.term(slot));
  return enif_make_tuple3(env, enif_make_list_from_array(env, outputs.data(), static_cast<unsigned>(outputs.size())),
                          enif_make_uint64(env, since_gc), enif_make_copy(env, plan.meta));
}

std::shared_ptr<const CallPlan> plan_in(PlanCell* cell) {
  std::lock_guard<std::mutex> lock(cell->mutex);
  return cell->plan;
}

// (cell, params, signature), on a dirty CPU scheduler: a replay too long for this one.
ERL_NIF_TERM replay_dirty(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  std::shared_ptr<const CallPlan> plan = plan_in(cell_of(env, argv[0]));
  return replay(env, *plan, list_items(env, argv[1], "params"));
}

}  // namespace

void count_call_while_recording(ErlNifEnv* env) noexcept {
  ErlNifPid self;
  if (enif_self(env, &self) == nullptr) return;
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  if (Recording* r = registered(self)) ++r->seen;
}

bool open_call_plan_resources(ErlNifEnv* env) {
  const auto flags = static_cast<ErlNifResourceFlags>(ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER);
  g_cell_type = enif_open_resource_type(env, nullptr, "accel_plan_cell", destroy_cell, flags, nullptr);
  g_recording_type = enif_open_resource_type(env, nullptr, "accel_plan_recording", destroy_recording, flags, nullptr);
  return g_cell_type != nullptr && g_recording_type != nullptr;
}

ERL_NIF_TERM run_inline(NifFn run, ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  if (g_recording_processes.load(std::memory_order_relaxed) == 0) return run(env, argc, argv);
  Recording* r = recording_of(env);
  if (r == nullptr) return run(env, argc, argv);
  const auto start = std::chrono::steady_clock::now();
  const ERL_NIF_TERM result = run(env, argc, argv);  // (a throw leaves the call unrecorded: spoiled)
  r->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (r->spoiled || r->calls.size() >= kMaxRecordedCalls) {
    r->spoiled = true;
    return result;
  }
  RecordedCall call{run, std::vector<ERL_NIF_TERM>(static_cast<size_t>(argc)), enif_make_copy(r->env, result)};
  for (int i = 0; i < argc; ++i) call.args[static_cast<size_t>(i)] = enif_make_copy(r->env, argv[i]);
  r->calls.push_back(std::move(call));
  return result;
}

ERL_NIF_TERM plan_cell(ErlNifEnv* env, int, const ERL_NIF_TERM[]) {
  void* memory = enif_alloc_resource(g_cell_type, sizeof(PlanCell));
  if (memory == nullptr) throw std::bad_alloc();
  auto* cell = new (memory) PlanCell();
  ERL_NIF_TERM term = enif_make_resource(env, cell);
  enif_release_resource(cell);
  return term;
}

ERL_NIF_TERM plan_record_start(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  PlanCell* cell = cell_of(env, argv[0]);
  ErlNifPid self;
  if (enif_self(env, &self) == nullptr) throw ArgumentError("only a process can record a plan");
  if (recording_of(env) != nullptr) return atoms.false_;  // (one recording at a time per process)
  void* memory = enif_alloc_resource(g_recording_type, sizeof(Recording));
  if (memory == nullptr) throw std::bad_alloc();
  auto* r = new (memory) Recording();
  ERL_NIF_TERM term = enif_make_resource(env, r);
  enif_release_resource(r);  // the term owns it; its destructor unregisters it
  r->pid = self;
  r->env = enif_alloc_env();
  if (r->env == nullptr) throw std::bad_alloc();
  enif_keep_resource(cell);
  r->cell = cell;
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  g_registry.push_back(r);
  g_recording_processes.store(static_cast<int>(g_registry.size()), std::memory_order_relaxed);
  return term;
}

ERL_NIF_TERM plan_record_stop(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  unregister(recording_arg(env, argv[0]));
  return atoms.ok;
}

ERL_NIF_TERM plan_record_finish(ErlNifEnv* env, int, const ERL_NIF_TERM argv[]) {
  Recording* r = recording_arg(env, argv[0]);
  unregister(r);
  const std::vector<ERL_NIF_TERM> params = list_items(env, argv[1], "params");
  const std::vector<ERL_NIF_TERM> outputs = list_items(env, argv[2], "outputs");
  auto refuse = [env](const char* why) { return enif_make_tuple2(env, atoms.false_, make_string(env, why)); };
  // (this call was counted too)
  if (r->spoiled || r->seen != r->calls.size() + 1 || r->env == nullptr)
    return refuse("the call made work other than inline tensor operations on the CPU");
  if (r->calls.empty()) return refuse("the call made no tensor operation");

  auto plan = std::make_shared<CallPlan>();
  plan->env = enif_alloc_env();
  if (plan->env == nullptr) throw std::bad_alloc();
  ErlNifEnv* penv = plan->env;
  plan->marker = enif_make_ref(penv);
  plan->signature = enif_make_copy(penv, argv[3]);
  plan->meta = enif_make_copy(penv, argv[4]);
  plan->inline_replay = r->seconds < kInlineReplaySeconds;
  Builder b{r->env, penv, plan.get(), {}};

  for (ERL_NIF_TERM p : params) {
    const TensorResource* res = resource_of(env, p);
    if (res == nullptr) return refuse("a parameter is not a tensor");
    if (!b.slot_of.emplace(res, b.new_slot()).second) return refuse("one tensor is two parameters");
  }
  plan->params = params.size();
  // (a recorded term no replay could rebuild refuses the plan, never the caller's call)
  try {
    for (const RecordedCall& recorded : r->calls) {
      PlanCall call;
      call.run = recorded.run;
      if (is_source_kernel_run(recorded.run) && !recorded.args.empty()) call.kernel = decode_source_kernel(r->env, recorded.args[0]);
      for (size_t i = 0; i < recorded.args.size(); ++i) {
        bool marked = false;
        // (a decoded kernel's term is never read again)
        call.args.push_back(i == 0 && call.kernel ? atoms.nil : b.argument(recorded.args[i], &marked));
        call.kinds.push_back(marked ? ArgKind::marked : immediate(penv, call.args.back()) ? ArgKind::immediate : ArgKind::copy);
      }
      bool host = false;
      call.result = b.outcome(recorded.result, call, &host);
      int arity = 0;
      const ERL_NIF_TERM* items = nullptr;
      call.made = enif_get_tuple(penv, call.result, &arity, &items) && arity == 4 && enif_is_identical(items[0], plan->marker);
      if (host) return refuse("a call read tensor data back to the host");
      type_step(*plan, call);
      plan->calls.push_back(std::move(call));
    }
    for (ERL_NIF_TERM out : outputs) {
      const TensorResource* res = resource_of(env, out);
      auto it = res == nullptr ? b.slot_of.end() : b.slot_of.find(res);
      if (it == b.slot_of.end()) return refuse("an output is not a tensor the call made or was given");
      plan->outputs.push_back(it->second);
    }
  } catch (...) {
    return refuse("a recorded call's terms could not be read again");
  }
  // (the recorded terms, and the tensors they held, are not needed any more)
  r->calls.clear();
  enif_free_env(r->env);
  r->env = nullptr;
  std::lock_guard<std::mutex> lock(r->cell->mutex);
  if (!r->cell->plan) r->cell->plan = std::move(plan);
  return atoms.true_;
}

ERL_NIF_TERM plan_replay(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  PlanCell* cell = cell_of(env, argv[0]);
  std::shared_ptr<const CallPlan> plan;
  {
    std::lock_guard<std::mutex> lock(cell->mutex);
    plan = cell->plan;
    if (!plan) {
      // (the first call compiles kernels and fills caches: record from the second on)
      if (cell->attempts >= kRecordAttempts) return atoms.none;
      if (cell->calls == 0) {
        cell->calls = 1;
        return atoms.none;
      }
      ++cell->attempts;
      return atoms.record;
    }
  }
  if (enif_compare(plan->signature, argv[2]) != 0) return atoms.mismatch;
  const std::vector<ERL_NIF_TERM> params = list_items(env, argv[1], "params");
  if (params.size() != plan->params) return atoms.mismatch;
  if (!plan->inline_replay) return schedule_dirty_cpu(env, "plan", guarded<replay_dirty>, argc, argv);
  return replay(env, *plan, params);
}

}  // namespace accel::nif
