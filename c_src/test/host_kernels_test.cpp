// The CPU backend's builds of its kernels (backends/cpu/host_kernels.hpp): the x86-64-v3 (AVX2, FMA)
// and x86-64-v4 (AVX-512) builds compute the baseline x86-64 build's bits for every elementwise
// operation of the registry on every float type and on the integer types, and for reductions, over
// about a million inputs per type (bit patterns across every exponent, both signs, and the special
// values). Each wider build is skipped where this build or this CPU has none.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/host_kernels.hpp"
#include "core/tensor.hpp"
#include "kernels/tensor_kernels.h"

namespace {

using accel::DType;
using accel::Tensor;
using accel::cpu::ScopedHostEntries;

enum Kind { ALL, FLOAT, INT };
struct Op {
  const char* name;
  int code;
  Kind kind;
};
#define ACCEL_UNARY(name, types, doc) Op{#name, static_cast<int>(accel::UnaryOp::name), types},
#define ACCEL_BINARY(name, types, doc) Op{#name, static_cast<int>(accel::BinaryOp::name), types},
#define ACCEL_COMPARE(name, types, doc) Op{#name, static_cast<int>(accel::CompareOp::name), types},
const std::vector<Op> kUnary = {ACCEL_UNARY_OPS(ACCEL_UNARY)};
const std::vector<Op> kBinary = {ACCEL_BINARY_OPS(ACCEL_BINARY)};
const std::vector<Op> kCompare = {ACCEL_COMPARE_OPS(ACCEL_COMPARE)};

// splitmix64: bit patterns spread over every exponent and sign
uint64_t mix(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <typename T>
std::vector<T> inputs(size_t n, uint64_t seed) {
  std::vector<T> v(n);
  uint64_t state = seed;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t bits = mix(state);
    if constexpr (std::is_floating_point_v<T>) {
      // half of them in [-4, 4] (where the functions vary most), half any bit pattern
      if (i % 2 == 0) {
        v[i] = static_cast<T>((static_cast<double>(bits >> 11) / 9007199254740992.0) * 8 - 4);
      } else {
        std::memcpy(&v[i], &bits, sizeof(T));
      }
    } else {
      std::memcpy(&v[i], &bits, sizeof(T));
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    const T inf = std::numeric_limits<T>::infinity();
    const T specials[] = {0, -T(0), inf, -inf, std::numeric_limits<T>::quiet_NaN(), 1, -1, T(0.5), T(2),
                          std::numeric_limits<T>::denorm_min(), std::numeric_limits<T>::max(), T(88.72283)};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; ++i) v[i * 7] = specials[i];
  }
  return v;
}

using Builds = std::vector<std::pair<std::string, const accel::cpu::HostEntry*>>;

// The wider builds this build has and this CPU runs, by name.
Builds wider_builds() {
  Builds builds;
  if (accel::cpu::host_entries_v3() != nullptr && accel::cpu::cpu_supports("x86-64-v3"))
    builds.emplace_back("x86-64-v3", accel::cpu::host_entries_v3());
  if (accel::cpu::host_entries_v4() != nullptr && accel::cpu::cpu_supports("x86-64-v4"))
    builds.emplace_back("x86-64-v4", accel::cpu::host_entries_v4());
  return builds;
}

// The baseline build, then the wider ones.
Builds every_build() {
  Builds builds = {{"x86-64", accel::cpu::host_entries_baseline()}};
  for (auto& build : wider_builds()) builds.push_back(std::move(build));
  return builds;
}

// The same bits, or both NaN.
template <typename T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b));
}

class HostKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (wider_builds().empty()) GTEST_SKIP() << "no build wider than x86-64 here (this build or this CPU)";
  }

  template <typename T>
  Tensor from(const std::vector<T>& v, DType type) {
    return accel::tensor_from_bytes(cpu_, 0, type, v.data(), v.size() * sizeof(T));
  }

  // The first element where a wider build's result differs from the baseline's (-1: none), for
  // each wider build in turn (`wider` names the one that differed). NaN equals NaN: a signalling
  // NaN's payload may come back quieted (as Nx reads every NaN as one value).
  template <typename F>
  long first_difference(F run) {
    std::vector<unsigned char> a;
    DType type;
    {
      ScopedHostEntries baseline(accel::cpu::host_entries_baseline());
      const Tensor t = run();
      type = t.type;
      a = bytes(t);
    }
    for (const auto& [name, entries] : wider_builds()) {
      std::vector<unsigned char> b;
      {
        ScopedHostEntries wide(entries);
        b = bytes(run());
      }
      wider = name;
      if (a.size() != b.size()) return 0;
      const size_t width = accel::dtype_size(type);
      for (size_t i = 0; i < a.size(); i += width) {
        if (std::memcmp(&a[i], &b[i], width) == 0) continue;
        if (type == DType::F32 && both_nan<float>(&a[i], &b[i])) continue;
        if (type == DType::F64 && both_nan<double>(&a[i], &b[i])) continue;
        return static_cast<long>(i / width);
      }
    }
    return -1;
  }
  std::string wider;

  template <typename T>
  static bool both_nan(const unsigned char* x, const unsigned char* y) {
    T u, v;
    std::memcpy(&u, x, sizeof u);
    std::memcpy(&v, y, sizeof v);
    return std::isnan(u) && std::isnan(v);
  }

  static std::vector<unsigned char> bytes(const Tensor& t) {
    std::vector<unsigned char> out(accel::dtype_size(t.type) * t.count);
    accel::tensor_to_bytes(t, out.data(), t.count);
    return out;
  }

  template <typename T>
  void every_elementwise_op(DType type) {
    const bool is_float = std::is_floating_point_v<T>;
    const size_t n = size_t{1} << 20;
    const Tensor a = from(inputs<T>(n, 1), type), b = from(inputs<T>(n, 2), type);
    // integer shift amounts and exponents within the type's width, and divisors other than zero
    // (beyond them, a shift or a negative exponent raises, as does a zero divisor)
    std::vector<T> amounts = inputs<T>(n, 3), divisors = inputs<T>(n, 2);
    if constexpr (!std::is_floating_point_v<T>) {
      for (T& x : amounts) x = static_cast<T>(static_cast<uint64_t>(x) % (8 * sizeof(T)));
      for (T& x : divisors) x = static_cast<T>(x | 1);
    }
    const Tensor shift = from(amounts, type), divisor = from(divisors, type);
    const std::vector<uint64_t> shape = {n};
    const auto operand = [&](const Tensor& t) {
      accel::Operand o;
      o.tensor = &t;
      o.shape = shape;
      return o;
    };
    for (const Op& op : kUnary) {
      if ((op.kind == FLOAT && !is_float) || (op.kind == INT && is_float)) continue;
      EXPECT_EQ(first_difference([&] { return accel::tensor_unary(static_cast<accel::UnaryOp>(op.code), a); }), -1)
          << op.name << " on :" << accel::dtype_name(type) << " in " << wider;
    }
    for (const Op& op : kBinary) {
      if ((op.kind == FLOAT && !is_float) || (op.kind == INT && is_float)) continue;
      const std::string name = op.name;
      const bool division = name == "divide" || name == "quotient" || name == "remainder";
      const Tensor& right = is_float                                                        ? b
                            : name == "left_shift" || name == "right_shift" || name == "pow" ? shift
                            : division                                                      ? divisor
                                                                                            : b;
      EXPECT_EQ(first_difference([&] {
                  return accel::tensor_binary(static_cast<accel::BinaryOp>(op.code), operand(a), operand(right));
                }),
                -1)
          << op.name << " on :" << accel::dtype_name(type) << " in " << wider;
    }
    for (const Op& op : kCompare)
      EXPECT_EQ(first_difference([&] {
                  return accel::tensor_compare(static_cast<accel::CompareOp>(op.code), operand(a), operand(b));
                }),
                -1)
          << op.name << " on :" << accel::dtype_name(type);
    // reductions over rows and over columns, and scans, in the same order in both builds
    for (auto op : {accel::ReduceOp::Sum, accel::ReduceOp::Product, accel::ReduceOp::Min, accel::ReduceOp::Max}) {
      EXPECT_EQ(first_difference([&] { return accel::tensor_reduce(op, a, 1024, 1024, 1); }), -1)
          << "reduce " << static_cast<int>(op) << " over rows of :" << accel::dtype_name(type);
      EXPECT_EQ(first_difference([&] { return accel::tensor_reduce(op, a, 1, 1024, 1024); }), -1)
          << "reduce " << static_cast<int>(op) << " over columns of :" << accel::dtype_name(type);
    }
  }

  accel::cpu::CpuBackend cpu_{2};
};

