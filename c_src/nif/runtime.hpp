// The NIF's state: the backends, the :auto choice and one job queue per device. There is one Runtime
// per OS process, made by the first load and never destroyed: tensors and result binaries point
// into its backends and may outlive any instance of the module (code reload, purge), so the runtime
// must outlive them all; the library pins itself in memory for the same reason (accel_nif.cpp).
// Also the two ways a NIF hands its work to a dirty scheduler. Shared by every nif/ file.
#pragma once

#include <erl_nif.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "core/backend.hpp"
#include "core/job_queue.hpp"
#include "nif/nif_util.hpp"

namespace accel::nif {

struct Runtime {
  std::unique_ptr<cpu::CpuBackend> cpu;
  std::unique_ptr<Backend> opencl;
  std::unique_ptr<Backend> cuda;

  Backend* all[3] = {};  // cpu, opencl, cuda: the order Accel.backends/0 reports

  // Jobs reserved, queued or running at once on one device (config :accel, device_queue_limit).
  size_t queue_limit = 64;

  // backend: :auto is the first CUDA device, else the first OpenCL GPU, else the CPU backend (which
  // beats OpenCL on a CPU device: see README). Resolved once, by the first call that needs it or
  // any device; that call runs on a dirty IO scheduler because discovery may take a while, and it
  // discovers every device backend's devices, so later calls never wait for discovery.
  std::once_flag auto_once;
  std::atomic<bool> auto_resolved{false};
  Backend* auto_backend = nullptr;
  int auto_device = 0;

  // Where backend: :auto goes now (once resolved): the device chosen above, or the CPU backend once
  // that device is fenced after a fault (core/device_health.hpp).
  Backend* auto_target(int* device) {
    if (auto_backend != cpu.get()) {
      const std::vector<int> fenced = auto_backend->fenced_devices();
      if (std::find(fenced.begin(), fenced.end(), auto_device) == fenced.end()) {
        *device = auto_device;
        return auto_backend;
      }
    }
    *device = 0;
    return cpu.get();
  }

  void resolve_auto() {
    std::call_once(auto_once, [this] {
      auto_backend = cpu.get();
      const bool have_cuda = !cuda->devices().empty();
      const auto cl_devices = opencl->devices();  // discovered either way
      if (have_cuda) {
        auto_backend = cuda.get();
      } else {
        for (const DeviceInfo& d : cl_devices) {
          if (d.type == "gpu") {
            auto_backend = opencl.get();
            auto_device = d.index;
            break;
          }
        }
      }
      auto_resolved = true;
    });
  }

  // The backend's atom name: "cpu", "opencl" or "cuda".
  const char* name_of(const Backend* backend) const {
    return backend == cpu.get() ? "cpu" : backend == cuda.get() ? "cuda" : "opencl";
  }
  // The same name as the atom made at load time (no lookup in the VM's atom table).
  ERL_NIF_TERM atom_of(const Backend* backend) const {
    return backend == cpu.get() ? atoms.cpu : backend == cuda.get() ? atoms.cuda : atoms.opencl;
  }

  // Throws ArgumentError unless `backend` has a device `device` (the CPU backend has one, 0).
  void check_device(Backend& backend, int64_t device);

  // The queue serving `device` of a device backend, made on first use. Throws ArgumentError for a
  // device that does not exist. Call only once resolve_auto() has run (devices discovered).
  JobQueue& queue(Backend& backend, int device);

  struct QueueState {
    const Backend* backend;
    int device;
    size_t in_use, capacity;
  };
  std::vector<QueueState> queue_states();

 private:
  std::mutex queues_mutex_;
  std::map<std::pair<const Backend*, int>, std::unique_ptr<JobQueue>> queues_;
};

// The runtime, or nullptr before the first successful load.
Runtime* runtime_or_null();
inline Runtime& runtime() { return *runtime_or_null(); }

inline ERL_NIF_TERM schedule_dirty_cpu(ErlNifEnv* env, const char* name, NifFn fn, int argc, const ERL_NIF_TERM argv[]) {
  return enif_schedule_nif(env, name, ERL_NIF_DIRTY_JOB_CPU_BOUND, fn, argc, argv);
}

inline ERL_NIF_TERM schedule_dirty_io(ErlNifEnv* env, const char* name, NifFn fn, int argc, const ERL_NIF_TERM argv[]) {
  return enif_schedule_nif(env, name, ERL_NIF_DIRTY_JOB_IO_BOUND, fn, argc, argv);
}

// Runs Entry once every device has been discovered: schedule it on a dirty IO scheduler when
// runtime().auto_resolved is false (discovery happens once per VM and may take a while).
template <NifFn Entry>
ERL_NIF_TERM after_discovery(ErlNifEnv* env, int argc, const ERL_NIF_TERM argv[]) {
  runtime().resolve_auto();
  return Entry(env, argc, argv);
}

}  // namespace accel::nif
