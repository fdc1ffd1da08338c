// PluginStatus: the outcome of one plugin at one extension point.
//
// As in the Kubernetes scheduler framework, "does not fit" is an outcome, not
// an error: kUnschedulable (another node, or preemption, may help),
// kUnschedulableAndUnresolvable (no node will help, e.g. an unknown GPU model),
// kWait (Permit: hold the reservation). kError is a real failure (a bug or a
// broken invariant) and aborts the cycle.
#pragma once

#include <string>
#include <utility>

#include "absl/strings/string_view.h"

namespace tessera::sched {

class PluginStatus {
 public:
  enum class Code : uint8_t {
    kSuccess,
    kUnschedulable,
    kUnschedulableAndUnresolvable,
    kWait,
    kSkip,  // PreFilter/Score: this plugin has nothing to do for this job
    kError,
  };

  PluginStatus() = default;
  static PluginStatus Success() { return {}; }
  static PluginStatus Skip() { return PluginStatus(Code::kSkip, ""); }
  static PluginStatus Unschedulable(std::string reason) {
    return PluginStatus(Code::kUnschedulable, std::move(reason));
  }
  static PluginStatus Unresolvable(std::string reason) {
    return PluginStatus(Code::kUnschedulableAndUnresolvable, std::move(reason));
  }
  static PluginStatus Wait(std::string reason) {
    return PluginStatus(Code::kWait, std::move(reason));
  }
  static PluginStatus Error(std::string reason) {
    return PluginStatus(Code::kError, std::move(reason));
  }

  Code code() const { return code_; }
  bool ok() const { return code_ == Code::kSuccess; }
  bool skipped() const { return code_ == Code::kSkip; }
  bool rejected() const {
    return code_ == Code::kUnschedulable || code_ == Code::kUnschedulableAndUnresolvable;
  }
  const std::string& reason() const { return reason_; }
  // Name of the plugin that produced the status (filled in by the runner).
  const std::string& plugin() const { return plugin_; }
  PluginStatus& WithPlugin(absl::string_view p) {
    plugin_ = std::string(p);
    return *this;
  }

 private:
  PluginStatus(Code c, std::string reason) : code_(c), reason_(std::move(reason)) {}
  Code code_ = Code::kSuccess;
  std::string reason_;
  std::string plugin_;
};

}  // namespace tessera::sched