TEST_F(HostKernels, EveryBuildComputesTheBaselinesFloatBits) {
  every_elementwise_op<float>(DType::F32);
  every_elementwise_op<double>(DType::F64);
}

// The complex kernels: products, quotients and magnitudes of pairs of the float inputs (GCC 12
// vectorised a complex product into fmaddsub under -ffp-contract=off until each product was held
// apart: tensor_kernels.h's ACCEL_ROUNDED).
TEST_F(HostKernels, EveryBuildComputesTheBaselinesComplexBits) {
  const size_t n = size_t{1} << 19;
  for (const DType type : {DType::C64, DType::C128}) {
    const Tensor a = type == DType::C64 ? from(inputs<float>(2 * n, 1), type) : from(inputs<double>(2 * n, 1), type);
    const Tensor b = type == DType::C64 ? from(inputs<float>(2 * n, 2), type) : from(inputs<double>(2 * n, 2), type);
    accel::Operand x, y;
    x.tensor = &a, x.shape = {n};
    y.tensor = &b, y.shape = {n};
    for (const auto op : {accel::ComplexOp::multiply, accel::ComplexOp::divide}) {
      // compared as the parts' type (a pair of floats is one 8-byte element to first_difference)
      const auto parts = [&](const Tensor& t) { return accel::tensor_reinterpret(t, type == DType::C64 ? DType::F32 : DType::F64); };
      EXPECT_EQ(first_difference([&] { return parts(accel::tensor_complex(op, x, y)); }), -1)
          << static_cast<int>(op) << " on :" << accel::dtype_name(type) << " in " << wider;
    }
    EXPECT_EQ(first_difference([&] { return accel::tensor_complex_abs(a); }), -1)
        << "abs of :" << accel::dtype_name(type) << " in " << wider;
    for (const Op& op : kUnary) {
      if (!accel::complex_fn(static_cast<accel::UnaryOp>(op.code))) continue;
      EXPECT_EQ(first_difference([&] {
                  return accel::tensor_reinterpret(accel::tensor_complex_fn(static_cast<accel::UnaryOp>(op.code), a, 1),
                                                   type == DType::C64 ? DType::F32 : DType::F64);
                }),
                -1)
          << op.name << " of :" << accel::dtype_name(type) << " in " << wider;
    }
  }
}

