// The checked launch of a kernel compiled from text: every input on the output's device and of the
// call's length, the output and the flag allocated here, the flag read back after the launch.
#include "core/source_kernel.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/backend.hpp"
#include "core/error.hpp"
#include "core/job_queue.hpp"
#include "core/tensor_checks.hpp"

namespace accel {

namespace {

// How long one launch of a resumable kernel should take: a call whose caller died stops, and the
// device is free for other callers, within about that.
constexpr double kLaunchSeconds = 0.04;
// The first launch's loop iterations per element; then fitted to kLaunchSeconds.
constexpr uint64_t kFirstFuel = 4096;
// The state buffer's size at most: the elements of a call run in windows that fit it.
constexpr uint64_t kStateBytes = uint64_t{64} << 20;

// What the device form reads from its flag buffer (Accel.Kernel.Compiler's device entries): the
// flag, whether an element was suspended, the fuel, the window's first element, and its epoch
// (which tells an element's saved state from an earlier window's in the same buffer) shifted
// left once, the low bit set in the window's first launch (which runs every element).
struct ResumeHeader {
  int32_t flag = 0;
  int32_t pending = 0;
  uint64_t fuel = kFirstFuel;
  uint64_t base = 0;
  uint64_t epoch_first = 0;
};

// Runs `kernel` (resume_words > 0) over n elements in launches of bounded length, buffers[0] the
// output, then the inputs, in windows of elements that share one state buffer. Returns whether an
// element was flagged.
bool run_resumable(const SourceKernel& kernel, Backend& backend, int device, uint64_t n,
                   std::vector<const DeviceBuffer*> buffers, const std::vector<uint64_t>& scalars,
                   const Cancellation* cancel) {
  const uint64_t words = kernel.resume_words;
  const uint64_t most = std::min(n, std::max<uint64_t>(1, kStateBytes / (words * 8)));
  // the first window: a few elements per compute unit; doubled while its launches stay short
  const uint64_t units = backend.devices().at(static_cast<size_t>(device)).compute_units;
  uint64_t window = std::min(most, std::max<uint64_t>(4096, units * 2048));
  std::shared_ptr<DeviceBuffer> header = backend.allocate(device, sizeof(ResumeHeader));
  std::shared_ptr<DeviceBuffer> state;
  uint64_t capacity = 0;
  buffers.insert(buffers.begin() + 1, {header.get(), nullptr});
  ResumeHeader h;
  uint64_t epoch = 0;
  for (uint64_t base = 0; base < n;) {
    const uint64_t count = std::min(window, n - base);
    if (count > capacity) {  // a fresh buffer, zeroed: no element's mark holds an epoch
      capacity = std::min(most, std::max(count, capacity * 2));
      state = backend.allocate(device, capacity * words * 8);
      backend.zero(*state);
      buffers[2] = state.get();
      epoch = 0;
    }
    ++epoch;
    h.base = base;
    for (bool first = true;; first = false) {
      h.pending = 0;
      h.epoch_first = epoch << 1 | (first ? 1 : 0);
      backend.upload(*header, &h);
      const auto start = std::chrono::steady_clock::now();
      backend.launch_source(kernel, device, count, buffers, scalars, cancel, 0);
      backend.download(*header, &h, 2 * sizeof(int32_t));
      const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (cancel != nullptr) cancel->throw_if_cancelled();
      JobQueue::serve_waiting();  // calls made meanwhile on this device run between our launches
      if (h.pending == 0) {
        if (took < kLaunchSeconds) window = std::min(most, window * (took < kLaunchSeconds / 8 ? 4 : 2));
        if (took > 2 * kLaunchSeconds) window = std::max<uint64_t>(1, window / 2);
        break;
      }
      const double fitted = static_cast<double>(h.fuel) * kLaunchSeconds / std::max(took, 1e-6);
      const double most_fuel = std::min(static_cast<double>(h.fuel) * 4, 0x1p62);
      h.fuel = static_cast<uint64_t>(std::clamp(fitted, 1.0, most_fuel));
      if (h.fuel == 1 && took > kLaunchSeconds) window = std::max<uint64_t>(1, window / 2);
    }
    base += count;
  }
  return h.flag != 0;
}

}  // namespace

// More than any generated kernel passes: OpenCL guarantees 128 arguments at least.
constexpr size_t kMaxSourceInputs = 32;
constexpr size_t kMaxSourceScalars = 64;

SourceLaunch tensor_source_kernel(const SourceKernel& kernel, Backend& backend, int device,
                                  const std::vector<const Tensor*>& inputs, uint64_t n,
                                  const std::vector<uint64_t>& scalars, const Cancellation* cancel) {
  if (inputs.size() > kMaxSourceInputs || scalars.size() > kMaxSourceScalars)
    throw ArgumentError("a kernel takes at most " + std::to_string(kMaxSourceInputs) + " inputs and " +
                        std::to_string(kMaxSourceScalars) + " scalars");
  // The text indexes exactly these: anything else would read past a buffer.
  if (inputs.size() != kernel.input_types.size() || scalars.size() != kernel.scalar_sizes.size() ||
      (!kernel.input_counts.empty() && kernel.input_counts.size() != inputs.size()))
    throw ArgumentError("this kernel takes " + std::to_string(kernel.input_types.size()) + " input buffers and " +
                        std::to_string(kernel.scalar_sizes.size()) + " scalars, got " + std::to_string(inputs.size()) + " and " +
                        std::to_string(scalars.size()));
  if (kernel.uses_f64 && !backend.supports(DType::F64, device))
    throw ArgumentError(":" + backend.status().name + " device " + std::to_string(device) +
                        " has no double precision, which this kernel computes in (as Elixir does)");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = *inputs[i];
    if (t.backend != &backend || t.device != device)
      throw ArgumentError("input " + std::to_string(i) + " is on " + detail::where(t) + ", not on :" +
                          backend.status().name + " device " + std::to_string(device) +
                          ": move it with Accel.Tensor.transfer/2");
    if (t.type != kernel.input_types[i])
      throw ArgumentError("input " + std::to_string(i) + " is :" + dtype_name(t.type) + ", but the kernel was compiled for :" +
                          dtype_name(kernel.input_types[i]));
    const uint64_t expected = kernel.input_counts.empty() ? n : kernel.input_counts[i];
    if (t.count != expected)
      throw ArgumentError("input " + std::to_string(i) + " has " + std::to_string(t.count) + " elements, not " +
                          std::to_string(expected) + ": the kernel was compiled for that length");
  }
  SourceLaunch result;
  const Tensor* given = kernel.out_into >= 0 ? inputs[static_cast<size_t>(kernel.out_into)] : nullptr;
  const bool overwrite = given != nullptr && backend.waits_on_device() && kernel.flag && kernel.resume_words == 0 &&
                         kernel.input_counts.empty() && given->type == kernel.out_type && given->count == n;
  // (two statements: `c ? *given : allocate_like(...)` is a const prvalue, which copy-assigns)
  if (overwrite)
    result.out = *given;
  else
    result.out = detail::allocate_like(backend, device, kernel.out_type, n);
  if (n == 0) return result;
  if (kernel.resume_words > 0 && backend.waits_on_device()) {
    std::vector<const DeviceBuffer*> buffers{result.out.buffer.get()};
    for (const Tensor* t : inputs) buffers.push_back(t->buffer.get());
    result.flagged = run_resumable(kernel, backend, device, n, std::move(buffers), scalars, cancel);
    return result;
  }
  std::shared_ptr<DeviceBuffer> flag;
  std::vector<const DeviceBuffer*> buffers;
  buffers.reserve(inputs.size() + 2);
  buffers.push_back(result.out.buffer.get());
  if (kernel.flag) {
    flag = backend.allocate(device, 8);
    backend.zero(*flag);
    buffers.push_back(flag.get());
  }
  for (const Tensor* t : inputs) buffers.push_back(t->buffer.get());
  backend.launch_source(kernel, device, n, buffers, scalars, cancel, 0);
  if (flag) {
    int32_t raised = 0;
    backend.download(*flag, &raised, sizeof raised);
    result.flagged = raised != 0;
  }
  return result;
}

}  // namespace accel
