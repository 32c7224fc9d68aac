// Nx.fft and Nx.ifft over the last axis of rows of a tensor, on the host in f64 (as Nx's binary
// backend computes them, in Elixir floats, each result rounded once to the output's type): a
// power-of-two length by iterative radix-2 butterflies, one of small prime factors by mixed
// radices, any other by Bluestein's chirp through power-of-two transforms. Each row is padded with
// zeros or cut to the transform's length; rows are shared among the host's threads (host_pool).
// The CPU backend's tensors are read and written in place; a device's are read to the host,
// transformed and written back (no device FFT library is wired in: cuFFT and clFFT are not used).
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/backend.hpp"
#include "core/error.hpp"
#include "core/host_buffer.hpp"
#include "core/tensor.hpp"
#include "core/tensor_checks.hpp"
#include "core/thread_pool.hpp"

namespace accel {
using namespace detail;
namespace {

using C = std::complex<double>;
constexpr double kPi = 3.14159265358979323846;

// The product by the textbook formula, as Nx's Complex multiplies: std::complex's operator* checks
// for infinities and NaN after each product (C99's Annex G, a library call), several times slower.
inline C mul(C a, C b) {
  return C(a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real());
}

// e^(-2 pi i k / n) for k < n / 2 (the forward transform's twiddles)
std::vector<C> twiddles(size_t n) {
  std::vector<C> w(n / 2);
  for (size_t k = 0; k < w.size(); ++k) w[k] = std::polar(1.0, -2 * kPi * static_cast<double>(k) / static_cast<double>(n));
  return w;
}

// A row of complex numbers split into real and imaginary parts, so that the butterflies' loops
// vectorise (two f64 lanes on the baseline x86-64).
struct Split {
  double* re;
  double* im;
};

// The forward DFT of a power-of-two length n, in place: bit reversal, then butterflies, each
// stage's twiddles contiguous (`wr`/`wi` hold stage h's, e^(-2 pi i k / 2h) for k < h, from
// index h - 1): the products and sums Nx computes, in its order, so the same bits. The stages up
// to kBlock elements wide run a block at a time (in cache), the wider ones over the whole row.
constexpr size_t kBlock = 2048;

// Stages h and 2h over one group of 4h elements (quarters q0..q3, real and imaginary parts apart),
// the two stages' butterflies computed in registers: the same operations as one stage after the
// other, so the same bits, with the row crossing memory half as often. w1: stage h's twiddles;
// w2, w3: stage 2h's first and second halves. (Separate restrict parameters, so that GCC
// vectorises the loop without alias checks.)
__attribute__((always_inline)) inline void quarters(double* __restrict q0r, double* __restrict q1r,
                                                    double* __restrict q2r, double* __restrict q3r,
                                                    double* __restrict q0i, double* __restrict q1i,
                                                    double* __restrict q2i, double* __restrict q3i,
                                                    const double* __restrict w1r, const double* __restrict w1i,
                                                    const double* __restrict w2r, const double* __restrict w2i,
                                                    const double* __restrict w3r, const double* __restrict w3i, size_t h) {
  for (size_t k = 0; k < h; ++k) {
    const double r0 = q0r[k], m0 = q0i[k], r1 = q1r[k], m1 = q1i[k], r2 = q2r[k], m2 = q2i[k], r3 = q3r[k], m3 = q3i[k];
    // stage h: (0, 1) and (2, 3), both with twiddle k
    const double ar = w1r[k] * r1 - w1i[k] * m1, ai = w1r[k] * m1 + w1i[k] * r1;
    const double s1r = r0 - ar, s1i = m0 - ai, s0r = r0 + ar, s0i = m0 + ai;
    const double br = w1r[k] * r3 - w1i[k] * m3, bi = w1r[k] * m3 + w1i[k] * r3;
    const double s3r = r2 - br, s3i = m2 - bi, s2r = r2 + br, s2i = m2 + bi;
    // stage 2h: (0, 2) with twiddle k, (1, 3) with twiddle k + h
    const double cr = w2r[k] * s2r - w2i[k] * s2i, ci = w2r[k] * s2i + w2i[k] * s2r;
    q2r[k] = s0r - cr;
    q2i[k] = s0i - ci;
    q0r[k] = s0r + cr;
    q0i[k] = s0i + ci;
    const double dr = w3r[k] * s3r - w3i[k] * s3i, di = w3r[k] * s3i + w3i[k] * s3r;
    q3r[k] = s1r - dr;
    q3i[k] = s1i - di;
    q1r[k] = s1r + dr;
    q1i[k] = s1i + di;
  }
}

// One stage of half-width h over a group of 2h elements (the last of an odd count of stages).
__attribute__((always_inline)) inline void halves(double* __restrict q0r, double* __restrict q1r,
                                                  double* __restrict q0i, double* __restrict q1i,
                                                  const double* __restrict wr, const double* __restrict wi, size_t h) {
  for (size_t k = 0; k < h; ++k) {
    const double xr = q1r[k], xi = q1i[k];
    const double tr = wr[k] * xr - wi[k] * xi, ti = wr[k] * xi + wi[k] * xr;
    q1r[k] = q0r[k] - tr;
    q1i[k] = q0i[k] - ti;
    q0r[k] += tr;
    q0i[k] += ti;
  }
}

// Stages h and 2h (`two`) or stage h alone over the groups in [from, to), `w` the twiddles of all
// stages (stage h's from index h - 1). Built for x86-64-v3 and v4 too (4 and 8 f64 lanes),
// picked at load by the CPU found (GCC's target_clones, as kernels/user.h builds user kernels);
// never contracted into fma (CMakeLists.txt), so every build computes the same bits.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void stages_over(Split a, const double* wr, const double* wi, size_t from, size_t to, size_t h, bool two) {
  const double *w1r = wr + h - 1, *w1i = wi + h - 1, *w2r = wr + 2 * h - 1, *w2i = wi + 2 * h - 1;
  if (two)
    for (size_t start = from; start < to; start += 4 * h) {
      double *r = a.re + start, *i = a.im + start;
      quarters(r, r + h, r + 2 * h, r + 3 * h, i, i + h, i + 2 * h, i + 3 * h, w1r, w1i, w2r, w2i, w2r + h, w2i + h, h);
    }
  else
    for (size_t start = from; start < to; start += 2 * h) halves(a.re + start, a.re + start + h, a.im + start, a.im + start + h, w1r, w1i, h);
}

class Pow2 {
 public:
  explicit Pow2(size_t n) : n_(n), wr_(n > 1 ? n - 1 : 0), wi_(wr_.size()) {
    const std::vector<C> w = twiddles(n);
    for (size_t h = 1; h < n; h <<= 1)
      for (size_t k = 0; k < h; ++k) {
        const C t = w[k * (n / (2 * h))];
        wr_[h - 1 + k] = t.real();
        wi_[h - 1 + k] = t.imag();
      }
    if (n <= (uint64_t{1} << 32)) {  // k's bits reversed
      rev_.resize(n);
      unsigned bits = 0;
      while ((size_t{1} << bits) < n) ++bits;
      for (size_t i = 1; i < n; ++i)
        rev_[i] = static_cast<uint32_t>((rev_[i >> 1] >> 1) | ((i & 1) << (bits - 1)));
    }
  }