// c64's exp, log, sin and cos run glibc's vector math on the host, whose f64 results are not the
// scalar functions', and must still give the scalar formulas' bits (tensor_kernels.h's rounding
// test): every complex function of c64, in every build, against accel_cz_apply element by element
// (the Complex library's formulas in the scalar functions, rounded once), over a million pairs of
// every exponent and the special values, in both of the library's variants.
TEST(HostComplexFunctions, GiveTheScalarFormulasBitsInEveryBuild) {
  accel::cpu::CpuBackend cpu{2};
  const size_t n = size_t{1} << 20;
  // both parts in [-4, 4] for half the pairs; one or both any bit pattern for the rest
  const std::vector<float> pool = inputs<float>(4 * n, 5);
  std::vector<float> parts(2 * n);
  for (size_t i = 0; i < n; ++i) {
    parts[2 * i] = pool[4 * i + (i % 4 == 3 ? 3 : 0)];
    parts[2 * i + 1] = pool[4 * i + (i % 2 == 1 ? 1 : 2)];
  }
  const Tensor z = accel::tensor_from_bytes(cpu, 0, DType::C64, parts.data(), parts.size() * sizeof(float));
  for (const Op& op : kUnary) {
    if (!accel::complex_fn(static_cast<accel::UnaryOp>(op.code))) continue;
    for (const int variant : {0, 3}) {
      std::vector<float> expected(2 * n);
      for (size_t i = 0; i < n; ++i) {
        const accel_cz r = accel_cz_apply(op.code, accel_cz_of(parts[2 * i], parts[2 * i + 1]), variant);
        expected[2 * i] = static_cast<float>(r.re);
        expected[2 * i + 1] = static_cast<float>(r.im);
      }
      for (const auto& [name, entries] : every_build()) {
        ScopedHostEntries use(entries);
        std::vector<float> got(2 * n);
        accel::tensor_to_bytes(accel::tensor_reinterpret(accel::tensor_complex_fn(static_cast<accel::UnaryOp>(op.code), z, variant), DType::F32),
                               got.data(), 2 * n);
        size_t i = 0;
        while (i < 2 * n && same_bits(got[i], expected[i])) ++i;
        EXPECT_EQ(i, 2 * n) << op.name << " (variant " << variant << ") in " << name << ": part " << i << " of "
                            << parts[i & ~size_t{1}] << " + " << parts[i | 1] << "i";
      }
    }
  }
}

// c64's magnitude runs as sqrt(x^2 + y^2) on the host (host_kernels.inc's c64_abs_blocks), and must
// still give the kernel's formula's bits (accel_cz_abs, rounded once), in every build: over pairs of
// every exponent and the special values, and over pairs whose magnitude lies within a few dozen
// ulp (of double) of halfway between two floats, where the root and the formula can round to
// different floats (y ~ sqrt(ulp(x) x) puts |z| ~ x + ulp(x) / 2; steps of y sweep across it). The
// test counts the pairs where they do, so that it shows the near-halfway case is taken.
TEST(HostComplexAbs, GivesTheFormulasBitsNearHalfwayAndElsewhere) {
  accel::cpu::CpuBackend cpu{2};
  std::vector<float> parts = inputs<float>(size_t{1} << 20, 21);
  uint64_t state = 22;
  for (int i = 0; i < 8192; ++i) {
    const uint64_t bits = mix(state);
    const float x = std::ldexp(1.0f + static_cast<float>(bits >> 41) * 0x1p-23f, static_cast<int>(bits % 200) - 100);
    const float y0 = static_cast<float>(std::sqrt(static_cast<double>(std::nextafter(x, INFINITY) - x) * x));
    for (int k = -48; k <= 48; ++k) {
      float y = y0;
      for (int j = 0; j < std::abs(k); ++j) y = std::nextafter(y, k < 0 ? 0.0f : INFINITY);
      const float sx = bits >> 20 & 1 ? -x : x, sy = bits >> 21 & 1 ? -y : y;
      parts.push_back(bits >> 22 & 1 ? sy : sx);
      parts.push_back(bits >> 22 & 1 ? sx : sy);
    }
  }
  const size_t n = parts.size() / 2;
  std::vector<float> expected(n);
  size_t root_differs = 0;
  for (size_t i = 0; i < n; ++i) {
    expected[i] = static_cast<float>(accel_cz_abs(accel_cz_of(parts[2 * i], parts[2 * i + 1])));
    const double x = parts[2 * i], y = parts[2 * i + 1];
    const float root = static_cast<float>(std::sqrt(x * x + y * y));
    if (std::isfinite(expected[i]) && !same_bits(root, expected[i])) ++root_differs;
  }
  EXPECT_GE(root_differs, 10u) << "too few pairs where the root alone rounds otherwise than the formula";
  const Tensor z = accel::tensor_from_bytes(cpu, 0, DType::C64, parts.data(), parts.size() * sizeof(float));
  for (const auto& [name, entries] : every_build()) {
    ScopedHostEntries use(entries);
    std::vector<float> got(n);
    accel::tensor_to_bytes(accel::tensor_complex_abs(z), got.data(), n);
    size_t i = 0;
    while (i < n && same_bits(got[i], expected[i])) ++i;
    EXPECT_EQ(i, n) << "in " << name << ": abs of " << parts[2 * i] << " + " << parts[2 * i + 1] << "i";
  }
}

