#include "metrics/registry.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::metrics {

void Counter::Inc(double v) {
  if (v < 0) return;  // counters never go down
  double cur = value_.load(std::memory_order_relaxed);
  while (!value_.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed)) {
  }
}

void Gauge::Add(double v) {
  double cur = value_.load(std::memory_order_relaxed);
  while (!value_.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed)) {
  }
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {
  std::sort(bounds_.begin(), bounds_.end());
  counts_.assign(bounds_.size() + 1, 0);
}

void Histogram::Observe(double v) {
  size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  absl::MutexLock l(&mu_);
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::Snapshot(std::vector<uint64_t>* cumulative, double* sum, uint64_t* count) const {
  absl::MutexLock l(&mu_);
  cumulative->resize(counts_.size());
  uint64_t run = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    run += counts_[i];
    (*cumulative)[i] = run;
  }
  *sum = sum_;
  *count = count_;
}

std::vector<double> ExponentialBuckets(double start, double factor, int n) {
  std::vector<double> b;
  for (int i = 0; i < n; ++i, start *= factor) b.push_back(start);
  return b;
}

template <typename M>
M& Family<M>::With(const LabelValues& values) {
  LabelValues v = values;
  v.resize(labels_.size());
  absl::MutexLock l(&mu_);
  auto it = children_.find(v);
  if (it == children_.end()) {
    std::unique_ptr<M> m;
    if constexpr (std::is_same_v<M, Histogram>) {
      m = std::make_unique<Histogram>(bounds_);
    } else {
      m = std::make_unique<M>();
    }
    it = children_.emplace(std::move(v), std::move(m)).first;
  }
  return *it->second;
}

template <typename M>
void Family<M>::Clear() {
  absl::MutexLock l(&mu_);
  children_.clear();
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

std::string EscapeLabel(absl::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

namespace {

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.9g", v);
}

std::string Labels(const std::vector<std::string>& names, const LabelValues& values,
                   absl::string_view extra_name = "", absl::string_view extra_value = "") {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) {
    absl::StrAppend(&s, s.empty() ? "" : ",", names[i], "=\"", EscapeLabel(values[i]), "\"");
  }
  if (!extra_name.empty()) {
    absl::StrAppend(&s, s.empty() ? "" : ",", extra_name, "=\"", extra_value, "\"");
  }
  return s.empty() ? s : absl::StrCat("{", s, "}");
}

template <typename M>
void Header(std::string* out, const Family<M>& f, absl::string_view type) {
  absl::StrAppend(out, "# HELP ", f.name(), " ", f.help(), "\n# TYPE ", f.name(), " ", type, "\n");
}

}  // namespace

Family<Counter>& Registry::AddCounter(std::string name, std::string help,
                                      std::vector<std::string> labels) {
  absl::MutexLock l(&mu_);
  counters_.push_back(
      std::make_unique<Family<Counter>>(std::move(name), std::move(help), std::move(labels)));
  order_.push_back({0, counters_.size() - 1});
  // A counter without labels exists from the start at 0, so rate() and alerts see it before
  // its first event (a labelled one cannot: its label values are not known yet).
  if (counters_.back()->labels().empty()) counters_.back()->With({});
  return *counters_.back();
}

Family<Gauge>& Registry::AddGauge(std::string name, std::string help,
                                  std::vector<std::string> labels) {
  absl::MutexLock l(&mu_);
  gauges_.push_back(
      std::make_unique<Family<Gauge>>(std::move(name), std::move(help), std::move(labels)));
  order_.push_back({1, gauges_.size() - 1});
  return *gauges_.back();
}

Family<Histogram>& Registry::AddHistogram(std::string name, std::string help,
                                          std::vector<std::string> labels,
                                          std::vector<double> bounds) {
  absl::MutexLock l(&mu_);
  histograms_.push_back(std::make_unique<Family<Histogram>>(std::move(name), std::move(help),
                                                            std::move(labels), std::move(bounds)));
  order_.push_back({2, histograms_.size() - 1});
  if (histograms_.back()->labels().empty()) histograms_.back()->With({});
  return *histograms_.back();
}

std::string Registry::Render() const {
  absl::MutexLock l(&mu_);
  std::string out;
  for (auto [kind, i] : order_) {
    if (kind == 0) {
      const auto& f = *counters_[i];
      Header(&out, f, "counter");
      f.ForEach([&](const LabelValues& v, const Counter& c) {
        absl::StrAppend(&out, f.name(), Labels(f.labels(), v), " ", FormatValue(c.value()), "\n");
      });
    } else if (kind == 1) {
      const auto& f = *gauges_[i];
      Header(&out, f, "gauge");
      f.ForEach([&](const LabelValues& v, const Gauge& g) {
        absl::StrAppend(&out, f.name(), Labels(f.labels(), v), " ", FormatValue(g.value()), "\n");
      });
    } else {
      const auto& f = *histograms_[i];
      Header(&out, f, "histogram");
      f.ForEach([&](const LabelValues& v, const Histogram& h) {
        std::vector<uint64_t> cum;
        double sum;
        uint64_t count;
        h.Snapshot(&cum, &sum, &count);
        for (size_t b = 0; b < cum.size(); ++b) {
          std::string le = b < h.bounds().size() ? FormatValue(h.bounds()[b]) : "+Inf";
          absl::StrAppend(&out, f.name(), "_bucket", Labels(f.labels(), v, "le", le), " ", cum[b],
                          "\n");
        }
        absl::StrAppend(&out, f.name(), "_sum", Labels(f.labels(), v), " ", FormatValue(sum), "\n");
        absl::StrAppend(&out, f.name(), "_count", Labels(f.labels(), v), " ", count, "\n");
      });
    }
  }
  return out;
}

}  // namespace tessera::metrics