  // Which element of a row goes at index k for run(a, true): k's bits reversed (a row read in
  // that order is in the butterflies' order without a pass of its own; reading scattered is
  // several times faster than writing scattered); k itself where the length has no table.
  size_t source(size_t k) const { return rev_.empty() ? k : rev_[k]; }

  // The DFT of `a` in place: `placed` says a[k] holds element source(k) already.
  void run(Split a, bool placed = false) const {
    if (!placed || rev_.empty())
      for (size_t i = 1, j = 0; i < n_; ++i) {  // bit-reversed order
        size_t bit = n_ >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j ^= bit;
        if (i < j) {
          std::swap(a.re[i], a.re[j]);
          std::swap(a.im[i], a.im[j]);
        }
      }
    const size_t block = std::min(n_, kBlock);
    for (size_t from = 0; from < n_; from += block) stages(a, 1, block, from, from + block);
    stages(a, block, n_, 0, n_);
  }

 private:
  // the stages of half-widths h from `first` while 2h <= `width`, over [from, to), two at a time
  void stages(Split a, size_t first, size_t width, size_t from, size_t to) const {
    size_t h = first;
    for (; 4 * h <= width; h *= 4) stages_over(a, wr_.data(), wi_.data(), from, to, h, true);
    if (2 * h <= width) stages_over(a, wr_.data(), wi_.data(), from, to, h, false);
  }