// Complex products, quotients, sums and differences run as split parts (host_kernels.inc's
// complex_blocks; c64's sums, differences and products with a real operand as loops over the
// interleaved parts, c64_in_floats) where each operand is whole or one element, else per element:
// each gives accel_cz_mul's, accel_cz_div's, accel_cz_add's and accel_cz_sub's bits (the scalar
// formulas, rounded once), element by element, on every layout, with complex and real operands (a
// real x is x + 0i), in every build, over pairs of every exponent and the special values (a finite
// number over an infinite real one); and a real tensor converted is x + 0i, bit for bit (-0 and
// NaN kept).
template <typename T>
void complex_arithmetic_gives_the_formulas_bits(DType type) {
  accel::cpu::CpuBackend cpu{2};
  const DType real_type = type == DType::C64 ? DType::F32 : DType::F64;
  const size_t n = size_t{1} << 17;
  const std::vector<T> a_parts = inputs<T>(2 * n, 11), b_parts = inputs<T>(2 * n, 12), reals = inputs<T>(n, 13);
  const Tensor a = accel::tensor_from_bytes(cpu, 0, type, a_parts.data(), a_parts.size() * sizeof(T));
  const Tensor b = accel::tensor_from_bytes(cpu, 0, type, b_parts.data(), b_parts.size() * sizeof(T));
  const Tensor r = accel::tensor_from_bytes(cpu, 0, real_type, reals.data(), reals.size() * sizeof(T));
  const T one_parts[2] = {T(0), T(1)};  // i
  const T row_parts[8] = {T(1.5), T(-2), T(0), T(3), T(INFINITY), T(0), T(-0.25), T(0.5)};
  const T real_one[1] = {T(-0.0)};
  const Tensor one = accel::tensor_from_bytes(cpu, 0, type, one_parts, sizeof one_parts);
  const Tensor row = accel::tensor_from_bytes(cpu, 0, type, row_parts, sizeof row_parts);
  const Tensor minus_zero = accel::tensor_from_bytes(cpu, 0, real_type, real_one, sizeof real_one);
  struct Side {
    const Tensor* t;
    std::vector<uint64_t> shape;
    const T* parts;
    size_t count;
    bool real;
    // element k as a complex number (a real one's imaginary part 0)
    accel_cz at(size_t k) const { return real ? accel_cz_of(parts[k], 0) : accel_cz_of(parts[2 * k], parts[2 * k + 1]); }
  };
  const Side whole_a{&a, {n / 4, 4}, a_parts.data(), n, false}, whole_b{&b, {n / 4, 4}, b_parts.data(), n, false};
  const Side just_i{&one, {}, one_parts, 1, false}, repeated{&row, {4}, row_parts, 4, false};  // (a row of 4: every row)
  const Side real_whole{&r, {n / 4, 4}, reals.data(), n, true}, real_zero{&minus_zero, {}, real_one, 1, true};
  const std::pair<Side, Side> layouts[] = {{whole_a, whole_b},    {whole_a, just_i},    {just_i, whole_b},
                                           {whole_a, repeated},   {real_whole, just_i}, {whole_a, real_whole},
                                           {real_whole, whole_b}, {repeated, real_whole}, {whole_a, real_zero}};
  using accel::ComplexOp;
  for (const auto op : {ComplexOp::multiply, ComplexOp::divide, ComplexOp::add, ComplexOp::subtract}) {
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; ++l) {
      const auto& [x, y] = layouts[l];
      std::vector<T> expected(2 * n);
      for (size_t i = 0; i < n; ++i) {
        const accel_cz u = x.at(i % x.count), v = y.at(i % y.count);
        const accel_cz z = op == ComplexOp::multiply ? accel_cz_mul(u, v)
                           : op == ComplexOp::divide ? accel_cz_div(u, v)
                           : op == ComplexOp::add    ? accel_cz_add(u, v)
                                                     : accel_cz_sub(u, v);
        expected[2 * i] = static_cast<T>(z.re);
        expected[2 * i + 1] = static_cast<T>(z.im);
      }
      // (moved in, not copied: GCC 12 warns of a null memmove in copying the empty shape)
      accel::Operand xo, yo;
      xo.tensor = x.t, xo.shape = std::vector<uint64_t>(x.shape.begin(), x.shape.end());
      yo.tensor = y.t, yo.shape = std::vector<uint64_t>(y.shape.begin(), y.shape.end());
      for (const auto& [name, entries] : every_build()) {
        ScopedHostEntries use(entries);
        std::vector<T> got(2 * n);
        accel::tensor_to_bytes(accel::tensor_reinterpret(accel::tensor_complex(op, xo, yo), real_type), got.data(), 2 * n);
        size_t i = 0;
        while (i < 2 * n && same_bits(got[i], expected[i])) ++i;
        EXPECT_EQ(i, 2 * n) << "op " << static_cast<int>(op) << " of :" << accel::dtype_name(type) << ", layout " << l
                            << ", in " << name << ": part " << i;
      }
    }
  }
  for (const auto& [name, entries] : every_build()) {
    ScopedHostEntries use(entries);
    std::vector<T> got(2 * n);
    accel::tensor_to_bytes(accel::tensor_reinterpret(accel::tensor_complex_of_real(r), real_type), got.data(), 2 * n);
    size_t i = 0;
    while (i < n && same_bits(got[2 * i], reals[i]) && same_bits(got[2 * i + 1], T(0))) ++i;
    EXPECT_EQ(i, n) << ":" << accel::dtype_name(real_type) << " as :" << accel::dtype_name(type) << " in " << name << ": element " << i;
  }
}

