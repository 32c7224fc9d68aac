// The CPU backend's tensors: buffers in host memory (HostBuffer: huge pages, reuse cache), kernels
// from backends/tensor_elements.hpp run over the pool, matmul through OpenBLAS's cblas_?gemm when
// the build found it (ACCEL_WITH_OPENBLAS). Operations are synchronous.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/tensor_elements.hpp"
#include "core/error.hpp"
#include "core/host_buffer.hpp"

#ifdef ACCEL_WITH_OPENBLAS
#include <cblas.h>
#include <climits>
#endif

namespace accel::cpu {
namespace {

constexpr size_t kGrain = 1 << 16;  // elements per pool chunk for memory-bound loops

class CpuBuffer final : public DeviceBuffer {
 public:
  CpuBuffer(size_t bytes, std::shared_ptr<std::atomic<int64_t>> counter)
      : DeviceBuffer(bytes, 0), host_(std::max<size_t>(bytes, 1)), counter_(std::move(counter)) {
    counter_->fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  }
  ~CpuBuffer() override { counter_->fetch_sub(static_cast<int64_t>(bytes()), std::memory_order_relaxed); }
  unsigned char* data() const { return host_.data(); }

 private:
  HostBuffer host_;
  std::shared_ptr<std::atomic<int64_t>> counter_;
};

template <typename T>
T* data(const DeviceBuffer& b) {
  return reinterpret_cast<T*>(static_cast<const CpuBuffer&>(b).data());
}

// Operand element i of an output of n: the scalar, the element itself, or its broadcast repeat.
template <typename T>
struct Reader {
  const T* p;
  size_t count;
  T scalar;
  bool repeats;
  Reader(const Operand& o, size_t n)
      : p(o.buffer != nullptr ? data<T>(*o.buffer) : nullptr),
        count(o.count),
        scalar(std::is_floating_point_v<T> ? static_cast<T>(o.scalar.f) : static_cast<T>(o.scalar.i)),
        repeats(o.buffer != nullptr && o.count != n) {}
  T operator[](size_t i) const { return p == nullptr ? scalar : p[repeats ? i % count : i]; }
};

}  // namespace

std::shared_ptr<DeviceBuffer> CpuBackend::allocate(int device, size_t bytes) {
  if (device != 0) throw ArgumentError("the cpu backend has one device, 0; got device " + std::to_string(device));
  return std::make_shared<CpuBuffer>(bytes, tensor_bytes_);
}

void CpuBackend::upload(DeviceBuffer& dst, const void* src) {
  pool_.parallel_for(dst.bytes(), size_t{1} << 22, [&](size_t begin, size_t end) {
    std::memcpy(data<unsigned char>(dst) + begin, static_cast<const unsigned char*>(src) + begin, end - begin);
  });
}

void CpuBackend::download(const DeviceBuffer& src, void* dst, size_t bytes) {
  pool_.parallel_for(bytes, size_t{1} << 22, [&](size_t begin, size_t end) {
    std::memcpy(static_cast<unsigned char*>(dst) + begin, data<unsigned char>(src) + begin, end - begin);
  });
}

void CpuBackend::iota(DeviceBuffer& out, DType type, size_t n) {
  visit_type(type, [&](auto tag) {
    using T = decltype(tag);
    T* o = data<T>(out);
    pool_.parallel_for(n, kGrain, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) o[i] = element_cast<int64_t, T>(static_cast<int64_t>(i));
    });
  });
}

void CpuBackend::cast(const DeviceBuffer& in, DType from, DeviceBuffer& out, DType to, size_t n) {
  visit_type(from, [&](auto from_tag) {
    visit_type(to, [&](auto to_tag) {
      using F = decltype(from_tag);
      using T = decltype(to_tag);
      const F* x = data<F>(in);
      T* o = data<T>(out);
      pool_.parallel_for(n, kGrain, [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) o[i] = element_cast<F, T>(x[i]);
      });
    });
  });
}

// Calls f(std::integral_constant<int, op>) so that loops see a constant operation: the per-element
// functions of kernels/tensor.h then inline to one instruction and the loops vectorise.
template <int N, typename F>
void with_op(int op, F&& f) {
  if constexpr (N > 0) {
    if (op == N - 1) return f(std::integral_constant<int, N - 1>{});
    with_op<N - 1>(op, f);
  }
}

