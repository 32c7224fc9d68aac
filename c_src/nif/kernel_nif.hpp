// The NIFs behind Accel.Kernel (kernel_nif.cpp), listed in accel_nif.cpp's function table.
#pragma once

#include <erl_nif.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "nif/nif_util.hpp"

namespace accel {
class Backend;
class Cancellation;
struct SourceKernel;
struct SourceLaunch;
struct Tensor;
}

namespace accel::nif {

bool open_kernel_resources(ErlNifEnv* env);  // at load
// (path) -> a loaded kernel library (dirty IO: it reads the file system).
ERL_NIF_TERM kernel_load(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]);
// () -> "NVRTC 13.0", the compiler of :cuda kernels (Accel.Error :no_compiler without it).
ERL_NIF_TERM cuda_kernel_compiler(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]);
// (source, arch, entry) -> {code, target}: a generated kernel compiled by NVRTC (dirty CPU).
ERL_NIF_TERM cuda_kernel_code(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]);
// (kernel, inputs, n, scalars, backend, device, ref) -> {tensor, flagged}.
ERL_NIF_TERM tensor_source_kernel(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]);
// For call plans (call_plans.cpp): tensor_source_kernel's body split at its kernel term's decode,
// most of a small launch's cost, so that a replay decodes each kernel once. is_source_kernel_run
// says whether a recorded body is that one; source_kernel_with runs it with the kernel decoded
// (argv[0] unread).
bool is_source_kernel_run(NifFn run);
std::shared_ptr<const SourceKernel> decode_source_kernel(ErlNifEnv* env, ERL_NIF_TERM term);
ERL_NIF_TERM source_kernel_with(ErlNifEnv* env, const SourceKernel& kernel, const ERL_NIF_TERM argv[]);
// Its parts, for a replay's launches from tensors it holds (call_plans.cpp): the scalars' term
// (a binary of 8-byte slots) decoded, and the launch on `backend` (ArgumentError where the kernel
// cannot run there or disagrees with its inputs).
std::vector<uint64_t> decode_slots(ErlNifEnv* env, ERL_NIF_TERM term);
SourceLaunch launch_placed(const SourceKernel& kernel, Backend& backend, int device, const std::vector<const Tensor*>& inputs,
                           uint64_t n, const std::vector<uint64_t>& scalars, const Cancellation* cancel);
// (kernel, binaries, n, scalars, backend, device, ref) -> {binary, flagged}: streamed through a device.
ERL_NIF_TERM map_source(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]);

}  // namespace accel::nif