TEST(HostComplexArithmetic, GivesTheScalarFormulasBitsOnEveryLayout) {
  complex_arithmetic_gives_the_formulas_bits<float>(DType::C64);
  complex_arithmetic_gives_the_formulas_bits<double>(DType::C128);
}

TEST_F(HostKernels, EveryBuildComputesTheBaselinesIntegerBits) {
  every_elementwise_op<int32_t>(DType::S32);
  every_elementwise_op<int64_t>(DType::S64);
  every_elementwise_op<uint8_t>(DType::U8);
  every_elementwise_op<uint32_t>(DType::U32);
}

TEST_F(HostKernels, TheChosenBuildIsTheWidestTheCpuHas) {
  // (ACCEL_HOST_ISA caps it: x86-64 keeps the baseline build)
  const char* asked = std::getenv("ACCEL_HOST_ISA");
  std::string widest = wider_builds().back().first;
  if (asked != nullptr && std::string(asked) == "x86-64") widest = "x86-64";
  if (asked != nullptr && std::string(asked) == "x86-64-v3") widest = "x86-64-v3";
  EXPECT_EQ(std::string(accel::cpu::host_kernels().isa), widest);
  EXPECT_EQ(accel::cpu::active_host_entries(), accel::cpu::host_kernels().entries);
}

}  // namespace
