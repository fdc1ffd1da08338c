// ElasticPool: threads for ApiServer's work that waits (watch streams, the dashboard's fleet
// long-polls, heartbeats waiting for their write's fsync), next to the event-driven front end's
// fixed workers (http/event_server.h), so that such waits never take a worker. It keeps
// `min_threads` and starts another thread whenever a task arrives and no thread is idle, up to
// `max_threads` (beyond that tasks queue); threads above `min_threads` exit after `idle_exit`
// without work. Threads get `stack_bytes` stacks. (It was the request pool of the
// thread-per-connection server, which is why it is a cpp-httplib TaskQueue.)
//
// Thread safety: enqueue from any thread; shutdown once (joins every thread).
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>

#include "absl/time/time.h"

namespace tessera::server {

struct ElasticPoolOptions {
  int min_threads = 8;
  int max_threads = 20000;
  size_t stack_bytes = 1 << 20;
  absl::Duration idle_exit = absl::Seconds(60);
};

class ElasticPool final : public httplib::TaskQueue {
 public:
  explicit ElasticPool(ElasticPoolOptions options);
  ~ElasticPool() override;

  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

  int threads() const;
  int peak_threads() const;

 private:
  static void* Main(void* self);
  void Work();
  bool Spawn();  // mu_ held

  const ElasticPoolOptions options_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable exit_cv_;
  std::deque<std::function<void()>> jobs_;
  int threads_ = 0;
  int idle_ = 0;
  int peak_ = 0;
  bool shutdown_ = false;
};

}  // namespace tessera::server
