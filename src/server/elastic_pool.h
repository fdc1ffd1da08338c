// ElasticPool: the request thread pool of ApiServer. cpp-httplib serves each connection on one
// pool thread for the connection's whole life (keep-alive included), so a fixed pool of N threads
// serves at most N connections at once and queues the rest. Node agents hold one long-poll
// connection each (GET /api/v1/nodes/NAME/bindings, docs/agent.md), mostly asleep: with a fixed
// pool, 12,500 of them would starve every other request. This pool keeps `min_threads` and
// starts another thread whenever a task arrives and no thread is idle, up to `max_threads`
// (beyond that tasks queue); threads above `min_threads` exit after `idle_exit` without work.
// Threads get `stack_bytes` stacks (the default 8 MiB of address space each adds up at 12,500).
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
