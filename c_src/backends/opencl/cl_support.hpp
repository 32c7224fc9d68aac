// What every part of the OpenCL backend shares: the Khronos C++ bindings configured once, OpenCL
// errors turned into accel::Error (named call, error name, and the reason Elixir sees), and the
// guard that gives OpenCL implementations a working waitpid() inside the BEAM.
#pragma once

#define CL_HPP_TARGET_OPENCL_VERSION 120
#define CL_HPP_MINIMUM_OPENCL_VERSION 120
#define CL_HPP_ENABLE_EXCEPTIONS
#include <CL/opencl.hpp>

#include <signal.h>

#include <mutex>
#include <string>

namespace accel::opencl {

// "out_of_memory", "device_unavailable" or "opencl_error", for accel::Error.
std::string reason_for(cl_int code);
// "clFoo failed with CL_NAME (code)".
std::string cl_error_text(const cl::Error& e);

// ERTS sets SIGCHLD to SIG_IGN, so the kernel reaps children by itself and waitpid() fails with
// ECHILD. Some OpenCL implementations (PoCL among them) compile kernels by running a linker and
// waiting for it, and abort the whole process when that wait fails. While any OpenCL call is in
// flight, SIGCHLD is restored to its default; the last call out puts back what was there. (The
// BEAM's only direct child is erl_child_setup, which lives as long as the VM.)
class ChildWaitGuard {
 public:
  ChildWaitGuard() {
    std::lock_guard<std::mutex> lock(mutex());
    if (depth()++ == 0) {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigemptyset(&dfl.sa_mask);
      sigaction(SIGCHLD, &dfl, &saved());
    }
  }
  ~ChildWaitGuard() {
    std::lock_guard<std::mutex> lock(mutex());
    if (--depth() == 0) sigaction(SIGCHLD, &saved(), nullptr);
  }
  ChildWaitGuard(const ChildWaitGuard&) = delete;
  ChildWaitGuard& operator=(const ChildWaitGuard&) = delete;

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static int& depth() {
    static int d = 0;
    return d;
  }
  static struct sigaction& saved() {
    static struct sigaction s {};
    return s;
  }
};

}  // namespace accel::opencl
