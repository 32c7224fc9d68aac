// Kernels that arrive as text at run time (Accel.Kernel: Elixir functions lowered to the dialect
// of kernels/dialect.h and kernels/user.h), and the one checked operation that runs them over
// tensors. They reach each backend through the same door as the built-in kernels
// (Backend::launch_source); what differs is only who compiles the text: the system compiler for
// the CPU (the Elixir side builds and caches a shared object; the NIF loads it), the OpenCL
// program cache per device, NVRTC for CUDA (the Elixir side caches its code on disk per
// architecture; the backend loads it once per device).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/cancel.hpp"
#include "core/tensor.hpp"

namespace accel {

// The CPU entry point every generated text defines for host C++ (extern "C" accel_user): runs
// elements [begin, end) with buffers[k] and the 8-byte scalar slots. After the last buffer the CPU
// backend passes its stop poll (accel_stop in kernels/user.h, or null), which loops ask.
using HostKernelEntry = void (*)(void* const* buffers, const uint64_t* scalars, uint64_t begin, uint64_t end);

constexpr uint64_t kMaxResumeWords = 4096;

struct SourceKernel {
  std::string key;     // identifies `source` and `entry` (a hash): what the caches file it under
  std::string source;  // complete: the dialect's headers, then the kernel
  std::string entry = "accel_user";  // the kernel function's name
  bool uses_f64 = false;  // computes in doubles: refused on devices without them
  // Generated kernels take the exactness flag after the output (see SourceLaunch); expert kernels
  // (Accel.Kernel.opencl/3, cuda/3) do not.
  bool flag = true;
  // What the text reads and writes: each input's element type, the output's, and each scalar's
  // size in bytes (8 for generated kernels' slots; 4 for an expert kernel's float or int).
  std::vector<DType> input_types;
  DType out_type = DType::S64;
  std::vector<uint8_t> scalar_sizes;
  // Each input's element count, where the text reads inputs of other lengths than the output's
  // (a fused Nx kernel reads a broadcast operand at its own indices); empty: every input has n.
  std::vector<uint64_t> input_counts;
  // Generated kernels whose loops may run long: their device form takes, after the flag, a state
  // buffer of this many 8-byte words per element, and runs in launches that each spend a bounded
  // `fuel` of loop iterations per element, resuming where the last stopped (0: one launch).
  uint32_t resume_words = 0;
  // An input the caller gives up (a binary it uploaded for this call alone): on a device, when it
  // has the output's type and length and the kernel runs in one launch, the output is written over
  // it, as a hand-written in-place kernel would (-1: a new buffer). Each element reads its inputs
  // before it writes its output, at its own index only.
  int32_t out_into = -1;
  HostKernelEntry host = nullptr;   // the CPU backend's compiled entry, where it has one
  std::shared_ptr<void> library;    // keeps the shared object holding `host` loaded
  std::string device_code;          // CUDA: the text compiled by NVRTC for the device (cubin or PTX)
};

// Entry point in every dialect: accel_user(b0, ..., n, s0, ...): b0 the output, b1 one int32 flag
// raised (to 1) when an element could not be computed exactly (that element's output holds the
// kernel's sentinel and is recomputed by the caller), b2... the inputs, each of `n` elements.
// An expert kernel's entry is entry(out, in0, ..., n, s0, ...): no flag. Each scalar is passed
// by value, its `scalar_sizes` bytes taken from the start of its 8-byte slot (little-endian).
struct SourceLaunch {
  Tensor out;
  bool flagged = false;
};

// Runs `kernel` over n elements of `inputs` (each exactly n elements, or its `input_counts`, of the type the kernel reads,
// all on one device; none for a kernel that generates its input) into a new tensor of the
// kernel's out_type on `backend`/`device`.
// (The inputs by pointer: a launch takes no share of their buffers, which their holders keep.)
SourceLaunch tensor_source_kernel(const SourceKernel& kernel, Backend& backend, int device,
                                  const std::vector<const Tensor*>& inputs, uint64_t n,
                                  const std::vector<uint64_t>& scalars, const Cancellation* cancel);

}  // namespace accel
