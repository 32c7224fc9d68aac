// The linear algebra with results Nx's own compositions would give: Cholesky, QR, determinants,
// solves (so inverses) and triangular solves, on the host in f64 (an f32 matrix is read as f64
// and each result rounded once, as Accel computes f32 functions). The CPU backend's tensors are
// host memory already; a device's are read to the host, computed there and written back: no GPU
// solver is wired in yet, and an OpenCL device has no vendor LAPACK to call, so the host's is the
// honest choice there. Each matrix of a batch is computed on its own; OpenBLAS's threads
// parallelise the larger ones.
//
// Cholesky factors, determinants and solutions are unique, and come from LAPACK (OpenBLAS ships
// it). Q and R are unique only up to signs, and Nx differentiates QR through its own Householder
// composition, with that composition's factors: a Q in LAPACK's signs would make every gradient
// through it wrong. So QR is Nx's algorithm itself, reflection by reflection, in C++.
//
// Tensors are row-major, LAPACK is column-major: LAPACK works on a column-major copy (it overwrites
// its input anyway). A matrix holding NaN or an infinity gets NaN factors.
//
// Working memory comes from Accel's host mappings (HostBuffer), reused from call to call: a first
// touch of a 4 KiB page costs microseconds on these VMs, and the fresh copies of a 512 x 512
// matrix took longer than its Cholesky factorisation. The CPU backend's tensors are read and
// written in place (no staging copy).
//
// The arithmetic runs on one thread of Accel's with a 64 MiB stack, one call at a time: OpenBLAS's
// factorisations need more stack than a BEAM dirty scheduler has (a 128 x 128 Cholesky overflowed
// one and took the VM down), and its threaded LAPACK routines are not safe to enter from several
// threads at once. The caller (a dirty scheduler, or a device's queue) waits for it.
#include <pthread.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <complex>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "core/error.hpp"
#include "core/host_buffer.hpp"
#include "core/tensor.hpp"
#include "core/tensor_checks.hpp"

#ifdef ACCEL_WITH_OPENBLAS
#include <cblas.h>

// LAPACK's Fortran entry points (32-bit integers, as Debian's OpenBLAS builds them), with the
// trailing lengths gfortran passes for character arguments.
extern "C" {
void dpotrf_(const char*, const int*, double*, const int*, int*, size_t);
void dgetrf_(const int*, const int*, double*, const int*, int*, int*);
void dgetrs_(const char*, const int*, const int*, const double*, const int*, const int*, double*, const int*, int*,
             size_t);
void zgetrf_(const int*, const int*, std::complex<double>*, const int*, int*, int*);
void zgetrs_(const char*, const int*, const int*, const std::complex<double>*, const int*, const int*,
             std::complex<double>*, const int*, int*, size_t);
}
#endif

namespace accel {
using namespace detail;
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// n doubles of Accel's host memory (uninitialised).
class F64Buffer {
 public:
  explicit F64Buffer(size_t n) : mem_(std::max<size_t>(n, 1) * sizeof(double)), n_(n) {}
  double* data() const { return reinterpret_cast<double*>(mem_.data()); }
  size_t size() const { return n_; }
  double* begin() const { return data(); }
  double* end() const { return data() + n_; }

 private:
  HostBuffer mem_;
  size_t n_;
};

// The thread the arithmetic runs on: started on first use, never stopped (a static destructor could
// run while a dirty scheduler is still inside a call at VM exit).
class ArithmeticThread {
 public:
  static ArithmeticThread& get() {
    static ArithmeticThread* t = new ArithmeticThread();
    return *t;
  }

  // Runs `work` there and returns when it has; its exception, if any, is rethrown here.
  void run(const std::function<void()>& work) {
    std::lock_guard<std::mutex> one_at_a_time(calls_);
    if (!started_) start();
    std::unique_lock<std::mutex> lock(mutex_);
    work_ = &work;
    error_ = nullptr;
    cv_.notify_all();
    cv_.wait(lock, [&] { return work_ == nullptr; });
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void start() {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, size_t{64} << 20);
    pthread_t thread;
    const int failed = pthread_create(&thread, &attr, &ArithmeticThread::main, this);
    pthread_attr_destroy(&attr);
    if (failed != 0) throw Error("out_of_memory", "could not start the linear algebra's thread");
    pthread_detach(thread);
    started_ = true;
  }

  static void* main(void* self) {
    auto* t = static_cast<ArithmeticThread*>(self);
    std::unique_lock<std::mutex> lock(t->mutex_);
    for (;;) {
      t->cv_.wait(lock, [&] { return t->work_ != nullptr; });
      try {
        (*t->work_)();
      } catch (...) {
        t->error_ = std::current_exception();
      }
      t->work_ = nullptr;
      t->cv_.notify_all();
    }
  }

  std::mutex calls_;  // one caller at a time
  bool started_ = false;
  std::mutex mutex_;
  std::condition_variable cv_;
  const std::function<void()>* work_ = nullptr;
  std::exception_ptr error_;
};

void on_arithmetic_thread(const std::function<void()>& work) { ArithmeticThread::get().run(work); }

bool finite(const double* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i])) return false;
  return true;
}

// ---- one matrix each, in f64; `out` points at the matrix's place in each result ----

#ifdef ACCEL_WITH_OPENBLAS
constexpr bool kBlas = true;
#else
constexpr bool kBlas = false;