void CpuBackend::binary(BinaryOp op, DType type, const Operand& a, const Operand& b, DeviceBuffer& out, size_t n) {
  with_op<4>(static_cast<int>(op), [&](auto code) { binary_with(code, type, a, b, out, n); });
}

template <typename Op>
void CpuBackend::binary_with(Op code, DType type, const Operand& a, const Operand& b, DeviceBuffer& out, size_t n) {
  const BinaryOp op = static_cast<BinaryOp>(code());
  visit_type(type, [&](auto tag) {
    using T = decltype(tag);
    const Reader<T> x(a, n), y(b, n);
    T* o = data<T>(out);
    if constexpr (!std::is_floating_point_v<T>) {
      if (op == BinaryOp::Divide) {  // report a zero divisor instead of a silent 0
        std::atomic<bool> zero{false};
        pool_.parallel_for(n, kGrain, [&](size_t begin, size_t end) {
          for (size_t i = begin; i < end; ++i) {
            if (y[i] == 0) zero.store(true, std::memory_order_relaxed);
            o[i] = element_binary<T>(code, x[i], y[i]);
          }
        });
        if (zero) throw ArgumentError("integer division by zero in Accel.Tensor.divide/2");
        return;
      }
    }
    pool_.parallel_for(n, kGrain, [&](size_t begin, size_t end) {
      if (x.p != nullptr && y.p != nullptr && !x.repeats && !y.repeats) {  // the common case, vectorisable
        for (size_t i = begin; i < end; ++i) o[i] = element_binary<T>(code, x.p[i], y.p[i]);
      } else {
        for (size_t i = begin; i < end; ++i) o[i] = element_binary<T>(code, x[i], y[i]);
      }
    });
  });
}

void CpuBackend::unary(UnaryOp op, DType type, const DeviceBuffer& in, DeviceBuffer& out, size_t n) {
  with_op<7>(static_cast<int>(op), [&](auto code) {
    visit_type(type, [&](auto tag) {
      using T = decltype(tag);
      const T* x = data<T>(in);
      T* o = data<T>(out);
      pool_.parallel_for(n, kGrain / 8, [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) o[i] = element_unary<T>(code(), x[i]);
      });
    });
  });
}

// Sums accumulate in double for floats (rounded once at the end), in wrapping 64-bit for integers;
// min and max keep the element type. Work splits over outputs and, for few outputs, along the axis.
void CpuBackend::reduce(ReduceOp op, DType type, const DeviceBuffer& in, DeviceBuffer& out, size_t outer, size_t len,
                        size_t inner) {
  const int code = static_cast<int>(op);
  visit_type(type, [&](auto tag) {
    using T = decltype(tag);
    using Out = sum_type_t<T>;
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;
    const T* x = data<T>(in);
    const bool sum = op == ReduceOp::Sum;
    // Parts of the axis reduced separately, then combined: enough (outer, part) tasks to keep every
    // thread busy, each at least 64 rows of the axis long.
    const size_t outputs = outer * inner;
    const size_t parts = std::clamp<size_t>(threads() * 4 / std::max<size_t>(outer, 1), 1, std::max<size_t>(len / 64, 1));
    const size_t part_len = (len + parts - 1) / parts;
    std::vector<Acc> sums(sum ? outputs * parts : 0);
    std::vector<T> picks(sum ? 0 : outputs * parts);
    std::vector<char> seen(outputs * parts, 0);
    // One task: (o, part) over all of inner, walking the axis with contiguous reads of inner.
    pool_.parallel_for(outer * parts, 1, [&](size_t begin, size_t end) {
      for (size_t task = begin; task < end; ++task) {
        const size_t o = task / parts, part = task % parts;
        const size_t j0 = std::min(len, part * part_len), j1 = std::min(len, j0 + part_len);
        const size_t slot = (o * parts + part) * inner;
        if (inner == 1 && j1 > j0) {  // contiguous: local accumulators, four for sums (latency)
          const T* row = x + o * len;
          if (sum) {
            Acc acc[4] = {0, 0, 0, 0};
            size_t j = j0;
            for (; j + 4 <= j1; j += 4)
              for (int u = 0; u < 4; ++u) acc[u] += static_cast<Acc>(row[j + u]);
            for (; j < j1; ++j) acc[0] += static_cast<Acc>(row[j]);
            sums[slot] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
          } else {
            T acc = row[j0];
            with_op<3>(code, [&](auto c) {
              for (size_t j = j0 + 1; j < j1; ++j) acc = element_pick<T>(c(), acc, row[j]);
            });
            picks[slot] = acc;
          }
          seen[slot] = 1;
          continue;
        }
        for (size_t j = j0; j < j1; ++j) {
          const T* row = x + (o * len + j) * inner;
          if (sum) {
            Acc* acc = sums.data() + slot;
            for (size_t k = 0; k < inner; ++k) acc[k] += static_cast<Acc>(row[k]);
          } else if (j == j0) {
            std::copy(row, row + inner, picks.data() + slot);
          } else {
            T* acc = picks.data() + slot;
            for (size_t k = 0; k < inner; ++k) acc[k] = element_pick<T>(code, acc[k], row[k]);
          }
        }
        if (j1 > j0) std::fill(seen.begin() + static_cast<ptrdiff_t>(slot), seen.begin() + static_cast<ptrdiff_t>(slot + inner), 1);
      }
    });
    Out* sum_out = data<Out>(out);  // sums are written as sum_type, min and max as T
    T* pick_out = data<T>(out);
    for (size_t r = 0; r < outer; ++r) {
      for (size_t k = 0; k < inner; ++k) {
        const size_t index = r * inner + k;
        if (sum) {
          Acc acc = 0;
          for (size_t part = 0; part < parts; ++part) acc += sums[(r * parts + part) * inner + k];
          sum_out[index] = static_cast<Out>(acc);
        } else {
          bool first = true;
          T acc{};
          for (size_t part = 0; part < parts; ++part) {
            const size_t slot = (r * parts + part) * inner + k;
            if (!seen[slot]) continue;
            acc = first ? picks[slot] : element_pick<T>(code, acc, picks[slot]);
            first = false;
          }
          pick_out[index] = acc;
        }
      }
    }
  });
}

