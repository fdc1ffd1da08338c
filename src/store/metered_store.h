// MeteredStore: a Store decorator that counts operations and measures commit
// latency, to be exported as metrics. It wraps any Store and changes no
// semantics: every call is forwarded unchanged and its result returned as is.
//
// Ownership: does not own the wrapped Store or the Clock; both must outlive
// it. Thread safety: thread-safe (counters are atomics, the latency histogram
// is under a mutex), like the Store it wraps.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "store/store.h"

namespace tessera::store {

struct StoreMetrics {
  int64_t gets = 0, lists = 0, txns = 0, txn_ops = 0, events_calls = 0, waits = 0, compactions = 0;
  int64_t txn_errors = 0;  // failed Txns (CAS mismatches included)
  // Commit latency of Txn: count, sum and max, and a histogram whose bucket i
  // counts latencies <= kLatencyBucketsUs[i] (the last bucket is +inf).
  int64_t commit_count = 0;
  absl::Duration commit_latency_sum;
  absl::Duration commit_latency_max;
  static constexpr std::array<int64_t, 12> kLatencyBucketsUs = {
      50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 100000, 1000000, INT64_MAX};
  std::array<int64_t, 12> commit_latency_buckets{};

  // The latency below which `q` (0..1) of commits fell, at bucket resolution.
  absl::Duration CommitLatencyQuantile(double q) const {
    int64_t target = std::llround(q * static_cast<double>(commit_count)), seen = 0;
    for (size_t i = 0; i < kLatencyBucketsUs.size(); ++i) {
      seen += commit_latency_buckets[i];
      if (seen >= target && seen > 0) {
        return i + 1 == kLatencyBucketsUs.size() ? commit_latency_max
                                                 : absl::Microseconds(kLatencyBucketsUs[i]);
      }
    }
    return absl::ZeroDuration();
  }
};

// Adds `b`'s counts to `a` (two MeteredStores of one process, rendered as one: the API's and a
// replica's controller's, docs/control-plane.md "Replicas").
inline StoreMetrics& operator+=(StoreMetrics& a, const StoreMetrics& b) {
  a.gets += b.gets;
  a.lists += b.lists;
  a.txns += b.txns;
  a.txn_ops += b.txn_ops;
  a.events_calls += b.events_calls;
  a.waits += b.waits;
  a.compactions += b.compactions;
  a.txn_errors += b.txn_errors;
  a.commit_count += b.commit_count;
  a.commit_latency_sum += b.commit_latency_sum;
  a.commit_latency_max = std::max(a.commit_latency_max, b.commit_latency_max);
  for (size_t i = 0; i < a.commit_latency_buckets.size(); ++i) {
    a.commit_latency_buckets[i] += b.commit_latency_buckets[i];
  }
  return a;
}

// The metrics in Prometheus' text exposition format (tessera_store_*).
inline std::string FormatPrometheus(const StoreMetrics& m) {
  std::string out;
  auto counter = [&](const char* name, const char* help, int64_t v) {
    absl::StrAppend(&out, "# HELP tessera_store_", name, " ", help, "\n# TYPE tessera_store_", name,
                    " counter\ntessera_store_", name, " ", v, "\n");
  };
  counter("gets_total", "Store Get calls.", m.gets);
  counter("lists_total", "Store List calls.", m.lists);
  counter("txns_total", "Store transactions committed or attempted.", m.txns);
  counter("txn_ops_total", "Operations inside store transactions.", m.txn_ops);
  counter("txn_errors_total", "Store transactions that failed (CAS mismatch or I/O).",
          m.txn_errors);
  counter("events_calls_total", "Store Events (watch) calls.", m.events_calls);
  counter("compactions_total", "Store history compactions.", m.compactions);
  out += "# HELP tessera_store_commit_latency_seconds Time to commit one durable transaction.\n";
  out += "# TYPE tessera_store_commit_latency_seconds histogram\n";
  int64_t cumulative = 0;
  for (size_t i = 0; i < StoreMetrics::kLatencyBucketsUs.size(); ++i) {
    cumulative += m.commit_latency_buckets[i];
    std::string le = i + 1 == StoreMetrics::kLatencyBucketsUs.size()
                         ? "+Inf"
                         : absl::StrCat(StoreMetrics::kLatencyBucketsUs[i] / 1e6);
    absl::StrAppend(&out, "tessera_store_commit_latency_seconds_bucket{le=\"", le, "\"} ",
                    cumulative, "\n");
  }
  absl::StrAppend(&out, "tessera_store_commit_latency_seconds_sum ",
                  absl::ToDoubleSeconds(m.commit_latency_sum), "\n",
                  "tessera_store_commit_latency_seconds_count ", m.commit_count, "\n");
  return out;
}

class MeteredStore final : public Store {
 public:
  MeteredStore(Store& inner, Clock& clock) : inner_(inner), clock_(clock) {}

