// Staged transfers over a fake copy engine: each slot's copy runs later, on a thread of its own,
// so a slot refilled before its copy ended, or read before it arrived, shows as wrong bytes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <algorithm>
#include <cstdint>
#include <future>
#include <thread>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "core/staging.hpp"
#include "test/every_backend.hpp"

namespace {

class Memory final : public accel::DeviceBuffer {
 public:
  explicit Memory(size_t bytes) : DeviceBuffer(bytes, 0), data(bytes) {}
  std::vector<unsigned char> data;
};

class SlowEngine final : public accel::StagingPort {
 public:
  SlowEngine(size_t slots, size_t bytes)
      : StagingPort(bytes), slots_(slots, std::vector<unsigned char>(bytes)), pending_(slots) {
    for (auto& s : slots_) slot.push_back(s.data());
  }

  void to_device(size_t i, accel::DeviceBuffer& dst, size_t offset, size_t bytes, size_t) override {
    pending_[i] = later([this, i, &dst, offset, bytes] {
      std::memcpy(static_cast<Memory&>(dst).data.data() + offset, slots_[i].data(), bytes);
    });
  }
  void from_device(size_t i, const accel::DeviceBuffer& src, size_t offset, size_t bytes, size_t) override {
    pending_[i] = later([this, i, &src, offset, bytes] {
      std::memcpy(slots_[i].data(), static_cast<const Memory&>(src).data.data() + offset, bytes);
    });
  }
  void wait(size_t i) override {
    if (pending_[i].valid()) pending_[i].get();
    ++waits;
  }

  size_t waits = 0;

 private:
  template <typename F>
  static std::future<void> later(F copy) {
    return std::async(std::launch::async, [copy] {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      copy();
    });
  }

  std::vector<std::vector<unsigned char>> slots_;
  std::vector<std::future<void>> pending_;
};

std::vector<unsigned char> pattern(size_t bytes, unsigned seed) {
  std::vector<unsigned char> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<unsigned char>((i * 131 + seed) >> 3);
  return v;
}

}  // namespace

TEST(Staging, UploadsEveryPieceThroughTheSlots) {
  // sizes below, at and around a multiple of the slot, over one slot and over three
  for (size_t slots : {1, 3}) {
    for (size_t bytes : {size_t{1}, size_t{4096}, size_t{4097}, size_t{5 * 4096 + 17}, size_t{40 * 4096}}) {
      SlowEngine engine(slots, 4096);
      const std::vector<unsigned char> host = pattern(bytes, static_cast<unsigned>(bytes));
      Memory device(bytes);
      accel::staged_upload(engine, device, host.data(), bytes, 0);
      for (size_t s = 0; s < slots; ++s) engine.wait(s);  // the queue's later commands see them
      EXPECT_EQ(device.data, host) << bytes << " bytes over " << slots << " slots";
    }
  }
}

TEST(Staging, DownloadsEveryPieceThroughTheSlots) {
  for (size_t slots : {1, 3}) {
    for (size_t bytes : {size_t{1}, size_t{4096}, size_t{4097}, size_t{5 * 4096 + 17}, size_t{40 * 4096}}) {
      SlowEngine engine(slots, 4096);
      Memory device(bytes);
      device.data = pattern(bytes, 7);
      std::vector<unsigned char> host(bytes, 0);
      accel::staged_download(engine, device, host.data(), bytes, 0);
      // on return, with no wait of the caller's
      EXPECT_EQ(host, device.data) << bytes << " bytes over " << slots << " slots";
    }
  }
}

TEST(Staging, LargeHostCopiesAreExact) {
  // over the copy threads' grain, in uneven parts
  const size_t bytes = (size_t{9} << 20) + 12345;
  const std::vector<unsigned char> src = pattern(bytes, 3);
  std::vector<unsigned char> dst(bytes, 0);
  accel::copy_host(dst.data(), src.data(), bytes);
  EXPECT_EQ(dst, src);
}

TEST(Staging, StagesLargeUnpinnedTransfersOnGpusUnlessTurnedOff) {
  using accel::StagingMode;
  const size_t large = accel::kStagingMinBytes;
  EXPECT_TRUE(accel::stage(StagingMode::automatic, "gpu", false, large));
  EXPECT_FALSE(accel::stage(StagingMode::automatic, "gpu", true, large));  // pinned: straight
  EXPECT_FALSE(accel::stage(StagingMode::automatic, "gpu", false, large - 1));
  EXPECT_FALSE(accel::stage(StagingMode::automatic, "cpu", false, large));
  EXPECT_TRUE(accel::stage(StagingMode::always, "cpu", false, large));
  EXPECT_FALSE(accel::stage(StagingMode::never, "gpu", false, large));
}

// The device backends with staging forced on (PoCL is a CPU device, which automatic mode leaves
// alone): uploads, downloads and a streamed call through the real slots, pieces across several
// slots and a ragged last one, against the bytes and the CPU backend's results.
namespace {

class StagedBackend : public accel::test::EveryBackend {};

TEST_P(StagedBackend, TransfersAndStreamedCallsMatchTheHost) {
  backend_->set_staging(accel::StagingMode::always);
  const size_t bytes = (size_t{37} << 20) + 24;  // 4 slots of 8 MiB, then more: slots reused
  const std::vector<unsigned char> host = pattern(bytes, 11);
  auto buffer = backend_->allocate(0, bytes);
  backend_->upload(*buffer, host.data());
  std::vector<unsigned char> back(bytes, 0);
  backend_->download(*buffer, back.data(), bytes);
  EXPECT_EQ(back, host);

  // on the second queue, as a streamed call's chunk goes
  const std::vector<unsigned char> other = pattern(bytes, 12);
  backend_->enqueue_upload(*buffer, other.data(), bytes, 1);
  std::fill(back.begin(), back.end(), 0);
  backend_->enqueue_download(*buffer, back.data(), bytes, 1);
  backend_->finish(0, 1);
  EXPECT_EQ(back, other);

  const auto plan = accel::plan_logistic_map(6700417, 22, 10);
  const size_t n = bytes / 8;
  std::vector<int64_t> xs(n), want(n), got(n);
  for (size_t i = 0; i < n; ++i) xs[i] = static_cast<int64_t>(i * 7919 % 6700417);
  accel::cpu::CpuBackend cpu(2);
  const auto in = accel::Int64Source::of_bytes(reinterpret_cast<const unsigned char*>(xs.data()), n);
  cpu.logistic_map(in, reinterpret_cast<unsigned char*>(want.data()), plan, {});
  // in two chunks, one per queue
  backend_->logistic_map(in, reinterpret_cast<unsigned char*>(got.data()), plan, {0, n / 2 + 1, nullptr});
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(DeviceBackends, StagedBackend, ::testing::Values("opencl", "cuda"),
                         [](const auto& info) { return info.param; });

}  // namespace