  size_t n_;
  std::vector<double> wr_, wi_;
  std::vector<uint32_t> rev_;
};

// The forward DFT of a length whose prime factors are all small (at most kSmallPrime): Cooley and
// Tukey's decimation in time, recursively (depth first, so that the sub-transforms work in
// cache), each level combining p interleaved sub-transforms by a direct DFT of size p. `w` holds
// e^(-2 pi i k / N) for k < N, the whole transform's: a sub-transform of size n reads it at N / n.
constexpr size_t kSmallPrime = 64;

size_t smallest_factor(size_t n) {
  if (n % 4 == 0) return 4;
  for (size_t p = 2; p * p <= n; ++p)
    if (n % p == 0) return p;
  return n;
}

bool smooth(size_t n) {
  for (size_t p = 2; p <= kSmallPrime && n > 1; ++p)
    while (n % p == 0) n /= p;
  return n == 1;
}

void fft_smooth(const C* in, size_t stride, C* out, size_t n, const std::vector<C>& w, std::vector<C>& t) {
  if (n == 1) {
    out[0] = in[0];
    return;
  }
  const size_t p = smallest_factor(n), m = n / p, big = w.size(), s = big / n;
  for (size_t q = 0; q < p; ++q) fft_smooth(in + q * stride, stride * p, out + q * m, m, w, t);
  const size_t base = t.size();
  t.resize(base + p);
  C* tw = t.data() + base;
  for (size_t k = 0; k < m; ++k) {
    for (size_t q = 0; q < p; ++q) tw[q] = q == 0 ? out[k] : mul(w[(q * k * s) % big], out[q * m + k]);
    if (p == 2) {
      out[k] = tw[0] + tw[1];
      out[k + m] = tw[0] - tw[1];
    } else if (p == 4) {  // e^(-2 pi i / 4) = -i
      const C a = tw[0] + tw[2], b = tw[0] - tw[2], c = tw[1] + tw[3], d = tw[1] - tw[3];
      const C minus_i_d(d.imag(), -d.real());
      out[k] = a + c;
      out[k + m] = b + minus_i_d;
      out[k + 2 * m] = a - c;
      out[k + 3 * m] = b - minus_i_d;
    } else {
      for (size_t j = 0; j < p; ++j) {
        C sum = tw[0];
        for (size_t q = 1; q < p; ++q) sum += mul(w[(q * j * m * s) % big], tw[q]);
        out[k + j * m] = sum;
      }
    }
  }
  t.resize(base);
}

// A thread's working memory for rows, kept across calls up to rows of kKeptElements (a fresh
// allocation's first touch costs a page fault per 4 KiB).
constexpr size_t kKeptElements = size_t{1} << 16;
struct Work {
  std::vector<double> re, im, wre, wim;
  std::vector<C> x, y, scratch;
};

// The forward DFT of length n of each row, whatever n: radix-2 butterflies for a power of two
// (Nx's own arithmetic: the same results, bit for bit, at the lengths tested; the mixed-radix
// recursion below was 2.7x slower at 2^20), mixed radices for a length of small prime factors,
// Bluestein's chirp otherwise (its convolution through power-of-two transforms). The plan is made
// once per call and shared, read only, by the threads transforming its rows.
class Dft {
 public:
  explicit Dft(size_t n)
      : n_(n), pow2_((n & (n - 1)) == 0), smooth_(!pow2_ && smooth(n)), m_(bluestein_length(n)), plan_(m_) {
    if (pow2_) return;
    if (smooth_) {
      w_.resize(n);
      for (size_t k = 0; k < n; ++k) w_[k] = std::polar(1.0, -2 * kPi * static_cast<double>(k) / static_cast<double>(n));
      return;
    }
    chirp_.resize(n);
    for (size_t k = 0; k < n; ++k) {  // e^(-i pi k^2 / n), with k^2 reduced mod 2n first (exact)
      const unsigned __int128 sq = static_cast<unsigned __int128>(k) * k % (2 * static_cast<unsigned __int128>(n));
      chirp_[k] = std::polar(1.0, -kPi * static_cast<double>(sq) / static_cast<double>(n));
    }
    kr_.assign(m_, 0.0);
    ki_.assign(m_, 0.0);
    for (size_t k = 0; k < n; ++k) {  // conj(chirp) at k and, but for k = 0, at m - k
      const size_t at[2] = {k, k == 0 ? 0 : m_ - k};
      for (size_t i : at) {
        kr_[i] = chirp_[k].real();
        ki_[i] = -chirp_[k].imag();
      }
    }
    plan_.run({kr_.data(), ki_.data()});
  }