// Without BLAS, Q's reflections one by one: M[row][j] -= tau (v . M[:, j]) v[row] for rows
// [row0, rows) and columns [j0, j1), v the column `col` of V (ld_v), the dot product summed over
// rows in order, row by row so that the loops over columns vectorise.
void reflect(const double* V, size_t ld_v, size_t col, double tau, double* M, size_t ld, size_t row0, size_t rows,
             size_t j0, size_t j1, std::vector<double>& dots) {
  if (tau == 0 || j0 >= j1) return;
  dots.assign(j1 - j0, 0.0);
  for (size_t row = row0; row < rows; ++row) {
    const double v = V[row * ld_v + col];
    const double* m = M + row * ld + j0;
    for (size_t j = 0; j < j1 - j0; ++j) dots[j] += v * m[j];
  }
  for (double& d : dots) d *= tau;
  for (size_t row = row0; row < rows; ++row) {
    const double v = V[row * ld_v + col];
    double* m = M + row * ld + j0;
    for (size_t j = 0; j < j1 - j0; ++j) m[j] -= dots[j] * v;
  }
}
#endif
constexpr size_t kPanel = 32;

// Q m x k and R k x n (k = min(m, n)) as Nx.LinAlg.QR computes them: column i (its rows from i
// on) is reflected onto +|x| e_i unless its part below the diagonal has a squared norm under eps;
// a wide matrix is padded with rows of zeros to a square one; a square one's last column is not
// reflected. Magnitudes at or below eps are written as zeros.
//
// Blocked as LAPACK's dgeqrf is, with Nx's reflections (so the factors come in Nx's signs): a
// panel's reflections are found and applied within it one by one, then to the columns right of it
// at once as I - V T V^T (the compact WY form, T as LAPACK's dlarft makes it) through BLAS's
// products; Q is accumulated the same way, last panel first. Without BLAS, one panel.
void qr(const double* a, size_t m, size_t n, double eps, double* const* out) {
  double *q = out[0], *r = out[1];
  const size_t k = std::min(m, n), rows = std::max(m, n);  // rows: with a wide matrix's padding
  if (!finite(a, m * n)) {
    std::fill(q, q + m * k, kNaN);
    std::fill(r, r + k * n, kNaN);
    return;
  }
  const size_t steps = rows == n ? (n >= 2 ? n - 1 : 0) : n;  // Nx: 0..n-2 when square, else 0..n-1
  const size_t panel = kBlas ? kPanel : std::max<size_t>(steps, 1);
  const size_t panels = (steps + panel - 1) / panel;
  F64Buffer w(rows * n), v(rows * n), tau(std::max<size_t>(steps, 1)), t(panels * panel * panel);
  std::fill(w.begin(), w.end(), 0.0);
  std::copy(a, a + m * n, w.data());
  std::fill(v.begin(), v.end(), 0.0);  // the reflections' vectors, column i for reflection i
  std::fill(t.begin(), t.end(), 0.0);
  std::vector<double> panel_cols, panel_vs;
  F64Buffer y(panel * n);
  for (size_t c = 0; c < steps; c += panel) {
    const size_t end = std::min(c + panel, steps), nb = end - c;
    const bool last = end == steps;
    // The panel's columns (and in the last panel every column right of it), copied by columns so
    // that each reflection reads and updates contiguous memory; their reflections' vectors too.
    const size_t reach = last ? n : end, width = reach - c, h = rows - c;
    panel_cols.assign(width * h, 0.0);
    panel_vs.assign(nb * h, 0.0);
    for (size_t row = c; row < rows; ++row)
      for (size_t j = c; j < reach; ++j) panel_cols[(j - c) * h + (row - c)] = w.data()[row * n + j];
    for (size_t i = c; i < end; ++i) {
      const size_t top = i - c;  // row i's place in a panel column
      const double* x = panel_cols.data() + top * h;
      double norm_sq = 0;
      for (size_t r = top; r < h; ++r) norm_sq += x[r] * x[r];
      const double xi = x[top], norm = std::sqrt(norm_sq), below = norm_sq - xi * xi;
      tau.data()[i] = 0;
      if (below < eps) continue;  // Nx's reflection is then the identity
      const double v0 = xi <= 0 ? xi - norm : -below / (xi + norm);
      double* vi = panel_vs.data() + top * h;
      double v_sq = 0;
      for (size_t r = top; r < h; ++r) {
        vi[r] = (r == top ? v0 : x[r]) / v0;
        v_sq += vi[r] * vi[r];
      }
      const double ti = tau.data()[i] = 2 / v_sq;
      // R = H R on the panel's columns from i: each column less tau (v . column) v
      for (size_t j = top; j < width; ++j) {
        double* col = panel_cols.data() + j * h;
        double dot = 0;
        for (size_t r = top; r < h; ++r) dot += vi[r] * col[r];
        dot *= ti;
        for (size_t r = top; r < h; ++r) col[r] -= dot * vi[r];
      }
    }
    for (size_t row = c; row < rows; ++row) {
      for (size_t j = c; j < reach; ++j) w.data()[row * n + j] = panel_cols[(j - c) * h + (row - c)];
      for (size_t j = c; j < end; ++j) v.data()[row * n + j] = panel_vs[(j - c) * h + (row - c)];
    }
    // T: H_c ... H_end-1 = I - V T V^T, T upper triangular (dlarft, forward, by columns):
    // T[:j, j] = -tau_j T[:j, :j] (V^T v_j)[:j]; V^T v_j is kept in T's column j, each entry read
    // before it is replaced
    double* T = t.data() + (c / panel) * panel * panel;
    for (size_t j = 0; j < nb; ++j) {
      const double tj = tau.data()[c + j];
      T[j * panel + j] = tj;
      const double* vj = panel_vs.data() + j * h;
      for (size_t l = 0; l < j; ++l) {
        const double* vl = panel_vs.data() + l * h;
        double z = 0;
        for (size_t r = j; r < h; ++r) z += vl[r] * vj[r];  // v_j is zero above its row
        T[l * panel + j] = z;
      }
      for (size_t l = 0; l < j; ++l) {
        double sum = 0;
        for (size_t p = l; p < j; ++p) sum += T[l * panel + p] * T[p * panel + j];
        T[l * panel + j] = -tj * sum;
      }
    }
    if (last) break;
#ifdef ACCEL_WITH_OPENBLAS
    // the columns right of the panel: C = (I - V T^T V^T) C = C - V (T^T (V^T C))
    const size_t cols = n - end;
    const int NB = static_cast<int>(nb), H = static_cast<int>(h), COLS = static_cast<int>(cols),
              LD = static_cast<int>(n), LT = static_cast<int>(panel);
    double* V = v.data() + c * n + c;
    double* C = w.data() + c * n + end;
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, NB, COLS, H, 1.0, V, LD, C, LD, 0.0, y.data(), COLS);
    cblas_dtrmm(CblasRowMajor, CblasLeft, CblasUpper, CblasTrans, CblasNonUnit, NB, COLS, 1.0, T, LT, y.data(), COLS);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, H, COLS, NB, -1.0, V, LD, y.data(), COLS, 1.0, C, LD);
