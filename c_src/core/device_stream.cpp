// The logistic map and generated kernels streamed through a device (see device_stream.hpp).
#include "core/device_stream.hpp"

#include <string>

#include "core/source_kernel.hpp"

namespace accel {

void stream_logistic_map(Backend& backend, const DeviceInfo& info, const Int64Source& in, unsigned char* out,
                         const LogisticMapPlan& plan, const CallOptions& options) {
  const int device = options.device;
  const bool from_range = in.kind == Int64Source::Kind::Range;
  // the f64 path vectorises on GPUs; an OpenCL device on the host's CPU divides faster
  // (kernels/logistic_map.h's accel_lm_reduce)
  const bool f64 = backend.supports(DType::F64, device) && info.type != "cpu";
  const accel_params constants = logistic_map_params(plan, f64, 0);
  const uint64_t budget = launch_budget(info.compute_units);
  stream_in_place(backend, info, options, in.count, 8, from_range ? nullptr : in.bytes, out,
                  [&](DeviceBuffer& buffer, const Chunk& part, size_t queue) {
                    accel_params p = constants;
                    p.n = part.count;
                    const int64_t batch =
                        iterations_per_launch(logistic_map_cost(part.count, plan), plan.iterations, budget);
                    // One launch unless the chunk's iterations would hold the device too long; the
                    // first generates a range chunk's elements.
                    run_launches(
                        plan.iterations, batch, true, options.cancel,
                        [&](int64_t now, bool first) {
                          const bool generate = from_range && first;
                          p.count[1] = static_cast<uint64_t>(now);
                          p.count[2] = generate ? 1 : 0;
                          p.shape[0] = generate ? static_cast<uint64_t>(in.at(part.offset)) : 0;
                          p.shape[1] = static_cast<uint64_t>(in.step);
                          backend.launch(Kernel::accel_logistic_map, device, p, {&buffer}, static_cast<size_t>(now) + 1,
                                         options.cancel, queue);
                        },
                        [&] { backend.finish(device, queue); });
                  },
                  stream_chunk(in.count, logistic_map_cost(1, plan), budget, min_stream_chunk(info)));
}

bool stream_source_kernel(Backend& backend, const DeviceInfo& info, const SourceKernel& kernel,
                          const std::vector<const unsigned char*>& inputs, uint64_t n,
                          const std::vector<uint64_t>& scalars, unsigned char* out, const CallOptions& options) {
  if (!kernel.flag || kernel.resume_words != 0 || !kernel.input_counts.empty() || inputs.empty() ||
      inputs.size() != kernel.input_types.size() || scalars.size() != kernel.scalar_sizes.size())
    throw ArgumentError("streamed over host memory: a generated kernel that runs in one launch, with " +
                        std::to_string(kernel.input_types.size()) + " input(s) and " +
                        std::to_string(kernel.scalar_sizes.size()) + " scalar(s), got " + std::to_string(inputs.size()) +
                        " and " + std::to_string(scalars.size()));
  if (kernel.uses_f64 && !backend.supports(DType::F64, options.device))
    throw ArgumentError(":" + info.backend + " device " + std::to_string(options.device) +
                        " has no double precision, which this kernel computes in (as Elixir does)");
  if (n == 0) return false;
  const int device = options.device;
  const size_t out_bytes = dtype_size(kernel.out_type);
  // The first input of the output's type takes the output; its bytes per element are one chunk's row.
  size_t into = inputs.size(), row = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    row += dtype_size(kernel.input_types[k]);
    if (into == inputs.size() && kernel.input_types[k] == kernel.out_type) into = k;
  }
  if (into == inputs.size()) row += out_bytes;
  const std::shared_ptr<void> held = backend.hold(device);
  const size_t preferred = stream_chunk(n, 1, launch_budget(info.compute_units), min_stream_chunk(info));
  const StreamShape shape = stream_shape(backend, info, options, n, row, preferred);
  struct Slot {
    std::vector<std::shared_ptr<DeviceBuffer>> in;
    std::shared_ptr<DeviceBuffer> out, flag;
  };
  std::vector<Slot> slot(shape.slots);
  for (Slot& s : slot) {
    for (DType type : kernel.input_types) s.in.push_back(backend.allocate(device, shape.chunk * dtype_size(type)));
    s.out = into < inputs.size() ? s.in[into] : backend.allocate(device, shape.chunk * out_bytes);
    s.flag = backend.allocate(device, 8);
    backend.zero(*s.flag);
  }
  backend.finish(device, 0);  // allocations are ordered on queue 0
  stream_chunks(backend, options, n, shape, [&](const Chunk& part) {
    const Slot& s = slot[part.slot];
    std::vector<const DeviceBuffer*> buffers{s.out.get(), s.flag.get()};
    for (size_t k = 0; k < inputs.size(); ++k) {
      const size_t width = dtype_size(kernel.input_types[k]);
      backend.enqueue_upload(*s.in[k], inputs[k] + part.offset * width, part.count * width, part.slot);
      buffers.push_back(s.in[k].get());
    }
    backend.launch_source(kernel, device, part.count, buffers, scalars, options.cancel, part.slot);
    backend.enqueue_download(*s.out, out + part.offset * out_bytes, part.count * out_bytes, part.slot);
  });
  bool flagged = false;
  for (const Slot& s : slot) {
    int32_t raised = 0;
    backend.download(*s.flag, &raised, sizeof raised);
    flagged = flagged || raised != 0;
  }
  return flagged;
}

}  // namespace accel
