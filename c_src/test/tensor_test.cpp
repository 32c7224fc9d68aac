// The checked tensor operations (core/tensor.cpp) on every compiled backend, against the CPU
// backend's results and hand-computed values: counts, broadcasting, reductions in several passes,
// transpose, casts, matmul, and the checks that keep a bad call from touching memory it does not
// own. A backend that is not usable on this machine is skipped with its reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "core/cancel.hpp"
#include "core/error.hpp"
#include "core/tensor.hpp"
#include "test/every_backend.hpp"

namespace {

using accel::DType;
using accel::Tensor;

class TensorTest : public accel::test::EveryBackend {
 protected:
  template <typename T>
  Tensor from(const std::vector<T>& values, DType type) {
    return accel::tensor_from_bytes(*backend_, 0, type, values.data(), values.size() * sizeof(T));
  }

  template <typename T>
  std::vector<T> read(const Tensor& t) {
    std::vector<T> out(t.count);
    accel::tensor_to_bytes(t, out.data(), t.count);
    return out;
  }
};

// An operand: a tensor with its shape, or a number.
accel::Operand op(const Tensor& t, std::vector<uint64_t> shape) {
  accel::Operand o;
  o.tensor = &t;
  o.shape = std::move(shape);
  return o;
}
accel::Operand num(int64_t i) {
  accel::Operand o;
  o.scalar.i = i;
  return o;
}

// The message of the ArgumentError `run` throws (empty when it throws none).
template <typename F>
std::string argument_error(F run) {
  try {
    run();
  } catch (const accel::ArgumentError& e) {
    return e.what();
  }
  return "";
}

TEST_P(TensorTest, ElementwiseWithBroadcastingAndScalars) {
  const Tensor m = from<int64_t>({1, 2, 3, 4, 5, 6}, DType::S64);
  const Tensor row = from<int64_t>({10, 20, 30}, DType::S64);
  EXPECT_EQ(read<int64_t>(accel::tensor_binary(accel::BinaryOp::add, op(m, {2, 3}), op(row, {3}))),
            (std::vector<int64_t>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(read<int64_t>(accel::tensor_binary(accel::BinaryOp::subtract, num(7), op(m, {2, 3}))),
            (std::vector<int64_t>{6, 5, 4, 3, 2, 1}));
  // General broadcasting: a column {2, 1} against a row {3}, and {2, 1} against {2, 3}.
  const Tensor col = from<int64_t>({100, 200}, DType::S64);
  EXPECT_EQ(read<int64_t>(accel::tensor_binary(accel::BinaryOp::add, op(col, {2, 1}), op(row, {3}))),
            (std::vector<int64_t>{110, 120, 130, 210, 220, 230}));
  EXPECT_EQ(read<int64_t>(accel::tensor_binary(accel::BinaryOp::multiply, op(m, {2, 3}), op(col, {2, 1}))),
            (std::vector<int64_t>{100, 200, 300, 800, 1000, 1200}));
  const Tensor f = from<float>({1.5f, -2.0f}, DType::F32);
  EXPECT_EQ(read<float>(accel::tensor_unary(accel::UnaryOp::abs, f)), (std::vector<float>{1.5f, 2.0f}));
  const Tensor four = from<int64_t>({1, 2, 3, 4}, DType::S64);
  EXPECT_THROW(accel::tensor_binary(accel::BinaryOp::add, op(m, {2, 3}), op(four, {4})), accel::ArgumentError);
  EXPECT_THROW(accel::tensor_binary(accel::BinaryOp::add, op(m, {2, 3}), op(f, {2})), accel::ArgumentError);
  EXPECT_THROW(accel::tensor_binary(accel::BinaryOp::add, op(m, {3, 3}), op(row, {3})), accel::ArgumentError);
  const Tensor zero = from<int64_t>({1, 0, 3, 4, 5, 6}, DType::S64);
  EXPECT_THROW(accel::tensor_binary(accel::BinaryOp::divide, op(m, {6}), op(zero, {6})), accel::ArgumentError);
  EXPECT_THROW(accel::tensor_binary(accel::BinaryOp::remainder, op(m, {6}), op(zero, {6})), accel::ArgumentError);
  EXPECT_THROW(accel::tensor_binary(accel::BinaryOp::pow, op(m, {6}), num(-1)), accel::ArgumentError);
  EXPECT_THROW(accel::tensor_unary(accel::UnaryOp::exp, m), accel::ArgumentError);
  EXPECT_THROW(accel::tensor_binary(accel::BinaryOp::bitwise_and, op(f, {2}), op(f, {2})), accel::ArgumentError);
}

// Every registered operation on every type, against the CPU backend, on values that reach the
// edges: extremes of each integer type, zeros, negative operands, shifts past the width, NaN.
TEST_P(TensorTest, EveryRegisteredOperationEqualsTheCpuBackend) {
  accel::cpu::CpuBackend cpu(2);
  const std::vector<int64_t> ints = {0, 1, -1, 2, -7, 7, 63, 64, 65, -64, 100, -100, 127, -128, 255,
                                     2147483647, -2147483647 - 1, INT64_MAX, INT64_MIN, 3, -3, 31, 32, 33};
  const std::vector<double> floats = {0.0, -0.0, 1.5, -1.5, 2.5, -2.5, 0.1, 1e30, -1e30, 3.0, 1e-30, NAN, INFINITY, -INFINITY};
  for (DType type : {DType::F32, DType::F64, DType::S64, DType::S32, DType::U8, DType::U64, DType::U32}) {
    if (!backend_->supports(type, 0)) continue;
    std::vector<unsigned char> xs, ys;
    const size_t n = accel::is_float(type) ? floats.size() * floats.size() : ints.size() * ints.size();
    auto put = [&](std::vector<unsigned char>& v, double f, int64_t i) {
      unsigned char bytes[8];
      if (type == DType::F32) {
        const float x = static_cast<float>(f);
        std::memcpy(bytes, &x, 4);
      } else if (type == DType::F64) {
        std::memcpy(bytes, &f, 8);
      } else {
        std::memcpy(bytes, &i, 8);  // little-endian: the low bytes are the narrower types' wrap
      }
      v.insert(v.end(), bytes, bytes + accel::dtype_size(type));
    };
    const size_t k = accel::is_float(type) ? floats.size() : ints.size();
    for (size_t i = 0; i < k; ++i)
      for (size_t j = 0; j < k; ++j) {
        put(xs, accel::is_float(type) ? floats[i] : 0, accel::is_float(type) ? 0 : ints[i]);
        put(ys, accel::is_float(type) ? floats[j] : 0, accel::is_float(type) ? 0 : ints[j]);
      }
    const Tensor x = accel::tensor_from_bytes(*backend_, 0, type, xs.data(), xs.size());
    const Tensor y = accel::tensor_from_bytes(*backend_, 0, type, ys.data(), ys.size());
    const Tensor cx = accel::tensor_from_bytes(cpu, 0, type, xs.data(), xs.size());
    const Tensor cy = accel::tensor_from_bytes(cpu, 0, type, ys.data(), ys.size());
    auto bytes = [](const Tensor& t) {
      std::vector<unsigned char> out(t.count * accel::dtype_size(t.type));
      accel::tensor_to_bytes(t, out.data(), t.count);
      return out;
    };
    // Transcendental floats may differ by a few ulp between math libraries: those compare as values.
    auto close = [&](const Tensor& got, const Tensor& want, const char* name) {
      const std::vector<unsigned char> g = bytes(got), w = bytes(want);
      if (!accel::is_float(got.type)) {
        EXPECT_EQ(g, w) << name << " on :" << accel::dtype_name(type);
        return;
      }
      for (size_t e = 0; e < got.count; ++e) {
        double a, b;
        if (got.type == DType::F32) {
          float fa, fb;
          std::memcpy(&fa, &g[e * 4], 4);
          std::memcpy(&fb, &w[e * 4], 4);
          a = fa, b = fb;
        } else {
          std::memcpy(&a, &g[e * 8], 8);
          std::memcpy(&b, &w[e * 8], 8);
        }
        const bool same = (a != a && b != b) || a == b || std::abs(a - b) <= 1e-5 * std::max(std::abs(a), std::abs(b));
        EXPECT_TRUE(same) << name << " on :" << accel::dtype_name(type) << " element " << e << ": " << a << " vs " << b;
      }
    };
    const std::vector<uint64_t> shape = {n};
    for (int code = 0; code < accel::op_count(accel::OpFamily::Binary); ++code) {
      const accel::OpInfo& info = accel::op_info(accel::OpFamily::Binary, code);
      if (!(accel::is_float(type) ? info.floats : info.ints)) continue;
      const auto operation = static_cast<accel::BinaryOp>(code);
      // zero divisors, and on signed types negative exponents and shift amounts, raise: tested below
      const bool divides = operation == accel::BinaryOp::divide || operation == accel::BinaryOp::quotient ||
                           operation == accel::BinaryOp::remainder;
      const bool takes_sign = operation == accel::BinaryOp::pow || operation == accel::BinaryOp::left_shift ||
                              operation == accel::BinaryOp::right_shift;
      if (!accel::is_float(type) && (divides || (takes_sign && !accel::is_unsigned(type)))) continue;
      close(accel::tensor_binary(operation, op(x, shape), op(y, shape)),
            accel::tensor_binary(operation, op(cx, shape), op(cy, shape)), info.name);
    }
    for (int code = 0; code < accel::op_count(accel::OpFamily::Compare); ++code)
      close(accel::tensor_compare(static_cast<accel::CompareOp>(code), op(x, shape), op(y, shape)),
            accel::tensor_compare(static_cast<accel::CompareOp>(code), op(cx, shape), op(cy, shape)),
            accel::op_info(accel::OpFamily::Compare, code).name);
    for (int code = 0; code < accel::op_count(accel::OpFamily::Unary); ++code) {
      const accel::OpInfo& info = accel::op_info(accel::OpFamily::Unary, code);
      if (!(accel::is_float(type) ? info.floats : info.ints)) continue;
      close(accel::tensor_unary(static_cast<accel::UnaryOp>(code), x), accel::tensor_unary(static_cast<accel::UnaryOp>(code), cx),
            info.name);
    }
  }
}

TEST_P(TensorTest, IntegerDivisionPowersAndShiftsHaveElixirsMeaning) {
  const Tensor a = from<int64_t>({7, -7, 7, -7, INT64_MIN, 5}, DType::S64);
  const Tensor b = from<int64_t>({2, 2, -2, -2, -1, 1}, DType::S64);
  const std::vector<uint64_t> s = {6};
  // div/2 and rem/2: truncation toward zero; the remainder takes the dividend's sign.
  EXPECT_EQ(read<int64_t>(accel::tensor_binary(accel::BinaryOp::quotient, op(a, s), op(b, s))),
            (std::vector<int64_t>{3, -3, -3, 3, INT64_MIN, 5}));
  EXPECT_EQ(read<int64_t>(accel::tensor_binary(accel::BinaryOp::remainder, op(a, s), op(b, s))),
            (std::vector<int64_t>{1, -1, 1, -1, 0, 0}));
  const Tensor base = from<int64_t>({3, -2, 2, 0, 7, 1}, DType::S64);
  const Tensor e = from<int64_t>({4, 3, 63, 0, 0, 1000000}, DType::S64);
  EXPECT_EQ(read<int64_t>(accel::tensor_binary(accel::BinaryOp::pow, op(base, s), op(e, s))),
            (std::vector<int64_t>{81, -8, INT64_MIN, 1, 1, 1}));  // 2^63 wraps
  const Tensor one = from<int64_t>({1, 1, 1, -8, -8, -8}, DType::S64);
  const Tensor by = from<int64_t>({63, 64, 0, 1, 70, 2}, DType::S64);
  EXPECT_EQ(read<int64_t>(accel::tensor_binary(accel::BinaryOp::left_shift, op(one, s), op(by, s))),
            (std::vector<int64_t>{INT64_MIN, 0, 1, -16, 0, -32}));
  EXPECT_EQ(read<int64_t>(accel::tensor_binary(accel::BinaryOp::right_shift, op(one, s), op(by, s))),
            (std::vector<int64_t>{0, 0, 1, -4, -1, -2}));
  // A negative amount raises as Nx does, naming the first one.
  const Tensor negative = from<int64_t>({1, 2, -3, -1, 0, 0}, DType::S64);
  EXPECT_EQ(argument_error([&] { accel::tensor_binary(accel::BinaryOp::left_shift, op(one, s), op(negative, s)); }),
            "cannot left shift by -3");
  EXPECT_EQ(argument_error([&] { accel::tensor_binary(accel::BinaryOp::right_shift, op(one, s), op(negative, s)); }),
            "cannot right shift by -3");
  const Tensor u = from<uint8_t>({200, 1, 255}, DType::U8);
  EXPECT_EQ(read<uint8_t>(accel::tensor_binary(accel::BinaryOp::left_shift, op(u, {3}), num(1))),
            (std::vector<uint8_t>{144, 2, 254}));  // in the type's width: bits shifted out are lost
}

TEST_P(TensorTest, SelectSliceConcatenateAndArgReductions) {
  const Tensor m = from<float>({1, 5, 3, 9, 9, 2}, DType::F32);  // {2, 3}
  const Tensor big = accel::tensor_compare(accel::CompareOp::greater, op(m, {2, 3}), num(2));
  EXPECT_EQ(big.type, DType::U8);
  EXPECT_EQ(read<uint8_t>(big), (std::vector<uint8_t>{0, 1, 1, 1, 1, 0}));
  accel::Operand zero;
  zero.scalar.is_float = true;
  EXPECT_EQ(read<float>(accel::tensor_select(op(big, {2, 3}), op(m, {2, 3}), zero)), (std::vector<float>{0, 5, 3, 9, 9, 0}));
  // argmax/argmin along each axis: the first of equal values wins.
  EXPECT_EQ(read<int64_t>(accel::tensor_argreduce(accel::ReduceOp::Max, m, 2, 3, 1)), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(read<int64_t>(accel::tensor_argreduce(accel::ReduceOp::Min, m, 1, 2, 3)), (std::vector<int64_t>{0, 0, 1}));
  EXPECT_EQ(read<int64_t>(accel::tensor_argreduce(accel::ReduceOp::Max, m, 1, 6, 1)), (std::vector<int64_t>{3}));
  // A long axis, reduced in several passes on every backend: the first maximum of 10^6.
  std::vector<int32_t> values(1000000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int32_t>((i * 7919) % 100003);
  values[777777] = 200000;
  values[888888] = 200000;
  EXPECT_EQ(read<int64_t>(accel::tensor_argreduce(accel::ReduceOp::Max, from<int32_t>(values, DType::S32), 1, values.size(), 1)),
            (std::vector<int64_t>{777777}));
  // slice rows 0..1, columns 1 and 3 of a {2, 4}; concatenate along both axes.
  const Tensor w = from<int32_t>({0, 1, 2, 3, 4, 5, 6, 7}, DType::S32);
  EXPECT_EQ(read<int32_t>(accel::tensor_slice(w, {2, 4}, {0, 1}, {2, 2}, {1, 2})), (std::vector<int32_t>{1, 3, 5, 7}));
  EXPECT_THROW(accel::tensor_slice(w, {2, 4}, {0, 1}, {2, 3}, {1, 2}), accel::ArgumentError);
  const Tensor r = from<int32_t>({8, 9}, DType::S32);
  EXPECT_EQ(read<int32_t>(accel::tensor_concatenate({op(w, {2, 4}), op(r, {2, 1})}, 1)),
            (std::vector<int32_t>{0, 1, 2, 3, 8, 4, 5, 6, 7, 9}));
  EXPECT_EQ(read<int32_t>(accel::tensor_concatenate({op(r, {1, 2}), op(r, {1, 2})}, 0)), (std::vector<int32_t>{8, 9, 8, 9}));
  EXPECT_THROW(accel::tensor_concatenate({op(w, {2, 4}), op(r, {1, 2})}, 0), accel::ArgumentError);
}

TEST_P(TensorTest, ReductionsMatchTheCpuBackendOnEveryLayout) {
  accel::cpu::CpuBackend cpu(2);
  std::vector<int32_t> values(3 * 5000 * 7);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int32_t>((i * 2654435761u) % 2001) - 1000;
  const Tensor t = from<int32_t>(values, DType::S32);
  const Tensor ref = accel::tensor_from_bytes(cpu, 0, DType::S32, values.data(), values.size() * 4);
  // (outer, len, inner): whole tensor, each axis of {3, 5000, 7}.
  const uint64_t layouts[][3] = {{1, values.size(), 1}, {1, 3, 35000}, {3, 5000, 7}, {15000, 7, 1}};
  for (const auto& l : layouts) {
    for (auto op : {accel::ReduceOp::Sum, accel::ReduceOp::Min, accel::ReduceOp::Max}) {
      const Tensor got = accel::tensor_reduce(op, t, l[0], l[1], l[2]);
      const Tensor want = accel::tensor_reduce(op, ref, l[0], l[1], l[2]);
      if (op == accel::ReduceOp::Sum)
        EXPECT_EQ(read<int64_t>(got), read<int64_t>(want)) << l[0] << "x" << l[1] << "x" << l[2];
      else
        EXPECT_EQ(read<int32_t>(got), read<int32_t>(want)) << l[0] << "x" << l[1] << "x" << l[2];
    }
  }
  int64_t total = 0;
  for (int32_t v : values) total += v;
  EXPECT_EQ(read<int64_t>(accel::tensor_reduce(accel::ReduceOp::Sum, t, 1, values.size(), 1))[0], total);
  EXPECT_THROW(accel::tensor_reduce(accel::ReduceOp::Sum, t, 2, values.size(), 1), accel::ArgumentError);
}

// On the CPU backend a sum or product along an axis with elements after it combines each column in
// the order of its elements, in the accumulator type, as Nx.BinaryBackend does: bit for bit against
// that order (the kernel's rows of columns; the per-item kernel combined four chains per column),
// for columns fewer than a piece, more than one (300), not a multiple of a vector (37), integers,
// and products; where the CPU splits a long axis in two, within f32's rounding.
TEST(CpuReductions, ColumnsAddInTheOrderOfTheirElements) {
  accel::cpu::CpuBackend cpu(2);
  const auto sequential = [](const auto& v, uint64_t outer, uint64_t len, uint64_t inner, bool times) {
    std::vector<typename std::decay_t<decltype(v)>::value_type> out(outer * inner);
    for (uint64_t o = 0; o < outer; ++o)
      for (uint64_t k = 0; k < inner; ++k) {
        double acc = times ? 1 : 0;
        for (uint64_t j = 0; j < len; ++j) {
          const double x = v[(o * len + j) * inner + k];
          acc = times ? acc * x : acc + x;
        }
        out[o * inner + k] = static_cast<typename std::decay_t<decltype(v)>::value_type>(acc);
      }
    return out;
  };
  // f64 sums show their order in their bits (f32 ones, summed in f64 and rounded, almost never do)
  const uint64_t layouts[][3] = {{3, 1000, 37}, {2, 130, 300}, {1, 128, 256}, {4, 9, 8}};
  for (const auto& l : layouts) {
    std::vector<double> v(l[0] * l[1] * l[2]);
    for (size_t i = 0; i < v.size(); ++i)  // magnitudes over twelve decades
      v[i] = static_cast<double>((i * 2654435761u) % 1000003) * std::pow(10.0, static_cast<double>(i % 13) - 6.0) - 5e5;
    const Tensor t = accel::tensor_from_bytes(cpu, 0, DType::F64, v.data(), v.size() * 8);
    std::vector<double> got(l[0] * l[2]);
    accel::tensor_to_bytes(accel::tensor_reduce(accel::ReduceOp::Sum, t, l[0], l[1], l[2]), got.data(), got.size());
    EXPECT_EQ(got, sequential(v, l[0], l[1], l[2], false)) << "sum " << l[0] << "x" << l[1] << "x" << l[2];
    for (double& x : v) x = 1.0 + x * 1e-9;  // products near 1
    const Tensor near_one = accel::tensor_from_bytes(cpu, 0, DType::F64, v.data(), v.size() * 8);
    accel::tensor_to_bytes(accel::tensor_reduce(accel::ReduceOp::Product, near_one, l[0], l[1], l[2]), got.data(), got.size());
    EXPECT_EQ(got, sequential(v, l[0], l[1], l[2], true)) << "product " << l[0] << "x" << l[1] << "x" << l[2];
    std::vector<float> f(v.begin(), v.end());
    const Tensor ft = accel::tensor_from_bytes(cpu, 0, DType::F32, f.data(), f.size() * 4);
    std::vector<float> got_f(l[0] * l[2]);
    accel::tensor_to_bytes(accel::tensor_reduce(accel::ReduceOp::Product, ft, l[0], l[1], l[2]), got_f.data(), got_f.size());
    EXPECT_EQ(got_f, sequential(f, l[0], l[1], l[2], true)) << "f32 product " << l[0] << "x" << l[1] << "x" << l[2];
  }
  // integers: s32 columns summed exactly into s64, u8 into u64 (wrapping never at these sizes)
  std::vector<int32_t> ints(50 * 40);
  for (size_t i = 0; i < ints.size(); ++i) ints[i] = static_cast<int32_t>((i * 2654435761u) % 2000000001u) - 1000000000;
  std::vector<int64_t> column_sums(40, 0), got_ints(40);
  for (size_t i = 0; i < ints.size(); ++i) column_sums[i % 40] += ints[i];
  const Tensor it = accel::tensor_from_bytes(cpu, 0, DType::S32, ints.data(), ints.size() * 4);
  accel::tensor_to_bytes(accel::tensor_reduce(accel::ReduceOp::Sum, it, 1, 50, 40), got_ints.data(), 40);
  EXPECT_EQ(got_ints, column_sums);
  std::vector<uint8_t> bytes(300 * 16);
  std::vector<uint64_t> byte_sums(16, 0), got_bytes(16);
  for (size_t i = 0; i < bytes.size(); ++i) byte_sums[i % 16] += bytes[i] = static_cast<uint8_t>(i * 37 % 251);
  const Tensor bt = accel::tensor_from_bytes(cpu, 0, DType::U8, bytes.data(), bytes.size());
  accel::tensor_to_bytes(accel::tensor_reduce(accel::ReduceOp::Sum, bt, 1, 300, 16), got_bytes.data(), 16);
  EXPECT_EQ(got_bytes, byte_sums);
  // a long axis over few columns, which the CPU splits into partials: within f32's rounding
  std::vector<float> tall(8 * 100'000);
  for (size_t i = 0; i < tall.size(); ++i) tall[i] = static_cast<float>((i * 2654435761u) % 10007) * 0.001f + 0.25f;
  const Tensor tt = accel::tensor_from_bytes(cpu, 0, DType::F32, tall.data(), tall.size() * 4);
  std::vector<float> tall_got(8);
  accel::tensor_to_bytes(accel::tensor_reduce(accel::ReduceOp::Sum, tt, 1, 100'000, 8), tall_got.data(), 8);
  const std::vector<float> tall_want = sequential(tall, 1, 100'000, 8, false);
  for (size_t k = 0; k < 8; ++k) EXPECT_NEAR(tall_got[k], tall_want[k], tall_want[k] * 1e-7) << "column " << k;
}

// On the CPU backend a min or max along an axis with elements after it runs as rows of columns
// too, and picks as the per-item kernel does, element after element: of equal elements (-0.0 and
// 0.0) the first stays, a NaN replaces what came before it (so the last NaN's bits are the
// result). Bit for bit against that order for floats with NaNs of distinct payloads and signed
// zeros, and for integers, on column counts below, across and beside a piece, and on a long axis
// the CPU splits into partials.
template <typename T>
std::vector<T> sequential_picks(const std::vector<T>& v, uint64_t outer, uint64_t len, uint64_t inner, bool min) {
  std::vector<T> out(outer * inner);
  for (uint64_t o = 0; o < outer; ++o)
    for (uint64_t k = 0; k < inner; ++k) {
      T acc = v[o * len * inner + k];
      for (uint64_t j = 1; j < len; ++j) {
        const T x = v[(o * len + j) * inner + k];
        const T m = (min ? x < acc : x > acc) ? x : acc;
        acc = x != x ? x : m;  // (never true for integers)
      }
      out[o * inner + k] = acc;
    }
  return out;
}

template <typename T>
void columns_pick_in_order(DType type, T (*element)(size_t)) {
  accel::cpu::CpuBackend cpu(2);
  const uint64_t layouts[][3] = {{3, 1000, 37}, {2, 130, 300}, {1, 128, 256}, {4, 9, 8}, {1, 100'000, 8}};
  for (const auto& l : layouts) {
    std::vector<T> v(l[0] * l[1] * l[2]);
    for (size_t i = 0; i < v.size(); ++i) v[i] = element(i);
    const Tensor t = accel::tensor_from_bytes(cpu, 0, type, v.data(), v.size() * sizeof(T));
    for (const bool min : {true, false}) {
      const std::vector<T> want = sequential_picks(v, l[0], l[1], l[2], min);
      std::vector<T> got(want.size());
      accel::tensor_to_bytes(accel::tensor_reduce(min ? accel::ReduceOp::Min : accel::ReduceOp::Max, t, l[0], l[1], l[2]),
                             got.data(), got.size());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(T)), 0)
          << (min ? "min" : "max") << " of :" << accel::dtype_name(type) << " " << l[0] << "x" << l[1] << "x" << l[2];
    }
  }
}

// (floats: a few values, so that ties are many; zeros of both signs; NaNs of many payloads)
template <typename F, typename Bits>
F float_element(size_t i) {
  const size_t h = (i * 2654435761u) % 1000003;
  if (h % 97 == 0) {
    Bits bits;
    const F nan = std::numeric_limits<F>::quiet_NaN();
    std::memcpy(&bits, &nan, sizeof bits);
    bits |= static_cast<Bits>(h % 1021 + 1);  // a payload
    if (h % 2) bits |= static_cast<Bits>(Bits{1} << (sizeof(Bits) * 8 - 1));  // and a sign
    F out;
    std::memcpy(&out, &bits, sizeof out);
    return out;
  }
  if (h % 5 == 0) return h % 2 ? F(-0.0) : F(0.0);
  return static_cast<F>(static_cast<double>(h % 7) - 3.0);
}

TEST(CpuReductions, ColumnMinimaAndMaximaPickInTheOrderOfTheirElements) {
  columns_pick_in_order<float>(DType::F32, float_element<float, uint32_t>);
  columns_pick_in_order<double>(DType::F64, float_element<double, uint64_t>);
  columns_pick_in_order<int32_t>(DType::S32, [](size_t i) { return static_cast<int32_t>((i * 2654435761u) % 2000000001u) - 1000000000; });
  columns_pick_in_order<int64_t>(DType::S64, [](size_t i) { return static_cast<int64_t>(i * 0x9E3779B97F4A7C15ull); });
  columns_pick_in_order<uint8_t>(DType::U8, [](size_t i) { return static_cast<uint8_t>(i * 37 % 251); });
  columns_pick_in_order<uint64_t>(DType::U64, [](size_t i) { return static_cast<uint64_t>(i * 0x9E3779B97F4A7C15ull); });
  columns_pick_in_order<uint32_t>(DType::U32, [](size_t i) { return static_cast<uint32_t>(i * 2654435761u); });
}

// One accumulation rule on every backend: f32 sums accumulate in f64 and are rounded once. Summed in
// f32, 10^7 copies of 0.1f gave 1005958.75 on PoCL (0.6% off); the references here are exact
// (long double over the same f32 inputs), at 10^7 and 10^8 elements, whole and along axes.
TEST_P(TensorTest, F32SumsAtScaleAgreeWithAnExactReference) {
  const size_t n = 10'000'000;
  const Tensor tenth = from<float>(std::vector<float>(n, 0.1f), DType::F32);
  const long double exact = static_cast<long double>(n) * 0.1f;
  EXPECT_NEAR(read<float>(accel::tensor_reduce(accel::ReduceOp::Sum, tenth, 1, n, 1))[0], exact, exact * 1e-7);

  // 10^8 varied values: whole, then as {4, n / 4} along axis 1 and {n / 4, 4} along axis 0.
  const size_t big = 100'000'000;
  std::vector<float> values(big);
  long double total = 0, rows[4] = {0, 0, 0, 0}, cols[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < big; ++i) {
    values[i] = static_cast<float>((i * 2654435761u) % 10007) * 0.001f + 0.25f;
    total += values[i];
    rows[i / (big / 4)] += values[i];
    cols[i % 4] += values[i];
  }
  const Tensor t = from<float>(values, DType::F32);
  values = {};
  EXPECT_NEAR(read<float>(accel::tensor_reduce(accel::ReduceOp::Sum, t, 1, big, 1))[0], total, total * 1e-7);
  const std::vector<float> by_row = read<float>(accel::tensor_reduce(accel::ReduceOp::Sum, t, 4, big / 4, 1));
  const std::vector<float> by_col = read<float>(accel::tensor_reduce(accel::ReduceOp::Sum, t, 1, big / 4, 4));
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_NEAR(by_row[k], rows[k], rows[k] * 1e-7) << "row " << k;
    EXPECT_NEAR(by_col[k], cols[k], cols[k] * 1e-7) << "column " << k;
  }
}

TEST_P(TensorTest, TransposeCastIotaAndMatmul) {
  const Tensor m = from<uint8_t>({1, 2, 3, 4, 5, 6}, DType::U8);
  EXPECT_EQ(read<uint8_t>(accel::tensor_transpose(m, 2, 3)), (std::vector<uint8_t>{1, 4, 2, 5, 3, 6}));
  EXPECT_THROW(accel::tensor_transpose(m, 4, 2), accel::ArgumentError);
  const Tensor f = from<float>({1.9f, -2.9f, 1e20f, -1e20f}, DType::F32);
  EXPECT_EQ(read<int32_t>(accel::tensor_cast(f, DType::S32)), (std::vector<int32_t>{1, -2, 2147483647, -2147483647 - 1}));
  EXPECT_EQ(read<int64_t>(accel::tensor_iota(*backend_, 0, DType::S64, 4)), (std::vector<int64_t>{0, 1, 2, 3}));
  const Tensor a = from<float>({1, 2, 3, 4, 5, 6}, DType::F32);  // 2 x 3
  const Tensor b = from<float>({7, 8, 9, 10, 11, 12}, DType::F32);  // 3 x 2
  try {
    EXPECT_EQ(read<float>(accel::tensor_matmul(a, b, 1, 2, 3, 2)), (std::vector<float>{58, 64, 139, 154}));
  } catch (const accel::ArgumentError& e) {  // a build without this backend's BLAS says so
    EXPECT_NE(std::string(e.what()).find("needs"), std::string::npos) << e.what();
  }
  EXPECT_THROW(accel::tensor_matmul(a, b, 1, 3, 3, 2), accel::ArgumentError);
  // batched: three products, each its own operands' (a strided-batched call), and shapes checked
  // against the batch
  std::vector<double> xs(3 * 2 * 3), ys(3 * 3 * 4);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<double>(i % 7) - 2.0;
  for (size_t i = 0; i < ys.size(); ++i) ys[i] = static_cast<double>(i % 5) * 0.5;
  std::vector<double> want(3 * 2 * 4, 0.0);
  for (size_t p = 0; p < 3; ++p)
    for (size_t r = 0; r < 2; ++r)
      for (size_t c = 0; c < 4; ++c)
        for (size_t j = 0; j < 3; ++j) want[p * 8 + r * 4 + c] += xs[p * 6 + r * 3 + j] * ys[p * 12 + j * 4 + c];
  if (backend_->supports(DType::F64, 0)) {
    try {
      EXPECT_EQ(read<double>(accel::tensor_matmul(from<double>(xs, DType::F64), from<double>(ys, DType::F64), 3, 2, 3, 4)),
                want);
    } catch (const accel::ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("needs"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(accel::tensor_matmul(from<double>(xs, DType::F64), from<double>(ys, DType::F64), 2, 2, 3, 4),
               accel::ArgumentError);
  EXPECT_THROW(accel::tensor_matmul(from<int64_t>({1, 2, 3, 4}, DType::S64), from<int64_t>({1, 2, 3, 4}, DType::S64), 2,
                                    1, 2, 1),
               accel::ArgumentError);
  // integers: Accel's kernel, exact and wrapping (no BLAS takes them); storage types are refused
  const Tensor ints = from<int64_t>({1, 2, 3, INT64_MAX}, DType::S64);
  EXPECT_EQ(read<int64_t>(accel::tensor_matmul(ints, ints, 1, 2, 2, 2)),
            (std::vector<int64_t>{7, static_cast<int64_t>(2 + static_cast<uint64_t>(INT64_MAX) * 2),
                                  static_cast<int64_t>(3 + static_cast<uint64_t>(INT64_MAX) * 3), static_cast<int64_t>(6 + 1)}));
  const Tensor halves = accel::tensor_cast(a, DType::F16);
  EXPECT_THROW(accel::tensor_matmul(halves, halves, 1, 2, 3, 2), accel::ArgumentError);
}

// A stride-1 convolution as shifted products, against its sums written out (small integers, so
// that every sum is exact in f32): two images of a 5 x 6 padded plane by 4 filters of 3 x 2
// positions (each product spans the plane's columns from the first output position's to the
// last's, those between rows left out), and one image by 64 filters, large enough to be split
// among the backend's threads by columns. Backends without a strided BLAS refuse it.
TEST_P(TensorTest, ShiftedConvolutionSumsEachKernelPositionsProducts) {
  // (small integers, and complex numbers of them, whose sums of products every order gets exactly)
  const auto check = [&](auto zero, DType type, size_t n, size_t c, size_t h, size_t w, size_t o, size_t kh, size_t kw) {
    using E = decltype(zero);
    const auto value = [](size_t i, int a, int b) {
      if constexpr (std::is_floating_point_v<E>)
        return static_cast<E>(static_cast<int>(i % a) - a / 2);
      else
        return E(static_cast<int>(i % a) - a / 2, static_cast<int>(i % b) - b / 2);
    };
    std::vector<E> x(n * c * h * w), k(kh * kw * o * c);
    for (size_t i = 0; i < x.size(); ++i) x[i] = value(i, 7, 3);
    for (size_t i = 0; i < k.size(); ++i) k[i] = value(i, 5, 4);
    const size_t ho = h - kh + 1, wo = w - kw + 1;
    accel::ShiftedConv conv;
    conv.batch = n, conv.channels = c, conv.filters = o, conv.plane = h * w;
    for (size_t p = 0; p < kh * kw; ++p) conv.offsets.push_back(p / kw * w + p % kw);
    conv.out_sizes = {ho, wo};
    conv.plane_strides = {w, 1};
    std::vector<E> want(n * o * ho * wo, zero);
    for (size_t i = 0; i < n; ++i)
      for (size_t f = 0; f < o; ++f)
        for (size_t y = 0; y < ho; ++y)
          for (size_t z = 0; z < wo; ++z)
            for (size_t p = 0; p < kh * kw; ++p)
              for (size_t ch = 0; ch < c; ++ch)
                want[((i * o + f) * ho + y) * wo + z] +=
                    k[(p * o + f) * c + ch] * x[(i * c + ch) * h * w + (y + p / kw) * w + z + p % kw];
    const Tensor input = from<E>(x, type), kernel = from<E>(k, type);
    if (!backend_->transposed_operands()) {
      EXPECT_THROW(accel::tensor_conv_shifted(input, kernel, conv), accel::ArgumentError);
      return;
    }
    try {
      EXPECT_EQ(read<E>(accel::tensor_conv_shifted(input, kernel, conv)), want) << accel::dtype_name(type);
    } catch (const accel::ArgumentError& e) {  // a build without this backend's BLAS says so
      EXPECT_NE(std::string(e.what()).find("needs"), std::string::npos) << e.what();
    }
    // a kernel position whose product would read past a plane
    conv.offsets.back() += 1;
    EXPECT_THROW(accel::tensor_conv_shifted(input, kernel, conv), accel::ArgumentError);
  };
  check(0.0f, DType::F32, 2, 3, 5, 6, 4, 3, 2);
  check(0.0f, DType::F32, 1, 16, 20, 20, 64, 3, 3);
  check(0.0, DType::F64, 2, 3, 5, 6, 4, 3, 2);
  // complex: std::complex's (re, im) pairs are Nx's layout (BLAS's cgemm and zgemm on the CPU)
  check(std::complex<float>(), DType::C64, 2, 3, 5, 6, 4, 3, 2);
  check(std::complex<float>(), DType::C64, 3, 16, 20, 20, 16, 3, 3);
  check(std::complex<double>(), DType::C128, 2, 5, 7, 6, 3, 2, 3);
  // integers have no shifted convolution
  const Tensor ints = from<int32_t>({1, 2, 3, 4}, DType::S32);
  accel::ShiftedConv conv;
  conv.batch = 1, conv.channels = 1, conv.filters = 1, conv.plane = 4, conv.offsets = {0};
  conv.out_sizes = {4}, conv.plane_strides = {1};
  EXPECT_THROW(accel::tensor_conv_shifted(ints, from<int32_t>({2}, DType::S32), conv), accel::ArgumentError);
}

TEST_P(TensorTest, SizesThatWouldOverflowAreRefusedBeforeAnyAllocation) {
  EXPECT_THROW(accel::tensor_iota(*backend_, 0, DType::S64, uint64_t{1} << 62), accel::ArgumentError);
  EXPECT_THROW(accel::checked_bytes(~uint64_t{0}, DType::U8), accel::ArgumentError);
  const Tensor t = from<int64_t>({1, 2, 3, 4}, DType::S64);
  EXPECT_THROW(accel::tensor_reduce(accel::ReduceOp::Sum, t, uint64_t{1} << 32, uint64_t{1} << 32, 4), accel::ArgumentError);
  EXPECT_THROW(accel::tensor_from_bytes(*backend_, 0, DType::S64, "abc", 3), accel::ArgumentError);
}

// Through the door, as the binary path: 2^40 iterations would take hours, so only cancellation
// ends the call (the CPU backend checks inside its launch, devices between bounded launches).
TEST_P(TensorTest, ACancelledTensorLogisticMapStops) {
  std::vector<int64_t> xs(1000, 3);
  accel::Cancellation cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cancel.cancel();
  });
  accel::CallOptions options;
  options.cancel = &cancel;
  try {
    accel::tensor_logistic_map(from<int64_t>(xs, DType::S64), accel::plan_logistic_map(6700417, 22, int64_t{1} << 40), options);
    ADD_FAILURE() << "the call was not cancelled";
  } catch (const accel::Error& e) {
    EXPECT_EQ(e.reason(), "cancelled");
  }
  canceller.join();
}

TEST_P(TensorTest, LogisticMapOnATensorEqualsTheBinaryPath) {
  std::vector<int64_t> xs(10007);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<int64_t>(i) - 5000;
  const auto plan = accel::plan_logistic_map(6700417, 22, 10);
  std::vector<int64_t> want(xs.size());
  backend_->logistic_map(accel::Int64Source::of_bytes(reinterpret_cast<const unsigned char*>(xs.data()), xs.size()),
                         reinterpret_cast<unsigned char*>(want.data()), plan, {});
  accel::CallOptions options;
  EXPECT_EQ(read<int64_t>(accel::tensor_logistic_map(from<int64_t>(xs, DType::S64), plan, options)), want);
  // Enough iterations for a device to split the call into several bounded launches (10^8 units
  // against PoCL's 2^25 per launch); the CPU backend is the reference.
  const auto long_plan = accel::plan_logistic_map(6700417, 22, 10000);
  accel::cpu::CpuBackend cpu(2);
  cpu.logistic_map(accel::Int64Source::of_bytes(reinterpret_cast<const unsigned char*>(xs.data()), xs.size()),
                   reinterpret_cast<unsigned char*>(want.data()), long_plan, {});
  EXPECT_EQ(read<int64_t>(accel::tensor_logistic_map(from<int64_t>(xs, DType::S64), long_plan, options)), want);
  EXPECT_THROW(accel::tensor_logistic_map(from<float>({1.0f}, DType::F32), plan, options), accel::ArgumentError);
}

// A device without doubles (some OpenCL GPUs): F64 tensors are refused by the core, with the reason,
// before the backend is asked for memory.
class NoDoublesBackend final : public accel::Backend {
 public:
  accel::BackendStatus status() override { return {"opencl", true, true, "a device without fp64"}; }
  std::vector<accel::DeviceInfo> devices() override { return {}; }
  bool waits_on_device() const override { return true; }
  void logistic_map(const accel::Int64Source&, unsigned char*, const accel::LogisticMapPlan&,
                    const accel::CallOptions&) override {}
  bool supports(DType type, int) override { return type != DType::F64; }
};

// u64 computes unsigned where the sign matters: division, order, shifts, conversion to floats.
TEST_P(TensorTest, U64ComputesUnsigned) {
  const uint64_t big = UINT64_MAX - 5;  // above 2^63: negative if read as s64
  const Tensor a = from<uint64_t>({big, 7, big, 1}, DType::U64);
  const Tensor b = from<uint64_t>({2, big, 3, 63}, DType::U64);
  const std::vector<uint64_t> s = {4};
  EXPECT_EQ(read<uint64_t>(accel::tensor_binary(accel::BinaryOp::quotient, op(a, s), op(b, s))),
            (std::vector<uint64_t>{big / 2, 0, big / 3, 0}));
  EXPECT_EQ(read<uint64_t>(accel::tensor_binary(accel::BinaryOp::remainder, op(a, s), op(b, s))),
            (std::vector<uint64_t>{big % 2, 7, big % 3, 1}));
  EXPECT_EQ(read<uint64_t>(accel::tensor_binary(accel::BinaryOp::max, op(a, s), op(b, s))),
            (std::vector<uint64_t>{big, big, big, 63}));
  EXPECT_EQ(read<uint64_t>(accel::tensor_binary(accel::BinaryOp::right_shift, op(a, s), op(b, s))),
            (std::vector<uint64_t>{big >> 2, 0, big >> 3, 0}));
  EXPECT_EQ(read<uint8_t>(accel::tensor_compare(accel::CompareOp::less, op(a, s), op(b, s))),
            (std::vector<uint8_t>{0, 1, 0, 1}));
  EXPECT_EQ(read<uint64_t>(accel::tensor_reduce(accel::ReduceOp::Max, a, 1, 4, 1)), (std::vector<uint64_t>{big}));
  EXPECT_EQ(read<int64_t>(accel::tensor_argreduce(accel::ReduceOp::Min, a, 1, 4, 1)), (std::vector<int64_t>{3}));
  const Tensor sum = accel::tensor_reduce(accel::ReduceOp::Sum, from<uint8_t>({200, 100}, DType::U8), 1, 2, 1);
  EXPECT_EQ(sum.type, DType::U64);  // as Nx sums unsigned integers
  EXPECT_EQ(read<uint64_t>(sum), (std::vector<uint64_t>{300}));
  if (backend_->supports(DType::F64, 0)) {
    EXPECT_EQ(read<double>(accel::tensor_cast(a, DType::F64)), (std::vector<double>{18446744073709551610.0, 7, 18446744073709551610.0, 1}));
  }
  EXPECT_EQ(read<uint64_t>(accel::tensor_cast(from<float>({-1.0f, 1e20f, 2.5f, 9.3e18f}, DType::F32), DType::U64)),
            (std::vector<uint64_t>{0, UINT64_MAX, 2, static_cast<uint64_t>(9.3e18f)}));
}

// The nearest f16 (ties to even) by search over every f16: an oracle independent of the kernel's
// bit arithmetic.
uint16_t nearest_f16(double x) {
  if (std::isnan(x)) return 0x7E00;
  uint16_t best = 0;
  double best_gap = INFINITY;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float v = accel_f16_to_f32(h);
    if (std::isnan(v) || std::signbit(v) != std::signbit(x)) continue;
    const double gap = std::abs(static_cast<double>(v) - x);
    // ties to the even significand; beyond the largest finite value by half an ulp, infinity
    if (gap < best_gap || (gap == best_gap && (h & 1) == 0)) best = static_cast<uint16_t>(h), best_gap = gap;
  }
  if (std::abs(x) >= 65520.0) best = static_cast<uint16_t>((std::signbit(x) ? 0x8000 : 0) | 0x7C00);
  if (x == 0) best = std::signbit(x) ? 0x8000 : 0;
  return best;
}

// Every type converts to every other on every backend, as Nx converts: integers wrap, floats
// truncate and saturate into integers, f16 rounds to nearest even, bf16 keeps f32's high half.
TEST_P(TensorTest, StorageTypesConvertAsNxDoes) {
  const std::vector<double> values = {0.0, -0.0, 1.0, -1.0, 0.5, 1.0009765625, 1.00048828125, 1.000732421875, 65504.0,
                                      65519.0, 65520.0, 1e5, -70000.0, 5.960464477539063e-8, 2.98e-8, 3.0e-8,
                                      6.1e-5, 0.1, -0.3, 3.14159, 255.5, -128.7, 40000.0, INFINITY, -INFINITY, NAN};
  std::vector<float> f32;
  for (double v : values) f32.push_back(static_cast<float>(v));
  const Tensor f = from<float>(f32, DType::F32);
  const std::vector<uint16_t> halves = read<uint16_t>(accel::tensor_cast(f, DType::F16));
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(halves[i], nearest_f16(f32[i])) << "f32 " << f32[i] << " to f16";
  if (backend_->supports(DType::F64, 0)) {  // from doubles, one rounding (1 + 2^-11 + 2^-30 rounds up)
    const std::vector<double> d = {1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -30), 1.0 + std::ldexp(1.0, -11),
                                   std::ldexp(1.0, -25) + std::ldexp(1.0, -40)};
    EXPECT_EQ(read<uint16_t>(accel::tensor_cast(from<double>(d, DType::F64), DType::F16)), (std::vector<uint16_t>{0x3C01, 0x3C00, 1}));
  }
  // back to f32 exactly, every f16 (subnormals, infinities and NaN included)
  std::vector<uint16_t> every(0x10000);
  for (uint32_t h = 0; h < 0x10000; ++h) every[h] = static_cast<uint16_t>(h);
  const std::vector<float> wide = read<float>(accel::tensor_cast(from<uint16_t>(every, DType::F16), DType::F32));
  const std::vector<uint16_t> again = read<uint16_t>(accel::tensor_cast(from<float>(wide, DType::F32), DType::F16));
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
    if (nan) {
      EXPECT_TRUE(std::isnan(wide[h]));
    } else {
      EXPECT_EQ(again[h], h) << "f16 " << h << " round trip";
    }
  }
  // bf16: the high half of the f32 value
  const std::vector<uint16_t> brain = read<uint16_t>(accel::tensor_cast(f, DType::BF16));
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &f32[i], 4);
    if (!std::isnan(f32[i])) {
      EXPECT_EQ(brain[i], bits >> 16) << "bf16 of " << f32[i];
    }
  }
  // integers of every width wrap; floats into them truncate and saturate
  const Tensor ints = from<int64_t>({-1, 300, 70000, -129, 5000000000LL, 127}, DType::S64);
  EXPECT_EQ(read<int8_t>(accel::tensor_cast(ints, DType::S8)), (std::vector<int8_t>{-1, 44, 112, 127, 0, 127}));
  EXPECT_EQ(read<uint16_t>(accel::tensor_cast(ints, DType::U16)), (std::vector<uint16_t>{65535, 300, 4464, 65407, 61952, 127}));
  EXPECT_EQ(read<int16_t>(accel::tensor_cast(ints, DType::S16)), (std::vector<int16_t>{-1, 300, 4464, -129, -3584, 127}));
  EXPECT_EQ(read<uint32_t>(accel::tensor_cast(ints, DType::U32)),
            (std::vector<uint32_t>{4294967295u, 300, 70000, 4294967167u, 705032704u, 127}));
  const Tensor narrow = accel::tensor_cast(from<int16_t>({-2, 32767}, DType::S16), DType::S64);  // sign-extended
  EXPECT_EQ(read<int64_t>(narrow), (std::vector<int64_t>{-2, 32767}));
  EXPECT_EQ(read<int64_t>(accel::tensor_cast(from<uint16_t>({65535, 1}, DType::U16), DType::S64)), (std::vector<int64_t>{65535, 1}));
  EXPECT_EQ(read<int8_t>(accel::tensor_cast(from<float>({-300.5f, 300.5f, -1.9f, NAN}, DType::F32), DType::S8)),
            (std::vector<int8_t>{-128, 127, -1, 0}));
  EXPECT_EQ(read<uint16_t>(accel::tensor_cast(from<float>({-1.0f, 7e4f, 3.9f}, DType::F32), DType::U16)),
            (std::vector<uint16_t>{0, 65535, 3}));
  // f16 from integers, and to them
  EXPECT_EQ(read<uint16_t>(accel::tensor_cast(from<int32_t>({2049, 70000, -3}, DType::S32), DType::F16)),
            (std::vector<uint16_t>{0x6800, 0x7C00, 0xC200}));  // 2049 ties to 2048
  EXPECT_EQ(read<int32_t>(accel::tensor_cast(from<uint16_t>({0x6800, 0xC200}, DType::F16), DType::S32)),
            (std::vector<int32_t>{2048, -3}));
  // complex types convert to nothing else; storage types have no kernels of their own
  EXPECT_NE(argument_error([&] { accel::tensor_cast(from<float>({1, 2}, DType::C64), DType::F32); }), "");
  EXPECT_EQ(argument_error([&] { accel::tensor_unary(accel::UnaryOp::negate, from<int16_t>({1}, DType::S16)); }),
            "Accel.Tensor.negate/1 has no kernel for :s16 (a storage type): convert it with Accel.Tensor.as_type/2 first");
  // reinterpreting shares the bytes
  const Tensor bits = accel::tensor_reinterpret(from<float>({1.0f, -2.0f}, DType::F32), DType::U32);
  EXPECT_EQ(read<uint32_t>(bits), (std::vector<uint32_t>{0x3F800000u, 0xC0000000u}));
  EXPECT_EQ(accel::tensor_reinterpret(bits, DType::U16).count, 4u);
  EXPECT_NE(argument_error([&] { accel::tensor_reinterpret(from<uint8_t>({1, 2, 3}, DType::U8), DType::U16); }), "");
}

// Nx 0.9+'s sub-byte integers (a byte per element here) wrap to their width and saturate from floats;
// f8 (E5M2) is the f16's high byte, f8_e4m3fn Nx's saturating E4M3FN; every 8-bit float reads back as
// itself.
TEST_P(TensorTest, SubByteIntegersAndEightBitFloatsConvertAsNxDoes) {
  const Tensor ints = from<int64_t>({-1, 300, 7, 8, -9, 2, 3, 4}, DType::S64);
  EXPECT_EQ(read<int8_t>(accel::tensor_cast(ints, DType::S4)), (std::vector<int8_t>{-1, -4, 7, -8, 7, 2, 3, 4}));
  EXPECT_EQ(read<uint8_t>(accel::tensor_cast(ints, DType::U4)), (std::vector<uint8_t>{15, 12, 7, 8, 7, 2, 3, 4}));
  EXPECT_EQ(read<int8_t>(accel::tensor_cast(ints, DType::S2)), (std::vector<int8_t>{-1, 0, -1, 0, -1, -2, -1, 0}));
  EXPECT_EQ(read<uint8_t>(accel::tensor_cast(ints, DType::U2)), (std::vector<uint8_t>{3, 0, 3, 0, 3, 2, 3, 0}));
  const Tensor floats = from<float>({-300.5f, 300.5f, -1.9f, NAN, 7.9f, -8.5f}, DType::F32);
  EXPECT_EQ(read<int8_t>(accel::tensor_cast(floats, DType::S4)), (std::vector<int8_t>{-8, 7, -1, 0, 7, -8}));
  EXPECT_EQ(read<uint8_t>(accel::tensor_cast(floats, DType::U4)), (std::vector<uint8_t>{0, 15, 0, 0, 7, 0}));
  EXPECT_EQ(read<int64_t>(accel::tensor_cast(from<int8_t>({-8, 7, -2}, DType::S4), DType::S64)),
            (std::vector<int64_t>{-8, 7, -2}));  // sign-extended
  EXPECT_EQ(read<int64_t>(accel::tensor_cast(from<uint8_t>({15, 3}, DType::U4), DType::S64)), (std::vector<int64_t>{15, 3}));

  const std::vector<float> values = {0.0f, -0.0f, 1.0f, -2.5f, 0.3f, 1.99f, 1e-3f, 448.0f, 1000.0f, -1e6f, 6e4f, 1e5f, INFINITY, -INFINITY, NAN};
  const Tensor f = from<float>(values, DType::F32);
  const std::vector<uint8_t> e5m2 = read<uint8_t>(accel::tensor_cast(f, DType::F8));
  for (size_t i = 0; i + 1 < values.size(); ++i)
    EXPECT_EQ(e5m2[i], nearest_f16(values[i]) >> 8) << "f32 " << values[i] << " to f8";
  EXPECT_EQ(e5m2.back() & 0x7Cu, 0x7Cu);  // NaN stays one
  EXPECT_NE(e5m2.back() & 3u, 0u);
  // Nx.Floating.dump_f8_e4m3fn's bytes: 1.99 keeps its exponent (mantissa capped at 7), 1e-3 is a
  // subnormal, beyond 448 and the infinities saturate
  EXPECT_EQ(read<uint8_t>(accel::tensor_cast(f, DType::F8E4M3FN)),
            (std::vector<uint8_t>{0x00, 0x80, 0x38, 0xC2, 0x2A, 0x3F, 0x01, 0x7E, 0x7E, 0xFE, 0x7E, 0x7E, 0x7E, 0xFE, 0x7F}));
  EXPECT_EQ(read<uint8_t>(accel::tensor_cast(from<int32_t>({2, -3, 500}, DType::S32), DType::F8E4M3FN)),
            (std::vector<uint8_t>{0x40, 0xC4, 0x7E}));
  // every byte reads as its value, and back
  std::vector<uint8_t> every(256);
  for (int b = 0; b < 256; ++b) every[b] = static_cast<uint8_t>(b);
  for (DType t : {DType::F8, DType::F8E4M3FN}) {
    const std::vector<float> wide = read<float>(accel::tensor_cast(from<uint8_t>(every, t), DType::F32));
    const std::vector<uint8_t> again = read<uint8_t>(accel::tensor_cast(from<float>(wide, DType::F32), t));
    for (int b = 0; b < 256; ++b) {
      if (std::isnan(wide[b])) continue;
      EXPECT_EQ(again[b], b) << accel::dtype_name(t) << " byte " << b << " read as " << wide[b];
    }
  }
  const std::vector<float> e4m3 = read<float>(accel::tensor_cast(from<uint8_t>({0x38, 0x7E, 0x01, 0x08, 0xC2, 0x7F, 0xFF}, DType::F8E4M3FN), DType::F32));
  EXPECT_EQ(std::vector<float>(e4m3.begin(), e4m3.begin() + 5), (std::vector<float>{1.0f, 448.0f, 0.001953125f, 0.015625f, -2.5f}));
  EXPECT_TRUE(std::isnan(e4m3[5]) && std::isnan(e4m3[6]));
  // f32 to f16 over a sweep of bit patterns (f16's normal, subnormal and overflowing ranges among
  // them): the nearest f16, ties to even
  std::vector<float> sweep;
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 2147483647 / 1000) {
    float v;
    const uint32_t b32 = static_cast<uint32_t>(bits);
    std::memcpy(&v, &b32, 4);
    if (!std::isnan(v)) sweep.push_back(v);
  }
  const std::vector<uint16_t> swept = read<uint16_t>(accel::tensor_cast(from<float>(sweep, DType::F32), DType::F16));
  for (size_t i = 0; i < sweep.size(); ++i) EXPECT_EQ(swept[i], nearest_f16(sweep[i])) << "f32 " << sweep[i] << " to f16";
  const std::vector<float> e5m2_read = read<float>(accel::tensor_cast(from<uint8_t>({0x3C, 0x7C, 0x01, 0xC1}, DType::F8), DType::F32));
  EXPECT_EQ(e5m2_read, (std::vector<float>{1.0f, INFINITY, 0x1p-16f, -2.5f}));
}

// Copies and transposes move 2- and 16-byte elements (f16, c128) as every other size.
TEST_P(TensorTest, TwoAndSixteenByteElementsMove) {
  const Tensor h = from<uint16_t>({1, 2, 3, 4, 5, 6}, DType::U16);  // {2, 3}
  EXPECT_EQ(read<uint16_t>(accel::tensor_transpose(h, 2, 3)), (std::vector<uint16_t>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(read<uint16_t>(accel::tensor_slice(h, {2, 3}, {0, 1}, {2, 2}, {1, 1})), (std::vector<uint16_t>{2, 3, 5, 6}));
  const Tensor c = from<double>({1, 10, 2, 20, 3, 30, 4, 40}, DType::C128);  // {2, 2} of (re, im)
  EXPECT_EQ(read<double>(accel::tensor_reinterpret(accel::tensor_transpose(c, 2, 2), DType::F64)),
            (std::vector<double>{1, 10, 3, 30, 2, 20, 4, 40}));
}

// argmin/argmax rank NaN and ties as asked (Nx 0.7's scan and Nx 0.8's last NaN are built on these).
TEST_P(TensorTest, ArgReductionsRankNanAndTiesAsAsked) {
  const float nan = NAN;
  // rows of 3: [1, nan, 5], [nan, 2, nan], [4, 4, 1], [nan, nan, nan]
  const Tensor t = from<float>({1, nan, 5, nan, 2, nan, 4, 4, 1, nan, nan, nan}, DType::F32);
  auto arg = [&](accel::ReduceOp op, accel::NanRank nan_rank, bool last) {
    return read<int64_t>(accel::tensor_argreduce(op, t, 4, 3, 1, {nan_rank, last}));
  };
  using accel::NanRank;
  using accel::ReduceOp;
  EXPECT_EQ(arg(ReduceOp::Max, NanRank::First, false), (std::vector<int64_t>{1, 0, 0, 0}));
  EXPECT_EQ(arg(ReduceOp::Max, NanRank::Last, false), (std::vector<int64_t>{1, 2, 0, 2}));
  EXPECT_EQ(arg(ReduceOp::Max, NanRank::Ignored, false), (std::vector<int64_t>{2, 1, 0, 0}));
  EXPECT_EQ(arg(ReduceOp::Max, NanRank::Ignored, true), (std::vector<int64_t>{2, 1, 1, 0}));
  EXPECT_EQ(arg(ReduceOp::Min, NanRank::Ignored, false), (std::vector<int64_t>{0, 1, 2, 0}));
  // across partial passes (a long axis): the policies hold where partials meet
  std::vector<float> long_row(100000, 1.0f);
  long_row[3] = nan, long_row[70000] = nan, long_row[50000] = 7.0f, long_row[90000] = 7.0f;
  const Tensor l = from<float>(long_row, DType::F32);
  EXPECT_EQ(read<int64_t>(accel::tensor_argreduce(ReduceOp::Max, l, 1, 100000, 1, {NanRank::Last, false})), (std::vector<int64_t>{70000}));
  EXPECT_EQ(read<int64_t>(accel::tensor_argreduce(ReduceOp::Max, l, 1, 100000, 1, {NanRank::First, false})), (std::vector<int64_t>{3}));
  EXPECT_EQ(read<int64_t>(accel::tensor_argreduce(ReduceOp::Max, l, 1, 100000, 1, {NanRank::Ignored, false})), (std::vector<int64_t>{50000}));
  EXPECT_EQ(read<int64_t>(accel::tensor_argreduce(ReduceOp::Max, l, 1, 100000, 1, {NanRank::Ignored, true})), (std::vector<int64_t>{90000}));
}

// Views, copies and broadcasting of any rank: dimensions merge where the layouts allow, and what
// stays above ACCEL_MAX_RANK is copied in several launches.
TEST_P(TensorTest, ViewsAndBroadcastsOfAnyRank) {
  // {2, 2, ..., 2} of rank 12, transposed by reversing its axes: no two dimensions merge
  const size_t rank = 12;
  std::vector<int64_t> values(size_t{1} << rank);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int64_t>(i);
  const Tensor t = from<int64_t>(values, DType::S64);
  const std::vector<uint64_t> shape(rank, 2);
  std::vector<int64_t> reversed(rank);
  for (size_t d = 0; d < rank; ++d) reversed[d] = int64_t{1} << d;  // axis d of the view is axis rank-1-d
  const std::vector<int64_t> got = read<int64_t>(accel::tensor_view(t, shape, reversed, 0));
  for (size_t i = 0; i < values.size(); ++i) {
    size_t bits_reversed = 0;
    for (size_t d = 0; d < rank; ++d) bits_reversed |= ((i >> d) & 1) << (rank - 1 - d);
    ASSERT_EQ(got[i], static_cast<int64_t>(bits_reversed)) << "element " << i;
  }
  // a contiguous view of rank 12 merges into one dimension: one launch
  std::vector<int64_t> contiguous(rank);
  for (size_t d = 0; d < rank; ++d) contiguous[d] = int64_t{1} << (rank - 1 - d);
  EXPECT_EQ(read<int64_t>(accel::tensor_view(t, shape, contiguous, 0)), values);
  // broadcasting {2, 1, 2, 1, ...} against {1, 2, 1, 2, ...} over 12 dimensions
  std::vector<uint64_t> a_shape(rank), b_shape(rank);
  for (size_t d = 0; d < rank; ++d) a_shape[d] = d % 2 == 0 ? 2 : 1, b_shape[d] = d % 2 == 0 ? 1 : 2;
  std::vector<int64_t> av(64), bv(64);
  for (size_t i = 0; i < 64; ++i) av[i] = static_cast<int64_t>(i) * 100, bv[i] = static_cast<int64_t>(i);
  const Tensor a = from<int64_t>(av, DType::S64), b = from<int64_t>(bv, DType::S64);
  const std::vector<int64_t> sum = read<int64_t>(accel::tensor_binary(accel::BinaryOp::add, op(a, a_shape), op(b, b_shape)));
  ASSERT_EQ(sum.size(), values.size());
  for (size_t i = 0; i < sum.size(); ++i) {
    size_t ai = 0, bi = 0;  // even axes index a, odd ones b (axis 0 is the most significant bit)
    for (size_t d = 0; d < rank; ++d) {
      const size_t bit = (i >> (rank - 1 - d)) & 1;
      if (d % 2 == 0) ai = ai * 2 + bit; else bi = bi * 2 + bit;
    }
    ASSERT_EQ(sum[i], static_cast<int64_t>(ai * 100 + bi)) << "element " << i;
  }
}

TEST_P(TensorTest, SortsAreStableInNxsOrderWithEitherMerge) {
  // rows of 1000 with many repeats, NaN and infinities: std::stable_sort in Nx's order is the oracle
  const uint64_t rows = 3, len = 1000;
  std::vector<float> values(rows * len);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>((i * 7919 + 13) % 97) - 40.0f;
  for (size_t i = 5; i < values.size(); i += 37) values[i] = NAN;
  for (size_t i = 9; i < values.size(); i += 53) values[i] = -INFINITY;
  const Tensor t = from(values, DType::F32);
  for (bool desc : {false, true}) {
    auto before = [desc](float a, float b) {
      if (desc) return std::isnan(a) ? !std::isnan(b) : !std::isnan(b) && a > b;
      return std::isnan(a) ? false : std::isnan(b) || a < b;
    };
    std::vector<int64_t> want_index(values.size());
    for (uint64_t r = 0; r < rows; ++r) {
      std::vector<int64_t> row(len);
      for (uint64_t j = 0; j < len; ++j) row[j] = static_cast<int64_t>(j);
      std::stable_sort(row.begin(), row.end(), [&](int64_t a, int64_t b) { return before(values[r * len + a], values[r * len + b]); });
      std::copy(row.begin(), row.end(), want_index.begin() + static_cast<std::ptrdiff_t>(r * len));
    }
    for (accel::SortMerge merge : {accel::SortMerge::Sequential, accel::SortMerge::Search}) {
      const accel::SortResult got = accel::tensor_sort(t, rows, len, desc, true, merge);
      EXPECT_EQ(read<int64_t>(got.indices), want_index) << "desc " << desc << " merge " << static_cast<int>(merge);
      const std::vector<float> sorted = read<float>(got.values);
      for (size_t i = 0; i < sorted.size(); ++i) {
        const float want = values[i / len * len + static_cast<size_t>(want_index[i])];
        ASSERT_TRUE(std::isnan(want) ? std::isnan(sorted[i]) : sorted[i] == want) << i;
      }
    }
  }
}

TEST_P(TensorTest, GatherScatterAndWindowsAddressOnlyWhatTheyOwn) {
  // a 4 x 5 table; take rows [3, 0, 3] (one index tuple per output row, the row a run)
  std::vector<int32_t> table(20);
  for (int32_t i = 0; i < 20; ++i) table[static_cast<size_t>(i)] = i;
  const Tensor t = from(table, DType::S32);
  const Tensor rows = from(std::vector<int64_t>{3, 0, 3}, DType::S64);
  accel::GatherPlan take{{3, 5}, {0, 1}, {1, 0}, {{4}, {5}}};
  EXPECT_EQ(read<int32_t>(accel::tensor_gather(t, rows, take)),
            (std::vector<int32_t>{15, 16, 17, 18, 19, 0, 1, 2, 3, 4, 15, 16, 17, 18, 19}));
  // an index outside its axis is reported, and nothing outside the table is read
  const Tensor bad = from(std::vector<int64_t>{1, 4}, DType::S64);
  accel::GatherPlan two{{2, 5}, {0, 1}, {1, 0}, {{4}, {5}}};
  EXPECT_THROW(accel::tensor_gather(t, bad, two), accel::IndexOutOfBounds);
  // a plan that would read past the table, or more index tuples than there are, is refused
  accel::GatherPlan far{{3, 6}, {0, 1}, {1, 0}, {{4}, {5}}};
  EXPECT_NE(argument_error([&] { accel::tensor_gather(t, rows, far); }), "");
  accel::GatherPlan many{{4, 5}, {0, 1}, {1, 0}, {{4}, {5}}};
  EXPECT_NE(argument_error([&] { accel::tensor_gather(t, rows, many); }), "");

  // indexed_add of rows [1, 1] (the same row twice: both apply) with two rows of ones
  accel::ScatterPlan add;
  add.slice_shape = {5};
  add.out_strides = {1};
  add.update_strides = {1};
  add.updates = 2;
  add.update_step = 5;
  add.axes = {{4}, {5}};
  const Tensor ones = from(std::vector<int32_t>(10, 1), DType::S32);
  const std::vector<int32_t> added = read<int32_t>(accel::tensor_scatter(accel::ScatterOp::Add, t, from(std::vector<int64_t>{1, 1}, DType::S64), ones, add));
  EXPECT_EQ(std::vector<int32_t>(added.begin() + 5, added.begin() + 10), (std::vector<int32_t>{7, 8, 9, 10, 11}));
  EXPECT_EQ(added[0], 0);
  EXPECT_THROW(accel::tensor_scatter(accel::ScatterOp::Put, t, bad, ones, add), accel::IndexOutOfBounds);
  add.update_step = 6;  // the second update would read past the updates
  EXPECT_NE(argument_error([&] { accel::tensor_scatter(accel::ScatterOp::Put, t, rows, ones, add); }), "");

  // a 2 x 2 max-pool of the table (4 x 5, stride 2: 2 x 2 windows), and a window sum padded by one
  std::vector<accel::WindowDim> pool{{2, 4, 5, 2, 2, 0, 1}, {2, 5, 1, 2, 2, 0, 1}};
  EXPECT_EQ(read<int32_t>(accel::tensor_window(accel::WindowOp::Max, t, 0x80000000u, pool)), (std::vector<int32_t>{6, 8, 16, 18}));
  std::vector<accel::WindowDim> padded{{1, 4, 5, 3, 1, 1, 1}, {1, 5, 1, 3, 1, 1, 1}};
  EXPECT_EQ(read<int32_t>(accel::tensor_window(accel::WindowOp::Sum, t, 0, padded)), (std::vector<int32_t>{0 + 1 + 5 + 6}));
  std::vector<accel::WindowDim> zero{{2, 4, 5, 0, 2, 0, 1}};
  EXPECT_NE(argument_error([&] { accel::tensor_window(accel::WindowOp::Sum, t, 0, zero); }), "");
  std::vector<accel::WindowDim> outside{{2, 5, 5, 2, 2, 0, 1}, {2, 5, 1, 2, 2, 0, 1}};
  EXPECT_NE(argument_error([&] { accel::tensor_window(accel::WindowOp::Sum, t, 0, outside); }), "");
}

TEST_P(TensorTest, LinearAlgebraFactorsAndSolvesAsNxDoes) {
  // QR of a 3 x 2: Q^T Q = I, Q R = A, and Nx's signs (each reflected column's R[i][i] positive)
  const std::vector<double> a{1, -2, 4, 5, 7, 8};
  accel::LinalgPlan plan;
  plan.m = 3, plan.n = 2;
  std::vector<Tensor> qr = accel::tensor_decompose(accel::LinalgOp::QR, from(a, DType::F64), plan);
  const std::vector<double> q = read<double>(qr[0]), r = read<double>(qr[1]);
  ASSERT_EQ(q.size(), 6u);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_GT(r[0], 0);
  EXPECT_GT(r[3], 0);
  EXPECT_EQ(r[2], 0);
  for (size_t i = 0; i < 3; ++i)
    for (size_t j = 0; j < 2; ++j) EXPECT_NEAR(q[i * 2] * r[j] + q[i * 2 + 1] * r[2 + j], a[i * 2 + j], 1e-12);
  EXPECT_NEAR(q[0] * q[1] + q[2] * q[3] + q[4] * q[5], 0, 1e-12);

  // Cholesky of [[4, 2], [2, 3]] is [[2, 0], [1, sqrt 2]]; of a matrix that is not positive
  // definite, NaN from the failing pivot on
  plan.m = plan.n = 2;
  EXPECT_EQ(read<float>(accel::tensor_decompose(accel::LinalgOp::Cholesky, from(std::vector<float>{4, 2, 2, 3}, DType::F32), plan)[0]),
            (std::vector<float>{2, 0, 1, std::sqrt(2.0f)}));
  const std::vector<double> bad = read<double>(accel::tensor_decompose(accel::LinalgOp::Cholesky, from(std::vector<double>{1, 2, 2, 1}, DType::F64), plan)[0]);
  EXPECT_EQ(bad[0], 1);
  EXPECT_TRUE(std::isnan(bad[3]));

  // determinants: a batch of a 2 x 2 (Nx's closed form) and, as 4 x 4, a permutation's sign
  plan.batch = 2;
  EXPECT_EQ(read<double>(accel::tensor_decompose(accel::LinalgOp::Determinant, from(std::vector<double>{1, 2, 3, 4, 0, 1, 1, 0}, DType::F64), plan)[0]),
            (std::vector<double>{-2, -1}));
  plan.batch = 1, plan.m = plan.n = 4;
  const std::vector<double> swap{0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  EXPECT_EQ(read<double>(accel::tensor_decompose(accel::LinalgOp::Determinant, from(swap, DType::F64), plan)[0]), std::vector<double>{-1});

  // solve [[2, 1], [1, 3]] x = [3, 5]: x = [0.8, 1.4]; a singular matrix raises as Nx's message
  accel::LinalgPlan s;
  s.n = 2, s.b_rows = 2, s.b_cols = 1;
  const std::vector<double> x = read<double>(accel::tensor_solve(from(std::vector<double>{2, 1, 1, 3}, DType::F64), from(std::vector<double>{3, 5}, DType::F64), s, false));
  EXPECT_NEAR(x[0], 0.8, 1e-15);
  EXPECT_NEAR(x[1], 1.4, 1e-15);
  EXPECT_EQ(argument_error([&] { accel::tensor_solve(from(std::vector<double>{1, 2, 2, 4}, DType::F64), from(std::vector<double>{1, 2}, DType::F64), s, false); }),
            "can't solve for singular matrix");
  // triangular: x A = b with A upper ([[2, 1], [0, 4]]): x = [1.5, 0.625] for b = [3, 4]
  s.left = false, s.lower = false, s.b_rows = 1, s.b_cols = 2;
  const std::vector<double> y = read<double>(accel::tensor_solve(from(std::vector<double>{2, 1, 0, 4}, DType::F64), from(std::vector<double>{3, 4}, DType::F64), s, true));
  EXPECT_EQ(y, (std::vector<double>{1.5, 0.625}));
  EXPECT_EQ(argument_error([&] { accel::tensor_solve(from(std::vector<double>{2, 1, 0, 0}, DType::F64), from(std::vector<double>{3, 4}, DType::F64), s, true); }),
            "can't solve for singular matrix");

  // Nx 0.7's eigh of [[2, 1], [1, 2]]: eigenvalues 3 and 1, eigenvectors of A V = V diag(values),
  // as near as its stopping rule gets (Q moving by at most eps = 1e-4; the Elixir tests compare
  // its bits with Nx.BinaryBackend's); a matrix that is not symmetric raises Nx 0.7's message
  accel::LinalgPlan e;
  e.m = e.n = 2, e.eps = 1e-4, e.iterations = 1000;
  const std::vector<Tensor> eig = accel::tensor_decompose(accel::LinalgOp::EighNx07, from(std::vector<double>{2, 1, 1, 2}, DType::F64), e);
  const std::vector<double> values = read<double>(eig[0]), vectors = read<double>(eig[1]);
  EXPECT_NEAR(values[0], 3, 1e-4);
  EXPECT_NEAR(values[1], 1, 1e-4);
  for (size_t col = 0; col < 2; ++col)
    for (size_t row = 0; row < 2; ++row) {
      const double av = (row == 0 ? 2 * vectors[col] + vectors[2 + col] : vectors[col] + 2 * vectors[2 + col]);
      EXPECT_NEAR(av, values[col] * vectors[row * 2 + col], 1e-2);
    }
  EXPECT_EQ(argument_error([&] { accel::tensor_decompose(accel::LinalgOp::EighNx07, from(std::vector<double>{1, 2, 3, 4}, DType::F64), e); }),
            "matrix must be hermitian, a matrix is hermitian iff X = adjoint(X)");

  // plans that do not match their tensors, and integer tensors, are refused
  plan.m = plan.n = 3;
  EXPECT_NE(argument_error([&] { accel::tensor_decompose(accel::LinalgOp::QR, from(a, DType::F64), plan); }), "");
  plan.m = 2, plan.n = 3, plan.batch = 1;
  EXPECT_NE(argument_error([&] { accel::tensor_decompose(accel::LinalgOp::Cholesky, from(a, DType::F64), plan); }), "");
  plan.m = 3, plan.n = 2;
  EXPECT_NE(argument_error([&] { accel::tensor_decompose(accel::LinalgOp::QR, from(std::vector<int64_t>(6, 1), DType::S64), plan); }), "");
  s.b_cols = 3;
  EXPECT_NE(argument_error([&] { accel::tensor_solve(from(std::vector<double>{2, 1, 0, 4}, DType::F64), from(std::vector<double>{3, 4}, DType::F64), s, true); }), "");
}

TEST(TensorTypes, F64OnADeviceWithoutDoublesIsRefusedWithTheReason) {
  NoDoublesBackend backend;
  try {
    accel::tensor_iota(backend, 0, DType::F64, 4);
    ADD_FAILURE() << "an f64 tensor was allocated on a device without doubles";
  } catch (const accel::ArgumentError& e) {
    EXPECT_STREQ(e.what(), "type :f64 is not supported on :opencl device 0 (it has no double precision); use :f32");
  }
}

INSTANTIATE_TEST_SUITE_P(EveryBackend, TensorTest, ::testing::Values("cpu", "opencl", "cuda"),
                         [](const auto& info) { return info.param; });

}  // namespace
