// The interface every compute backend implements (cpu today; opencl and cuda mirror it), and the
// status record Accel.backends/0 reports. Backends never see BEAM terms.
#pragma once

#include <string>

#include "core/int64_source.hpp"
#include "core/logistic_map.hpp"

namespace accel {

struct BackendStatus {
  std::string name;      // :cpu, :opencl, :cuda
  bool compiled = false;  // built into this NIF
  bool available = false; // usable on this machine now
  std::string detail;     // what it runs on, or why it is unavailable
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendStatus status() const = 0;

  // Writes in.count native-endian int64 results to `out` (may alias in.bytes exactly: in-place is
  // allowed). Thread-safe: many calls may run at once.
  virtual void logistic_map(const Int64Source& in, unsigned char* out, const LogisticMapPlan& plan) = 0;
};

}  // namespace accel
