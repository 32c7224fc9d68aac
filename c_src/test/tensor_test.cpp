// The checked tensor operations (core/tensor.cpp) on every compiled backend, against the CPU
// backend's results and hand-computed values: counts, broadcasting, reductions in several passes,
// transpose, casts, matmul, and the checks that keep a bad call from touching memory it does not
// own. A backend that is not usable on this machine is skipped with its reason.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
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
  for (DType type : {DType::F32, DType::F64, DType::S64, DType::S32, DType::U8}) {
    if (!backend_->supports(type, 0)) continue;
    std::vector<unsigned char> xs, ys;
    const size_t n = accel::is_float(type) ? floats.size() * floats.size() : ints.size() * ints.size();
    auto put = [&](std::vector<unsigned char>& v, double f, int64_t i) {
      unsigned char bytes[8];
      switch (type) {
        case DType::F32: { const float x = static_cast<float>(f); std::memcpy(bytes, &x, 4); break; }
        case DType::F64: std::memcpy(bytes, &f, 8); break;
        case DType::S64: std::memcpy(bytes, &i, 8); break;
        case DType::S32: { const int32_t x = static_cast<int32_t>(i); std::memcpy(bytes, &x, 4); break; }
        case DType::U8: bytes[0] = static_cast<unsigned char>(i); break;
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
      if (operation == accel::BinaryOp::divide || operation == accel::BinaryOp::quotient ||
          operation == accel::BinaryOp::remainder || operation == accel::BinaryOp::pow) {
        if (!accel::is_float(type)) continue;  // zero divisors and negative exponents: tested above
      }
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
  const Tensor by = from<int64_t>({63, 64, -1, 1, 70, -2}, DType::S64);
  EXPECT_EQ(read<int64_t>(accel::tensor_binary(accel::BinaryOp::left_shift, op(one, s), op(by, s))),
            (std::vector<int64_t>{INT64_MIN, 0, 0, -16, 0, -2}));
  EXPECT_EQ(read<int64_t>(accel::tensor_binary(accel::BinaryOp::right_shift, op(one, s), op(by, s))),
            (std::vector<int64_t>{0, 0, 2, -4, -1, -32}));
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
    EXPECT_EQ(read<float>(accel::tensor_matmul(a, b, 2, 3, 2)), (std::vector<float>{58, 64, 139, 154}));
  } catch (const accel::ArgumentError& e) {  // a build without this backend's BLAS says so
    EXPECT_NE(std::string(e.what()).find("needs"), std::string::npos) << e.what();
  }
  EXPECT_THROW(accel::tensor_matmul(a, b, 3, 3, 2), accel::ArgumentError);
  const Tensor ints = from<int64_t>({1, 2, 3, 4}, DType::S64);
  EXPECT_THROW(accel::tensor_matmul(ints, ints, 2, 2, 2), accel::ArgumentError);
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