#endif
  }
  // Q's first k columns: H_0 ... H_last applied, last first, to the identity's first k columns.
  // Columns left of a reflection's row are still the identity's there (zero), so each reflection
  // touches the columns from its row on.
  F64Buffer qf(rows * k);
  std::fill(qf.begin(), qf.end(), 0.0);
  for (size_t j = 0; j < k; ++j) qf.data()[j * k + j] = 1;
  for (size_t p = panels; p-- > 0;) {
    const size_t c = p * panel, end = std::min(c + panel, steps);
    if (c >= k) continue;
#ifdef ACCEL_WITH_OPENBLAS
    const size_t nb = end - c;
    // Q = (I - V T V^T) Q over rows from c, columns from c
    const size_t h = rows - c, cols = k - c;
    const int NB = static_cast<int>(nb), H = static_cast<int>(h), COLS = static_cast<int>(cols),
              LD = static_cast<int>(n), LQ = static_cast<int>(k), LT = static_cast<int>(panel);
    const double* V = v.data() + c * n + c;
    double* Qs = qf.data() + c * k + c;
    const double* T = t.data() + p * panel * panel;
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, NB, COLS, H, 1.0, V, LD, Qs, LQ, 0.0, y.data(), COLS);
    cblas_dtrmm(CblasRowMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, NB, COLS, 1.0, T, LT, y.data(),
                COLS);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, H, COLS, NB, -1.0, V, LD, y.data(), COLS, 1.0, Qs, LQ);
#else
    std::vector<double> dots;
    for (size_t i = end; i-- > c;) reflect(v.data(), n, i, tau.data()[i], qf.data(), k, i, rows, i, k, dots);
#endif
  }
  const auto zeroed = [eps](double x) { return std::fabs(x) <= eps ? 0.0 : x; };
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < k; ++j) q[i * k + j] = zeroed(qf.data()[i * k + j]);
  for (size_t i = 0; i < k; ++i)
    for (size_t j = 0; j < n; ++j) r[i * n + j] = j < i ? 0.0 : zeroed(w.data()[i * n + j]);
}

// ---- Nx 0.7's eigh (Nx.BinaryBackend.Matrix.eigh), operation for operation ----
//
// Nx 0.7 has eigh as the binary backend's own callback, and its tests are written against that
// algorithm's results: a Hessenberg reduction by Householder reflections, then unshifted QR
// iterations (each QR of Householder reflections) until Q moves by at most eps anywhere, or
// max_iter of them. Every reflection is an explicit n x n matrix H, and every product sums its
// terms in order from zero, as the binary backend's lists do: so the same bits. A product with H
// skips only the terms H's identity part makes exactly zero (their sum is +0, which the first
// term's addition to +0 gives as well). Magnitudes below eps are written as zeros (signed, as 0 * x).

double nx_zeroed(double x, double eps) { return std::fabs(x) < eps ? 0.0 * x : x; }

