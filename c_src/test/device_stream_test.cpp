// The streamed-call loop above the launch door (core/device_stream.hpp), on a simulated device:
// two in-order queues whose commands run only when finish() is called, as a real device's may, over
// the CPU backend's buffers and kernels. What a GPU run would show late (a result read before its
// queue finished, a third chunk in flight, a transfer outliving an error) shows here.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <functional>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "core/device_stream.hpp"
#include "core/source_kernel.hpp"

namespace {

using accel::Chunk;
using accel::DeviceBuffer;

class QueuedDevice final : public accel::Backend {
 public:
  explicit QueuedDevice(uint64_t max_alloc) {
    info_.backend = "queued";
    info_.memory = max_alloc * 8;
    info_.max_alloc = max_alloc;
    info_.compute_units = 1;
  }

  accel::BackendStatus status() override { return {"queued", true, true, "a simulated device"}; }
  std::vector<accel::DeviceInfo> devices() override { return {info_}; }
  const accel::DeviceInfo& info() const { return info_; }
  bool waits_on_device() const override { return true; }
  void logistic_map(const accel::Int64Source& in, unsigned char* out, const accel::LogisticMapPlan& plan,
                    const accel::CallOptions& options) override {
    accel::stream_logistic_map(*this, info_, in, out, plan, options);
  }

  std::shared_ptr<DeviceBuffer> allocate(int device, size_t bytes) override { return host_.allocate(device, bytes); }
  size_t queues(int) override { return 2; }
  void enqueue_upload(DeviceBuffer& dst, const void* src, size_t bytes, size_t queue) override {
    ++uploads_in_flight_[queue];
    max_in_flight_ = std::max(max_in_flight_, uploads_in_flight_[0] + uploads_in_flight_[1]);
    enqueue(queue, [=, &dst] { host_.enqueue_upload(dst, src, bytes, 0); });
  }
  void enqueue_download(const DeviceBuffer& src, void* dst, size_t bytes, size_t queue) override {
    max_chunks_in_flight_ = std::max(max_chunks_in_flight_, ++downloads_in_flight_);
    enqueue(queue, [=, &src] {
      host_.enqueue_download(src, dst, bytes, 0);
      --uploads_in_flight_[queue];
      --downloads_in_flight_;
    });
  }
  void launch(accel::Kernel kernel, int device, const accel_params& params, const accel::KernelBuffers& buffers,
              size_t work, const accel::Cancellation* cancel, size_t queue) override {
    ++launches_;
    enqueue(queue, [=] { host_.launch(kernel, device, params, buffers, work, cancel, 0); });
  }
  bool map_source(const accel::SourceKernel& kernel, const std::vector<const unsigned char*>& inputs, uint64_t n,
                  const std::vector<uint64_t>& scalars, unsigned char* out, const accel::CallOptions& options) override {
    return accel::stream_source_kernel(*this, info_, kernel, inputs, n, scalars, out, options);
  }
  void launch_source(const accel::SourceKernel& kernel, int device, uint64_t n,
                     const std::vector<const DeviceBuffer*>& buffers, const std::vector<uint64_t>& scalars,
                     const accel::Cancellation* cancel, size_t queue) override {
    ++launches_;
    enqueue(queue, [=, &kernel] { host_.launch_source(kernel, device, n, buffers, scalars, cancel, 0); });
  }
  void zero(DeviceBuffer& dst) override { host_.zero(dst); }
  void download(const DeviceBuffer& src, void* dst, size_t bytes) override { host_.download(src, dst, bytes); }
  void finish(int, size_t queue) override {
    ++finishes_;
    while (!pending_[queue].empty()) {
      auto command = std::move(pending_[queue].front());
      pending_[queue].pop_front();
      command();
    }
  }

  bool idle() const { return pending_[0].empty() && pending_[1].empty(); }
  size_t max_in_flight() const { return max_in_flight_; }
  size_t max_chunks_in_flight() const { return max_chunks_in_flight_; }  // by their downloads
  size_t launches() const { return launches_; }
  size_t finishes() const { return finishes_; }

 private:
  void enqueue(size_t queue, std::function<void()> command) {
    ASSERT_LT(queue, 2u);
    pending_[queue].push_back(std::move(command));
  }