void CpuBackend::transpose(size_t element_size, const DeviceBuffer& in, DeviceBuffer& out, size_t rows, size_t cols) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* x = data<T>(in);
    T* o = data<T>(out);
    constexpr size_t kTile = 32;  // tiles keep both the reads and the writes within cache lines
    const size_t row_tiles = (rows + kTile - 1) / kTile;
    pool_.parallel_for(row_tiles, 1, [&](size_t begin, size_t end) {
      for (size_t rt = begin; rt < end; ++rt) {
        const size_t r0 = rt * kTile, r1 = std::min(rows, r0 + kTile);
        for (size_t c0 = 0; c0 < cols; c0 += kTile) {
          const size_t c1 = std::min(cols, c0 + kTile);
          for (size_t r = r0; r < r1; ++r)
            for (size_t c = c0; c < c1; ++c) o[c * rows + r] = x[r * cols + c];
        }
      }
    });
  };
  if (element_size == 8) run(uint64_t{});
  else if (element_size == 4) run(uint32_t{});
  else run(uint8_t{});
}

void CpuBackend::matmul(DType type, const DeviceBuffer& a, const DeviceBuffer& b, DeviceBuffer& out, size_t m, size_t k,
                        size_t n) {
#ifdef ACCEL_WITH_OPENBLAS
  if (m > INT_MAX || k > INT_MAX || n > INT_MAX)
    throw ArgumentError("matmul dimensions must each be below 2^31 for BLAS");
  const int M = static_cast<int>(m), K = static_cast<int>(k), N = static_cast<int>(n);
  if (k == 0) {  // BLAS leaves C alone when there is nothing to sum; the product is zeros
    std::memset(data<unsigned char>(out), 0, out.bytes());
    return;
  }
  if (type == DType::F32)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, data<float>(a), K, data<float>(b), N, 0.0f,
                data<float>(out), N);
  else
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0, data<double>(a), K, data<double>(b), N, 0.0,
                data<double>(out), N);
#else
  (void)type, (void)a, (void)b, (void)out, (void)m, (void)k, (void)n;
  throw ArgumentError("matmul on :cpu needs OpenBLAS, which this build did not find (run bin/setup, then rebuild)");
#endif
}

void CpuBackend::logistic_map_buffer(const DeviceBuffer& in, DeviceBuffer& out, size_t n, const LogisticMapPlan& plan,
                                     const CallOptions& options) {
  logistic_map(Int64Source::of_bytes(data<unsigned char>(in), n), data<unsigned char>(out), plan, options);
}

}  // namespace accel::cpu