// H = I - scale v v^T over the rows and columns from n - len on, of the column `a` (len elements,
// stride `stride`): the binary backend's householder_reflector of a real vector.
void nx_reflector(const double* a, size_t stride, size_t len, size_t n, double eps, std::vector<double>& v, double* h) {
  const size_t prefix = n - len;
  double scale = 0;
  v.assign(n, 0.0);
  if (len > 0) {
    const double a0 = a[0];
    double norm_sq = 0;
    for (size_t k = 0; k < len; ++k) norm_sq = a[k * stride] * a[k * stride] + norm_sq;
    const double rest = norm_sq - a0 * a0;
    v[prefix] = 1;
    if (rest < eps) {
      for (size_t k = 1; k < len; ++k) v[prefix + k] = a[k * stride];
    } else {
      const double v0 = a0 <= 0 ? a0 - std::sqrt(norm_sq) : -rest / (a0 + std::sqrt(norm_sq));
      const double v0_sq = v0 * v0;
      scale = 2 * v0_sq / (rest + v0_sq);
      for (size_t k = 1; k < len; ++k) v[prefix + k] = a[k * stride] / v0;
    }
  }
  for (size_t r = 0; r < n; ++r)
    for (size_t c = 0; c < n; ++c) {
      const double identity = r == c ? 1.0 : 0.0;
      h[r * n + c] = r >= prefix && c >= prefix ? identity - scale * v[r] * v[c] : identity;
    }
}

// out = H X, H a reflector from row and column `prefix` on (its rows above are the identity's)
void nx_reflect_left(const double* h, size_t prefix, const double* x, size_t n, double* out) {
  for (size_t i = 0; i < n; ++i) {
    double* o = out + i * n;
    if (i < prefix) {
      for (size_t j = 0; j < n; ++j) o[j] = 0.0 + x[i * n + j];
      continue;
    }
    std::fill(o, o + n, 0.0);
    for (size_t k = prefix; k < n; ++k) {
      const double f = h[i * n + k];
      const double* xr = x + k * n;
      for (size_t j = 0; j < n; ++j) o[j] = o[j] + f * xr[j];
    }
  }
}

// out = X H (transposed: X H^T), H a reflector from row and column `prefix` on
void nx_reflect_right(const double* x, const double* h, size_t prefix, size_t n, bool transposed, double* out) {
  for (size_t i = 0; i < n; ++i) {
    double* o = out + i * n;
    const double* xr = x + i * n;
    for (size_t j = 0; j < prefix; ++j) o[j] = 0.0 + xr[j];
    for (size_t j = prefix; j < n; ++j) o[j] = 0.0;
    for (size_t k = prefix; k < n; ++k) {
      const double f = xr[k];
      if (transposed)
        for (size_t j = prefix; j < n; ++j) o[j] = o[j] + f * h[j * n + k];
      else
        for (size_t j = prefix; j < n; ++j) o[j] = o[j] + f * h[k * n + j];
    }
  }
}

// out = A B, each element summed over k in order from zero
void nx_product(const double* a, const double* b, size_t n, double* out) {
  for (size_t i = 0; i < n; ++i) {
    double* o = out + i * n;
    std::fill(o, o + n, 0.0);
    for (size_t k = 0; k < n; ++k) {
      const double f = a[i * n + k];
      const double* br = b + k * n;
      for (size_t j = 0; j < n; ++j) o[j] = o[j] + f * br[j];
    }
  }
}

// |a - b| <= eps everywhere (a NaN difference counts as close, as the binary backend's check has it)
bool nx_close(const double* a, const double* b, size_t count, double eps) {
  for (size_t i = 0; i < count; ++i)
    if (std::fabs(a[i] - b[i]) > eps) return false;
  return true;
}

// Nx 0.7's lu (Nx.BinaryBackend.Matrix.lu): rows swapped first so that each column's largest
// magnitude (of the rows from the diagonal down, the first of equals) is on the diagonal, in the
// matrix as it stands, without elimination; then Doolittle's loops, each sum over k in order
// (x y + acc from zero), magnitudes below eps written as zeros, and a zero pivot giving an
// infinity of the sign of its numerator. out: [P, L, U] with A = P L U (P the swaps transposed).
void lu_nx07(const double* a, size_t n, double eps, double* const* out) {
  double* p = out[0];
  double* l = out[1];
  double* u = out[2];
  std::vector<double> ap(a, a + n * n);
  std::vector<size_t> rows(n);
  for (size_t i = 0; i < n; ++i) rows[i] = i;
  for (size_t j = 0; j + 1 < n; ++j) {
    size_t best = j;
    for (size_t i = j + 1; i < n; ++i)
      if (std::fabs(ap[i * n + j]) > std::fabs(ap[best * n + j])) best = i;
    if (best != j) {
      std::swap(rows[j], rows[best]);
      std::swap_ranges(ap.begin() + j * n, ap.begin() + (j + 1) * n, ap.begin() + best * n);
    }
  }
  std::fill(l, l + n * n, 0.0);
  std::fill(u, u + n * n, 0.0);
  const auto small = [eps](double x) { return std::fabs(x) < eps; };
  for (size_t j = 0; j < n; ++j) {
    l[j * n + j] = 1.0;
    for (size_t i = 0; i <= j; ++i) {
      double sum = 0;
      for (size_t k = 0; k < i; ++k) sum = u[k * n + j] * l[i * n + k] + sum;
      const double value = ap[i * n + j] - sum;
      u[i * n + j] = small(value) ? 0.0 : value;
    }
    const double pivot = u[j * n + j];
    for (size_t i = j + 1; i < n; ++i) {
      double sum = 0;
      for (size_t k = 0; k < i; ++k) sum = u[k * n + j] * l[i * n + k] + sum;
      const double numerator = ap[i * n + j] - sum;
      const double inf = std::numeric_limits<double>::infinity();
      const double value = pivot != 0 ? numerator / pivot : (ap[i * n + j] >= sum ? inf : -inf);
      l[i * n + j] = small(value) ? 0.0 : value;
    }
  }
  // P = (the swaps)^T: row rows[i] of the identity at row i, transposed
  std::fill(p, p + n * n, 0.0);
  for (size_t i = 0; i < n; ++i) p[rows[i] * n + i] = 1.0;
  for (size_t i = 0; i < n * n; ++i) {
    l[i] = nx_zeroed(l[i], eps);
    u[i] = nx_zeroed(u[i], eps);
  }
}

