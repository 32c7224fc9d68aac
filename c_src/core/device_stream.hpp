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

// The smallest chunk worth a launch of its own: launches cost a GPU little but want many threads;
// an OpenCL device on the host's CPU (PoCL) overlaps smaller chunks' transfers with profit.
inline size_t min_stream_chunk(const DeviceInfo& info) { return info.type == "cpu" ? size_t{1} << 14 : size_t{1} << 16; }

// How a streamed call of `count` elements of `element_bytes` each (all of a chunk's buffers per
// element) splits: chunks within the device's allowance for them, of at most `preferred`
// elements (0: no preference) and of the call's chunk_elements, on as many queues as are worth
// having.
struct StreamShape {
  size_t chunk = 1;
  size_t slots = 1;  // buffers, and the queues they stream on
};

inline StreamShape stream_shape(Backend& backend, const DeviceInfo& info, const CallOptions& options, size_t count,
                                size_t element_bytes, size_t preferred) {
  size_t limit = device_chunk_limit(info, element_bytes);
  if (preferred != 0) limit = std::min(limit, preferred);
  const size_t chunk = chunk_elements(count, limit, options.chunk_elements);
  // A second buffer is worth having only when there is a second chunk.
  return {chunk, chunk < count ? std::min<size_t>(2, backend.queues(options.device)) : 1};
}

// The loop of every streamed call: enqueue(part) queues one chunk's commands on queue part.slot,
// after that slot's previous chunk has finished (its buffers are free again: at most `slots`
// chunks in flight) and the cancellation was checked (a cancelled call stops between chunks).
// Returns once every queue has finished; on an exception, once no command can touch the caller's
// memory any more, rethrowing the first error.
template <typename Enqueue>
void stream_chunks(Backend& backend, const CallOptions& options, size_t count, StreamShape shape, Enqueue enqueue) {
  const int device = options.device;
  std::vector<bool> in_flight(shape.slots, false);
  try {
    for (const Chunk& part : plan_chunks(count, shape.chunk, shape.slots)) {
      if (in_flight[part.slot]) backend.finish(device, part.slot);
      if (options.cancel != nullptr) options.cancel->throw_if_cancelled();
      enqueue(part);
      in_flight[part.slot] = true;
    }
    for (size_t s = 0; s < shape.slots; ++s) backend.finish(device, s);
  } catch (...) {
    for (size_t s = 0; s < shape.slots; ++s) {
      try {
        backend.finish(device, s);
      } catch (...) {  // the first error is the one to report
      }
    }
    throw;
  }
}

// Streams `count` elements of `element_bytes` each through `backend`'s device `options.device`,
// in place on the device, in chunks of at most `preferred_chunk` elements (0: as the device and
// options allow): chunk by chunk, `in` (null when the kernel generates its input) is
// uploaded into a buffer, run(buffer, chunk, queue) enqueues the chunk's kernels on `queue` (it may
// call backend.finish(device, queue) to wait between launches), and the buffer is downloaded into
// `out` (stream_chunks' loop). Returns once every result is in `out`; on an exception, once no
// transfer can touch `in` or `out` any more.
template <typename Run>
void stream_in_place(Backend& backend, const DeviceInfo& info, const CallOptions& options, size_t count,
                     size_t element_bytes, const unsigned char* in, unsigned char* out, Run run,
                     size_t preferred_chunk = 0) {
  if (count == 0) return;
  const int device = options.device;
  const std::shared_ptr<void> held = backend.hold(device);
  const StreamShape shape = stream_shape(backend, info, options, count, element_bytes, preferred_chunk);
  std::vector<std::shared_ptr<DeviceBuffer>> buffers;
  for (size_t s = 0; s < shape.slots; ++s) buffers.push_back(backend.allocate(device, shape.chunk * element_bytes));
  backend.finish(device, 0);  // allocations are ordered on queue 0
  stream_chunks(backend, options, count, shape, [&](const Chunk& part) {
    DeviceBuffer& buffer = *buffers[part.slot];
    const size_t offset = part.offset * element_bytes, bytes = part.count * element_bytes;
    if (in != nullptr) backend.enqueue_upload(buffer, in + offset, bytes, part.slot);
    run(buffer, part, part.slot);
    backend.enqueue_download(buffer, out + offset, bytes, part.slot);
  });
}

// The logistic map of `in` into `out` (which may alias in.bytes) on a device backend, through the
// door's accel_logistic_map kernel; a range is generated on the device. Each chunk's iterations run
// in launches of bounded time (iterations_per_launch), the cancellation checked between two.
void stream_logistic_map(Backend& backend, const DeviceInfo& info, const Int64Source& in, unsigned char* out,
                         const LogisticMapPlan& plan, const CallOptions& options);

// A generated kernel that completes in one launch (no saved state, a flag, every input n
// elements: Backend::map_source) over host `inputs` into host `out`, in chunks (stream_chunk's
// size, within the device's allowance for one chunk's buffers), two in flight on two queues. Each
// slot has a buffer per input and one flag; the output is written over the first input of its
// type (each element reads its inputs before it writes its output, at its own index), else into
// a buffer of its own. Returns whether an element was flagged.
bool stream_source_kernel(Backend& backend, const DeviceInfo& info, const SourceKernel& kernel,
                          const std::vector<const unsigned char*>& inputs, uint64_t n,
                          const std::vector<uint64_t>& scalars, unsigned char* out, const CallOptions& options);

}  // namespace accel
