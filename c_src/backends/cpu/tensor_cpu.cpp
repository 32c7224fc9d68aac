// The CPU backend's side of the launch door: buffers in host memory (HostBuffer: huge pages, reuse
// cache), and the kernels of kernels/tensor_kernels.h compiled as host C++ (host_kernels.hpp) and
// run over the pool; matmul through OpenBLAS's cblas_?gemm when the build found it
// (ACCEL_WITH_OPENBLAS). Synchronous.
#include <algorithm>
#include <complex>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/host_kernels.hpp"
#include "core/error.hpp"
#include "core/host_buffer.hpp"
#include "core/source_kernel.hpp"

#ifdef ACCEL_WITH_OPENBLAS
#include <cblas.h>
#include <climits>
#endif

namespace accel::cpu {
namespace {

class CpuBuffer final : public DeviceBuffer {
 public:
  CpuBuffer(size_t bytes, std::shared_ptr<std::atomic<int64_t>> counter)
      : DeviceBuffer(bytes, 0), host_(std::max<size_t>(bytes, 1)), data_(host_.data()), counter_(std::move(counter)) {
    counter_->fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  }
  // Over memory someone else owns (wrap_host): `owner` keeps it alive as long as the buffer.
  CpuBuffer(const void* data, size_t bytes, std::shared_ptr<const void> owner,
            std::shared_ptr<std::atomic<int64_t>> counter)
      : DeviceBuffer(bytes, 0),
        data_(static_cast<unsigned char*>(const_cast<void*>(data))),
        owner_(std::move(owner)),
        counter_(std::move(counter)) {
    counter_->fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  }
  ~CpuBuffer() override { counter_->fetch_sub(static_cast<int64_t>(bytes()), std::memory_order_relaxed); }
  unsigned char* data() const { return data_; }
  bool borrowed() const override { return owner_ != nullptr; }