// out[0]: the n eigenvalues, out[1]: the eigenvectors (columns), of a symmetric matrix.
void eigh_nx07(const double* a, size_t n, double eps, uint64_t iterations, double* const* out) {
  double* values = out[0];
  double* vectors = out[1];
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j)
      if (std::fabs(a[j * n + i] - a[i * n + j]) > eps)
        throw ArgumentError("matrix must be hermitian, a matrix is hermitian iff X = adjoint(X)");
  if (n == 1) {  // (the binary backend's reflections of a 1 x 1 matrix are all the identity)
    values[0] = nx_zeroed(0.0 + a[0], eps);
    vectors[0] = 1.0;
    return;
  }
  const size_t nn = n * n;
  std::vector<double> h(nn), t(nn), hess(a, a + nn), q(nn), q_now(nn), r(nn), a_new(nn), q_new(nn), v;
  // Q = H for the first reflection, Q H after (the binary backend's q, nil until its first H)
  const auto accumulate = [&](std::vector<double>& into, size_t prefix, bool first) {
    if (first) {
      into = h;
      return;
    }
    nx_reflect_right(into.data(), h.data(), prefix, n, false, t.data());
    into.swap(t);
  };
  // Hessenberg: hess = H hess H^T for the column under the diagonal of each column but the last
  for (size_t i = 0; i + 2 <= n; ++i) {
    nx_reflector(&hess[(i + 1) * n + i], n, n - i - 1, n, eps, v, h.data());
    const size_t prefix = i + 1;
    accumulate(q, prefix, i == 0);
    nx_reflect_left(h.data(), prefix, hess.data(), n, t.data());
    nx_reflect_right(t.data(), h.data(), prefix, n, true, hess.data());
  }
  for (double& x : hess) x = nx_zeroed(x, eps);
  for (double& x : q) x = nx_zeroed(x, eps);
  // QR iterations: A = R Q, Q_total = Q_total Q, until Q_total settles
  for (uint64_t iteration = 0; iteration < iterations; ++iteration) {
    r = hess;
    for (size_t i = 0; i + 2 <= n; ++i) {
      nx_reflector(&r[i * n + i], n, n - i, n, eps, v, h.data());
      accumulate(q_now, i, i == 0);
      nx_reflect_left(h.data(), i, r.data(), n, t.data());
      r.swap(t);
    }
    for (double& x : q_now) x = nx_zeroed(x, eps);
    for (double& x : r) x = nx_zeroed(x, eps);
    nx_product(r.data(), q_now.data(), n, a_new.data());
    nx_product(q.data(), q_now.data(), n, q_new.data());
    const bool settled = nx_close(q.data(), q_new.data(), nn, eps);
    hess.swap(a_new);
    q.swap(q_new);
    if (settled) break;
  }
  for (size_t i = 0; i < n; ++i) values[i] = nx_zeroed(hess[i * n + i], eps);
  for (size_t i = 0; i < nn; ++i) vectors[i] = nx_zeroed(q[i], eps);
}

#ifdef ACCEL_WITH_OPENBLAS

int lapack_int(uint64_t v, const char* what) {
  if (v > static_cast<uint64_t>(INT_MAX))
    throw ArgumentError(std::string(what) + " of " + std::to_string(v) + " is beyond LAPACK's 32-bit sizes");
  return static_cast<int>(v);
}

using Complex = std::complex<double>;

// Row-major rows x cols at `src` to column-major at `dst`, and back.
template <typename T>
void to_columns(const T* src, size_t rows, size_t cols, T* dst) {
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) dst[i + j * rows] = src[i * cols + j];
}
template <typename T>
void to_rows(const T* src, size_t rows, size_t cols, T* dst) {
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) dst[i * cols + j] = src[i + j * rows];
}

// (an array of (re, im) doubles read as std::complex<double>, whose layout the standard fixes)
const Complex* as_complex(const double* p) { return reinterpret_cast<const Complex*>(p); }
Complex* as_complex(double* p) { return reinterpret_cast<Complex*>(p); }

// OpenBLAS on every core for a Cholesky factorisation of 1536 x 1536 or more, on one below (where
// the CPU backend keeps it: its products run over the backend's own threads, where OpenBLAS's
// would spin between them and take the cores the next kernel needs): its parallel dpotrf
// synchronises its threads after every block, and they lose more waiting for a core than they
// gain when the VM's schedulers share the cores (a 512 x 512 factor took 2.4 ms on two threads
// inside the VM, 1.35 ms on one; at 2048 the threads win, 37 ms against 48). The count is
// OpenBLAS's global: a product another thread starts meanwhile also runs on every core. (QR at
// 512 x 512, its products on two OpenBLAS threads or one, side by side: 8.4-12.0 ms against
// 9.0-9.5: no gain.)
class CholeskyThreads {
 public:
  explicit CholeskyThreads(size_t n) : saved_(openblas_get_num_threads()) {
    if (n >= 1536 && openblas_get_num_procs() > saved_) openblas_set_num_threads(openblas_get_num_procs());
  }
  ~CholeskyThreads() {
    if (openblas_get_num_threads() != saved_) openblas_set_num_threads(saved_);
  }
  CholeskyThreads(const CholeskyThreads&) = delete;
  CholeskyThreads& operator=(const CholeskyThreads&) = delete;

