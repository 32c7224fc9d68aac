// The interface every compute backend implements (cpu, opencl; cuda mirrors it), the device and
// status records Accel.devices/0 and Accel.backends/0 report. Backends never see BEAM terms.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cancel.hpp"
#include "core/int64_source.hpp"
#include "core/logistic_map.hpp"

namespace accel {

struct BackendStatus {
  std::string name;        // "cpu", "opencl", "cuda"
  bool compiled = false;   // built into this NIF
  bool available = false;  // usable on this machine now
  std::string detail;      // what it runs on, or why it is unavailable
};

struct DeviceInfo {
  std::string backend;    // as BackendStatus::name
  int index = 0;          // position in the backend's device list: what `device:` selects
  std::string platform;   // OpenCL platform, "host" for the CPU backend
  std::string name;
  std::string type;       // "cpu", "gpu", "accelerator" or "other"
  uint64_t memory = 0;     // bytes
  uint64_t max_alloc = 0;  // largest single buffer, bytes
  uint32_t compute_units = 0;  // OpenCL compute units, CUDA multiprocessors, CPU threads
  std::string capability;      // CUDA compute capability ("9.0"); empty elsewhere
};

// Per-call choices a caller may make.
struct CallOptions {
  int device = 0;             // index into Backend::devices()
  size_t chunk_elements = 0;  // split the input into chunks of at most this many; 0: the backend decides
  const Cancellation* cancel = nullptr;  // polled between blocks (CPU) or chunks (devices); may be null
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendStatus status() = 0;
  virtual std::vector<DeviceInfo> devices() = 0;

  // True when calls wait on a device (they belong on a dirty IO scheduler), false for host compute.
  virtual bool waits_on_device() const = 0;

  // Writes in.count native-endian int64 results to `out`, which may alias in.bytes exactly
  // (in place). Throws ArgumentError for a device index out of range. Thread-safe.
  virtual void logistic_map(const Int64Source& in, unsigned char* out, const LogisticMapPlan& plan,
                            const CallOptions& options) = 0;
};

}  // namespace accel