 private:
  HostBuffer host_;
  unsigned char* data_;
  std::shared_ptr<const void> owner_;
  std::shared_ptr<std::atomic<int64_t>> counter_;
};

template <typename T>
T* data(const DeviceBuffer& b) {
  return reinterpret_cast<T*>(static_cast<const CpuBuffer&>(b).data());
}


void check_queue(int device, size_t queue) {
  if (device != 0) throw ArgumentError("the cpu backend has one device, 0; got device " + std::to_string(device));
  if (queue != 0) throw ArgumentError("the cpu backend has one queue, 0; got queue " + std::to_string(queue));
}

}  // namespace

std::shared_ptr<DeviceBuffer> CpuBackend::allocate(int device, size_t bytes) {
  check_queue(device, 0);
  return std::make_shared<CpuBuffer>(bytes, tensor_bytes_);
}

std::shared_ptr<DeviceBuffer> CpuBackend::wrap_host(int device, const void* data, size_t bytes,
                                                    std::shared_ptr<const void> owner) {
  check_queue(device, 0);
  return std::make_shared<CpuBuffer>(data, bytes, std::move(owner), tensor_bytes_);
}

const void* CpuBackend::host_view(const DeviceBuffer& b) { return data<unsigned char>(b); }

// Every transfer is a copy in host memory, in pieces of 4 MiB over the pool.
void CpuBackend::copy_bytes(void* dst, const void* src, size_t bytes) {
  pool_.parallel_for(bytes, size_t{1} << 22, [&](size_t begin, size_t end) {
    std::memcpy(static_cast<unsigned char*>(dst) + begin, static_cast<const unsigned char*>(src) + begin, end - begin);
  });
}

void CpuBackend::upload(DeviceBuffer& dst, const void* src) { copy_bytes(data<unsigned char>(dst), src, dst.bytes()); }

void CpuBackend::download(const DeviceBuffer& src, void* dst, size_t bytes) {
  copy_bytes(dst, data<unsigned char>(src), bytes);
}

void CpuBackend::copy(const DeviceBuffer& src, DeviceBuffer& dst, size_t bytes) { download(src, data<unsigned char>(dst), bytes); }

void CpuBackend::enqueue_upload(DeviceBuffer& dst, const void* src, size_t bytes, size_t queue) {
  check_queue(dst.device(), queue);
  copy_bytes(data<unsigned char>(dst), src, bytes);
}

void CpuBackend::enqueue_download(const DeviceBuffer& src, void* dst, size_t bytes, size_t queue) {
  check_queue(src.device(), queue);
  download(src, dst, bytes);
}

void CpuBackend::finish(int device, size_t queue) { check_queue(device, queue); }

void CpuBackend::zero(DeviceBuffer& dst) { std::memset(data<unsigned char>(dst), 0, dst.bytes()); }

void CpuBackend::launch(Kernel kernel, int device, const accel_params& params, const KernelBuffers& buffers,
                        size_t work_per_item, const Cancellation* cancel, size_t queue) {
  check_queue(device, queue);
  void* b[4];
  for (size_t i = 0; i < 4; ++i) b[i] = buffers[i] != nullptr ? data<unsigned char>(*buffers[i]) : nullptr;
  if (kernel == Kernel::accel_logistic_map) {
    // The same math as the kernel, through the CPU's tuned loop (blocks of 256, the f64 path
    // vectorised and dispatched to AVX2): ~2x the per-element loop. In place, cancellable inside.
    const LogisticMapPlan plan = logistic_map_plan_of(params);
    auto* x = static_cast<unsigned char*>(b[0]);
    const size_t n = static_cast<size_t>(params.n);
    CallOptions options;
    options.cancel = cancel;
    logistic_map(params.count[2] ? Int64Source::of_range(static_cast<int64_t>(params.shape[0]),
                                                         static_cast<int64_t>(params.shape[1]), n)
                                 : Int64Source::of_bytes(x, n),
                 x, plan, options);
    return;
  }
  const HostEntry entry = active_host_entries()[static_cast<int>(kernel)];
  // Tasks of about 2^16 elements read: small enough to balance, large enough to amortise a task. A
  // reduction over columns reads a row's run of them at a time: a task of a few columns would read a
  // cache line (and a page) per row, so its tasks hold whole runs.
  size_t grain = std::max<size_t>(1, (size_t{1} << 16) / std::max<size_t>(work_per_item, 1));
  if (column_kernel(kernel) && params.size[2] > 1 && params.size[4] != 0)
    grain = std::max<size_t>(grain, static_cast<size_t>(std::min<accel_u64>(params.size[2], kColumnPiece)));
  pool_.parallel_for(static_cast<size_t>(params.n), grain,
                     [&](size_t begin, size_t end) { entry(b[0], b[1], b[2], b[3], &params, begin, end); });
}

// A generated kernel's compiled entry over the pool, in tasks of 2^14 elements (a generated
// kernel's cost per element is unknown: loops may make it large), polling `cancel` between them.
void CpuBackend::launch_source(const SourceKernel& kernel, int device, uint64_t n,
                               const std::vector<const DeviceBuffer*>& buffers, const std::vector<uint64_t>& scalars,
                               const Cancellation* cancel, size_t queue) {
  check_queue(device, queue);
  if (kernel.host == nullptr) throw std::logic_error("a source kernel reached the CPU backend without its compiled entry");
  std::vector<void*> b;
  b.reserve(buffers.size() + 1);
  for (const DeviceBuffer* buffer : buffers) b.push_back(data<unsigned char>(*buffer));
  // After the buffers, the poll a generated kernel's loops ask (ACCEL_STOPPED, kernels/user.h):
  // an element whose loop would run for hours stops once its caller is gone.
  struct Stop {
    int (*poll)(const void*);
    const void* ctx;
  } stop{[](const void* c) { return static_cast<const Cancellation*>(c)->cancelled() ? 1 : 0; }, cancel};
  b.push_back(cancel != nullptr ? static_cast<void*>(&stop) : nullptr);
  pool_.parallel_for(static_cast<size_t>(n), size_t{1} << 14, [&](size_t begin, size_t end) {
    if (cancel != nullptr) cancel->throw_if_cancelled();
    kernel.host(b.data(), scalars.data(), begin, end);
  });
  // an element stopped in its loop returned no value: the call is abandoned, not finished
  if (cancel != nullptr) cancel->throw_if_cancelled();
}

namespace {
// Products of fewer multiply-adds than this run on the calling thread; a block has at least
// kMinBlock rows (or columns).
constexpr double kParallelMacs = 1 << 20;
constexpr size_t kMinBlock = 16;
}  // namespace

void CpuBackend::matmul_transposed(DType type, const DeviceBuffer& a, const DeviceBuffer& b, DeviceBuffer& out,
                                   size_t batch, size_t m, size_t k, size_t n, bool trans_a, bool trans_b) {
#ifdef ACCEL_WITH_OPENBLAS
  if (m > INT_MAX || k > INT_MAX || n > INT_MAX)
    throw ArgumentError("matmul dimensions must each be below 2^31 for BLAS");
  const int K = static_cast<int>(k), N = static_cast<int>(n);
  // op(A) = A or A^T (stored k x m: its leading dimension m), op(B) likewise (stored n x k)
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  const int lda = trans_a ? static_cast<int>(m) : K, ldb = trans_b ? K : N;
  if (k == 0) {  // BLAS leaves C alone when there is nothing to sum; the product is zeros
    std::memset(data<unsigned char>(out), 0, out.bytes());
    return;
  }
  // One block of product i on the calling thread (OpenBLAS on one thread): rows [r0, r1) of op(A)
  // times columns [c0, c1) of op(B) (a transposed operand's rows are its stored columns).
  const auto block = [&](size_t i, size_t r0, size_t r1, size_t c0, size_t c1) {
    const int rows = static_cast<int>(r1 - r0), cols = static_cast<int>(c1 - c0);
    const size_t a_at = i * m * k + (trans_a ? r0 : r0 * k), b_at = i * k * n + (trans_b ? c0 * k : c0);
    if (type == DType::F32)
      cblas_sgemm(CblasRowMajor, ta, tb, rows, cols, K, 1.0f, data<float>(a) + a_at, lda, data<float>(b) + b_at, ldb,
                  0.0f, data<float>(out) + i * m * n + r0 * n + c0, N);
    else
      cblas_dgemm(CblasRowMajor, ta, tb, rows, cols, K, 1.0, data<double>(a) + a_at, lda, data<double>(b) + b_at, ldb,
                  0.0, data<double>(out) + i * m * n + r0 * n + c0, N);
  };
  // The products over the backend's own threads, OpenBLAS on one thread (set when the backend
  // starts: its own threads spin between products, taking the cores the next kernel needs). Each
  // unit is a batch entry, or where there are fewer entries than threads a block of one: of its
  // rows where A is the larger operand, of its columns where B is (each thread packs the other
  // operand whole, so the smaller one is the one read twice).
  const size_t threads = pool_.threads();
  const double macs = static_cast<double>(batch) * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n);
  if (threads == 1 || macs < kParallelMacs) {
    for (size_t i = 0; i < batch; ++i) block(i, 0, m, 0, n);
    return;
  }
  const bool by_rows = m >= n;
  const size_t extent = by_rows ? m : n;
  const size_t blocks =
      batch >= threads ? 1 : std::min<size_t>((threads + batch - 1) / batch, std::max<size_t>(extent / kMinBlock, 1));
  const size_t per = (extent + blocks - 1) / blocks;
  pool_.parallel_for(batch * blocks, 1, [&](size_t begin, size_t end) {
    for (size_t u = begin; u < end; ++u) {
      const size_t i = u / blocks, lo = (u % blocks) * per, hi = std::min(extent, lo + per);
      if (lo >= hi) continue;
      if (by_rows)
        block(i, lo, hi, 0, n);
      else
        block(i, 0, m, lo, hi);
    }
  });
#else
  (void)type, (void)a, (void)b, (void)out, (void)batch, (void)m, (void)k, (void)n, (void)trans_a, (void)trans_b;
  throw ArgumentError("matmul on :cpu needs OpenBLAS, which this build did not find (run bin/setup, then rebuild)");
#endif
}

