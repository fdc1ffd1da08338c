#include "obs/otlp_exporter.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace tessera::obs {
namespace {

using Json = nlohmann::json;

std::string UnixNanos(absl::Time t) { return absl::StrCat(absl::ToUnixNanos(t)); }

Json AttributeValue(const SpanAttribute& a) {
  return std::visit(
      [](const auto& v) -> Json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return {{"stringValue", v}};
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return {{"intValue", absl::StrCat(v)}};  // int64 is a string in OTLP JSON
        } else if constexpr (std::is_same_v<T, double>) {
          return {{"doubleValue", v}};
        } else {
          return {{"boolValue", v}};
        }
      },
      a.value);
}

Json Attributes(const std::vector<SpanAttribute>& attrs) {
  Json out = Json::array();
  for (const SpanAttribute& a : attrs)
    out.push_back({{"key", a.key}, {"value", AttributeValue(a)}});
  return out;
}

std::string Hex64(uint64_t v) { return absl::StrFormat("%016x", v); }

}  // namespace

std::string EncodeOtlpJson(const std::vector<IdentifiedTrace>& batch,
                           const std::string& service_name, const std::string& scope_name) {
  Json spans = Json::array();
  for (const IdentifiedTrace& t : batch) {
    for (size_t i = 0; i < t.spans.size(); ++i) {
      const SpanRecord& s = t.spans[i];
      Json span = {{"traceId", t.trace_id},
                   {"spanId", t.span_ids[i]},
                   {"name", s.name},
                   {"kind", 1},  // SPAN_KIND_INTERNAL
                   {"startTimeUnixNano", UnixNanos(s.start)},
                   {"endTimeUnixNano", UnixNanos(s.end)},
                   {"attributes", Attributes(s.attributes)}};
      if (s.parent >= 0 && static_cast<size_t>(s.parent) < t.span_ids.size()) {
        span["parentSpanId"] = t.span_ids[s.parent];
      }
      span["status"] = s.error ? Json{{"code", 2}, {"message", s.status_message}} : Json::object();
      spans.push_back(std::move(span));
    }
  }
  Json req = {
      {"resourceSpans",
       Json::array(
           {{{"resource",
              {{"attributes", Json::array({{{"key", "service.name"},
                                            {"value", {{"stringValue", service_name}}}}})}}},
             {"scopeSpans",
              Json::array({{{"scope", {{"name", scope_name}}}, {"spans", std::move(spans)}}})}}})}};
  return req.dump();
}

absl::StatusOr<std::unique_ptr<OtlpExporter>> OtlpExporter::Create(OtlpExporterOptions options) {
  const std::string& ep = options.endpoint;
  size_t scheme_end = ep.find("://");
  if (!absl::StartsWith(ep, "http://") && !absl::StartsWith(ep, "https://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--otlp-endpoint: expected http://HOST:PORT, got '", ep, "'"));
  }
  size_t path_start = ep.find('/', scheme_end + 3);
  std::string base = ep.substr(0, path_start);
  std::string path = path_start == std::string::npos ? "" : ep.substr(path_start);
  if (base.size() <= scheme_end + 3) {
    return absl::InvalidArgumentError(absl::StrCat("--otlp-endpoint: no host in '", ep, "'"));
  }
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (!absl::EndsWith(path, "/v1/traces")) path += "/v1/traces";
  if (options.max_queue == 0 || options.max_batch == 0) {
    return absl::InvalidArgumentError("otlp: max_queue and max_batch must be positive");
  }
  return std::unique_ptr<OtlpExporter>(new OtlpExporter(std::move(options), base, path));
}

