// Standalone C++ baseline for bench/logistic_map.exs: the logistic-map workload with no BEAM, as a
// naive `gcc -O3` loop (int64 `%`, what the original experiment's C did), through Accel's own CPU
// kernel, single-threaded and on the pool, and through its OpenCL backend (same kernel, first call
// and steady state) when an OpenCL device exists. Prints one CSV line per run:
//   variant,threads,seconds,pretouched,checksum
// Usage: logistic_map_native [elements] [runs] [file to write the optimised result to]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/opencl/opencl_backend.hpp"
#include "core/host_buffer.hpp"
#include "core/logistic_map.hpp"

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The naive loop: correct for this workload only (mu * x * (x + 1) < 2^63 for x < 2^25, p < 2^23).
__attribute__((noinline)) void naive(const int64_t* in, int64_t* out, size_t begin, size_t end, int64_t p, int64_t mu, int iterations) {
  for (size_t i = begin; i < end; ++i) {
    int64_t x = in[i];
    for (int k = 0; k < iterations; ++k) x = mu * x * (x + 1) % p;
    out[i] = x;
  }
}

uint64_t checksum(const int64_t* v, size_t n) {  // FNV-1a over the values, for cross-checking rows
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<uint64_t>(v[i])) * 1099511628211ULL;
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 0x2000000;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 3;
  const int64_t p = 6700417, mu = 22;
  const int iterations = 10;
  const unsigned threads = std::thread::hardware_concurrency();

  std::vector<int64_t> in(n);
  for (size_t i = 0; i < n; ++i) in[i] = static_cast<int64_t>(i) + 1;
  const auto plan = accel::plan_logistic_map(p, mu, iterations);
  accel::cpu::CpuBackend backend(threads);
  const auto src = accel::Int64Source::of_bytes(reinterpret_cast<const unsigned char*>(in.data()), n);

  auto report = [&](const char* variant, unsigned t, double s, bool pretouched, const int64_t* out) {
    std::printf("%s,%u,%.6f,%s,%016llx\n", variant, t, s, pretouched ? "yes" : "no",
                static_cast<unsigned long long>(checksum(out, n)));
    std::fflush(stdout);
  };

  // OpenCL: the first call pays discovery, context and program build; later calls reuse them.
  std::unique_ptr<accel::Backend> opencl;
  {
    const double t0 = now();
    auto candidate = accel::opencl::make_backend();
    if (candidate->status().available) {
      std::vector<int64_t> out(n, 0);
      candidate->logistic_map(src, reinterpret_cast<unsigned char*>(out.data()), plan, {});
      report("opencl_first_call", 0, now() - t0, true, out.data());
      opencl = std::move(candidate);
    }
  }

  for (int r = 0; r < runs; ++r) {
    // Pre-touched output: measures compute alone.
    std::vector<int64_t> out(n, 0);
    double t0 = now();
    naive(in.data(), out.data(), 0, n, p, mu, iterations);
    report("naive", 1, now() - t0, true, out.data());

    std::memset(out.data(), 0, n * 8);
    t0 = now();
    accel::cpu::logistic_map_span(src, reinterpret_cast<unsigned char*>(out.data()), 0, n, plan);
    report("optimised", 1, now() - t0, true, out.data());

    std::memset(out.data(), 0, n * 8);
    t0 = now();
    backend.logistic_map(src, reinterpret_cast<unsigned char*>(out.data()), plan, {});
    report("optimised", threads, now() - t0, true, out.data());

    if (opencl) {
      std::memset(out.data(), 0, n * 8);
      t0 = now();
      opencl->logistic_map(src, reinterpret_cast<unsigned char*>(out.data()), plan, {});
      report("opencl", 0, now() - t0, true, out.data());
      std::memset(out.data(), 0, n * 8);
      t0 = now();
      opencl->logistic_map(accel::Int64Source::of_range(1, 1, n), reinterpret_cast<unsigned char*>(out.data()), plan, {});
      report("opencl_range", 0, now() - t0, true, out.data());
    }

    {  // The output allocated per call as the NIF does (HostBuffer: the first run maps and faults
       // fresh pages, later runs reuse the cached mapping); its allocation is part of the time.
      t0 = now();
      accel::HostBuffer fresh(n * 8);
      backend.logistic_map(src, fresh.data(), plan, {});
      const double s = now() - t0;
      report("optimised_hostbuffer", threads, s, r > 0, reinterpret_cast<const int64_t*>(fresh.data()));
    }
  }
  if (argc > 3) {  // for the caller to check against its own reference
    std::vector<int64_t> out(n);
    backend.logistic_map(src, reinterpret_cast<unsigned char*>(out.data()), plan, {});
    FILE* f = std::fopen(argv[3], "wb");
    if (f == nullptr || std::fwrite(out.data(), 8, n, f) != n || std::fclose(f) != 0) {
      std::perror(argv[3]);
      return 1;
    }
  }
  return 0;
}