 private:
  const int saved_;
};

// Cholesky–Banachiewicz as Nx writes it, for the matrices LAPACK finds not positive definite: the
// square root of a negative pivot is NaN, and NaN flows to every element computed from it.
void cholesky_plain(const double* a, size_t n, double* l) {
  std::fill(l, l + n * n, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j <= i; ++j) {
      double sum = 0;
      for (size_t k = 0; k < j; ++k) sum += l[i * n + k] * l[j * n + k];
      l[i * n + j] = i == j ? std::sqrt(a[i * n + i] - sum) : (a[i * n + j] - sum) / l[j * n + j];
    }
}

// L (lower) with A = L L^T, read from A's lower triangle. Column-major 'U' over a row-major buffer
// is the row-major lower triangle, and its factor U (A = U^T U) is L read row-major.
void cholesky(const double* a, size_t n, double* const* out) {
  double* l = out[0];
  const int N = lapack_int(n, "a matrix size");
  std::copy(a, a + n * n, l);
  int info = 0;
  if (n > 0) {
    CholeskyThreads threads(n);
    dpotrf_("U", &N, l, &N, &info, 1);
  }
  if (info != 0) return cholesky_plain(a, n, l);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j)
      if (j > i || std::fabs(l[i * n + j]) <= 1e-10) l[i * n + j] = 0;  // Nx's eps: zeros
}

// det(A): for 2 x 2 and 3 x 3 Nx's closed forms, term by term as Nx sums them; beyond, from A's
// LU factors, the product of U's diagonal negated once per row swap.
void determinant(const double* a, size_t n, double* const* out) {
  const auto e = [&](size_t i, size_t j) { return a[i * n + j]; };
  if (n == 2) {
    out[0][0] = e(0, 0) * e(1, 1) - e(0, 1) * e(1, 0);
  } else if (n == 3) {
    out[0][0] = e(0, 0) * e(1, 1) * e(2, 2) + e(0, 1) * e(1, 2) * e(2, 0) + e(0, 2) * e(1, 0) * e(2, 1) -
                e(0, 2) * e(1, 1) * e(2, 0) - e(0, 1) * e(1, 0) * e(2, 2) - e(0, 0) * e(1, 2) * e(2, 1);
  } else {
    const int N = lapack_int(n, "a matrix size");
    F64Buffer f(n * n);  // det(A^T) = det(A): no transpose needed
    std::copy(a, a + n * n, f.data());
    std::vector<int> ipiv(n);
    int info = 0;
    if (n > 0) dgetrf_(&N, &N, f.data(), &N, ipiv.data(), &info);
    double det = 1;
    for (size_t i = 0; i < n; ++i)
      det *= ipiv[i] - 1 != static_cast<int>(i) ? -f.data()[i + i * n] : f.data()[i + i * n];
    out[0][0] = det;
  }
}

// LAPACK's LU factorisation and solve, real or complex (plain transposes, not conjugates).
void getrf(const int* n, double* a, int* ipiv, int* info) { dgetrf_(n, n, a, n, ipiv, info); }
void getrf(const int* n, Complex* a, int* ipiv, int* info) { zgetrf_(n, n, a, n, ipiv, info); }
void getrs_t(const int* n, const int* cols, const double* lu, const int* ipiv, double* b, int* info) {
  dgetrs_("T", n, cols, lu, n, ipiv, b, n, info, 1);
}
void getrs_t(const int* n, const int* cols, const Complex* lu, const int* ipiv, Complex* b, int* info) {
  zgetrs_("T", n, cols, lu, n, ipiv, b, n, info, 1);
}

// X with A X = B, A n x n and B rows x cols row-major, by LU with partial pivoting: the row-major A
// read column-major is A^T, so factor that and solve (A^T)^T X = B (`work` holds n * n + rows *
// cols elements).
template <typename T>
void lu_solve(const T* a, T* x, const LinalgPlan& p, T* work, std::vector<int>& ipiv) {
  const uint64_t n = p.n, rows = p.b_rows, cols = p.b_cols;
  const int N = lapack_int(n, "a matrix size");
  const int C = lapack_int(cols, "the right side's columns");
  std::copy(a, a + n * n, work);
  ipiv.resize(n);
  int info = 0;
  getrf(&N, work, ipiv.data(), &info);
  if (info > 0) throw ArgumentError("can't solve for singular matrix");
  if (cols == 0) return;
  T* b = work + n * n;
  to_columns(x, rows, cols, b);
  getrs_t(&N, &C, work, ipiv.data(), b, &info);
  to_rows(b, rows, cols, x);
}