  // Which of a row's elements run() expects at index k: for a power of two, the butterflies' order.
  size_t source(size_t k) const { return pow2_ ? plan_.source(k) : k; }

  // The DFT of a row whose index k holds its element source(k).
  void run(Split x, Work& w) const {
    if (pow2_) return plan_.run(x, true);
    if (smooth_) {
      w.x.resize(n_);
      w.y.resize(n_);
      for (size_t k = 0; k < n_; ++k) w.x[k] = C(x.re[k], x.im[k]);
      fft_smooth(w.x.data(), 1, w.y.data(), n_, w_, w.scratch);
      for (size_t k = 0; k < n_; ++k) {
        x.re[k] = w.y[k].real();
        x.im[k] = w.y[k].imag();
      }
      return;
    }
    w.wre.assign(m_, 0.0);
    w.wim.assign(m_, 0.0);
    double* re = w.wre.data();
    double* im = w.wim.data();
    for (size_t k = 0; k < m_; ++k) {  // x chirped, zeros after it
      const size_t j = plan_.source(k);
      if (j >= n_) continue;
      const C c = chirp_[j];
      re[k] = x.re[j] * c.real() - x.im[j] * c.imag();
      im[k] = x.re[j] * c.imag() + x.im[j] * c.real();
    }
    plan_.run({re, im}, true);
    for (size_t k = 0; k < m_; ++k) {  // times the kernel's transform, conjugated: the inverse by conjugates
      const double r = re[k] * kr_[k] - im[k] * ki_[k], i = re[k] * ki_[k] + im[k] * kr_[k];
      re[k] = r;
      im[k] = -i;
    }
    plan_.run({re, im});
    const double scale = 1.0 / static_cast<double>(m_);
    for (size_t k = 0; k < n_; ++k) {  // conjugated, scaled, chirped
      const double r = re[k] * scale, i = -im[k] * scale;
      const C c = chirp_[k];
      x.re[k] = r * c.real() - i * c.imag();
      x.im[k] = r * c.imag() + i * c.real();
    }
  }

 private:
  // Bluestein's power-of-two length for n (at least 2n - 1); n itself where n is a power of two,
  // 1 where a length of small primes needs no power-of-two plan.
  static size_t bluestein_length(size_t n) {
    if ((n & (n - 1)) == 0) return n;
    if (smooth(n)) return 1;
    size_t m = 1;
    while (m < 2 * n - 1) m <<= 1;
    return m;
  }

  size_t n_;
  bool pow2_, smooth_;
  size_t m_;
  Pow2 plan_;  // of length n (a power of two) or m (Bluestein's)
  std::vector<C> w_, chirp_;
  std::vector<double> kr_, ki_;  // the chirp's conjugate, wrapped, transformed
};

// Rows of fewer elements in all transform on the calling thread (waking others costs more).
constexpr uint64_t kThreadedElements = uint64_t{1} << 14;

bool complex_type(DType t) { return t == DType::C64 || t == DType::C128; }

// Element i of a host copy of a tensor of type f32, f64, c64 or c128, as a complex number.
C element(const unsigned char* p, DType type, size_t i) {
  switch (type) {
    case DType::F32: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return C(f, 0);
    }
    case DType::F64: {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      return C(d, 0);
    }
    case DType::C64: {
      float f[2];
      std::memcpy(f, p + 8 * i, 8);
      return C(f[0], f[1]);
    }
    default: {
      double d[2];
      std::memcpy(d, p + 16 * i, 16);
      return C(d[0], d[1]);
    }
  }
}

}  // namespace