  absl::StatusOr<KeyValue> Get(std::string_view key) override {
    gets_.fetch_add(1, std::memory_order_relaxed);
    return inner_.Get(key);
  }
  absl::StatusOr<ListResult> List(std::string_view prefix, const ListOptions& options) override {
    lists_.fetch_add(1, std::memory_order_relaxed);
    return inner_.List(prefix, options);
  }
  size_t MaxTxnOps() const override { return inner_.MaxTxnOps(); }
  absl::StatusOr<int64_t> Txn(const std::vector<Op>& ops) override {
    txns_.fetch_add(1, std::memory_order_relaxed);
    txn_ops_.fetch_add(static_cast<int64_t>(ops.size()), std::memory_order_relaxed);
    absl::Time start = clock_.Now();
    absl::StatusOr<int64_t> r = inner_.Txn(ops);
    absl::Duration d = clock_.Now() - start;
    if (!r.ok()) txn_errors_.fetch_add(1, std::memory_order_relaxed);
    absl::MutexLock l(&mu_);
    m_.commit_count++;
    m_.commit_latency_sum += d;
    if (d > m_.commit_latency_max) m_.commit_latency_max = d;
    int64_t us = absl::ToInt64Microseconds(d);
    for (size_t i = 0; i < StoreMetrics::kLatencyBucketsUs.size(); ++i) {
      if (us <= StoreMetrics::kLatencyBucketsUs[i]) {
        m_.commit_latency_buckets[i]++;
        break;
      }
    }
    return r;
  }
  absl::StatusOr<EventsResult> Events(std::string_view prefix, int64_t since_revision,
                                      int64_t limit) override {
    events_.fetch_add(1, std::memory_order_relaxed);
    return inner_.Events(prefix, since_revision, limit);
  }
  absl::Status WaitForRevision(int64_t revision, absl::Time deadline) override {
    waits_.fetch_add(1, std::memory_order_relaxed);
    return inner_.WaitForRevision(revision, deadline);
  }
  int64_t CurrentRevision() override { return inner_.CurrentRevision(); }
  int64_t CompactedRevision() override { return inner_.CompactedRevision(); }
  absl::Status Compact(int64_t revision) override {
    compactions_.fetch_add(1, std::memory_order_relaxed);
    return inner_.Compact(revision);
  }

  // A consistent-enough snapshot of the counters (each counter is exact; they
  // are not read atomically together).
  StoreMetrics Metrics() {
    StoreMetrics out;
    {
      absl::MutexLock l(&mu_);
      out = m_;
    }
    out.gets = gets_.load();
    out.lists = lists_.load();
    out.txns = txns_.load();
    out.txn_ops = txn_ops_.load();
    out.txn_errors = txn_errors_.load();
    out.events_calls = events_.load();
    out.waits = waits_.load();
    out.compactions = compactions_.load();
    return out;
  }

 private:
  Store& inner_;
  Clock& clock_;
  std::atomic<int64_t> gets_{0}, lists_{0}, txns_{0}, txn_ops_{0}, txn_errors_{0}, events_{0},
      waits_{0}, compactions_{0};
  absl::Mutex mu_;
  StoreMetrics m_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::store
