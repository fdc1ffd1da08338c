// OtlpExporter: sends traces to an OpenTelemetry collector as OTLP/HTTP with
// the JSON encoding (POST {endpoint}/v1/traces, Content-Type
// application/json), following the OTLP spec's JSON mapping: resourceSpans ->
// scopeSpans -> spans; trace and span ids as lowercase hex (32 and 16
// digits); times as unix nanoseconds in decimal strings; int attributes as
// {"intValue":"<decimal string>"}; the resource carries service.name.
//
// Algorithm: Export() only appends the trace to a bounded in-memory queue
// (O(1), never blocks on the network) and returns false when the queue is
// full (the trace is dropped and counted). One worker thread takes up to
// max_batch traces at a time (when the batch is full or flush_interval has
// passed), assigns trace and span ids, encodes one request and posts it. A
// failed post (collector down, non-2xx) drops the batch and counts its spans:
// traces are diagnostics, and a retry backlog would only grow while the
// collector is away.
//
// Metrics (when a Registry is given): tessera_otlp_spans_exported_total,
// tessera_otlp_spans_dropped_total{reason=queue_full|export_failed},
// tessera_otlp_export_requests_total{result=ok|error}.
//
// Thread safety: Export/Flush from any thread. The destructor flushes what
// is queued (one attempt each) and joins the worker.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "metrics/registry.h"

namespace tessera::obs {

struct SpanAttribute {
  std::string key;
  std::variant<std::string, int64_t, double, bool> value;
};

struct SpanRecord {
  std::string name;
  absl::Time start;
  absl::Time end;
  int parent = -1;  // index of the parent span in the trace; -1: the root
  std::vector<SpanAttribute> attributes;
  bool error = false;  // OTLP status code ERROR (2), else UNSET
  std::string status_message;
};

// One trace: spans[0] is the root; parents come before their children.
using TraceRecord = std::vector<SpanRecord>;

struct OtlpExporterOptions {
  // http://HOST:PORT (the /v1/traces path is appended) or a full URL ending
  // in /v1/traces.
  std::string endpoint;
  std::string service_name = "tessera-server";
  std::string scope_name = "tessera.scheduler";
  size_t max_queue = 4096;  // traces waiting; more are dropped
  size_t max_batch = 256;   // traces per request
  absl::Duration flush_interval = absl::Seconds(1);
  absl::Duration timeout = absl::Seconds(2);  // connect and read, per request
  uint64_t seed = 1;                          // trace and span ids
  metrics::Registry* metrics = nullptr;       // borrowed; null: no metrics
};

// A trace with its ids assigned, ready to encode.
struct IdentifiedTrace {
  TraceRecord spans;
  std::string trace_id;               // 32 hex digits
  std::vector<std::string> span_ids;  // 16 hex digits each, parallel to spans
};

// The OTLP JSON request body (ExportTraceServiceRequest) for a batch.
std::string EncodeOtlpJson(const std::vector<IdentifiedTrace>& batch,
                           const std::string& service_name, const std::string& scope_name);

class OtlpExporter {
 public:
  // Validates the endpoint (field named in the error) and starts the worker.
  static absl::StatusOr<std::unique_ptr<OtlpExporter>> Create(OtlpExporterOptions options);
  ~OtlpExporter();
  OtlpExporter(const OtlpExporter&) = delete;
  OtlpExporter& operator=(const OtlpExporter&) = delete;

  // Queues one trace; false (dropped, counted) when the queue is full.
  bool Export(TraceRecord trace);
  // Blocks until every trace queued before the call was sent or dropped.
  void Flush();

  int64_t spans_exported() const;
  int64_t spans_dropped() const;

 private:
  OtlpExporter(OtlpExporterOptions options, std::string scheme_host_port, std::string path);
  void Run();
  void Send(std::vector<TraceRecord> batch);

  const OtlpExporterOptions options_;
  const std::string scheme_host_port_;
  const std::string path_;
  std::mt19937_64 rng_;  // worker thread only
  metrics::Family<metrics::Counter>* exported_ = nullptr;
  metrics::Family<metrics::Counter>* dropped_ = nullptr;
  metrics::Family<metrics::Counter>* requests_ = nullptr;

  mutable absl::Mutex mu_;
  std::deque<TraceRecord> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t enqueued_ ABSL_GUARDED_BY(mu_) = 0;  // traces ever accepted
  uint64_t done_ ABSL_GUARDED_BY(mu_) = 0;      // traces sent or dropped after acceptance
  int64_t spans_exported_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t spans_dropped_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread worker_;
};

}  // namespace tessera::obs
