// A small Prometheus metrics registry: counters, gauges and histograms with
// label sets, rendered in the text exposition format (version 0.0.4).
//
// Envoy's habit: each component declares its metrics once, in one struct
// built from a Registry (see server_metrics.h for the server's), and keeps
// pointers to them; the hot path then only touches atomics.
//
// Thread safety: every method is safe to call concurrently. Metric objects
// are owned by the Registry and live as long as it does.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace tessera::metrics {

// Label values in the order of the family's label names.
using LabelValues = std::vector<std::string>;

class Counter {
 public:
  void Inc(double v = 1.0);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double v);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);
  // Cumulative counts per bound (+Inf last), sum and count; a consistent copy.
  void Snapshot(std::vector<uint64_t>* cumulative, double* sum, uint64_t* count) const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  std::vector<uint64_t> counts_ ABSL_GUARDED_BY(mu_);  // per bucket, +Inf last
  double sum_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t count_ ABSL_GUARDED_BY(mu_) = 0;
};

// Exponential bucket bounds: start, start*factor, ... (n bounds).
std::vector<double> ExponentialBuckets(double start, double factor, int n);

template <typename M>
class Family {
 public:
  Family(std::string name, std::string help, std::vector<std::string> labels,
         std::vector<double> bounds = {})
      : name_(std::move(name)),
        help_(std::move(help)),
        labels_(std::move(labels)),
        bounds_(std::move(bounds)) {}
  // The metric for these label values, created on first use. The values'
  // count must equal the family's label count (checked; extra values are
  // dropped, missing ones are empty).
  M& With(const LabelValues& values);
  // Removes every child (a gauge family rebuilt from state each scrape).
  void Clear();

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& labels() const { return labels_; }
  // Calls f(values, metric) for every child, in label order.
  template <typename F>
  void ForEach(F&& f) const {
    absl::MutexLock l(&mu_);
    for (const auto& [v, m] : children_) f(v, *m);
  }

 private:
  std::string name_, help_;
  std::vector<std::string> labels_;
  std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  std::map<LabelValues, std::unique_ptr<M>> children_ ABSL_GUARDED_BY(mu_);
};

class Registry {
 public:
  Family<Counter>& AddCounter(std::string name, std::string help, std::vector<std::string> labels);
  Family<Gauge>& AddGauge(std::string name, std::string help, std::vector<std::string> labels);
  Family<Histogram>& AddHistogram(std::string name, std::string help,
                                  std::vector<std::string> labels, std::vector<double> bounds);
  // The text exposition format, families in registration order.
  std::string Render() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Family<Counter>>> counters_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Family<Gauge>>> gauges_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Family<Histogram>>> histograms_ ABSL_GUARDED_BY(mu_);
  // (kind, index) in registration order.
  std::vector<std::pair<int, size_t>> order_ ABSL_GUARDED_BY(mu_);
};

// Escapes a label value (backslash, double quote, newline).
std::string EscapeLabel(absl::string_view v);

}  // namespace tessera::metrics
