// How a device backend splits a call: chunks of at most max(1, min(device limit, requested))
// elements, handed out round-robin to `slots` buffers so that the transfers of one chunk overlap
// the compute of another. Pure host code: tested without a device.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

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

}  // namespace accel
