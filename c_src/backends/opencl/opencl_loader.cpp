// Loads the OpenCL backend from its plugin (accel_opencl.so, next to the NIF). The NIF itself does
// not link the OpenCL ICD loader, so it loads on hosts without one; there the plugin fails to load
// and the OpenCL backend reports the loader's reason instead.
#include <dlfcn.h>

#include "backends/absent_backend.hpp"
#include "backends/opencl/opencl_backend.hpp"

namespace accel::opencl {

std::unique_ptr<Backend> load_backend(const std::string& dir) {
  const std::string path = dir + "/accel_opencl.so";
  // Never unloaded: the backend's code must outlive every object it made.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return std::make_unique<AbsentBackend>("opencl", true, std::string("the OpenCL plugin could not be loaded: ") +
                                                               (why != nullptr ? why : path));
  }
  using Create = Backend* (*)();
  auto create = reinterpret_cast<Create>(dlsym(handle, "accel_opencl_plugin_create"));
  if (create == nullptr)
    return std::make_unique<AbsentBackend>("opencl", true, path + " is not an Accel OpenCL plugin");
  return std::unique_ptr<Backend>(create());
}

}  // namespace accel::opencl