#ifdef ACCEL_WITH_OPENBLAS
namespace {

void gemm(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}
void gemm(int m, int n, int k, const double* a, int lda, const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}
// (complex elements as Nx stores them, (re, im) pairs: std::complex's layout, BLAS's c and z)
void gemm(int m, int n, int k, const std::complex<float>* a, int lda, const std::complex<float>* b, int ldb,
          std::complex<float> beta, std::complex<float>* c, int ldc) {
  const std::complex<float> one(1.0f, 0.0f);
  cblas_cgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, &one, a, lda, b, ldb, &beta, c, ldc);
}
void gemm(int m, int n, int k, const std::complex<double>* a, int lda, const std::complex<double>* b, int ldb,
          std::complex<double> beta, std::complex<double>* c, int ldc) {
  const std::complex<double> one(1.0, 0.0);
  cblas_zgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, &one, a, lda, b, ldb, &beta, c, ldc);
}

// Columns [c0, c1) of image i's products: each kernel position's filters (filters x channels) by
// the image's channels shifted by that position (channels x columns, rows a plane apart), summed
// into `wide` (filters x (c1 - c0): a row per filter, a column per plane position from the first
// output position's), whose columns at output positions are then copied out, a run along the last
// axis at a time.
template <typename T>
void conv_image(const T* input, const T* kernel, T* out, const ShiftedConv& c, size_t i, size_t c0, size_t c1,
                T* wide) {
  const size_t filters = static_cast<size_t>(c.filters), cols = c1 - c0, rank = c.out_sizes.size();
  const int C = static_cast<int>(c.channels), plane = static_cast<int>(c.plane);
  const T* image = input + i * c.channels * c.plane + c0;
  for (size_t p = 0; p < c.offsets.size(); ++p)
    gemm(static_cast<int>(filters), static_cast<int>(cols), C, kernel + p * c.filters * c.channels, C,
         image + c.offsets[p], plane, p == 0 ? T(0) : T(1), wide, static_cast<int>(cols));
  size_t out_size = 1;
  for (uint64_t s : c.out_sizes) out_size *= static_cast<size_t>(s);
  const size_t run = static_cast<size_t>(c.out_sizes[rank - 1]);
  std::vector<size_t> at(rank, 0);  // the output position of a run's start (its last axis 0)
  for (size_t done = 0; done < out_size; done += run) {
    size_t column = 0;
    for (size_t d = 0; d + 1 < rank; ++d) column += at[d] * static_cast<size_t>(c.plane_strides[d]);
    // the part of the run [column, column + run) among these columns
    const size_t lo = std::max(column, c0), hi = std::min(column + run, c1);
    if (lo < hi)
      for (size_t f = 0; f < filters; ++f)
        std::memcpy(out + (i * filters + f) * out_size + done + (lo - column), wide + f * cols + (lo - c0),
                    (hi - lo) * sizeof(T));
    for (size_t d = rank - 1; d-- > 0;) {
      if (++at[d] < c.out_sizes[d]) break;
      at[d] = 0;
    }
  }
}