// X with A X = B (or X A = B when not `left`), B rows x cols: A triangular (its diagonal checked
// first, as Nx's), or general (LU with partial pivoting).
void solve_one(const double* a, double* x, const LinalgPlan& p, bool triangular, const F64Buffer& work,
               std::vector<int>& ipiv) {
  const uint64_t n = p.n, rows = p.b_rows, cols = p.b_cols;
  const int N = lapack_int(n, "a matrix size");
  const int R = lapack_int(rows, "the right side's rows"), C = lapack_int(cols, "the right side's columns");
  if (triangular) {
    for (uint64_t d = 0; d < n; ++d)
      if (a[d * n + d] == 0) throw ArgumentError("can't solve for singular matrix");
    if (rows != 0 && cols != 0)
      cblas_dtrsm(CblasRowMajor, p.left ? CblasLeft : CblasRight, p.lower ? CblasLower : CblasUpper,
                  p.transpose ? CblasTrans : CblasNoTrans, CblasNonUnit, R, C, 1.0, a, N, x, C);
    return;
  }
  lu_solve(a, x, p, work.data(), ipiv);
}

// Nx.BinaryBackend's triangular solve of complex matrices (Nx.BinaryBackend.Matrix.ts/8) step for
// step: the system turned into a lower triangular one as it turns it (A transposed where `left`
// says, rows and columns reversed where the triangle and the transpose say, B with it), then each
// unknown x_i = (b_i - sum_j a_ij x_j) / a_ii with the Complex library's formulas in its order
// (each product added to the sum so far, from 0 + 0i), so its bits, signed zeros included, for
// finite values; every diagonal element is checked first, as Nx checks each before dividing.
struct Pair {
  double re, im;
};
Pair pair_mul(Pair a, Pair b) { return {a.re * b.re - a.im * b.im, a.im * b.re + a.re * b.im}; }
Pair pair_add(Pair a, Pair b) { return {a.re + b.re, a.im + b.im}; }
Pair pair_sub(Pair a, Pair b) { return {a.re - b.re, a.im - b.im}; }
// (Complex.divide/2: 0 / 0 is NaN)
double part_div(double num, double den) { return num == 0 && den == 0 ? kNaN : num / den; }
Pair pair_div(Pair a, Pair b) {
  const double den = b.re * b.re + b.im * b.im;
  return {part_div(a.re * b.re + a.im * b.im, den), part_div(a.im * b.re - a.re * b.im, den)};
}

void triangular_solve_complex(const double* a, double* x, const LinalgPlan& p) {
  const uint64_t n = p.n, cols = p.b_cols;
  const bool transpose_a = p.left == p.transpose, reverse = p.left == (p.lower == p.transpose);
  const uint64_t k = p.left ? p.b_cols : p.b_rows;  // the system's right sides
  if (k == 0) return;
  for (uint64_t d = 0; d < n; ++d)
    if (a[2 * (d * n + d)] == 0 && a[2 * (d * n + d) + 1] == 0) throw ArgumentError("can't solve for singular matrix");
  const auto a_at = [&](uint64_t i, uint64_t j) {
    if (reverse) i = n - 1 - i, j = n - 1 - j;
    const uint64_t e = transpose_a ? j * n + i : i * n + j;
    return Pair{a[2 * e], a[2 * e + 1]};
  };
  // where the system's (i, c) is in B (and X): B's rows, or its columns when not `left`
  const auto b_at = [&](uint64_t i, uint64_t c) {
    if (reverse) i = n - 1 - i;
    return 2 * (p.left ? i * cols + c : c * cols + i);
  };
  std::vector<Pair> xs(n);
  for (uint64_t c = 0; c < k; ++c)
    for (uint64_t i = 0; i < n; ++i) {
      Pair sum{0.0, 0.0};
      for (uint64_t j = 0; j < i; ++j) sum = pair_add(pair_mul(a_at(i, j), xs[j]), sum);
      const uint64_t at = b_at(i, c);
      xs[i] = pair_div(pair_sub(Pair{x[at], x[at + 1]}, sum), a_at(i, i));
      x[at] = xs[i].re, x[at + 1] = xs[i].im;
    }
}

// solve_one over complex matrices ((re, im) pairs at `a_pairs` and `x_pairs`; `work` holds twice
// as many doubles): LAPACK's LU, triangular ones as Nx's binary backend solves them.
void solve_one_complex(const double* a_pairs, double* x_pairs, const LinalgPlan& p, bool triangular, const F64Buffer& work,
                       std::vector<int>& ipiv) {
  if (triangular) return triangular_solve_complex(a_pairs, x_pairs, p);
  lapack_int(p.b_rows, "the right side's rows");
  lu_solve(as_complex(a_pairs), as_complex(x_pairs), p, as_complex(work.data()), ipiv);
}

#endif  // ACCEL_WITH_OPENBLAS

// A tensor's elements as f64: read in place where its backend computes on host memory, else
// downloaded first.
F64Buffer read_f64(const Tensor& t) {
  F64Buffer out(static_cast<size_t>(t.count));
  if (t.count == 0) return out;
  HostBuffer staged;
  const void* host = host_elements(t, staged);
  if (t.type == DType::F64)
    std::memcpy(out.data(), host, checked_bytes(t.count, t.type));
  else
    std::copy(static_cast<const float*>(host), static_cast<const float*>(host) + t.count, out.data());
  return out;
}

// `values` as a new tensor of `type` on `like`'s device: written in place on host memory, else
// uploaded.
Tensor write_as(const Tensor& like, DType type, const F64Buffer& values) {
  Tensor t = allocate_like(*like.backend, like.device, type, values.size());
  if (values.size() == 0) return t;
  HostBuffer staged;
  void* host = host_destination(t, staged);
  if (type == DType::F64)
    std::memcpy(host, values.data(), checked_bytes(values.size(), type));
  else
    std::copy(values.begin(), values.end(), static_cast<float*>(host));
  upload_staged(t, staged);
  return t;
}