OtlpExporter::OtlpExporter(OtlpExporterOptions options, std::string scheme_host_port,
                           std::string path)
    : options_(std::move(options)),
      scheme_host_port_(std::move(scheme_host_port)),
      path_(std::move(path)),
      rng_(options_.seed) {
  if (options_.metrics != nullptr) {
    metrics::Registry& r = *options_.metrics;
    exported_ = &r.AddCounter("tessera_otlp_spans_exported_total",
                              "Decision spans accepted by the OTLP collector.", {});
    dropped_ = &r.AddCounter("tessera_otlp_spans_dropped_total",
                             "Decision spans not exported, by reason (queue_full, export_failed).",
                             {"reason"});
    requests_ = &r.AddCounter("tessera_otlp_export_requests_total",
                              "OTLP/HTTP export requests, by result (ok, error).", {"result"});
    // Zero series up front: a rate() or an alert sees them before the first drop.
    exported_->With({});
    dropped_->With({"queue_full"});
    dropped_->With({"export_failed"});
  }
  worker_ = std::thread([this] { Run(); });
}

OtlpExporter::~OtlpExporter() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  worker_.join();
}

bool OtlpExporter::Export(TraceRecord trace) {
  if (trace.empty()) return true;
  absl::MutexLock l(&mu_);
  if (queue_.size() >= options_.max_queue || stop_) {
    // Counted in spans, like the export failures, so the two add up.
    spans_dropped_ += static_cast<int64_t>(trace.size());
    if (dropped_) dropped_->With({"queue_full"}).Inc(static_cast<double>(trace.size()));
    return false;
  }
  queue_.push_back(std::move(trace));
  ++enqueued_;
  return true;
}

void OtlpExporter::Flush() {
  absl::MutexLock l(&mu_);
  const uint64_t target = enqueued_;
  auto sent = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_ >= target; };
  mu_.Await(absl::Condition(&sent));
}

int64_t OtlpExporter::spans_exported() const {
  absl::MutexLock l(&mu_);
  return spans_exported_;
}

int64_t OtlpExporter::spans_dropped() const {
  absl::MutexLock l(&mu_);
  return spans_dropped_;
}

void OtlpExporter::Run() {
  for (;;) {
    std::vector<TraceRecord> batch;
    bool stopping = false;
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || queue_.size() >= options_.max_batch;
      };
      // Wait for a full batch, or send what is there when the interval ends.
      mu_.AwaitWithTimeout(absl::Condition(&ready), options_.flush_interval);
      stopping = stop_;
      while (!queue_.empty() && batch.size() < options_.max_batch) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      if (batch.empty() && stopping) return;
    }
    if (!batch.empty()) Send(std::move(batch));
  }
}

void OtlpExporter::Send(std::vector<TraceRecord> batch) {
  std::vector<IdentifiedTrace> ids;
  ids.reserve(batch.size());
  int64_t spans = 0;
  for (TraceRecord& t : batch) {
    IdentifiedTrace it;
    uint64_t hi = rng_(), lo = rng_();
    if (hi == 0 && lo == 0) lo = 1;  // the all-zero id is invalid
    it.trace_id = Hex64(hi) + Hex64(lo);
    for (size_t i = 0; i < t.size(); ++i) {
      uint64_t s = rng_();
      it.span_ids.push_back(Hex64(s == 0 ? 1 : s));
    }
    spans += static_cast<int64_t>(t.size());
    it.spans = std::move(t);
    ids.push_back(std::move(it));
  }
  const std::string body = EncodeOtlpJson(ids, options_.service_name, options_.scope_name);
  httplib::Client client(scheme_host_port_);
  const int64_t timeout_us = absl::ToInt64Microseconds(options_.timeout);
  client.set_connection_timeout(0, timeout_us);
  client.set_read_timeout(0, timeout_us);
  client.set_write_timeout(0, timeout_us);
  httplib::Result r = client.Post(path_, body, "application/json");
  const bool ok = r && r->status >= 200 && r->status < 300;
  absl::MutexLock l(&mu_);
  if (ok) {
    spans_exported_ += spans;
    if (exported_) exported_->With({}).Inc(static_cast<double>(spans));
  } else {
    spans_dropped_ += spans;
    if (dropped_) dropped_->With({"export_failed"}).Inc(static_cast<double>(spans));
  }
  if (requests_) requests_->With({ok ? "ok" : "error"}).Inc();
  done_ += batch.size();
}

}  // namespace tessera::obs
