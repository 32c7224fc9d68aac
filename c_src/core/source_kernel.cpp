// The checked launch of a kernel compiled from text: every input on the output's device and of the
// call's length, the output and the flag allocated here, the flag read back after the launch.
#include "core/source_kernel.hpp"

#include <cstring>

#include "core/backend.hpp"
#include "core/error.hpp"
#include "core/tensor_checks.hpp"

namespace accel {

// More than any generated kernel passes: OpenCL guarantees 128 arguments at least.
constexpr size_t kMaxSourceInputs = 32;
constexpr size_t kMaxSourceScalars = 64;

SourceLaunch tensor_source_kernel(const SourceKernel& kernel, Backend& backend, int device,
                                  const std::vector<Tensor>& inputs, uint64_t n, const std::vector<uint64_t>& scalars,
                                  const Cancellation* cancel) {
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
    const Tensor& t = inputs[i];
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
  result.out = detail::allocate_like(backend, device, kernel.out_type, n);
  if (n == 0) return result;
  std::shared_ptr<DeviceBuffer> flag;
  std::vector<const DeviceBuffer*> buffers{result.out.buffer.get()};
  if (kernel.flag) {
    flag = backend.allocate(device, 8);
    backend.zero(*flag);
    buffers.push_back(flag.get());
  }
  for (const Tensor& t : inputs) buffers.push_back(t.buffer.get());
  backend.launch_source(kernel, device, n, buffers, scalars, cancel, 0);
  if (flag) {
    int32_t raised = 0;
    backend.download(*flag, &raised, sizeof raised);
    result.flagged = raised != 0;
  }
  return result;
}

}  // namespace accel
