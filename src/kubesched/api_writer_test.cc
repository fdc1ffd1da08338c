#include "kubesched/api_writer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace tessera::kubesched {
namespace {

TEST(ApiWriter, LaterTasksWaitWhileFirstTasksAreQueued) {
  ApiWriter w(1);
  absl::Notification go;
  absl::Mutex mu;
  std::vector<std::string> order;
  auto note = [&](std::string what) {
    absl::MutexLock l(&mu);
    order.push_back(std::move(what));
  };
  // The one writer is busy until `go`, so everything below queues.
  w.Post([&] { go.WaitForNotification(); });
  w.Post([&] { note("event 1"); }, ApiWriter::Lane::kLater);
  w.Post([&] { note("binding 1"); });
  w.Post([&] { note("event 2"); }, ApiWriter::Lane::kLater);
  w.Post([&] { note("binding 2"); });
  EXPECT_EQ(w.pending(), 5);
  go.Notify();
  ASSERT_TRUE(w.WaitIdle(absl::Seconds(30)));
  absl::MutexLock l(&mu);
  EXPECT_EQ(order, (std::vector<std::string>{"binding 1", "binding 2", "event 1", "event 2"}));
}

TEST(ApiWriter, CloseRunsBothLanes) {
  ApiWriter w(2);
  absl::Mutex mu;
  int ran = 0;
  for (int i = 0; i < 10; ++i) {
    w.Post(
        [&] {
          absl::MutexLock l(&mu);
          ++ran;
        },
        i % 2 == 0 ? ApiWriter::Lane::kFirst : ApiWriter::Lane::kLater);
  }
  w.Close();
  w.Post([&] {
    absl::MutexLock l(&mu);
    ++ran;
  });  // dropped: posted after Close
  absl::MutexLock l(&mu);
  EXPECT_EQ(ran, 10);
  EXPECT_EQ(w.pending(), 0);
}

}  // namespace
}  // namespace tessera::kubesched
