#include "obs/log.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spdlog/logger.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/basic_file_sink.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace tessera::obs {
namespace {

// JSON string escaping (RFC 8259): quote, backslash and control characters.
// Bytes >= 0x80 pass through; the messages are UTF-8 already.
void AppendJsonString(std::string* out, absl::string_view s) {
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

// Text values are quoted only when they would not read as one token.
void AppendTextValue(std::string* out, absl::string_view v) {
  bool plain = !v.empty();
  for (char c : v) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) || c == '"' || c == '=') plain = false;
  }
  if (plain) {
    out->append(v.data(), v.size());
  } else {
    AppendJsonString(out, v);
  }
}

std::shared_ptr<spdlog::logger> MakeLogger(spdlog::sink_ptr sink, LogFormat format) {
  // ts and level come from spdlog; %v is the body FormatLogBody renders.
  sink->set_formatter(std::make_unique<spdlog::pattern_formatter>(
      format == LogFormat::kJson ? R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l",%v})"
                                 : "%Y-%m-%dT%H:%M:%S.%fZ %l %v",
      spdlog::pattern_time_type::utc));
  // Not registered with spdlog's registry: no process-wide state.
  auto logger = std::make_shared<spdlog::logger>("tessera", std::move(sink));
  logger->set_level(spdlog::level::debug);
  logger->flush_on(spdlog::level::debug);  // a crash must not eat the last lines
  return logger;
}

spdlog::level::level_enum ToSpd(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarn:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
  }
  return spdlog::level::info;
}

}  // namespace

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view s) {
  if (s == "text") return LogFormat::kText;
  if (s == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat("--log-format: expected json or text, got '", s, "'"));
}

LogField::LogField(absl::string_view k, double v) : key(k), quoted(false) {
  // JSON has no NaN or infinities: those become strings.
  if (std::isfinite(v)) {
    value = absl::StrFormat("%.6g", v);
  } else {
    value = std::isnan(v) ? "NaN" : (v > 0 ? "+Inf" : "-Inf");
    quoted = true;
  }
}

std::string FormatLogBody(LogFormat format, absl::string_view component, absl::string_view msg,
                          absl::Span<const LogField> fields) {
  std::string out;
  if (format == LogFormat::kJson) {
    out.append("\"msg\":");
    AppendJsonString(&out, msg);
    if (!component.empty()) {
      out.append(",\"component\":");
      AppendJsonString(&out, component);
    }
    for (const LogField& f : fields) {
      // The fixed keys are the line's own; a field may not shadow them.
      if (f.key == "ts" || f.key == "level" || f.key == "msg" || f.key == "component") continue;
      out.push_back(',');
      AppendJsonString(&out, f.key);
      out.push_back(':');
      if (f.quoted) {
        AppendJsonString(&out, f.value);
      } else {
        out.append(f.value);
      }
    }
    return out;
  }
  if (!component.empty()) absl::StrAppend(&out, component, ": ");
  out.append(msg.data(), msg.size());
  for (const LogField& f : fields) {
    absl::StrAppend(&out, " ", f.key, "=");
    AppendTextValue(&out, f.value);
  }
  return out;
}

Logger::Logger() : Logger(Stderr(LogFormat::kText)) {}

Logger::Logger(std::shared_ptr<spdlog::logger> logger, LogFormat format, std::string component)
    : logger_(std::move(logger)), format_(format), component_(std::move(component)) {}

Logger Logger::Stderr(LogFormat format, std::string component) {
  return Logger(MakeLogger(std::make_shared<spdlog::sinks::stderr_sink_mt>(), format), format,
                std::move(component));
}

absl::StatusOr<Logger> Logger::File(const std::string& path, LogFormat format,
                                    std::string component) {
  try {
    return Logger(MakeLogger(std::make_shared<spdlog::sinks::basic_file_sink_mt>(path), format),
                  format, std::move(component));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("log file ", path, ": ", e.what()));
  }
}

Logger Logger::WithComponent(std::string component) const {
  return Logger(logger_, format_, std::move(component));
}

void Logger::Log(LogLevel level, absl::string_view msg, absl::Span<const LogField> fields) const {
  const std::string body = FormatLogBody(format_, component_, msg, fields);
  logger_->log(ToSpd(level), "{}", body);
}

}  // namespace tessera::obs