Tensor tensor_fft(const Tensor& t, uint64_t rows, uint64_t len, uint64_t n, bool inverse, double eps, DType out_type) {
  if (t.type != DType::F32 && t.type != DType::F64 && !complex_type(t.type))
    throw ArgumentError(std::string("fft needs an :f32, :f64, :c64 or :c128 tensor, got :") + dtype_name(t.type));
  if (!complex_type(out_type)) throw ArgumentError(std::string("fft's result is :c64 or :c128, not :") + dtype_name(out_type));
  if (n == 0) throw ArgumentError("fft's length must be positive");
  if (product(rows, len, "the rows") != t.count)
    throw ArgumentError("rows of " + std::to_string(rows) + " x " + std::to_string(len) +
                        " do not match a tensor of " + std::to_string(t.count) + " elements");
  if (n > (uint64_t{1} << 40)) throw ArgumentError("fft's length of " + std::to_string(n) + " is beyond 2^40");
  // the result first: a size the device cannot hold is refused before any work
  Tensor out = allocate_like(*t.backend, t.device, out_type, product(rows, n, "the result"));
  if (out.count == 0) return out;

  HostBuffer staged_in, staged_out;
  const void* in = host_elements(t, staged_in);
  void* dst = host_destination(out, staged_out);

  const Dft dft(static_cast<size_t>(n));
  const auto cleaned = [eps](double x) { return std::fabs(x) <= eps ? 0.0 : x; };
  const auto* src = static_cast<const unsigned char*>(in);
  const auto transform = [&](size_t first, size_t last) {
    thread_local Work work;
    work.re.resize(static_cast<size_t>(n));
    work.im.resize(static_cast<size_t>(n));
    const Split row{work.re.data(), work.im.data()};
    const uint64_t keep = std::min(len, n);
    for (uint64_t r = first; r < last; ++r) {
      for (uint64_t k = 0; k < n; ++k) {
        const uint64_t j = dft.source(static_cast<size_t>(k));
        const C x = j < keep ? element(src, t.type, static_cast<size_t>(r * len + j)) : C(0);
        row.re[k] = x.real();  // ifft(x) = conj(fft(conj(x))) / n, as Nx computes it
        row.im[k] = inverse ? -x.imag() : x.imag();
      }
      dft.run(row, work);
      for (uint64_t k = 0; k < n; ++k) {
        C y(row.re[k], row.im[k]);
        if (inverse) y = std::conj(y) / static_cast<double>(n);
        const double re = cleaned(y.real()), im = cleaned(y.imag());
        const size_t at = static_cast<size_t>(r * n + k);
        if (out_type == DType::C64) {
          const float f[2] = {static_cast<float>(re), static_cast<float>(im)};
          std::memcpy(static_cast<unsigned char*>(dst) + 8 * at, f, 8);
        } else {
          const double d[2] = {re, im};
          std::memcpy(static_cast<unsigned char*>(dst) + 16 * at, d, 16);
        }
      }
    }
    if (std::max(work.re.capacity(), work.wre.capacity()) > kKeptElements)
      work = Work();  // a long row's memory goes back
  };
  // rows over the host's threads where there are several and enough work to wake them
  ThreadPool* pool = host_pool();
  const uint64_t threads = pool != nullptr ? pool->threads() : 1;
  if (threads > 1 && rows > 1 && rows * n >= kThreadedElements)
    pool->parallel_for(static_cast<size_t>(rows), static_cast<size_t>((rows + threads - 1) / threads), transform);
  else
    transform(0, static_cast<size_t>(rows));
  upload_staged(out, staged_out);
  return out;
}

}  // namespace accel
