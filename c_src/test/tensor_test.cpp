// The checked tensor operations (core/tensor.cpp) on every compiled backend, against the CPU
// backend's results and hand-computed values: counts, broadcasting, reductions in several passes,
// transpose, casts, matmul, and the checks that keep a bad call from touching memory it does not
// own. A backend that is not usable on this machine is skipped with its reason.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
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

const accel::Scalar kNone{};

TEST_P(TensorTest, ElementwiseWithBroadcastingAndScalars) {
  const Tensor m = from<int64_t>({1, 2, 3, 4, 5, 6}, DType::S64);
  const Tensor row = from<int64_t>({10, 20, 30}, DType::S64);
  EXPECT_EQ(read<int64_t>(accel::tensor_binary(accel::BinaryOp::Add, &m, kNone, &row, kNone)),
            (std::vector<int64_t>{11, 22, 33, 14, 25, 36}));
  accel::Scalar seven;
  seven.i = 7;
  EXPECT_EQ(read<int64_t>(accel::tensor_binary(accel::BinaryOp::Subtract, nullptr, seven, &m, kNone)),
            (std::vector<int64_t>{6, 5, 4, 3, 2, 1}));
  const Tensor f = from<float>({1.5f, -2.0f}, DType::F32);
  EXPECT_EQ(read<float>(accel::tensor_unary(accel::UnaryOp::Abs, f)), (std::vector<float>{1.5f, 2.0f}));
  const Tensor four = from<int64_t>({1, 2, 3, 4}, DType::S64);
  EXPECT_THROW(accel::tensor_binary(accel::BinaryOp::Add, &m, kNone, &four, kNone), accel::ArgumentError);
  EXPECT_THROW(accel::tensor_binary(accel::BinaryOp::Add, &m, kNone, &f, kNone), accel::ArgumentError);
  const Tensor zero = from<int64_t>({1, 0, 3, 4, 5, 6}, DType::S64);
  EXPECT_THROW(accel::tensor_binary(accel::BinaryOp::Divide, &m, kNone, &zero, kNone), accel::ArgumentError);
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
