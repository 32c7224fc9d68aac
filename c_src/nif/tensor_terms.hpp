// The tensor NIFs' terms (tensor_terms.cpp): the tensor resource and the decoding of every
// argument the tensor NIFs take. Only nif/ includes it.
#pragma once

#include <erl_nif.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace accel {
class Backend;
}

namespace accel::nif {

struct Runtime;

struct TensorResource {
  std::mutex mutex;
  Tensor tensor;
  bool freed = false;
};

// A call plan's replay on this thread (call_plans.cpp), while it runs a recorded NIF body: the
// tensors it holds without terms are passed as terms of its own, which get_tensor and
// decode_operand read through find(), and the tensor the body makes goes to take() (true: the
// result's tuple then holds nil where the resource would be). Null everywhere else.
class TensorScope {
 public:
  virtual const Tensor* find(ErlNifEnv* env, ERL_NIF_TERM term) = 0;
  virtual bool take(Tensor& tensor) = 0;

 protected:
  ~TensorScope() = default;
};
extern thread_local TensorScope* t_tensor_scope;

// Opens the resource type and makes the registry's atoms; at load.
bool open_tensor_resources(ErlNifEnv* env);
// A new tensor term: {resource, backend, device, bytes allocated since the last collection}.
ERL_NIF_TERM make_tensor(ErlNifEnv* env, Tensor tensor);
// make_tensor's first element alone (the resource term), its bytes counted as make_tensor counts
// them; *since_gc: the count after (call plans make the tensors a replay returns this way).
ERL_NIF_TERM make_tensor_resource(ErlNifEnv* env, Tensor tensor, uint64_t* since_gc);
// A binary over `bytes` of the tensor's host memory at `data` (Backend::host_view), without a
// copy: the binary keeps the buffer alive.
ERL_NIF_TERM make_view_binary(ErlNifEnv* env, const Tensor& tensor, const void* data, size_t bytes);
// The resource behind a term, or null.
TensorResource* resource_of(ErlNifEnv* env, ERL_NIF_TERM term);
// A copy of the tensor (sharing its buffer, alive while the call uses it); ArgumentError when the
// term is no tensor of this VM, or was freed.
Tensor get_tensor(ErlNifEnv* env, ERL_NIF_TERM term);
std::string atom_text(ErlNifEnv* env, ERL_NIF_TERM term);  // "" for a non-atom
DType decode_type(ErlNifEnv* env, ERL_NIF_TERM term);
uint64_t decode_count(ErlNifEnv* env, ERL_NIF_TERM term, const char* name);  // non-negative
Backend* backend_named(Runtime& rt, const std::string& name);  // null for an unknown name
// (backend atom, device index or -1 for the backend's default) -> where a new tensor goes.
Backend& decode_place(ErlNifEnv* env, ERL_NIF_TERM name, ERL_NIF_TERM device_term, int* device);
// A registered operation's code from its atom.
int decode_op(ErlNifEnv* env, OpFamily family, ERL_NIF_TERM term);
std::vector<uint64_t> decode_shape(ErlNifEnv* env, ERL_NIF_TERM term);
std::vector<int64_t> decode_strides(ErlNifEnv* env, ERL_NIF_TERM term);
// How many elements a shape term holds, or limit + 1 when more (or when it is no shape).
uint64_t shape_count_up_to(ErlNifEnv* env, ERL_NIF_TERM term, uint64_t limit);
// A tensor (into *storage) with its shape, or a number.
Operand decode_operand(ErlNifEnv* env, ERL_NIF_TERM term, ERL_NIF_TERM shape, Tensor* storage);

}  // namespace accel::nif