  accel::cpu::CpuBackend host_{1};
  accel::DeviceInfo info_;
  std::deque<std::function<void()>> pending_[2];
  size_t uploads_in_flight_[2] = {0, 0};
  size_t max_in_flight_ = 0;
  size_t downloads_in_flight_ = 0, max_chunks_in_flight_ = 0;
  size_t launches_ = 0, finishes_ = 0;
};

std::vector<int64_t> expected(const accel::Int64Source& in, const accel::LogisticMapPlan& plan) {
  std::vector<int64_t> out(in.count);
  for (size_t i = 0; i < in.count; ++i) out[i] = accel::logistic_map_reference(in.at(i), plan);
  return out;
}

TEST(DeviceStream, EveryChunkingOfBytesAndRangesGivesTheReference) {
  const auto plan = accel::plan_logistic_map(6700417, 22, 10);
  std::vector<int64_t> xs(1000);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<int64_t>(i * 7919) - 4000;
  const auto bytes = accel::Int64Source::of_bytes(reinterpret_cast<const unsigned char*>(xs.data()), xs.size());
  const auto range = accel::Int64Source::of_range(-300, 7, 1000);
  for (const size_t chunk : {size_t{0}, size_t{1}, size_t{3}, size_t{7}, size_t{999}, size_t{1000}, size_t{5000}}) {
    for (const auto& in : {bytes, range}) {
      QueuedDevice device(64 * 8);  // its own limit: chunks of at most 64
      std::vector<int64_t> out(in.count, -1);
      accel::CallOptions options;
      options.chunk_elements = chunk;
      device.logistic_map(in, reinterpret_cast<unsigned char*>(out.data()), plan, options);
      EXPECT_EQ(out, expected(in, plan)) << "chunk " << chunk << (in.kind == bytes.kind ? " bytes" : " range");
      EXPECT_TRUE(device.idle());
      EXPECT_LE(device.max_in_flight(), 2u) << "chunk " << chunk;
    }
  }
}

TEST(DeviceStream, InPlaceWhenTheOutputIsTheInput) {
  const auto plan = accel::plan_logistic_map(61, 22, 3);
  std::vector<int64_t> xs(100);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<int64_t>(i) - 50;
  auto* data = reinterpret_cast<unsigned char*>(xs.data());
  const auto want = expected(accel::Int64Source::of_bytes(data, xs.size()), plan);
  QueuedDevice device(8 * 8);
  device.logistic_map(accel::Int64Source::of_bytes(data, xs.size()), data, plan, {});
  EXPECT_EQ(xs, want);
}

// Iterations past a launch's budget go in several launches, each finished before the next is
// queued: the cancellation's chance to stop a long call.
TEST(DeviceStream, LongCallsAreLaunchedInBoundedPieces) {
  const auto plan = accel::plan_logistic_map(61, 22, 5000);
  QueuedDevice device(1 << 20);
  const auto in = accel::Int64Source::of_range(1, 1, 10000);  // 10,000 x 5,000 exceeds one budget (2^24)
  std::vector<int64_t> out(in.count);
  device.logistic_map(in, reinterpret_cast<unsigned char*>(out.data()), plan, {});
  EXPECT_EQ(out, expected(in, plan));
  EXPECT_GT(device.launches(), 1u);
  EXPECT_GE(device.finishes(), device.launches());  // a wait after every launch but the last, and at the end
}

TEST(DeviceStream, ACancelledCallStopsAndLeavesNoCommandQueued) {
  const auto plan = accel::plan_logistic_map(61, 22, 1);
  QueuedDevice device(16 * 8);
  accel::Cancellation cancel;
  const auto in = accel::Int64Source::of_range(1, 1, 1000);
  std::vector<int64_t> out(in.count);
  accel::CallOptions options;
  options.cancel = &cancel;
  size_t launched = 0;
  try {
    accel::stream_in_place(device, device.info(), options, in.count, 8, nullptr,
                           reinterpret_cast<unsigned char*>(out.data()),
                           [&](DeviceBuffer& buffer, const Chunk& part, size_t queue) {
                             if (++launched == 3) cancel.cancel();  // as the caller dies mid-call
                             accel_params p = accel::logistic_map_params(plan, true, 1);
                             p.n = part.count;
                             p.count[2] = 1;
                             p.shape[0] = static_cast<uint64_t>(in.at(part.offset));
                             p.shape[1] = 1;
                             device.launch(accel::Kernel::accel_logistic_map, 0, p, {&buffer}, 2, nullptr, queue);
                           });
    FAIL() << "a cancelled call returned";
  } catch (const accel::Error& e) {
    EXPECT_EQ(e.reason(), "cancelled");
  }
  EXPECT_TRUE(device.idle());  // every queued transfer ran before the error left the call
  EXPECT_EQ(launched, 3u);
}

// A generated kernel's host form, as the CPU backend runs it: out[i] = 3 * x[i] + y[i], an element
// with x[i] < 0 flagged (its sentinel written, the flag raised), as Accel.Kernel's texts do.
void triple_add(void* const* b, const uint64_t*, uint64_t begin, uint64_t end) {
  auto* out = static_cast<int64_t*>(b[0]);
  auto* flag = static_cast<int32_t*>(b[1]);
  const auto* x = static_cast<const int64_t*>(b[2]);
  const auto* y = static_cast<const int64_t*>(b[3]);
  for (uint64_t i = begin; i < end; ++i) {
    const int64_t xi = x[i], yi = y[i];  // read before out[i] is written: out may be x's buffer
    if (xi < 0) *flag = 1;
    out[i] = xi < 0 ? INT64_MIN : 3 * xi + yi;
  }
}

accel::SourceKernel triple_add_kernel() {
  accel::SourceKernel k;
  k.key = "triple_add";
  k.input_types = {accel::DType::S64, accel::DType::S64};
  k.out_type = accel::DType::S64;
  k.host = triple_add;
  return k;
}

TEST(DeviceStream, GeneratedKernelsStreamHostInputsInEveryChunking) {
  std::vector<int64_t> xs(1000), ys(1000), want(1000);
  for (size_t i = 0; i < xs.size(); ++i) {
    xs[i] = static_cast<int64_t>(i * 7919 % 1000);
    ys[i] = static_cast<int64_t>(i) - 500;
    want[i] = 3 * xs[i] + ys[i];
  }
  const std::vector<const unsigned char*> inputs{reinterpret_cast<const unsigned char*>(xs.data()),
                                                 reinterpret_cast<const unsigned char*>(ys.data())};
  const accel::SourceKernel kernel = triple_add_kernel();
  for (const size_t chunk : {size_t{0}, size_t{1}, size_t{7}, size_t{999}, size_t{5000}}) {
    QueuedDevice device(64 * 16);  // a chunk's two s64 buffers (the output takes x's): 64 elements
    std::vector<int64_t> out(xs.size(), -1);
    accel::CallOptions options;
    options.chunk_elements = chunk;
    EXPECT_FALSE(device.map_source(kernel, inputs, xs.size(), {}, reinterpret_cast<unsigned char*>(out.data()), options));
    EXPECT_EQ(out, want) << "chunk " << chunk;
    EXPECT_TRUE(device.idle());
    EXPECT_LE(device.max_chunks_in_flight(), 2u) << "chunk " << chunk;
    EXPECT_GE(device.launches(), (xs.size() + 63) / 64);
  }
  // a flagged element in a late chunk: its sentinel, the others computed, the call flagged
  std::vector<int64_t> late = xs;
  late[900] = -1;
  const std::vector<const unsigned char*> flagged{reinterpret_cast<const unsigned char*>(late.data()), inputs[1]};
  QueuedDevice device(64 * 16);
  std::vector<int64_t> out(xs.size());
  EXPECT_TRUE(device.map_source(kernel, flagged, xs.size(), {}, reinterpret_cast<unsigned char*>(out.data()), {}));
  want[900] = INT64_MIN;
  EXPECT_EQ(out, want);
  EXPECT_EQ(late[900], -1);  // the caller's memory is only read
}

TEST(DeviceStream, AStreamedKernelIsRefusedWhereItCannotRunInOneLaunchAndStopsWhenCancelled) {
  std::vector<int64_t> xs(1000, 1);
  const std::vector<const unsigned char*> inputs{reinterpret_cast<const unsigned char*>(xs.data()),
                                                 reinterpret_cast<const unsigned char*>(xs.data())};
  std::vector<int64_t> out(xs.size());
  auto* data = reinterpret_cast<unsigned char*>(out.data());
  QueuedDevice device(64 * 16);
  accel::SourceKernel resumable = triple_add_kernel();
  resumable.resume_words = 2;
  EXPECT_THROW(device.map_source(resumable, inputs, xs.size(), {}, data, {}), accel::ArgumentError);
  EXPECT_THROW(device.map_source(triple_add_kernel(), {inputs[0]}, xs.size(), {}, data, {}), accel::ArgumentError);
  EXPECT_FALSE(device.map_source(triple_add_kernel(), inputs, 0, {}, data, {}));  // nothing to run
  accel::Cancellation cancel;
  cancel.cancel();
  accel::CallOptions options;
  options.cancel = &cancel;
  try {
    device.map_source(triple_add_kernel(), inputs, xs.size(), {}, data, options);
    FAIL() << "a cancelled call returned";
  } catch (const accel::Error& e) {
    EXPECT_EQ(e.reason(), "cancelled");
  }
  EXPECT_TRUE(device.idle());
}

}  // namespace