// Each image a unit on the backend's threads, or where there are fewer images than threads, a
// block of an image's columns (OpenBLAS on one thread, as for matmul).
template <typename T>
void conv_images(ThreadPool& pool, const T* input, const T* kernel, T* out, const ShiftedConv& c) {
  const size_t batch = static_cast<size_t>(c.batch), span = static_cast<size_t>(c.span);
  // (a complex multiply-add is four real ones)
  const double macs = static_cast<double>(c.batch) * static_cast<double>(c.filters) * static_cast<double>(c.channels) *
                      static_cast<double>(c.span) * static_cast<double>(c.offsets.size()) *
                      (std::is_floating_point_v<T> ? 1.0 : 4.0);
  const size_t threads = pool.threads();
  const bool parallel = threads > 1 && macs >= kParallelMacs;
  const size_t blocks = !parallel || batch >= threads
                            ? 1
                            : std::min<size_t>((threads + batch - 1) / batch, std::max<size_t>(span / kMinBlock, 1));
  const size_t per = (span + blocks - 1) / blocks;
  const auto units = [&](size_t begin, size_t end) {
    // (Accel's host memory: a buffer of a few hundred KiB reuses pages an earlier call touched,
    // where malloc's would be mapped, faulted and unmapped on every call; products write it before
    // any read)
    const HostBuffer wide(static_cast<size_t>(c.filters) * per * sizeof(T));
    for (size_t u = begin; u < end; ++u) {
      const size_t i = u / blocks, lo = (u % blocks) * per, hi = std::min(span, lo + per);
      if (lo < hi) conv_image(input, kernel, out, c, i, lo, hi, reinterpret_cast<T*>(wide.data()));
    }
  };
  if (parallel)
    pool.parallel_for(batch * blocks, 1, units);
  else
    units(0, batch * blocks);
}

}  // namespace
#endif

void CpuBackend::conv_shifted(DType type, const DeviceBuffer& input, const DeviceBuffer& kernel, DeviceBuffer& out,
                              const ShiftedConv& c) {
#ifdef ACCEL_WITH_OPENBLAS
  const auto run = [&](auto element) {
    using T = decltype(element);
    conv_images(pool_, data<T>(input), data<T>(kernel), data<T>(out), c);
  };
  switch (type) {
    case DType::F32: return run(float{});
    case DType::F64: return run(double{});
    case DType::C64: return run(std::complex<float>{});
    case DType::C128: return run(std::complex<double>{});
    default: throw ArgumentError(std::string("a shifted convolution takes f32, f64, c64 or c128, got: ") + dtype_name(type));
  }
#else
  (void)type, (void)input, (void)kernel, (void)out, (void)c;
  throw ArgumentError("conv on :cpu needs OpenBLAS, which this build did not find (run bin/setup, then rebuild)");
#endif
}

}  // namespace accel::cpu
