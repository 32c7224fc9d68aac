// The NIF's state (one Runtime per load: the backends and the :auto choice) and the two ways a NIF
// hands its work to a dirty scheduler. Shared by accel_nif.cpp and tensor_nif.cpp.
#pragma once

#include <erl_nif.h>

#include <atomic>
#include <memory>
#include <mutex>

#include "backends/cpu/cpu_backend.hpp"
#include "core/backend.hpp"
#include "nif/nif_util.hpp"

namespace accel::nif {

struct Runtime {
  std::unique_ptr<cpu::CpuBackend> cpu;
  std::unique_ptr<Backend> opencl;
  std::unique_ptr<Backend> cuda;

  Backend* all[3] = {};  // cpu, opencl, cuda: the order Accel.backends/0 reports

  // backend: :auto is the first CUDA device, else the first OpenCL GPU, else the CPU backend (which
  // beats OpenCL on a CPU device: see README). Resolved once, by the first call that needs it; that
  // call runs on a dirty IO scheduler because device discovery may take a while.
  std::once_flag auto_once;
  std::atomic<bool> auto_resolved{false};
  Backend* auto_backend = nullptr;
  int auto_device = 0;

  void resolve_auto() {
    std::call_once(auto_once, [this] {
      auto_backend = cpu.get();
      if (!cuda->devices().empty()) {
        auto_backend = cuda.get();
      } else {
        for (const DeviceInfo& d : opencl->devices()) {
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
};

inline Runtime& runtime(ErlNifEnv* env) { return *static_cast<Runtime*>(enif_priv_data(env)); }

inline ERL_NIF_TERM schedule_dirty_cpu(ErlNifEnv* env, const char* name, NifFn fn, int argc, const ERL_NIF_TERM argv[]) {
  return enif_schedule_nif(env, name, ERL_NIF_DIRTY_JOB_CPU_BOUND, fn, argc, argv);
}

inline ERL_NIF_TERM schedule_dirty_io(ErlNifEnv* env, const char* name, NifFn fn, int argc, const ERL_NIF_TERM argv[]) {
  return enif_schedule_nif(env, name, ERL_NIF_DIRTY_JOB_IO_BOUND, fn, argc, argv);
}

}  // namespace accel::nif
