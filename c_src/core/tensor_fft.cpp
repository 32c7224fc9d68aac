// Nx.fft and Nx.ifft over the last axis of rows of a tensor, on the host in f64 (as Nx's binary
// backend computes them, in Elixir floats, each result rounded once to the output's type): a
// power-of-two length by iterative radix-2 butterflies, one of small prime factors by mixed
// radices, any other by Bluestein's chirp through power-of-two transforms. Each row is padded with
// zeros or cut to the transform's length. The CPU backend's tensors are read and written in place;
// a device's are read to the host, transformed and written back (no device FFT library is wired
// in: cuFFT and clFFT are not used).
#include <cmath>
#include <complex>
#include <cstring>
#include <vector>

#include "core/backend.hpp"
#include "core/error.hpp"
#include "core/host_buffer.hpp"
#include "core/tensor.hpp"
#include "core/tensor_checks.hpp"

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

// The forward DFT of a (its length a power of two) in place: bit reversal, then butterflies; the
// stages up to kBlock elements wide run a block at a time (in cache), the wider ones over the whole.
constexpr size_t kBlock = 2048;
void butterflies(std::vector<C>& a, const std::vector<C>& w, size_t from, size_t to, size_t len) {
  const size_t half = len / 2, step = a.size() / len;
  for (size_t start = from; start < to; start += len)
    for (size_t k = 0; k < half; ++k) {
      const C t = mul(w[k * step], a[start + k + half]);
      a[start + k + half] = a[start + k] - t;
      a[start + k] += t;
    }
}

void fft_pow2(std::vector<C>& a, const std::vector<C>& w) {
  const size_t n = a.size();
  for (size_t i = 1, j = 0; i < n; ++i) {  // bit-reversed order
    size_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(a[i], a[j]);
  }
  const size_t block = std::min(n, kBlock);
  for (size_t from = 0; from < n; from += block)
    for (size_t len = 2; len <= block; len <<= 1) butterflies(a, w, from, from + block, len);
  for (size_t len = 2 * block; len <= n; len <<= 1) butterflies(a, w, 0, n, len);
}

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

// The forward DFT of length n of each row, whatever n: radix-2 butterflies for a power of two
// (Nx's own arithmetic: the same results, bit for bit, at the lengths tested; the mixed-radix
// recursion below was 2.7x slower at 2^20), mixed radices for a length of small prime factors,
// Bluestein's chirp otherwise (its convolution through power-of-two transforms). The plan is made
// once per call and kept for its rows.
class Dft {
 public:
  explicit Dft(size_t n) : n_(n), pow2_((n & (n - 1)) == 0), smooth_(!pow2_ && smooth(n)) {
    if (pow2_) {
      w_ = twiddles(n);
      return;
    }
    if (smooth_) {
      w_.resize(n);
      for (size_t k = 0; k < n; ++k) w_[k] = std::polar(1.0, -2 * kPi * static_cast<double>(k) / static_cast<double>(n));
      return;
    }
    m_ = 1;
    while (m_ < 2 * n - 1) m_ <<= 1;
    w_ = twiddles(m_);
    chirp_.resize(n);
    for (size_t k = 0; k < n; ++k) {  // e^(-i pi k^2 / n), with k^2 reduced mod 2n first (exact)
      const unsigned __int128 sq = static_cast<unsigned __int128>(k) * k % (2 * static_cast<unsigned __int128>(n));
      chirp_[k] = std::polar(1.0, -kPi * static_cast<double>(sq) / static_cast<double>(n));
    }
    kernel_.assign(m_, C(0));
    kernel_[0] = std::conj(chirp_[0]);
    for (size_t k = 1; k < n; ++k) kernel_[k] = kernel_[m_ - k] = std::conj(chirp_[k]);
    fft_pow2(kernel_, w_);
  }

  void run(std::vector<C>& x) {
    if (pow2_) return fft_pow2(x, w_);
    if (smooth_) {
      work_.resize(n_);
      fft_smooth(x.data(), 1, work_.data(), n_, w_, scratch_);
      x.swap(work_);
      return;
    }
    work_.assign(m_, C(0));
    for (size_t k = 0; k < n_; ++k) work_[k] = mul(x[k], chirp_[k]);
    fft_pow2(work_, w_);
    for (size_t k = 0; k < m_; ++k) work_[k] = std::conj(mul(work_[k], kernel_[k]));  // inverse by conjugates
    fft_pow2(work_, w_);
    const double scale = 1.0 / static_cast<double>(m_);
    for (size_t k = 0; k < n_; ++k) x[k] = mul(std::conj(work_[k]) * scale, chirp_[k]);
  }

 private:
  size_t n_, m_ = 0;
  bool pow2_, smooth_;
  std::vector<C> w_, chirp_, kernel_, work_, scratch_;
};

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

  Dft dft(static_cast<size_t>(n));
  std::vector<C> row(static_cast<size_t>(n));
  const auto cleaned = [eps](double x) { return std::fabs(x) <= eps ? 0.0 : x; };
  const auto* src = static_cast<const unsigned char*>(in);
  for (uint64_t r = 0; r < rows; ++r) {
    const uint64_t keep = std::min(len, n);
    for (uint64_t k = 0; k < n; ++k) {
      const C x = k < keep ? element(src, t.type, static_cast<size_t>(r * len + k)) : C(0);
      row[k] = inverse ? std::conj(x) : x;  // ifft(x) = conj(fft(conj(x))) / n, as Nx computes it
    }
    dft.run(row);
    for (uint64_t k = 0; k < n; ++k) {
      C y = row[k];
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
  upload_staged(out, staged_out);
  return out;
}

}  // namespace accel
