// The logistic map streamed through a device (see device_stream.hpp).
#include "core/device_stream.hpp"

namespace accel {

void stream_logistic_map(Backend& backend, const DeviceInfo& info, const Int64Source& in, unsigned char* out,
                         const LogisticMapPlan& plan, const CallOptions& options) {
  const int device = options.device;
  const bool from_range = in.kind == Int64Source::Kind::Range;
  const accel_params constants = logistic_map_params(plan, backend.supports(DType::F64, device), 0);
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
                  });
}

}  // namespace accel
