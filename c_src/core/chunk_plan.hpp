// How a device backend splits a call: chunks of at most max(1, min(device limit, requested))
// elements, handed out round-robin to `slots` buffers so that the transfers of one chunk overlap
// the compute of another. Pure host code: tested without a device.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/cancel.hpp"

namespace accel {

struct Chunk {
  size_t offset = 0;  // first element
  size_t count = 0;
  size_t slot = 0;  // which device buffer / stream it uses
};

// device_limit: elements the device can hold in one buffer; requested: 0 for no preference.
inline size_t chunk_elements(size_t total, size_t device_limit, size_t requested) {
  size_t chunk = std::max<size_t>(device_limit, 1);
  if (requested != 0) chunk = std::min(chunk, requested);
  return std::max<size_t>(std::min(chunk, total), 1);
}

inline std::vector<Chunk> plan_chunks(size_t total, size_t chunk, size_t slots) {
  std::vector<Chunk> plan;
  chunk = std::max<size_t>(chunk, 1);
  slots = std::max<size_t>(slots, 1);
  for (size_t offset = 0, i = 0; offset < total; offset += chunk, ++i)
    plan.push_back({offset, std::min(chunk, total - offset), i % slots});
  return plan;
}

// A device kernel cannot be interrupted, and a caller that gives up (its process dies) must free
// the device within a bounded time: `iterations: 2^40` is a valid call. So a chunk's iterations run
// in launches of at most this many, each worth about `launch_budget` units of
// logistic_map_cost (f64 element-steps), with the cancellation checked between launches.
// x after a + b iterations is x after a, iterated b more times, so the result is unchanged.
// Returns at least 1, at most `iterations` (0 when there are none: one launch still runs).
inline int64_t iterations_per_launch(uint64_t chunk_cost, int64_t iterations, uint64_t launch_budget) {
  if (iterations <= 0) return 0;
  const uint64_t per_iteration = std::max<uint64_t>(chunk_cost / static_cast<uint64_t>(iterations), 1);
  const uint64_t fit = std::max<uint64_t>(launch_budget / per_iteration, 1);
  return fit >= static_cast<uint64_t>(iterations) ? iterations : static_cast<int64_t>(fit);
}

// Runs a chunk's `iterations` as launches of at most `batch` (iterations_per_launch above):
// launch(count, first) enqueues one, `first` true for the first (the one that may generate a
// range). Between two launches wait() returns once the previous one has finished, and a cancelled
// call stops there. With no iterations, one launch(0, true) still runs if `at_least_once` (a range
// must still be generated into the buffer).
template <typename Launch, typename Wait>
void run_launches(int64_t iterations, int64_t batch, bool at_least_once, const Cancellation* cancel, Launch launch,
                  Wait wait) {
  if (iterations <= 0) {
    if (at_least_once) launch(int64_t{0}, true);
    return;
  }
  for (int64_t ran = 0; ran < iterations;) {
    const int64_t now = std::min(batch, iterations - ran);
    launch(now, ran == 0);
    ran += now;
    if (ran < iterations) {
      wait();
      if (cancel != nullptr) cancel->throw_if_cancelled();
    }
  }
}

// Elements per chunk when streaming `total` elements of `per_element_cost` units each (all
// iterations): at least four chunks, so that one chunk's transfers overlap another's kernels, and a
// chunk's whole work within about two launch budgets, so that it runs in one or two launches
// instead of as many launches as iterations, each a pass over all of it; never below `floor`
// elements (a launch's own cost). The logistic map on PoCL: 1.3-1.4x faster at 2^22 elements than
// as one chunk, 1.15x at 2^19, 1.1x at 2^16.
inline size_t stream_chunk(size_t total, uint64_t per_element_cost, uint64_t launch_budget, size_t floor) {
  const uint64_t by_budget = 2 * (launch_budget / std::max<uint64_t>(per_element_cost, 1));
  const uint64_t by_overlap = total / 4 + (total % 4 != 0);
  const uint64_t chunk = std::max<uint64_t>(std::min(by_budget, by_overlap), std::max<size_t>(floor, 1));
  return static_cast<size_t>(std::min<uint64_t>(chunk, SIZE_MAX));
}

// The launch budget of a device with `compute_units` (multiprocessors, OpenCL compute units):
// tens of milliseconds of work per launch on a GPU, about 0.1 s on a two-core CPU device.
inline uint64_t launch_budget(uint32_t compute_units) {
  return static_cast<uint64_t>(std::max<uint32_t>(compute_units, 1)) << 24;
}

}  // namespace accel
