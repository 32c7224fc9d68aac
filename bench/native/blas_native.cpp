// The BLAS baselines for bench/tensor.exs: the same libraries Accel's matmul calls, called
// directly with no BEAM, no NIF and no Accel code. OpenBLAS through cblas_?gemm on host arrays, and,
// when built with CLBlast, clblast::Gemm on the first OpenCL device's buffers (finish included).
// Inputs as bench/tensor.exs makes them: a[i] = i / n^2, b = transpose(a). Median of `runs` after a
// warm-up. Prints `library,type,n,seconds` lines, then the copy ceilings for the memory-bound rows:
// `memcpy,f32,N,seconds` (host memcpy of N f32 elements) and `clcopy,f32,N,seconds`
// (clEnqueueCopyBuffer on the first OpenCL device). Usage: blas_native [runs] [sizes...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#ifdef ACCEL_WITH_OPENBLAS
#include <cblas.h>
#endif
#ifdef ACCEL_WITH_CLBLAST
#define CL_HPP_TARGET_OPENCL_VERSION 120
#define CL_HPP_MINIMUM_OPENCL_VERSION 120
#define CL_HPP_ENABLE_EXCEPTIONS
#include <CL/opencl.hpp>
#include <clblast.h>
#endif

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

template <typename F>
double median(int runs, F f) {
  f();
  std::vector<double> t;
  for (int r = 0; r < runs; ++r) {
    const double t0 = now();
    f();
    t.push_back(now() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

#ifdef ACCEL_WITH_CLBLAST
// The first OpenCL device, with a context and an in-order queue on it.
struct ClDevice {
  cl::Device device;
  cl::Context context;
  cl::CommandQueue queue;
};

ClDevice first_cl_device() {
  std::vector<cl::Platform> platforms;
  cl::Platform::get(&platforms);
  std::vector<cl::Device> devices;
  platforms.at(0).getDevices(CL_DEVICE_TYPE_ALL, &devices);
  ClDevice d{devices.at(0), cl::Context(devices.at(0)), {}};
  d.queue = cl::CommandQueue(d.context, d.device);
  return d;
}
#endif

template <typename T>
void inputs(size_t n, std::vector<T>& a, std::vector<T>& b) {
  a.resize(n * n);
  b.resize(n * n);
  for (size_t i = 0; i < n * n; ++i) a[i] = static_cast<T>(static_cast<double>(i) / static_cast<double>(n * n));
  for (size_t r = 0; r < n; ++r)
    for (size_t c = 0; c < n; ++c) b[c * n + r] = a[r * n + c];
}

template <typename T>
void run(const char* type, size_t n, int runs) {
  std::vector<T> a, b, c(n * n);
  inputs(n, a, b);
  const int N = static_cast<int>(n);
  (void)N;
#ifdef ACCEL_WITH_OPENBLAS
  const double s = median(runs, [&] {
    if constexpr (sizeof(T) == 4)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a.data(), N, b.data(), N, 0.0f, c.data(), N);
    else
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0, a.data(), N, b.data(), N, 0.0, c.data(), N);
  });
  std::printf("openblas,%s,%zu,%.6f\n", type, n, s);
#endif
#ifdef ACCEL_WITH_CLBLAST
  try {
    auto [device, context, queue] = first_cl_device();
    if (sizeof(T) == 8 && device.getInfo<CL_DEVICE_DOUBLE_FP_CONFIG>() == 0) return;
    cl::Buffer da(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * n * sizeof(T), a.data());
    cl::Buffer db(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * n * sizeof(T), b.data());
    cl::Buffer dc(context, CL_MEM_READ_WRITE, n * n * sizeof(T));
    cl_command_queue q = queue();
    const double s = median(runs, [&] {
      clblast::Gemm<T>(clblast::Layout::kRowMajor, clblast::Transpose::kNo, clblast::Transpose::kNo, n, n, n, T{1}, da(),
                       0, n, db(), 0, n, T{0}, dc(), 0, n, &q);
      queue.finish();
    });
    std::printf("clblast,%s,%zu,%.6f\n", type, n, s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "clblast: %s\n", e.what());
  }
#endif
  std::fflush(stdout);
}

}  // namespace

// The copy ceilings: one read and one write of n f32 elements, fresh-from-cache buffers excluded
// (the warm-up touches them).
void copies(size_t n, int runs) {
  std::vector<float> a(n, 1.0f), b(n, 0.0f);
  std::printf("memcpy,f32,%zu,%.6f\n", n, median(runs, [&] { std::memcpy(b.data(), a.data(), n * 4); }));
#ifdef ACCEL_WITH_CLBLAST
  try {
    auto [device, context, queue] = first_cl_device();
    cl::Buffer da(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * 4, a.data());
    cl::Buffer db(context, CL_MEM_READ_WRITE, n * 4);
    std::printf("clcopy,f32,%zu,%.6f\n", n, median(runs, [&] {
      queue.enqueueCopyBuffer(da, db, 0, 0, n * 4);
      queue.finish();
    }));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "clcopy: %s\n", e.what());
  }
#endif
  std::fflush(stdout);
}

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 5;
  std::vector<size_t> sizes;
  for (int i = 2; i < argc; ++i) sizes.push_back(std::strtoull(argv[i], nullptr, 10));
  if (sizes.empty()) sizes = {256, 1024, 2048};
  for (size_t n : sizes) {
    run<float>("f32", n, runs);
    run<double>("f64", n, runs);
  }
  copies(size_t{1} << 25, runs);
  return 0;
}
