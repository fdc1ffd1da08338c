#include "server/elastic_pool.h"

#include <pthread.h>

#include <chrono>
#include <iostream>

namespace tessera::server {

ElasticPool::ElasticPool(ElasticPoolOptions options) : options_(options) {
  std::lock_guard<std::mutex> l(mu_);
  for (int i = 0; i < options_.min_threads; ++i) Spawn();
}

ElasticPool::~ElasticPool() { shutdown(); }

bool ElasticPool::Spawn() {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, options_.stack_bytes);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  const bool ok = pthread_create(&t, &attr, &ElasticPool::Main, this) == 0;
  pthread_attr_destroy(&attr);
  if (ok) {
    ++threads_;
    ++idle_;  // counts as idle until it takes a job
    peak_ = std::max(peak_, threads_);
  }
  return ok;
}

void* ElasticPool::Main(void* self) {
  static_cast<ElasticPool*>(self)->Work();
  return nullptr;
}

void ElasticPool::enqueue(std::function<void()> fn) {
  std::lock_guard<std::mutex> l(mu_);
  jobs_.push_back(std::move(fn));
  // Every queued job needs its own idle thread: each may hold it for a long time.
  if (idle_ < static_cast<int>(jobs_.size()) && threads_ < options_.max_threads) Spawn();
  work_cv_.notify_one();
}

void ElasticPool::Work() {
  const auto idle_exit = absl::ToChronoMilliseconds(options_.idle_exit);
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    if (jobs_.empty() && !shutdown_) {
      if (!work_cv_.wait_for(l, idle_exit, [&] { return !jobs_.empty() || shutdown_; }) &&
          threads_ > options_.min_threads) {
        break;  // idle too long: give the thread back
      }
    }
    if (jobs_.empty()) {
      if (shutdown_) break;
      continue;
    }
    std::function<void()> fn = std::move(jobs_.front());
    jobs_.pop_front();
    --idle_;
    l.unlock();
    fn();
    fn = nullptr;
    l.lock();
    ++idle_;
  }
  --idle_;
  --threads_;
  exit_cv_.notify_all();
}

void ElasticPool::shutdown() {
  std::unique_lock<std::mutex> l(mu_);
  shutdown_ = true;
  work_cv_.notify_all();
  // Threads are detached; wait until the last one has left Work() (it touches no member after
  // its final notify, which happens under mu_).
  exit_cv_.wait(l, [&] { return threads_ == 0; });
}

int ElasticPool::threads() const {
  std::lock_guard<std::mutex> l(mu_);
  return threads_;
}

int ElasticPool::peak_threads() const {
  std::lock_guard<std::mutex> l(mu_);
  return peak_;
}

}  // namespace tessera::server
