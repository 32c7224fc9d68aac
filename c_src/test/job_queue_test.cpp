// JobQueue: submission order on one thread that is not the caller's, the bound on places, waiters
// told when a place frees, and destruction with jobs still queued.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/job_queue.hpp"

namespace {

using accel::JobQueue;

struct FnJob : JobQueue::Job {
  explicit FnJob(std::function<void()> f, std::atomic<int>* destroyed = nullptr) : f(std::move(f)), destroyed(destroyed) {}
  ~FnJob() override {
    if (destroyed != nullptr) destroyed->fetch_add(1);
  }
  void run() noexcept override { f(); }
  std::function<void()> f;
  std::atomic<int>* destroyed;
};

void submit(JobQueue& q, std::function<void()> f) {
  JobQueue::Ticket t = q.reserve([] {});
  ASSERT_TRUE(t) << "the queue was full";
  q.submit(std::move(t), std::make_unique<FnJob>(std::move(f)));
}

TEST(JobQueue, RunsJobsInSubmissionOrderOnItsOwnThread) {
  JobQueue q(1000);
  std::mutex m;
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  std::promise<void> done;
  for (int i = 0; i < 500; ++i)
    submit(q, [&, i] {
      std::lock_guard<std::mutex> lock(m);
      order.push_back(i);
      threads.push_back(std::this_thread::get_id());
      if (i == 499) done.set_value();
    });
  done.get_future().wait();
  ASSERT_EQ(order.size(), 500u);
  for (int i = 0; i < 500; ++i) EXPECT_EQ(order[i], i);
  for (auto id : threads) {
    EXPECT_EQ(id, threads[0]);  // one thread serves the queue
    EXPECT_NE(id, std::this_thread::get_id());
  }
}

TEST(JobQueue, AFullQueueRefusesAndTellsEveryWaiterWhenAPlaceFrees) {
  JobQueue q(2);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  submit(q, [gate] { gate.wait(); });  // running, blocked
  JobQueue::Ticket held = q.reserve([] {});
  ASSERT_TRUE(held);
  EXPECT_EQ(q.in_use(), 2u);

  std::atomic<int> told{0};
  EXPECT_FALSE(q.reserve([&] { told.fetch_add(1); }));
  EXPECT_FALSE(q.reserve([&] { told.fetch_add(1); }));
  EXPECT_EQ(told.load(), 0);

  { JobQueue::Ticket dropped = std::move(held); }  // an unused ticket gives its place back
  EXPECT_EQ(told.load(), 2);
  EXPECT_EQ(q.in_use(), 1u);

  std::atomic<int> told_again{0};
  JobQueue::Ticket again = q.reserve([] {});
  ASSERT_TRUE(again);
  EXPECT_FALSE(q.reserve([&] { told_again.fetch_add(1); }));
  release.set_value();  // the running job ends and gives its place back
  for (int i = 0; i < 2000 && told_again.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(told_again.load(), 1);
}

TEST(JobQueue, DestructionFinishesTheRunningJobAndDropsTheQueuedOnes) {
  std::atomic<int> ran{0}, destroyed{0};
  std::promise<void> started;
  {
    JobQueue q(10);
    JobQueue::Ticket t = q.reserve([] {});
    q.submit(std::move(t), std::make_unique<FnJob>(
                               [&] {
                                 started.set_value();
                                 std::this_thread::sleep_for(std::chrono::milliseconds(50));
                                 ran.fetch_add(1);
                               },
                               &destroyed));
    started.get_future().wait();
    for (int i = 0; i < 5; ++i) {
      JobQueue::Ticket u = q.reserve([] {});
      q.submit(std::move(u), std::make_unique<FnJob>([&] { ran.fetch_add(1); }, &destroyed));
    }
  }
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(destroyed.load(), 6);
}

TEST(JobQueue, ALongJobLetsTheJobsQueuedBehindItRunInItsPauses) {
  JobQueue q(10);
  std::mutex m;
  std::vector<std::string> order;
  auto log = [&](std::string what) {
    std::lock_guard<std::mutex> lock(m);
    order.push_back(std::move(what));
  };
  std::promise<void> started, queued, done;
  std::shared_future<void> behind = queued.get_future().share();
  submit(q, [&] {
    log("long: step 1");
    started.set_value();
    behind.wait();
    JobQueue::serve_waiting();  // runs the two queued now, not the one they queue
    log("long: step 2");
  });
  started.get_future().wait();
  submit(q, [&] {
    log("short 1");
    submit(q, [&] {
      log("later");
      done.set_value();
    });
  });
  submit(q, [&] { log("short 2"); });
  queued.set_value();
  done.get_future().wait();
  EXPECT_EQ(order, (std::vector<std::string>{"long: step 1", "short 1", "short 2", "long: step 2", "later"}));
  JobQueue::serve_waiting();  // not on a queue's thread: nothing happens
}

}  // namespace
