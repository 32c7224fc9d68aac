// A device's streamed calls, written once above the launch door: the input goes through in chunks
// no larger than the device allows, alternating between two buffers on two queues, so that one
// chunk's transfers overlap the other's kernels (double buffering). Every device backend (OpenCL,
// CUDA) runs its logistic map here; Accel.map's user kernels will too.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <vector>

#include "core/backend.hpp"
#include "core/chunk_plan.hpp"

namespace accel {

// Elements in one chunk on `info`'s device: a buffer within its largest allocation and within an
// eighth of its memory (two in flight leave three quarters to tensors and other callers).
inline size_t device_chunk_limit(const DeviceInfo& info, size_t element_bytes) {
  return static_cast<size_t>(std::min<uint64_t>(info.max_alloc, info.memory / 8) / element_bytes);
}

// Streams `count` elements of `element_bytes` each through `backend`'s device `options.device`,
// in place on the device: chunk by chunk, `in` (null when the kernel generates its input) is
// uploaded into a buffer, run(buffer, chunk, queue) enqueues the chunk's kernels on `queue` (it may
// call backend.finish(device, queue) to wait between launches), and the buffer is downloaded into
// `out`. At most two chunks are in flight; a cancelled call stops between chunks. Returns once
// every result is in `out`; on an exception, once no transfer can touch `in` or `out` any more.
template <typename Run>
void stream_in_place(Backend& backend, const DeviceInfo& info, const CallOptions& options, size_t count,
                     size_t element_bytes, const unsigned char* in, unsigned char* out, Run run) {
  if (count == 0) return;
  const int device = options.device;
  const std::shared_ptr<void> held = backend.hold(device);
  const size_t chunk = chunk_elements(count, device_chunk_limit(info, element_bytes), options.chunk_elements);
  // A second buffer is worth having only when there is a second chunk.
  const size_t slots = chunk < count ? std::min<size_t>(2, backend.queues(device)) : 1;
  std::vector<std::shared_ptr<DeviceBuffer>> buffers;
  for (size_t s = 0; s < slots; ++s) buffers.push_back(backend.allocate(device, chunk * element_bytes));
  backend.finish(device, 0);  // allocations are ordered on queue 0
  std::vector<bool> in_flight(slots, false);
  try {
    for (const Chunk& part : plan_chunks(count, chunk, slots)) {
      // Wait for this slot's previous chunk before reusing its buffer: also a cancelled call's
      // chance to stop between chunks.
      if (in_flight[part.slot]) backend.finish(device, part.slot);
      if (options.cancel != nullptr) options.cancel->throw_if_cancelled();
      DeviceBuffer& buffer = *buffers[part.slot];
      const size_t offset = part.offset * element_bytes, bytes = part.count * element_bytes;
      if (in != nullptr) backend.enqueue_upload(buffer, in + offset, bytes, part.slot);
      run(buffer, part, part.slot);
      backend.enqueue_download(buffer, out + offset, bytes, part.slot);
      in_flight[part.slot] = true;
    }
    for (size_t s = 0; s < slots; ++s) backend.finish(device, s);
  } catch (...) {
    for (size_t s = 0; s < slots; ++s) {
      try {
        backend.finish(device, s);
      } catch (...) {  // the first error is the one to report
      }
    }
    throw;
  }
}

// The logistic map of `in` into `out` (which may alias in.bytes) on a device backend, through the
// door's accel_logistic_map kernel; a range is generated on the device. Each chunk's iterations run
// in launches of bounded time (iterations_per_launch), the cancellation checked between two.
void stream_logistic_map(Backend& backend, const DeviceInfo& info, const Int64Source& in, unsigned char* out,
                         const LogisticMapPlan& plan, const CallOptions& options);

}  // namespace accel
