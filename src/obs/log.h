// Structured logs: one line per event, through spdlog.
//
// Two formats. kText is for people ("2026-11-30T17:10:40.123456Z info
// controller: job bound job=train namespace=ml nodes=n1,n2"); kJson is for log
// pipelines: every line is one JSON object
//   {"ts":"2026-11-30T17:10:40.123456Z","level":"info","msg":"job bound",
//    "component":"controller","job":"train","namespace":"ml","nodes":"n1,n2"}
// Timestamps (UTC) and levels come from spdlog's pattern; the message and the
// fields are rendered here, so the JSON stays valid whatever they contain.
// Events about a job carry `job` and `namespace`, about a node `node`, so a
// log query can follow one object across components.
//
// A Logger is a cheap value (a shared spdlog logger, a format and a component
// name); WithComponent() derives one that writes to the same sink. There is no
// global logger: each process builds one and passes it down.
// Thread safety: Log() may be called from any thread (the sinks are the
// spdlog `_mt` kind).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace spdlog {
class logger;
}

namespace tessera::obs {

enum class LogFormat { kText, kJson };
enum class LogLevel { kDebug, kInfo, kWarn, kError };

// "text" | "json"; anything else is an error naming --log-format.
absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view s);

// One key/value of a log line. Numbers and booleans stay unquoted in JSON.
struct LogField {
  LogField(absl::string_view k, absl::string_view v) : key(k), value(v) {}
  LogField(absl::string_view k, const char* v) : key(k), value(v) {}
  LogField(absl::string_view k, const std::string& v) : key(k), value(v) {}
  // Debian's abseil has its own string_view, distinct from std::string_view.
  LogField(absl::string_view k, std::string_view v) : key(k), value(v) {}
  LogField(absl::string_view k, int64_t v) : key(k), value(std::to_string(v)), quoted(false) {}
  LogField(absl::string_view k, int v) : key(k), value(std::to_string(v)), quoted(false) {}
  LogField(absl::string_view k, uint64_t v) : key(k), value(std::to_string(v)), quoted(false) {}
  LogField(absl::string_view k, double v);
  LogField(absl::string_view k, bool v) : key(k), value(v ? "true" : "false"), quoted(false) {}

  std::string key;
  std::string value;
  bool quoted = true;
};

class Logger {
 public:
  // Text to stderr, no component: what code gets when nobody configured it.
  Logger();
  // Writes to stderr in `format`.
  static Logger Stderr(LogFormat format, std::string component = "");
  // Writes to `path` (appending), for tests and daemons without a terminal.
  static absl::StatusOr<Logger> File(const std::string& path, LogFormat format,
                                     std::string component = "");

  // Same sink and format, another component name.
  Logger WithComponent(std::string component) const;
  LogFormat format() const { return format_; }
  const std::string& component() const { return component_; }

  void Log(LogLevel level, absl::string_view msg, absl::Span<const LogField> fields = {}) const;
  void Debug(absl::string_view msg, absl::Span<const LogField> fields = {}) const {
    Log(LogLevel::kDebug, msg, fields);
  }
  void Info(absl::string_view msg, absl::Span<const LogField> fields = {}) const {
    Log(LogLevel::kInfo, msg, fields);
  }
  void Warn(absl::string_view msg, absl::Span<const LogField> fields = {}) const {
    Log(LogLevel::kWarn, msg, fields);
  }
  void Error(absl::string_view msg, absl::Span<const LogField> fields = {}) const {
    Log(LogLevel::kError, msg, fields);
  }

 private:
  Logger(std::shared_ptr<spdlog::logger> logger, LogFormat format, std::string component);

  std::shared_ptr<spdlog::logger> logger_;
  LogFormat format_ = LogFormat::kText;
  std::string component_;
};

// The message and fields of one line without timestamp and level, as Log()
// hands them to spdlog (exposed for tests). JSON: `"msg":...,"component":...`
// (the object's inner members); text: `component: msg k=v ...`.
std::string FormatLogBody(LogFormat format, absl::string_view component, absl::string_view msg,
                          absl::Span<const LogField> fields);

}  // namespace tessera::obs