// Runs `one(input matrix, result pointers)` over the batch of a's matrices and returns the results
// (each `sizes[r]` elements per matrix) on a's device, in a's type.
template <typename F>
std::vector<Tensor> per_matrix(const Tensor& a, const LinalgPlan& p, const std::vector<uint64_t>& sizes, F&& one) {
  const F64Buffer in = read_f64(a);
  std::vector<F64Buffer> results;
  for (uint64_t s : sizes) results.emplace_back(static_cast<size_t>(product(p.batch, s, "a result")));
  on_arithmetic_thread([&] {
    std::vector<double*> at(sizes.size());
    for (uint64_t b = 0; b < p.batch; ++b) {
      for (size_t r = 0; r < sizes.size(); ++r) at[r] = results[r].data() + b * sizes[r];
      one(in.data() + b * p.m * p.n, at.data());
    }
  });
  std::vector<Tensor> out;
  for (const auto& r : results) out.push_back(write_as(a, a.type, r));
  return out;
}

void check_float(const Tensor& t, const char* op) {
  if (t.type != DType::F32 && t.type != DType::F64)
    throw ArgumentError(std::string(op) + " needs an :f32 or :f64 tensor, got :" + dtype_name(t.type));
}

void check_count(const Tensor& t, uint64_t batch, uint64_t rows, uint64_t cols, const char* what) {
  if (product(product(batch, rows, "the shape"), cols, "the shape") != t.count)
    throw ArgumentError(std::string(what) + " of " + std::to_string(batch) + " x " + std::to_string(rows) + " x " +
                        std::to_string(cols) + " does not match a tensor of " + std::to_string(t.count) + " elements");
}

#ifndef ACCEL_WITH_OPENBLAS
[[noreturn]] void no_lapack() {
  throw ArgumentError("the linear algebra needs LAPACK (OpenBLAS), which this build did not find (run bin/setup, then rebuild)");
}
#endif

}  // namespace

std::vector<Tensor> tensor_decompose(LinalgOp op, const Tensor& a, const LinalgPlan& plan) {
  check_float(a, "the linear algebra");
  if (op != LinalgOp::QR && plan.m != plan.n) throw ArgumentError("this decomposition needs square matrices");
  check_count(a, plan.batch, plan.m, plan.n, "matrices");
  const uint64_t m = plan.m, n = plan.n, k = std::min(m, n);
  if (op == LinalgOp::QR)
    return per_matrix(a, plan, {m * k, k * n}, [&](const double* x, double* const* o) { qr(x, m, n, plan.eps, o); });
  if (op == LinalgOp::LuNx07)
    return per_matrix(a, plan, {n * n, n * n, n * n}, [&](const double* x, double* const* o) { lu_nx07(x, n, plan.eps, o); });
  if (op == LinalgOp::EighNx07)
    return per_matrix(a, plan, {n, n * n},
                      [&](const double* x, double* const* o) { eigh_nx07(x, n, plan.eps, plan.iterations, o); });
#ifdef ACCEL_WITH_OPENBLAS
  if (op == LinalgOp::Cholesky)
    return per_matrix(a, plan, {n * n}, [&](const double* x, double* const* o) { cholesky(x, n, o); });
  return per_matrix(a, plan, {1}, [&](const double* x, double* const* o) { determinant(x, n, o); });
#else
  no_lapack();
#endif
}

Tensor tensor_solve(const Tensor& a, const Tensor& b, const LinalgPlan& plan, bool triangular) {
  check_same_place(a, b);
  check_same_type(a, b);
  check_float(a, "solve");
  const uint64_t width = plan.complex ? 2 : 1;
  check_count(a, plan.batch, plan.n, product(plan.n, width, "the shape"), "matrices");
  check_count(b, plan.batch, plan.b_rows, product(plan.b_cols, width, "the shape"), "right sides");
  if ((plan.left ? plan.b_rows : plan.b_cols) != plan.n)
    throw ArgumentError("the right side's " + std::string(plan.left ? "rows" : "columns") + " (" +
                        std::to_string(plan.left ? plan.b_rows : plan.b_cols) + ") must match the matrix size (" +
                        std::to_string(plan.n) + ")");
  if (!triangular && !plan.left) throw ArgumentError("solve takes its matrix on the left");
#ifdef ACCEL_WITH_OPENBLAS
  const F64Buffer as = read_f64(a), x = read_f64(b);
  const F64Buffer work(triangular ? 0 : (plan.n * plan.n + plan.b_rows * plan.b_cols) * width);
  std::vector<int> ipiv;
  on_arithmetic_thread([&] {
    for (uint64_t i = 0; i < plan.batch && plan.n > 0; ++i) {
      const double* ai = as.data() + i * plan.n * plan.n * width;
      double* xi = x.data() + i * plan.b_rows * plan.b_cols * width;
      if (plan.complex)
        solve_one_complex(ai, xi, plan, triangular, work, ipiv);
      else
        solve_one(ai, xi, plan, triangular, work, ipiv);
    }
  });
  return write_as(b, b.type, x);
#else
  no_lapack();
#endif
}

}  // namespace accel
